"""Shape ops: reshape2, transpose2, squeeze2, unsqueeze2,
flatten_contiguous_range (all with Paddle's XShape output), concat, split,
stack, unstack, expand_v2, tile, and their grads."""
from __future__ import annotations

import math

import numpy as np

from ...base.errors import ExecutionError
from .._util import unbroadcast
from ..registry import Call, FwdOp, GradOp, GradSpec, OpDef, Sample, register
from ..tensor.creation import ints_from, norm_axis, out_grads, scalar_from, shape_from_xshape, xshape_of


def _reshape_like_xshape(c: Call):
    """The grad of every XShape op that only moves data: reshape back."""
    return {"X@GRAD": np.reshape(c.x("Out@GRAD"), shape_from_xshape(c.x("XShape")))}


def _xshape_grad(name: str, extra_inputs: tuple[str, ...] = (), grad: GradSpec | None = None) -> GradSpec:
    return GradSpec(f"{name}_grad", ("XShape", "Out@GRAD") + extra_inputs, ("X@GRAD",),
                    kernel=_reshape_like_xshape, grad=grad)


#: reshape2_grad's grad (Paddle 3.3.1): DDOut = DDX reshaped like DOut.
_RESHAPE2_GRAD_GRAD = GradSpec(
    "reshape2_grad_grad", ("DDX=X@GRAD@GRAD", "DOut=Out@GRAD"), ("DDOut=Out@GRAD@GRAD",),
    kernel=lambda c: {"DDOut": np.reshape(c.x("DDX"), np.shape(c.x("DOut")))} if c.wants("DDOut") else {})


def _samples(rng, shape, *attr_sets, **extra):
    return [Sample({"X": [rng.standard_normal(shape)], **extra}, dict(a)) for a in attr_sets]


# --------------------------------------------------------------------------
# reshape2
# --------------------------------------------------------------------------
def reshape_target(x_shape: tuple[int, ...], shape: list[int]) -> tuple[int, ...]:
    """Paddle's reshape rule: 0 copies X's dim at that index, one -1 is inferred."""
    out, unknown = [], None
    for i, d in enumerate(shape):
        if d == -1:
            if unknown is not None:
                raise ExecutionError(f"reshape: more than one -1 in shape {shape}")
            unknown = i
            out.append(1)
        elif d == 0:
            if i >= len(x_shape):
                raise ExecutionError(f"reshape: shape {shape} copies dim {i} of a rank-{len(x_shape)} input")
            out.append(x_shape[i])
        elif d < 0:
            raise ExecutionError(f"reshape: invalid dim {d} in shape {shape}")
        else:
            out.append(d)
    size = math.prod(x_shape)
    known = math.prod(out)
    if unknown is not None:
        if known == 0 or size % known:
            raise ExecutionError(f"reshape: cannot infer -1 in {shape} for an input of shape {list(x_shape)}")
        out[unknown] = size // known
    elif known != size:
        raise ExecutionError(f"reshape: shape {shape} does not match an input of shape {list(x_shape)}")
    return tuple(out)


def _reshape2(c: Call):
    x = c.x("X")
    if c.has("ShapeTensor"):  # Paddle: the tensor list wins over the Shape tensor
        shape = ints_from(c, None, "ShapeTensor", "shape")
    else:
        shape = ints_from(c, "Shape", None, "shape")
    return {"Out": np.reshape(x, reshape_target(np.shape(x), shape)), "XShape": xshape_of(x)}


register(OpDef(
    type="reshape2", inputs=("X", "Shape", "ShapeTensor"), outputs=("Out", "XShape"), kernel=_reshape2,
    grad=_xshape_grad("reshape2", grad=_RESHAPE2_GRAD_GRAD), intermediate_outputs=("XShape",),
    attrs_handled=("shape",),
    samples=lambda rng: _samples(rng, (3, 4), {"shape": [0, 2, -1]}, {"shape": [12]}) + [
        Sample({"X": [rng.standard_normal((2, 6))], "Shape": [np.array([3, -1], np.int32)]}, {"shape": [1]},
               note="Shape tensor")],
    doc="Out = X reshaped (0 copies a dim, -1 is inferred)"))


# --------------------------------------------------------------------------
# transpose2
# --------------------------------------------------------------------------
def _perm(c: Call, ndim: int) -> list[int]:
    perm = [norm_axis(a, ndim) for a in c.attr("axis", ())]
    if sorted(perm) != list(range(ndim)):
        raise c.unsupported("axis", c.attr("axis"), f"not a permutation of {ndim} dims")
    return perm


def _transpose2(c: Call):
    x = c.x("X")
    return {"Out": np.transpose(x, _perm(c, np.ndim(x))), "XShape": xshape_of(x)}


def _transpose2_grad(c: Call):
    perm = _perm(c, len(shape_from_xshape(c.x("XShape"))))
    return {"X@GRAD": np.transpose(c.x("Out@GRAD"), np.argsort(perm))}


register(OpDef(
    type="transpose2", inputs=("X",), outputs=("Out", "XShape"), kernel=_transpose2,
    grad=GradSpec("transpose2_grad", ("XShape", "Out@GRAD"), ("X@GRAD",), kernel=_transpose2_grad,
                  sets_lod_level=False),
    intermediate_outputs=("XShape",), attrs_handled=("axis",),
    samples=lambda rng: _samples(rng, (2, 3, 4), {"axis": [2, 0, 1]}, {"axis": [-1, 1, 0]}),
    doc="Out = X with its dims permuted by axis"))


# --------------------------------------------------------------------------
# squeeze2 / unsqueeze2 / flatten_contiguous_range
# --------------------------------------------------------------------------
def _squeeze2(c: Call):
    x = c.x("X")
    shape = np.shape(x)
    axes = c.attr("axes", ())
    if not axes:
        drop = {i for i, d in enumerate(shape) if d == 1}
    else:  # axes whose dim is not 1 are left alone (Paddle's runtime rule)
        drop = {a for a in (norm_axis(v, len(shape), "squeeze axis") for v in axes) if shape[a] == 1}
    out = tuple(d for i, d in enumerate(shape) if i not in drop)
    return {"Out": np.reshape(x, out), "XShape": xshape_of(x)}


register(OpDef(
    type="squeeze2", inputs=("X",), outputs=("Out", "XShape"), kernel=_squeeze2, grad=_xshape_grad("squeeze2"),
    intermediate_outputs=("XShape",), attrs_handled=("axes",),
    samples=lambda rng: _samples(rng, (3, 1, 4, 1), {"axes": [1, 0]}, {"axes": []}, {"axes": [-1]}),
    doc="Out = X without the size-1 dims in axes (all of them if axes is empty)"))


def unsqueeze_shape(shape: tuple[int, ...], axes: list[int]) -> tuple[int, ...]:
    """Paddle's GetUnsqueezeShape: axes are inserted one at a time, each
    relative to the rank reached so far."""
    rank = len(shape)
    out = [0] * (rank + len(axes))
    for axis in axes:
        cur = axis + rank + 1 if axis < 0 else axis
        if not 0 <= cur <= rank:
            raise ExecutionError(f"unsqueeze: axis {axis} is out of range for rank {rank}")
        for i in range(rank, cur - 1, -1):
            if out[i] == 1:  # move an inserted axis right
                out[i + 1], out[i] = 1, 0
        out[cur] = 1
        rank += 1
    it = iter(shape)
    return tuple(d if d == 1 else next(it) for d in out)


def _unsqueeze2(c: Call):
    x = c.x("X")
    axes = ints_from(c, "AxesTensor", "AxesTensorList", "axes")
    return {"Out": np.reshape(x, unsqueeze_shape(np.shape(x), axes)), "XShape": xshape_of(x)}


register(OpDef(
    type="unsqueeze2", inputs=("X", "AxesTensor", "AxesTensorList"), outputs=("Out", "XShape"),
    kernel=_unsqueeze2, grad=_xshape_grad("unsqueeze2", ("AxesTensor", "AxesTensorList")),
    intermediate_outputs=("XShape",), attrs_handled=("axes",),
    samples=lambda rng: _samples(rng, (3, 4), {"axes": [-1, 0, -2]}, {"axes": [1, 1]}),
    doc="Out = X with size-1 dims inserted at axes"))


def _flatten(c: Call):
    x = c.x("X")
    shape = np.shape(x)
    if len(shape) == 0:
        return {"Out": np.reshape(x, (1,)), "XShape": xshape_of(x)}
    start = norm_axis(c.attr("start_axis", 1), len(shape), "start_axis")
    stop = norm_axis(c.attr("stop_axis", -1), len(shape), "stop_axis")
    if stop < start:
        raise c.unsupported("stop_axis", c.attr("stop_axis"), "before start_axis")
    out = shape[:start] + (math.prod(shape[start:stop + 1]),) + shape[stop + 1:]
    return {"Out": np.reshape(x, out), "XShape": xshape_of(x)}


register(OpDef(
    type="flatten_contiguous_range", inputs=("X",), outputs=("Out", "XShape"), kernel=_flatten,
    grad=_xshape_grad("flatten_contiguous_range"), intermediate_outputs=("XShape",),
    attrs_handled=("start_axis", "stop_axis"),
    samples=lambda rng: _samples(rng, (2, 3, 4, 2), {"start_axis": 1, "stop_axis": 2},
                                 {"start_axis": 0, "stop_axis": -1}),
    doc="Out = X with dims start_axis..stop_axis merged into one"))


# --------------------------------------------------------------------------
# concat / split
# --------------------------------------------------------------------------
def _concat_axis(c: Call, ndim: int) -> int:
    return norm_axis(scalar_from(c, "AxisTensor", "axis", 0), ndim)


def _concat(c: Call):
    xs = [np.asarray(v) for v in c.xs("X")]
    return {"Out": np.concatenate(xs, axis=_concat_axis(c, xs[0].ndim))}


def _concat_grad(c: Call):
    xs = c.xs("X")
    g = np.asarray(c.x("Out@GRAD"))
    axis = _concat_axis(c, g.ndim)
    bounds = np.cumsum([np.shape(x)[axis] for x in xs])[:-1]
    parts = np.split(g, bounds, axis=axis)
    names = c.outs.get("X@GRAD", ())
    return {"X@GRAD": [p if i < len(names) and names[i] != "@EMPTY@" else None for i, p in enumerate(parts)]}


def _concat_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((2, 3)), r((2, 2)), r((2, 1))]}, {"axis": 1}),
            Sample({"X": [r((2, 3)), r((1, 3))]}, {"axis": -2}),
            Sample({"X": [r((2, 3)), r((2, 2))], "AxisTensor": [np.array([1], np.int32)]}, {"axis": 0},
                   note="AxisTensor")]


register(OpDef(
    type="concat", inputs=("X", "AxisTensor"), outputs=("Out",), kernel=_concat,
    grad=GradSpec("concat_grad", ("X", "Out@GRAD", "AxisTensor"), ("X@GRAD",), kernel=_concat_grad,
                  keep_empty=True),
    samples=_concat_samples, attrs_handled=("axis",),
    doc="Out = the X tensors joined along axis (grad keeps @EMPTY@ positions)"))


def split_sizes(c: Call, dim: int) -> list[int]:
    num = int(c.attr("num", 0))
    if num > 0:
        if dim % num:
            raise ExecutionError(f"split: dim {dim} is not divisible by num={num}")
        return [dim // num] * num
    sections = ints_from(c, None, "SectionsTensorList", "sections")
    if sections.count(-1) > 1:
        raise c.unsupported("sections", sections, "more than one -1")
    if -1 in sections:
        sections[sections.index(-1)] = dim - (sum(sections) + 1)
    if sum(sections) != dim or any(s < 0 for s in sections):
        raise ExecutionError(f"split: sections {sections} do not add up to dim {dim}")
    return sections


def _split(c: Call):
    x = np.asarray(c.x("X"))
    axis = _concat_axis(c, x.ndim)
    sizes = split_sizes(c, x.shape[axis])
    if c.n_out("Out") and len(sizes) != c.n_out("Out"):
        raise ExecutionError(f"split makes {len(sizes)} parts but has {c.n_out('Out')} outputs")
    return {"Out": np.split(x, np.cumsum(sizes)[:-1], axis=axis)}


def _split_grad(fwd: FwdOp) -> list[GradOp]:
    """split's grad is a `concat` of all Out@GRAD (missing ones are zero-filled
    by the pass), keeping split's attrs."""
    ins = {"X": out_grads(fwd, "Out")}
    if "AxisTensor" in fwd.inputs:
        ins["AxisTensor"] = list(fwd.input("AxisTensor"))
    return [GradOp("concat", ins, {"Out": fwd.grads_of(fwd.input("X"))}, fwd.attrs_desc)]


def _split_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [r((2, 6))]}, {"axis": 1, "num": 3}, outputs={"Out": 3}),
            Sample({"X": [r((5, 2))]}, {"axis": 0, "sections": [2, -1, 1]}, outputs={"Out": 3}),
            Sample({"X": [r((2, 4))], "AxisTensor": [np.array([1], np.int32)]}, {"axis": 0, "num": 2},
                   outputs={"Out": 2}, note="AxisTensor")]


register(OpDef(
    type="split", inputs=("X", "AxisTensor", "SectionsTensorList"), outputs=("Out",), kernel=_split,
    grad=_split_grad, samples=_split_samples, attrs_handled=("axis", "num", "sections"),
    doc="Out = X cut along axis into num equal parts or the given sections (grad: concat)"))


# --------------------------------------------------------------------------
# stack / unstack
# --------------------------------------------------------------------------
def _stack(c: Call):
    xs = [np.asarray(v) for v in c.xs("X")]
    return {"Y": np.stack(xs, axis=norm_axis(c.attr("axis", 0), xs[0].ndim + 1))}


def _stack_grad(c: Call):
    g = np.asarray(c.x("Y@GRAD"))
    axis = norm_axis(c.attr("axis", 0), g.ndim)
    names = c.outs.get("X@GRAD", ())
    return {"X@GRAD": [np.take(g, i, axis=axis) if names[i] != "@EMPTY@" else None for i in range(len(names))]}


register(OpDef(
    type="stack", inputs=("X",), outputs=("Y",), kernel=_stack,
    grad=GradSpec("stack_grad", ("X", "Y@GRAD"), ("X@GRAD",), kernel=_stack_grad, keep_empty=True,
                  sets_lod_level=False),
    attrs_handled=("axis",),
    samples=lambda rng: [Sample({"X": [rng.standard_normal((2, 3)) for _ in range(3)]}, {"axis": 1}),
                         Sample({"X": [rng.standard_normal((2, 3)) for _ in range(2)]}, {"axis": -1})],
    doc="Y = the X tensors stacked along a new axis"))


def _unstack(c: Call):
    x = np.asarray(c.x("X"))
    axis = norm_axis(c.attr("axis", 0), x.ndim)
    return {"Y": [np.take(x, i, axis=axis) for i in range(x.shape[axis])]}


def _unstack_grad(c: Call):
    gs = [np.asarray(g) for g in c.xs("Y@GRAD")]
    return {"X@GRAD": np.stack(gs, axis=norm_axis(c.attr("axis", 0), gs[0].ndim + 1))}


register(OpDef(
    type="unstack", inputs=("X",), outputs=("Y",), kernel=_unstack,
    grad=GradSpec("unstack_grad", ("Y@GRAD",), ("X@GRAD",), kernel=_unstack_grad, sets_lod_level=False),
    attrs_handled=("axis", "num"),
    samples=lambda rng: [Sample({"X": [rng.standard_normal((2, 3, 4))]}, {"axis": 1, "num": 3},
                                outputs={"Y": 3}),
                         Sample({"X": [rng.standard_normal((3, 2))]}, {"axis": -1, "num": 2}, outputs={"Y": 2})],
    doc="Y = the slices of X along axis"))


# --------------------------------------------------------------------------
# expand_v2 / tile
# --------------------------------------------------------------------------
def _expand_shape(c: Call, x_shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(X's shape padded with leading 1s, the output shape)."""
    target = ints_from(c, "Shape", "expand_shapes_tensor", "shape")
    diff = len(target) - len(x_shape)
    if diff < 0:
        raise ExecutionError(f"expand_v2: shape {target} has fewer dims than X {list(x_shape)}")
    xs = (1,) * diff + tuple(x_shape)
    out = []
    for i, (d, t) in enumerate(zip(xs, target)):
        if t == -1 and i >= diff:
            out.append(d)
        elif t <= 0 or (d != 1 and d != t):
            raise ExecutionError(f"expand_v2: cannot expand X {list(x_shape)} to {target} (dim {i})")
        else:
            out.append(t)
    return xs, tuple(out)


def _expand_v2(c: Call):
    x = np.asarray(c.x("X"))
    xs, out = _expand_shape(c, x.shape)
    return {"Out": np.array(np.broadcast_to(x.reshape(xs), out))}


def _expand_v2_grad(c: Call):
    x = np.asarray(c.x("X"))
    xs, _ = _expand_shape(c, x.shape)
    return {"X@GRAD": unbroadcast(np.asarray(c.x("Out@GRAD")), xs).reshape(x.shape)}


register(OpDef(
    type="expand_v2", inputs=("X", "Shape", "expand_shapes_tensor"), outputs=("Out",), kernel=_expand_v2,
    grad=GradSpec("expand_v2_grad", ("X", "Out@GRAD", "Shape", "expand_shapes_tensor"), ("X@GRAD",),
                  kernel=_expand_v2_grad),
    attrs_handled=("shape",),
    samples=lambda rng: _samples(rng, (3, 1), {"shape": [2, -1, 4]}) + _samples(rng, (1, 4), {"shape": [3, 4]}),
    doc="Out = X broadcast to shape (-1 keeps X's dim)"))


def _tile_reps(c: Call, ndim: int) -> tuple[list[int], int]:
    reps = ints_from(c, "RepeatTimes", "repeat_times_tensor", "repeat_times")
    if any(r <= 0 for r in reps):
        raise ExecutionError(f"tile: repeat_times {reps} must be positive")
    nd = max(ndim, len(reps))
    return [1] * (nd - len(reps)) + reps, nd


def _tile(c: Call):
    x = np.asarray(c.x("X"))
    reps, _ = _tile_reps(c, x.ndim)
    return {"Out": np.tile(x, reps)}


def _tile_grad(c: Call):
    x = np.asarray(c.x("X"))
    reps, nd = _tile_reps(c, x.ndim)
    xs = (1,) * (nd - x.ndim) + x.shape
    g = np.asarray(c.x("Out@GRAD")).reshape([v for r, d in zip(reps, xs) for v in (r, d)])
    return {"X@GRAD": g.sum(axis=tuple(range(0, 2 * nd, 2))).reshape(x.shape)}


register(OpDef(
    type="tile", inputs=("X", "RepeatTimes", "repeat_times_tensor"), outputs=("Out",), kernel=_tile,
    grad=GradSpec("tile_grad", ("X", "Out@GRAD", "RepeatTimes", "repeat_times_tensor"), ("X@GRAD",),
                  kernel=_tile_grad, sets_lod_level=False),
    attrs_handled=("repeat_times",),
    samples=lambda rng: _samples(rng, (2, 3), {"repeat_times": [2, 1, 3]}, {"repeat_times": [2]}),
    doc="Out = X repeated repeat_times times along each dim"))
