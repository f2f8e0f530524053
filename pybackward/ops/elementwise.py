"""Elementwise binary ops with Paddle's `axis` broadcasting, and their grads."""
from __future__ import annotations

import numpy as np

from ._util import broadcast_pair, unbroadcast
from .registry import Call, GradSpec, OpDef, Sample, register

XY_OUT = dict(inputs=("X", "Y"), outputs=("Out",), attrs_handled=("axis",))


def _pair(c: Call):
    x, y = c.x("X"), c.x("Y")
    xb, yb = broadcast_pair(x, y, c.attr("axis", -1))
    return x, y, xb, yb


def _samples(rng: np.random.Generator, positive_y: bool = False, distinct: bool = False):
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
        res["DDOut"] = dd.astype(dout.dtype, copy=False)
    if c.wants("X@GRAD"):
        res["X@GRAD"] = _to_shape(ddy * dout if ddy is not None else np.zeros(full), full, xb.shape, x)
    if c.wants("Y@GRAD"):
        res["Y@GRAD"] = _to_shape(ddx * dout if ddx is not None else np.zeros(full), full, yb.shape, y)
    return res


_MUL_GRAD_GRAD = GradSpec(
    "elementwise_mul_grad_grad",
    ("DDX=X@GRAD@GRAD", "DDY=Y@GRAD@GRAD", "DOut=Out@GRAD", "X", "Y"),
    ("DDOut=Out@GRAD@GRAD", "X@GRAD", "Y@GRAD"), kernel=_mul_grad_grad)

# fmt: off
_binary("add", np.add, lambda x, y, o, g: g,      lambda x, y, o, g: g)
_binary("sub", np.subtract, lambda x, y, o, g: g, lambda x, y, o, g: -g)
_binary("mul", np.multiply, lambda x, y, o, g: g * y, lambda x, y, o, g: g * x,
        grad_grad=_MUL_GRAD_GRAD)
_binary("div", np.divide, lambda x, y, o, g: g / y, lambda x, y, o, g: -g * o / y,
        grad_inputs=("X", "Y", "Out", "Out@GRAD"), uses_out=True, positive_y=True)
_binary("max", np.maximum, lambda x, y, o, g: g * (x > y), lambda x, y, o, g: g * (x <= y), distinct=True)
_binary("min", np.minimum, lambda x, y, o, g: g * (x < y), lambda x, y, o, g: g * (x >= y), distinct=True)
_binary("pow", np.power, lambda x, y, o, g: g * y * np.power(x, y - 1),
        lambda x, y, o, g: g * o * np.log(x), uses_out=True, positive_y=True)
# fmt: on


def _grad_add(c: Call):
    _, _, xb, yb = _pair(c)
    return {"Out": xb + yb}


register(OpDef(type="grad_add", **XY_OUT, kernel=_grad_add, grad=None,
               doc="Out = X + Y; Paddle's in-place gradient accumulation op"))
