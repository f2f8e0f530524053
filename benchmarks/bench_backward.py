"""Speed and memory of `pybackward append` against the floor and Paddle, in one run.

    python benchmarks/bench_backward.py [--layers 100 1000 3000 10000 33000]
        [--paddle-python PATH] [--paddle-budget 300] [--repeat 3] [--quick]
        [--json results.json]

What one run measures (each measurement in a fresh process; `best of N` for
times, so a busy machine costs less):

* **Deep MLP** (`static.nn.fc` + relu per layer, as Paddle 3.3.1's legacy fc
  writes it; `mean` loss) for each `--layers`:
  - ours, whole process: `pybackward append --loss mean_0.tmp_0 IN OUT`
    (wall and CPU seconds, peak RSS and its ratio to IN's size);
  - ours, in process: `load` / `append_backward` / `save` (seconds each);
  - the floor, whole process: start Python, import the protobuf bindings,
    parse IN, serialise a message of OUT's size (OUT parsed as the stand-in)
    and write it (fsync + rename, as `save` does);
  - the floor, in process: parse IN + serialise OUT;
  - Paddle (`--paddle-python`): `Program.parse_from_string`,
    `append_backward`, `serialize_to_string` in process, and the whole
    process (`import paddle` included), until one size takes longer than
    `--paddle-budget` seconds (bigger sizes are then skipped).
* **Program shapes** that stress one kind of growth, ours whole process
  (time, peak RSS / file size) and in process: wide (one `sum` of 50,000
  inputs), fan-out (one var read by 200,000 ops), many sub-blocks (5,000
  `conditional_block`s), one var repeated 50,000 times in one op's inputs.
* **The builder** (`pybackward.static`): 1,000 and 3,000 fc layers in process,
  and the growth 1,000 -> 3,000 (linear is 3x).

Prints markdown tables (the ones in benchmarks/README.md) and the machine.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pybackward  # noqa: E402
from pybackward._proto import framework_pb2 as pb  # noqa: E402

WIDTH = 16
LOSS = "mean_0.tmp_0"


# --------------------------------------------------------------------------
# Programs
# --------------------------------------------------------------------------
def build_mlp(layers: int) -> bytes:
    """A plain MLP written with the program API (mul, elementwise_add axis=1,
    relu per layer; reduce_mean loss `mean_0.tmp_0`; parameters fc_i.w_0/b_0).
    Small attrs: the interpreter benchmark runs it."""
    prog = pybackward.Program()
    b = prog.global_block()
    b.create_var("x", [-1, WIDTH], "float32", stop_gradient=True, need_check_feed=True)
    h = "x"
    for i in range(layers):
        w = b.create_var(f"fc_{i}.w_0", [WIDTH, WIDTH], "float32", persistable=True, is_parameter=True)
        bias = b.create_var(f"fc_{i}.b_0", [WIDTH], "float32", persistable=True, is_parameter=True)
        t0 = b.create_var(f"fc_{i}.tmp_0", [-1, WIDTH], "float32")
        t1 = b.create_var(f"fc_{i}.tmp_1", [-1, WIDTH], "float32")
        t2 = b.create_var(f"fc_{i}.tmp_2", [-1, WIDTH], "float32")
        b.append_op("mul", {"X": [h], "Y": [w]}, {"Out": [t0]},
                    {"x_num_col_dims": 1, "y_num_col_dims": 1, "op_role": 0, "op_device": ""})
        b.append_op("elementwise_add", {"X": [t0], "Y": [bias]}, {"Out": [t1]}, {"axis": 1, "op_role": 0, "op_device": ""})
        b.append_op("relu", {"X": [t1]}, {"Out": [t2]}, {"op_role": 0, "op_device": ""})
        h = t2.name
    loss = b.create_var(LOSS, [], "float32")
    b.append_op("reduce_mean", {"X": [h]}, {"Out": [loss]},
                {"dim": [], "keep_dim": False, "reduce_all": True, "in_dtype": -1, "out_dtype": -1,
                 "op_role": 0, "op_device": ""})
    return pybackward.dumps(prog)


def build_fc_mlp(layers: int, width: int = WIDTH):
    """`layers` x (fc + relu) and a mean, built with pybackward.static exactly
    as Paddle's `paddle.static.nn.fc` builds it. Returns (main, startup)."""
    from pybackward import static
    main, startup = static.Program(), static.Program()
    with static.program_guard(main, startup):
        h = static.data(name="x", shape=[None, width], dtype="float32")
        for _ in range(layers):
            h = static.nn.fc(h, size=width, activation="relu")
        static.mean(h)
    return main, startup


def _shape_program(body) -> bytes:
    """A program built with pybackward.static (so every op carries Paddle's
    attrs and Paddle can differentiate it too): `body(block)` returns the var
    whose mean is the loss `mean_0.tmp_0`."""
    from pybackward import static
    main = static.Program()
    with static.program_guard(main, static.Program()):
        static.mean(body(main.global_block()))
    return pybackward.dumps(main)


def build_wide(n: int) -> bytes:
    """One `sum` op over n parameters, then the mean."""
    def body(b):
        params = [b.create_parameter(name=f"p_{i}", shape=[4], dtype="float32") for i in range(n)]
        total = b.create_var(name="total", shape=[4], dtype="float32")
        b.append_op(type="sum", inputs={"X": params}, outputs={"Out": [total]})
        return total
    return _shape_program(body)


def build_fanout(n: int) -> bytes:
    """One parameter read by n `scale` ops, their outputs summed, then the mean:
    the parameter's gradient is added up from n contributions."""
    def body(b):
        w = b.create_parameter(name="w", shape=[4], dtype="float32")
        outs = []
        for i in range(n):
            y = b.create_var(name=f"y_{i}", shape=[4], dtype="float32")
            b.append_op(type="scale", inputs={"X": [w]}, outputs={"Out": [y]},
                        attrs={"scale": 1.0 + i % 7, "bias": 0.0, "bias_after_scale": True})
            outs.append(y)
        total = b.create_var(name="total", shape=[4], dtype="float32")
        b.append_op(type="sum", inputs={"X": outs}, outputs={"Out": [total]})
        return total
    return _shape_program(body)


def build_sub_blocks(n: int) -> bytes:
    """n `conditional_block`s in block 0 (attrs as Paddle writes them), each
    running `scale` of a parameter in its own sub-block; their outputs summed."""
    from pybackward.base.attrs import encode
    from pybackward.legacy.program import OP_ROLE_ATTR

    def body(b):
        program = b.program
        x = b.create_parameter(name="x", shape=[2, 3], dtype="float32")
        c = b.create_var(name="c", shape=[1], dtype="bool")
        b.append_op(type="fill_constant", outputs={"Out": [c]},
                    attrs={"shape": [1], "dtype": pb.VarType.BOOL, "value": 1.0, "str_value": "1.0"})
        outs = []
        for k in range(1, n + 1):
            sub = program.create_block(parent_idx=0)
            o = b.create_var(name=f"o{k}", shape=[2, 3], dtype="float32")
            sub.append_op(type="scale", inputs={"X": [x]}, outputs={"Out": [o]}, attrs={"scale": float(k)})
            scope = b.create_var(name=f"scope{k}", type=pb.VarType.STEP_SCOPES)
            d = pb.OpDesc(type="conditional_block")
            d.inputs.add(parameter="Cond", arguments=["c"])
            d.inputs.add(parameter="Input", arguments=["x"])
            d.outputs.add(parameter="Out", arguments=[o.name])
            d.outputs.add(parameter="Scope", arguments=[scope.name])
            for name, value, t in (("skip_eager_deletion_vars", [], pb.AttrType.STRINGS),
                                   ("is_scalar_condition", True, pb.AttrType.BOOLEAN),
                                   ("op_callstack", [], pb.AttrType.STRINGS),
                                   ("op_device", "", pb.AttrType.STRING),
                                   ("op_namescope", "/", pb.AttrType.STRING),
                                   (OP_ROLE_ATTR, 0, pb.AttrType.INT),
                                   ("op_role_var", [], pb.AttrType.STRINGS),
                                   ("sub_block", k, pb.AttrType.BLOCK),
                                   ("with_quant_attr", False, pb.AttrType.BOOLEAN)):
                encode(d.attrs.add(), name, value, t)
            b.append_op_desc(d)
            outs.append(o)
        total = b.create_var(name="total", shape=[2, 3], dtype="float32")
        b.append_op(type="sum", inputs={"X": outs}, outputs={"Out": [total]})
        return total
    return _shape_program(body)


def build_repeated(n: int) -> bytes:
    """One parameter named n times in the inputs of one `sum` op."""
    def body(b):
        w = b.create_parameter(name="w", shape=[4], dtype="float32")
        total = b.create_var(name="total", shape=[4], dtype="float32")
        b.append_op(type="sum", inputs={"X": [w] * n}, outputs={"Out": [total]})
        return total
    return _shape_program(body)


SHAPES = {
    "wide: one `sum` of N inputs": (build_wide, 50_000),
    "fan-out: one var read by N ops": (build_fanout, 200_000),
    "many sub-blocks: N `conditional_block`s": (build_sub_blocks, 5_000),
    # the pass's limit (backward/guards.py MAX_REPEATS_IN_SLOT); above it the
    # input is refused, timed in the row below
    "one var N times in one op's inputs": (build_repeated, 1_000),
}

#: Inputs the pass refuses on purpose: the row shows how fast, and at what memory.
REFUSED = {
    "one var N times in one op's inputs (refused)": (build_repeated, 50_000),
}


# --------------------------------------------------------------------------
# Measuring (each in a fresh process)
# --------------------------------------------------------------------------
IN_PROCESS = r"""
import gc, json, os, sys, time
sys.path.insert(0, sys.argv[1])
import pybackward
src, out, loss, repeat = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
best = {"load": 1e9, "append": 1e9, "save": 1e9}
for _ in range(repeat):
    gc.collect()
    t0 = time.perf_counter(); prog = pybackward.load(src)
    t1 = time.perf_counter(); pybackward.append_backward(loss, program=prog)
    t2 = time.perf_counter(); pybackward.save(prog, out)
    t3 = time.perf_counter()
    for k, v in (("load", t1 - t0), ("append", t2 - t1), ("save", t3 - t2)):
        best[k] = min(best[k], v)
    del prog
print(json.dumps(best))
"""

FLOOR = r"""
import importlib.util, os, sys, tempfile, time
# The generated bindings alone, loaded from their file: `from pybackward._proto
# import ...` would run pybackward/__init__ and count our own imports (~0.2 s,
# NumPy and the op registry) as part of the floor.
spec = importlib.util.spec_from_file_location("framework_pb2", sys.argv[4])
pb = importlib.util.module_from_spec(spec); spec.loader.exec_module(pb)
src, out_model, dst = sys.argv[1], sys.argv[2], sys.argv[3]
t0 = time.perf_counter()
d = pb.ProgramDesc(); d.ParseFromString(open(src, "rb").read())
t1 = time.perf_counter()
o = pb.ProgramDesc(); o.ParseFromString(open(out_model, "rb").read())   # the stand-in output
t2 = time.perf_counter()
data = o.SerializeToString()
t3 = time.perf_counter()
fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dst))
with os.fdopen(fd, "wb") as f:
    f.write(data); f.flush(); os.fsync(f.fileno())
os.replace(tmp, dst)
print((t1 - t0) + (t3 - t2))
"""

PADDLE = r"""
import os, sys, time
os.environ["FLAGS_enable_pir_api"] = "0"
import paddle
paddle.enable_static()
data = open(sys.argv[1], "rb").read()
t0 = time.perf_counter()
prog = paddle.static.Program.parse_from_string(data)
t1 = time.perf_counter()
with paddle.static.program_guard(prog, paddle.static.Program()):
    paddle.static.append_backward(prog.global_block().var(sys.argv[2]))
t2 = time.perf_counter()
out = prog.desc.serialize_to_string()
t3 = time.perf_counter()
open(sys.argv[3], "wb").write(out)
print(t1 - t0, t2 - t1, t3 - t2)
"""


def _env() -> dict:
    env = dict(os.environ, FLAGS_enable_pir_api="0")
    # Installed packages run from compiled bytecode; don't time the compiler.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_process(argv: list[str], timeout: float | None = None) -> dict:
    """Run a process to the end: its wall seconds, exit status, stdout and stderr.
    On timeout its whole process group is killed (no orphan keeps running)."""
    t = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(),
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return {"timeout": True, "wall": time.perf_counter() - t}
    return {"rc": p.returncode, "wall": time.perf_counter() - t, "out": out.decode(), "err": err.decode()}


WRAP = r"""
import json, os, resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
out, err = p.communicate()
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": p.returncode, "wall": wall, "cpu": ru.ru_utime + ru.ru_stime,
                  "rss": ru.ru_maxrss * 1024, "out": out.decode()[-2000:], "err": err.decode()[-2000:]}))
"""


def measured(argv: list[str], timeout: float | None = None) -> dict:
    """`argv` run under a small wrapper process, so its own wall time, CPU time
    and peak RSS are read exactly (RUSAGE_CHILDREN of a parent with one child)."""
    r = run_process([sys.executable, "-c", WRAP, *argv], timeout=timeout)
    if r.get("timeout"):
        return r
    return json.loads(r["out"].strip().splitlines()[-1])


def best_of(argv: list[str], repeat: int, timeout: float | None = None) -> dict:
    runs = [measured(argv, timeout) for _ in range(repeat)]
    if any(r.get("timeout") for r in runs):
        return {"timeout": True, "wall": max(r["wall"] for r in runs)}
    bad = [r for r in runs if r["rc"] != 0]
    if bad:
        raise RuntimeError(f"{' '.join(argv)} failed: {bad[0]['err'][-500:]}")
    return {"wall": min(r["wall"] for r in runs), "cpu": min(r["cpu"] for r in runs),
            "rss": max(r["rss"] for r in runs), "out": runs[0]["out"]}


def ours_cli(src: str, out: str, repeat: int) -> dict:
    return best_of([sys.executable, "-m", "pybackward_cli.main", "append", "--loss", LOSS, src, out], repeat)


def ours_in_process(src: str, out: str, repeat: int) -> dict:
    r = run_process([sys.executable, "-c", IN_PROCESS, str(ROOT), src, out, LOSS, str(repeat)])
    if r["rc"] != 0:
        raise RuntimeError(r["err"][-500:])
    return json.loads(r["out"].strip().splitlines()[-1])


def floor(src: str, out_model: str, dst: str, repeat: int) -> dict:
    argv = [sys.executable, "-c", FLOOR, src, out_model, dst, str(ROOT / "pybackward" / "_proto" / "framework_pb2.py")]
    r = best_of(argv, repeat)
    r["in_process"] = min(float(measured(argv)["out"])
                          for _ in range(repeat))
    return r


def paddle(python: str, src: str, dst: str, timeout: float) -> dict:
    r = measured([python, "-c", PADDLE, src, LOSS, dst], timeout=timeout)
    if r.get("timeout"):
        return r
    if r["rc"] != 0:
        return {"error": (r["err"].strip().splitlines() or ["?"])[-1]}
    parse, append, ser = map(float, r["out"].split())
    return {"wall": r["wall"], "cpu": r["cpu"], "rss": r["rss"], "parse": parse, "append": append,
            "serialize": ser}


def builder_times(sizes: list[int], repeat: int) -> dict:
    script = r"""
import gc, json, sys, time
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1] + "/benchmarks")
from bench_backward import build_fc_mlp
res = {}
for n in map(int, sys.argv[3:]):
    best = 1e9
    for _ in range(int(sys.argv[2])):
        gc.collect(); t = time.process_time(); build_fc_mlp(n); best = min(best, time.process_time() - t)
    res[n] = best
print(json.dumps(res))
"""
    r = run_process([sys.executable, "-c", script, str(ROOT), str(repeat), *map(str, sizes)])
    if r["rc"] != 0:
        raise RuntimeError(r["err"][-500:])
    return {int(k): v for k, v in json.loads(r["out"].strip().splitlines()[-1]).items()}


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------
def machine() -> str:
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal"))
        mem_s = f"{mem / 2**20:.0f} GB RAM"
    except OSError:
        mem_s = "? RAM"
    import google.protobuf
    import numpy
    from google.protobuf.internal import api_implementation
    return (f"{cpu}, {os.cpu_count()} cores, {mem_s}; Python {platform.python_version()}, "
            f"protobuf {google.protobuf.__version__} ({api_implementation.Type()}), numpy {numpy.__version__}; "
            f"load average at start {os.getloadavg()[0]:.1f}")


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


def _s(x) -> str:
    return "-" if x is None else f"{x:.2f}" if x < 10 else f"{x:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, nargs="+", default=[100, 1000, 3000, 10000, 33000])
    ap.add_argument("--paddle-python", default=os.environ.get("PYBACKWARD_PADDLE_PYTHON"))
    ap.add_argument("--paddle-budget", type=float, default=300,
                    help="skip Paddle on bigger sizes once one size takes longer than this (s)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small sizes and shapes (a smoke test)")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--parts", nargs="+", choices=("mlp", "shapes", "builder"), default=["mlp", "shapes", "builder"],
                    help="which tables to measure (default: all)")
    args = ap.parse_args()
    if args.quick:
        args.layers = [100, 300]
    results: dict = {"machine": machine(), "mlp": [], "shapes": [], "builder": {}}
    print(results["machine"], flush=True)
    tmp = tempfile.mkdtemp(prefix="bench_backward_")
    src, out, fl, pd_out = (os.path.join(tmp, n) for n in ("in.pb", "out.pb", "floor.pb", "paddle.pb"))
    # warm up: compile bytecode once, so no run pays for it
    Path(src).write_bytes(build_mlp(2))
    ours_cli(src, out, 1)

    if "mlp" in args.parts:
        _mlp_table(args, results, src, out, fl, pd_out)
    if "shapes" in args.parts:
        _shapes_table(args, results, src, out, fl, pd_out)
    if "builder" in args.parts:
        _builder_table(args, results)
    print(f"\nload average at end: {os.getloadavg()[0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


def _mlp_table(args, results: dict, src: str, out: str, fl: str, pd_out: str) -> None:
    print("\n| layers | fwd ops | IN -> OUT | ours: process, wall (CPU) | ours in process: load / append / save | "
          "floor: process, wall (CPU) / in process | ours / floor (process, CPU) | ours: peak RSS (x IN) | "
          "Paddle: process / append_backward | Paddle append_backward / ours process (wall) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    paddle_last: tuple[int, float] | None = None   # (layers, append seconds) of the last Paddle run
    paddle_stop = None
    for n in args.layers:
        repeat = args.repeat if n <= 3000 else 1
        main_prog, _ = build_fc_mlp(n)
        pybackward.save(main_prog, src)
        del main_prog
        size_in = os.path.getsize(src)
        cli = ours_cli(src, out, repeat)
        cli.pop("out", None)
        size_out = os.path.getsize(out)
        inproc = ours_in_process(src, fl + ".ours", repeat)
        fl_r = floor(src, out, fl, repeat)
        row = {"layers": n, "ops": 3 * n + 1, "bytes_in": size_in, "bytes_out": size_out, "ours": cli,
               "ours_in_process": inproc, "floor": fl_r}
        pd = None
        skip = paddle_stop
        if args.paddle_python and skip is None and paddle_last is not None:
            # Paddle's pass grows quadratically here: skip a size it would not finish in budget
            guess = paddle_last[1] * (n / paddle_last[0]) ** 2
            if guess > args.paddle_budget:
                skip = f"skipped (~{guess:.0f} s predicted: quadratic)"
        if args.paddle_python and skip is None:
            pd = paddle(args.paddle_python, src, pd_out, timeout=args.paddle_budget)
            row["paddle"] = pd
            if pd.get("timeout") or pd.get("error"):
                paddle_stop = "skipped"
            else:
                paddle_last = (n, pd["append"])
        results["mlp"].append(row)
        if pd is None:
            pd_s, ratio = (skip or "-") if args.paddle_python else "-", "-"
        elif pd.get("timeout"):
            pd_s, ratio = f"> {args.paddle_budget:.0f} s (stopped)", "-"
        elif pd.get("error"):
            pd_s, ratio = f"failed: {pd['error'][:40]}", "-"
        else:
            pd_s = f"{_s(pd['wall'])} / {_s(pd['append'])} s"
            ratio = f"{pd['append'] / cli['wall']:.1f}x"
        print(f"| {n:,} | {3 * n + 1:,} | {_mb(size_in)} -> {_mb(size_out)} | {_s(cli['wall'])} s ({_s(cli['cpu'])}) | "
              f"{_s(inproc['load'])} / {_s(inproc['append'])} / {_s(inproc['save'])} s | "
              f"{_s(fl_r['wall'])} s ({_s(fl_r['cpu'])}) / {_s(fl_r['in_process'])} s | "
              f"{cli['cpu'] / fl_r['cpu']:.1f}x | "
              f"{cli['rss'] / 2**20:.0f} MiB ({cli['rss'] / size_in:.0f}x) | {pd_s} | {ratio} |", flush=True)



def _shapes_table(args, results: dict, src: str, out: str, fl: str, pd_out: str) -> None:
    print("\n| shape | N | IN -> OUT | ours: process, wall (CPU) | ours in process: load / append / save | "
          "floor: process, wall (CPU) | ours: peak RSS (x IN) | Paddle: process / append_backward |")
    print("|---|---|---|---|---|---|---|---|")
    for label, (build, n) in SHAPES.items():
        if args.quick:
            n = max(10, n // 100)
        Path(src).write_bytes(build(n))
        size_in = os.path.getsize(src)
        cli = ours_cli(src, out, 1)
        cli.pop("out", None)
        inproc = ours_in_process(src, fl + ".ours", 1)
        fl_r = floor(src, out, fl, 1)
        size_out = os.path.getsize(out)
        pd = paddle(args.paddle_python, src, pd_out, timeout=args.paddle_budget) if args.paddle_python else None
        results["shapes"].append({"shape": label, "n": n, "bytes_in": size_in, "bytes_out": size_out,
                                  "ours": cli, "ours_in_process": inproc, "floor": fl_r, "paddle": pd})
        if pd is None:
            pd_s = "-"
        elif pd.get("timeout"):
            pd_s = f"> {args.paddle_budget:.0f} s (stopped)"
        elif pd.get("error"):
            pd_s = f"failed: {pd['error'][:60]}"
        else:
            pd_s = f"{_s(pd['wall'])} / {_s(pd['append'])} s"
        print(f"| {label} | {n:,} | {_mb(size_in)} -> {_mb(size_out)} | {_s(cli['wall'])} s ({_s(cli['cpu'])}) | "
              f"{_s(inproc['load'])} / {_s(inproc['append'])} / {_s(inproc['save'])} s | "
              f"{_s(fl_r['wall'])} s ({_s(fl_r['cpu'])}) | "
              f"{cli['rss'] / 2**20:.0f} MiB ({cli['rss'] / size_in:.0f}x) | {pd_s} |", flush=True)

    for label, (build, n) in REFUSED.items():   # refused at once: not scaled down by --quick
        Path(src).write_bytes(build(n))
        size_in = os.path.getsize(src)
        r = measured([sys.executable, "-m", "pybackward_cli.main", "append", "--loss", LOSS, src, out + ".refused"])
        ok = r["rc"] == 2 and r["err"].count("\n") == 1 and not os.path.exists(out + ".refused")
        results["shapes"].append({"shape": label, "n": n, "bytes_in": size_in, "refused": r, "clean": ok})
        print(f"| {label} | {n:,} | {_mb(size_in)} -> - | exit {r['rc']} in {_s(r['wall'])} s ({_s(r['cpu'])}), "
              f"{'one line on stderr, no output' if ok else 'NOT CLEAN: ' + r['err'][-80:]} | - | - | "
              f"{r['rss'] / 2**20:.0f} MiB ({r['rss'] / size_in:.0f}x) | - |", flush=True)


def _builder_table(args, results: dict) -> None:
    sizes = [100, 300] if args.quick else [1000, 3000]
    b = builder_times(sizes, args.repeat)
    results["builder"] = b
    print("\n| builder (`static.nn.fc` + relu layers) | CPU s (best of %d) | per layer |" % args.repeat)
    print("|---|---|---|")
    for n, t in b.items():
        print(f"| {n:,} layers | {t:.2f} | {t / n * 1e3:.2f} ms |")
    print(f"| growth {sizes[0]:,} -> {sizes[1]:,} | {b[sizes[1]] / b[sizes[0]]:.2f}x "
          f"(linear: {sizes[1] / sizes[0]:.0f}x) | |")


if __name__ == "__main__":
    main()
