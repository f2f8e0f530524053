"""The PIR-only ops the interpreter runs itself: values moved around, not computed.

PIR adds ops of its own around the computations the legacy kernels do:
vectors of values (`builtin.combine` / `split` / `slice`), named outputs
(`builtin.shadow_output`, `pd_op.fetch`), constant int arrays
(`pd_op.full_int_array`, which feeds the attributes PIR passes as tensors),
tensor arrays (`pd_op.create_array`, `array_write_`, `array_read`,
`array_length`) and the stacks a control-flow backward section keeps its
forward values on (`cf.stack_create`, `cf.tuple_push`, `cf.tuple_pop`,
`cf.has_elements`). None of them has a legacy kernel to share; each is a
function here, `glue(operand values, attrs) -> result values`, found by op
name in `GLUE`. Regions (`pd_op.if` / `while` / `pylayer`, `cf.yield`) need
the executor's block runner and are in `pir_executor`.

A stack is one Python list, the value of all three results of its
`cf.stack_create` (stack, inlet, outlet): a push appends a tuple, a pop
takes the last one, so a backward `while` pops its iterations in reverse.
A tensor array is a Python list of arrays; `array_write_` returns a new list
(the executor then rebinds the array operand to it, as Paddle writes in place).
A few mapped `pd_op` ops whose own legacy type has no kernel run all the
same: on glue here (`pd_op.print` and the stream syncs pass their value
through, `view_dtype`, the causal softmax), or on another legacy type's
kernel that computes them (`ROUTES`: `abs_double_grad` is `abs_grad` of
ddx, ...; `routed`). `paddle_cpu` / `cpu_kernel_words` say, for the "no
kernel" error of the others, whether Paddle 3.3.1 has a CPU kernel for the
PIR name (data/pir_cpu_kernels.json); testdata/pir_opmap/no_kernel.json lists
them all.
`resolve` finds the legacy form a `pd_op.*` op computes with (through
`pybackward.pir.opmap`), in-place variants included; `legacy_attrs`,
`attr_value` and `cast_to` move attributes and values between the PIR op and
the legacy kernel.
May import: `pybackward.base`, `pybackward.ops` (the registry), `pybackward.pir`.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..base import dtypes
from ..base.errors import ExecutionError, PyBackwardError
from ..ops import registry
from ..pir import opmap
from ..pir.opmap import Resolved
from ..pir.model import Operation

#: glue(operand values, the op's attrs as plain values) -> result values
Glue = Callable[[Sequence[Any], dict[str, Any]], list[Any]]


def numpy_dtype(name: str) -> np.dtype | None:
    """The NumPy dtype of a PIR dtype name ('float32', 'bool', ...); None if it has none."""
    try:
        return dtypes.to_numpy(dtypes.from_any(name))
    except (ValueError, KeyError, ExecutionError):
        return None


def _index(v: Any) -> int:
    """An index operand (a one-element int array) as an int."""
    a = np.asarray(v)
    if a.size != 1 or a.dtype.kind not in "iu":
        raise ExecutionError(f"an array index must be one integer, not {a.dtype}{list(a.shape)}")
    return int(a.reshape(-1)[0])


#: Paddle 3.3.1's CPU kernels per PIR op name (testdata/pir_opmap/gen_cpu_kernels.py).
CPU_KERNELS_FILE = Path(__file__).resolve().parent.parent / "data" / "pir_cpu_kernels.json"


@lru_cache(maxsize=1)
def _cpu_kernels() -> dict[str, dict]:
    try:
        raw = json.loads(CPU_KERNELS_FILE.read_text())
    except (OSError, ValueError):
        return {}
    ops = raw.get("ops") if isinstance(raw, dict) else None
    return ops if isinstance(ops, dict) else {}


def paddle_cpu(name: str) -> dict | None:
    """What Paddle 3.3.1 has on CPU for a PIR op name: {"cpu": bool, "kernel": phi kernel
    name, "dtypes": [...], "cannot_run": why a registered CPU kernel does not run}; None
    when not recorded (not a `pd_op` name Paddle registers)."""
    return _cpu_kernels().get(name)


def cpu_kernel_words(name: str, legacy_cpu: bool | None = None) -> str:
    """Whether Paddle has a CPU kernel for PIR op `name`, in words for a "no kernel" error:
    from Paddle's record of the PIR name, else `legacy_cpu` (the legacy type's record)."""
    rec = paddle_cpu(name)
    if rec is not None:
        if not rec.get("cpu"):
            return "Paddle 3.3.1 has no CPU kernel for it either"
        if rec.get("cannot_run"):
            return f"Paddle 3.3.1 registers a CPU kernel for it that does not run ({rec['cannot_run']})"
        return f"Paddle 3.3.1 has a CPU kernel for it ('{rec.get('kernel')}'), pybackward none yet"
    if legacy_cpu is False:
        return "Paddle 3.3.1 has no CPU kernel for it either"
    if legacy_cpu:
        return "Paddle 3.3.1 has a CPU kernel for it, pybackward none yet"
    return "Paddle 3.3.1 records no CPU kernel for it"


# ----------------------------------------------------------------- vectors
def _combine(vals, attrs):
    return [list(vals)]


def _split(vals, attrs):
    return list(vals[0])


def _slice(vals, attrs):
    return [vals[0][int(attrs["index"])]]


# ------------------------------------------------------------ named values
def _identity(vals, attrs):
    return [vals[0]]


def _nothing(vals, attrs):
    return []


def _assign_out(vals, attrs):
    """`pd_op.assign_out_(x, out)`: out takes x's value, in place (Paddle's `assign` into an
    existing tensor: what a `While` body does to a loop var the legacy program assigned)."""
    return [np.array(vals[0], copy=True)]


def _full_int_array(vals, attrs):
    dt = numpy_dtype(attrs.get("dtype", "int64")) or np.dtype(np.int64)
    return [np.asarray(attrs.get("value", []), dtype=dt).reshape(-1)]


# ----------------------------------------------------------- tensor arrays
def _create_array(vals, attrs):
    return [[]]


def _create_array_like(vals, attrs):
    """`pd_op.create_array_like(input, val)`: an array of input's length, each item a
    tensor like input's item filled with val (Paddle's create_array_like kernel)."""
    val = attrs.get("val", 0.0)
    return [[None if t is None else np.full(np.shape(t), val, dtype=np.asarray(t).dtype) for t in vals[0] or []]]


def _array_write(vals, attrs):
    array, x, i = vals[0], vals[1], _index(vals[2])
    if i < 0:
        raise ExecutionError(f"array_write_: index {i} is negative")
    out = list(array or [])
    if i >= len(out):
        out.extend([None] * (i + 1 - len(out)))
    out[i] = x
    return [out]


def _array_read(vals, attrs):
    array, i = vals[0] or [], _index(vals[1])
    if not 0 <= i < len(array) or array[i] is None:
        raise ExecutionError(f"array_read: index {i} of an array of {len(array)} written items")
    return [array[i]]


def _array_length(vals, attrs):
    return [np.array([len(vals[0] or [])], dtype=np.int64)]


def _tensor_to_array(vals, attrs):
    """`pd_op.tensor_to_array(x, out_grad)`: the gradient of `array_to_tensor` (x's array of
    tensors stacked, use_stack, or concatenated along axis): out_grad cut back into one
    tensor per item of x (Paddle's tensor_to_array kernel; legacy tensor_array_to_tensor_grad)."""
    items, g = list(vals[0] or []), np.asarray(vals[1])
    axis = int(attrs.get("axis", 0))
    if attrs.get("use_stack", False):
        axis = axis + g.ndim if axis < 0 else axis
        if g.shape[axis] != len(items):
            raise ExecutionError(f"tensor_to_array: out_grad has {g.shape[axis]} items on axis {axis}, "
                                 f"the array {len(items)}")
        return [[np.ascontiguousarray(np.take(g, i, axis=axis)) for i in range(len(items))]]
    axis = axis + g.ndim if axis < 0 else axis
    cuts = np.cumsum([np.shape(t)[axis] for t in items])[:-1]
    return [[np.ascontiguousarray(p) for p in np.split(g, cuts, axis=axis)]]


# ------------------------------------------------------------------ stacks
def _stack_create(vals, attrs):
    stack: list = []
    return [stack, stack, stack]


def _tuple_push(vals, attrs):
    vals[0].append(tuple(vals[1:]))
    return []


def _tuple_pop(vals, attrs):
    stack = vals[0]
    if not stack:
        raise ExecutionError("cf.tuple_pop: the stack is empty (more pops than the forward section pushed)")
    return list(stack.pop())


def _has_elements(vals, attrs):
    return [np.array([len(vals[0]) > 0])]


# --------------------- mapped PIR ops whose legacy type has no kernel: the computation elsewhere
def _view_dtype(vals, attrs):
    """`pd_op.view_dtype`: the same bytes read as another dtype (the last dim scales by the
    size ratio), as NumPy's `view` does on a C-contiguous array."""
    dt = numpy_dtype(str(attrs.get("dtype", "")))
    if dt is None:
        raise ExecutionError(f"view_dtype: no NumPy dtype for {attrs.get('dtype')!r}")
    x = np.ascontiguousarray(vals[0])
    if x.ndim == 0 or (x.shape[-1] * x.dtype.itemsize) % dt.itemsize:
        raise ExecutionError(f"view_dtype: {x.dtype}{list(x.shape)} cannot be viewed as {dt}: "
                             "the last dim's bytes must divide into the new dtype's size")
    return [x.view(dt)]


def _view_dtype_grad(vals, attrs):
    """`pd_op.view_dtype_grad`: the output gradient's bytes read back in the input's dtype."""
    x, g = np.asarray(vals[0]), np.ascontiguousarray(vals[1])
    if g.ndim == 0 or (g.shape[-1] * g.dtype.itemsize) % x.dtype.itemsize:
        raise ExecutionError(f"view_dtype_grad: {g.dtype}{list(g.shape)} cannot be viewed as {x.dtype}")
    return [g.view(x.dtype)]


def _causal_softmax(vals, attrs):
    """`pd_op.fused_softmax_mask_upper_triangle`: softmax over the last axis of x with every
    column above the diagonal of the last two dims masked out (Paddle's causal-attention
    softmax), on the legacy `softmax` kernel."""
    x = np.asarray(vals[0])
    if x.ndim < 2:
        raise ExecutionError(f"fused_softmax_mask_upper_triangle: x must have 2 dims or more, not {list(x.shape)}")
    rows, cols = x.shape[-2], x.shape[-1]
    masked = np.where(np.triu(np.ones((rows, cols), dtype=bool), k=1), np.array(-np.inf, x.dtype), x)
    out = registry.get("softmax").kernel(registry.Call("softmax", {"X": [masked]}, {"axis": -1},
                                                       {"Out": ["out"]}))
    y = out["Out"]
    y = y[0] if isinstance(y, (list, tuple)) else y
    return [np.asarray(y).astype(x.dtype, copy=False)]


GLUE: dict[str, Glue] = {
    "builtin.combine": _combine,
    "builtin.split": _split,
    "builtin.slice": _slice,
    "builtin.shadow_output": _nothing,
    "builtin.set_parameter": _nothing,
    "pd_op.fetch": _identity,
    "pd_op.assign_out_": _assign_out,
    "pd_op.full_int_array": _full_int_array,
    "pd_op.create_array": _create_array,
    "pd_op.create_array_like": _create_array_like,
    "pd_op.array_write_": _array_write,
    "pd_op.array_read": _array_read,
    "pd_op.array_length": _array_length,
    "pd_op.tensor_to_array": _tensor_to_array,
    "cf.stack_create": _stack_create,
    "cf.tuple_push": _tuple_push,
    "cf.tuple_pop": _tuple_pop,
    "cf.has_elements": _has_elements,
    # values passed through: Paddle's print writes the value to stderr (pybackward prints
    # nothing), the stream syncs of a device have no work on a NumPy run
    "pd_op.print": _identity,
    "pd_op.sync_calc_stream": _identity,
    "pd_op.sync_calc_stream_": _identity,
    "pd_op.sync_comm_stream": _identity,
    "pd_op.sync_comm_stream_": _identity,
    "pd_op.view_dtype": _view_dtype,
    "pd_op.view_dtype_grad": _view_dtype_grad,
    "pd_op.fused_softmax_mask_upper_triangle": _causal_softmax,
}

#: Glue ops that write an operand in place: (operand, result) pairs (the operand's value is the result's from then on).
GLUE_INPLACE: dict[str, tuple[tuple[int, int], ...]] = {"pd_op.array_write_": ((0, 0),), "pd_op.assign_out_": ((1, 0),)}


# -------------------------------------------- legacy inputs PIR does not pass
def _transpose_xshape(ins: dict[str, list], attrs: dict[str, Any]) -> None:
    """transpose2_grad reads the forward input's dims from XShape; PIR's
    transpose_grad has only the output gradient and the permutation."""
    g = ins.get("Out@GRAD")
    if g and "XShape" not in ins:
        perm = [int(p) for p in attrs.get("axis") or ()]
        gshape = np.shape(g[0])
        if sorted(p % max(len(gshape), 1) for p in perm) == list(range(len(gshape))):
            shape = [0] * len(gshape)
            for i, p in enumerate(perm):
                shape[p % len(gshape)] = gshape[i]
            ins["XShape"] = [np.empty((0, *shape), dtype=np.asarray(g[0]).dtype)]


#: legacy type -> fills, in place, legacy inputs its PIR op does not have.
LEGACY_INPUTS: dict[str, Callable[[dict[str, list], dict[str, Any]], None]] = {
    "transpose2_grad": _transpose_xshape,
}


# ----------------------------------------------------------- the op map
# ------------------------------------- routes: a legacy kernel that computes another op
@dataclass(frozen=True)
class Route:
    """A mapped PIR op whose own legacy type has no kernel, computed by another legacy
    type's kernel: `operands` / `results` give, per PIR operand / result name, the slot of
    `legacy_type` it is (absent: not passed / not computed); `attrs` renames PIR
    attributes to `legacy_type`'s (the others keep their legacy names); `implied`: attrs
    `legacy_type` needs set; `why`: the identity that makes the route right."""

    legacy_type: str
    operands: tuple[tuple[str, str], ...]
    results: tuple[tuple[str, str], ...]
    why: str
    attrs: tuple[tuple[str, str], ...] = ()
    implied: tuple[tuple[str, Any], ...] = ()


ROUTES: dict[str, Route] = {
    "pd_op.abs_double_grad": Route("abs_grad", (("x", "X"), ("grad_x_grad", "Out@GRAD")),
                                   (("grad_out_grad", "X@GRAD"),), "ddout = sign(x) * ddx = abs_grad(x, ddx)"),
    "pd_op.clip_double_grad": Route("clip_grad", (("x", "X"), ("grad_x_grad", "Out@GRAD")),
                                    (("grad_out_grad", "X@GRAD"),),
                                    "ddout = ddx where min < x < max, else 0 = clip_grad(x, ddx)"),
    "pd_op.pad3d_double_grad": Route("pad3d", (("grad_x_grad", "X"),), (("grad_out_grad", "Out"),),
                                     "ddout = pad3d(ddx): padding is linear"),
    "pd_op.fused_softmax_mask_upper_triangle_grad": Route(
        "softmax_grad", (("Out", "Out"), ("Out_grad", "Out@GRAD")), (("X_grad", "X@GRAD"),),
        "the softmax grad over the last axis; the masked columns have out = 0, so their grad is 0",
        implied=(("axis", -1),)),
    "pd_op.range_v2": Route("range", (("start", "Start"), ("end", "End"), ("step", "Step")), (("out", "Out"),),
                            "range with its start, end and step tensors; the result cast to the declared dtype"),
    "pd_op.embedding_with_scaled_gradient": Route(
        "lookup_table_v2", (("x", "Ids"), ("weight", "W")), (("out", "Out"),),
        "the forward is embedding's lookup (only its gradient is scaled)"),
    "pd_op.max_pool2d_v2": Route(
        "pool2d", (("x", "X"),), (("out", "Out"),),
        "max pooling with explicit paddings (saved_idx is not computed)",
        attrs=(("kernel_size", "ksize"),), implied=(("pooling_type", "max"),)),
}


@lru_cache(maxsize=None)
def routed(name: str) -> Resolved | None:
    """The legacy form a mapped PIR op without a kernel of its own is computed by (ROUTES), or None."""
    route = ROUTES.get(name)
    m = opmap.pir_to_legacy(name)
    if route is None or m is None:
        return None
    ops, res, renames = dict(route.operands), dict(route.results), dict(route.attrs)
    operands = tuple(o if o.is_mutable_attr else dataclasses.replace(o, slot=ops.get(o.name)) for o in m.operands)
    results = tuple(dataclasses.replace(r, slot=res.get(r.name)) for r in m.results)
    attrs = tuple(dataclasses.replace(a, legacy=renames.get(a.name, a.legacy)) for a in m.attrs)
    rm = dataclasses.replace(m, legacy_type=route.legacy_type, operands=operands, results=results, attrs=attrs,
                             when_attr_not={}, inplace_map=())
    return Resolved(rm, (), route.implied)


# ------------------------------------------- values and attributes, legacy side
def legacy_attrs(op: Operation, m: opmap.OpMap, implied: Sequence[tuple[str, Any]] = ()) -> dict[str, Any]:
    """The op's attributes under their legacy names, over what its name implies
    (`pd_op.triu`: lower=False) and Paddle's legacy defaults."""
    attrs: dict[str, Any] = {}
    for name, _type, default in registry.default_attrs(m.legacy_type) or ():
        attrs[name] = default
    attrs.update(implied)
    for am in m.attrs:
        a = op.attrs.get(am.name)
        if am.legacy is None or a is None or a.tag == "1.a_place":
            continue
        v = a.py()
        if a.tag == "1.a_dtype":
            try:
                v = opmap.dtype_from_pir(v)
            except PyBackwardError:
                v = -1
        attrs[am.legacy] = v
    return attrs


def attr_value(x: Any, int_array: bool) -> Any:
    """An operand carrying a legacy attribute, as that attribute's value."""
    if isinstance(x, list):                         # a vector of one-element tensors
        x = np.concatenate([np.asarray(e).reshape(-1) for e in x]) if x else np.zeros(0, np.int64)
    a = np.asarray(x)
    if int_array:
        return [int(i) for i in a.reshape(-1)]
    if a.size != 1:
        return [i.item() for i in a.reshape(-1)]
    return a.reshape(-1)[0].item()


def cast_to(x: Any, dt: np.dtype | None) -> Any:
    """A kernel's output in its result's declared dtype (a complex gradient of a
    real value is its real part, as Paddle's grad kernels take it)."""
    if dt is None or x is None or isinstance(x, list):
        return x
    if not isinstance(x, np.ndarray):
        x = np.asarray(x)
    if x.dtype == dt:
        return x
    if x.dtype.kind == "c" and dt.kind != "c":
        x = x.real
    return x.astype(dt)
