"""Start-up: what a user waits for on every command, beside the floor, in one run (issue #37).

    python benchmarks/bench_startup.py [--repeat 7] [--json results.json] [--before DIR]

Each row is a whole process, run `--repeat` times in interleaved rounds (best
wall time, the CPU time of that best run, and the median wall time), all in
one run so the ratios compare like with like on a shared machine:

| row | what the process does |
|---|---|
| python | `python -c pass`: the interpreter and site alone |
| floor | start Python, import the protobuf bindings (loaded from their file, as bench_backward's floor), parse LeNet's forward program, parse and serialise its output (the golden backward program) and write it |
| import numpy | `python -c "import numpy"`: what any import of NumPy costs |
| `pybackward --help` | the CLI's help |
| `pybackward show` | LeNet's listing |
| `pybackward append` | LeNet's backward section, written |
| `pybackward run` | one forward run of LeNet (kernels: NumPy and the families, for comparison) |
| before: ... | with `--before DIR`: `--help` and `append` of the checkout in DIR |

`--dot` adds the worst cases of `dot`'s folding of repeated layers
(`views/graph.repeated_runs`, which looks for layers up to 400 ops long): a
9,000-op program with no repeats (24 unary op types in a seeded random
order), one with a long period (a 375-op layer of the same types, 24 times)
and the 3,000-layer MLP (9,001 ops, period 3). For each, `pybackward dot`
as a whole process (and the `--before` checkout's), and `repeated_runs`
alone in process (best of 3, in a process of each checkout).

`--mlp` adds `append` on the 3,000-layer MLP (bench_backward's `build_fc_mlp`), beside its
own floor (the same process on its forward program and our output), and the
`--before` checkout's: there the end of the process counts too (the teardown
of ~200,000 objects that `main` skips).

`--before DIR` adds the `--help` and `append` rows of another checkout's
`pybackward/` and `cli/` (e.g. `git archive HEAD pybackward cli | tar -x -C
DIR`), run from DIR through PYTHONPATH in the same run: the before/after.

Targets (issue #37): `--help` <= 0.12 s, `append` <= 3x the floor. Bytecode is
compiled once before timing (into a temporary `PYTHONPYCACHEPREFIX`, so the
checkout is not touched): an installed package runs from its .pyc files.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LENET = ROOT / "testdata" / "models" / "lenet"
PB2 = ROOT / "pybackward" / "_proto" / "framework_pb2.py"

FLOOR = r"""
import importlib.util, os, sys, tempfile
spec = importlib.util.spec_from_file_location("framework_pb2", sys.argv[4])
pb = importlib.util.module_from_spec(spec); spec.loader.exec_module(pb)
src, out_model, dst = sys.argv[1], sys.argv[2], sys.argv[3]
d = pb.ProgramDesc(); d.ParseFromString(open(src, "rb").read())
o = pb.ProgramDesc(); o.ParseFromString(open(out_model, "rb").read())   # the stand-in output
data = o.SerializeToString()
fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dst))
with os.fdopen(fd, "wb") as f:
    f.write(data); f.flush(); os.fsync(f.fileno())
os.replace(tmp, dst)
"""

#: Runs argv as its only child and reports the child's wall and CPU time exactly.
WRAP = r"""
import json, resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": p.returncode, "wall": wall, "cpu": ru.ru_utime + ru.ru_stime,
                  "rss": ru.ru_maxrss, "err": p.stderr.decode()[-500:]}))
"""


def _env(cache: str) -> dict:
    env = dict(os.environ, PYTHONPYCACHEPREFIX=cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_once(argv: list[str], env: dict, ok=(0,)) -> dict:
    """One whole process: its wall and CPU time."""
    r = subprocess.run([sys.executable, "-c", WRAP, *argv], capture_output=True, text=True, env=env)
    res = json.loads(r.stdout.strip().splitlines()[-1])
    if res["rc"] not in ok:
        raise RuntimeError(f"{' '.join(argv)} exited {res['rc']}: {res['err']}")
    return res


def measure_all(rows: list[tuple[str, list[str], dict]], repeat: int) -> dict:
    """Each row `repeat` times, interleaved (row 1, row 2, ..., then again), so a
    load that comes and goes on a shared machine weighs on every row alike; per
    row the best wall time, that run's CPU time, and the median wall time. One
    warm-up round first (it compiles the bytecode)."""
    runs: dict[str, list[dict]] = {name: [] for name, _, _ in rows}
    for i in range(repeat + 1):
        for name, argv, env in rows:
            res = run_once(argv, env)
            if i:
                runs[name].append(res)
    out = {}
    for name, rs in runs.items():
        best = min(rs, key=lambda r: r["wall"])
        walls = sorted(r["wall"] for r in rs)
        out[name] = {"wall": best["wall"], "cpu": best["cpu"], "median": walls[len(walls) // 2], "walls": walls}
    return out


def cli() -> list[str]:
    return [sys.executable, "-m", "pybackward_cli.main"]


def before_env(env: dict, tree: str) -> dict:
    """`env` running the checkout in `tree` (its pybackward/ and cli/, as pybackward_cli)."""
    link = Path(tree) / "pybackward_cli"
    if not link.exists():
        link.symlink_to("cli")
    return dict(env, PYTHONPATH=tree)


UNARY = ["relu", "tanh", "sigmoid", "exp", "abs", "sqrt", "square", "log", "softsign", "softplus", "sin", "cos",
         "floor", "ceil", "round", "reciprocal", "rsqrt", "silu", "gelu", "elu", "selu", "relu6", "swish", "mish"]


def build_chain(n: int, period: int | None, seed: int = 7) -> bytes:
    """`n` unary ops in a chain; op types in a seeded random order (`period`: the first
    `period` types repeated), var scopes of 50 ops each (what `dot` collapses by)."""
    import random

    import pybackward
    rng = random.Random(seed)
    types = [rng.choice(UNARY) for _ in range(period or n)]
    prog = pybackward.Program()
    b = prog.global_block()
    b.create_var("x", [-1, 16], "float32", stop_gradient=True, need_check_feed=True)
    h = "x"
    for i in range(n):
        t = b.create_var(f"blk_{i // 50}.tmp_{i}", [-1, 16], "float32")
        b.append_op(types[i % len(types)], {"X": [h]}, {"Out": [t]}, {"op_role": 0})
        h = t.name
    return pybackward.dumps(prog)


#: In a process of one checkout: `repeated_runs` on block 0 of argv[1], best of 3 (CPU s).
FOLD_TIME = r"""
import json, sys, time
import pybackward
from pybackward.views.graph import repeated_runs
ops = pybackward.load(sys.argv[1]).global_block().ops
best, runs = 1e9, None
for _ in range(3):
    t = time.process_time(); runs = repeated_runs(ops); best = min(best, time.process_time() - t)
print(json.dumps({"cpu": best, "runs": [(r.start, r.period, r.count) for r in runs]}))
"""


def dot_cases(tmp: str) -> dict[str, str]:
    """The worst cases of the folding, and the MLP, written to `tmp`."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_backward import build_mlp
    out = {}
    for name, data in (("no repeats", build_chain(9000, None)), ("long period", build_chain(9000, 375)),
                       ("3,000-layer MLP", build_mlp(3000))):
        path = os.path.join(tmp, name.replace(" ", "_").replace(",", "") + ".pb")
        Path(path).write_bytes(data)
        out[name] = path
    return out


def fold_times(cases: dict[str, str], env: dict) -> dict[str, dict]:
    """`repeated_runs` alone, in a process of the checkout `env` runs."""
    res = {}
    for name, path in cases.items():
        r = subprocess.run([sys.executable, "-c", FOLD_TIME, path], capture_output=True, text=True, env=env)
        if r.returncode:
            raise RuntimeError(r.stderr[-500:])
        res[name] = json.loads(r.stdout.strip().splitlines()[-1])
    return res


def machine() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
            f"load {load:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--before", default=None, metavar="DIR",
                    help="a tree holding another version's pybackward/ and cli/: its --help and append too")
    ap.add_argument("--dot", action="store_true",
                    help="also `dot` on the folding's worst cases (no repeats, a long period) and the MLP")
    ap.add_argument("--mlp", action="store_true",
                    help="also `append` on the 3,000-layer MLP beside its floor (the end of the process "
                         "counts there: its teardown), and the --before tree's")
    args = ap.parse_args()
    before = os.path.abspath(args.before) if args.before else None
    tmp = tempfile.mkdtemp(prefix="bench_startup_")
    cwd = os.getcwd()
    # The children run in `tmp`: `python -m` puts the working directory first on sys.path, so from
    # the checkout it would shadow the --before tree's PYTHONPATH (its rows would run this pybackward).
    os.chdir(tmp)
    try:
        env = dict(_env(os.path.join(tmp, "pycache")), PYTHONPATH=str(ROOT))
        fwd, bwd = str(LENET / "forward.pb"), str(LENET / "backward.pb")
        out = os.path.join(tmp, "out.pb")
        rows = [
            ("python", [sys.executable, "-c", "pass"], env),
            ("floor", [sys.executable, "-c", FLOOR, fwd, bwd, os.path.join(tmp, "floor.pb"), str(PB2)], env),
            ("import numpy", [sys.executable, "-c", "import numpy"], env),
            ("pybackward --help", [*cli(), "--help"], env),
            ("pybackward show", [*cli(), "show", fwd], env),
            ("pybackward append", [*cli(), "append", "--loss", "mean_0.tmp_0", fwd, out], env),
            ("pybackward run", [*cli(), "run", fwd], env),
        ]
        if args.before:
            benv = before_env(env, before)
            rows += [("before: pybackward --help", [*cli(), "--help"], benv),
                     ("before: pybackward append",
                      [*cli(), "append", "--loss", "mean_0.tmp_0", fwd, out + ".before"], benv)]
        if args.mlp:
            sys.path.insert(0, str(ROOT / "benchmarks"))
            import bench_backward
            mlp = os.path.join(tmp, "mlp3000.pb")
            bench_backward.pybackward.save(bench_backward.build_fc_mlp(3000)[0], mlp)   # /tmp/mlp/in.pb of #37
            mlp_out = os.path.join(tmp, "mlp3000.out.pb")
            run_once([*cli(), "append", "--loss", "mean_0.tmp_0", mlp, mlp_out], env)     # the floor's stand-in
            rows += [("floor (MLP)", [sys.executable, "-c", FLOOR, mlp, mlp_out, os.path.join(tmp, "mlp.floor.pb"),
                                      str(PB2)], env),
                     ("pybackward append (MLP)", [*cli(), "append", "--loss", "mean_0.tmp_0", mlp,
                                                  mlp_out + ".after"], env)]
            if args.before:
                rows.append(("before: pybackward append (MLP)", [*cli(), "append", "--loss", "mean_0.tmp_0", mlp,
                                                                 mlp_out + ".before"], benv))
        folds: dict[str, dict] = {}
        if args.dot:
            cases = dot_cases(tmp)
            trees = [("after", "", env)] + ([("before", "before: ", benv)] if args.before else [])
            for tag, label, tenv in trees:
                rows += [(f"{label}pybackward dot ({name})", [*cli(), "dot", path, "-o", f"{path}.{tag}.dot"], tenv)
                         for name, path in cases.items()]
                folds[tag] = fold_times(cases, tenv)
        results = measure_all(rows, args.repeat)
        if args.dot and args.before:
            for path in cases.values():
                if Path(f"{path}.after.dot").read_bytes() != Path(f"{path}.before.dot").read_bytes():
                    raise RuntimeError(f"dot's output differs before and after on {path}")
        if Path(out).read_bytes() != Path(bwd).read_bytes():
            raise RuntimeError("append's output differs from testdata/models/lenet/backward.pb")
        if args.mlp and args.before and Path(mlp_out + ".after").read_bytes() != Path(mlp_out + ".before").read_bytes():
            raise RuntimeError("append's output on the MLP differs before and after")
    finally:
        os.chdir(cwd)
        shutil.rmtree(tmp, ignore_errors=True)
    floor = results["floor"]["wall"]
    floor_cpu = results["floor"]["cpu"]
    print(f"machine: {machine()}; best of {args.repeat} interleaved rounds (after a warm-up), whole process, LeNet")
    print("| process | wall s (best) | CPU s | wall s (median) | / floor (wall) | / floor (CPU) | target |")
    print("|---|---|---|---|---|---|---|")
    targets = {"pybackward --help": "<= 0.12 s", "pybackward append": "<= 3x floor"}
    for name, r in results.items():
        print(f"| {name} | {r['wall']:.3f} | {r['cpu']:.3f} | {r['median']:.3f} | {r['wall'] / floor:.2f}x | "
              f"{r['cpu'] / floor_cpu:.2f}x | {targets.get(name, '')} |")
    if args.mlp:
        mfloor = results["floor (MLP)"]
        print("\n3,000-layer MLP: / its floor (wall, CPU)")
        for name in [n for n in results if n.endswith("append (MLP)")]:
            r = results[name]
            print(f"| {name} | {r['wall'] / mfloor['wall']:.2f}x | {r['cpu'] / mfloor['cpu']:.2f}x |")
    ok_help = results["pybackward --help"]["wall"] <= 0.12
    ok_append = results["pybackward append"]["wall"] <= 3 * floor
    if folds:
        print("\n`repeated_runs` alone, CPU s (best of 3)")
        print("| program | " + " | ".join(folds) + " | runs found |")
        print("|---|" + "---|" * len(folds) + "---|")
        for name in next(iter(folds.values())):
            got = [f[name] for f in folds.values()]
            same = all(g["runs"] == got[0]["runs"] for g in got)
            print(f"| {name} | " + " | ".join(f"{g['cpu']:.4f}" for g in got)
                  + f" | {len(got[0]['runs'])}{'' if same else ' (DIFFER)'} |")
    print(f"--help {'meets' if ok_help else 'misses'} 0.12 s; append {'meets' if ok_append else 'misses'} "
          f"3x the floor ({results['pybackward append']['wall'] / floor:.2f}x)")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine(), "repeat": args.repeat,
                                               "results": results, "folding": folds}, indent=1))


if __name__ == "__main__":
    main()
