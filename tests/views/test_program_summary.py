"""`pybackward.summary`: feeds, parameters, loss candidates, backward present,
op histogram; `needed_inputs`: what a run must be given."""
from __future__ import annotations

import json

import pytest

import pybackward
from pybackward.views.summary import needed_inputs

from conftest import PROGRAMS, TESTDATA, case_json, golden_cases

MLP = TESTDATA / "paddle_files" / "mlp"


def test_summary_of_a_program_paddle_saved():
    s = pybackward.summary(pybackward.load(MLP / "m.pdmodel"))
    assert [(f.name, f.shape, f.dtype) for f in s.feeds] == [("label", [-1, 1], "int64"), ("x", [-1, 4], "float32")]
    assert [p.name for p in s.parameters] == ["fc_0.b_0", "fc_0.w_0", "fc_1.b_0", "fc_1.w_0"]
    assert (s.parameter_elements, s.parameter_bytes) == (4 * 8 + 8 + 8 * 3 + 3, 4 * 67)
    assert [(v.name, v.shape, v.op) for v in s.losses] == [("mean_1.tmp_0", [], "reduce_mean")]
    assert not s.loss_marked and not s.has_backward and s.optimizer_ops == 0
    assert s.op_types == {"elementwise_add": 2, "mul": 2, "reduce_mean": 2, "relu": 1,
                          "softmax_with_cross_entropy": 1}
    doc = s.to_json()
    assert json.loads(json.dumps(doc)) == doc and doc["has_backward"] is False
    text = s.to_text()
    assert "loss candidates (one float element, read by no op): mean_1.tmp_0" in text
    assert "parameters: 4 (67 elements, 268 B)" in text and "backward: none" in text


def test_summary_with_backward_and_optimizer_uses_the_loss_mark():
    s = pybackward.summary(pybackward.load(TESTDATA / "paddle_files" / "adam" / "adam.pdmodel"))
    assert s.has_backward and s.loss_marked and [v.name for v in s.losses] == ["mean_1.tmp_0"]
    assert s.optimizer_ops == 4 and s.op_types["adam"] == 4
    assert len(s.other_persistables) == 17                 # moments, beta pows, learning rate
    assert "backward: present (9 backward ops, 4 optimizer ops)" in s.to_text()


def test_summary_of_an_inference_program_reads_feed_ops():
    s = pybackward.summary(pybackward.load(MLP / "inf.pdmodel"))
    assert [f.name for f in s.feeds] == ["x"]             # x has no need_check_feed there: the feed op says it
    assert not s.parameters and [v.name for v in s.other_persistables] == ["fc_0.b_0", "fc_0.w_0",
                                                                           "fc_1.b_0", "fc_1.w_0"]
    assert s.losses == []                                  # the fetched logits are [-1, 3]


@pytest.mark.parametrize("case", golden_cases())
def test_the_recorded_loss_of_every_golden_case_is_a_candidate(case):
    c = case_json(case)
    s = pybackward.summary(pybackward.load(PROGRAMS / case / "forward.pb"))
    names = [v.name for v in s.losses]
    apis = {v["api"] for v in c["variants"].values()}
    if apis == {"gradients"} and c["loss"] not in names:
        return          # a gradients target need not be a scalar
    assert c["loss"] in names
    if case != "append_twice":                             # two losses on purpose
        assert names == [c["loss"]]
    marked = pybackward.summary(pybackward.load(PROGRAMS / case / c["variants"]["default"]["file"]))
    assert marked.has_backward


def test_constants_and_read_scalars_are_not_losses():
    prog = pybackward.load(PROGRAMS / "fit_a_line" / "forward.pb")
    block = prog.global_block()
    block.create_var("k", shape=[1], dtype="float32")
    block.append_op("fill_constant", outputs={"Out": ["k"]},
                    attrs={"shape": [1], "dtype": 5, "value": 1.0})
    block.create_var("twice", shape=[], dtype="float32")
    block.append_op("scale", inputs={"X": ["mean_0.tmp_0"]}, outputs={"Out": ["twice"]}, attrs={"scale": 2.0})
    assert [v.name for v in pybackward.summary(prog).losses] == ["twice"]


def test_needed_inputs_are_the_feeds_and_state_read_before_written():
    feeds, state = needed_inputs(pybackward.load(MLP / "m.pdmodel"))
    assert sorted(v.name for v in feeds) == ["label", "x"]
    assert sorted(v.name for v in state) == ["fc_0.b_0", "fc_0.w_0", "fc_1.b_0", "fc_1.w_0"]
    feeds, state = needed_inputs(pybackward.load(MLP / "inf.pdmodel"))
    assert [v.name for v in feeds] == ["x"] and len(state) == 4
