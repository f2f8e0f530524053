"""PIR programs against the JSON floor: start-up on LeNet, and the 3,000-layer MLP (issue #37 item 5).

    python benchmarks/bench_pir_startup.py [--repeat 7] [--layers 3000] [--paddle PY] [--no-deep] [--json OUT]
        [--before DIR]

The PIR twins of bench_startup.py's and bench_lower_bound.py's tables. A PIR program is
JSON, so the floor is what any tool that reads and writes one must do with the
standard library: start Python, `json.loads` the input, serialise the output
(`json.dumps`, compact, as Paddle writes it) and write it (temp file, fsync, rename,
as pybackward writes), with the cyclic garbage collector off (pybackward pauses it too). The stand-in output is the real one: Paddle's own backward
program for LeNet (testdata/pir_backward/lenet.bwd.json), pybackward's output for the
MLP (op for op Paddle's; Paddle's own call takes minutes at 3,000 layers).

**Start-up** (whole processes, `--repeat` interleaved rounds after a warm-up round,
bytecode compiled into a temporary PYTHONPYCACHEPREFIX; best CPU time of the
children, and the wall time of the best-wall run): `python -c pass`, the floor,
`pybackward show`, `append` (target <= 3x the floor), `gradients`, `convert`. With `--before DIR`
(a tree holding another version's pybackward/ and cli/, e.g. `git archive HEAD pybackward cli | tar -x -C
DIR`), the same rows of that version too, in the same rounds, and its MLP `append` beside ours.

**Deep** (`--layers`, default 3,000 `fc(relu)` layers, width 16, mean loss, built and
saved by Paddle in PIR mode with `paddle_pir_mlp.py --no-call`, or by pybackward's
builder (bench_pir_load.build) without Paddle): `pybackward append` whole process
against the floor (target 3x), and in process `pir.loads` + `append_backward` +
`pir.dumps` against `json.loads` + `json.dumps` (target 6x), CPU time, the two
alternating, best of `--repeat`.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

LENET = ROOT / "testdata" / "pir_backward" / "lenet.json"
LENET_BWD = ROOT / "testdata" / "pir_backward" / "lenet.bwd.json"
LENET_LOSS_INPUT = ("%37", "conv2d_0.w_0")     # gradients: the loss (pd_op.mean) w.r.t. the first conv's filter

#: The floor: Python, json.loads of IN, json.dumps of the stand-in output, an atomic write.
FLOOR = r"""
import gc, json, os, sys, tempfile
gc.disable()    # as pybackward's reader, pass and writer do: the collector's passes are not the floor's work
src, out_model, dst = sys.argv[1], sys.argv[2], sys.argv[3]
d = json.loads(open(src, "rb").read())
o = json.loads(open(out_model, "rb").read())   # the stand-in output
data = json.dumps(o, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dst))
with os.fdopen(fd, "wb") as f:
    f.write(data); f.flush(); os.fsync(f.fileno())
os.replace(tmp, dst)
"""

#: Runs argv as its only child; reports the child's wall and CPU time (and peak RSS).
from bench_startup import WRAP, before_env  # noqa: E402  (the script's own folder is on sys.path)

DEFAULT_PADDLE = ROOT / ".paddle-venv" / "bin" / "python"


def env_with_cache(cache: str) -> dict:
    env = dict(os.environ, PYTHONPYCACHEPREFIX=cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_once(argv: list[str], env: dict) -> dict:
    r = subprocess.run([sys.executable, "-c", WRAP, *argv], capture_output=True, text=True, env=env)
    res = json.loads(r.stdout.strip().splitlines()[-1])
    if res["rc"] != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {res['rc']}: {res['err']}")
    return res


def measure(rows: list[tuple], repeat: int, env: dict) -> dict:
    """Each row (name, argv[, env]) `repeat` times in interleaved rounds after one warm-up
    round: best CPU, best wall, median CPU."""
    runs: dict[str, list[dict]] = {row[0]: [] for row in rows}
    for i in range(repeat + 1):
        for name, argv, *row_env in rows:
            res = run_once(argv, row_env[0] if row_env else env)
            if i:
                runs[name].append(res)
    out = {}
    for name, rs in runs.items():
        cpus = sorted(r["cpu"] for r in rs)
        out[name] = {"cpu": cpus[0], "wall": min(r["wall"] for r in rs), "cpu_median": cpus[len(cpus) // 2],
                     "rss_kib": max(r["rss"] for r in rs), "cpus": cpus}
    return out


def cli() -> list[str]:
    return [sys.executable, "-m", "pybackward_cli.main"]


def load_avg() -> str:
    return f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "?"


def same_program(a: Path, b: Path) -> bool:
    from pybackward import pir
    return pir.equal(pir.load(a), pir.load(b))


def print_rows(title: str, results: dict, floor: str, targets: dict) -> None:
    print(f"\n{title}")
    print("| process | CPU s (best) | CPU s (median) | wall s (best) | / floor (CPU) | peak RSS MiB | target |")
    print("|---|---|---|---|---|---|---|")
    f = results[floor]["cpu"]
    for name, r in results.items():
        print(f"| {name} | {r['cpu']:.3f} | {r['cpu_median']:.3f} | {r['wall']:.3f} | {r['cpu'] / f:.2f}x | "
              f"{r['rss_kib'] / 1024:.0f} | {targets.get(name, '')} |")


def startup(tmp: str, repeat: int, env: dict, before: str | None = None) -> dict:
    loss, inp = LENET_LOSS_INPUT

    def out_of(tag: str) -> str:
        return os.path.join(tmp, f"lenet.out{tag}.json")

    def commands(label: str, tag: str) -> list[tuple[str, list[str]]]:
        return [
            (f"{label}pybackward show", [*cli(), "show", str(LENET)]),
            (f"{label}pybackward append", [*cli(), "append", "--force", "-q", str(LENET), out_of(tag)]),
            (f"{label}pybackward gradients", [*cli(), "gradients", "-q", "--target", loss, "--input", inp,
                                              str(LENET), os.path.join(tmp, f"lenet.grads{tag}.json")]),
            (f"{label}pybackward convert", [*cli(), "convert", str(LENET), os.path.join(tmp, f"lenet.conv{tag}.json")]),
        ]

    rows: list[tuple] = [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("floor", [sys.executable, "-c", FLOOR, str(LENET), str(LENET_BWD), os.path.join(tmp, "floor.json")]),
        *commands("", ""),
    ]
    if before:
        benv = before_env(env, before)
        rows += [(*row, benv) for row in commands("before: ", ".before")]
    out = out_of("")
    results = measure(rows, repeat, env)
    if not same_program(Path(out), LENET_BWD):
        raise RuntimeError("append's output differs from testdata/pir_backward/lenet.bwd.json")
    if before and Path(out).read_bytes() != Path(out_of(".before")).read_bytes():
        raise RuntimeError("append's output differs from the --before version's")
    return results


def mlp_program(layers: int, path: Path, paddle: str | None) -> str:
    """Write the MLP to `path`; say who built it."""
    if paddle:
        r = subprocess.run([paddle, str(HERE / "paddle_pir_mlp.py"), str(layers), str(path), "--no-call"],
                           capture_output=True, text=True, timeout=3600)
        if r.returncode == 0:
            return "Paddle 3.3.1 (paddle_pir_mlp.py --no-call)"
        print(f"paddle_pir_mlp.py failed, using pybackward's builder: {r.stderr.strip().splitlines()[-1:]}",
              file=sys.stderr)
    from pybackward import pir
    from bench_pir_load import build
    path.write_bytes(pir.dumps(build(layers * 5 + 5)))
    return "pybackward (bench_pir_load.build)"


def in_process(src: Path, out: Path, repeat: int) -> dict:
    """pir.loads + append_backward + pir.dumps against json.loads + json.dumps, CPU, alternating."""
    from pybackward import pir
    from pybackward.backward.pir.api import append_backward
    data, out_obj = src.read_bytes(), json.loads(out.read_bytes())
    ours: dict[str, list[float]] = {"load": [], "pass": [], "dump": [], "total": []}
    floor: dict[str, list[float]] = {"parse": [], "serialise": [], "total": []}
    for i in range(repeat + 1):
        gc.collect()
        gc.disable()        # both sides without the collector (pybackward pauses it in each piece anyway)
        t0 = time.process_time()
        prog = pir.loads(data)
        t1 = time.process_time()
        loss = next(op for op in reversed(prog.ops) if op.name == "pd_op.mean").results[0]
        t2 = time.process_time()
        append_backward(loss, program=prog)
        t3 = time.process_time()
        text = pir.dumps(prog)
        t4 = time.process_time()
        del prog, text
        gc.collect()
        u0 = time.process_time()
        d = json.loads(data)
        u1 = time.process_time()
        s = json.dumps(out_obj, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
        u2 = time.process_time()
        del d, s
        gc.enable()
        if i:      # round 0 is the warm-up (first imports of the op facts)
            ours["load"].append(t1 - t0)
            ours["pass"].append(t3 - t2)
            ours["dump"].append(t4 - t3)
            ours["total"].append(t1 - t0 + t4 - t2)
            floor["parse"].append(u1 - u0)
            floor["serialise"].append(u2 - u1)
            floor["total"].append(u2 - u0)
    return {"ours": {k: min(v) for k, v in ours.items()}, "floor": {k: min(v) for k, v in floor.items()}}


def deep(tmp: str, layers: int, repeat: int, env: dict, paddle: str | None, before: str | None = None) -> dict:
    src, out = Path(tmp) / f"mlp{layers}.json", Path(tmp) / f"mlp{layers}.out.json"
    who = mlp_program(layers, src, paddle)
    rows: list[tuple] = [
        ("floor", [sys.executable, "-c", FLOOR, str(src), str(out), os.path.join(tmp, "mlpfloor.json")]),
        ("pybackward append", [*cli(), "append", "--force", "-q", str(src), str(out)]),
    ]
    if before:
        rows.append(("before: pybackward append",
                     [*cli(), "append", "--force", "-q", str(src), str(out.with_suffix(".before.json"))],
                     before_env(env, before)))
    subprocess.run(rows[1][1], check=True, env=env)      # the stand-in output exists before the floor runs
    results = measure(rows, repeat, env)
    if before and out.read_bytes() != out.with_suffix(".before.json").read_bytes():
        raise RuntimeError("the MLP's append output differs from the --before version's")
    return {"built_by": who, "bytes_in": src.stat().st_size, "bytes_out": out.stat().st_size,
            "process": results, "in_process": in_process(src, out, repeat)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--layers", type=int, default=3000)
    ap.add_argument("--paddle", default=None)
    ap.add_argument("--no-deep", action="store_true")
    ap.add_argument("--no-startup", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--before", default=None, metavar="DIR",
                    help="a tree holding another version's pybackward/ and cli/: its rows too")
    args = ap.parse_args()
    before = os.path.abspath(args.before) if args.before else None
    paddle = next((c for c in (args.paddle, os.environ.get("PYBACKWARD_PADDLE_PYTHON"), str(DEFAULT_PADDLE))
                   if c and Path(c).exists()), None)
    tmp = tempfile.mkdtemp(prefix="bench_pir_startup_")
    report: dict = {"load": [load_avg()]}
    cwd = os.getcwd()
    # The children run in `tmp`: `python -m` puts the working directory first on sys.path, so from
    # the checkout it would shadow the --before tree's PYTHONPATH.
    os.chdir(tmp)
    try:
        env = dict(env_with_cache(os.path.join(tmp, "pycache")), PYTHONPATH=str(ROOT))
        if not args.no_startup:
            report["startup"] = startup(tmp, args.repeat, env, before)
            print_rows(f"Start-up, PIR LeNet, whole process, best of {args.repeat} interleaved rounds",
                       report["startup"], "floor", {"pybackward append": "<= 3x floor"})
        if not args.no_deep:
            d = report["deep"] = deep(tmp, args.layers, args.repeat, env, paddle, before)
            print_rows(f"{args.layers}-layer PIR MLP ({d['bytes_in']:,} -> {d['bytes_out']:,} bytes, built by "
                       f"{d['built_by']}), whole process", d["process"], "floor", {"pybackward append": "<= 3x floor"})
            ip = d["in_process"]
            print(f"\nin process (CPU s, best of {args.repeat}): ours load {ip['ours']['load']:.3f} + pass "
                  f"{ip['ours']['pass']:.3f} + dumps {ip['ours']['dump']:.3f} = {ip['ours']['total']:.3f}; floor "
                  f"json.loads {ip['floor']['parse']:.3f} + json.dumps {ip['floor']['serialise']:.3f} = "
                  f"{ip['floor']['total']:.3f}; ratio {ip['ours']['total'] / ip['floor']['total']:.2f}x (target 6x)")
    finally:
        os.chdir(cwd)
        shutil.rmtree(tmp, ignore_errors=True)
    report["load"].append(load_avg())
    print(f"\nload average {report['load'][0]} at the start, {report['load'][1]} at the end")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
