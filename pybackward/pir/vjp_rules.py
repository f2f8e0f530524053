"""Paddle 3.3.1's PIR VJP rules as data: which ops each op's gradient rule appends.

Paddle's PIR gradient pass differentiates one forward op by calling its VJP
rule (`core.call_vjp`), which appends grad ops and returns one gradient per
differentiable input. Most rules append one `pd_op.<op>_grad` op; the others
append a few ops (`builtin.combine` / `builtin.split` glue, `full` constants,
another forward op: `split` -> `concat`, `cast` -> `cast`). pybackward's PIR
pass appends the same ops from this table.

The facts are `pybackward/data/pir_vjp_rules.json`, recorded from Paddle by
`testdata/pir_vjp/gen_vjp_rules.py` (one-op programs, `call_vjp` probed with
each stop_gradient flag and each optional operand left out); the file is read
once, on first use. Where an appended op's operand comes from is a `Source`:
forward input I (`in0`, element K of a combined input `in0.1`), forward
output J (`out0`), its out_grad (`grad0`), or a result of an op the rule
appended before (`op0.1`).

    rule("pd_op.matmul").single.name          -> "pd_op.matmul_grad"
    rule("pd_op.matmul").single.operands      -> (in0, in1, grad0)
    rule("pd_op.matmul").apply(stop={"in0"})  -> ops with x's gradient a null result
    require_rule("pd_op.argmax")              -> UnknownOpError: no grad op, as Paddle says
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..base.errors import PyBackwardError, UnknownOpError
from .decode import Decoder
from .records import FrozenRecord, set_fields, replace
from .types import Attr, Type

DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "pir_vjp_rules.json"
GENERATOR = "testdata/pir_vjp/gen_vjp_rules.py"
_SOURCE = re.compile(r"(in|out|grad|op)(\d+)(?:\.(\d+))?")


# The records below are `records.FrozenRecord`s, not @dataclass(frozen=True): the same methods
# without compiling them at import (~0.9 ms per class, every process that runs the PIR pass).
class Source(FrozenRecord):
    """Where a value of a rule comes from.

    `kind` is `in` (forward operand `index`; `elem`: element of the
    `builtin.combine` feeding it), `out` (forward result `index`; `elem`: element
    of its `builtin.split`), `grad` (the out_grad of that result) or `op`
    (result `elem` of the rule's `index`-th appended op)."""

    _fields = ("kind", "index", "elem")
    kind: str
    index: int
    elem: int | None

    def __init__(self, kind: str, index: int, elem: int | None = None) -> None:
        set_fields(self, kind=kind, index=index, elem=elem)

    @classmethod
    def parse(cls, token: str) -> "Source":
        m = _SOURCE.fullmatch(token) if isinstance(token, str) else None
        if m is None or (m.group(1) == "op" and m.group(3) is None):
            raise ValueError(f"not a VJP rule source: {token!r}")
        return cls(m.group(1), int(m.group(2)), None if m.group(3) is None else int(m.group(3)))

    @property
    def input_key(self) -> str:
        """The key of `VjpRule.returns` this source names (`in0`, `in0.1`)."""
        return str(self)

    def __str__(self) -> str:
        return f"{self.kind}{self.index}" + ("" if self.elem is None else f".{self.elem}")


class Copied(FrozenRecord):
    """An attribute the appended op copies from the forward op's attribute `name`."""

    _fields = ("name",)
    name: str

    def __init__(self, name: str) -> None:
        set_fields(self, name=name)


class EmittedOp(FrozenRecord):
    """One op a rule appends.

    `operands`: a `Source` each, or None for a null operand. `attrs`: name ->
    `Copied` (the forward op's attribute) or an `Attr` constant. `results`: per
    result, the `Source` of a forward value whose type it has, the `Type` itself
    when no forward value has it, or None for a null result."""

    _fields = ("name", "operands", "attrs", "results", "stop_gradient", "regions")
    name: str
    operands: tuple[Source | None, ...]
    attrs: Mapping[str, "Copied | Attr"]
    results: tuple["Source | Type | None", ...]
    stop_gradient: tuple[bool, ...] | None
    regions: int

    def __init__(self, name: str, operands: tuple[Source | None, ...], attrs: Mapping[str, "Copied | Attr"],
                 results: tuple["Source | Type | None", ...], stop_gradient: tuple[bool, ...] | None = None,
                 regions: int = 0) -> None:
        set_fields(self, name=name, operands=operands, attrs=attrs, results=results, stop_gradient=stop_gradient,
              regions=regions)

    @property
    def copied_attrs(self) -> dict[str, str]:
        """Appended-op attribute -> the forward attribute it copies."""
        return {k: v.name for k, v in self.attrs.items() if isinstance(v, Copied)}

    @property
    def const_attrs(self) -> dict[str, Attr]:
        return {k: v for k, v in self.attrs.items() if isinstance(v, Attr)}

    def with_null_results(self, indices: Iterable[int]) -> "EmittedOp":
        nulls = set(indices)
        return replace(self, results=tuple(None if i in nulls else r for i, r in enumerate(self.results)))


class RuleBody(FrozenRecord):
    """The ops a rule appends and what it returns: input key (`in0`, `in0.1`) -> Source or None."""

    _fields = ("ops", "returns")
    ops: tuple[EmittedOp, ...]
    returns: Mapping[str, Source | None]

    def __init__(self, ops: tuple[EmittedOp, ...], returns: Mapping[str, Source | None]) -> None:
        set_fields(self, ops=ops, returns=returns)


class VjpRule(FrozenRecord):
    """The VJP rule of one PIR op, as Paddle 3.3.1's `call_vjp` runs it (prim off).

    `inputs` / `outputs` / `attr_names`: the forward op's operand, result and
    attribute names; `grad_inputs` those with grad semantics, `vector_inputs`
    those fed by `builtin.combine`, `optional_inputs` those it builds without.
    `ops` / `returns`: with no input stopped and every operand present.
    `variants_checked`: variants probed and found to be the default with the
    stopped inputs' gradients null (or, for `absent:NAME`, the default itself);
    `variants`: the others, whole. `probe`: how the recorded program was made."""

    _fields = ("op", "kind", "probe", "inputs", "grad_inputs", "vector_inputs", "optional_inputs", "outputs",
               "attr_names", "ops", "returns", "variants_checked", "variants")
    op: str
    kind: str
    probe: str
    inputs: tuple[str, ...]
    grad_inputs: tuple[str, ...]
    vector_inputs: tuple[str, ...]
    optional_inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attr_names: tuple[str, ...]
    ops: tuple[EmittedOp, ...]
    returns: Mapping[str, Source | None]
    variants_checked: tuple[str, ...]
    variants: Mapping[str, "RuleBody | str"]

    def __init__(self, op: str, kind: str, probe: str, inputs: tuple[str, ...], grad_inputs: tuple[str, ...],
                 vector_inputs: tuple[str, ...], optional_inputs: tuple[str, ...], outputs: tuple[str, ...],
                 attr_names: tuple[str, ...], ops: tuple[EmittedOp, ...], returns: Mapping[str, Source | None],
                 variants_checked: tuple[str, ...] = (), variants: Mapping[str, "RuleBody | str"] | None = None
                 ) -> None:
        set_fields(self, op=op, kind=kind, probe=probe, inputs=inputs, grad_inputs=grad_inputs,
              vector_inputs=vector_inputs, optional_inputs=optional_inputs, outputs=outputs, attr_names=attr_names,
              ops=ops, returns=returns, variants_checked=variants_checked,
              variants={} if variants is None else variants)

    @property
    def single(self) -> EmittedOp | None:
        """The appended op when the rule appends exactly one."""
        return self.ops[0] if len(self.ops) == 1 else None

    @property
    def body(self) -> RuleBody:
        return RuleBody(self.ops, self.returns)

    def input_index(self, name: str) -> int:
        """The operand index of forward input `name`."""
        try:
            return self.inputs.index(name)
        except ValueError:
            raise UnknownOpError(f"PIR op '{self.op}' has no input {name!r} "
                                 f"(inputs: {', '.join(self.inputs)})") from None

    def apply(self, stop: Iterable[str] = (), absent: Iterable[str] = ()) -> RuleBody:
        """The ops and returns for these stopped inputs (input keys `in0` / `in0.1` or input
        names; `all`) and absent optional operands (names), as recorded.

        A recorded variant is given whole. Otherwise, where the probes showed that
        stopping each of these inputs only nulls its gradient, the default with
        those gradients null. Anything else was not recorded: UnknownOpError."""
        stop_keys = sorted(self._key(s) for s in stop)
        absent = sorted(absent)
        if absent and stop_keys:
            raise UnknownOpError(f"PIR op '{self.op}': stop flags with absent operands "
                                 f"({', '.join(absent)}) were not recorded")
        if not stop_keys and not absent:
            return self.body
        keys = [f"absent:{a}" for a in absent] if absent else [f"stop:{k}" for k in stop_keys]
        if len(keys) == 1 and keys[0] in self.variants:
            got = self.variants[keys[0]]
            if isinstance(got, str):
                raise UnknownOpError(f"PIR op '{self.op}': Paddle refuses {keys[0]}: {got}")
            return got
        if absent:
            if len(keys) == 1 and keys[0] in self.variants_checked:
                return self.body
            raise UnknownOpError(f"PIR op '{self.op}' without {', '.join(absent)} was not recorded")
        stopped: set[str] = set()
        for k in stop_keys:
            if k == "all" and "stop:all" in self.variants_checked:
                stopped.update(self.returns)
                continue
            each = [f"in{self.inputs.index(g)}" for g in self.grad_inputs] if k == "all" else [k]
            for one in each:
                probe = one if "." not in one else one.split(".")[0] + ".0"  # element 0 stands for any
                if f"stop:{probe}" not in self.variants_checked:
                    raise UnknownOpError(f"PIR op '{self.op}' with {one} stopped was not recorded")
                stopped.update(r for r in self.returns if r == one or r.startswith(one + "."))
        return self._null(stopped)

    def _key(self, s: str) -> str:
        if s == "all" or _SOURCE.fullmatch(s):
            return s
        return f"in{self.input_index(s)}"

    def _null(self, stopped: set[str]) -> RuleBody:
        nulls: dict[int, set[int]] = {}
        returns = dict(self.returns)
        for key in stopped:
            src = returns.get(key)
            if src is not None and src.kind == "op":
                nulls.setdefault(src.index, set()).add(src.elem or 0)
            returns[key] = None
        ops = tuple(op.with_null_results(nulls[i]) if i in nulls else op for i, op in enumerate(self.ops))
        return RuleBody(ops, returns)


# --------------------------------------------------------------------------
# Decoding the table (once)
# --------------------------------------------------------------------------
class _Reader:
    def __init__(self) -> None:
        self.decoder = Decoder(str(DATA_FILE))

    def source(self, token: Any) -> Source | None:
        return None if token is None else Source.parse(token)

    def result(self, r: Any) -> "Source | Type | None":
        if r is None:
            return None
        if isinstance(r, str):
            return Source.parse(r)
        return self.decoder.type(r)

    def attr(self, name: str, a: Any) -> "Copied | Attr":
        if isinstance(a, str) and a.startswith("@"):
            return Copied(a[1:])
        return self.decoder.attr(a, name, 0)

    def op(self, e: Mapping[str, Any]) -> EmittedOp:
        sg = e.get("stop_gradient")
        return EmittedOp(
            name=e["op"], operands=tuple(self.source(o) for o in e["operands"]),
            attrs={k: self.attr(k, v) for k, v in e["attrs"].items()},
            results=tuple(self.result(r) for r in e["results"]),
            stop_gradient=None if sg is None else tuple(sg), regions=e.get("regions", 0))

    def body(self, e: Mapping[str, Any]) -> RuleBody:
        return RuleBody(tuple(self.op(o) for o in e["ops"]),
                        {k: self.source(v) for k, v in e["returns"].items()})

    def rule(self, name: str, e: Mapping[str, Any]) -> VjpRule:
        sig = e["sig"]
        ops = e["ops"] if "ops" in e else [e]
        variants: dict[str, RuleBody | str] = {}
        for key, v in e.get("variants", {}).items():
            variants[key] = v["error"] if "error" in v else self.body(v)
        return VjpRule(
            op=name, kind=e["kind"], probe=e["probe"], inputs=tuple(sig["inputs"]),
            grad_inputs=tuple(sig["grad"]), vector_inputs=tuple(sig["vector"]),
            optional_inputs=tuple(sig.get("optional", ())), outputs=tuple(sig["outputs"]),
            attr_names=tuple(sig["attrs"]), ops=tuple(self.op(o) for o in ops),
            returns={k: self.source(v) for k, v in e["returns"].items()},
            variants_checked=tuple(e["variants_checked"]), variants=variants)


class _Table:
    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.raw = raw
        self.entries: Mapping[str, Any] = raw["rules"]
        self.failed: Mapping[str, Mapping[str, str]] = raw["failed"]
        self.rules: dict[str, VjpRule] = {}
        self.reader = _Reader()

    def rule(self, name: str) -> VjpRule | None:
        got = self.rules.get(name)
        if got is None and name in self.entries:
            try:
                got = self.rules[name] = self.reader.rule(name, self.entries[name])
            except (KeyError, TypeError, ValueError, PyBackwardError) as e:
                raise PyBackwardError(f"{DATA_FILE}: the VJP rule of '{name}' is malformed: {e}") from None
        return got


@lru_cache(maxsize=1)
def _table() -> _Table:
    try:
        raw = json.loads(DATA_FILE.read_text())
    except (OSError, ValueError) as e:
        raise PyBackwardError(f"{DATA_FILE}: cannot read the PIR VJP rules: {e}") from None
    if not isinstance(raw, dict) or raw.get("_generated_by") != GENERATOR or \
            not all(isinstance(raw.get(k), dict) for k in ("rules", "failed")):
        raise PyBackwardError(f"{DATA_FILE}: not a PIR VJP rule table written by {GENERATOR}")
    return _Table(raw)


# --------------------------------------------------------------------------
# Lookups
# --------------------------------------------------------------------------
def rule_names() -> list[str]:
    """Every PIR op with a recorded VJP rule, sorted."""
    return sorted(_table().entries)


def failed_names() -> list[str]:
    """The PIR ops Paddle has a VJP for whose rule could not be recorded, sorted."""
    return sorted(_table().failed)


def rule(name: str) -> VjpRule | None:
    """The recorded VJP rule of PIR op `name` (`pd_op.matmul`), or None."""
    return _table().rule(name)


def failure(name: str) -> Mapping[str, str] | None:
    """Why an op Paddle has a VJP for has no recorded rule: {kind, stage, reason}, or None."""
    return _table().failed.get(name)


def has_vjp(name: str) -> bool:
    """Whether Paddle 3.3.1 has a VJP for PIR op `name` (recorded or not)."""
    t = _table()
    return name in t.entries or name in t.failed


def require_rule(name: str) -> VjpRule:
    """rule() that raises UnknownOpError naming the op, as Paddle's pass does for an op with
    no VJP, or saying why the rule of an op that has one was not recorded."""
    got = rule(name)
    if got is not None:
        return got
    why = failure(name)
    if why is not None:
        raise UnknownOpError(f"PIR op '{name}' has a VJP in Paddle 3.3.1, but its rule was not recorded "
                             f"({why['stage']}: {why['reason']})")
    raise UnknownOpError(f"op '{name}' has no grad op (Paddle 3.3.1 has no VJP for it)")


def counts() -> Mapping[str, Any]:
    """The table's coverage counts (as the generator wrote them)."""
    return _table().raw["counts"]
