"""Scaling of load + append_backward + save on deep MLPs (fc + relu layers).

    python benchmarks/bench_backward.py [--layers 100 1000 10000] [--paddle-python PATH]

Prints µs per forward op for each size and the growth ratio (10,000 layers
must cost under 12x the time of 1,000: linear). With a Python that has
paddlepaddle (--paddle-python, or $PYBACKWARD_PADDLE_PYTHON), it also times
Paddle's own append_backward on the same programs (up to 3,000 layers) and
prints the speed-up. Programs are built with pybackward's own builders, as
Paddle's fc writes them (mul, elementwise_add axis=1, relu; reduce_mean loss).
"""
from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pybackward  # noqa: E402

WIDTH = 16

PADDLE_SCRIPT = r"""
import os, sys, time
os.environ["FLAGS_enable_pir_api"] = "0"
import paddle
paddle.enable_static()
data = open(sys.argv[1], "rb").read()
prog = paddle.static.Program.parse_from_string(data)
t = time.perf_counter()
with paddle.static.program_guard(prog, paddle.static.Program()):
    paddle.static.append_backward(prog.global_block().var("mean_0.tmp_0"))
print(time.perf_counter() - t)
"""


def build_mlp(layers: int) -> bytes:
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
    loss = b.create_var("mean_0.tmp_0", [], "float32")
    b.append_op("reduce_mean", {"X": [h]}, {"Out": [loss]},
                {"dim": [], "keep_dim": False, "reduce_all": True, "in_dtype": -1, "out_dtype": -1,
                 "op_role": 0, "op_device": ""})
    return pybackward.dumps(prog)


def time_ours(data: bytes, repeat: int) -> float:
    """Best of `repeat` runs, each starting from a collected heap."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        prog = pybackward.loads(data)
        pybackward.append_backward("mean_0.tmp_0", program=prog)
        pybackward.dumps(prog)
        best = min(best, time.perf_counter() - t)
    return best


def time_paddle(python: str, data: bytes) -> float | None:
    with tempfile.NamedTemporaryFile(suffix=".pb", delete=False) as f:
        f.write(data)
    try:
        r = subprocess.run([python, "-c", PADDLE_SCRIPT, f.name], capture_output=True, text=True,
                           env=dict(os.environ, FLAGS_enable_pir_api="0"), timeout=3600)
        return float(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else None
    finally:
        os.unlink(f.name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, nargs="+", default=[100, 1000, 10000])
    ap.add_argument("--paddle-layers", type=int, nargs="+", default=[100, 1000, 3000])
    ap.add_argument("--paddle-python", default=os.environ.get("PYBACKWARD_PADDLE_PYTHON"))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sizes = sorted(set(args.layers) | (set(args.paddle_layers) if args.paddle_python else set()))
    results = {}
    print(f"{'layers':>7} {'fwd ops':>8} {'pybackward s':>13} {'us/op':>7} {'paddle s':>9} {'speed-up':>9}")
    for n in sizes:
        data = build_mlp(n)
        ops = 3 * n + 1
        ours = time_ours(data, args.repeat)
        results[n] = ours
        paddle_t = time_paddle(args.paddle_python, data) if args.paddle_python and n in args.paddle_layers else None
        ratio = f"{paddle_t / ours:8.0f}x" if paddle_t else ""
        pt = f"{paddle_t:9.2f}" if paddle_t else ""
        print(f"{n:>7} {ops:>8} {ours:>13.3f} {ours / ops * 1e6:>7.1f} {pt:>9} {ratio:>9}", flush=True)
    if 1000 in results and 10000 in results:
        growth = results[10000] / results[1000]
        print(f"growth 1,000 -> 10,000 layers: {growth:.1f}x (linear is 10x; the goal is under 12x)")


if __name__ == "__main__":
    main()
