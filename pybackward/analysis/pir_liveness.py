"""Live ranges of a PIR program's values and the activation-memory peak they give.

The PIR side of the static model behind `pybackward.memory` (`liveness` is
the legacy side; both fill the same `MemoryReport`). Over the top block, in
op order (op i is `program.block.ops[i]`, as `show` numbers them):

* a value is live from its defining op to its last use; a use by an op
  nested in the regions of top-level op i (an `if` / `while` / `pylayer`
  body reading the value by implicit capture) is a use at op i. Values
  defined inside regions are not counted, as the legacy model does not
  look into sub-blocks: the op that owns the regions counts as its operands
  and results.
* a value nothing uses is live at its defining op only, unless it is in
  `keep` (fetched: live to the end).
* values that share their storage count once, as one legacy var does: a
  `builtin.combine` vector is its items (a use of the vector is a use of
  each item), `builtin.split` / `builtin.slice` results and `pd_op.fetch`
  results are the vector or value they read, the result an in-place op
  (`pd_op.relu_`, `pd_op.batch_norm_`, ...) writes is the operand it writes,
  and the three results of `cf.stack_create` are one stack.
* kinds, as for legacy vars: `builtin.parameter` / `builtin.constant`
  values are parameters (their total is counted apart: every parameter of
  the program, used or not); `pd_op.data` values are inputs, live from op 0
  like a legacy feed; the values in `param_grads` (the gradients of the
  parameters, which the caller reads from the backward section) are counted
  apart; the other values defined at or after `backward_start` (the op
  seeding the backward section) are gradients; the rest are activations.
  Inputs, activations and gradients make the peak.
* bytes are the declared dims times the dtype's size, every -1 taken as
  `batch_size`; a vector an op returns is the sum of its items. Tensor
  arrays, stacks and other types without a size are listed as unknown and
  count 0; null values (a gradient nobody asked for) hold nothing.

An analysis: it reads a program and changes nothing.
May import: `pybackward.base`, `pybackward.pir` and the legacy side's report types (`liveness`).
"""
from __future__ import annotations

from typing import Iterable

from ..base import dtypes
from ..base.errors import ArgumentError
from ..pir import opmap
from ..pir.model import Operation, Program, Value
from ..pir.types import DenseTensorType, VectorType
from .liveness import (ACTIVATION, GRADIENT, INPUT, PARAM_GRAD, PARAMETER, MemoryReport, VarLife,
                       activation_peak)

#: Ops whose results are values the run is given, by the attr naming them, and their kind.
INPUT_OPS = {"pd_op.data": ("name", INPUT), "builtin.parameter": ("parameter_name", PARAMETER),
             "builtin.constant": ("value", PARAMETER)}
#: Ops whose results are (items of) a value they read: result -> operand 0.
_ALIAS_OPS = frozenset({"builtin.split", "builtin.slice", "pd_op.fetch"})
_SMALL_FLOATS = {"bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1}


def value_name(v: Value) -> str:
    """A value's name in the report: its data / parameter name, else `%N` (as `run --fetch` takes it)."""
    op = v.defining_op
    if op is not None and op.name in INPUT_OPS:
        n = op.attr(INPUT_OPS[op.name][0], None)
        if isinstance(n, str):
            return n
    return f"%{v.id}" if v.id is not None else f"%?{id(v):x}"


def _itemsize(dtype: str) -> int | None:
    if dtype in _SMALL_FLOATS:
        return _SMALL_FLOATS[dtype]
    try:
        return int(dtypes.to_numpy(dtypes.from_any(dtype)).itemsize)
    except Exception:        # noqa: BLE001  (a dtype with no NumPy form: size unknown)
        return None


def type_bytes(t, batch_size: int) -> int | None:
    """Bytes of a value of type `t` with every -1 dim taken as `batch_size`; None if unknown."""
    if isinstance(t, DenseTensorType):
        size = _itemsize(t.dtype)
        if size is None:
            return None
        n = size
        for d in t.dims:
            n *= batch_size if d < 0 else d
        return n
    if isinstance(t, VectorType):
        parts = [type_bytes(item, batch_size) for item in t.items]
        return None if any(p is None for p in parts) else sum(parts)      # type: ignore[misc]
    return None


def _inplace_pairs(op: Operation) -> tuple[tuple[int, int], ...]:
    """(operand, result) index pairs an in-place op (`pd_op.X_`) writes: its op map's
    `inplace_map`, else the first operand as the first result (Paddle's convention)."""
    name = op.name
    if not name.startswith("pd_op.") or not name.endswith("_") or name.endswith("__"):
        return ()
    m = opmap.pir_to_legacy(name) or opmap.pir_to_legacy(name[:-1])
    if m is None or not m.inplace_map:
        return ((0, 0),)
    ops = [o.name for o in m.operands]
    res = [r.name for r in m.results]
    return tuple((ops.index(a), res.index(b)) for a, b in m.inplace_map if a in ops and b in res)


def _used_values(op: Operation) -> list[Value]:
    """The values an op reads, its regions' ops included (implicit capture)."""
    out = [v for v in op.operands if v is not None]
    if op.regions:
        for inner in op.walk():
            if inner is not op:
                out.extend(v for v in inner.operands if v is not None)
    return out


def lives(program: Program, batch_size: int = 1, keep: Iterable[str | Value] = (),
          param_grads: Iterable[Value] = (), backward_start: int | None = None) -> dict[str, VarLife]:
    """Every top-level value holding storage, by name, with its kind, size and live range
    (see the module doc). `keep` names values (or gives them) live to the end."""
    ops = program.block.ops
    n_ops = len(ops)
    pgrads = set(param_grads)
    roots: dict[Value, tuple[Value, ...]] = {}      # value -> the storage values it is
    defined: dict[Value, int] = {}                  # storage value -> defining op index
    last_use: dict[Value, int] = {}
    for i, op in enumerate(ops):
        for v in _used_values(op):
            for r in roots.get(v, ()):
                last_use[r] = i
        inplace = {b: a for a, b in _inplace_pairs(op)}
        for k, res in enumerate(op.results):
            if res.is_null:
                continue
            if op.name == "builtin.combine":
                roots[res] = tuple(r for v in op.operands if v is not None for r in roots.get(v, ()))
            elif op.name in _ALIAS_OPS and op.operands and op.operands[0] in roots:
                roots[res] = roots[op.operands[0]]          # type: ignore[index]
            elif k in inplace and inplace[k] < len(op.operands) and op.operands[inplace[k]] in roots:
                roots[res] = roots[op.operands[inplace[k]]]  # type: ignore[index]
            elif op.name == "cf.stack_create" and k > 0 and op.results[0] in roots:
                roots[res] = roots[op.results[0]]
            else:
                roots[res] = (res,)
                defined[res] = i
    kept: set[Value] = set()
    for ref in keep:
        v = ref if isinstance(ref, Value) else program.value(ref)
        kept.update(roots.get(v, ()))
    out: dict[str, VarLife] = {}
    for v, i in defined.items():
        op = ops[i]
        kind = INPUT_OPS[op.name][1] if op.name in INPUT_OPS else (
            PARAM_GRAD if v in pgrads else
            GRADIENT if backward_start is not None and i >= backward_start else ACTIVATION)
        start = 0 if kind == INPUT else i
        end = n_ops - 1 if v in kept else max(last_use.get(v, i), i)
        name = value_name(v)
        if name in out:          # two parameter ops of one name: one parameter
            continue
        out[name] = VarLife(name, kind, type_bytes(v.type, batch_size), start, end)
    for v in pgrads:             # a parameter gradient stored in another value still counts apart
        for r in roots.get(v, ()):
            life = out.get(value_name(r))
            if life is not None and life.kind != PARAMETER:
                life.kind = PARAM_GRAD
    return out


def memory(program: Program, batch_size: int = 1, top: int = 8, keep: Iterable[str | Value] = (),
           param_grads: Iterable[Value] = (), backward_start: int | None = None) -> MemoryReport:
    """The activation memory of a PIR `program` (top block) by static liveness; see the module doc.

    `batch_size` replaces every -1 dim; `keep` names values live to the end
    (fetched values, e.g. the loss: `%N`, data, parameter or output names);
    `top` is how many values to list at the peak; `param_grads` and
    `backward_start` say which values are parameter gradients and where the
    backward section starts (`pybackward.memory` reads them from the program).
    """
    if not isinstance(program, Program):
        raise ArgumentError(f"this memory() takes a pybackward.pir.Program, not {type(program).__name__}")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ArgumentError(f"batch_size must be a positive int, not {batch_size!r}")
    ops = program.block.ops
    n_ops = len(ops)
    life = lives(program, batch_size, keep, param_grads, backward_start)
    timeline, peak, at, live_there = activation_peak(life, n_ops)
    params: dict[str, int] = {}
    for op in ops:
        if op.name in INPUT_OPS and INPUT_OPS[op.name][1] == PARAMETER and op.results:
            params.setdefault(value_name(op.results[0]), type_bytes(op.results[0].type, batch_size) or 0)
    grads = sum(v.nbytes or 0 for v in life.values() if v.kind == PARAM_GRAD)
    unknown = sorted(n for n, v in life.items() if v.nbytes is None and v.kind != PARAMETER)
    return MemoryReport(batch_size, peak, at, ops[at].name if ops else "", live_there[:top],
                        sum(params.values()), grads, timeline, unknown, n_ops, life)


__all__ = ["lives", "memory", "type_bytes", "value_name", "INPUT_OPS"]
