"""Pictures of programs: Graphviz DOT text, rendered by the `dot` program.

`program_to_dot` draws one block (block 0 by default) with its sub-blocks as
nested clusters: ops are boxes (forward blue, backward orange, the loss op
red, optimizer ops green), vars are ellipses, parameters are gold and bold,
their gradients gold and dashed. `highlight` (a regular expression) marks
every op whose type and every var whose name it matches.

A program with more than `collapse_above` ops is drawn collapsed: one node
per name scope (a var name's prefix before the first '.', e.g. `fc_3`) and
side (forward, backward), with edges where a var flows from one scope to
another. `collapse=True/False` forces either view.

`render(dot_text, path)` writes `.dot`/`.gv` as text and `.svg`/`.png`/`.pdf`
through Graphviz's `dot` (found on PATH, or `$PYBACKWARD_DOT`).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Iterable

from .errors import ArgumentError, PyBackwardError
from .program import OP_ROLE_LOSS, OP_ROLE_OPTIMIZE, Block, Operator, Program
from .text import is_backward, op_role, var_type_text

#: Ops in a drawn block (sub-blocks included) above which the view collapses.
DEFAULT_COLLAPSE_ABOVE = 80
#: Output suffixes `render` understands, and Graphviz's name for each.
FORMATS = {".dot": None, ".gv": None, ".svg": "svg", ".png": "png", ".pdf": "pdf"}

_OP_STYLE = {
    "forward": 'fillcolor="#dbe9f6", color="#3b6ea5"',
    "backward": 'fillcolor="#fde2c8", color="#d9822b"',
    "loss": 'fillcolor="#f8c9c9", color="#c0392b", penwidth=2',
    "optimize": 'fillcolor="#d5f0d5", color="#2e8b57"',
}
_VAR_STYLE = {
    "var": 'style=filled, fillcolor="#ffffff", color="#777777"',
    "param": 'style="filled,bold", fillcolor="#ffd966", color="#b8860b", penwidth=2',
    "grad": 'style="filled,dashed", fillcolor="#fff2cc", color="#b8860b", penwidth=2',
}
_HIGHLIGHT = 'color="#e0218a", fontcolor="#e0218a", penwidth=3'
_EMPTY = "@EMPTY@"


def quote(s: str) -> str:
    """A DOT string literal."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def op_kind(op: Operator) -> str:
    role = op_role(op)
    if is_backward(op):
        return "backward"
    if role & OP_ROLE_OPTIMIZE:
        return "optimize"
    if role & OP_ROLE_LOSS:
        return "loss"
    return "forward"


def name_scope(name: str) -> str:
    """A var's scope: its name before the first '.' or '@', without `grad/` prefixes."""
    while name.startswith("grad/"):
        name = name[5:]
    return re.split(r"[.@]", name, maxsplit=1)[0] or name


class _Roles:
    """Which names are parameters and which are their gradients."""

    def __init__(self, program: Program):
        self.params = {v.name for b in program.blocks for v in b.vars.values() if v.is_parameter}

    def kind(self, name: str) -> str:
        if name in self.params:
            return "param"
        base, sep, _ = name.partition("@GRAD")
        while base.startswith("grad/"):
            base = base[5:]
        if sep and base in self.params:
            return "grad"
        return "var"


def _drawn_blocks(program: Program, root: int) -> list[int]:
    """`root` and every block its ops own, depth first, each once."""
    out: list[int] = []
    stack = [root]
    while stack:
        i = stack.pop()
        if i in out or not 0 <= i < program.num_blocks:
            continue
        out.append(i)
        for op in reversed(program.blocks[i].ops):
            stack.extend(reversed(op.sub_blocks()))
    return out


def program_to_dot(program: Program, block: int = 0, highlight: str | None = None,
                   collapse: bool | None = None, collapse_above: int = DEFAULT_COLLAPSE_ABOVE,
                   legend: bool = True) -> str:
    """The DOT text of `block` (and its sub-blocks) of `program`."""
    program.block(block)  # range check
    try:
        pattern = re.compile(highlight) if highlight else None
    except re.error as e:
        raise ArgumentError(f"--highlight: not a regular expression: {highlight!r} ({e})") from None
    drawn = _drawn_blocks(program, block)
    n_ops = sum(len(program.blocks[i].ops) for i in drawn)
    if collapse is None:
        collapse = n_ops > collapse_above
    lines = ["digraph program {",
             '  graph [rankdir=TB, fontname="Helvetica", fontsize=11, compound=true, newrank=true];',
             '  node [fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=8, color="#555555", arrowsize=0.6];']
    src = Path(program.source) if program.source else None
    name = "program" if src is None else "/".join(src.parts[-2:])
    title = f"{name}: block {block}, {n_ops} ops"
    lines.append(f"  label={quote(title + (' (collapsed by name scope)' if collapse else ''))}; labelloc=t;")
    if collapse:
        lines.extend(_collapsed(program, program.blocks[block], pattern))
    else:
        lines.extend(_full(program, drawn, pattern))
    if legend:
        lines.extend(_legend(collapse))
    lines.append("}")
    return "\n".join(lines) + "\n"


def _full(program: Program, drawn: list[int], pattern) -> Iterable[str]:
    roles = _Roles(program)
    drawn_set = set(drawn)
    var_node: dict[tuple[int, str], str] = {}   # (declaring block, name) -> node id
    home: dict[str, list[str]] = {}             # cluster key -> node lines
    edges: list[str] = []

    def var_id(b: Block, name: str) -> str:
        v = b.find_var_recursive(name)
        decl = v.block.idx if v is not None else b.idx
        key = (decl, name)
        if key not in var_node:
            nid = f"v{decl}:{name}"
            var_node[key] = nid
            label = name if v is None else f"{name}\n{var_type_text(v)}"
            style = _VAR_STYLE[roles.kind(name)]
            if pattern is not None and pattern.search(name):
                style += ", " + _HIGHLIGHT
            where = str(decl) if decl in drawn_set else "outer"
            home.setdefault(where, []).append(f"{quote(nid)} [label={quote(label)}, shape=ellipse, {style}];")
        return var_node[key]

    first_node: dict[int, str] = {}
    for bi in drawn:
        b = program.blocks[bi]
        if not b.ops:
            first_node[bi] = f"b{bi}:empty"
            home.setdefault(str(bi), []).append(f"{quote(first_node[bi])} [label=\"(no ops)\", shape=plaintext];")
        for i, op in enumerate(b.ops):
            oid = f"b{bi}:op{i}"
            first_node.setdefault(bi, oid)
            kind = op_kind(op)
            style = _OP_STYLE[kind]
            if pattern is not None and pattern.search(op.type):
                style += ", " + _HIGHLIGHT
            home.setdefault(str(bi), []).append(
                f"{quote(oid)} [label={quote(f'[{i}] {op.type}')}, shape=box, style=\"filled,rounded\", {style}];")
            for slot, args in op.inputs.items():
                for a in args:
                    if a != _EMPTY:
                        edges.append(f"{quote(var_id(b, a))} -> {quote(oid)} [label={quote(slot)}];")
            for slot, args in op.outputs.items():
                for a in args:
                    if a != _EMPTY:
                        edges.append(f"{quote(oid)} -> {quote(var_id(b, a))} [label={quote(slot)}];")
    for bi in drawn:
        for i, op in enumerate(program.blocks[bi].ops):
            for sub in op.sub_blocks():
                if sub in first_node:
                    edges.append(f"{quote(f'b{bi}:op{i}')} -> {quote(first_node[sub])} "
                                 f"[lhead={quote(f'cluster_b{sub}')}, style=dotted, label=\"sub_block\"];")

    children: dict[int, list[int]] = {}
    for bi in drawn[1:]:
        parent = _owner(program, bi, drawn)
        children.setdefault(parent, []).append(bi)

    def cluster(bi: int, indent: str) -> Iterable[str]:
        b = program.blocks[bi]
        yield f"{indent}subgraph {quote(f'cluster_b{bi}')} {{"
        head = f"block {bi}" + (f" (grad of block {b.forward_block_idx})" if b.forward_block_idx != -1 else "")
        yield f"{indent}  label={quote(head)}; style=dashed; color=\"#999999\";"
        for ln in home.get(str(bi), []):
            yield f"{indent}  {ln}"
        for c in children.get(bi, []):
            yield from cluster(c, indent + "  ")
        yield f"{indent}}}"

    for ln in home.get("outer", []):
        yield f"  {ln}"
    root = drawn[0]
    for ln in home.get(str(root), []):
        yield f"  {ln}"
    for c in children.get(root, []):
        yield from cluster(c, "  ")
    for e in edges:
        yield f"  {e}"


def _owner(program: Program, bi: int, drawn: list[int]) -> int:
    for j in drawn:
        if j != bi and any(bi in op.sub_blocks() for op in program.blocks[j].ops):
            return j
    return drawn[0]


def _collapsed(program: Program, block: Block, pattern) -> Iterable[str]:
    """One node per (name scope, side); vars flowing between scopes are edges."""
    roles = _Roles(program)
    groups: dict[tuple[str, str], dict] = {}
    producer: dict[str, tuple[str, str]] = {}
    order: list[tuple[str, str]] = []

    def scope_of(op: Operator) -> str:
        # A grad op belongs with its forward op: the scope of the forward
        # output whose gradient it reads (slot Out@GRAD), else of what it writes.
        if is_backward(op):
            for slot, args in op.inputs.items():
                if slot.endswith("@GRAD") and args and args[0] != _EMPTY:
                    return name_scope(args[0])
        for names in (op.output_arg_names, op.input_arg_names):
            for n in names:
                if n != _EMPTY:
                    return name_scope(n)
        return op.type

    for op in block.ops:
        kind = op_kind(op)
        key = (scope_of(op), "backward" if kind == "backward" else "forward")
        g = groups.get(key)
        if g is None:
            g = groups[key] = {"types": [], "n": 0, "params": [], "grads": [], "loss": False, "hit": False,
                               "subs": []}
            order.append(key)
        g["n"] += 1
        if op.type not in g["types"]:
            g["types"].append(op.type)
        g["loss"] |= kind == "loss"
        g["hit"] |= bool(pattern is not None and pattern.search(op.type))
        g["subs"].extend(op.sub_blocks())
        for n in op.input_arg_names:
            if kind != "backward" and roles.kind(n) == "param" and n not in g["params"]:
                g["params"].append(n)
            g["hit"] |= bool(pattern is not None and pattern.search(n))
        for n in op.output_arg_names:
            if n == _EMPTY:
                continue
            producer.setdefault(n, key)
            if roles.kind(n) == "grad" and n not in g["grads"]:
                g["grads"].append(n)
            g["hit"] |= bool(pattern is not None and pattern.search(n))

    def gid(key: tuple[str, str]) -> str:
        return f"g:{key[0]}:{key[1]}"

    for key in order:
        g = groups[key]
        scope, side = key
        types = ", ".join(g["types"][:4]) + (", ..." if len(g["types"]) > 4 else "")
        label = f"{scope}{' (grad)' if side == 'backward' else ''}\n{g['n']} op{'s' if g['n'] != 1 else ''}: {types}"
        if g["params"]:
            label += "\nparams: " + ", ".join(g["params"][:3]) + (" ..." if len(g["params"]) > 3 else "")
        if g["grads"]:
            label += "\ngrads: " + ", ".join(g["grads"][:3]) + (" ..." if len(g["grads"]) > 3 else "")
        if g["subs"]:
            label += "\nsub-blocks: " + ", ".join(str(s) for s in g["subs"])
        style = _OP_STYLE["loss" if g["loss"] else side]
        if g["params"]:
            style += ", penwidth=2, peripheries=2"
        if g["hit"]:
            style += ", " + _HIGHLIGHT
        yield f"  {quote(gid(key))} [label={quote(label)}, shape=box, style=\"filled,rounded\", {style}];"

    flows: dict[tuple[str, str], list[str]] = {}
    feeds: dict[str, list[str]] = {}
    for op in block.ops:
        kind = op_kind(op)
        dst = gid((scope_of(op), "backward" if kind == "backward" else "forward"))
        for n in op.input_arg_names:
            if n == _EMPTY:
                continue
            src_key = producer.get(n)
            if src_key is None:
                v = block.find_var_recursive(n)
                if v is not None and not v.persistable and roles.kind(n) == "var":
                    feeds.setdefault(n, [])
                    if dst not in feeds[n]:
                        feeds[n].append(dst)
                continue
            src = gid(src_key)
            if src != dst and n not in flows.setdefault((src, dst), []):
                flows[(src, dst)].append(n)
    for n, dsts in feeds.items():
        v = block.find_var_recursive(n)
        style = _VAR_STYLE["var"] + (", " + _HIGHLIGHT if pattern is not None and pattern.search(n) else "")
        label = f"{n}\n{var_type_text(v)}"
        yield f"  {quote('v:' + n)} [label={quote(label)}, shape=ellipse, {style}];"
        for d in dsts:
            yield f"  {quote('v:' + n)} -> {quote(d)};"
    for (src, dst), names in flows.items():
        label = names[0] if len(names) == 1 else f"{len(names)} vars"
        yield f"  {quote(src)} -> {quote(dst)} [label={quote(label)}];"


def _legend(collapsed: bool) -> list[str]:
    rows = [("forward op", "box", _OP_STYLE["forward"], 'style="filled,rounded"'),
            ("backward op", "box", _OP_STYLE["backward"], 'style="filled,rounded"'),
            ("loss op", "box", _OP_STYLE["loss"], 'style="filled,rounded"')]
    if not collapsed:
        rows += [("parameter", "ellipse", _VAR_STYLE["param"], ""),
                 ("parameter gradient", "ellipse", _VAR_STYLE["grad"], ""),
                 ("variable", "ellipse", _VAR_STYLE["var"], "")]
    out = ['  subgraph "cluster_legend" {', '    label="legend"; style=solid; color="#cccccc"; fontsize=9;']
    for i, (label, shape, style, extra) in enumerate(rows):
        out.append(f"    {quote(f'legend:{i}')} [label={quote(label)}, shape={shape}, fontsize=9, "
                   f"{style}{', ' + extra if extra else ''}];")
    out.append("    " + " -> ".join(quote(f"legend:{i}") for i in range(len(rows))) + " [style=invis];")
    out.append("  }")
    return out


def dot_program() -> str | None:
    """The Graphviz `dot` executable: $PYBACKWARD_DOT, else `dot` on PATH (None if absent)."""
    explicit = os.environ.get("PYBACKWARD_DOT")
    if explicit:
        return explicit if (os.path.isfile(explicit) and os.access(explicit, os.X_OK)) else shutil.which(explicit)
    return shutil.which("dot")


def render(dot_text: str, path: str | os.PathLike) -> None:
    """Write DOT text to `path`: as is for .dot/.gv, else rendered by Graphviz (atomically)."""
    from .io import write_atomic
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ArgumentError(f"{path}: cannot tell the picture format from the suffix "
                            f"(use one of {', '.join(FORMATS)})")
    fmt = FORMATS[suffix]
    if fmt is None:
        write_atomic(path, dot_text.encode("utf-8"))
        return
    exe = dot_program()
    if exe is None:
        raise PyBackwardError(f"{path}: cannot render {fmt}: Graphviz's `dot` program is not installed "
                              "(install Graphviz, e.g. `apt-get install graphviz`, or write DOT text "
                              "with -o FILE.dot)")
    try:
        r = subprocess.run([exe, f"-T{fmt}"], input=dot_text.encode("utf-8"), capture_output=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PyBackwardError(f"{path}: cannot run Graphviz ({exe}): {e}") from None
    if r.returncode != 0 or not r.stdout:
        msg = " ".join(r.stderr.decode("utf-8", "replace").split()) or f"exit status {r.returncode}"
        raise PyBackwardError(f"{path}: Graphviz failed: {msg}")
    write_atomic(path, r.stdout)
