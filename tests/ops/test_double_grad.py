"""Double-grad ops emit Paddle 3.3.1's slots.

The expected slots were read off live Paddle (gradients of y = f(x), then
gradients of the first gradient squared): e.g. relu_grad_grad reads Out and
grad_x@GRAD and writes grad_out@GRAD. Values are checked by finite
differences in tests/ops/test_registry.py (test_double_grad_kernel_...).
"""
from __future__ import annotations

import pytest

from pybackward.ops import registry
from pybackward.ops.opcheck import encode_attrs
from pybackward.ops.registry import FwdOp

#: grad op -> (its inputs, its outputs) -> Paddle's double-grad op (inputs, outputs)
PADDLE = {
    "relu_grad": ({"Out": ["o"], "Out@GRAD": ["o@GRAD"]}, {"X@GRAD": ["x@GRAD"]},
                  "relu_grad_grad", {"Out": ["o"], "grad_x@GRAD": ["x@GRAD@GRAD"]},
                  {"grad_out@GRAD": ["o@GRAD@GRAD"]}),
    "tanh_grad": ({"Out": ["o"], "Out@GRAD": ["o@GRAD"]}, {"X@GRAD": ["x@GRAD"]},
                  "tanh_grad_grad", {"Out": ["o"], "grad_out": ["o@GRAD"], "grad_x@GRAD": ["x@GRAD@GRAD"]},
                  {"Out@GRAD": ["o@GRAD"], "grad_out@GRAD": ["o@GRAD@GRAD"]}),
    "sigmoid_grad": ({"Out": ["o"], "Out@GRAD": ["o@GRAD"]}, {"X@GRAD": ["x@GRAD"]},
                     "sigmoid_grad_grad", {"Out": ["o"], "grad_out": ["o@GRAD"], "grad_x@GRAD": ["x@GRAD@GRAD"]},
                     {"Out@GRAD": ["o@GRAD"], "grad_out@GRAD": ["o@GRAD@GRAD"]}),
    "square_grad": ({"X": ["x"], "Out@GRAD": ["o@GRAD"]}, {"X@GRAD": ["x@GRAD"]},
                    "square_grad_grad", {"X": ["x"], "grad_out": ["o@GRAD"], "grad_x@GRAD": ["x@GRAD@GRAD"]},
                    {"X@GRAD": ["x@GRAD"], "grad_out@GRAD": ["o@GRAD@GRAD"]}),
    "leaky_relu_grad": ({"X": ["x"], "Out@GRAD": ["o@GRAD"]}, {"X@GRAD": ["x@GRAD"]},
                        "leaky_relu_grad_grad", {"X": ["x"], "grad_x@GRAD": ["x@GRAD@GRAD"]},
                        {"grad_out@GRAD": ["o@GRAD@GRAD"]}),
    "matmul_v2_grad": ({"X": ["x"], "Y": ["w"], "Out@GRAD": ["o@GRAD"]}, {"X@GRAD": ["x@GRAD"], "Y@GRAD": ["w@GRAD"]},
                       "matmul_v2_grad_grad",
                       {"X": ["x"], "Y": ["w"], "grad_out": ["o@GRAD"], "grad_x@GRAD": ["x@GRAD@GRAD"],
                        "grad_y@GRAD": ["w@GRAD@GRAD"]},
                       {"X@GRAD": ["x@GRAD"], "Y@GRAD": ["w@GRAD"], "grad_out@GRAD": ["o@GRAD@GRAD"]}),
    "elementwise_mul_grad": ({"X": ["x"], "Y": ["y"], "Out@GRAD": ["o@GRAD"]},
                             {"X@GRAD": ["x@GRAD"], "Y@GRAD": ["y@GRAD"]},
                             "elementwise_mul_grad_grad",
                             {"DDX": ["x@GRAD@GRAD"], "DDY": ["y@GRAD@GRAD"], "DOut": ["o@GRAD"], "X": ["x"],
                              "Y": ["y"]},
                             {"DDOut": ["o@GRAD@GRAD"], "X@GRAD": ["x@GRAD"], "Y@GRAD": ["y@GRAD"]}),
}


@pytest.mark.parametrize("grad_type", sorted(PADDLE))
def test_double_grad_slots_are_paddles(grad_type):
    ins, outs, gg_type, want_ins, want_outs = PADDLE[grad_type]
    fwd = FwdOp(grad_type, ins, outs, encode_attrs({}), frozenset())
    (g,) = registry.get(grad_type).make_grad(fwd)
    assert g.type == gg_type
    assert dict(sorted(g.inputs.items())) == dict(sorted(want_ins.items()))
    assert dict(sorted(g.outputs.items())) == dict(sorted(want_outs.items()))
    assert registry.get(gg_type).grad_of == grad_type and registry.get(gg_type).kernel is not None

PADDLE_MORE = {
    "reshape2_grad": ({"XShape": ["xs"], "Out@GRAD": ["o@GRAD"]}, {"X@GRAD": ["x@GRAD"]},
                      "reshape2_grad_grad", {"DDX": ["x@GRAD@GRAD"], "DOut": ["o@GRAD"]},
                      {"DDOut": ["o@GRAD@GRAD"]}),
    "reduce_mean_grad": ({"X": ["x"], "Out@GRAD": ["o@GRAD"]}, {"X@GRAD": ["x@GRAD"]},
                         "reduce_mean", {"X": ["x@GRAD@GRAD"]}, {"Out": ["o@GRAD@GRAD"]}),
}


@pytest.mark.parametrize("grad_type", sorted(PADDLE_MORE))
def test_more_double_grad_slots_are_paddles(grad_type):
    ins, outs, gg_type, want_ins, want_outs = PADDLE_MORE[grad_type]
    fwd = FwdOp(grad_type, ins, outs, encode_attrs({"dim": [1], "keep_dim": False}), frozenset())
    (g,) = registry.get(grad_type).make_grad(fwd)
    assert (g.type, dict(sorted(g.inputs.items())), dict(sorted(g.outputs.items()))) == \
        (gg_type, dict(sorted(want_ins.items())), dict(sorted(want_outs.items())))
