"""pybackward's PIR pass against Paddle 3.3.1's on every golden of testdata/pir_backward/
(real models built in PIR mode, the options, control flow): the same program op for op
(canonically equal), the same pairs, and Paddle's values when the program runs."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from pir_cases import cases
from pybackward.backward.pir.api import append_backward, calc_gradient
from pybackward.base.errors import PaddleDeviationWarning, PyBackwardError
from pybackward.interpreter.pir_executor import run
from pybackward.pir import codec
from pybackward.pir.canonical import diff, equal

#: Goldens where pybackward departs from Paddle on purpose (docs/deviations.md): compared with
#: paddle_exact=True, and the default checked against finite differences elsewhere.
DEVIATES = {"cond_in_while"}
#: Known differences, each named (strict: the test fails once they are gone, to be removed then).
#: None now: the RNN cells over tensor arrays (array_read's type, vjp.array_read_type) and
#: upsample_decoder (interp with every optional operand absent, vjp._absent_body) are equal.
KNOWN: dict[str, str] = {}
HEAVY = {"densenet121", "inception_v3", "googlenet", "wide_resnet50_2", "resnext", "mobilenet_v3_large",
         "shufflenet_v2", "crnn_ctc", "bert_encoder", "transformer_decoder"}


def _ref(prog, ref):
    if ref is None:
        return None
    return prog.value(ref["id"] if ref.get("id") else ref["name"])


def _refs(prog, refs):
    if refs is None:
        return None
    return [_ref(prog, r) for r in refs] if isinstance(refs, list) else [_ref(prog, refs)]


def _call(case, prog, paddle_exact: bool):
    a = case.args
    if case.call == "append_backward":
        return append_backward(_ref(prog, a["loss"]), _refs(prog, a.get("parameter_list")),
                               _refs(prog, a.get("no_grad_set")), program=prog, paddle_exact=paddle_exact)
    tg = a.get("target_gradients")
    return calc_gradient(_refs(prog, a["targets"]), _refs(prog, a["inputs"]),
                         None if tg is None else [_ref(prog, g) for g in tg], _refs(prog, a.get("no_grad_set")),
                         program=prog, paddle_exact=paddle_exact)


def _answered():
    return [c for c in cases() if c.error is None]


def _marked(c):
    marks = [pytest.mark.slow] if c.name in HEAVY else []
    if c.name in KNOWN:
        marks.append(pytest.mark.xfail(reason=KNOWN[c.name], strict=True))
    return pytest.param(c, marks=marks)


@pytest.mark.parametrize("case", [_marked(c) for c in _answered()], ids=lambda c: c.name)
def test_op_for_op_equal_to_paddles_pass(case):
    prog = case.forward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PaddleDeviationWarning)
        got = _call(case, prog, paddle_exact=case.name in DEVIATES)
    again = codec.loads(codec.dumps(prog))
    want = case.backward()
    assert equal(again, want), "\n".join(diff(again, want, names=("pybackward", "paddle"))[:80])
    if case.returned is not None:
        if case.call == "append_backward":
            ours = [[f"%{p.id}", None if g is None else f"%{g.id}"] for p, g in got]
        else:
            ours = [None if g is None else f"%{g.id}" for g in got]
        assert ours == case.returned


@pytest.mark.parametrize("case", [c for c in _answered() if c.path("values") and c.path("feeds")
                                  and c.name not in HEAVY and c.group != "model"]
                         + [c for c in _answered() if c.name in ("lenet", "simplernn", "text_cnn")],
                         ids=lambda c: c.name)
def test_values_equal_paddles(case):
    prog = case.forward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PaddleDeviationWarning)
        _call(case, prog, paddle_exact=case.name in DEVIATES)
    want = case.values()
    got = run(prog, case.feeds(), case.params(), list(want), paddle_seed=2024)
    for k, v in want.items():
        np.testing.assert_allclose(got[k], v, rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("case", [c for c in cases() if c.error is not None], ids=lambda c: c.name)
def test_where_paddle_refuses_pybackward_answers_or_refuses_clearly(case):
    """Paddle refuses names in parameter_list / no_grad_set (TypeError); pybackward takes them.
    Other refusals must be a PyBackwardError, not a crash."""
    prog = case.forward()
    try:
        _call(case, prog, paddle_exact=False)
    except PyBackwardError:
        assert "names" not in case.name
