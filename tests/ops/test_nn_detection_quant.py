"""Kernels of the vision, detection and quantization families (ops/quant/fake_quant.py,
ops/nn/deformable_conv.py, ops/detection/boxes.py) against Paddle 3.3.1, where the shared
test (tests/ops/test_kernels_vs_paddle.py) cannot: Paddle registers the fake
quantization kernels for float32 only, so their float64 run is refused and
their float32 values are compared here (testdata/kernels/<family>.paddle.*)."""
from __future__ import annotations

import numpy as np
import pytest

from pybackward.ops import opcheck, registry
from test_kernels_vs_paddle import KDIR, _compare, _family

MINE = [f for f in ("quant", "vision_more", "detection", "detection_nms", "detection_rpn", "vision_extra") if (KDIR / f"{f}.paddle.json").exists()]


def _float32_only():
    for family in MINE:
        cases, _, report, _ = _family(family)
        for name, runs in report.items():
            f64, f32 = runs.get("float64", {}), runs.get("float32", {})
            if "no kernels" in f64.get("error", "") and "fetched" in f32:
                yield pytest.param(family, name, id=name)


@pytest.mark.parametrize("family,name", list(_float32_only()))
def test_float32_only_kernels_equal_paddle(family, name):
    cases, arrays, report, paddle = _family(family)
    case = cases[name]
    ins = {slot: [arrays[f"{name}|in|{slot}|{i}"] for i in range(n)] for slot, n in case["inputs"].items()}
    ins = {s: [a.astype(np.float32) if a.dtype.kind == "f" else a for a in v] for s, v in ins.items()}
    cots = {slot: [arrays[f"{name}|cot|{slot}|{i}"].astype(np.float32) if use else None
                   for i, use in enumerate(flags)] for slot, flags in case["loss"].items()}
    outs, grads = opcheck.run_with_grads(case["op"], ins, case["attrs"], case["outputs"], cots)
    for key in report[name]["float32"]["fetched"]:
        kind, slot, i = key.split("|")
        if kind == "out" and slot in registry.get(case["op"]).intermediate_outputs:
            continue
        got = (outs if kind == "out" else grads).get(slot, [None])[int(i)]
        want = paddle[f"{name}|float32|{key}"]
        if case["op"] == "fake_quantize_range_abs_max" and slot == "OutScales":
            # Paddle's window is the var's previous (here uninitialised) memory: only the
            # entry this step writes is defined
            k = int(arrays[f"{name}|in|Iter|0"].reshape(-1)[0]) % int(case["attrs"]["window_size"])
            got, want = got[k:k + 1], want[k:k + 1]
        _compare(f"{name} [float32] {key}", got, want, "float32", None)


def test_warprnnt_fastemit_gradient_equals_paddle():
    """FastEmit (fastemit_lambda 0.5) scales the label emissions' gradient by
    1.5 and leaves the loss alone; Paddle's values from
    testdata/kernels/vision_extra_fastemit.py (sum of the losses' gradient)."""
    ref = np.load(KDIR / "vision_extra.fastemit.npz")
    ins = {"input": [ref["acts"]], "label": [ref["label"]], "input_lengths": [ref["input_lengths"]],
           "label_lengths": [ref["label_lengths"]]}
    outs, grads = opcheck.run_with_grads("warprnnt", ins, {"blank": 0, "fastemit_lambda": 0.5},
                                         {"loss": 1, "warprnntgrad": 1}, {"loss": [np.ones(2)]})
    np.testing.assert_allclose(outs["loss"][0], ref["loss"], rtol=1e-10)
    np.testing.assert_allclose(grads["input"][0], ref["grad"], rtol=1e-9, atol=1e-12)


def test_box_coder_decode_with_variance_attr():
    """decode_center_size with the `variance` attr: Paddle's float32 values
    (paddle.vision.ops.box_coder, Paddle 3.3.1). Paddle's float64 kernel reads
    the float attr's bytes as doubles (tiny variances: it returns the priors),
    docs/deviations.md; pybackward applies the variances in both dtypes."""
    prior = np.array([[0.1, 0.2, 0.5, 0.6], [0.3, 0.1, 0.9, 0.4], [0.0, 0.0, 1.0, 1.0]])
    t = np.random.default_rng(0).uniform(-0.5, 0.5, (2, 3, 4))
    attrs = {"code_type": "decode_center_size", "box_normalized": True, "axis": 0, "variance": [0.1, 0.1, 0.2, 0.2]}
    out = opcheck.run_kernel("box_coder", {"PriorBox": [prior.astype(np.float32)], "TargetBox": [t.astype(np.float32)]},
                             attrs, {"OutputBox": ["o"]})["OutputBox"][0]
    np.testing.assert_allclose(out[0, 0], [0.12302193, 0.20922482, 0.48793504, 0.5723582], rtol=1e-6)
    out64 = opcheck.run_kernel("box_coder", {"PriorBox": [prior], "TargetBox": [t]}, attrs,
                               {"OutputBox": ["o"]})["OutputBox"][0]
    np.testing.assert_allclose(out64, out, rtol=1e-5, atol=1e-7)
