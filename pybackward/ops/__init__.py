"""The op registry and the op families, one subpackage per domain.

Each public module of a domain subpackage (`math/`, `linalg/`, `nn/`,
`loss/`, `shape/`, `tensor/`, `index/`, `sequence/`, `control_flow/`,
`detection/`, `random/`, `optim/`, `quant/`, `dist/`, `io/`, `graph/`,
`recsys/`, `metrics/`, `fusion/`) is a family, and a module whose name starts
with `_` is a helper. Nothing lists op types or families by hand: a new family
module is picked up by being there. The modules at this level are the
machinery every family uses:

* `registry`: the one place that knows op types (`OpDef`, `register`, `get`);
* `paddle_data` / `paddle_table`: Paddle 3.3.1's facts about every op type,
  read from `pybackward/data/paddle_ops.json`, and the ops declared from them;
* `custom`: grad rules for a user's own op types; `opcheck`: run one op and
  check its gradient; `lod`: LoD offsets; `_util`, `_unary`, `_inputs`,
  `_precision`, `_stl`: helpers shared by the families.

Importing this package imports no family (the families are NumPy kernels,
and most commands run none): it installs the op index,
`pybackward/data/op_index.json`, in the registry. The index is generated from
the families by `tools/gen_op_index.py` (`tests/ops/test_op_index.py` fails
when it is stale, and says to run it): per op type, every data field of its
OpDef and the family that declares it. The registry answers from it until
something reads an op type's code (its kernel, samples, structure check or a
grad maker function); then the family is imported (with the families it
shares op types with, in the order a full import would take) and registers
itself. `load_all()` (and `registry.all_ops()`) import every family, then
fill the gaps from Paddle's records (`paddle_table`), as importing this
package did before the index.

The registry knows none of the families (an import-linter contract holds it):
they register themselves into it when imported; the index names them as data.
May import: `pybackward.base` and `pybackward._proto` only.
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import pkgutil
import sys
from pathlib import Path
from typing import Any, Iterable

from . import registry
from .paddle_table import NoGradMaker, TemplateGrad, register_paddle_ops

#: The generated index (tools/gen_op_index.py writes it; data/README.md names it).
INDEX_FILE = Path(__file__).resolve().parent.parent / "data" / "op_index.json"

_TUPLE_FIELDS = ("inputs", "outputs", "intermediate_outputs", "attrs_handled", "block_attrs",
                 "trims_missing_inputs")


def family_modules() -> list[str]:
    """Every family module, in the order a full import takes them (domains and
    their modules sorted by name)."""
    out = []
    for pkg in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not pkg.ispkg:
            continue
        domain = importlib.import_module(f"{__name__}.{pkg.name}")
        for info in sorted(pkgutil.iter_modules(domain.__path__), key=lambda m: m.name):
            if not info.name.startswith("_"):
                out.append(f"{domain.__name__}.{info.name}")
    return out


# --------------------------------------------------------------------------
# OpDef <-> index record (the generator writes with `record`, the index reads
# with `from_record`)
# --------------------------------------------------------------------------
def _grad_record(grad: Any) -> Any:
    """A grad rule as data: None, a GradSpec, a Paddle template, a no-grad maker,
    or "code" (a maker function, read from the family when first called)."""
    if grad is None:
        return None
    if isinstance(grad, registry.GradSpec):
        return {"spec": {"type": grad.type, "inputs": list(grad.inputs), "outputs": list(grad.outputs),
                         "attrs": dict(grad.attrs), "keep_empty": grad.keep_empty,
                         "sets_lod_level": grad.sets_lod_level,
                         "grad": _grad_record(grad.grad)}}
    if isinstance(grad, TemplateGrad):
        return {"template": grad.op_type, "rules": grad.rules}
    if isinstance(grad, NoGradMaker):
        return {"nograd": grad.op_type, "why": grad.why}
    return "code"


def record(d: registry.OpDef) -> dict[str, Any]:
    """The index record of an OpDef: its data fields that differ from the
    defaults, `code` (which code fields it has) and `grad` as data."""
    if isinstance(d, registry.IndexedOpDef):
        return dict(d.record)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(registry.OpDef):
        if f.name in registry.CODE_FIELDS or f.name in ("grad", "type"):
            continue
        value = getattr(d, f.name)
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if value != default:
            out[f.name] = [list(v) for v in value] if f.name == "sync_type_slots" else (
                list(value) if isinstance(value, tuple) else value)
    code = {name for name in registry.CODE_FIELDS if getattr(d, name) is not None}
    g = _grad_record(d.grad)
    if g == "code":
        code.add("grad")
        diff = d.differentiable_inputs
        if diff is not None:
            out["differentiable"] = list(diff)
    elif g is not None:
        out["grad"] = g
    if code:
        out["code"] = sorted(code)
    return out


def _grad_from(rec: Any) -> Any:
    if rec is None:
        return None
    if "spec" in rec:
        s = rec["spec"]
        inner = s["grad"]
        return registry.GradSpec(type=s["type"], inputs=tuple(s["inputs"]), outputs=tuple(s["outputs"]),
                                 attrs=s["attrs"], keep_empty=s["keep_empty"],
                                 sets_lod_level=s["sets_lod_level"],
                                 grad=registry.DeferredMaker(s["type"]) if inner == "code" else _grad_from(inner))
    if "template" in rec:
        return TemplateGrad(rec["template"], rec["rules"])
    return NoGradMaker(rec["nograd"], rec["why"])


def from_record(op_type: str, rec: dict[str, Any]) -> registry.IndexedOpDef:
    """The IndexedOpDef of an index record."""
    fields: dict[str, Any] = {"type": op_type}
    for name, value in rec.items():
        if name in ("code", "grad", "differentiable"):
            continue
        if name == "sync_type_slots":
            value = tuple(tuple(v) for v in value)
        elif name in _TUPLE_FIELDS:
            value = tuple(value)
        fields[name] = value
    fields["grad"] = _grad_from(rec.get("grad"))
    return registry.IndexedOpDef(fields, rec.get("code", ()), rec.get("differentiable"), rec)


# --------------------------------------------------------------------------
# The index the registry asks
# --------------------------------------------------------------------------
class _Index(registry.OpIndex):
    """op_index.json: `groups` (lists of family modules imported together, in
    order: families that share op types or import each other), and `ops`
    (op type -> [group or -1 for types declared from Paddle's records alone,
    the record as a JSON string, decoded when the type is first asked for])."""

    def __init__(self) -> None:
        self._data: dict[str, Any] | None = None
        self._stubs: dict[str, registry.IndexedOpDef] = {}
        self._loaded_groups: set[int] = set()
        self._all_loaded = False

    @property
    def data(self) -> dict[str, Any]:
        if self._data is None:
            self._data = json.loads(INDEX_FILE.read_text())
        return self._data

    def known_types(self) -> Iterable[str]:
        return self.data["ops"].keys()

    def knows(self, op_type: str) -> bool:
        return op_type in self.data["ops"]

    def resolve(self, op_type: str) -> registry.OpDef | None:
        stub = self._stubs.get(op_type)
        if stub is None:
            entry = self.data["ops"].get(op_type)
            if entry is None:
                return None
            stub = self._stubs[op_type] = from_record(op_type, json.loads(entry[1]))
        return stub

    def load(self, op_type: str) -> registry.OpDef:
        entry = self.data["ops"].get(op_type)
        if entry is None or entry[0] < 0:
            self.load_all()
        else:
            self._load_groups(entry[0])
        d = registry.all_registered().get(op_type)
        if d is None:
            raise RuntimeError(f"op type {op_type!r}: its family did not register it; "
                               f"pybackward/data/op_index.json is stale (run tools/gen_op_index.py)")
        return d

    def _load_groups(self, group: int) -> None:
        groups = self.data["groups"]
        pending, done = [group], []
        outer, self.loading = self.loading, True
        try:
            while pending:
                g = pending.pop()
                if g in self._loaded_groups:
                    continue
                self._loaded_groups.add(g)
                for module in groups[g]:
                    importlib.import_module(module)
                done.append(g)
                # a family may import another one (of another group): load that group whole too
                pending.extend(i for i, mods in enumerate(groups)
                               if i not in self._loaded_groups and any(m in sys.modules for m in mods))
        finally:
            self.loading = outer
        if done:
            self._fill(set(done))

    def _fill(self, groups: set[int]) -> None:
        """Give the types of the groups just imported the grad rule Paddle's
        records give them where their family declares none (register_paddle_ops
        does this for every type on a full import)."""
        known = registry.all_registered()
        for op_type, (g, rec) in self.data["ops"].items():
            if g in groups:
                d = known.get(op_type)
                if d is not None and d.grad is None and '"template"' in rec:
                    d.grad = _grad_from(json.loads(rec)["grad"])

    def load_all(self) -> None:
        if self._all_loaded:
            return
        outer, self.loading = self.loading, True
        try:
            for module in family_modules():
                importlib.import_module(module)
            register_paddle_ops()
        finally:
            self.loading = outer
        self._all_loaded = True
        self._loaded_groups.update(range(len(self.data["groups"])))


_INDEX = _Index()
registry.set_index(_INDEX)


def load_all() -> None:
    """Import every op family (and declare every op type Paddle's records add):
    for what needs every family's code - `ops --coverage`, opcheck, the registry-wide tests
    (`pybackward ops` and `--missing` list from the index: `registry.known_ops`, `has_kernel`)."""
    _INDEX.load_all()


def load_families(op_types: Iterable[str]) -> None:
    """Import the families of these op types now (the interpreter: before a
    run's clock starts, so a --timeout does not count the imports)."""
    groups = {e[0] for e in map(_INDEX.data["ops"].get, set(op_types)) if e is not None and e[0] >= 0}
    for g in sorted(groups):
        _INDEX._load_groups(g)


def loaded_families() -> list[str]:
    """The family modules imported so far (the start-up tests read it)."""
    return [m for m in family_modules() if m in sys.modules]
