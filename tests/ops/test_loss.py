"""Loss ops (ops/loss/cross_entropy.py): against live Paddle 3.3.1 values (see
test_ops_tensor.PaddleCase), against float64 formulas written here, and the
grad-op conventions of the golden programs."""
from __future__ import annotations

import numpy as np
import pytest

import pybackward
from pybackward.base.errors import ExecutionError
from pybackward.ops import opcheck, registry
from pybackward.ops.registry import FwdOp

from test_tensor_shape_index import PROGRAMS, PaddleCase, paddle_case_names, run

LOSS_OPS = {"softmax_with_cross_entropy", "cross_entropy2", "sigmoid_cross_entropy_with_logits", "huber_loss",
            "label_smooth"}
CASES = paddle_case_names(LOSS_OPS)


@pytest.mark.parametrize("name", CASES)
def test_forward_matches_paddle(name):
    PaddleCase(name).check_forward(rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("name", CASES)
def test_grad_ops_match_paddle(name):
    PaddleCase(name).check_grad_ops()
    PaddleCase(name).check_lod_level_flags()


@pytest.mark.parametrize("name", CASES)
def test_grads_match_paddle(name):
    PaddleCase(name).check_grads(rtol=2e-5, atol=1e-6)


def test_reference_covers_every_op():
    assert {PaddleCase(n).op for n in CASES} == LOSS_OPS


# --------------------------------------------------------------------------
# independent float64 formulas
# --------------------------------------------------------------------------
def _log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def test_softmax_with_cross_entropy_hard_and_soft():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 5))
    lbl = rng.integers(0, 4, (3, 1, 5))
    res = run("softmax_with_cross_entropy", {"Logits": [x], "Label": [lbl]}, {"axis": 1})
    ls = _log_softmax(x, 1)
    np.testing.assert_allclose(res["Softmax"][0], np.exp(ls), rtol=1e-12)
    np.testing.assert_allclose(res["Loss"][0], -np.take_along_axis(ls, lbl, 1), rtol=1e-12)
    soft = rng.dirichlet(np.ones(4), (3, 5)).transpose(0, 2, 1)
    res = run("softmax_with_cross_entropy", {"Logits": [x], "Label": [soft]}, {"axis": 1, "soft_label": True})
    np.testing.assert_allclose(res["Loss"][0], -(soft * ls).sum(1, keepdims=True), rtol=1e-12)


def test_softmax_with_cross_entropy_grad_formula():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3))
    lbl = np.array([[0], [2], [-100], [1]])
    fwd = run("softmax_with_cross_entropy", {"Logits": [x], "Label": [lbl]})
    g = rng.standard_normal((4, 1))
    dx = run("softmax_with_cross_entropy_grad", {"Label": [lbl], "Softmax": fwd["Softmax"], "Loss@GRAD": [g]},
             {}, {"Logits@GRAD": 1})["Logits@GRAD"][0]
    want = (np.exp(_log_softmax(x, 1)) - np.eye(3)[np.where(lbl[:, 0] < 0, 0, lbl[:, 0])]) * g
    want[2] = 0  # ignore_index
    np.testing.assert_allclose(dx, want, rtol=1e-12)
    assert fwd["Loss"][0][2, 0] == 0


def test_softmax_clips_like_paddle():
    """Shifted logits below -64 are clipped before exp (Paddle's ValueClip)."""
    x = np.array([[0.0, -100.0]], np.float32)
    sm = run("softmax_with_cross_entropy", {"Logits": [x], "Label": [np.array([[1]])]})["Softmax"][0]
    assert sm[0, 1] == np.float32(np.exp(np.float32(-64)) / (1 + np.exp(np.float32(-64))))


def test_cross_entropy2_outputs():
    p = np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]])
    res = run("cross_entropy2", {"X": [p], "Label": [np.array([[1], [2]])]})
    np.testing.assert_allclose(res["Y"][0], -np.log([[0.5], [0.3]]))
    np.testing.assert_allclose(res["MatchX"][0], [[0.5], [0.3]])
    assert res["XShape"][0].shape == (2, 3, 0)  # [*x.shape, 0], unlike reshape2's XShape
    dx = run("cross_entropy_grad2", {"Label": [np.array([[1], [2]])], "MatchX": res["MatchX"],
                                     "XShape": res["XShape"], "Y@GRAD": [np.ones((2, 1))]},
             {}, {"X@GRAD": 1})["X@GRAD"][0]
    np.testing.assert_allclose(dx, [[0, -2, 0], [0, 0, -1 / 0.3]])


def test_sigmoid_cross_entropy_formula_and_normalize():
    x = np.array([[-3.0, 0.5], [2.0, -0.1]])
    lab = np.array([[0.0, 1.0], [-100.0, 0.3]])
    out = run("sigmoid_cross_entropy_with_logits", {"X": [x], "Label": [lab]}, {"normalize": True})["Out"][0]
    want = np.logaddexp(0, x) - x * lab
    want[1, 0] = 0
    np.testing.assert_allclose(out, want / 3, rtol=1e-12)


def test_sigmoid_cross_entropy_pos_weight():
    """With pos_weight Paddle 3.3.1 computes (1 - l) x + pw * softplus(-x)."""
    x, lab, pw = np.array([[-1.5, 0.7]]), np.array([[0.4, 0.2]]), np.array([[2.0, 3.0]])
    out = run("sigmoid_cross_entropy_with_logits", {"X": [x], "Label": [lab], "pos_weight": [pw]})["Out"][0]
    np.testing.assert_allclose(out, (1 - lab) * x + pw * np.logaddexp(0, -x), rtol=1e-12)
    dx = run("sigmoid_cross_entropy_with_logits_grad",
             {"X": [x], "Label": [lab], "pos_weight": [pw], "Out@GRAD": [np.ones((1, 2))]},
             {}, {"X@GRAD": 1})["X@GRAD"][0]
    np.testing.assert_allclose(dx, (1 - lab) - pw / (1 + np.exp(x)), rtol=1e-12)


def test_huber_loss_formula():
    x = np.array([[0.0], [0.0], [0.0]])
    y = np.array([[0.5], [-2.0], [3.0]])
    res = run("huber_loss", {"X": [x], "Y": [y]}, {"delta": 1.0})
    np.testing.assert_allclose(res["Out"][0], [[0.125], [1.5], [2.5]])
    np.testing.assert_allclose(res["Residual"][0], y)
    g = run("huber_loss_grad", {"Residual": res["Residual"], "Out@GRAD": [np.ones((3, 1))]}, {"delta": 1.0},
            {"X@GRAD": 1, "Y@GRAD": 1})
    np.testing.assert_allclose(g["Y@GRAD"][0], [[0.5], [-1.0], [1.0]])
    np.testing.assert_allclose(g["X@GRAD"][0], [[-0.5], [1.0], [-1.0]])


def test_label_smooth_formula():
    x = np.eye(4)[[1, 3]]
    out = run("label_smooth", {"X": [x]}, {"epsilon": 0.2})["Out"][0]
    np.testing.assert_allclose(out, 0.8 * x + 0.05)
    prior = np.array([[0.1, 0.2, 0.3, 0.4]])
    out = run("label_smooth", {"X": [x], "PriorDist": [prior]}, {"epsilon": 0.2})["Out"][0]
    np.testing.assert_allclose(out, 0.8 * x + 0.2 * prior)


def test_float32_stays_float32():
    x = np.ones((2, 3), np.float32)
    res = run("softmax_with_cross_entropy", {"Logits": [x], "Label": [np.array([[0], [1]])]})
    assert res["Loss"][0].dtype == res["Softmax"][0].dtype == np.float32
    assert run("huber_loss", {"X": [x], "Y": [x]}, {"delta": 1.0})["Out"][0].dtype == np.float32
    assert run("label_smooth", {"X": [x]}, {"epsilon": 0.1})["Out"][0].dtype == np.float32


# --------------------------------------------------------------------------
# golden programs and conventions
# --------------------------------------------------------------------------
@pytest.mark.parametrize("case", ["mlp_softmax_ce", "cnn_bn_pool"])
def test_golden_softmax_with_cross_entropy_grad(case):
    ops = pybackward.load(PROGRAMS / case / "backward.pb").global_block().ops
    fwd = next(o for o in ops if o.type == "softmax_with_cross_entropy")
    golden = next(o for o in ops if o.type == "softmax_with_cross_entropy_grad")
    f = FwdOp(fwd.type, {k: list(v) for k, v in fwd.inputs.items()}, {k: list(v) for k, v in fwd.outputs.items()},
              list(fwd.desc.attrs), frozenset({n + "@GRAD" for n in fwd.inputs["Label"]}))
    (g,) = registry.get(fwd.type).make_grad(f)
    assert g.type == golden.type
    assert g.inputs == {k: list(v) for k, v in golden.inputs.items()}
    assert g.outputs == {k: list(v) for k, v in golden.outputs.items()}
    attrs = opcheck.grad_op_attrs(g)
    for k in ("axis", "ignore_index", "soft_label", "use_softmax", "numeric_stable_mode"):
        assert attrs[k] == golden.attr(k)


def test_cross_entropy2_grad_type_is_cross_entropy_grad2():
    f = FwdOp("cross_entropy2", {"X": ["x"], "Label": ["l"]}, {"Y": ["y"], "MatchX": ["m"], "XShape": ["s"]},
              [], frozenset({"l@GRAD"}))
    (g,) = registry.get("cross_entropy2").make_grad(f)
    assert g.type == "cross_entropy_grad2"
    assert g.inputs == {"Label": ["l"], "MatchX": ["m"], "XShape": ["s"], "Y@GRAD": ["y@GRAD"]}
    assert g.outputs == {"X@GRAD": ["x@GRAD"]}


@pytest.mark.parametrize("op,ins,attrs", [
    ("softmax_with_cross_entropy", {"Logits": [np.ones((2, 3))], "Label": [np.array([[3], [0]])]}, {}),
    ("softmax_with_cross_entropy", {"Logits": [np.ones((2, 3))], "Label": [np.array([[1], [0]])]}, {"axis": 2}),
    ("cross_entropy2", {"X": [np.ones((2, 3))], "Label": [np.array([[0], [0], [0]])]}, {}),
])
def test_bad_labels_and_axes_raise(op, ins, attrs):
    with pytest.raises(ExecutionError):
        run(op, ins, attrs)
