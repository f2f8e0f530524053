"""The PIR gradient pass: pybackward against Paddle 3.3.1's `ir_backward` (issue #32).

    python benchmarks/bench_pir_backward.py [--layers 1000 3000] [--repeat 3] [--paddle PY]

For each size, an MLP of `fc(relu)` layers (width 16) and a mean loss:

* with Paddle (`--paddle PY`, default $PYBACKWARD_PADDLE_PYTHON): Paddle builds it in PIR
  mode and saves it (`paddle_pir_mlp.py`), and times its `append_backward` call alone;
* pybackward: `pybackward append IN.json OUT.json` as a whole process (start-up, load,
  pass, write), best of `--repeat`, and the pass alone in process.

Without Paddle the program is built by pybackward (bench_pir_load.build: the same op
shapes) and only pybackward's side is timed. Prints one row per size, Paddle's call
over pybackward's whole process, and the growth from the first size to the last.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from pybackward import pir  # noqa: E402
from pybackward.backward.pir.api import append_backward  # noqa: E402


def paddle_program(py: str, layers: int, out: Path) -> dict:
    r = subprocess.run([py, str(HERE / "paddle_pir_mlp.py"), str(layers), str(out)], capture_output=True,
                       text=True, timeout=3600)
    if r.returncode != 0:
        raise SystemExit(f"paddle_pir_mlp.py failed: {r.stderr.strip().splitlines()[-1:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def our_program(layers: int, out: Path) -> None:
    from bench_pir_load import build
    out.write_bytes(pir.dumps(build(layers * 5 + 5)))


def whole_process(src: Path, dst: Path, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "pybackward_cli.main", "append", "--force", "-q", str(src),
                            str(dst)], capture_output=True, text=True)
        best = min(best, time.perf_counter() - t0)
        if r.returncode != 0:
            raise SystemExit(f"pybackward append failed: {r.stderr.strip()}")
    return best


def in_process(src: Path, repeat: int) -> float:
    data = src.read_bytes()
    best = float("inf")
    for _ in range(repeat):
        prog = pir.loads(data)
        loss = next(op for op in reversed(prog.ops) if op.name == "pd_op.mean").results[0]
        gc.collect()
        t0 = time.perf_counter()
        append_backward(loss, program=prog)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, nargs="+", default=[1000, 3000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--paddle", default=os.environ.get("PYBACKWARD_PADDLE_PYTHON"))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.layers:
            src, dst = Path(tmp) / f"mlp{n}.json", Path(tmp) / f"mlp{n}.out.json"
            paddle = paddle_program(args.paddle, n, src) if args.paddle else None
            if paddle is None:
                our_program(n, src)
            ops = pir.load(src).num_ops()
            whole = whole_process(src, dst, args.repeat)
            inproc = in_process(src, args.repeat)
            rows.append((n, ops, paddle and paddle["append_backward_s"], whole, inproc))
    print(f"{'layers':>7} {'ops':>7} {'Paddle call':>12} {'ours, process':>15} {'ours, pass':>11} {'Paddle/ours':>12}")
    for n, ops, p, whole, inproc in rows:
        ratio = f"{p / whole:.1f}x" if p else "-"
        print(f"{n:>7} {ops:>7} {(f'{p:.2f} s' if p else '-'):>12} {whole:>13.2f} s {inproc:>9.2f} s {ratio:>12}")
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        print(f"growth {a[0]} -> {b[0]} layers: whole process {b[3] / a[3]:.2f}x, pass {b[4] / a[4]:.2f}x"
              + (f", Paddle {b[2] / a[2]:.2f}x" if a[2] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
