"""Kernels of pybackward/ops/math/activation.py against Paddle 3.3.1.

* values: forward outputs and (through each op's grad maker and grad kernel)
  input grads, against what a live Paddle computed for the same inputs and
  cotangent (testdata/ops/math_activation.*, made by gen_math_activation.py);
* conventions: the grad op each maker emits (type, slots, attrs) against
  Paddle's, from the golden backward.pb files and from live-Paddle probes;
* dtypes / ranks kept, and errors for what the kernels do not handle.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

import pybackward
from pybackward.base.errors import ExecutionError
from pybackward.ops import opcheck, registry
from pybackward.ops.registry import EMPTY_VAR_NAME, FwdOp

ROOT = Path(__file__).resolve().parents[2]

UNARY = ["relu", "sigmoid", "tanh", "gelu", "exp", "log", "sqrt", "rsqrt", "square", "abs", "leaky_relu",
         "softmax", "log_softmax", "relu6", "elu", "silu", "swish", "hard_swish", "softplus", "reciprocal"]
COMPARE = ["equal", "not_equal", "less_than", "less_equal", "greater_than", "greater_equal"]
LOGICAL = ["logical_and", "logical_or", "logical_xor", "logical_not"]
OPS = UNARY + ["pow", "clip", "prelu"] + COMPARE + LOGICAL


from opref import DATA, REF, check_golden, golden_grad_ops, maker_output, run_reference_case  # noqa: E402,F401

# --------------------------------------------------------------------------
# values vs live Paddle
# --------------------------------------------------------------------------
CASES = sorted(n for n, m in REF.items() if m["op"] in OPS and "paddle_error" not in m)


def test_reference_covers_every_op():
    assert {REF[n]["op"] for n in CASES} == set(OPS)


@pytest.mark.parametrize("name", CASES)
def test_matches_paddle(name):
    run_reference_case(name)


# --------------------------------------------------------------------------
# grad op conventions (verified with Paddle 3.3.1 and the golden files)
# --------------------------------------------------------------------------
READS_OUT = ["relu", "sigmoid", "tanh", "sqrt", "exp", "rsqrt", "reciprocal", "relu6", "softmax", "log_softmax"]
READS_X = ["gelu", "log", "square", "leaky_relu", "abs", "swish", "hard_swish", "softplus"]
READS_X_OUT = ["silu", "elu"]


@pytest.mark.parametrize("op", UNARY)
def test_unary_grad_op_slots(op):
    reads = {"X": ["x"]} if op in READS_X else {"Out": ["o"]} if op in READS_OUT else {"X": ["x"], "Out": ["o"]}
    assert op in READS_OUT + READS_X + READS_X_OUT
    assert maker_output(op, {"X": ["x"]}, {"Out": ["o"]}) == [
        (f"{op}_grad", {**reads, "Out@GRAD": ["o@GRAD"]}, {"X@GRAD": ["x@GRAD"]})]


def test_optional_tensor_slots_copied():
    # Paddle's Python appends dispensable slots empty; the grad op keeps them (empty or filled)
    assert maker_output("pow", {"X": ["x"], "FactorTensor": []}, {"Out": ["o"]}, {"factor": 2.0}) == [
        ("pow_grad", {"X": ["x"], "Out@GRAD": ["o@GRAD"], "FactorTensor": []}, {"X@GRAD": ["x@GRAD"]})]
    assert maker_output("pow", {"X": ["x"], "FactorTensor": ["f"]}, {"Out": ["o"]}) == [
        ("pow_grad", {"X": ["x"], "Out@GRAD": ["o@GRAD"], "FactorTensor": ["f"]}, {"X@GRAD": ["x@GRAD"]})]
    assert maker_output("clip", {"X": ["x"], "Min": ["lo"], "Max": []}, {"Out": ["o"]}) == [
        ("clip_grad", {"X": ["x"], "Out@GRAD": ["o@GRAD"], "Min": ["lo"], "Max": []}, {"X@GRAD": ["x@GRAD"]})]


def test_prelu_grad_slots_and_no_grad():
    ins, outs = {"X": ["x"], "Alpha": ["a"]}, {"Out": ["o"]}
    g_in = {"X": ["x"], "Alpha": ["a"], "Out@GRAD": ["o@GRAD"]}
    assert maker_output("prelu", ins, outs) == [("prelu_grad", g_in, {"X@GRAD": ["x@GRAD"], "Alpha@GRAD": ["a@GRAD"]})]
    assert maker_output("prelu", ins, outs, no_grad={"x@GRAD"}) == [
        ("prelu_grad", g_in, {"X@GRAD": [], "Alpha@GRAD": ["a@GRAD"]})]


@pytest.mark.parametrize("op", COMPARE + LOGICAL)
def test_compare_and_logical_have_no_grad(op):
    assert registry.get(op).grad is None
    ins = {"X": ["x"]} if op == "logical_not" else {"X": ["x"], "Y": ["y"]}
    assert maker_output(op, ins, {"Out": ["o"]}) == []


@pytest.mark.parametrize("case,types,expect", [
    ("var_reused", {"relu", "sigmoid", "tanh"}, 3),
    ("mlp_softmax_ce", {"relu"}, 2),
    ("attention", {"softmax"}, 1),
    ("fit_a_line", {"square"}, 1),
    ("doc_append_backward", {"square"}, 1),
    ("doc_gradients", {"relu"}, 2),
    ("shared_weights", {"tanh"}, 1),
    ("stop_gradient_mid_free", {"relu"}, 1),
])
def test_grad_ops_match_golden(case, types, expect):
    check_golden(case, types, expect)


# --------------------------------------------------------------------------
# independent formulas, dtypes and ranks
# --------------------------------------------------------------------------
_FORMULAS = {
    "relu": lambda v: max(v, 0.0), "sigmoid": lambda v: 1 / (1 + math.exp(-v)), "tanh": math.tanh,
    "gelu": lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))), "exp": math.exp, "log": math.log,
    "sqrt": math.sqrt, "rsqrt": lambda v: v ** -0.5, "square": lambda v: v * v, "abs": abs,
    "leaky_relu": lambda v: v if v > 0 else 0.02 * v, "relu6": lambda v: min(max(v, 0.0), 6.0),
    "elu": lambda v: v if v > 0 else math.exp(v) - 1, "silu": lambda v: v / (1 + math.exp(-v)),
    "swish": lambda v: v / (1 + math.exp(-v)), "hard_swish": lambda v: v * min(max(v + 3, 0), 6) / 6,
    "softplus": lambda v: math.log1p(math.exp(v)), "reciprocal": lambda v: 1 / v,
    "softmax": lambda v: 1.0, "log_softmax": lambda v: 0.0,
}


@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_formula_dtype_and_rank(op, dtype):
    x = np.array([0.25, 1.5, 4.0, 7.5], dtype=dtype)
    if op not in ("log", "sqrt", "rsqrt"):
        x = x * np.array([1, -1, 1, -1], dtype=dtype)
    out = opcheck.run_kernel(op, {"X": [x]}, {}, {"Out": ["o"]})["Out"][0]
    assert out.dtype == dtype and out.shape == x.shape
    if op not in ("softmax", "log_softmax"):
        rtol = 1e-6 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(out, [_FORMULAS[op](float(v)) for v in x], rtol=rtol)
    scalar = opcheck.run_kernel(op, {"X": [np.asarray(x[0])]}, {}, {"Out": ["o"]})["Out"][0]
    assert isinstance(scalar, np.ndarray) and scalar.shape == () and scalar.dtype == dtype
    np.testing.assert_allclose(scalar, _FORMULAS[op](float(x[0])), rtol=1e-6)


def test_softmax_is_stable_and_normalised():
    x = np.array([[1000.0, 1001.0, 999.0], [-1e4, 0.0, 1e4]], dtype=np.float32)
    out = opcheck.run_kernel("softmax", {"X": [x]}, {"axis": -1}, {"Out": ["o"]})["Out"][0]
    assert np.all(np.isfinite(out)) and np.allclose(out.sum(-1), 1.0)
    lout = opcheck.run_kernel("log_softmax", {"X": [x]}, {"axis": 1}, {"Out": ["o"]})["Out"][0]
    assert np.all(np.isfinite(lout)) and np.allclose(np.exp(lout).sum(-1), 1.0)


def test_integer_kernels():
    xi = np.array([[-2, 1, 3]], dtype=np.int32)

    def run(op, attrs=None):
        return opcheck.run_kernel(op, {"X": [xi]}, attrs or {}, {"Out": ["o"]})["Out"][0]
    assert run("abs").dtype == np.int32 and run("square").tolist() == [[4, 1, 9]]
    assert run("pow", {"factor": 2.7}).tolist() == [[4, 1, 9]]  # factor truncated to 2, like Paddle
    assert run("clip", {"min": -1.5, "max": 2.5}).tolist() == [[-1, 1, 2]]
    assert run("exp").dtype == np.float32  # Paddle's exp/log of an integer give float32


# --------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------
@pytest.mark.parametrize("op,ins,attrs,match", [
    ("prelu", {"X": [np.ones((2, 3))], "Alpha": [np.ones(1)]}, {"mode": "row"}, "mode='row'"),
    ("prelu", {"X": [np.ones((2, 3, 4))], "Alpha": [np.ones(3)]}, {"mode": "channel", "data_format": "CHWN"},
     "data_format"),
    ("prelu", {"X": [np.ones(3)], "Alpha": [np.ones(3)]}, {"mode": "channel"}, "rank"),
    ("clip", {"X": [np.ones(3)]}, {"min": 2.0, "max": 1.0}, "greater than max"),
    ("clip", {"X": [np.ones(3)]}, {}, "min"),
    ("relu", {"X": [np.ones(3, dtype=np.int64)]}, {}, "int64"),
    ("softmax", {"X": [np.ones(3, dtype=np.int32)]}, {}, "int32"),
])
def test_errors(op, ins, attrs, match):
    with pytest.raises(ExecutionError, match=match):
        opcheck.run_kernel(op, ins, attrs, {"Out": ["o"]})
