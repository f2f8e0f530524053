"""nce draws Paddle's negative classes: its std::mt19937_64 + libstdc++ distributions, reproduced."""
from __future__ import annotations

import json

import numpy as np
import pytest

from pybackward.ops import opcheck
from conftest import TESTDATA

K = TESTDATA / "kernels"


@pytest.mark.parametrize("name", ["nce-1", "nce-2", "nce-3"])   # uniform, log-uniform, custom (alias)
def test_sampled_classes_are_paddles(name):
    case = {c["case"]: c for c in json.loads((K / "nce.samples.json").read_text())}[name]
    arrays, paddle = dict(np.load(K / "nce.samples.npz")), dict(np.load(K / "nce.paddle.npz"))
    ins = {s: [arrays[f"{name}|in|{s}|{i}"] for i in range(n)] for s, n in case["inputs"].items()}
    if name == "nce-3":   # Paddle reads the custom distribution as float32
        ins = {s: [a.astype(np.float32) if a.dtype.kind == "f" else a for a in v] for s, v in ins.items()}
    outs = opcheck.run_kernel("nce", ins, case["attrs"], {s: [f"{s}{i}" for i in range(n)]
                                                          for s, n in case["outputs"].items()})
    want = paddle[f"{name}|float32|out|SampleLabels|0"]
    assert np.array_equal(outs["SampleLabels"][0], want)
    assert len(np.unique(want[:, 1:])) > 1                      # really drawn, not constant


def test_seed_zero_draws_from_the_interpreters_generator():
    x, w = np.ones((2, 3)), np.ones((9, 3))
    ins = {"Input": [x], "Label": [np.array([[1], [2]])], "Weight": [w]}
    attrs = {"num_total_classes": 9, "num_neg_samples": 4, "seed": 0}
    outs = {"Cost": ["c"], "SampleLogits": ["l"], "SampleLabels": ["s"]}
    a = opcheck.run_kernel("nce", ins, attrs, outs, np.random.default_rng(1))["SampleLabels"][0]
    b = opcheck.run_kernel("nce", ins, attrs, outs, np.random.default_rng(1))["SampleLabels"][0]
    assert np.array_equal(a, b) and a.shape == (2, 5)
