"""The rnn op (paddle.nn.LSTM / GRU / SimpleRNN in static mode) against
Paddle 3.3.1's own values: testdata/rnn/<case>/ holds the program Paddle
built, Paddle's backward program and what Paddle's Executor computed
(testdata/rnn/gen_rnn.py). The interpreter must reproduce the outputs and
every gradient, on Paddle's backward program and on the one pybackward's pass
appends; finite differences are covered by the registry-wide samples
(tests/ops/test_registry.py) and by a float64 program check here.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import pybackward
from pybackward.base.errors import ExecutionError
from pybackward.interpreter.gradcheck import check_gradients
from pybackward.interpreter.executor import Executor, Scope
from pybackward.ops import opcheck

RNN = Path(__file__).resolve().parents[2] / "testdata" / "rnn"
CASES = sorted(p.name for p in RNN.iterdir() if (p / "case.json").exists())

#: Cases where Paddle 3.3.1's rnn_grad is wrong, and why. pybackward computes
#: the true gradient there (checked by finite differences below); Paddle's
#: forward values are still reproduced exactly.
_REVERSE_PAD = ("Paddle's rnn_grad takes the previous step's masked output (zero at a padded step) as "
                "the previous hidden state, but the forward carried h0 there: in the backward direction "
                "a padded sequence's first valid step then gets W_hh (and, for GRU, update-gate) "
                "gradients as if h0 were zero. Exact only when PreState h is zero (the "
                "`*_no_states` cases agree with Paddle)")
KNOWN_PADDLE_WRONG = {"lstm_l2_bidi_lens": _REVERSE_PAD, "gru_l2_bidi_lens": _REVERSE_PAD,
                      "rnn_tanh_l2_bidi_lens": _REVERSE_PAD}


def _load(case: str):
    spec = json.loads((RNN / case / "case.json").read_text())
    ref = dict(np.load(RNN / case / "ref.npz"))
    feed = {k[5:]: v for k, v in ref.items() if k.startswith("feed:")}
    params = {k[6:]: v for k, v in ref.items() if k.startswith("param:")}
    fetched = {k[6:]: v for k, v in ref.items() if k.startswith("fetch:")}
    return spec, feed, params, fetched


def test_the_rnn_cases_are_there():
    assert {"lstm_l1", "lstm_l2_bidi_lens", "gru_l1", "gru_l2_bidi_lens", "rnn_tanh_l2_bidi_lens",
            "rnn_relu_l1_lens", "lstm_batch_major_no_states"} <= set(CASES)


@pytest.mark.parametrize("which", ["paddle", "ours"])
@pytest.mark.parametrize("case", CASES)
def test_rnn_values_and_gradients_match_paddle(case, which):
    spec, feed, params, want = _load(case)
    if which == "paddle":
        prog = pybackward.load(RNN / case / "backward.pb")
    else:
        prog = pybackward.load(RNN / case / "forward.pb")
        pybackward.append_backward(prog.global_block().var(spec["loss"]))
    scope = Scope()
    for k, v in params.items():
        scope.set(k, v)
    got = Executor().run(prog, feed=feed, fetch_list=spec["fetch"], scope=scope)
    differ = []
    for name, g in zip(spec["fetch"], got):
        assert g.dtype == want[name].dtype and g.shape == want[name].shape, name
        if case in KNOWN_PADDLE_WRONG and name.endswith("@GRAD"):
            if not np.allclose(g, want[name], rtol=2e-4, atol=2e-5):
                differ.append(name)
            continue
        np.testing.assert_allclose(g, want[name], rtol=2e-4, atol=2e-5, err_msg=f"{case}: {name}")
    if case in KNOWN_PADDLE_WRONG:
        assert differ, f"{case}: now agrees with Paddle everywhere; drop it from KNOWN_PADDLE_WRONG"


@pytest.mark.parametrize("case", sorted(KNOWN_PADDLE_WRONG) + ["lstm_batch_major_no_states"])
def test_rnn_program_gradients_match_finite_differences(case):
    """Every gradient, where Paddle is wrong included, against central
    differences of the loss on a float64 copy of the program."""
    spec, feed, params, _ = _load(case)
    prog = pybackward.load(RNN / case / "forward.pb")
    wrt = sorted(params) + [n for n in ("x", "h0", "c0") if n in feed]
    rows = check_gradients(prog, spec["loss"], feed=feed, params=params, wrt=wrt)
    bad = [r for r in rows if not r.ok]
    assert rows and not bad, bad


def _call(mode, attrs=None, lens=None, T=2, B=2, I=2, H=2):
    g = {"LSTM": 4, "GRU": 3}.get(mode, 1)
    ins = {"Input": [np.zeros((T, B, I))], "PreState": [np.zeros((1, B, H))] * (2 if mode == "LSTM" else 1),
           "WeightList": [np.zeros((g * H, I)), np.zeros((g * H, H)), np.zeros(g * H), np.zeros(g * H)]}
    if lens is not None:
        ins["SequenceLength"] = [np.array(lens, np.int64)]
    a = {"mode": mode, "num_layers": 1, "is_bidirec": False, "dropout_prob": 0.0, "is_test": False}
    a.update(attrs or {})
    return opcheck.run_kernel("rnn", ins, a, {"Out": ["o"], "State": ["h"] * (2 if mode == "LSTM" else 1),
                                             "DropoutState": ["d"], "Reserve": ["r"]})


def test_rnn_outputs_paddles_dropout_state_and_reserve_shapes():
    res = _call("LSTM", T=3, B=2, I=2, H=4)
    assert res["DropoutState"][0].dtype == np.uint8 and res["DropoutState"][0].shape == (3, 2, 4)
    assert res["Reserve"][0].shape == (6, 3 * 2 * 4)       # (gates + 2) * layers + layers - 1 rows
    res = _call("GRU", {"is_test": True})
    assert "DropoutState" not in res and "Reserve" not in res


def test_rnn_rejects_what_it_cannot_reproduce():
    with pytest.raises(ExecutionError, match="dropout_prob=0.5 is not supported"):
        _call("LSTM", {"dropout_prob": 0.5})
    _call("LSTM", {"dropout_prob": 0.5, "is_test": True})   # no dropout at test time
    with pytest.raises(ExecutionError, match="mode='LSTMX' is not supported"):
        _call("LSTMX")
    with pytest.raises(ExecutionError, match="WeightList must hold 4 tensors"):
        opcheck.run_kernel("rnn", {"Input": [np.zeros((2, 2, 2))], "PreState": [np.zeros((1, 2, 2))],
                                   "WeightList": [np.zeros((2, 2))]},
                           {"mode": "RNN_TANH", "num_layers": 1}, {"Out": ["o"], "State": ["h"]})
