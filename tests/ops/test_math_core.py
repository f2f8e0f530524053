"""Kernels of pybackward/ops/math/core.py against Paddle 3.3.1.

* values: forward outputs and (through each op's grad maker and grad kernel)
  input grads, against what a live Paddle computed for the same inputs and
  cotangent (testdata/ops/math_activation.*, made by gen_math_activation.py);
* conventions: the grad ops each maker emits (type, slots, attrs; `scale` and
  `sum` -> fresh `scale` ops) against the golden backward.pb files and
  live-Paddle probes;
* dtypes / ranks kept, and errors for what the kernels do not handle.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import pybackward
from pybackward.base.attrs import AttrType
from pybackward.base.errors import ExecutionError
from pybackward.ops import opcheck, registry
from pybackward.ops.registry import EMPTY_VAR_NAME, FwdOp

ROOT = Path(__file__).resolve().parents[2]

REDUCE = ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"]
OPS = ["mul", "matmul", "matmul_v2", "bmm", "scale", "sum", "mean", *REDUCE, "p_norm", "squared_l2_norm", "cumsum"]


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


def test_scale_grad_with_bias_tensor_reproduces_paddle():
    # Paddle's scale grad op copies BiasTensor, and the scale kernel adds it:
    # X@GRAD = scale * Out@GRAD + BiasTensor. Reproduced, not "fixed".
    cot = DATA["scale_bias_tensor/cot"]
    np.testing.assert_allclose(DATA["scale_bias_tensor/grad/X/0"], 2.0 * cot + 5.0, rtol=1e-6)


def test_paddle_cannot_differentiate_unequal_rank_batch_broadcast():
    # recorded by the generator: matmul_v2_grad fails in Paddle for X(2,1,3,4) @ Y(5,4,2);
    # pybackward computes it (checked by finite differences in test_ops_registry).
    assert "matmul_v2_grad" in REF["matmul_v2_bcast"]["paddle_error"]


# --------------------------------------------------------------------------
# grad op conventions
# --------------------------------------------------------------------------
@pytest.mark.parametrize("op,reads", [
    ("mul", ("X", "Y")), ("matmul", ("X", "Y")), ("matmul_v2", ("X", "Y")), ("bmm", ("X", "Y")),
    ("mean", ("X",)), ("reduce_sum", ("X",)), ("reduce_mean", ("X",)), ("reduce_max", ("X", "Out")),
    ("reduce_min", ("X", "Out")), ("reduce_prod", ("X", "Out")), ("p_norm", ("X", "Out")),
    ("squared_l2_norm", ("X",)), ("cumsum", ("X",)),
])
def test_grad_op_slots(op, reads):
    ins = {"X": ["x"], "Y": ["y"]} if "Y" in reads else {"X": ["x"]}
    want_in = {**{s: ins[s] for s in reads if s in ins}, **({"Out": ["o"]} if "Out" in reads else {}),
               "Out@GRAD": ["o@GRAD"]}
    want_out = {f"{s}@GRAD": [f"{n}@GRAD" for n in v] for s, v in ins.items()}
    assert maker_output(op, ins, {"Out": ["o"]}) == [(f"{op}_grad", want_in, want_out)]
    if "Y" in ins:  # a no-grad input is dropped from its slot
        assert maker_output(op, ins, {"Out": ["o"]}, no_grad={"y@GRAD"})[0][2] == {"X@GRAD": ["x@GRAD"],
                                                                                  "Y@GRAD": []}


def _grad_ops(op_type, inputs, outputs, attrs=None, no_grad=()):
    fwd = FwdOp(op_type, inputs, outputs, opcheck.encode_attrs(attrs or {}), frozenset(no_grad))
    return registry.get(op_type).make_grad(fwd)


def test_scale_grad_is_a_fresh_scale_op():
    ins = {"X": ["x"], "ScaleTensor": ["s"], "BiasTensor": []}
    (g,) = _grad_ops("scale", ins, {"Out": ["o"]}, {"scale": 0.25, "bias": 3.0, "bias_after_scale": False})
    assert (g.type, g.inputs, g.outputs, g.fresh) == (
        "scale", {"X": ["o@GRAD"], "ScaleTensor": ["s"], "BiasTensor": []}, {"Out": ["x@GRAD"]}, True)
    assert g.attrs == {"scale": (0.25, AttrType.FLOAT), "bias": (0.0, AttrType.FLOAT),
                       "bias_after_scale": (True, AttrType.BOOLEAN)}
    (g,) = _grad_ops("scale", {"X": ["x"]}, {"Out": ["o"]}, {}, no_grad={"x@GRAD"})
    assert (g.inputs, g.outputs) == ({"X": ["o@GRAD"]}, {"Out": []})


def test_sum_grad_is_one_fresh_scale_per_input():
    gs = _grad_ops("sum", {"X": ["a", "b", "c"]}, {"Out": ["o"]}, no_grad={"b@GRAD"})
    assert [(g.type, g.inputs, g.outputs, g.fresh) for g in gs] == [
        ("scale", {"X": ["o@GRAD"]}, {"Out": ["a@GRAD"]}, True),
        ("scale", {"X": ["o@GRAD"]}, {"Out": [EMPTY_VAR_NAME]}, True),
        ("scale", {"X": ["o@GRAD"]}, {"Out": ["c@GRAD"]}, True)]
    assert all(opcheck.grad_op_attrs(g) == {"scale": 1.0, "bias": 0.0, "bias_after_scale": True} for g in gs)


@pytest.mark.parametrize("case,types,expect", [
    ("attention", {"matmul_v2", "scale", "reduce_mean"}, 7),
    ("concat_split_slice_gather", {"reduce_sum", "sum", "reduce_mean"}, 11),
    ("fit_a_line", {"mul", "reduce_mean"}, 2),
    ("mlp_softmax_ce", {"mul", "reduce_mean"}, 4),
    ("shared_weights", {"matmul_v2", "mul", "reduce_mean"}, 5),
    ("append_twice", {"matmul_v2", "reduce_mean"}, 2),
    ("cnn_bn_pool", {"mul", "reduce_mean"}, 2),
    ("doc_append_backward", {"mul", "reduce_mean"}, 2),
    ("broadcast_axis", {"reduce_mean"}, 1),
])
def test_grad_ops_match_golden(case, types, expect):
    check_golden(case, types, expect)


# --------------------------------------------------------------------------
# independent formulas, dtypes and ranks
# --------------------------------------------------------------------------
def _run(op, ins, attrs=None):
    return opcheck.run_kernel(op, ins, attrs or {}, {"Out": ["o"]})["Out"][0]


def test_reduce_shapes_and_dtypes():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert _run("reduce_mean", {"X": [x]}, {"dim": [], "reduce_all": True}).shape == ()
    assert _run("reduce_sum", {"X": [x]}, {"dim": [0, 1, 2]}).shape == ()
    assert _run("reduce_sum", {"X": [x]}, {"dim": [1], "keep_dim": True}).shape == (2, 1, 4)
    np.testing.assert_array_equal(_run("reduce_max", {"X": [x]}, {"dim": [-1]}), x[..., -1])
    np.testing.assert_array_equal(_run("reduce_prod", {"X": [x[:, :1, :2]]}, {"dim": [2]}), [[0.0], [156.0]])
    xi = np.array([[-7, 7, -1], [1, 2, 4]], dtype=np.int32)
    assert _run("reduce_sum", {"X": [xi]}, {"dim": [1]}).dtype == np.int64  # like Paddle
    assert _run("reduce_mean", {"X": [xi]}, {"dim": [1]}).tolist() == [0, 2]  # C++ integer division
    assert _run("reduce_sum", {"X": [x]}, {"dim": [0], "out_dtype": 6}).dtype == np.float64
    assert _run("mean", {"X": [x]}).shape == () and _run("mean", {"X": [x]}).dtype == np.float32
    assert _run("squared_l2_norm", {"X": [x]}).shape == (1,)


def test_matmul_formulas():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 3, 4)).astype(np.float32), rng.standard_normal((2, 5, 4)).astype(np.float32)
    want = np.stack([x[i] @ y[i].T for i in range(2)])
    np.testing.assert_allclose(_run("matmul_v2", {"X": [x], "Y": [y]}, {"trans_y": True}), want, rtol=1e-5)
    np.testing.assert_allclose(_run("matmul", {"X": [x], "Y": [y]}, {"transpose_Y": True, "alpha": 2.0}), 2 * want,
                               rtol=1e-5)
    np.testing.assert_allclose(_run("bmm", {"X": [x], "Y": [np.swapaxes(y, 1, 2)]}), want, rtol=1e-5)
    v = np.arange(4.0)
    assert _run("matmul_v2", {"X": [v], "Y": [v]}).shape == ()
    w = rng.standard_normal((4, 6)).astype(np.float32)
    out = _run("mul", {"X": [x], "Y": [w]}, {"x_num_col_dims": 2})
    assert out.shape == (2, 3, 6) and out.dtype == np.float32
    np.testing.assert_allclose(out, np.einsum("bik,kj->bij", x, w), rtol=1e-5, atol=1e-6)
    xi = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert _run("matmul_v2", {"X": [xi], "Y": [xi.T.copy()]}).dtype == np.int32


def test_scale_sum_cumsum_formulas():
    x = np.array([[1.0, -2.0], [3.0, 0.5]], dtype=np.float32)
    np.testing.assert_allclose(_run("scale", {"X": [x]}, {"scale": 2.0, "bias": 1.0}), 2 * x + 1)
    np.testing.assert_allclose(_run("scale", {"X": [x]}, {"scale": 2.0, "bias": 1.0, "bias_after_scale": False}),
                               2 * (x + 1))
    np.testing.assert_allclose(_run("scale", {"X": [x], "ScaleTensor": [np.array([3.0], np.float32)]},
                                    {"scale": 2.0}), 3 * x)
    assert _run("scale", {"X": [np.array([1, 2], np.int64)]}, {"scale": 2.9, "bias": 0.9}).tolist() == [2, 4]
    np.testing.assert_allclose(_run("sum", {"X": [x, x, x]}), 3 * x)
    np.testing.assert_allclose(_run("cumsum", {"X": [x]}, {"axis": 0}), [[1, -2], [4, -1.5]])
    np.testing.assert_allclose(_run("cumsum", {"X": [x]}, {"flatten": True, "exclusive": True}), [0, 1, -1, 2])
    np.testing.assert_allclose(_run("cumsum", {"X": [x]}, {"axis": 1, "reverse": True}), [[-1, -2], [3.5, 0.5]])
    np.testing.assert_allclose(_run("p_norm", {"X": [x]}, {"porder": 2.0, "axis": 1}), np.hypot(x[:, 0], x[:, 1]),
                               rtol=1e-6)


# --------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------
@pytest.mark.parametrize("op,ins,attrs,match", [
    ("matmul", {"X": [np.ones((2, 3))], "Y": [np.ones((3, 2))]}, {"head_number": 2}, "head_number=2"),
    ("matmul", {"X": [np.ones(3)], "Y": [np.ones((1, 3))]}, {"transpose_X": True}, "transpose_X=True"),
    ("matmul", {"X": [np.ones((2, 2, 3))], "Y": [np.ones((4, 3, 2))]}, {}, "batch dims"),
    ("matmul_v2", {"X": [np.ones((2, 3))], "Y": [np.ones((2, 3))]}, {}, "do not match"),
    ("bmm", {"X": [np.ones((2, 3))], "Y": [np.ones((3, 2))]}, {}, "3-D"),
    ("mean", {"X": [np.ones(3, dtype=np.int32)]}, {}, "int32"),
    ("mul", {"X": [np.ones((2, 2), dtype=np.int64)], "Y": [np.ones((2, 2), dtype=np.int64)]}, {}, "int64"),
    ("sum", {"X": []}, {}, "no inputs"),
])
def test_errors(op, ins, attrs, match):
    with pytest.raises(ExecutionError, match=match):
        opcheck.run_kernel(op, ins, attrs, {"Out": ["o"]})
