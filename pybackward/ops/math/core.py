"""Matrix products (mul, matmul, matmul_v2, bmm), scale / sum / mean, the
reduce ops, p_norm, squared_l2_norm and cumsum, with their grads.

`scale`'s grad is a `scale` op and `sum`'s is one `scale` per input, built by
maker functions as Paddle's C++ makers do (both are fresh ops: Paddle's
default attrs, not the forward op's, with scale/bias/bias_after_scale set).
"""
from __future__ import annotations

import math as _math

import numpy as np

from ...base import dtypes
from ...base.attrs import AttrType
from ...base.errors import ExecutionError
from .._precision import sum64
from .._util import normalize_axis, reduce_axes, unbroadcast
from ..control_flow.cond_while import sum_arrays
from ..registry import GRAD_SUFFIX, Call, FwdOp, GradOp, GradSpec, OpDef, Sample, fresh_op, register


def _arr(v, like: np.ndarray) -> np.ndarray:
    return np.asarray(v).astype(like.dtype, copy=False)


def _float_only(c: Call, *arrays: np.ndarray) -> None:
    for a in arrays:
        if a.dtype.kind not in "fc":
            raise ExecutionError(f"op {c.op_type}: Paddle 3.3.1 has no {a.dtype} kernel for it")


def _real_only(c: Call, *arrays: np.ndarray) -> None:
    """float32 / float64 only: Paddle 3.3.1 registers no complex (nor integer) CPU kernel."""
    for a in arrays:
        if a.dtype.kind != "f":
            raise ExecutionError(f"op {c.op_type}: Paddle 3.3.1 has no {a.dtype} kernel for it")


def _cj(a: np.ndarray) -> np.ndarray:
    """conj(a) for a complex array, `a` itself otherwise (Paddle's complex grads
    are dOut * conj(dOut/dX))."""
    return np.conj(a) if np.iscomplexobj(a) else a


XY = dict(inputs=("X", "Y"), outputs=("Out",))
XY_GRAD = (("X", "Y", "Out@GRAD"), ("X@GRAD", "Y@GRAD"))


# --------------------------------------------------------------------------
# mul: X and Y flattened to matrices at x_num_col_dims / y_num_col_dims
# --------------------------------------------------------------------------
def _flat2(a: np.ndarray, k: int) -> np.ndarray:
    return a.reshape(_math.prod(a.shape[:k]), -1)


def _mul(c: Call):
    x, y = c.x("X"), c.x("Y")
    _real_only(c, x, y)
    xk, yk = c.attr("x_num_col_dims", 1), c.attr("y_num_col_dims", 1)
    out = _flat2(x, xk) @ _flat2(y, yk)
    return {"Out": _arr(out.reshape(x.shape[:xk] + y.shape[yk:]), x)}


def _mul_grad(c: Call):
    x, y, g = c.x("X"), c.x("Y"), c.x("Out@GRAD")
    xk, yk = c.attr("x_num_col_dims", 1), c.attr("y_num_col_dims", 1)
    x2, y2 = _flat2(x, xk), _flat2(y, yk)
    g2 = g.reshape(x2.shape[0], y2.shape[1])
    res = {}
    if c.wants("X@GRAD"):
        res["X@GRAD"] = _arr((g2 @ y2.T).reshape(x.shape), x)
    if c.wants("Y@GRAD"):
        res["Y@GRAD"] = _arr((x2.T @ g2).reshape(y.shape), y)
    return res


def _mul_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((3, 4))], "Y": [r((4, 5))]}, {"x_num_col_dims": 1, "y_num_col_dims": 1}),
            Sample({"X": [r((2, 3, 4))], "Y": [r((4, 2))]}, {"x_num_col_dims": 2}, note="x_num_col_dims=2"),
            Sample({"X": [r((2, 3, 2))], "Y": [r((6, 3))]}, {"x_num_col_dims": 1}, note="X flattened"),
            Sample({"X": [r((2, 6))], "Y": [r((2, 3, 2))]}, {"y_num_col_dims": 2}, note="y_num_col_dims=2")]


register(OpDef(type="mul", **XY, kernel=_mul, grad=GradSpec("mul_grad", *XY_GRAD, kernel=_mul_grad),
               samples=_mul_samples, attrs_handled=("x_num_col_dims", "y_num_col_dims"),
               doc="Out = flatten(X) @ flatten(Y), reshaped to X.dims[:xk] + Y.dims[yk:]"))


# --------------------------------------------------------------------------
# matmul family: 1-D operands, transposes, batch broadcasting
# --------------------------------------------------------------------------
def _t(a):
    return np.swapaxes(a, -1, -2)


def _operands(x, y, tx, ty):
    """x, y as matrices (1-D promoted, transposes applied; transposes of 1-D ignored)."""
    a = x[None, :] if x.ndim == 1 else (_t(x) if tx else x)
    b = y[:, None] if y.ndim == 1 else (_t(y) if ty else y)
    return a, b


def _matmul_out(x, y, tx, ty, alpha=1.0):
    a, b = _operands(x, y, tx, ty)
    if a.shape[-1] != b.shape[-2]:
        raise ExecutionError(f"matmul: shapes X{x.shape} and Y{y.shape} (trans {tx}/{ty}) do not match")
    out = np.matmul(a, b)
    if y.ndim == 1:
        out = out[..., 0]
    if x.ndim == 1:
        out = out[..., 0, :] if y.ndim > 1 else out[..., 0]
    return out * alpha if alpha != 1.0 else out


def _matmul_grads(c: Call, x, y, g, tx, ty, alpha=1.0):
    a, b = _operands(x, y, tx, ty)
    tx, ty = tx and x.ndim > 1, ty and y.ndim > 1
    g2 = g[..., None] if y.ndim == 1 else g
    g2 = g2[..., None, :] if x.ndim == 1 else g2
    if alpha != 1.0:
        g2 = g2 * alpha
    res = {}
    if np.iscomplexobj(a) or np.iscomplexobj(b):  # dX = dOut @ conj(Y)^T, dY = conj(X)^T @ dOut
        a, b = _cj(a), _cj(b)
    if c.wants("X@GRAD"):
        da = g2 @ _t(b)
        dx = _t(da) if tx else da
        shape2 = (1,) + x.shape if x.ndim == 1 else x.shape
        res["X@GRAD"] = _arr(unbroadcast(dx, shape2).reshape(x.shape), x)
    if c.wants("Y@GRAD"):
        db = _t(a) @ g2
        dy = _t(db) if ty else db
        shape2 = y.shape + (1,) if y.ndim == 1 else y.shape
        res["Y@GRAD"] = _arr(unbroadcast(dy, shape2).reshape(y.shape), y)
    return res


def _matmul_v2(c: Call):
    x, y = c.x("X"), c.x("Y")
    return {"Out": _arr(_matmul_out(x, y, c.attr("trans_x", False), c.attr("trans_y", False)), x)}


def _matmul_v2_grad(c: Call):
    return _matmul_grads(c, c.x("X"), c.x("Y"), c.x("Out@GRAD"), c.attr("trans_x", False), c.attr("trans_y", False))


def _legacy_matmul_check(c: Call, x, y):
    _real_only(c, x, y)
    if c.attr("head_number", 1) != 1:
        raise c.unsupported("head_number", c.attr("head_number"), "multi-head matmul")
    for a, flag in ((x, "transpose_X"), (y, "transpose_Y")):
        if a.ndim == 1 and c.attr(flag, False):
            raise c.unsupported(flag, True, "transposing a 1-D operand of legacy matmul")
    if x.ndim > 2 and y.ndim > 2 and x.shape[:-2] != y.shape[:-2]:
        raise ExecutionError(f"op matmul: batch dims of X{x.shape} and Y{y.shape} differ "
                             "(legacy matmul does not broadcast them)")


def _matmul(c: Call):
    x, y = c.x("X"), c.x("Y")
    _legacy_matmul_check(c, x, y)
    out = _matmul_out(x, y, c.attr("transpose_X", False), c.attr("transpose_Y", False), c.attr("alpha", 1.0))
    return {"Out": _arr(out, x)}


def _matmul_grad(c: Call):
    return _matmul_grads(c, c.x("X"), c.x("Y"), c.x("Out@GRAD"), c.attr("transpose_X", False),
                         c.attr("transpose_Y", False), c.attr("alpha", 1.0))


def _bmm(c: Call):
    x, y = c.x("X"), c.x("Y")
    _real_only(c, x, y)
    if x.ndim != 3 or y.ndim != 3 or x.shape[0] != y.shape[0]:
        raise ExecutionError(f"op bmm: X{x.shape} and Y{y.shape} must be 3-D with the same batch size")
    return {"Out": _arr(np.matmul(x, y), x)}


def _bmm_grad(c: Call):
    return _matmul_grads(c, c.x("X"), c.x("Y"), c.x("Out@GRAD"), False, False)


def _mm_samples(tx, ty, legacy=False):
    def samples(rng):
        r = rng.standard_normal
        out = [Sample({"X": [r((3, 4))], "Y": [r((4, 2))]}, {}),
               Sample({"X": [r((4, 3))], "Y": [r((4, 2))]}, {tx: True}, note=tx),
               Sample({"X": [r((3, 4))], "Y": [r((2, 4))]}, {ty: True}, note=ty),
               Sample({"X": [r((4, 3))], "Y": [r((2, 4))]}, {tx: True, ty: True}, note="both transposed"),
               Sample({"X": [r((2, 3, 4))], "Y": [r((2, 4, 2))]}, {}, note="batch"),
               Sample({"X": [r((2, 3, 4))], "Y": [r((4, 2))]}, {}, note="batch x matrix"),
               Sample({"X": [r((3, 4))], "Y": [r((2, 4, 2))]}, {}, note="matrix x batch"),
               Sample({"X": [r((4,))], "Y": [r((4,))]}, {}, note="1-D x 1-D"),
               Sample({"X": [r((4,))], "Y": [r((4, 2))]}, {}, note="1-D x 2-D"),
               Sample({"X": [r((2, 3, 4))], "Y": [r((4,))]}, {}, note="batch x 1-D")]
        if legacy:
            out.append(Sample({"X": [r((3, 4))], "Y": [r((2, 4))]}, {"transpose_Y": True, "alpha": 0.5},
                              note="alpha"))
        else:
            out += [Sample({"X": [r((2, 1, 3, 4))], "Y": [r((3, 4, 2))]}, {}, note="batch broadcast"),
                    Sample({"X": [r((1, 3, 4))], "Y": [r((2, 2, 4))]}, {ty: True}, note="broadcast, trans_y"),
                    Sample({"X": [r((4,))], "Y": [r((2, 4))]}, {ty: True}, note="1-D, trans_y")]

            def z(shape):  # Paddle registers complex64 / complex128 for matmul_v2 only
                return r(shape) + 1j * r(shape)
            out += [Sample({"X": [z((3, 4))], "Y": [z((4, 2))]}, {}, note="complex"),
                    Sample({"X": [z((4, 3))], "Y": [z((2, 4))]}, {tx: True, ty: True}, note="complex, transposed"),
                    Sample({"X": [z((2, 3, 4))], "Y": [z((2, 4, 2))]}, {}, note="complex, batch"),
                    Sample({"X": [z((4,))], "Y": [z((2, 4, 3))]}, {}, note="complex, 1-D x batch")]
        return out
    return samples


def _matmul_v2_grad_grad(c: Call):
    """Out = f(X, Y) is bilinear, so with DDX, DDY flowing into X@GRAD, Y@GRAD:
    DDOut = f(DDX, Y) + f(X, DDY); X@GRAD = the X-grad of f(X, DDY) at cotangent
    DOut; Y@GRAD = the Y-grad of f(DDX, Y) at cotangent DOut."""
    x, y, dout = c.x("X"), c.x("Y"), c.x("grad_out")
    ddx, ddy = c.x("grad_x@GRAD"), c.x("grad_y@GRAD")

    def sub(slots: dict, want: tuple[str, ...]) -> dict:
        outs = {k: ["_"] for k in want}
        return _matmul_v2(Call(c.op_type, slots, c.attrs, outs)) if "Out" in want else \
            _matmul_v2_grad(Call(c.op_type, slots, c.attrs, outs))
    res = {}
    if c.wants("grad_out@GRAD"):
        dd = np.zeros_like(dout)
        if ddx is not None:
            dd = dd + sub({"X": [ddx], "Y": [y]}, ("Out",))["Out"]
        if ddy is not None:
            dd = dd + sub({"X": [x], "Y": [ddy]}, ("Out",))["Out"]
        res["grad_out@GRAD"] = dd
    if c.wants("X@GRAD"):
        res["X@GRAD"] = (sub({"X": [x], "Y": [ddy], "Out@GRAD": [dout]}, ("X@GRAD",))["X@GRAD"]
                         if ddy is not None else np.zeros_like(x))
    if c.wants("Y@GRAD"):
        res["Y@GRAD"] = (sub({"X": [ddx], "Y": [y], "Out@GRAD": [dout]}, ("Y@GRAD",))["Y@GRAD"]
                         if ddx is not None else np.zeros_like(y))
    return res


_MATMUL_V2_GG = GradSpec(
    "matmul_v2_grad_grad",
    ("X", "Y", "grad_out=Out@GRAD", "grad_x@GRAD=X@GRAD@GRAD", "grad_y@GRAD=Y@GRAD@GRAD"),
    ("X@GRAD", "Y@GRAD", "grad_out@GRAD=Out@GRAD@GRAD"), kernel=_matmul_v2_grad_grad)

register(OpDef(type="matmul_v2", **XY, kernel=_matmul_v2,
               grad=GradSpec("matmul_v2_grad", *XY_GRAD, kernel=_matmul_v2_grad, grad=_MATMUL_V2_GG),
               samples=_mm_samples("trans_x", "trans_y"), attrs_handled=("trans_x", "trans_y"),
               doc="Out = op(X) @ op(Y), NumPy matmul rules (1-D operands, batch broadcasting)"))
register(OpDef(type="matmul", **XY, kernel=_matmul,
               grad=GradSpec("matmul_grad", *XY_GRAD, kernel=_matmul_grad, sets_lod_level=False),
               samples=_mm_samples("transpose_X", "transpose_Y", legacy=True),
               attrs_handled=("transpose_X", "transpose_Y", "alpha", "head_number"),
               doc="legacy matmul: Out = alpha * op(X) @ op(Y); batch dims must match"))
register(OpDef(type="bmm", **XY, kernel=_bmm,
               grad=GradSpec("bmm_grad", *XY_GRAD, kernel=_bmm_grad, sets_lod_level=False),
               samples=lambda rng: [Sample({"X": [rng.standard_normal((2, 3, 4))],
                                            "Y": [rng.standard_normal((2, 4, 2))]})],
               doc="Out[b] = X[b] @ Y[b]"))


# --------------------------------------------------------------------------
# scale, sum, mean
# --------------------------------------------------------------------------
def _scalar_in(c: Call, slot: str, attr: str, default: float) -> float:
    if c.has(slot):  # a complex tensor gives its real part, as Paddle's kernel does on real X
        # (on complex X Paddle's kernel uses the whole value, and its grad op scales by it
        # unconjugated; here both use the real part, so forward and backward agree)
        return float(np.real(np.asarray(c.x(slot)).reshape(-1)[0]))
    return c.attr(attr, default)


def _scale(c: Call):
    x = c.x("X")
    s, b = _scalar_in(c, "ScaleTensor", "scale", 1.0), _scalar_in(c, "BiasTensor", "bias", 0.0)
    if x.dtype.kind in "iu":  # Paddle casts scale and bias to the integer type (truncation)
        s, b = int(s), int(b)
    s, b = np.asarray(s).astype(x.dtype), np.asarray(b).astype(x.dtype)
    out = x * s + b if c.attr("bias_after_scale", True) else (x + b) * s
    return {"Out": _arr(out, x)}


def _attr_typed(fwd: FwdOp, name: str, default, attr_type: int):
    """A forward attr as (value, AttrType), keeping the type it was stored with."""
    for a in fwd.attrs_desc:
        if a.name == name:
            return (fwd.attr(name), a.type)
    return (default, attr_type)


def _scale_grad_maker(fwd: FwdOp) -> list[GradOp]:
    """Paddle's ScaleGradMaker: a fresh `scale` op, X <- Out@GRAD, Out -> X@GRAD,
    the forward's scale (and ScaleTensor / BiasTensor slots), bias=0.0."""
    ins = {"X": [n + GRAD_SUFFIX for n in fwd.output("Out")]}
    for slot in ("ScaleTensor", "BiasTensor"):
        if slot in fwd.inputs:
            ins[slot] = list(fwd.inputs[slot])
    outs = {"Out": fwd.grads_of(fwd.input("X"))}
    attrs = {"scale": _attr_typed(fwd, "scale", 1.0, AttrType.FLOAT), "bias": (0.0, AttrType.FLOAT),
             "bias_after_scale": (True, AttrType.BOOLEAN)}
    return [fresh_op("scale", ins, outs, attrs)]


def _scale_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((3, 4))]}, {"scale": 2.5, "bias": 1.0, "bias_after_scale": True}),
            Sample({"X": [r((3, 4))]}, {"scale": -1.5, "bias": 0.5, "bias_after_scale": False}, note="bias first"),
            Sample({"X": [r((2, 3))], "ScaleTensor": [np.array([3.0])]}, {"scale": 2.0}, wrt=("X",),
                   note="ScaleTensor"),
            Sample({"X": [np.asarray(r(()))]}, {"scale": 3.0, "bias": 1.0}, note="0-D")]


register(OpDef(type="scale", inputs=("X", "ScaleTensor", "BiasTensor"), outputs=("Out",), kernel=_scale,
               grad=_scale_grad_maker, samples=_scale_samples,
               attrs_handled=("scale", "bias", "bias_after_scale"),
               doc="Out = scale * X + bias (or scale * (X + bias)); ScaleTensor / BiasTensor win"))


def _sum(c: Call):
    xs = [v for v in c.xs("X") if v is not None]
    if not xs:
        raise ExecutionError("op sum: no inputs")
    if any(isinstance(v, list) for v in xs):   # tensor arrays (while grads): slot by slot
        if not all(isinstance(v, list) for v in xs):
            raise ExecutionError("op sum: X mixes tensor arrays and tensors")
        return {"Out": [sum_arrays(xs)]}
    out = xs[0]
    for v in xs[1:]:
        out = out + v
    return {"Out": _arr(out, xs[0])}


def _sum_grad_maker(fwd: FwdOp) -> list[GradOp]:
    """Paddle's SumGradMaker: one fresh `scale` (scale=1, bias=0) per input;
    an input whose grad is not wanted keeps its place as @EMPTY@."""
    dout = [n + GRAD_SUFFIX for n in fwd.output("Out")]
    return [fresh_op("scale", {"X": list(dout)}, {"Out": [g]},
                     {"scale": (1.0, AttrType.FLOAT), "bias": (0.0, AttrType.FLOAT),
                      "bias_after_scale": (True, AttrType.BOOLEAN)})
            for g in fwd.grads_of(fwd.input("X"), keep_empty=True)]


_sum_grad_maker.emits = ("scale",)  # for `ops --coverage`: Paddle's record holds no template for sum


register(OpDef(type="sum", inputs=("X",), outputs=("Out",), kernel=_sum, grad=_sum_grad_maker,
               trims_missing_inputs=("X",),
               samples=lambda rng: [Sample({"X": [rng.standard_normal((3, 4)) for _ in range(3)]}, note="3 inputs"),
                                    Sample({"X": [rng.standard_normal((2,))]}, note="1 input")],
               doc="Out = X[0] + X[1] + ...; grad: one `scale` op per input"))


def _mean(c: Call):
    x = c.x("X")
    _float_only(c, x)
    return {"Out": _arr(np.mean(x), x)}


def _mean_grad(c: Call):
    x, g = c.x("X"), c.x("Out@GRAD")
    if not c.wants("X@GRAD"):
        return {}
    return {"X@GRAD": _arr(np.broadcast_to(np.reshape(g, ()) / max(x.size, 1), x.shape), x)}


register(OpDef(type="mean", inputs=("X",), outputs=("Out",), kernel=_mean,
               grad=GradSpec("mean_grad", ("X", "Out@GRAD"), ("X@GRAD",), kernel=_mean_grad),
               samples=lambda rng: [Sample({"X": [rng.standard_normal((3, 4))]})],
               doc="Out = mean of all elements of X (0-D)"))


# --------------------------------------------------------------------------
# reduce_*: dim / keep_dim / reduce_all / out_dtype
# --------------------------------------------------------------------------
def _axes(c: Call, x: np.ndarray) -> tuple[int, ...]:
    return reduce_axes(c.attr("dim", [0]), x.ndim, c.attr("reduce_all", False))


def _out_dtype(c: Call):
    od = c.attr("out_dtype", -1)
    return None if od in (-1, None) else dtypes.to_numpy(od)


def _reduce_kernel(name, fn):
    def kernel(c: Call):
        x = c.x("X")
        if name in ("reduce_max", "reduce_min") and x.dtype.kind == "c":
            raise ExecutionError(f"op {c.op_type}: Paddle 3.3.1 has no {x.dtype} kernel for it")
        axes, keep = _axes(c, x), c.attr("keep_dim", False)
        od = _out_dtype(c)
        if od is not None:
            x = x.astype(od)
        if name == "reduce_sum":
            out = (np.sum(x, axis=axes, keepdims=keep, dtype=np.int64) if x.dtype.kind in "iub"
                   else sum64(x, axis=axes, keepdims=keep))
        elif name == "reduce_mean" and x.dtype.kind in "iub":
            s = np.sum(x, axis=axes, keepdims=keep, dtype=np.int64)
            cnt = _math.prod(x.shape[a] for a in axes)
            out = (np.sign(s) * (np.abs(s) // max(cnt, 1))).astype(x.dtype)  # C++ integer division
        elif name == "reduce_mean" and x.dtype.kind == "f":  # accumulated in float64 (ops/_precision.py)
            out = np.mean(x, axis=axes, keepdims=keep, dtype=np.float64).astype(x.dtype)
        else:
            out = fn(x, axis=axes, keepdims=keep)
            out = np.asarray(out).astype(x.dtype, copy=False)
        return {"Out": np.asarray(out)}
    return kernel


def _expand(c: Call, a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """A reduced tensor broadcast back to X's shape."""
    axes = _axes(c, x)
    a = np.asarray(a)
    if not c.attr("keep_dim", False) or a.ndim != x.ndim:
        a = a.reshape([1 if i in axes else d for i, d in enumerate(x.shape)])
    return np.broadcast_to(a, x.shape)


def _reduce_grad_kernel(name):
    def kernel(c: Call):
        if not c.wants("X@GRAD"):
            return {}
        x, g = c.x("X"), _expand(c, c.x("Out@GRAD"), c.x("X"))
        if name == "reduce_sum":
            dx = g
        elif name == "reduce_mean":
            dx = g / max(_math.prod(x.shape[a] for a in _axes(c, x)), 1)
        elif name == "reduce_prod":  # complex: dOut * conj(Out / X)
            with np.errstate(all="ignore"):
                dx = g * _cj(_expand(c, c.x("Out"), x)) / _cj(x)
        else:  # max / min: the grad is shared equally among the elements equal to the result
            mask = x == _expand(c, c.x("Out"), x)
            dx = g * mask / _expand(c, np.sum(mask, axis=_axes(c, x), keepdims=True), x)
        return {"X@GRAD": _arr(dx, x)}
    return kernel


def _reduce_samples(kind):
    def samples(rng):
        def x(shape):
            v = rng.standard_normal(shape)
            return np.where(np.abs(v) < 0.3, np.sign(v) + v, v) if kind == "prod" else v
        return [Sample({"X": [x((2, 3, 4))]}, {"dim": [1], "keep_dim": False, "reduce_all": False}, note="dim=1"),
                Sample({"X": [x((2, 3, 4))]}, {"dim": [1], "keep_dim": True}, note="keep_dim"),
                Sample({"X": [x((2, 3, 4))]}, {"dim": [0, -1]}, note="dim=[0,-1]"),
                Sample({"X": [x((2, 3))]}, {"dim": [], "reduce_all": True}, note="reduce_all"),
                Sample({"X": [x((2, 3))]}, {"dim": [0], "reduce_all": True, "keep_dim": True},
                       note="reduce_all keep_dim"),
                Sample({"X": [np.asarray(x(()))]}, {"dim": [], "reduce_all": True}, note="0-D")] + (
            [] if kind in ("max", "min") else  # Paddle registers complex kernels for sum, mean, prod
            [Sample({"X": [x((2, 3, 4)) + 1j * x((2, 3, 4))]}, {"dim": [1], "keep_dim": False}, note="complex"),
             Sample({"X": [x((2, 3)) + 1j * x((2, 3))]}, {"dim": [], "reduce_all": True},
                    note="complex, reduce_all")])
    return samples


_REDUCE = {"reduce_sum": (np.sum, ("X",)), "reduce_mean": (np.mean, ("X",)),
           "reduce_max": (np.max, ("X", "Out")), "reduce_min": (np.min, ("X", "Out")),
           "reduce_prod": (np.prod, ("X", "Out"))}
def _reduce_mean_grad_grad(fwd: FwdOp) -> list[GradOp]:
    """reduce_mean_grad is linear in Out@GRAD, so its grad is a reduce_mean of
    the incoming X@GRAD@GRAD over the same dims (Paddle 3.3.1 emits exactly that)."""
    return [GradOp("reduce_mean", {"X": [n + "@GRAD" for n in fwd.output("X@GRAD")]},
                   {"Out": fwd.grads_of(fwd.input("Out@GRAD"))}, fwd.attrs_desc, {})]


for _name, (_fn, _reads) in _REDUCE.items():
    register(OpDef(type=_name, inputs=("X",), outputs=("Out",), kernel=_reduce_kernel(_name, _fn),
                   grad=GradSpec(f"{_name}_grad", _reads + ("Out@GRAD",), ("X@GRAD",),
                                 kernel=_reduce_grad_kernel(_name),
                                 grad=_reduce_mean_grad_grad if _name == "reduce_mean" else None),
                   samples=_reduce_samples(_name[7:]), attrs_handled=("dim", "keep_dim", "reduce_all", "out_dtype"),
                   doc=f"{_name[7:]} of X over `dim` (all dims with reduce_all or dim=[])"))


# --------------------------------------------------------------------------
# p_norm, squared_l2_norm, cumsum
# --------------------------------------------------------------------------
def _pnorm_axes(c: Call, x: np.ndarray):
    if c.attr("asvector", False) or x.ndim == 0:
        return tuple(range(x.ndim))
    return (normalize_axis(c.attr("axis", -1), x.ndim),)


def _p_norm(c: Call):
    x = c.x("X")
    _real_only(c, x)
    p, axes, keep = c.attr("porder", 2.0), _pnorm_axes(c, x), c.attr("keepdim", False)
    a = np.abs(x)
    if p == 0:
        out = np.sum(x != 0, axis=axes, keepdims=keep)
    elif p == np.inf:
        out = np.max(a, axis=axes, keepdims=keep)
    elif p == -np.inf:
        out = np.min(a, axis=axes, keepdims=keep)
    else:
        with np.errstate(all="ignore"):
            out = np.sum(a ** p, axis=axes, keepdims=keep) ** (1.0 / p)
    return {"Out": _arr(out, x)}


def _p_norm_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x, out, g = c.x("X"), c.x("Out"), c.x("Out@GRAD")
    p, axes = c.attr("porder", 2.0), _pnorm_axes(c, x)
    shape = [1 if i in axes else d for i, d in enumerate(x.shape)]
    out, g = np.reshape(out, shape), np.reshape(g, shape)
    with np.errstate(all="ignore"):
        if p == 0:
            dx = np.zeros_like(x)
        elif p in (np.inf, -np.inf):
            dx = (np.abs(x) == out) * np.sign(x) * g
        else:
            eps = c.attr("epsilon", 1e-12)
            dx = np.abs(x) ** (p - 1.0) / (out ** (p - 1.0) + eps) * g * np.sign(x)
    return {"X@GRAD": _arr(dx, x)}


def _p_norm_samples(rng):
    def x(shape):
        v = rng.standard_normal(shape)
        return np.where(np.abs(v) < 0.3, np.sign(v) + v, v)
    return [Sample({"X": [x((3, 4))]}, {"porder": 2.0, "axis": 1}, note="p=2"),
            Sample({"X": [x((3, 4))]}, {"porder": 3.0, "axis": 0, "keepdim": True}, note="p=3 keepdim"),
            Sample({"X": [x((3, 4))]}, {"porder": 1.0, "axis": -1}, note="p=1"),
            Sample({"X": [x((3, 4))]}, {"porder": 0.5, "axis": 1}, note="p=0.5"),
            Sample({"X": [x((3, 4))]}, {"porder": float("inf"), "axis": 1}, note="p=inf"),
            Sample({"X": [x((3, 4))]}, {"porder": float("-inf"), "axis": 0}, note="p=-inf"),
            Sample({"X": [x((2, 3))]}, {"porder": 2.0, "asvector": True}, note="asvector")]


register(OpDef(type="p_norm", inputs=("X",), outputs=("Out",), kernel=_p_norm,
               grad=GradSpec("p_norm_grad", ("X", "Out", "Out@GRAD"), ("X@GRAD",), kernel=_p_norm_grad),
               samples=_p_norm_samples, attrs_handled=("porder", "axis", "keepdim", "asvector", "epsilon"),
               doc="Out = (sum |X|^p)^(1/p) over `axis` (or all, asvector); p = 0, inf, -inf too"))


def _squared_l2_norm(c: Call):
    x = c.x("X")
    _real_only(c, x)
    return {"Out": _arr(np.sum(x * x).reshape(1), x)}


def _squared_l2_norm_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x, g = c.x("X"), c.x("Out@GRAD")
    return {"X@GRAD": _arr(2.0 * x * np.reshape(g, ()), x)}


register(OpDef(type="squared_l2_norm", inputs=("X",), outputs=("Out",), kernel=_squared_l2_norm,
               grad=GradSpec("squared_l2_norm_grad", ("X", "Out@GRAD"), ("X@GRAD",), kernel=_squared_l2_norm_grad),
               samples=lambda rng: [Sample({"X": [rng.standard_normal((3, 4))]})],
               doc="Out = sum(X^2), shape [1]"))


def _cumsum_raw(x, axis, exclusive, reverse):
    if x.ndim == 0:
        return np.zeros_like(x) if exclusive else x.copy()
    if reverse:
        x = np.flip(x, axis)
    out = np.cumsum(x, axis=axis, dtype=x.dtype)
    if exclusive:
        out = np.concatenate([np.zeros_like(np.take(out, [0], axis=axis)),
                              np.take(out, np.arange(out.shape[axis] - 1), axis=axis)], axis=axis)
    return np.flip(out, axis) if reverse else out


def _cumsum_axis(c: Call, x: np.ndarray):
    if c.attr("flatten", False):
        return x.reshape(-1), 0
    return x, (normalize_axis(c.attr("axis", -1), x.ndim) if x.ndim else 0)


def _cumsum(c: Call):
    x, axis = _cumsum_axis(c, c.x("X"))
    return {"Out": _arr(_cumsum_raw(x, axis, c.attr("exclusive", False), c.attr("reverse", False)), x)}


def _cumsum_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    x = c.x("X")
    g, axis = _cumsum_axis(c, np.reshape(c.x("Out@GRAD"), x.shape))
    dx = _cumsum_raw(g, axis, c.attr("exclusive", False), not c.attr("reverse", False))
    return {"X@GRAD": _arr(dx.reshape(x.shape), x)}


def _cumsum_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((3, 4))]}, {}, note="default axis -1"),
            Sample({"X": [r((3, 4))]}, {"axis": 0}, note="axis 0"),
            Sample({"X": [r((2, 3))]}, {"flatten": True}, note="flatten"),
            Sample({"X": [r((3, 4))]}, {"axis": 1, "exclusive": True}, note="exclusive"),
            Sample({"X": [r((3, 4))]}, {"axis": 1, "reverse": True}, note="reverse"),
            Sample({"X": [r((2, 3, 2))]}, {"axis": 1, "exclusive": True, "reverse": True}, note="exclusive reverse")]


register(OpDef(type="cumsum", inputs=("X",), outputs=("Out",), kernel=_cumsum,
               grad=GradSpec("cumsum_grad", ("X", "Out@GRAD"), ("X@GRAD",), kernel=_cumsum_grad),
               samples=_cumsum_samples, attrs_handled=("axis", "flatten", "exclusive", "reverse"),
               doc="Out = cumulative sum of X along `axis` (flattened with `flatten`)"))
