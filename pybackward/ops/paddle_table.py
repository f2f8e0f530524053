"""Every op type Paddle 3.3.1 knows, and its grad rule, from one data file.

`paddle_ops.json` (written by `tools/derive_grad_rules.py` from the records
`testdata/grad_makers/gen_grad_makers.py` took of a live Paddle) holds, per op
type: its input and output slots, its default and extra attrs, its grad kind
- a grad-op maker, an empty maker (the op stops the gradient path: shapes,
comparisons, random ops), none (Paddle raises when such an op is on the path),
or a maker that needs sub-blocks - and, for makers, the grad ops as templates
(see the derive script for the format).

The family modules declare the ops pybackward can run (kernels, samples, and
hand-written makers for the odd ones); this module, imported after them,
declares every other op type Paddle knows with its grad rule from the data, so
the pass can differentiate any Paddle program - GPU-only, fused and
distributed op types included - and the interpreter says plainly which ops it
has no kernel for. A family module that adds a kernel for an op takes the
grad rule from here with `paddle_grad(op_type, kernels)`.
"""
from __future__ import annotations

from typing import Any, Mapping

from ..base.errors import UnknownOpError
from .paddle_data import grad_sets_lod_level, paddle_op, paddle_ops
from .registry import GRAD_SUFFIX, FwdOp, GradOp, Kernel, OpDef, all_registered, register


def _resolve(src: str, fwd: FwdOp) -> list[str]:
    """The arguments a template source names (see tools/derive_grad_rules.py)."""
    if not src:
        return []
    kind, _, slot = src.partition(":")
    if kind == "I":
        return list(fwd.inputs.get(slot, ()))
    if kind == "O":
        return list(fwd.outputs.get(slot, ()))
    if kind == "OG":
        return [n + GRAD_SUFFIX for n in fwd.outputs.get(slot, ())]
    if kind == "IG":
        return [n + GRAD_SUFFIX for n in fwd.inputs.get(slot, ())]
    raise ValueError(f"bad template source {src!r}")


class TemplateGrad:
    """A grad maker read from Paddle's records: one grad op per template.

    Inputs copy forward slots or name their gradients; gradient outputs in
    the no-grad set are dropped, or kept as @EMPTY@ where Paddle's maker keeps
    positions; forward attrs are copied, less the ones the maker drops, plus
    the ones it sets. `kernels` maps grad op types to their NumPy kernels."""

    __slots__ = ("op_type", "rules", "kernels")

    def __init__(self, op_type: str, rules: list[dict[str, Any]],
                 kernels: Mapping[str, Kernel] | None = None):
        self.op_type = op_type
        self.rules = rules
        self.kernels = dict(kernels or {})

    def __call__(self, fwd: FwdOp) -> list[GradOp]:
        out = []
        for r in self.rules:
            ins = {slot: _resolve(src, fwd) for slot, src in r["inputs"].items()}
            empty = r.get("empty", ())
            outs = {}
            for slot, src in r["outputs"].items():
                if src.startswith("IG:"):
                    outs[slot] = fwd.grads_of(fwd.inputs.get(src[3:], ()), keep_empty=slot in empty)
                else:
                    outs[slot] = _resolve(src, fwd)
            drop = r["drop"]
            base = [a for a in fwd.attrs_desc if a.name not in drop] if drop else fwd.attrs_desc
            attrs = {name: (value, t) for name, t, value in r["set"]}
            out.append(GradOp(r["type"], ins, outs, base, attrs))
        return out

    @property
    def differentiable_inputs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(src[3:] for r in self.rules for src in r["outputs"].values()
                                   if src.startswith("IG:")))

    def grad_op_types(self) -> list[tuple[str, list[str], list[str], bool]]:
        """(type, input slots, output slots, sets_lod_level) of each grad op it makes."""
        return [(r["type"], list(r["inputs"]), list(r["outputs"]), r.get("lod", True)) for r in self.rules]


class NoGradMaker:
    """Paddle registers no grad-op maker for this op type: on the gradient
    path it is an error, as in Paddle (`get_grad_op_desc` raises NotFound)."""

    def __init__(self, op_type: str, why: str):
        self.op_type = op_type
        self.why = why

    def __call__(self, fwd: FwdOp) -> list[GradOp]:
        raise UnknownOpError(f"op type '{self.op_type}' is on the gradient path but {self.why}; "
                             f"to stop the path there, put its inputs in the no-grad set")

    differentiable_inputs = ()


def paddle_grad(op_type: str, kernels: Mapping[str, Kernel] | None = None) -> TemplateGrad:
    """The grad rule Paddle's records give `op_type`, with NumPy kernels for
    its grad op types - for family modules that add a kernel to such an op."""
    entry = paddle_op(op_type)
    if entry is None or not entry.get("rule"):
        raise KeyError(f"no recorded grad template for op type {op_type!r}")
    return TemplateGrad(op_type, entry["rule"], kernels)


def _grad_of(entry: dict[str, Any], op_type: str):
    kind = entry["grad"]
    if kind == "maker" and entry.get("rule") is not None:
        return TemplateGrad(op_type, entry["rule"])
    if kind == "none":
        return NoGradMaker(op_type, "Paddle 3.3.1 registers no gradient for it")
    if kind == "sub_block" or kind == "maker":
        return NoGradMaker(op_type, "its gradient needs a sub-block pybackward does not build "
                                    "(see docs/ops.md)")
    return None  # an empty maker: the op is never on the path


#: The BLOCK / BLOCKS attrs of the op types declared here that carry any
#: (Paddle 3.3.1's op protos: testdata/grad_makers/probe_block_attrs.py;
#: conditional_block and while are declared in control_flow.py).
BLOCK_ATTRS = {
    "conditional_block_infer": ("sub_block",),
    "pylayer": ("blocks",),
    "run_program": ("global_block", "forward_global_block", "backward_global_block"),
}


def register_paddle_ops() -> None:
    """Declare every Paddle op type the families did not, and give registered
    op types without a grad rule the one Paddle's records show."""
    known = all_registered()
    lod = {r["type"]: r["lod"] for e in paddle_ops().values() for r in e.get("rule") or () if "lod" in r}
    for op_type, entry in paddle_ops().items():
        opdef = known.get(op_type)
        if opdef is None:
            register(OpDef(type=op_type, sets_lod_level=lod.get(op_type, True),
                           inputs=tuple(s for s, _ in entry["inputs"]),
                           outputs=tuple(s for s, _ in entry["outputs"]),
                           grad=_grad_of(entry, op_type),
                           intermediate_outputs=tuple(s for s, f in entry["outputs"] if "i" in f),
                           block_attrs=BLOCK_ATTRS.get(op_type, ()),
                           family="paddle_table", doc="declared from Paddle's records (no kernel)"))
        elif opdef.grad is None and entry["grad"] == "maker" and entry.get("rule") is not None:
            opdef.grad = TemplateGrad(op_type, entry["rule"])


def paddle_opdef(op_type: str, kernel: Kernel | None,
                 grad_kernels: Mapping[str, Kernel] | None = None, **fields: Any) -> OpDef:
    """An OpDef whose slots and grad rule are Paddle's recorded facts, with
    the NumPy kernels (and samples, attrs_handled, doc ... as `fields`) a
    family module adds - the one-line form of a table entry:

        register(paddle_opdef("flip", _flip, {"flip_grad": _flip_grad}, samples=_flip_samples))
    """
    entry = paddle_op(op_type)
    if entry is None:
        raise KeyError(f"Paddle 3.3.1 has no op type {op_type!r}")
    grad = _grad_of(entry, op_type)
    if isinstance(grad, TemplateGrad):
        grad.kernels.update(grad_kernels or {})
    elif grad_kernels:
        raise ValueError(f"{op_type}: grad kernels given, but Paddle's records give it no grad template")
    fields.setdefault("inputs", tuple(s for s, _ in entry["inputs"]))
    fields.setdefault("outputs", tuple(s for s, _ in entry["outputs"]))
    fields.setdefault("intermediate_outputs", tuple(s for s, f in entry["outputs"] if "i" in f))
    fields.setdefault("block_attrs", BLOCK_ATTRS.get(op_type, ()))
    lod = grad_sets_lod_level(op_type)       # the op is also another op's grad op (c_identity's all_reduce)
    if lod is not None:
        fields.setdefault("sets_lod_level", lod)
    return OpDef(type=op_type, kernel=kernel, grad=grad, **fields)
