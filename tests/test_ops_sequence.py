"""The sequence (LoD) families (ops/sequence.py, seq_conv.py, rnn_legacy.py):
float32-only Paddle kernels against Paddle's values, output LoDs, and LoD
through the interpreter (feeds, sharing, fetch) and the CLI."""
from __future__ import annotations

import numpy as np
import pytest

from pybackward.ops import opcheck, registry
from test_kernels_vs_paddle import KDIR, _compare, _family

FAMILIES = ("sequence", "seq_conv", "rnn_legacy")


def _float32_only_cases():
    """Cases Paddle runs in float32 but refuses in float64 (float32-only kernels)."""
    for family in FAMILIES:
        if not (KDIR / f"{family}.paddle.json").exists():
            continue
        cases, _, report, _ = _family(family)
        for name in cases:
            runs = report.get(name, {})
            if "error" in runs.get("float64", {}) and "fetched" in runs.get("float32", {}):
                yield pytest.param(family, name, id=name)


@pytest.mark.parametrize("family,name", list(_float32_only_cases()))
def test_float32_only_ops_equal_paddle_in_float32(family, name):
    cases, arrays, report, paddle = _family(family)
    case = cases[name]
    ins = {slot: [arrays[f"{name}|in|{slot}|{i}"].astype(np.float32)
                  if arrays[f"{name}|in|{slot}|{i}"].dtype.kind == "f" else arrays[f"{name}|in|{slot}|{i}"]
                  for i in range(n)] for slot, n in case["inputs"].items()}
    cots = {slot: [arrays[f"{name}|cot|{slot}|{i}"].astype(np.float32) if use else None
                   for i, use in enumerate(flags)] for slot, flags in case["loss"].items()}
    out_lods: dict = {}
    outs, grads = opcheck.run_with_grads(case["op"], ins, case["attrs"], case["outputs"], cots,
                                         lod=case.get("lod"), out_lods=out_lods)
    run = report[name]["float32"]
    for key in run["fetched"]:
        kind, slot, i = key.split("|")
        if kind == "out" and slot in registry.get(case["op"]).intermediate_outputs:
            continue
        got = (outs if kind == "out" else grads)[slot][int(i)]
        _compare(f"{name} [float32] {key}", got, paddle[f"{name}|float32|{key}"], "float32", None)
        if kind == "out":
            assert out_lods[slot][int(i)] == run.get("lods", {}).get(key), f"{name} {key}: LoD"


def _paddle_runs(family):
    if not (KDIR / f"{family}.paddle.json").exists():
        return
    cases, _, report, _ = _family(family)
    for name in cases:
        for dtype, run in report.get(name, {}).items():
            if "fetched" in run:
                yield pytest.param(family, name, dtype, id=f"{name}-{dtype}")


@pytest.mark.parametrize("family,name,dtype", list(_paddle_runs("rnn_legacy")))
def test_lstm_gru_intermediates_are_paddles_batch_layout(family, name, dtype):
    """BatchGate, BatchCellPreAct, BatchResetHiddenPrev, BatchHidden (skipped by
    test_kernels_vs_paddle as internal) are Paddle's values and LoDs, row for row."""
    cases, arrays, report, paddle = _family(family)
    case = cases[name]
    ins = {slot: [arrays[f"{name}|in|{slot}|{i}"].astype(dtype) for i in range(n)]
           for slot, n in case["inputs"].items()}
    out_lods: dict = {}
    outs, _ = opcheck.run_with_grads(case["op"], ins, case["attrs"], case["outputs"], {}, lod=case.get("lod"),
                                     out_lods=out_lods)
    run = report[name][dtype]
    inter = registry.get(case["op"]).intermediate_outputs
    checked = 0
    for key in run["fetched"]:
        kind, slot, i = key.split("|")
        if kind == "out" and slot in inter:
            want = paddle[f"{name}|{dtype}|{key}"]
            other = paddle.get(f"{name}|float64|{key}") if dtype == "float32" else None
            _compare(f"{name} [{dtype}] {key}", outs[slot][int(i)], want, dtype, other)
            assert out_lods[slot][int(i)] == run.get("lods", {}).get(key), f"{name} {key}: LoD"
            checked += 1
    assert checked == len(inter)
