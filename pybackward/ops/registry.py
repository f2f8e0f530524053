"""The op registry: the one place that knows op types.

Each op type is declared once, with `register(OpDef(...))` in the module of
its family (`ops/math/core.py`, `ops/nn/pad3d_bilinear_interp.py`, ...):

* `kernel`   - the NumPy forward kernel, `kernel(call) -> {slot: array(s)}`;
* `grad`     - how its gradient is made: a `GradSpec` (the grad op declared
               as data, as Paddle's backward.yaml does), a maker function for
               the odd ones (`sum` -> N x `scale`), or `None` for an op with
               no gradient (Paddle's "empty grad op maker": `fill_constant`,
               `shape`, comparisons...). Such ops are never on the op path;
* `samples`  - small inputs for the registry-wide finite-difference and
               kernel tests, so a new op is tested the moment it is declared.

Grad op types (`mul_grad`, ...) are ops too: a `GradSpec` may carry the
kernel of its grad op, which is registered under the grad op's type. The
gradient pass and the interpreter only ever call `get(op_type)`.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from ..base.attrs import decode
from ..base.errors import ExecutionError, UnknownOpError

if TYPE_CHECKING:   # annotations only: the registry runs without NumPy until a kernel runs
    import numpy as np

GRAD_SUFFIX = "@GRAD"
EMPTY_VAR_NAME = "@EMPTY@"
#: The key under which a kernel's result gives its outputs' LoDs:
#: `{"Out": arr, LOD_KEY: {"Out": lod}}` (a lod per var, or a list of them;
#: None clears it). A LoD is Paddle's offsets: a list of levels, each a list
#: of ints starting at 0 (docs/lod.md).
LOD_KEY = "@lod"


# --------------------------------------------------------------------------
# What a kernel sees
# --------------------------------------------------------------------------
class Call:
    """One execution of an op: its input arrays, decoded attrs and output names."""

    __slots__ = ("ins", "attrs", "outs", "op_type", "rng", "env", "lods")

    def __init__(self, op_type: str, ins: dict[str, list], attrs: dict[str, Any],
                 outs: dict[str, list[str]], rng: np.random.Generator | None = None,
                 env: Any = None, lods: dict[str, list] | None = None):
        self.op_type = op_type
        self.ins = ins
        self.attrs = attrs
        self.outs = outs
        self.rng = rng
        #: The interpreter's hooks for ops that run sub-blocks (see interpreter.OpEnv).
        self.env = env
        #: Input LoDs, slot -> [lod or None per var]; None when no input has one.
        self.lods = lods

    def x(self, slot: str) -> Any:
        """The single (first) array of an input slot, or None if it is empty."""
        v = self.ins.get(slot)
        return v[0] if v else None

    def xs(self, slot: str) -> list:
        return self.ins.get(slot) or []

    def has(self, slot: str) -> bool:
        return bool(self.ins.get(slot))

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def lod(self, slot: str, i: int = 0) -> list[list[int]] | None:
        """The LoD of the i-th var of an input slot (a list of offset lists), or None."""
        per_slot = self.lods.get(slot) if self.lods else None
        return per_slot[i] if per_slot and i < len(per_slot) else None

    def wants(self, slot: str) -> bool:
        """True if the op has a real (non-@EMPTY@) output in `slot`."""
        return any(n != EMPTY_VAR_NAME for n in self.outs.get(slot, ()))

    def n_out(self, slot: str) -> int:
        return len(self.outs.get(slot, ()))

    def unsupported(self, attr: str, value: Any, why: str = "") -> ExecutionError:
        """The error for an attr value a kernel does not handle (never guess)."""
        return ExecutionError(f"op {self.op_type}: attr {attr}={value!r} is not supported"
                              + (f" ({why})" if why else ""))


Kernel = Callable[[Call], Mapping[str, Any]]


# --------------------------------------------------------------------------
# Grad ops as data
# --------------------------------------------------------------------------
@dataclasses.dataclass
class GradOp:
    """A grad op while the pass builds it: slots as plain dicts, attrs as the
    forward op's attr messages (copied verbatim) plus overrides."""

    type: str
    inputs: dict[str, list[str]]
    outputs: dict[str, list[str]]
    base_attrs: Sequence[Any] = ()           # pb.OpDesc.Attr messages to copy, in order
    attrs: dict[str, Any] = dataclasses.field(default_factory=dict)  # name -> value or (value, AttrType)
    fresh: bool = False                      # created from nothing: fill Paddle's defaults
    #: grad name -> forward name, when the maker knows better than the names
    #: (Paddle records grads for while_grad that it then replaces by @EMPTY@).
    grad_to_var: dict[str, str] | None = None

    def input_args(self) -> Iterable[str]:
        for args in self.inputs.values():
            yield from args

    def output_args(self) -> Iterable[str]:
        for args in self.outputs.values():
            yield from args

    def rename_input(self, old: str, new: str) -> None:
        for args in self.inputs.values():
            for i, a in enumerate(args):
                if a == old:
                    args[i] = new

    def rename_output(self, old: str, new: str) -> None:
        for args in self.outputs.values():
            for i, a in enumerate(args):
                if a == old:
                    args[i] = new


@dataclasses.dataclass(frozen=True)
class GradSpec:
    """A grad op declared as data.

    `inputs` lists what the grad op reads: a forward input or output slot
    name (`"X"`, `"Out"`, `"XShape"`) copies that slot; `"S@GRAD"` for a
    forward output slot S reads the gradients of its vars. `outputs` lists
    `"S@GRAD"` for each forward input slot S that gets a gradient; inputs not
    listed never get one (integer ids, labels, indices). A gradient in the
    no-grad set is dropped from its slot, or kept as `@EMPTY@` when
    `keep_empty` (ops that need positions to line up).

    An entry may rename its slot: `"DDX=X@GRAD@GRAD"` fills slot DDX from the
    gradients of the forward op's output slot `X@GRAD` - the form double-grad
    ops take (their "forward op" is a grad op). A source that is itself a slot
    of the forward op is copied; otherwise `S@GRAD` means the gradients of S.
    """

    type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    kernel: Kernel | None = None
    attrs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    keep_empty: bool = False
    #: How the grad op itself is differentiated (double grad), if at all.
    grad: "GradSpec | GradMaker | None" = None
    #: See OpDef.sets_lod_level; declared here for the grad op type.
    sets_lod_level: bool = True

    @property
    def differentiable_inputs(self) -> tuple[str, ...]:
        return tuple(_source(o)[: -len(GRAD_SUFFIX)] for o in self.outputs)


def _split(entry: str) -> tuple[str, str]:
    """"Slot=Source" -> (Slot, Source); "Source" -> (Source, Source)."""
    slot, sep, src = entry.partition("=")
    return (slot, src) if sep else (entry, entry)


def _source(entry: str) -> str:
    return _split(entry)[1]


class FwdOp:
    """What a grad maker sees of the forward op: slots, attrs and the no-grad set."""

    __slots__ = ("type", "inputs", "outputs", "attrs_desc", "no_grad", "grad_blocks")

    def __init__(self, type: str, inputs: dict[str, list[str]], outputs: dict[str, list[str]],
                 attrs_desc: Sequence[Any], no_grad: set[str] | frozenset[str]):
        self.type = type
        self.inputs = inputs
        self.outputs = outputs
        self.attrs_desc = attrs_desc
        self.no_grad = no_grad
        #: Grad blocks made for this op's sub-blocks (conditional_block, while).
        self.grad_blocks: list[int] = []

    def input(self, slot: str) -> list[str]:
        return self.inputs.get(slot, [])

    def output(self, slot: str) -> list[str]:
        return self.outputs.get(slot, [])

    def attr(self, name: str, default: Any = None) -> Any:
        for a in self.attrs_desc:
            if a.name == name:
                return decode(a)
        return default

    def grads_of(self, names: Iterable[str], keep_empty: bool = False) -> list[str]:
        """`name@GRAD` for each name, dropping (or `@EMPTY@`-ing) no-grad ones."""
        out = []
        for n in names:
            g = n + GRAD_SUFFIX
            if g in self.no_grad:
                if keep_empty:
                    out.append(EMPTY_VAR_NAME)
            else:
                out.append(g)
        return out


GradMaker = Callable[[FwdOp], list[GradOp]]


def make_grad_ops(spec: GradSpec, fwd: FwdOp) -> list[GradOp]:
    """Build the grad op a GradSpec declares, as Paddle's makers do."""
    plan = _PLANS.get(id(spec))
    if plan is None or plan[0] is not spec:
        plan = _plan(spec)
    _, in_plan, out_plan = plan
    f_ins, f_outs = fwd.inputs, fwd.outputs
    ins: dict[str, list[str]] = {}
    for slot, src, grad_of in in_plan:
        if src in f_ins:
            ins[slot] = list(f_ins[src])
        elif src in f_outs:
            ins[slot] = list(f_outs[src])
        elif grad_of is not None and grad_of in f_outs:
            ins[slot] = [n + GRAD_SUFFIX for n in f_outs[grad_of]]
    outs: dict[str, list[str]] = {}
    for slot, fwd_slot in out_plan:
        if fwd_slot in f_ins:
            outs[slot] = fwd.grads_of(f_ins[fwd_slot], spec.keep_empty)
    return [GradOp(spec.type, ins, outs, fwd.attrs_desc, dict(spec.attrs))]


#: id(spec) -> (spec, its inputs as (slot, source, forward output slot the
#: source is the gradient of or None), its outputs as (slot, forward input
#: slot)): each entry of a GradSpec split once, not once per op.
_PLANS: dict[int, tuple[GradSpec, tuple, tuple]] = {}


def _plan(spec: GradSpec) -> tuple[GradSpec, tuple, tuple]:
    in_plan = []
    for entry in spec.inputs:
        slot, src = _split(entry)
        in_plan.append((slot, src, src[: -len(GRAD_SUFFIX)] if src.endswith(GRAD_SUFFIX) else None))
    out_plan = []
    for entry in spec.outputs:
        slot, src = _split(entry)
        out_plan.append((slot, src[: -len(GRAD_SUFFIX)]))
    plan = _PLANS[id(spec)] = (spec, tuple(in_plan), tuple(out_plan))
    return plan


# --------------------------------------------------------------------------
# Op definitions
# --------------------------------------------------------------------------
@dataclasses.dataclass
class Sample:
    """Inputs for the registry-wide tests: arrays per input slot, attrs, and
    how many vars each output slot gets (default 1 for each declared slot),
    and the inputs' LoDs (`lod`, for sequence ops). `wrt` names the input
    slots to check by finite differences (default: every float input the op
    differentiates). `symmetric` names input slots whose last two axes are
    symmetric matrices of which the op reads one triangle (cholesky, eigh):
    the check perturbs them along symmetric directions only (see
    opcheck.check_op_grad), since Paddle's gradient for them is the
    symmetric one."""

    inputs: dict[str, list[np.ndarray]]
    attrs: dict[str, Any] = dataclasses.field(default_factory=dict)
    outputs: dict[str, int] | None = None
    wrt: tuple[str, ...] | None = None
    note: str = ""
    #: LoDs of the inputs, slot -> LoD of the slot's first var (offset lists;
    #: docs/lod.md), or a list of LoDs, one per var; None when the op reads no LoD.
    lod: dict[str, list[list[int]]] | None = None
    symmetric: tuple[str, ...] = ()


@dataclasses.dataclass
class OpDef:
    type: str
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    kernel: Kernel | None = None
    grad: GradSpec | GradMaker | None = None
    samples: Callable[[np.random.Generator], list[Sample]] | None = None
    #: Output slots the grad does not flow back from (XShape, Mask, SavedMean...).
    intermediate_outputs: tuple[str, ...] = ()
    #: Attrs the kernel reads (for `pybackward ops`); informational.
    attrs_handled: tuple[str, ...] = ()
    doc: str = ""
    #: Why there is no kernel on purpose (said in the interpreter's error), e.g.
    #: a send to another process in a world of one.
    no_kernel: str = ""
    #: For grad ops: the forward op type this one is the grad of.
    grad_of: str | None = None
    #: Whether Paddle's shape inference for this op writes `legacy_lod_level`
    #: on its outputs (most ops share an input's LoD; a few, like
    #: fill_constant, do not). It only shapes the bytes of the VarDescs the
    #: gradient pass creates, so they match Paddle's exactly.
    sets_lod_level: bool = True
    #: An input slot whose var must already exist for that shape inference to
    #: run at all (Paddle's `if (!ctx->HasInput("X")) return;` in the
    #: tensor-array ops): when the gradient pass has not declared it yet - a
    #: loop state's array gradient inside a while grad block - no LoD level.
    lod_needs_input: str | None = None
    #: How the gradient pass finds the op path inside this op's sub-block:
    #: "branch" (conditional_block: from the outputs it writes), "loop"
    #: (while: ops writing loop-carried values join the path too), or None
    #: (every op of the sub-block, Paddle's rule for other sub-block ops).
    sub_block_path: str | None = None
    #: The BLOCK / BLOCKS attrs an op of this type carries (Paddle's op proto;
    #: a grad op, its forward op's): a loaded op carrying any other is refused
    #: (`wire.check_block_attrs`), as the pass would make a grad block for it.
    block_attrs: tuple[str, ...] = ()
    #: Input slots whose arguments no earlier op produced are dropped when the
    #: grad vars are created (sum: only the partial gradients that exist are
    #: added, as Paddle's _append_backward_vars_ does).
    trims_missing_inputs: tuple[str, ...] = ()
    #: (input slot, output slot) pairs whose var types Paddle's var-type
    #: inference syncs (conditional_block_grad: Input@GRAD[i] like Input[i]).
    sync_type_slots: tuple[tuple[str, str], ...] = ()
    #: The kernel accepts inputs with no value (None is passed): control-flow
    #: ops, whose inputs Paddle may leave uninitialised.
    allow_missing_inputs: bool = False
    #: A structural rule for ops of this type, checked when a program is
    #: loaded: `check(op)` raises ProgramFileError naming block, op and var
    #: (e.g. a while whose body never writes its Condition).
    structure_check: Callable[[Any], None] | None = None
    #: The module that declared it ("activation", "math", ...; "paddle_table"
    #: for op types declared from Paddle's records alone).
    family: str = ""

    @property
    def has_grad(self) -> bool:
        return self.grad is not None

    @property
    def has_kernel(self) -> bool:
        """Whether it has a NumPy kernel (an IndexedOpDef says so without importing its family)."""
        return self.kernel is not None

    @property
    def grad_kind(self) -> str | None:
        """None (no grad), "spec" (a GradSpec) or "maker" (anything else): said
        without importing the family, where `grad` may import it."""
        g = self.grad
        return None if g is None else "spec" if isinstance(g, GradSpec) else "maker"

    def make_grad(self, fwd: FwdOp) -> list[GradOp]:
        if self.grad is None:
            return []
        if isinstance(self.grad, GradSpec):
            return make_grad_ops(self.grad, fwd)
        return self.grad(fwd)

    @property
    def differentiable_inputs(self) -> tuple[str, ...] | None:
        """Input slots that can get a gradient (None: decided by a maker function)."""
        return getattr(self.grad, "differentiable_inputs", None)


_REGISTRY: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    """Declare an op type (and, through its GradSpec, its grad op type)."""
    known = _REGISTRY.get(op.type)
    if known is None and _index is not None and not _index.loading and _index.knows(op.type):
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if not caller.startswith(__name__.rpartition(".")[0] + "."):
            # not a family declaring its own op (a user's): the family's declaration comes first
            _index.load(op.type)
            known = _REGISTRY.get(op.type)
    if known is not None and not _implied(known):
        raise ValueError(f"op type {op.type!r} registered twice")
    if known is not None:   # declared in full after another op's grad implied it
        op.kernel = op.kernel or known.kernel
        op.sets_lod_level = known.sets_lod_level   # as Paddle's records say for it as a grad op
    if not op.family:
        source = op.kernel or op.grad
        op.family = getattr(source, "__module__", "").rpartition(".")[2]
    _REGISTRY[op.type] = op
    spec, of = op.grad, op.type
    while isinstance(spec, GradSpec):
        if spec.type not in _REGISTRY:
            _REGISTRY[spec.type] = OpDef(
                type=spec.type, inputs=tuple(_split(e)[0] for e in spec.inputs),
                outputs=tuple(_split(e)[0] for e in spec.outputs),
                kernel=spec.kernel, grad=spec.grad, grad_of=of, family=op.family,
                sets_lod_level=spec.sets_lod_level, doc=f"gradient of {op.type}")
        elif spec.kernel is not None and _REGISTRY[spec.type].kernel is None:
            _REGISTRY[spec.type].kernel = spec.kernel
        spec, of = spec.grad, spec.type
    grad_op_types = getattr(op.grad, "grad_op_types", None)
    if grad_op_types is not None:  # a template read from Paddle's records
        kernels = op.grad.kernels
        for gtype, ins, outs, sets_lod in grad_op_types():
            gdef = _REGISTRY.get(gtype)
            if gdef is None:
                _REGISTRY[gtype] = OpDef(type=gtype, inputs=tuple(ins), outputs=tuple(outs),
                                         kernel=kernels.get(gtype), grad_of=op.type, family=op.family,
                                         sets_lod_level=sets_lod, doc=f"gradient of {op.type}")
            elif gdef.kernel is None and gtype in kernels:
                gdef.kernel = kernels[gtype]
    return op


def _implied(d: OpDef) -> bool:
    """An entry made only because another op's grad emits this type (global_scatter's
    grad is a global_gather, whose grad is a global_scatter): its own declaration,
    made later, takes its place."""
    return d.grad_of is not None and d.grad is None and d.samples is None and d.doc.startswith("gradient of ")


def get(op_type: str) -> OpDef:
    """The OpDef of a type; UnknownOpError (listing close names) if none."""
    d = _REGISTRY.get(op_type)
    if d is None and _index is not None:
        d = _index.resolve(op_type)
    if d is not None:
        return d
    import difflib
    names = set(_REGISTRY) | set(_index.known_types() if _index is not None else ())
    close = difflib.get_close_matches(op_type, sorted(names), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise UnknownOpError(f"unknown op type '{op_type}': pybackward does not support it "
                         f"({len(names)} op types are registered; `pybackward ops` lists them{hint})")


def all_registered() -> dict[str, OpDef]:
    """The op types registered so far (for modules that register while loading):
    the families imported so far, and the user's own; `all_ops` imports all."""
    return _REGISTRY


def find(op_type: str) -> OpDef | None:
    """The OpDef of a type, or None if no family and no user declares it."""
    d = _REGISTRY.get(op_type)
    if d is None and _index is not None:
        d = _index.resolve(op_type)
    return d


def known_ops() -> dict[str, OpDef]:
    """Every op type, sorted, importing no family: the registered OpDefs and,
    for the other types, the index's IndexedOpDefs (read `has_kernel`, not
    `kernel`, to list them without importing their families)."""
    out = dict(_REGISTRY)
    if _index is not None:
        for t in _index.known_types():
            if t not in out:
                out[t] = _index.resolve(t)
    return dict(sorted(out.items()))


def all_ops() -> dict[str, OpDef]:
    """Every op type, sorted, as its family declares it: imports every family
    first (`ops --coverage`, opcheck and the registry-wide tests need their
    code; `known_ops` lists them without)."""
    if _index is not None:
        _index.load_all()
    return dict(sorted(_REGISTRY.items()))


# --------------------------------------------------------------------------
# The index: op types known before their families are imported
# --------------------------------------------------------------------------
class OpIndex:
    """What the registry asks of the index `pybackward/ops/__init__.py` installs."""

    def resolve(self, op_type: str) -> OpDef | None:   # pragma: no cover - interface
        """The OpDef of a type not registered yet (an IndexedOpDef), or None."""
        raise NotImplementedError

    def load(self, op_type: str) -> OpDef:   # pragma: no cover - interface
        """Import the family of a type; its real OpDef."""
        raise NotImplementedError

    def load_all(self) -> None:   # pragma: no cover - interface
        raise NotImplementedError

    def known_types(self) -> Iterable[str]:   # pragma: no cover - interface
        raise NotImplementedError

    def knows(self, op_type: str) -> bool:   # pragma: no cover - interface
        raise NotImplementedError

    #: True while the index imports families (their registrations are the declarations).
    loading: bool = False


_index: OpIndex | None = None


def set_index(index: OpIndex | None) -> None:
    """Install the index of op types -> families (None: every family is registered)."""
    global _index
    _index = index


#: The OpDef fields that hold code, read from the family when first asked for.
CODE_FIELDS = ("kernel", "samples", "structure_check")


class DeferredMaker:
    """A grad maker function of a family not imported yet (`OpDef.grad`, or a
    `GradSpec.grad`, of `op_type`): imports the family when first called."""

    __slots__ = ("op_type",)

    def __init__(self, op_type: str):
        self.op_type = op_type

    def __call__(self, fwd: FwdOp) -> list[GradOp]:
        return _index.load(self.op_type).make_grad(fwd)

    def __repr__(self) -> str:
        return f"DeferredMaker({self.op_type!r})"


def _code_property(name: str) -> property:
    def fget(self: "IndexedOpDef") -> Any:
        return getattr(self.real(), name) if name in self._code else None

    def fset(self: "IndexedOpDef", value: Any) -> None:
        setattr(self.real(), name, value)
    return property(fget, fset, doc=f"`{name}` of the family's OpDef (imports the family).")


class IndexedOpDef(OpDef):
    """An op type as the index describes it, before its family is imported.

    Its data fields (slots, grad specs and templates, flags) are the family's
    OpDef's, read from the index; its code fields (`kernel`, `samples`,
    `structure_check`, and `grad` where that is a maker function) import the
    family when first read and answer from the real OpDef."""

    def __init__(self, fields: Mapping[str, Any], code: Iterable[str],
                 differentiable: Sequence[str] | None = None, record: Mapping[str, Any] | None = None):
        for f in dataclasses.fields(OpDef):
            if f.name not in CODE_FIELDS and f.name != "grad":
                default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
                object.__setattr__(self, f.name, fields.get(f.name, default))
        self.__dict__["_grad"] = fields.get("grad")
        self.__dict__["_code"] = frozenset(code)
        self.__dict__["_real"] = None
        self.__dict__["_differentiable"] = None if differentiable is None else tuple(differentiable)
        #: The index record it was read from.
        self.__dict__["record"] = dict(record or {})

    def real(self) -> OpDef:
        """The family's OpDef (importing the family)."""
        if self._real is None:
            self.__dict__["_real"] = _index.load(self.type)
        return self._real

    kernel = _code_property("kernel")
    samples = _code_property("samples")
    structure_check = _code_property("structure_check")

    @property
    def grad(self) -> Any:
        return self.real().grad if "grad" in self._code else self._grad

    @grad.setter
    def grad(self, value: Any) -> None:
        setattr(self.real(), "grad", value)

    @property
    def has_grad(self) -> bool:
        return "grad" in self._code or self._grad is not None

    @property
    def grad_kind(self) -> str | None:
        if "grad" in self._code:
            return "maker"
        return None if self._grad is None else "spec" if isinstance(self._grad, GradSpec) else "maker"

    @property
    def has_kernel(self) -> bool:
        if self._real is not None:
            return self._real.kernel is not None
        return "kernel" in self._code

    @property
    def differentiable_inputs(self) -> tuple[str, ...] | None:
        if "grad" in self._code:   # a maker function's, recorded in the index
            return self._differentiable
        return getattr(self._grad, "differentiable_inputs", None)

    @property
    def loaded(self) -> bool:
        """Whether the family has been imported (for the start-up tests)."""
        return self._real is not None

    def __repr__(self) -> str:
        return f"IndexedOpDef({self.type!r}, family={self.family!r})"

    __eq__ = object.__eq__
    __hash__ = object.__hash__


# --------------------------------------------------------------------------
# Paddle's attrs on ops created from nothing
# --------------------------------------------------------------------------
_PADDLE_ATTRS: dict[str, dict[str, Any]] = json.loads(
    (Path(__file__).resolve().parent.parent / "data" / "fresh_attrs.json").read_text())


def default_attrs(op_type: str) -> list[list[Any]] | None:
    """[[name, AttrType, default], ...]: the attrs Paddle's checker gives an op
    of this type, in serialised order (recorded by
    tools/dump_paddle_fresh_attrs.py); None where it was not recorded."""
    entry = _PADDLE_ATTRS.get(op_type)
    return None if entry is None else entry["attrs"]


def extra_attrs(op_type: str) -> frozenset[str] | None:
    """Paddle's "extra" attrs of an op type (serialised before the others)."""
    entry = _PADDLE_ATTRS.get(op_type)
    return None if entry is None else frozenset(entry["extras"])


def fresh_op(op_type: str, inputs: dict[str, list[str]], outputs: dict[str, list[str]],
             attrs: Mapping[str, Any] | None = None) -> GradOp:
    """A GradOp created from nothing (sum, fill_any_like, ...), to be filled
    with Paddle's default attrs when written."""
    return GradOp(op_type, inputs, outputs, (), dict(attrs or {}), fresh=True)
