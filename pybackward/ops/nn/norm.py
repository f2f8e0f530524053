"""Normalisation ops: batch_norm, layer_norm, group_norm, instance_norm.

Paddle conventions (checked against Paddle 3.3.1 by testdata/ops/gen_nn.py):

* batch_norm: MeanOut/VarianceOut must be the same vars as Mean/Variance
  (Paddle's InferShape enforces it). In training (`is_test` false, or
  `trainable_statistics` true) the batch statistics are used; MeanOut =
  momentum*Mean + (1-momentum)*batch_mean and VarianceOut likewise with the
  *biased* batch variance; SavedMean is the batch mean and SavedVariance the
  inverse std 1/sqrt(var+eps). `MomentumTensor` is ignored (Paddle 3.3.1's
  kernel takes only the `momentum` attr). With global stats (`use_global_stats`, or `is_test` without
  `trainable_statistics`) Y uses Mean/Variance, MeanOut/VarianceOut are
  unchanged and SavedMean/SavedVariance are zeros (Paddle leaves them
  uninitialised). ReserveSpace is an empty array (Paddle's CPU kernel does
  not write it). In training with one element per channel (N*H*W == 1, a
  batch of one 2-D row) Paddle's kernel skips the normalisation: Y = X,
  MeanOut/VarianceOut unchanged, SavedMean/SavedVariance zeros, and the
  grad is X@GRAD = Y@GRAD with zero Scale@GRAD / Bias@GRAD
  (test_cond.py's TestCondBackward feeds one image through batch_norm).
* batch_norm_grad reads X, Scale, Bias, MeanOut, VarianceOut, SavedMean,
  SavedVariance, ReserveSpace, Y@GRAD, plus Mean and Variance (the MeanOut /
  VarianceOut vars) when `is_test` or `use_global_stats` is set; its kernel
  then uses the running statistics (as if the mean/variance were constants).
* layer_norm: Mean/Variance have shape X.shape[:begin_norm_axis] and hold the
  biased variance (not its inverse); Scale/Bias are flat [prod(X.shape[axis:])].
* group_norm: Mean/Variance (N, groups), biased variance.
* instance_norm: SavedMean/SavedVariance (N*C,), the latter the inverse std.
"""
from __future__ import annotations

import math

import numpy as np

from ..registry import Call, FwdOp, GradOp, GradSpec, OpDef, Sample, make_grad_ops, register


def _f(x, like):
    return np.asarray(x).astype(like.dtype, copy=False)


def _eps(c: Call) -> float:
    return float(c.attr("epsilon", 1e-5))


# --------------------------------------------------------------------------
# batch_norm
# --------------------------------------------------------------------------
def _bn_layout(c: Call, x: np.ndarray):
    layout = c.attr("data_layout", "NCHW")
    if layout not in ("NCHW", "NHWC", "AnyLayout"):
        raise c.unsupported("data_layout", layout, "batch_norm takes NCHW or NHWC")
    if x.ndim < 2:
        raise c.unsupported("X rank", x.ndim, "batch_norm needs at least 2 dims")
    ch = x.ndim - 1 if layout == "NHWC" else 1
    axes = tuple(i for i in range(x.ndim) if i != ch)
    shape = [1] * x.ndim
    shape[ch] = x.shape[ch]
    return ch, axes, tuple(shape)


def _scale_bias(c: Call, n: int, dtype):
    scale = c.x("Scale") if c.has("Scale") else np.ones(n, dtype)
    bias = c.x("Bias") if c.has("Bias") else np.zeros(n, dtype)
    return scale, bias


def _batch_norm(c: Call):
    x = c.x("X")
    ch, axes, bshape = _bn_layout(c, x)
    n = x.shape[ch]
    scale, bias = _scale_bias(c, n, x.dtype)
    mean, var = c.x("Mean"), c.x("Variance")
    eps = _eps(c)
    is_test = bool(c.attr("is_test", False))
    global_stats = (is_test and not c.attr("trainable_statistics", False)) or bool(c.attr("use_global_stats", False))
    momentum = float(c.attr("momentum", 0.9))  # Paddle's CPU kernel ignores MomentumTensor
    xf = x.astype(np.float64) if x.dtype != np.float64 else x
    if global_stats:
        use_mean, use_var = np.asarray(mean, np.float64), np.asarray(var, np.float64)
        mean_out, var_out = mean.copy(), var.copy()
        saved_mean = np.zeros(n, mean.dtype)
        saved_var = np.zeros(n, var.dtype)
        d = xf - use_mean.reshape(bshape)
    elif n and x.size == n:
        # one element per channel: Paddle's kernel skips the normalisation
        # (Y = X, scale and bias unused), leaves the running statistics as
        # they are and writes zeros to SavedMean / SavedVariance
        return {"Y": x.copy(), "MeanOut": mean.copy(), "VarianceOut": var.copy(),
                "SavedMean": np.zeros(n, mean.dtype), "SavedVariance": np.zeros(n, var.dtype),
                "ReserveSpace": np.zeros((0,), x.dtype)}
    else:
        # np.mean's own steps (one add.reduce, one division by the count), minus its overhead
        cnt = x.size // n if n else 0
        use_mean = np.add.reduce(xf, axis=axes) / cnt
        d = xf - use_mean.reshape(bshape)       # X - mean, for the variance and for Y
        use_var = np.add.reduce(np.square(d), axis=axes) / cnt
        mean_out = _f(momentum * mean + (1.0 - momentum) * use_mean, mean)
        var_out = _f(momentum * var + (1.0 - momentum) * use_var, var)
        saved_mean = _f(use_mean, mean)
        saved_var = _f(1.0 / np.sqrt(use_var + eps), var)
    inv_std = 1.0 / np.sqrt(use_var + eps)
    # (X - mean) * (inv_std * scale) + bias, in place on the temporary
    d *= (inv_std * scale).reshape(bshape)
    d += np.reshape(bias, bshape)
    y = d
    return {"Y": _f(y, x), "MeanOut": mean_out, "VarianceOut": var_out, "SavedMean": saved_mean,
            "SavedVariance": saved_var, "ReserveSpace": np.zeros((0,), x.dtype)}


def _batch_norm_grad(c: Call):
    x, dy = c.x("X"), c.x("Y@GRAD")
    ch, axes, bshape = _bn_layout(c, x)
    n = x.shape[ch]
    scale, _ = _scale_bias(c, n, x.dtype)
    eps = _eps(c)
    use_global = bool(c.attr("is_test", False)) or bool(c.attr("use_global_stats", False))
    if not use_global and n and x.size == n:
        # one element per channel: the forward was Y = X (see _batch_norm),
        # so X@GRAD = Y@GRAD and Scale@GRAD = Bias@GRAD = 0, as Paddle's kernel
        zeros = np.zeros(n, c.x("Scale").dtype if c.has("Scale") else x.dtype)
        res = {"X@GRAD": dy.copy(), "Scale@GRAD": zeros, "Bias@GRAD": zeros.copy()}
        return {k: v for k, v in res.items() if c.wants(k)}
    xf, dyf = x.astype(np.float64), dy.astype(np.float64)      # copies: updated in place below
    if use_global:
        mean = c.x("Mean") if c.has("Mean") else c.x("MeanOut")
        var = c.x("Variance") if c.has("Variance") else c.x("VarianceOut")
        mean = np.asarray(mean, np.float64)
        inv_std = 1.0 / np.sqrt(np.asarray(var, np.float64) + eps)
    else:
        mean = np.asarray(c.x("SavedMean"), np.float64)
        inv_std = np.asarray(c.x("SavedVariance"), np.float64)
    xhat = xf
    xhat -= mean.reshape(bshape)
    xhat *= inv_std.reshape(bshape)
    dbias = np.add.reduce(dyf, axis=axes)
    prod = dyf * xhat
    dscale = np.add.reduce(prod, axis=axes)
    res = {}
    if c.wants("X@GRAD"):
        k = (np.asarray(scale, np.float64) * inv_std).reshape(bshape)
        if use_global:
            dx = dyf * k
        else:
            # k * (dY - dbias / m - xhat * dscale / m), term by term in place
            m = x.size // n
            t = np.multiply(xhat, dscale.reshape(bshape), out=prod)
            t /= m
            dx = dyf
            dx -= dbias.reshape(bshape) / m
            dx -= t
            dx *= k
        res["X@GRAD"] = _f(dx, x)
    if c.wants("Scale@GRAD"):
        res["Scale@GRAD"] = _f(dscale, c.x("Scale") if c.has("Scale") else x)
    if c.wants("Bias@GRAD"):
        res["Bias@GRAD"] = _f(dbias, c.x("Bias") if c.has("Bias") else x)
    return res


_BN_GRAD = GradSpec(
    "batch_norm_grad",
    ("X", "Scale", "Bias", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance", "ReserveSpace", "Y@GRAD"),
    ("X@GRAD", "Scale@GRAD", "Bias@GRAD"), kernel=_batch_norm_grad)


def _batch_norm_grad_maker(fwd: FwdOp) -> list[GradOp]:
    ops = make_grad_ops(_BN_GRAD, fwd)
    if fwd.attr("use_global_stats", False) or fwd.attr("is_test", False):
        # Paddle's maker: Mean <- Output(MeanOut), Variance <- Output(VarianceOut)
        ops[0].inputs["Mean"] = list(fwd.output("MeanOut"))
        ops[0].inputs["Variance"] = list(fwd.output("VarianceOut"))
    return ops


def _bn_samples(rng: np.random.Generator):
    r = rng.standard_normal

    def s(xshape, attrs, c_axis=1, note=""):
        ch = xshape[c_axis]
        ins = {"X": [r(xshape)], "Scale": [r(ch)], "Bias": [r(ch)], "Mean": [r(ch)],
               "Variance": [np.abs(r(ch)) + 0.5]}
        return Sample(ins, attrs, wrt=("X", "Scale", "Bias"), note=note)
    return [
        s((3, 2, 3, 3), {"momentum": 0.9, "epsilon": 1e-5}, note="training"),
        s((2, 3, 3, 2), {"data_layout": "NHWC", "epsilon": 1e-3}, c_axis=3, note="training NHWC"),
        s((4, 3), {"momentum": 0.8}, note="training 2-D"),
        s((2, 2, 3, 3), {"is_test": True}, note="is_test"),
        s((2, 2, 3, 3), {"use_global_stats": True}, note="use_global_stats"),
        s((1, 3), {"momentum": 0.9}, note="training, one element per channel: Y = X"),
    ]


register(OpDef(
    type="batch_norm", inputs=("X", "Scale", "Bias", "Mean", "Variance", "MomentumTensor"),
    outputs=("Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance", "ReserveSpace"),
    kernel=_batch_norm, grad=_batch_norm_grad_maker, samples=_bn_samples,
    intermediate_outputs=("MeanOut", "VarianceOut", "SavedMean", "SavedVariance", "ReserveSpace"),
    attrs_handled=("momentum", "epsilon", "is_test", "use_global_stats", "trainable_statistics", "data_layout"),
    doc="batch normalisation; running stats updated into MeanOut/VarianceOut (aliases of Mean/Variance)"))
register(OpDef(
    type="batch_norm_grad", inputs=_BN_GRAD.inputs + ("Mean", "Variance"), outputs=_BN_GRAD.outputs,
    kernel=_batch_norm_grad, grad_of="batch_norm", sets_lod_level=False,
    doc="gradient of batch_norm"))


# --------------------------------------------------------------------------
# layer_norm
# --------------------------------------------------------------------------
def _ln_axis(c: Call, x: np.ndarray) -> int:
    axis = int(c.attr("begin_norm_axis", 1))
    if not 0 < axis < x.ndim:  # Paddle's attr checker: 0 < begin_norm_axis < rank
        raise c.unsupported("begin_norm_axis", axis, f"must be in (0, {x.ndim}) for X of rank {x.ndim}")
    return axis


def _ln_params(c: Call, right: int, dtype):
    scale = np.asarray(c.x("Scale"), np.float64).reshape(-1) if c.has("Scale") else np.ones(right)
    bias = np.asarray(c.x("Bias"), np.float64).reshape(-1) if c.has("Bias") else np.zeros(right)
    if scale.size != right or bias.size != right:
        raise ValueError(f"layer_norm: Scale/Bias must have {right} elements")
    return scale, bias


def _layer_norm(c: Call):
    x = c.x("X")
    axis = _ln_axis(c, x)
    lead = x.shape[:axis]
    right = math.prod(x.shape[axis:])
    x2 = x.reshape(-1, right).astype(np.float64)
    mean = x2.mean(axis=1)
    var = np.square(x2 - mean[:, None]).mean(axis=1)
    scale, bias = _ln_params(c, right, x.dtype)
    y = (x2 - mean[:, None]) / np.sqrt(var + _eps(c))[:, None] * scale + bias
    return {"Y": _f(y.reshape(x.shape), x), "Mean": _f(mean.reshape(lead), x),
            "Variance": _f(var.reshape(lead), x)}


def _layer_norm_grad(c: Call):
    x, dy = c.x("X"), c.x("Y@GRAD")
    axis = _ln_axis(c, x)
    right = math.prod(x.shape[axis:])
    x2 = x.reshape(-1, right).astype(np.float64)
    dy2 = dy.reshape(-1, right).astype(np.float64)
    mean = np.asarray(c.x("Mean"), np.float64).reshape(-1)
    inv_std = 1.0 / np.sqrt(np.asarray(c.x("Variance"), np.float64).reshape(-1) + _eps(c))
    scale, _ = _ln_params(c, right, x.dtype)
    xhat = (x2 - mean[:, None]) * inv_std[:, None]
    res = {}
    if c.wants("X@GRAD"):
        g = dy2 * scale
        dx = inv_std[:, None] * (g - g.mean(axis=1, keepdims=True) - xhat * (g * xhat).mean(axis=1, keepdims=True))
        res["X@GRAD"] = _f(dx.reshape(x.shape), x)
    if c.wants("Scale@GRAD"):
        s = c.x("Scale")
        res["Scale@GRAD"] = _f((dy2 * xhat).sum(axis=0).reshape(s.shape), s)
    if c.wants("Bias@GRAD"):
        b = c.x("Bias")
        res["Bias@GRAD"] = _f(dy2.sum(axis=0).reshape(b.shape), b)
    return res


def _ln_samples(rng: np.random.Generator):
    r = rng.standard_normal
    return [
        Sample({"X": [r((2, 3, 4))], "Scale": [r(12)], "Bias": [r(12)]}, {"begin_norm_axis": 1}, note="axis 1"),
        Sample({"X": [r((2, 3, 4))], "Scale": [r(4)], "Bias": [r(4)]}, {"begin_norm_axis": 2, "epsilon": 1e-3},
               note="axis 2"),
        Sample({"X": [r((3, 5))]}, {"begin_norm_axis": 1}, note="no scale/bias"),
    ]


register(OpDef(
    type="layer_norm", inputs=("X", "Scale", "Bias"), outputs=("Y", "Mean", "Variance"), kernel=_layer_norm,
    grad=GradSpec("layer_norm_grad", ("X", "Scale", "Bias", "Mean", "Variance", "Y@GRAD"),
                  ("X@GRAD", "Scale@GRAD", "Bias@GRAD"), kernel=_layer_norm_grad),
    samples=_ln_samples, intermediate_outputs=("Mean", "Variance"),
    attrs_handled=("begin_norm_axis", "epsilon"),
    doc="layer normalisation over dims [begin_norm_axis, rank)"))


# --------------------------------------------------------------------------
# group_norm / instance_norm
# --------------------------------------------------------------------------
def _gn_view(c: Call, x: np.ndarray):
    """X as float64 (N, C, S) channels-first, and the layout."""
    layout = c.attr("data_layout", "NCHW")
    if layout not in ("NCHW", "NHWC", "AnyLayout"):
        raise c.unsupported("data_layout", layout, "group_norm takes NCHW or NHWC")
    if x.ndim < 2:
        raise c.unsupported("X rank", x.ndim, "group_norm needs at least 2 dims")
    xc = np.moveaxis(x, -1, 1) if layout == "NHWC" else x
    return xc.reshape(xc.shape[0], xc.shape[1], -1).astype(np.float64), layout, xc.shape


def _gn_back(a: np.ndarray, layout: str, cshape, like: np.ndarray) -> np.ndarray:
    a = a.reshape(cshape)
    if layout == "NHWC":
        a = np.moveaxis(a, 1, -1)
    return _f(a, like)


def _gn_groups(c: Call, ch: int) -> int:
    g = int(c.attr("groups", -1))
    if g < 1 or ch % g:
        raise c.unsupported("groups", g, f"must divide the {ch} channels")
    return g


def _group_norm(c: Call):
    x = c.x("X")
    x3, layout, cshape = _gn_view(c, x)
    n, ch, _ = x3.shape
    g = _gn_groups(c, ch)
    xg = x3.reshape(n, g, -1)
    mean = xg.mean(axis=2)
    var = np.square(xg - mean[..., None]).mean(axis=2)
    xhat = ((xg - mean[..., None]) / np.sqrt(var + _eps(c))[..., None]).reshape(n, ch, -1)
    scale, bias = _scale_bias(c, ch, np.float64)
    y = xhat * np.asarray(scale, np.float64)[None, :, None] + np.asarray(bias, np.float64)[None, :, None]
    return {"Y": _gn_back(y, layout, cshape, x), "Mean": _f(mean, x), "Variance": _f(var, x)}


def _norm_backward(xg, dyg, scale_g, mean, var, eps):
    """Grad of y = xhat * scale over the last axis of (..., K) groups.
    Returns dx and xhat (scale_g broadcasts against dyg)."""
    inv_std = 1.0 / np.sqrt(var + eps)[..., None]
    xhat = (xg - mean[..., None]) * inv_std
    gs = dyg * scale_g
    dx = inv_std * (gs - gs.mean(axis=-1, keepdims=True) - xhat * (gs * xhat).mean(axis=-1, keepdims=True))
    return dx, xhat


def _group_norm_grad(c: Call):
    x = c.x("X")
    x3, layout, cshape = _gn_view(c, x)
    dy3, _, _ = _gn_view(c, c.x("Y@GRAD"))
    n, ch, sp = x3.shape
    g = _gn_groups(c, ch)
    scale, _ = _scale_bias(c, ch, np.float64)
    scale_g = np.broadcast_to(np.asarray(scale, np.float64)[None, :, None], (n, ch, sp)).reshape(n, g, -1)
    mean = np.asarray(c.x("Mean"), np.float64).reshape(n, g)
    var = np.asarray(c.x("Variance"), np.float64).reshape(n, g)
    dx, xhat = _norm_backward(x3.reshape(n, g, -1), dy3.reshape(n, g, -1), scale_g, mean, var, _eps(c))
    res = {}
    if c.wants("X@GRAD"):
        res["X@GRAD"] = _gn_back(dx, layout, cshape, x)
    if c.wants("Scale@GRAD"):
        res["Scale@GRAD"] = _f((dy3 * xhat.reshape(n, ch, sp)).sum(axis=(0, 2)), c.x("Scale"))
    if c.wants("Bias@GRAD"):
        res["Bias@GRAD"] = _f(dy3.sum(axis=(0, 2)), c.x("Bias"))
    return res


def _gn_samples(rng: np.random.Generator):
    r = rng.standard_normal
    return [
        Sample({"X": [r((2, 4, 2, 3))], "Scale": [r(4)], "Bias": [r(4)]}, {"groups": 2, "epsilon": 1e-5},
               note="NCHW"),
        Sample({"X": [r((2, 2, 3, 4))], "Scale": [r(4)], "Bias": [r(4)]}, {"groups": 4, "data_layout": "NHWC"},
               note="NHWC"),
        Sample({"X": [r((2, 3, 4))]}, {"groups": 3}, note="3-D no scale/bias"),
    ]


register(OpDef(
    type="group_norm", inputs=("X", "Scale", "Bias"), outputs=("Y", "Mean", "Variance"), kernel=_group_norm,
    grad=GradSpec("group_norm_grad", ("X", "Scale", "Bias", "Y", "Mean", "Variance", "Y@GRAD"),
                  ("X@GRAD", "Scale@GRAD", "Bias@GRAD"), kernel=_group_norm_grad),
    samples=_gn_samples, intermediate_outputs=("Mean", "Variance"),
    attrs_handled=("groups", "epsilon", "data_layout"),
    doc="group normalisation; Mean/Variance (N, groups)"))


def _in_view(c: Call, x: np.ndarray) -> np.ndarray:
    if x.ndim < 2:
        raise c.unsupported("X rank", x.ndim, "instance_norm needs at least 2 dims")
    return x.reshape(x.shape[0], x.shape[1], -1).astype(np.float64)


def _instance_norm(c: Call):
    x = c.x("X")
    x3 = _in_view(c, x)
    n, ch, _ = x3.shape
    mean = x3.mean(axis=2)
    var = np.square(x3 - mean[..., None]).mean(axis=2)
    inv_std = 1.0 / np.sqrt(var + _eps(c))
    scale, bias = _scale_bias(c, ch, np.float64)
    y = (x3 - mean[..., None]) * inv_std[..., None] * np.asarray(scale, np.float64)[None, :, None] \
        + np.asarray(bias, np.float64)[None, :, None]
    return {"Y": _f(y.reshape(x.shape), x), "SavedMean": _f(mean.reshape(-1), x),
            "SavedVariance": _f(inv_std.reshape(-1), x)}


def _instance_norm_grad(c: Call):
    x = c.x("X")
    x3, dy3 = _in_view(c, x), _in_view(c, c.x("Y@GRAD"))
    n, ch, _ = x3.shape
    scale, _ = _scale_bias(c, ch, np.float64)
    mean = np.asarray(c.x("SavedMean"), np.float64).reshape(n, ch)
    inv_std = np.asarray(c.x("SavedVariance"), np.float64).reshape(n, ch)
    var = 1.0 / np.square(inv_std)  # so that 1/sqrt(var + 0) == inv_std
    dx, xhat = _norm_backward(x3, dy3, np.asarray(scale, np.float64)[None, :, None], mean, var, 0.0)
    res = {}
    if c.wants("X@GRAD"):
        res["X@GRAD"] = _f(dx.reshape(x.shape), x)
    if c.wants("Scale@GRAD"):
        res["Scale@GRAD"] = _f((dy3 * xhat).sum(axis=(0, 2)), c.x("Scale"))
    if c.wants("Bias@GRAD"):
        res["Bias@GRAD"] = _f(dy3.sum(axis=(0, 2)), c.x("Bias"))
    return res


def _in_samples(rng: np.random.Generator):
    r = rng.standard_normal
    return [
        Sample({"X": [r((2, 3, 2, 3))], "Scale": [r(3)], "Bias": [r(3)]}, {"epsilon": 1e-5}, note="4-D"),
        Sample({"X": [r((2, 2, 5))]}, {}, note="3-D no scale/bias"),
    ]


register(OpDef(
    type="instance_norm", inputs=("X", "Scale", "Bias"), outputs=("Y", "SavedMean", "SavedVariance"),
    kernel=_instance_norm,
    grad=GradSpec("instance_norm_grad", ("X", "Scale", "Bias", "SavedMean", "SavedVariance", "Y@GRAD"),
                  ("X@GRAD", "Scale@GRAD", "Bias@GRAD"), kernel=_instance_norm_grad, sets_lod_level=False),
    samples=_in_samples, intermediate_outputs=("SavedMean", "SavedVariance"),
    attrs_handled=("epsilon",),
    doc="instance normalisation; SavedVariance is the inverse std"))
