"""Elementwise binary ops with Paddle's `axis` broadcasting, and their grads."""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from .._unary import cj, no_int_kernel
from .._util import broadcast_pair, unbroadcast
from ..paddle_data import paddle_op
from ..paddle_table import paddle_opdef
from ..registry import Call, GradSpec, OpDef, Sample, register

XY_OUT = dict(inputs=("X", "Y"), outputs=("Out",), attrs_handled=("axis",))


def _pair(c: Call):
    x, y = c.x("X"), c.x("Y")
    xb, yb = broadcast_pair(x, y, c.attr("axis", -1))
    return x, y, xb, yb


def _samples(rng: np.random.Generator, positive_y: bool = False, distinct: bool = False,
             complex_: bool = False):
    def y(shape):
        v = rng.standard_normal(shape)
        return np.abs(v) + 0.5 if positive_y else v

    def x(shape):
        v = rng.standard_normal(shape)
        return np.abs(v) + 0.5 if positive_y else v
    out = [
        Sample({"X": [x((3, 4))], "Y": [y((3, 4))]}, {"axis": -1}),
        Sample({"X": [x((2, 3, 4))], "Y": [y((3,))]}, {"axis": 1}, note="Y aligned at axis 1"),
        Sample({"X": [x((2, 3, 4))], "Y": [y((4,))]}, {"axis": -1}, note="numpy broadcast"),
        Sample({"X": [x((2, 3, 4))], "Y": [y((2, 1, 4))]}, {"axis": -1}),
        Sample({"X": [x((3,))], "Y": [y((2, 3))]}, {"axis": -1}, note="X broadcast"),
        Sample({"X": [x((2, 3, 4))], "Y": [y((3, 1))]}, {"axis": 1}, note="trailing 1 trimmed"),
    ]
    if distinct:  # max/min: keep X and Y apart so the kink is not sampled
        for s in out:
            s.inputs["Y"][0] = s.inputs["Y"][0] + 3.0 * np.sign(rng.standard_normal(s.inputs["Y"][0].shape))
    if complex_:  # Paddle registers complex64 / complex128 kernels (pow: Re(X) > 0, off log's cut)
        def z(shape):
            v = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
            return np.abs(v.real) + 0.5 + 1j * v.imag if positive_y else v
        out += [Sample({"X": [z((3, 4))], "Y": [z((3, 4))]}, {"axis": -1}, note="complex"),
                Sample({"X": [z((2, 3, 4))], "Y": [z((3, 1))]}, {"axis": 1}, note="complex, Y aligned at axis 1"),
                Sample({"X": [z((3,))], "Y": [z((2, 3))]}, {"axis": -1}, note="complex, X broadcast")]
    return out


def _to_shape(g: np.ndarray, full: tuple, aligned: tuple, like: np.ndarray) -> np.ndarray:
    """A full-size gradient summed back to an operand (its aligned shape, then its own)."""
    if g.shape != full:
        g = np.broadcast_to(g, full)
    if aligned != full:
        g = unbroadcast(g, aligned)
    return g.reshape(like.shape).astype(like.dtype, copy=False)


def _binary(name: str, fwd, dx, dy, grad_inputs=("X", "Y", "Out@GRAD"), uses_out: bool = False,
            grad_grad: GradSpec | None = None, **sample_kw):
    """Declare `elementwise_<name>` with grad `elementwise_<name>_grad`.

    dx/dy(x, y, out, g) give the full-size grads before unbroadcasting; `out`
    is only computed (or read) for ops whose rule uses it (`uses_out`).
    """
    def kernel(c: Call):
        _, _, xb, yb = _pair(c)
        x = c.x("X")
        if name in ("max", "min") and (xb.dtype.kind == "c" or yb.dtype.kind == "c"):
            raise ExecutionError(f"op {c.op_type}: Paddle 3.3.1 has no complex kernel for it")
        return {"Out": np.asarray(fwd(xb, yb)).astype(np.result_type(x, c.x("Y")), copy=False)}

    def grad_kernel(c: Call):
        x, y, xb, yb = _pair(c)
        g = c.x("Out@GRAD")
        out = (c.x("Out") if c.has("Out") else fwd(xb, yb)) if uses_out else None
        full = xb.shape if xb.shape == yb.shape else np.broadcast_shapes(xb.shape, yb.shape)
        res = {}
        if c.wants("X@GRAD"):
            res["X@GRAD"] = _to_shape(dx(xb, yb, out, g), full, xb.shape, x)
        if c.wants("Y@GRAD"):
            res["Y@GRAD"] = _to_shape(dy(xb, yb, out, g), full, yb.shape, y)
        return res

    register(OpDef(
        type=f"elementwise_{name}", **XY_OUT, kernel=kernel,
        grad=GradSpec(f"elementwise_{name}_grad", grad_inputs, ("X@GRAD", "Y@GRAD"), kernel=grad_kernel,
                      grad=grad_grad),
        samples=lambda rng: _samples(rng, **sample_kw),
        doc=f"Out = X {name} Y, Y broadcast to X at `axis`"))


def _mul_grad_grad(c: Call):
    """Second order of Out = X * Y: given DDX, DDY (the gradients flowing into
    X@GRAD, Y@GRAD) and DOut, DDOut = DDX*Y + X*DDY, dX = DDY*DOut, dY = DDX*DOut."""
    x, y, dout = c.x("X"), c.x("Y"), c.x("DOut")
    axis = c.attr("axis", -1)
    xb, yb = broadcast_pair(x, y, axis)
    full = np.broadcast_shapes(xb.shape, yb.shape)
    ddx = broadcast_pair(c.x("DDX"), y, axis)[0] if c.has("DDX") else None
    ddy = broadcast_pair(x, c.x("DDY"), axis)[1] if c.has("DDY") else None
    res = {}
    if c.wants("DDOut"):
        dd = np.zeros(full, dtype=np.result_type(x, y))
        if ddx is not None:
            dd = dd + ddx * yb
        if ddy is not None:
            dd = dd + xb * ddy
        res["DDOut"] = dd.astype(np.result_type(dout, dd) if np.iscomplexobj(dd) else dout.dtype,
                                 copy=False)   # DOut's dtype; complex stays complex (Out's dtype)
    # complex: X@GRAD = conj(DDY) * DOut, Y@GRAD = conj(DDX) * DOut (dX = DOut * conj(Y) is
    # antiholomorphic in Y); DDOut keeps DDX * Y + X * DDY
    if c.wants("X@GRAD"):
        res["X@GRAD"] = _to_shape(cj(ddy) * dout if ddy is not None else np.zeros(full), full, xb.shape, x)
    if c.wants("Y@GRAD"):
        res["Y@GRAD"] = _to_shape(cj(ddx) * dout if ddx is not None else np.zeros(full), full, yb.shape, y)
    return res


_MUL_GRAD_GRAD = GradSpec(
    "elementwise_mul_grad_grad",
    ("DDX=X@GRAD@GRAD", "DDY=Y@GRAD@GRAD", "DOut=Out@GRAD", "X", "Y"),
    ("DDOut=Out@GRAD@GRAD", "X@GRAD", "Y@GRAD"), kernel=_mul_grad_grad)

def _add_grad_grad(c: Call):
    """Second order of Out = X + Y: DDOut = DDX + DDY (each aligned to DOut
    at `axis`); X and Y get no second-order gradient."""
    dout = np.asarray(c.x("DOut"))
    axis = c.attr("axis", -1)
    dd = np.zeros(dout.shape, dtype=dout.dtype)
    for slot in ("DDX", "DDY"):
        if c.has(slot):
            dd = dd + broadcast_pair(dout, np.asarray(c.x(slot)), axis)[1]
    # DOut's dtype; complex DDX / DDY keep DDOut complex (Out's dtype)
    dtype = np.result_type(dout, dd) if np.iscomplexobj(dd) else dout.dtype
    return {"DDOut": dd.astype(dtype, copy=False)} if c.wants("DDOut") else {}


# Paddle's ElementwiseAddDoubleGradMaker (issue #35: without it a target that
# is itself a gradient of an add lost its second-order term).
_ADD_GRAD_GRAD = GradSpec(
    "elementwise_add_grad_grad", ("DDX=X@GRAD@GRAD", "DDY=Y@GRAD@GRAD", "DOut=Out@GRAD", "Y"),
    ("DDOut=Out@GRAD@GRAD",), kernel=_add_grad_grad)

# fmt: off
_binary("add", np.add, lambda x, y, o, g: g,      lambda x, y, o, g: g, grad_grad=_ADD_GRAD_GRAD,
        complex_=True)
_binary("sub", np.subtract, lambda x, y, o, g: g, lambda x, y, o, g: -g, complex_=True)
_binary("mul", np.multiply, lambda x, y, o, g: g * cj(y), lambda x, y, o, g: g * cj(x),
        grad_grad=_MUL_GRAD_GRAD, complex_=True)
_binary("div", np.divide, lambda x, y, o, g: g / cj(y), lambda x, y, o, g: -g * cj(o) / cj(y),
        grad_inputs=("X", "Y", "Out", "Out@GRAD"), uses_out=True, positive_y=True, complex_=True)
_binary("max", np.maximum, lambda x, y, o, g: g * (x > y), lambda x, y, o, g: g * (x <= y), distinct=True)
_binary("min", np.minimum, lambda x, y, o, g: g * (x < y), lambda x, y, o, g: g * (x >= y), distinct=True)
_binary("pow", np.power, lambda x, y, o, g: g * cj(y) * cj(np.power(x, y - 1)),
        lambda x, y, o, g: g * cj(o) * cj(np.log(x)), uses_out=True, positive_y=True, complex_=True)
# fmt: on


def _grad_add(c: Call):
    _, _, xb, yb = _pair(c)
    return {"Out": xb + yb}


register(OpDef(type="grad_add", **XY_OUT, kernel=_grad_add, grad=None,
               doc="Out = X + Y; Paddle's in-place gradient accumulation op"))


# --------------------------------------------------------------------------
# More binary ops, with slots and grad rules from Paddle's records. mod and
# floordiv take `axis`; fmax, fmin, heaviside and copysign broadcast as NumPy.
# Integer kernels keep the dtype; integer division by zero is an error.
# --------------------------------------------------------------------------
def _no_zero_divisor(c: Call, y: np.ndarray) -> None:
    if y.dtype.kind in "iu" and not np.all(y):
        raise ExecutionError(f"op {c.op_type}: integer division by zero")


def _remainder(x, y):
    """Paddle's remainder: C's fmod, moved to the divisor's sign (Python's %)."""
    r = np.fmod(x, y)
    return np.where((r != 0) & ((r < 0) != (y < 0)), r + y, r)


_BASIC = ("float32", "float64", "int32", "int64")
_ALL_INTS = ("float16", "float32", "float64", "uint8", "int8", "int16", "int32", "int64")


def _pd_binary(op_type: str, fwd, grads: dict | None = None, dtypes: tuple[str, ...] = _BASIC,
               zero_check: bool = False, axis: bool = False, samples=None, doc: str = ""):
    """Register a binary op (X, Y -> Out, or x, y -> out) from Paddle's records.

    fwd(x, y) works on the broadcast operands (of one of Paddle's `dtypes`); grads maps an input slot to
    d(x, y, out, g) giving its full-size gradient (before unbroadcasting)."""
    entry = paddle_op(op_type)
    xs, ys = entry["inputs"][0][0], entry["inputs"][1][0]
    os = entry["outputs"][0][0]

    def operands(c: Call):
        x, y = c.x(xs), c.x(ys)
        xb, yb = broadcast_pair(x, y, c.attr("axis", -1))
        return x, y, xb, yb

    def kernel(c: Call):
        x, y, xb, yb = operands(c)
        if x.dtype.name not in dtypes:
            raise ExecutionError(f"op {c.op_type}: Paddle 3.3.1 has no {x.dtype} kernel for it")
        if zero_check:
            _no_zero_divisor(c, y)
        with np.errstate(all="ignore"):
            return {os: np.asarray(fwd(xb, yb)).astype(np.result_type(x, y), copy=False)}

    def grad_kernel(c: Call):
        x, y, xb, yb = operands(c)
        g = c.x(os + "@GRAD")
        full = np.broadcast_shapes(xb.shape, yb.shape)
        with np.errstate(all="ignore"):
            out = fwd(xb, yb)
            res = {}
            for slot, arr, aligned in ((xs, x, xb.shape), (ys, y, yb.shape)):
                if c.wants(slot + "@GRAD"):
                    res[slot + "@GRAD"] = _to_shape(np.asarray(grads[slot](xb, yb, out, g)), full, aligned, arr)
        return res

    kernels = {}
    if grads is not None:
        kernels[entry["rule"][0]["type"]] = grad_kernel
    register(paddle_opdef(op_type, kernel, kernels, samples=samples, doc=doc or f"{os} = {op_type}({xs}, {ys})",
                          attrs_handled=("axis",) if axis else ()))


def _numpy_samples(rng, slots=("X", "Y"), x_gen=None, y_gen=None):
    """NumPy-broadcast samples (for ops without an `axis` attr)."""
    xg = x_gen or (lambda s: rng.standard_normal(s))
    yg = y_gen or (lambda s: rng.standard_normal(s))
    a, b = slots
    return [Sample({a: [xg((3, 4))], b: [yg((3, 4))]}),
            Sample({a: [xg((2, 3, 4))], b: [yg((4,))]}, note="Y broadcast"),
            Sample({a: [xg((3, 1))], b: [yg((2, 1, 4))]}, note="both broadcast"),
            Sample({a: [np.asarray(xg(()))], b: [yg((2, 3))]}, note="0-D X")]


def _apart(rng, s):
    """fmax/fmin samples: Y kept 3 away from a standard-normal X."""
    return rng.standard_normal(s) + 3.0 * rng.choice([-1.0, 1.0], s)


def _mod_samples(rng):
    out = _samples(rng, positive_y=True)[:3]
    out.append(Sample({"X": [rng.uniform(-5, 5, (3, 4))], "Y": [-rng.uniform(0.5, 2.0, (3, 4))]},
                      note="negative divisor"))
    return out


def _heaviside_samples(rng):
    x = rng.standard_normal((3, 4))
    x[0, :2] = 0.0
    return _numpy_samples(rng) + [Sample({"X": [x], "Y": [rng.standard_normal((3, 4))]}, wrt=("Y",),
                                         note="X = 0 picks Y")]


def _copysign(x, y):
    if x.dtype.kind == "f":
        return np.copysign(x, y)
    if x.dtype.kind == "b":  # booleans carry no sign
        return x
    return np.where(y < 0, -np.abs(x), np.abs(x))


def _copysign_samples(rng):
    return _numpy_samples(rng, ("x", "y"), y_gen=lambda s: _apart(rng, s))


# fmt: off
_pd_binary("elementwise_mod", _remainder, zero_check=True, axis=True, samples=_mod_samples,
           grads={"X": lambda x, y, o, g: g, "Y": lambda x, y, o, g: -g * np.floor(x / y)},
           doc="Out = X mod Y with the divisor's sign (Python's %); grad (remainder_grad, for which Paddle "
               "3.3.1 has no CPU kernel): dX = dOut, dY = -dOut * floor(X / Y)")
_pd_binary("elementwise_floordiv", np.floor_divide, zero_check=True, axis=True, dtypes=_ALL_INTS,
           samples=lambda rng: _samples(rng)[:3] + [
               Sample({"X": [rng.integers(-20, 20, (3, 4)).astype(np.int32)],
                       "Y": [rng.integers(1, 5, (3, 4)).astype(np.int32) * rng.choice([-1, 1], (3, 4)).astype(np.int32)]},
                      note="int32")],
           doc="Out = floor(X / Y) (Python's //); no gradient")
_pd_binary("elementwise_fmax", np.fmax, samples=lambda rng: _numpy_samples(rng, y_gen=lambda s: _apart(rng, s)),
           grads={"X": lambda x, y, o, g: g * ((x >= y) | np.isnan(y)),
                  "Y": lambda x, y, o, g: g * ~((x >= y) | np.isnan(y))},
           doc="Out = max(X, Y), ignoring a NaN operand; ties send the grad to X")
_pd_binary("elementwise_fmin", np.fmin, samples=lambda rng: _numpy_samples(rng, y_gen=lambda s: _apart(rng, s)),
           grads={"X": lambda x, y, o, g: g * ((x <= y) | np.isnan(y)),
                  "Y": lambda x, y, o, g: g * ~((x <= y) | np.isnan(y))},
           doc="Out = min(X, Y), ignoring a NaN operand; ties send the grad to X")
_pd_binary("elementwise_heaviside", lambda x, y: np.where(x == 0, y, x > 0), samples=_heaviside_samples,
           grads={"X": lambda x, y, o, g: 0.0 * g, "Y": lambda x, y, o, g: g * (x == 0)},
           doc="Out = Y where X == 0, else 1 for X > 0 and 0 otherwise (NaN X gives 0)")
_pd_binary("copysign", _copysign, samples=_copysign_samples, dtypes=_ALL_INTS + ("bool",),
           grads={"x": lambda x, y, o, g: np.where(x == 0, 0.0, g * (o / x)), "y": lambda x, y, o, g: 0.0 * g},
           doc="out = |x| with the sign of y")
# fmt: on


# --------------------------------------------------------------------------
# lerp: Out = X + Weight * (Y - X), all three broadcast as NumPy
# --------------------------------------------------------------------------
def _lerp(c: Call):
    x, y, w = c.x("X"), c.x("Y"), c.x("Weight")
    no_int_kernel(c, x)
    return {"Out": np.asarray(x + w * (y - x)).astype(x.dtype, copy=False)}


def _lerp_grad(c: Call):
    x, y, w, g = c.x("X"), c.x("Y"), c.x("Weight"), c.x("Out@GRAD")
    full = np.broadcast_shapes(x.shape, y.shape, w.shape)
    res = {}
    if c.wants("X@GRAD"):
        res["X@GRAD"] = _to_shape(g * (1.0 - w), full, x.shape, x)
    if c.wants("Y@GRAD"):
        res["Y@GRAD"] = _to_shape(g * w, full, y.shape, y)
    return res


def _lerp_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((3, 4))], "Y": [r((3, 4))], "Weight": [rng.uniform(0, 1, (3, 4))]}),
            Sample({"X": [r((2, 3))], "Y": [r((3,))], "Weight": [np.array([0.25])]}, note="Y broadcast, weight [1]"),
            Sample({"X": [r((3,))], "Y": [r((2, 3))], "Weight": [rng.uniform(0, 1, (2, 1))]}, note="X broadcast"),
            Sample({"X": [r((3,))], "Y": [r((3,))], "Weight": [rng.uniform(0, 1, (2, 3))]}, note="weight broadcast"),
            Sample({"X": [np.asarray(r(()))], "Y": [np.asarray(r(()))], "Weight": [np.asarray(0.7)]}, note="0-D")]


register(paddle_opdef("lerp", _lerp, {"lerp_grad": _lerp_grad}, samples=_lerp_samples,
                      doc="Out = X + Weight * (Y - X); Weight gets no gradient"))
