"""Kernel cases the registry-wide tests cannot hold, against Paddle 3.3.1's values.

median / nanmedian on tied values (the index output and the gradient follow
Paddle's libstdc++ nth_element order), on integers (C++ division) and with
NaNs (NaN outputs, which finite differences cannot check). The Paddle values
were taken by testdata/kernels/median_probe.py (dygraph, CPU) and are stored
in testdata/kernels/median_ties.ref.json.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from pybackward.ops import opcheck
from conftest import TESTDATA

REF = json.loads((TESTDATA / "kernels" / "median_ties.ref.json").read_text())
TIED = np.array([[3., 1, 2, 5], [4, 4, 1, 0], [2, 7, 2, 9]]) + 0.25
ALLN = np.array([[1., np.nan, 3, 2], [np.nan] * 4, [5, 1, np.nan, np.nan]])
CASES = {
    "tied-all-avg": (TIED, [], False, "avg"),
    "tied-1-avg": (TIED, [1], False, "avg"),
    "tied-1-min": (TIED, [1], True, "min"),
    "tiedT-0-avg": (TIED.T.copy(), [0], False, "avg"),
    "int64-avg": (np.array([[3, 1, 2, 6], [-3, -2, 5, 1]], np.int64), [1], False, "avg"),
    "int32-min": (np.array([[3, 1, 2], [-3, -2, 5]], np.int32), [0], True, "min"),
    "nan-avg": (ALLN, [1], False, "avg"),
    "nan-min": (ALLN, [1], False, "min"),
    "allnan-avg": (np.full((2, 3), np.nan), [1], False, "avg"),
    "nan3-min": (np.array([[1., np.nan, 3], [2, 5, 4]]), [1], False, "min"),
}


def _run(op, x, axis, keepdim, mode):
    xs, o, m, og, g = ("x", "out", "medians", "out@GRAD", "x@GRAD") if op == "median" else \
        ("X", "Out", "MedianIndex", "Out@GRAD", "X@GRAD")
    attrs = {"axis": axis, "keepdim": keepdim, "mode": mode}
    outs = opcheck.run_kernel(op, {xs: [x]}, attrs, {o: ["o"], m: ["m"]})
    out, idx = outs[o][0], outs[m][0]
    grad = None
    if x.dtype.kind == "f":
        cot = np.arange(1, out.size + 1, dtype=x.dtype).reshape(out.shape)
        ins = {xs: [x], o: [out], m: [idx], og: [cot]}
        grad = opcheck.run_kernel(op + "_grad", ins, attrs, {g: ["g"]})[g][0]
    return out, idx, grad


@pytest.mark.parametrize("key", [f"{op}-{k}" for op in ("median", "nanmedian") for k in CASES])
def test_median_matches_paddle(key):
    if key not in REF:
        pytest.skip("not probed")
    op, case = key.split("-", 1)
    x, axis, keepdim, mode = CASES[case]
    ref = REF[key]
    out, idx, grad = _run(op, x, axis, keepdim, mode)
    assert str(out.dtype) == ref["odtype"]
    np.testing.assert_array_equal(out, np.array(ref["out"], dtype=out.dtype))
    np.testing.assert_array_equal(idx, np.array(ref["idx"]))
    if grad is not None and "grad" in ref:
        np.testing.assert_allclose(grad, np.array(ref["grad"]), rtol=1e-12)


def _paddle_float32(family: str, case: str):
    """Paddle's float32 values for a sample whose float64 run Paddle refused."""
    kdir = TESTDATA / "kernels"
    arrays = dict(np.load(kdir / f"{family}.samples.npz"))
    cases = {c["case"]: c for c in json.loads((kdir / f"{family}.samples.json").read_text())}
    ref = dict(np.load(kdir / f"{family}.paddle.npz"))
    return cases[case], arrays, {k.split("|", 2)[2]: v for k, v in ref.items() if k.startswith(f"{case}|float32|")}


@pytest.mark.parametrize("case", ["linear_v2-0", "linear_v2-1"])
def test_linear_v2_float32_matches_paddle(case):
    meta, arrays, ref = _paddle_float32("misc_extra", case)
    ins = {s: [arrays[f"{case}|in|{s}|{i}"].astype(np.float32) for i in range(n)] for s, n in meta["inputs"].items()}
    out = opcheck.run_kernel("linear_v2", ins, meta["attrs"], {"out": ["o"]})["out"][0]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, ref["out|out|0"], rtol=1e-5, atol=1e-5)
    g = arrays[f"{case}|cot|out|0"].astype(np.float32)
    grads = opcheck.run_kernel("linear_v2_grad", {**ins, "out@GRAD": [g]}, meta["attrs"],
                               {"input@GRAD": ["a"], "weight@GRAD": ["b"], "bias@GRAD": ["c"]})
    for slot in ("input", "weight", "bias"):
        np.testing.assert_allclose(grads[slot + "@GRAD"][0], ref[f"grad|{slot}|0"], rtol=1e-4, atol=1e-5)
