"""Regression tests for the nn family's kernels (issue #22): ops of the
family run inside whole programs, as real models use them."""
from __future__ import annotations

import numpy as np
import pytest

from pybackward import static

F = static.nn.functional


# --------------------------------------------------------------------------
# dropout with is_test=True (VGG, SqueezeNet, GoogLeNet, Transformers)
# --------------------------------------------------------------------------
@pytest.mark.parametrize("mode,scale", [("downscale_in_infer", 0.65), ("upscale_in_train", 1.0)])
def test_test_mode_dropout_is_differentiable(mode, scale):
    """Paddle 3.3.1's test-mode dropout writes no Mask and its dropout_grad
    reads none: X@GRAD is dY*(1-p) (downgrade_in_infer) or dY (upscale).
    Before the fix the interpreter stopped at dropout_grad ("input 'Mask'
    has no value")."""
    main, startup = static.Program(), static.Program()
    with static.program_guard(main, startup):
        x = static.data("x", [2, 3])
        x.stop_gradient = False
        y = F.dropout(x, 0.35, training=False, mode=mode)
        loss = static.sum(y * 2.0)
        static.append_backward(loss)
    xv = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    out, gx = static.Executor().run(main, feed={"x": xv}, fetch_list=[y, "x@GRAD"], scope=static.Scope())
    np.testing.assert_allclose(out, xv * np.float32(scale), rtol=1e-6)
    np.testing.assert_allclose(gx, np.full((2, 3), 2 * scale, np.float32), rtol=1e-6)
    assert gx.dtype == np.float32


def test_train_mode_dropout_grad_still_needs_its_mask():
    from pybackward.base.errors import ExecutionError
    from pybackward.ops import opcheck
    g = np.ones((2, 2), np.float32)
    with pytest.raises(ExecutionError, match="Mask"):
        opcheck.run_kernel("dropout_grad", {"Mask": [None], "Out@GRAD": [g]},
                           {"dropout_prob": 0.5, "is_test": False}, {"X@GRAD": ["dx"]})


# --------------------------------------------------------------------------
# interpolation: the size inputs (Paddle refuses them in one-op programs, so
# testdata/kernels checks the attr forms; these say the inputs mean the same)
# --------------------------------------------------------------------------
def _run(op, ins, attrs, outs=("Out",)):
    from pybackward.ops import opcheck
    res = opcheck.run_kernel(op, ins, attrs, {s: [s.lower()] for s in outs})
    return {k: v[0] for k, v in res.items()}


@pytest.mark.parametrize("op,method,shape,sizes", [
    ("nearest_interp_v2", "nearest", (1, 2, 3, 4), (5, 7)),
    ("bicubic_interp_v2", "bicubic", (1, 2, 3, 4), (5, 6)),
    ("linear_interp_v2", "linear", (2, 3, 4), (7,)),
    ("trilinear_interp_v2", "trilinear", (1, 2, 2, 3, 4), (3, 5, 6)),
])
def test_interp_size_inputs_mean_what_the_attrs_do(op, method, shape, sizes):
    x = np.random.default_rng(0).standard_normal(shape)
    names = ("out_d", "out_h", "out_w")[3 - len(sizes):]
    base = {"interp_method": method, "align_corners": False, "align_mode": 0}
    want = _run(op, {"X": [x]}, {**base, **dict(zip(names, sizes))})["Out"]
    by_outsize = _run(op, {"X": [x], "OutSize": [np.array(sizes, np.int32)]}, base)["Out"]
    by_sizetensor = _run(op, {"X": [x], "SizeTensor": [np.array([s], np.int32) for s in sizes]},
                         {**base, **dict(zip(names, [1] * len(sizes)))})["Out"]
    np.testing.assert_array_equal(by_outsize, want)
    np.testing.assert_array_equal(by_sizetensor, want)


def test_interp_scale_tensor_means_the_scale_attr():
    x = np.random.default_rng(1).standard_normal((1, 2, 3, 3))
    base = {"interp_method": "nearest", "align_corners": False}
    want = _run("nearest_interp_v2", {"X": [x]}, {**base, "scale": [1.5, 2.5]})["Out"]
    got = _run("nearest_interp_v2", {"X": [x], "Scale": [np.array([1.5, 2.5], np.float32)]}, base)["Out"]
    np.testing.assert_array_equal(got, want)
    assert got.shape == (1, 2, 4, 7)
    one = _run("nearest_interp_v2", {"X": [x], "Scale": [np.array([2.0], np.float32)]}, base)["Out"]
    assert one.shape == (1, 2, 6, 6)


def test_interp_rejects_a_method_its_op_does_not_compute():
    from pybackward.base.errors import ExecutionError
    with pytest.raises(ExecutionError, match="interp_method"):
        _run("nearest_interp_v2", {"X": [np.zeros((1, 1, 2, 2))]}, {"interp_method": "bilinear", "out_h": 3,
                                                                     "out_w": 3})


# --------------------------------------------------------------------------
# float32-only Paddle kernels (hinge_loss, log_loss, lrn): their float32 values
# against Paddle's (testdata/kernels/*.paddle.*; float64 Paddle refuses)
# --------------------------------------------------------------------------
@pytest.mark.parametrize("family,name", [("loss_more", "hinge_loss-0"), ("loss_more", "log_loss-0"),
                                         ("loss_more", "log_loss-1"), ("nn_more", "lrn-0"), ("nn_more", "lrn-1"),
                                         ("nn_more", "lrn-2")])
def test_float32_only_ops_equal_paddle_in_float32(family, name):
    from pybackward.ops import opcheck, registry
    from test_kernels_vs_paddle import _compare, _family
    cases, arrays, report, paddle = _family(family)
    case = cases[name]
    assert "error" in report[name]["float64"] and "fetched" in report[name]["float32"]
    ins = {slot: [arrays[f"{name}|in|{slot}|{i}"].astype(np.float32) for i in range(n)]
           for slot, n in case["inputs"].items()}
    cots = {slot: [arrays[f"{name}|cot|{slot}|{i}"].astype(np.float32) if use else None
                   for i, use in enumerate(flags)] for slot, flags in case["loss"].items()}
    outs, grads = opcheck.run_with_grads(case["op"], ins, case["attrs"], case["outputs"], cots)
    for key in report[name]["float32"]["fetched"]:
        kind, slot, i = key.split("|")
        if kind == "out" and slot in registry.get(case["op"]).intermediate_outputs:
            continue
        got = (outs if kind == "out" else grads)[slot][int(i)]
        _compare(f"{name} [float32] {key}", got, paddle[f"{name}|float32|{key}"], "float32", None)


def test_affine_grid_output_shape_tensor_means_the_attr():
    theta = np.random.default_rng(2).standard_normal((2, 2, 3))
    want = _run("affine_grid", {"Theta": [theta]}, {"output_shape": [2, 1, 4, 3], "align_corners": True},
                ("Output",))["Output"]
    got = _run("affine_grid", {"Theta": [theta], "OutputShape": [np.array([2, 1, 4, 3], np.int32)]},
               {"align_corners": True}, ("Output",))["Output"]
    np.testing.assert_array_equal(got, want)
    assert got.shape == (2, 4, 3, 2)


def test_warpctc_norm_by_times_divides_the_grad_by_each_sequence_length():
    """Paddle's warpctc_grad (padded form): Logits@GRAD = WarpCTCGrad * Loss@GRAD,
    divided by LogitsLength[b] with norm_by_times (not a derivative, so not
    in the finite-difference samples)."""
    from pybackward.ops import registry
    sample = registry.get("warpctc").samples(np.random.default_rng(0))[0]
    fwd = _run("warpctc", sample.inputs, {"blank": 0}, ("Loss", "WarpCTCGrad"))
    dl = np.array([[0.5], [2.0]])
    ins = {"WarpCTCGrad": [fwd["WarpCTCGrad"]], "Loss@GRAD": [dl],
           "LogitsLength": sample.inputs["LogitsLength"], "Logits": sample.inputs["Logits"]}
    plain = _run("warpctc_grad", ins, {"norm_by_times": False}, ("Logits@GRAD",))["Logits@GRAD"]
    normed = _run("warpctc_grad", ins, {"norm_by_times": True}, ("Logits@GRAD",))["Logits@GRAD"]
    t_len = sample.inputs["LogitsLength"][0]
    np.testing.assert_allclose(normed, plain / t_len[None, :, None])
    np.testing.assert_allclose(plain, fwd["WarpCTCGrad"] * dl.reshape(1, -1, 1))
    assert not fwd["WarpCTCGrad"][t_len[1]:, 1].any()     # steps past a sequence's end get nothing


def test_pool_with_a_window_larger_than_the_input_gives_one_output_as_paddle():
    """Paddle's PoolOutputSize divides with C++ truncation: (2 - 3) / 2 + 1 = 1
    (values read off Paddle 3.3.1: pool3d -> [7.], max_pool2d_with_index -> [3.])."""
    from pybackward.ops import opcheck
    x = np.arange(8, dtype=np.float32).reshape(1, 1, 2, 2, 2)
    out = opcheck.run_kernel("pool3d", {"X": [x]}, {"pooling_type": "max", "ksize": [3, 3, 3],
                                                      "strides": [2, 2, 2], "paddings": [0, 0, 0]}, {"Out": ["o"]})
    assert out["Out"][0].shape == (1, 1, 1, 1, 1) and out["Out"][0].ravel().tolist() == [7.0]
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    out = opcheck.run_kernel("max_pool2d_with_index", {"X": [x]}, {"ksize": [3, 3], "strides": [2, 2],
                                                                    "paddings": [0, 0]}, {"Out": ["o"], "Mask": ["m"]})
    assert out["Out"][0].shape == (1, 1, 1, 1) and out["Out"][0].ravel().tolist() == [3.0]


def test_batch_norm_with_one_element_per_channel_is_the_identity_as_paddle():
    """Paddle 3.3.1's CPU batch_norm in training with N*H*W == 1 (one image
    through a 2-D batch_norm, test_cond.py's TestCondBackward) skips the
    normalisation: Y = X, the running statistics are kept, SavedMean /
    SavedVariance are zeros, and the grad is X@GRAD = Y@GRAD with zero
    Scale@GRAD / Bias@GRAD (values read off Paddle 3.3.1: x [[-0.2227,
    -1.0364, 0.2846]] gave Y = x and x@GRAD = dY). Before the fix Y was
    Bias and X@GRAD zeros (the normalisation of a single value), and
    TestCondBackward's image@GRAD differed from Paddle's."""
    x = np.array([[-0.2227, -1.0364, 0.2846]], np.float32)
    sc, bi = np.full(3, 2.0, np.float32), np.full(3, 0.5, np.float32)
    mean, var = np.array([0.1, 0.2, 0.3], np.float32), np.array([1.0, 2.0, 3.0], np.float32)
    ins = {"X": [x], "Scale": [sc], "Bias": [bi], "Mean": [mean], "Variance": [var]}
    fwd = _run("batch_norm", ins, {"momentum": 0.9, "epsilon": 1e-5},
               ("Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance"))
    np.testing.assert_array_equal(fwd["Y"], x)
    np.testing.assert_array_equal(fwd["MeanOut"], mean)
    np.testing.assert_array_equal(fwd["VarianceOut"], var)
    assert not fwd["SavedMean"].any() and not fwd["SavedVariance"].any()
    dy = np.array([[0.5, -1.5, 2.0]], np.float32)
    gins = {"X": [x], "Scale": [sc], "Bias": [bi], "MeanOut": [mean], "VarianceOut": [var],
            "SavedMean": [fwd["SavedMean"]], "SavedVariance": [fwd["SavedVariance"]],
            "ReserveSpace": [np.zeros(0, np.float32)], "Y@GRAD": [dy]}
    g = _run("batch_norm_grad", gins, {"momentum": 0.9, "epsilon": 1e-5}, ("X@GRAD", "Scale@GRAD", "Bias@GRAD"))
    np.testing.assert_array_equal(g["X@GRAD"], dy)
    assert g["X@GRAD"].dtype == np.float32
    assert not g["Scale@GRAD"].any() and not g["Bias@GRAD"].any()
    # two rows: the batch statistics as before
    two = _run("batch_norm", {**ins, "X": [np.concatenate([x, x + 1])]}, {"epsilon": 1e-5}, ("Y",))["Y"]
    np.testing.assert_allclose(two, [[-1.5, -1.5, -1.5], [2.5, 2.5, 2.5]], atol=1e-3)
