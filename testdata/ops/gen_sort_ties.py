#!/usr/bin/env python
"""Paddle 3.3.1's order for tied values in argsort, kthvalue, mode and top_k.

    /path/to/paddle-venv/bin/python testdata/ops/gen_sort_ties.py

Paddle's CPU kernels sort (value, index) pairs with libstdc++'s unstable
algorithms, so which index a tie reports is decided by the algorithm; the
registry's finite-difference samples cannot hold ties (the gradient is not
defined there), so these cases are checked by tests/ops/test_index_sort.py against
the values recorded here. Writes sort_ties.json next to this script.
"""
from __future__ import annotations

import os
import sys

if os.environ.get("FLAGS_enable_pir_api") != "0":
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:],
              dict(os.environ, FLAGS_enable_pir_api="0"))

import json  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

warnings.filterwarnings("ignore")
import paddle  # noqa: E402
from paddle import static  # noqa: E402
from paddle.base.layer_helper import LayerHelper  # noqa: E402

paddle.enable_static()
HERE = os.path.dirname(os.path.abspath(__file__))


def inputs():
    rng = np.random.default_rng(3)
    ties = [[3.0, 1.0, 3.0, 2.0, 1.0, 3.0], [0.5, 0.5, 0.5, -1.0, 2.0, 0.5]]
    wide = rng.integers(0, 4, (3, 40)).astype(float).tolist()
    nan = [[1.0, float("nan"), 0.5, float("nan"), 1.0, 0.5]]
    modes = rng.integers(0, 3, (2, 100)).astype(float).tolist()
    return ties, wide, nan, modes


def cases():
    ties, wide, nan, modes = inputs()
    out = []
    for name, x in (("ties", ties), ("wide", wide), ("nan", nan)):
        for desc in (False, True):
            for stable in (False, True):
                out.append(("argsort", name, x, {"axis": -1, "descending": desc, "stable": stable}))
    for name, x in (("ties", ties), ("wide", wide)):
        for k in (1, 2, 3):
            out.append(("kthvalue", name, x, {"k": k, "axis": -1, "keepdim": False}))
    for name, x in (("ties", ties), ("wide", wide), ("modes", modes)):
        out.append(("mode", name, x, {"axis": -1, "keepdim": False}))
    out.append(("top_k", "wide", wide, {"k": 5}))
    return out


def run(op, x, attrs):
    main = static.Program()
    with static.program_guard(main, static.Program()):
        v = static.data("x", list(np.shape(x)), "float64")
        helper = LayerHelper(op)
        o = helper.create_variable_for_type_inference("float64")
        i = helper.create_variable_for_type_inference("int64")
        helper.append_op(type=op, inputs={"X": [v]}, outputs={"Out": [o], "Indices": [i]}, attrs=dict(attrs))
    exe = static.Executor(paddle.CPUPlace())
    return exe.run(main, feed={"x": np.asarray(x, np.float64)}, fetch_list=[o, i])


def main():
    records = []
    for op, name, x, attrs in cases():
        out, idx = run(op, x, attrs)
        records.append({"op": op, "input": name, "x": x, "attrs": attrs,
                        "out": [None if np.isnan(v) else float(v) for v in np.ravel(out)],
                        "out_shape": list(out.shape), "indices": np.asarray(idx).tolist()})
    with open(os.path.join(HERE, "sort_ties.json"), "w") as f:
        json.dump({"paddle": paddle.__version__, "cases": records}, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(records)} cases")


if __name__ == "__main__":
    main()
