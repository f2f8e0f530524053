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

A rules file is read as every input is (`base.files.read_input_file`:
regular files only, at most `MAX_RULES_BYTES`), parsed in time linear in its
size (no backtracking pattern; slot names looked up in sets), and every
value must be text (JSON: a string, or true/false for the two flags); a
message quotes at most 80 characters of the file.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Callable, Mapping

from ..base.errors import ArgumentError, ArgumentTypeError, ProgramFileError
from ..base.files import read_input_file
from . import registry
from .registry import GRAD_SUFFIX, GradSpec, OpDef

#: The largest rules file read (Paddle's own backward.yaml is ~100 KB).
MAX_RULES_BYTES = 16 << 20
# Linear patterns only: a name (greedy, and what follows it is never part of a
# name), and ')' then '->' (each ')' scans only the blanks right after it).
_NAME = re.compile(r"[A-Za-z_][\w.]*")
_ARROW = re.compile(r"\)\s*->")
#: Keys whose value may also be a JSON true / false.
_FLAGS = ("keep_empty", "no_grad")


class RulesFileError(ProgramFileError):
    """A custom-op rules file that cannot be used; the message names file and line."""


def _show(text: str) -> str:
    """Text of the file in a message: quoted, at most 80 characters."""
    return repr(text[:80]) + (f"... ({len(text)} characters)" if len(text) > 80 else "")


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
                                 f"'key : value', got {_show(raw.strip())}")
        key, sep, value = stripped.partition(":")
        if not sep or not key.strip():
            raise RulesFileError(f"{source}:{lineno}: expected 'key : value', got {_show(raw.strip())}")
        if starts:
            entries.append({"__line__": lineno})
        key = key.strip()
        if key in entries[-1]:
            raise RulesFileError(f"{source}:{lineno}: {_show(key)} given twice in one entry")
        entries[-1][key] = value.strip()
    return entries


def _item(part: str) -> tuple[str, bool] | None:
    """`Tensor X` / `Tensor[] X` / `Tensor(X)` -> (name, is a list); None if not a tensor."""
    text = part.strip()
    if text.startswith("Tensor[]"):
        rest, is_list = text[len("Tensor[]"):], True
    elif text.startswith("Tensor"):
        rest, is_list = text[len("Tensor"):], False
    else:
        return None
    rest = rest.strip()
    if rest.startswith("("):
        rest = rest[1:].strip()
    if rest.endswith(")"):
        rest = rest[:-1].strip()
    if not rest or any(c.isspace() or c in "()" for c in rest):
        return None
    return rest, is_list


def _items(text: str, where: str) -> list[tuple[str, bool]]:
    """`(Tensor X, Tensor[] Y, float a = 1)` -> [("X", False), ("Y", True)]; attrs skipped."""
    text = text.strip()
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        item = _item(part.split("=")[0])
        if item:
            out.append(item)
        elif not part.split()[0].startswith("Tensor"):
            continue  # an attr: the grad op copies the forward op's attrs
        else:
            raise RulesFileError(f"{where}: cannot read {_show(part)} (want 'Tensor NAME' or 'Tensor[] NAME')")
    return out


def _signature(text: str, where: str) -> tuple[str, list[str], list[str]]:
    """`op (Tensor X, ...) -> Tensor(Out)`: the op type, input and output slots.
    The inputs run to the last ')' followed by '->'."""
    sig = text.strip()
    name = _NAME.match(sig)
    rest = sig[name.end():].lstrip() if name else ""
    arrow = None
    if rest.startswith("("):
        for arrow in _ARROW.finditer(rest):
            pass
    outs_text = rest[arrow.end():].strip() if arrow else ""
    if not outs_text:
        raise RulesFileError(f"{where}: forward signature {_show(text)} is not 'op (Tensor X, ...) -> Tensor(Out)'")
    ins = [n for n, _ in _items(rest[1:arrow.start()], where)]
    outs = [n for n, _ in _items(outs_text, where)]
    if not outs:
        raise RulesFileError(f"{where}: forward signature {_show(text)} declares no output")
    return name.group(0), ins, outs


def _slot_lookup(slots: list[str]) -> Callable[[str], str]:
    """`Out@GRAD` as it is; Paddle's spelling `out_grad` -> `Out@GRAD` (slot matched
    ignoring case when the exact name is not a slot), by dict lookups."""
    exact = set(slots)
    folded: dict[str, list[str]] = {}
    for s in slots:
        folded.setdefault(s.lower(), []).append(s)

    def grad_slot(name: str) -> str:
        if name.endswith(GRAD_SUFFIX):
            return name
        if name.endswith("_grad"):
            base = name[: -len("_grad")]
            match = [base] if base in exact else folded.get(base.lower(), [])
            if len(match) == 1:
                return match[0] + GRAD_SUFFIX
        return name
    return grad_slot


def _check_values(e: dict[str, Any], where: str) -> None:
    """Every value of an entry is text (a flag may also be a JSON true / false)."""
    for key, value in e.items():
        if key == "__line__" or isinstance(value, str) or (key in _FLAGS and isinstance(value, bool)):
            continue
        kind = {"NoneType": "null", "dict": "a mapping", "list": "a list", "bool": "true/false"}.get(
            type(value).__name__, "a number")
        raise RulesFileError(f"{where}: {_show(str(key))} is {kind}, not text (every value of a rule is a string)")


def rules_to_opdefs(entries: list[dict[str, Any]], source: str) -> list[OpDef]:
    """OpDefs for the entries (forward op types with their GradSpec)."""
    out = []
    for e in entries:
        if not isinstance(e, dict):
            raise RulesFileError(f"{source}: a rule that is a {type(e).__name__}, not a mapping")
        line = e.get("__line__", "?")
        where = f"{source}:{line}" if isinstance(line, int) else f"{source}, {line}"
        _check_values(e, where)
        if "backward_op" in e:
            for key in ("forward", "args", "output"):
                if key not in e:
                    raise RulesFileError(f"{where}: backward_op {_show(e['backward_op'])} has no '{key}'")
            fwd_type, ins, outs = _signature(e["forward"], where)
            out_grad, in_grad = _slot_lookup(outs), _slot_lookup(ins)
            args = [out_grad(n) for n, _ in _items(e["args"], where)]
            grads = [in_grad(n) for n, _ in _items(e["output"], where)]
            in_set, out_set = set(ins), set(outs)
            for a in args:
                base = a[: -len(GRAD_SUFFIX)] if a.endswith(GRAD_SUFFIX) else None
                if a not in in_set and a not in out_set and base not in out_set:
                    raise RulesFileError(f"{where}: args names {_show(a)}, which is no input slot, output slot "
                                         f"or output gradient of {fwd_type} (inputs {_few(ins)}, outputs "
                                         f"{_few(outs)})")
            for g in grads:
                if not g.endswith(GRAD_SUFFIX) or g[: -len(GRAD_SUFFIX)] not in in_set:
                    raise RulesFileError(f"{where}: output names {_show(g)}, which is not the gradient of an "
                                         f"input slot of {fwd_type} (inputs {_few(ins)})")
            keep_empty = str(e.get("keep_empty", "false")).lower() == "true"
            spec = GradSpec(e["backward_op"].strip(), tuple(args), tuple(grads), keep_empty=keep_empty)
            out.append(OpDef(type=fwd_type, inputs=tuple(ins), outputs=tuple(outs), grad=spec,
                             family="custom", doc=f"custom op from {source}"))
        elif "op" in e:
            op = _show(e["op"].strip())
            if "signature" not in e:
                raise RulesFileError(f"{where}: op {op} needs 'signature : {e['op'].strip()[:80]} (Tensor X) -> "
                                     "Tensor(Out)'")
            fwd_type, ins, outs = _signature(e["signature"], where)
            if fwd_type != e["op"].strip():
                raise RulesFileError(f"{where}: op {op} has the signature of {_show(fwd_type)}")
            if str(e.get("no_grad", "false")).lower() != "true":
                raise RulesFileError(f"{where}: op {op} without a backward_op must say 'no_grad : true'")
            out.append(OpDef(type=fwd_type, inputs=tuple(ins), outputs=tuple(outs), grad=None,
                             family="custom", doc=f"custom op (no gradient) from {source}"))
        else:
            raise RulesFileError(f"{where}: an entry needs 'backward_op' or 'op'")
    return out


def _few(names: list[str]) -> str:
    """Slot names for a message: at most 8, each cut to 80 characters."""
    shown = ", ".join(_show(n) for n in names[:8])
    return f"[{shown}{', ...' if len(names) > 8 else ''}]"


def load_rules(path: str | Path) -> list[OpDef]:
    """Read and check a rules file (backward.yaml-shaped, or JSON); nothing is registered."""
    if not isinstance(path, (str, os.PathLike)):
        raise ArgumentTypeError(f"register_ops() takes a path to a rules file, not {type(path).__name__}")
    p = Path(path)
    data = read_input_file(p, RulesFileError, "rules file", MAX_RULES_BYTES,
                           too_big=f"is past the limit of {MAX_RULES_BYTES} bytes for an op rules file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise RulesFileError(f"{p}: the op rules file is not UTF-8 text") from None
    if p.suffix == ".json":
        try:
            entries = json.loads(text)
        except json.JSONDecodeError as e:
            raise RulesFileError(f"{p}:{e.lineno}: not valid JSON ({e.msg})") from None
        except RecursionError:
            raise RulesFileError(f"{p}: JSON nested too deep for a rules file (a list of flat mappings)") from None
        except ValueError as e:         # a number past Python's 4300-digit limit, ...
            raise RulesFileError(f"{p}: not valid JSON ({' '.join(str(e).split())[:100]})") from None
        if not isinstance(entries, list) or not all(isinstance(x, dict) for x in entries):
            raise RulesFileError(f"{p}: a JSON rules file holds a list of mappings")
        entries = [{**e, "__line__": f"entry {i}"} for i, e in enumerate(entries, 1)]
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
                raise RulesFileError(f"{path}: op type {_show(t)} is already known to pybackward "
                                     f"({known[t].family or 'built in'}); a rules file cannot redefine it")
            if t in seen:
                raise RulesFileError(f"{path}: op type {_show(t)} is declared twice")
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
