"""Grad rules for a user's own op types, declared as data.

A program may contain op types Paddle does not have (a company's custom
operators). Their grad rules are declared in a file shaped like Paddle's
`backward.yaml`, one entry per grad op, with the slot names the program uses:

    # rules for my_scale: Out = alpha * X * Y
    - backward_op : my_scale_grad
      forward : my_scale (Tensor X, Tensor Y, float alpha = 1.0) -> Tensor(Out)
      args : (Tensor X, Tensor Y, Tensor Out@GRAD)
      output : Tensor(X@GRAD), Tensor(Y@GRAD)

`forward` is the forward op's signature: input slots (`Tensor` or
`Tensor[]`), attrs (anything else, informational) and output slots. `args`
names what the grad op reads - forward input and output slots, and `S@GRAD`
(or Paddle's spelling `s_grad`) for the gradients of output slot S. `output`
names the gradients it writes, `S@GRAD` for input slots S. Optional keys:
`keep_empty : true` (a gradient in the no-grad set stays as `@EMPTY@` rather
than being dropped) and `no_grad : true` on a `- op : NAME` entry (with a
`forward`-style `signature`) for an op that stops the gradient path. The grad
op copies the forward op's attrs, as Paddle's default makers do. A `.json`
file holding a list of the same mappings is read too.

Loaded with `register_ops(path)` (and `--ops FILE` on the CLI). NumPy kernels
for the new op types can be given as `kernels={op_type: kernel}`.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Callable, Mapping

from ..base.errors import ArgumentError, ArgumentTypeError, ProgramFileError
from . import registry
from .registry import GRAD_SUFFIX, GradSpec, OpDef

_SIG = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*\((.*)\)\s*->\s*(.+?)\s*$")
_ITEM = re.compile(r"^\s*(Tensor\[\]|Tensor)\s*\(?\s*([^\s()]+)\s*\)?\s*$")


class RulesFileError(ProgramFileError):
    """A custom-op rules file that cannot be used; the message names file and line."""


def parse_rules_text(text: str, source: str = "<rules>") -> list[dict[str, Any]]:
    """The entries of a backward.yaml-shaped file: a list of flat mappings.

    Only the subset the format needs: `- key : value` starting an entry,
    `key : value` lines continuing it, `#` comments. Values stay strings;
    each entry records the line it starts on as `__line__`."""
    entries: list[dict[str, Any]] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        stripped = line.lstrip()
        starts = stripped.startswith("- ")
        if starts:
            stripped = stripped[2:]
        elif not entries or line == stripped:
            raise RulesFileError(f"{source}:{lineno}: expected '- key : value' or an indented "
                                 f"'key : value', got {raw.strip()!r}")
        key, sep, value = stripped.partition(":")
        if not sep or not key.strip():
            raise RulesFileError(f"{source}:{lineno}: expected 'key : value', got {raw.strip()!r}")
        if starts:
            entries.append({"__line__": lineno})
        key = key.strip()
        if key in entries[-1]:
            raise RulesFileError(f"{source}:{lineno}: '{key}' given twice in one entry")
        entries[-1][key] = value.strip()
    return entries


def _items(text: str, where: str) -> list[tuple[str, bool]]:
    """`(Tensor X, Tensor[] Y, float a = 1)` -> [("X", False), ("Y", True)]; attrs skipped."""
    text = text.strip()
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = _ITEM.match(part.split("=")[0])
        if m:
            out.append((m.group(2), m.group(1) == "Tensor[]"))
        elif not part.split()[0].startswith("Tensor"):
            continue  # an attr: the grad op copies the forward op's attrs
        else:
            raise RulesFileError(f"{where}: cannot read {part!r} (want 'Tensor NAME' or 'Tensor[] NAME')")
    return out


def _signature(text: str, where: str) -> tuple[str, list[str], list[str]]:
    m = _SIG.match(text)
    if not m:
        raise RulesFileError(f"{where}: forward signature {text!r} is not 'op (Tensor X, ...) -> Tensor(Out)'")
    ins = [n for n, _ in _items(m.group(2), where)]
    outs = [n for n, _ in _items(m.group(3), where)]
    if not outs:
        raise RulesFileError(f"{where}: forward signature {text!r} declares no output")
    return m.group(1), ins, outs


def _grad_slot(name: str, slots: list[str]) -> str:
    """`Out@GRAD` as it is; Paddle's spelling `out_grad` -> `Out@GRAD` (slot matched ignoring case)."""
    if name.endswith(GRAD_SUFFIX):
        return name
    if name.endswith("_grad"):
        base = name[: -len("_grad")]
        match = [s for s in slots if s == base] or [s for s in slots if s.lower() == base.lower()]
        if len(match) == 1:
            return match[0] + GRAD_SUFFIX
    return name


def rules_to_opdefs(entries: list[dict[str, Any]], source: str) -> list[OpDef]:
    """OpDefs for the entries (forward op types with their GradSpec)."""
    out = []
    for e in entries:
        where = f"{source}:{e.get('__line__', '?')}"
        if "backward_op" in e:
            for key in ("forward", "args", "output"):
                if key not in e:
                    raise RulesFileError(f"{where}: backward_op {e['backward_op']} has no '{key}'")
            fwd_type, ins, outs = _signature(e["forward"], where)
            args = [_grad_slot(n, outs) for n, _ in _items(e["args"], where)]
            grads = [_grad_slot(n, ins) for n, _ in _items(e["output"], where)]
            for a in args:
                base = a[: -len(GRAD_SUFFIX)] if a.endswith(GRAD_SUFFIX) else None
                if a not in ins and a not in outs and base not in outs:
                    raise RulesFileError(f"{where}: args names '{a}', which is no input slot, output slot "
                                         f"or output gradient of {fwd_type} (inputs {ins}, outputs {outs})")
            for g in grads:
                if not g.endswith(GRAD_SUFFIX) or g[: -len(GRAD_SUFFIX)] not in ins:
                    raise RulesFileError(f"{where}: output names '{g}', which is not the gradient of an "
                                         f"input slot of {fwd_type} (inputs {ins})")
            keep_empty = str(e.get("keep_empty", "false")).lower() == "true"
            spec = GradSpec(e["backward_op"].strip(), tuple(args), tuple(grads), keep_empty=keep_empty)
            out.append(OpDef(type=fwd_type, inputs=tuple(ins), outputs=tuple(outs), grad=spec,
                             family="custom", doc=f"custom op from {source}"))
        elif "op" in e:
            if "signature" not in e:
                raise RulesFileError(f"{where}: op {e['op']} needs 'signature : {e['op']} (Tensor X) -> Tensor(Out)'")
            fwd_type, ins, outs = _signature(e["signature"], where)
            if fwd_type != e["op"].strip():
                raise RulesFileError(f"{where}: op {e['op']} has the signature of {fwd_type}")
            if str(e.get("no_grad", "false")).lower() != "true":
                raise RulesFileError(f"{where}: op {e['op']} without a backward_op must say 'no_grad : true'")
            out.append(OpDef(type=fwd_type, inputs=tuple(ins), outputs=tuple(outs), grad=None,
                             family="custom", doc=f"custom op (no gradient) from {source}"))
        else:
            raise RulesFileError(f"{where}: an entry needs 'backward_op' or 'op'")
    return out


def load_rules(path: str | Path) -> list[OpDef]:
    """Read and check a rules file (backward.yaml-shaped, or JSON); nothing is registered."""
    if not isinstance(path, (str, os.PathLike)):
        raise ArgumentTypeError(f"register_ops() takes a path to a rules file, not {type(path).__name__}")
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise RulesFileError(f"{p}: cannot read the op rules file ({e.strerror or e})") from None
    except UnicodeDecodeError:
        raise RulesFileError(f"{p}: the op rules file is not UTF-8 text") from None
    if p.suffix == ".json":
        try:
            entries = json.loads(text)
        except json.JSONDecodeError as e:
            raise RulesFileError(f"{p}:{e.lineno}: not valid JSON ({e.msg})") from None
        if not isinstance(entries, list) or not all(isinstance(x, dict) for x in entries):
            raise RulesFileError(f"{p}: a JSON rules file holds a list of mappings")
    else:
        entries = parse_rules_text(text, str(p))
    if not entries:
        raise RulesFileError(f"{p}: no rules in the file")
    return rules_to_opdefs(entries, str(p))


def register_ops(path: str | Path, kernels: Mapping[str, Callable] | None = None) -> list[str]:
    """Register the custom op types a rules file declares; their names.

    An op type pybackward already knows (Paddle's, or registered before)
    is refused: a rules file adds op types, it never changes Paddle's.
    `kernels` maps op types of the file (forward or grad) to NumPy kernels."""
    defs = load_rules(path)
    known = registry.all_ops()
    seen: set[str] = set()
    for d in defs:
        for t in [d.type] + ([d.grad.type] if isinstance(d.grad, GradSpec) else []):
            if t in known:
                raise RulesFileError(f"{path}: op type '{t}' is already known to pybackward "
                                     f"({known[t].family or 'built in'}); a rules file cannot redefine it")
            if t in seen:
                raise RulesFileError(f"{path}: op type '{t}' is declared twice")
            seen.add(t)
    if kernels is not None and not isinstance(kernels, Mapping):
        raise ArgumentTypeError(f"register_ops(kernels=...) takes a mapping of op type -> kernel, "
                                f"not {type(kernels).__name__}")
    for t in kernels or {}:
        if t not in seen:
            raise ArgumentError(f"register_ops: a kernel for '{t}', which {path} does not declare "
                                f"(it declares {', '.join(sorted(seen))})")
    for d in defs:
        if kernels and d.type in kernels:
            d.kernel = kernels[d.type]
        if isinstance(d.grad, GradSpec) and kernels and d.grad.type in kernels:
            d.grad = GradSpec(d.grad.type, d.grad.inputs, d.grad.outputs, kernel=kernels[d.grad.type],
                              keep_empty=d.grad.keep_empty)
        registry.register(d)
    return [d.type for d in defs]
