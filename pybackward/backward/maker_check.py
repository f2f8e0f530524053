"""pybackward's grad makers against the records of Paddle's own makers.

`testdata/grad_makers/` (written by its `gen_grad_makers.py` with a live
Paddle 3.3.1) holds one-op forward programs for every op type with a grad
maker, and what Paddle's maker emitted for each variant. `check_grad_makers`
replays every variant through `grad_op_descs` and says, per op type, whether
the descs are byte-equal to Paddle's and the grad-to-var maps the same.
`pybackward ops --coverage` and the tests both use it.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from .._proto import framework_pb2 as pb
from ..base.errors import ProgramFileError, PyBackwardError
from ..legacy.io import load
from ..ops import registry
from ..ops.paddle_data import paddle_ops
from .grad_ops import grad_op_descs

#: Variants where Paddle's maker raises and pybackward makes grad ops on
#: purpose (docs/deviations.md), with the grad op types it makes instead.
PADDLE_RAISES: dict[tuple[str, str], list[str]] = {
    # Paddle: "drop_empty_grad is not allowed" for the duplicable ShapeTensor;
    # reshape_grad never reads ShapeTensor, so its grad is well defined.
    ("reshape", "full"): ["reshape_grad"],
}


@dataclasses.dataclass
class MakerResult:
    """How one variant of one op type compares with Paddle's maker."""

    op_type: str
    variant: str
    equal: bool
    detail: str = ""


def default_records_dir() -> Path | None:
    """`testdata/grad_makers` of a source checkout, if this is one."""
    d = Path(__file__).resolve().parents[2] / "testdata" / "grad_makers"
    return d if (d / "cases.json").exists() else None


def _desc_text(descs) -> list[bytes]:
    return [d.SerializeToString() for d in descs]


def check_grad_makers(records: Path | str | None = None,
                      op_types: set[str] | None = None) -> list[MakerResult]:
    """Compare every recorded variant (of `op_types`, default all)."""
    rec = Path(records) if records is not None else default_records_dir()
    if rec is None or not (rec / "cases.json").exists():
        raise ProgramFileError(f"{rec}: no grad-maker records here (cases.json); "
                               f"they are in testdata/grad_makers of a source checkout")
    cases = json.loads((rec / "cases.json").read_text())
    fwd = load(rec / "forward.pb")
    exp = pb.ProgramDesc()
    exp.ParseFromString((rec / "expected.pb").read_bytes())
    ops = fwd.block(0).ops
    out = []
    for case in cases:
        t, variant = case["op"], case["variant"]
        if op_types is not None and t not in op_types:
            continue
        op = ops[case["forward_op"]]
        if case["error"]:
            made = PADDLE_RAISES.get((t, variant))
            try:
                got = [d.type for d in grad_op_descs(op, case["no_grad"])[0]]
            except PyBackwardError:
                out.append(MakerResult(t, variant, made is None, "raises, as Paddle does"))
                continue
            out.append(MakerResult(t, variant, got == made,
                                   f"Paddle raises ({case['error'][:80]}); pybackward makes {got}"))
            continue
        try:
            descs, g2v = grad_op_descs(op, case["no_grad"])
        except PyBackwardError as e:
            out.append(MakerResult(t, variant, False, f"raises: {e}"))
            continue
        want = exp.blocks[case["block"]].ops
        if _desc_text(descs) != _desc_text(want):
            out.append(MakerResult(t, variant, False, _first_difference(descs, want)))
        elif g2v != case["grad_to_var"]:
            out.append(MakerResult(t, variant, False, f"grad_to_var {g2v} != Paddle's {case['grad_to_var']}"))
        else:
            out.append(MakerResult(t, variant, True))
    return out


def _first_difference(got, want) -> str:
    if len(got) != len(want):
        return f"{len(got)} grad ops, Paddle made {len(want)} ({[d.type for d in want]})"
    for g, w in zip(got, want):
        if g.SerializeToString() == w.SerializeToString():
            continue
        if g.type != w.type:
            return f"grad op {g.type}, Paddle made {w.type}"
        for field in ("inputs", "outputs"):
            gs = {v.parameter: list(v.arguments) for v in getattr(g, field)}
            ws = {v.parameter: list(v.arguments) for v in getattr(w, field)}
            if gs != ws:
                return f"{g.type} {field} {gs} != Paddle's {ws}"
        ga = [a.name for a in g.attrs]
        wa = [a.name for a in w.attrs]
        if ga != wa:
            return f"{g.type} attrs {ga} != Paddle's {wa}"
        for a, b in zip(g.attrs, w.attrs):
            if a.SerializeToString() != b.SerializeToString():
                return f"{g.type} attr {a.name} differs"
    return "descs differ"


def coverage_rows(records: Path | str | None = None) -> list[dict]:
    """One row per op type Paddle 3.3.1 knows: its family, whether its grad
    rule equals Paddle's maker ("equal" / "differs"; "rule" where no records
    are at hand to check; "empty", "none", "sub-block" for Paddle's other
    kinds), whether it has a forward kernel and kernels for its grad ops."""
    from_records: dict[str, bool] = {}
    rec = Path(records) if records is not None else default_records_dir()
    if rec is not None:
        for r in check_grad_makers(rec):
            from_records[r.op_type] = from_records.get(r.op_type, True) and r.equal
    table = registry.all_ops()
    rows = []
    for t, entry in paddle_ops().items():
        d = table[t]
        kind = entry["grad"]
        if kind == "maker":
            grad = ("equal" if from_records[t] else "differs") if t in from_records else "rule"
        else:
            grad = {"empty": "empty", "none": "none", "sub_block": "sub-block"}[kind]
        grad_types = _grad_types(d)
        grad_kernel = "-" if not grad_types else (
            "yes" if all(table.get(g) is not None and table[g].kernel is not None for g in grad_types)
            else "no")
        rows.append({"type": t, "family": d.family or "-", "grad": grad, "kernel": d.kernel is not None,
                     "grad_kernel": grad_kernel, "grad_ops": grad_types,
                     "paddle_cpu": bool(entry.get("cpu"))})
    return rows


def _grad_types(d: registry.OpDef) -> list[str]:
    g = d.grad
    if isinstance(g, registry.GradSpec):
        return [g.type]
    types = getattr(g, "grad_op_types", None)
    if types is not None:
        return [t for t, *_ in types()]
    if g is None:
        return []
    # A maker written as a function: the op types it declares it emits, else
    # the ones Paddle's recorded maker emits (the records prove they agree).
    emits = getattr(g, "emits", None)
    if emits is None:
        emits = [r["type"] for r in (paddle_ops().get(d.type) or {}).get("rule") or []]
    return list(emits)


def coverage_totals(rows: list[dict]) -> dict[str, int]:
    makers = [r for r in rows if r["grad"] in ("equal", "differs", "rule")]
    return {"op_types": len(rows), "with_maker": len(makers),
            "equal": sum(r["grad"] == "equal" for r in rows),
            "differs": sum(r["grad"] == "differs" for r in rows),
            "unchecked": sum(r["grad"] == "rule" for r in rows),
            "empty": sum(r["grad"] == "empty" for r in rows),
            "none": sum(r["grad"] == "none" for r in rows),
            "sub_block": sum(r["grad"] == "sub-block" for r in rows),
            "kernels": sum(r["kernel"] for r in rows),
            "grad_kernels": sum(r["grad_kernel"] == "yes" for r in makers),
            # what Paddle 3.3.1 runs on CPU, and how much of it pybackward runs too
            "cpu": sum(r["paddle_cpu"] for r in rows),
            "cpu_kernels": sum(r["paddle_cpu"] and r["kernel"] for r in rows),
            "cpu_with_maker": sum(r["paddle_cpu"] for r in makers),
            "cpu_grad_kernels": sum(r["paddle_cpu"] and r["kernel"] and r["grad_kernel"] == "yes"
                                    for r in makers)}
