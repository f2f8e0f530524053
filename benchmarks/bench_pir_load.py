"""Reading a PIR program: pybackward's checked reader against Python's bare `json.loads`.

    python benchmarks/bench_pir_load.py [--ops 10000] [--repeat 5] [--limit 3.0]

Builds a 10,000-op PIR program (an MLP of `fc` layers: two parameters, matmul,
add, relu per layer, attributes copied from the golden testdata/pir/mlp.json)
with pybackward's own writer, no Paddle needed, and times on its bytes:

* `json.loads` alone (the floor: any reader parses the JSON);
* `pybackward.pir.loads` (parse, check every op, type and attribute, resolve
  every value id, build the model);
* `pybackward.pir.dumps` and `to_text`, for scale.

Best of `--repeat` runs each. Prints the times and the ratio loads / json.loads,
and exits 1 when the ratio is above `--limit` (issue #31 asks for at most 3x).
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pybackward import pir  # noqa: E402
from pybackward.pir.model import Operation, Program  # noqa: E402
from pybackward.pir.types import Attr, dense  # noqa: E402

GOLDEN = ROOT / "testdata" / "pir" / "mlp.json"


def build(n_ops: int, width: int = 16) -> Program:
    """An MLP of ~n_ops ops, its ops shaped like the golden MLP's."""
    golden = pir.load(GOLDEN)
    tpl = {}
    for op in golden.ops:
        tpl.setdefault(op.name, op)
    prog = Program(trainable=True)
    block = prog.block

    def clone(name: str, operands, types, **attrs) -> Operation:
        t = tpl[name]
        a = dict(t.attrs)
        a.update(attrs)
        op = Operation(name, operands, types, a, dict(t.result_attrs))
        return block.append(op)

    x = clone("pd_op.data", [], [dense("float32", (-1, width))], shape=Attr.int_array([-1, width])).results[0]
    layer = 0
    while len(block.ops) + 5 <= n_ops - 3:
        w = clone("builtin.parameter", [], [dense("float32", (width, width))],
                  parameter_name=Attr.str_(f"fc_{layer}.w_0")).results[0]
        b = clone("builtin.parameter", [], [dense("float32", (width,))],
                  parameter_name=Attr.str_(f"fc_{layer}.b_0")).results[0]
        h = clone("pd_op.matmul", [x, w], [dense("float32", (-1, width))]).results[0]
        h = clone("pd_op.add", [h, b], [dense("float32", (-1, width))]).results[0]
        x = clone("pd_op.relu", [h], [dense("float32", (-1, width))]).results[0]
        layer += 1
    axes = clone("pd_op.full_int_array", [], [dense("int64", (0,))]).results[0]
    clone("pd_op.mean", [x, axes], [dense("float32", ())])
    while len(block.ops) < n_ops:
        clone("pd_op.full", [], [dense("float32", (1,))])
    return prog


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--limit", type=float, default=3.0)
    args = ap.parse_args()
    prog = build(args.ops)
    data = pir.dumps(prog)
    n = pir.loads(data).num_ops()
    t_json = best(lambda: json.loads(data), args.repeat)
    t_load = best(lambda: pir.loads(data), args.repeat)
    loaded = pir.loads(data)
    t_dump = best(lambda: pir.dumps(loaded), args.repeat)
    t_text = best(lambda: pir.to_text(loaded), args.repeat)
    ratio = t_load / t_json
    print(f"program: {n} ops, {len(data) / 1e6:.2f} MB")
    print(f"json.loads        {t_json * 1e3:8.1f} ms")
    print(f"pir.loads         {t_load * 1e3:8.1f} ms   ({ratio:.2f}x json.loads; limit {args.limit}x)")
    print(f"pir.dumps         {t_dump * 1e3:8.1f} ms")
    print(f"pir.to_text       {t_text * 1e3:8.1f} ms")
    return 0 if ratio <= args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
