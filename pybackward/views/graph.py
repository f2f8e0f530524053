"""What a picture of a program shows, before it is drawn: nodes, edges, clusters.

`build_graph` turns one block of a program (and the blocks its ops own) into
a `Graph` that `dot.graph_to_dot` writes as Graphviz text and
`html_view.graph_to_html` lays out itself. The views, each an option:

* **full**: every op (a box) and var (an ellipse), an edge per slot argument;
* **collapsed** (`collapse=True`): one node per name scope and side (forward,
  backward) - a var name's prefix before the first `.`, e.g. `fc_3`;
* **folded repeats** (`fold=True`): a run of structurally identical op
  sequences (a layer repeated N times: same op types, same slots, same
  number of arguments, same role) is drawn once, marked `xN`; the vars of the
  later copies are drawn as the first copy's;
* **sub-blocks**: each drawn as a nested cluster when expanded, else as one
  node per sub-block (`block 2: 7 ops`) linked to the op that owns it;
* **around** (`around=VAR, depth=N`): only the ops within N steps of VAR
  (one step: an op that reads or writes a var of the previous step).

`max_nodes` stops a graph too large to draw with a message saying how to
draw less of it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import compress, count
from operator import eq
from pathlib import Path
from typing import Iterator, Sequence

from ..base.errors import ArgumentError
from ..base.names import close_names
from ..base.op_roles import OP_ROLE_BACKWARD
from ..legacy.program import OP_ROLE_LOSS, OP_ROLE_OPTIMIZE, Block, Operator, Program
from ..legacy.text import is_backward, op_role, var_type_text

__all__ = ["Graph", "Node", "Edge", "Cluster", "Run", "build_graph", "repeated_runs", "repeated_token_runs",
           "op_kind", "name_scope", "DEFAULT_COLLAPSE_ABOVE", "DEFAULT_MAX_NODES"]

#: Ops in a drawn block (after folding) above which the view collapses by name scope.
DEFAULT_COLLAPSE_ABOVE = 80
#: Nodes above which a picture is refused (Graphviz takes minutes and gigabytes beyond).
DEFAULT_MAX_NODES = 1500
#: The longest layer `repeated_runs` looks for, in ops.
MAX_PERIOD = 400
_EMPTY = "@EMPTY@"


@dataclass
class Node:
    id: str
    label: str
    kind: str                 # forward backward loss optimize | var param grad | block
    cluster: str | None = None
    highlight: bool = False
    repeat: int = 1           # > 1: stands for this many ops or vars
    emphasis: bool = False    # a collapsed scope that holds parameters


@dataclass
class Edge:
    src: str
    dst: str
    label: str = ""
    style: str = ""           # "" or "dotted"
    lhead: str | None = None  # the cluster the edge points at (a sub-block)


@dataclass
class Cluster:
    id: str
    label: str
    parent: str | None
    kind: str                 # "block" or "repeat"


@dataclass
class Graph:
    title: str
    collapsed: bool
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    clusters: dict[str, Cluster] = field(default_factory=dict)

    def add_node(self, node: Node) -> str:
        self.nodes.setdefault(node.id, node)
        return node.id

    def nodes_in(self, cluster: str | None) -> list[Node]:
        return [n for n in self.nodes.values() if n.cluster == cluster]

    def children(self, cluster: str | None) -> list[Cluster]:
        return [c for c in self.clusters.values() if c.parent == cluster]


def op_kind(op: Operator) -> str:
    role = op_role(op)
    if role & OP_ROLE_BACKWARD:         # is_backward(op), without reading the attr again
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


# -- repeated layers ---------------------------------------------------------
@dataclass(frozen=True)
class Run:
    """`count` copies of a `period`-op sequence, from op `start` of a block."""
    start: int
    period: int
    count: int

    @property
    def stop(self) -> int:
        return self.start + self.period * self.count


def _signature(op: Operator) -> tuple:
    # The slots from the op's cached records (read once at load), as `op.inputs` would give them:
    # a dict (the last of a repeated slot name wins), sorted by slot name.
    ins, outs = op.slot_records()
    return (op.type, op_kind(op), tuple([(k, len(v)) for k, v in sorted(dict(ins).items())]),
            tuple([(k, len(v)) for k, v in sorted(dict(outs).items())]), len(op.sub_blocks()))


def _common(s: Sequence, a: int, b: int, limit: int) -> int:
    """The largest m <= `limit` with s[a:a+m] == s[b:b+m]: doubling, then bisection, on slices
    (compared in C), so a match of length m costs O(m) copied items and O(log m) Python steps."""
    if limit <= 0 or s[a] != s[b]:
        return 0
    good, m = 1, 2                      # s[a:a+good] == s[b:b+good]
    while m <= limit and s[a + good:a + m] == s[b + good:b + m]:
        good, m = m, 2 * m
    bad = min(m, limit + 1)             # the first length known not to match (or past the limit)
    while bad - good > 1:
        mid = (good + bad) // 2
        if s[a + good:a + mid] == s[b + good:b + mid]:
            good = mid
        else:
            bad = mid
    return good


def repeated_runs(ops: list[Operator], min_saved: int = 3, max_period: int = MAX_PERIOD) -> list[Run]:
    """Runs of structurally identical op sequences, as few and as long as possible,
    not overlapping, sorted by start; each saves at least `min_saved` ops when drawn once.

    For each period p the candidates are the maximal stretches of positions i with
    sig(i) == sig(i + p) (a stretch of e - s equal pairs is a p-periodic run of
    k = (e - s + p) // p copies from s). Pure Python (`dot` imports no NumPy): a stretch
    with k >= 2 holds at least p equal pairs, so one at a multiple of p; only those
    "anchors" are compared one by one (n/p per period, in C through `map`), and a
    stretch is grown from its first equal anchor by comparing slices of the signature
    string. The greedy choice below is unchanged: longest cover first, then the
    shortest period, then the earliest start."""
    if len(ops) < 2:
        return []
    ids: dict[tuple, int] = {}
    return repeated_token_runs([ids.setdefault(_signature(op), len(ids)) for op in ops], min_saved, max_period)


def repeated_token_runs(tok: list[int], min_saved: int = 3, max_period: int = MAX_PERIOD) -> list[Run]:
    """`repeated_runs` of a sequence of op signatures, each an int (equal ints: the same signature)."""
    n = len(tok)
    if n < 2:
        return []
    # One character per op (a list outside the code points: the same comparisons, slower).
    text: Sequence = "".join(map(chr, tok)) if 0 <= min(tok) and max(tok) <= 0x10FFFF else list(tok)
    rev = text[::-1]
    cands: list[tuple[int, int, int, int]] = []      # (-covered, period, start, count)
    for p in range(1, min(max_period, n // 2) + 1):
        last = n - p                    # pairs (i, i + p) for i < last
        end = -1
        for i in compress(count(0, p), map(eq, tok[0:last:p], tok[p::p])):
            if i < end:                 # inside the stretch found last
                continue
            end = i + _common(text, i, i + p, last - i)
            start = i - _common(rev, n - i, n - i - p, i)
            k = (end - start + p) // p    # a p-periodic stretch of end - start + p ops
            if k >= 2 and p * (k - 1) >= min_saved:
                cands.append((-p * k, p, start, k))
    cands.sort()
    taken = bytearray(n)
    runs: list[Run] = []
    for neg, p, s, k in cands:
        # Slide past ops already taken by a longer run, keeping whole copies.
        while k >= 2 and taken.find(1, s, s + p * k) >= 0:
            if taken[s]:
                s, k = s + p, k - 1
            elif taken[s + p * k - 1]:
                k -= 1
            else:
                break
        if k >= 2 and p * (k - 1) >= min_saved and taken.find(1, s, s + p * k) < 0:
            taken[s:s + p * k] = b"\x01" * (p * k)
            runs.append(Run(s, p, k))
    return sorted(runs, key=lambda r: r.start)


class _Fold:
    """Which ops a folded block draws, and the name each var is drawn under."""

    def __init__(self, ops: list[Operator], runs: list[Run]):
        self.runs = runs
        self.hidden: set[int] = set()
        self.run_of: dict[int, Run] = {}
        self.names: dict[str, str] = {}
        self.count: dict[str, int] = {}
        produced_by_rep: set[str] = set()
        for r in runs:
            for j in range(r.period):
                self.run_of[r.start + j] = r
                for n in ops[r.start + j].output_arg_names:
                    produced_by_rep.add(n)
        for r in runs:
            for c in range(1, r.count):
                for j in range(r.period):
                    i = r.start + c * r.period + j
                    self.hidden.add(i)
                    rep, op = ops[r.start + j], ops[i]
                    for side, rep_side in ((op.outputs, rep.outputs), (op.inputs, rep.inputs)):
                        for slot, args in side.items():
                            for a, b in zip(args, rep_side.get(slot, ())):
                                if a != b and a not in produced_by_rep and a not in self.names:
                                    self.names[a] = b
                                    self.count[b] = self.count.get(b, 1) + 1

    def name(self, n: str) -> str:
        return self.names.get(n, n)


_NO_FOLD = _Fold([], [])


# -- the neighbourhood of a var --------------------------------------------
def _around(program: Program, blocks: list[int], var: str, depth: int) -> set[tuple[int, int]]:
    """(block, op index) of the ops within `depth` steps of `var` in `blocks`."""
    users: dict[str, list[tuple[int, int]]] = {}
    for bi in blocks:
        for i, op in enumerate(program.blocks[bi].ops):
            for n in (*op.input_arg_names, *op.output_arg_names):
                users.setdefault(n, []).append((bi, i))
    if var not in users:
        names = sorted(users)
        close = close_names(var, names, n=5)
        hint = f"; close: {', '.join(close)}" if close else ""
        raise ArgumentError(f"--around: no op in the drawn blocks reads or writes {var!r}{hint}")
    kept: set[tuple[int, int]] = set()
    frontier, seen = {var}, {var}
    for _ in range(depth):
        ops = {o for n in frontier for o in users.get(n, ()) if o not in kept}
        kept |= ops
        frontier = set()
        for bi, i in ops:
            op = program.blocks[bi].ops[i]
            frontier.update(n for n in (*op.input_arg_names, *op.output_arg_names) if n not in seen)
        seen |= frontier
    return kept


# -- building the graph -------------------------------------------------------
def drawn_blocks(program: Program, root: int) -> list[int]:
    """`root` and every block its ops own, depth first, each once."""
    out: list[int] = []
    seen: set[int] = set()        # a set: `i in out` made this O(blocks^2)
    stack = [root]
    while stack:
        i = stack.pop()
        if i in seen or not 0 <= i < program.num_blocks:
            continue
        seen.add(i)
        out.append(i)
        for op in reversed(program.blocks[i].ops):
            stack.extend(reversed(op.sub_blocks()))
    return out


def build_graph(program: Program, block: int = 0, highlight: str | None = None,
                collapse: bool | None = None, collapse_above: int = DEFAULT_COLLAPSE_ABOVE,
                fold: bool = True, expand: bool | None = None, around: str | None = None,
                depth: int = 2, max_nodes: int | None = DEFAULT_MAX_NODES) -> Graph:
    """The graph of `block` (and its sub-blocks) of `program`; see the module doc.

    Defaults: sub-blocks expanded when the drawn blocks hold at most
    `collapse_above` ops; collapsed by name scope when the ops drawn (after
    folding) are more than `collapse_above`, never with `around`."""
    program.block(block)  # range check
    try:
        pattern = re.compile(highlight) if highlight else None
    except re.error as e:
        raise ArgumentError(f"--highlight: not a regular expression: {highlight!r} ({e})") from None
    if depth < 1:
        raise ArgumentError(f"--depth must be at least 1, not {depth}")
    every = drawn_blocks(program, block)
    n_all = sum(len(program.blocks[i].ops) for i in every)
    if expand is None:
        expand = n_all <= collapse_above or around is not None
    drawn = every if expand else [block]
    keep = _around(program, drawn, around, depth) if around is not None else None
    folds = {bi: (_Fold(program.blocks[bi].ops, repeated_runs(program.blocks[bi].ops))
                  if fold and keep is None else _NO_FOLD) for bi in drawn}
    n_ops = sum(1 for bi in drawn for i in range(len(program.blocks[bi].ops))
                if i not in folds[bi].hidden and (keep is None or (bi, i) in keep))
    if collapse is None:
        collapse = n_ops > collapse_above and keep is None
    src = Path(program.source) if program.source else None
    name = "program" if src is None else "/".join(src.parts[-2:])
    title = f"{name}: block {block}, {n_all} ops"
    notes = []
    if around is not None:
        notes.append(f"{n_ops} within {depth} of {around}")
    if any(f.runs for f in folds.values()):
        notes.append("repeated layers drawn once")
    if collapse:
        notes.append("collapsed by name scope")
    if notes:
        title += f" ({'; '.join(notes)})"
    g = Graph(title=title, collapsed=collapse)
    ctx = _Ctx(program, pattern, folds, keep)
    if collapse:
        _collapsed(g, ctx, drawn)
    else:
        _full(g, ctx, drawn, expand)
    if around is not None:
        for n in g.nodes.values():
            if n.id.endswith(":" + around) and n.kind in ("var", "param", "grad"):
                n.highlight = True
    if max_nodes is not None and len(g.nodes) > max_nodes:
        raise ArgumentError(
            f"{name}: the picture would have {len(g.nodes)} nodes, more than --max-nodes {max_nodes}: "
            "draw the neighbourhood of a var with --around VAR --depth N, fold it by name scope with "
            "--collapse, or raise --max-nodes (an HTML view, -o FILE.html, takes more)")
    return g


@dataclass
class _Ctx:
    program: Program
    pattern: re.Pattern | None
    folds: dict[int, _Fold]
    keep: set[tuple[int, int]] | None

    def __post_init__(self) -> None:
        self.roles = _Roles(self.program)

    def hit(self, text: str) -> bool:
        return self.pattern is not None and bool(self.pattern.search(text))

    def ops(self, bi: int) -> Iterator[tuple[int, Operator]]:
        """The ops of block `bi` that are drawn: not a later copy of a folded layer, kept by `around`."""
        f = self.folds.get(bi, _NO_FOLD)
        for i, op in enumerate(self.program.blocks[bi].ops):
            if i not in f.hidden and (self.keep is None or (bi, i) in self.keep):
                yield i, op


def _args(slots: dict[str, list[str]], f: _Fold) -> Iterator[tuple[str, str]]:
    for slot, args in slots.items():
        for a in args:
            if a != _EMPTY:
                yield slot, f.name(a)


def _full(g: Graph, ctx: _Ctx, drawn: list[int], expand: bool) -> None:
    program = ctx.program
    drawn_set = set(drawn)
    var_node: dict[tuple[int, str], str] = {}

    def var_id(b: Block, name: str, f: _Fold) -> str:
        v = b.find_var_recursive(name)
        decl = v.block.idx if v is not None else b.idx
        key = (decl, name)
        if key not in var_node:
            nid = f"v{decl}:{name}"
            var_node[key] = nid
            reps = f.count.get(name, 1)
            label = name if v is None else f"{name}\n{var_type_text(v)}"
            if reps > 1:
                label += f"\n(and {reps - 1} more, one per copy)"
            g.add_node(Node(nid, label, ctx.roles.kind(name), cluster=f"b{decl}" if decl in drawn_set else "outer",
                            highlight=ctx.hit(name), repeat=reps))
        return var_node[key]

    for bi in drawn:
        b = program.blocks[bi]
        f = ctx.folds.get(bi, _NO_FOLD)
        if bi != drawn[0]:
            head = f"block {bi}" + (f" (grad of block {b.forward_block_idx})" if b.forward_block_idx != -1 else "")
            g.clusters[f"b{bi}"] = Cluster(f"b{bi}", head, None, "block")
        for r in f.runs:
            g.clusters[f"r{bi}_{r.start}"] = Cluster(
                f"r{bi}_{r.start}", f"x{r.count}: ops {r.start}..{r.stop - 1}, {r.period} ops repeated "
                f"{r.count} times", f"b{bi}", "repeat")
        if not b.ops:
            g.add_node(Node(f"b{bi}:empty", "(no ops)", "empty", cluster=f"b{bi}"))
        for i, op in ctx.ops(bi):
            oid = f"b{bi}:op{i}"
            run = f.run_of.get(i)
            g.add_node(Node(oid, f"[{i}] {op.type}", op_kind(op),
                            cluster=f"r{bi}_{run.start}" if run else f"b{bi}", highlight=ctx.hit(op.type),
                            repeat=run.count if run else 1))
            for slot, a in _args(op.inputs, f):
                g.edges.append(Edge(var_id(b, a, f), oid, slot))
            for slot, a in _args(op.outputs, f):
                g.edges.append(Edge(oid, var_id(b, a, f), slot))
    for bi in drawn:
        for i, op in ctx.ops(bi):
            for sub in op.sub_blocks():
                if sub in drawn_set:
                    first = next((f"b{sub}:op{j}" for j, _ in ctx.ops(sub)), None)
                    if first is None and not program.blocks[sub].ops:
                        first = f"b{sub}:empty"
                    if first is not None:
                        g.edges.append(Edge(f"b{bi}:op{i}", first, "sub_block", "dotted", f"b{sub}"))
                elif not expand and 0 <= sub < program.num_blocks:
                    sb = program.blocks[sub]
                    inner = drawn_blocks(program, sub)
                    n = sum(len(program.blocks[j].ops) for j in inner)
                    types: list[str] = []
                    for o in sb.ops:
                        if o.type not in types:
                            types.append(o.type)
                    label = (f"block {sub}: {n} op{'s' if n != 1 else ''}"
                             + (f" in {len(inner)} blocks" if len(inner) > 1 else "")
                             + ("\n" + ", ".join(types[:4]) + (", ..." if len(types) > 4 else "") if types else ""))
                    nid = g.add_node(Node(f"blk{sub}", label, "block", cluster=f"b{bi}"))
                    g.edges.append(Edge(f"b{bi}:op{i}", nid, "sub_block", "dotted"))
    # Parents of the sub-block clusters: the drawn block that owns them (the first, in drawing
    # order), found in one pass over the drawn ops, not one per block (O(blocks x ops)).
    owners: dict[int, int] = {}
    for j in drawn:
        for op in program.blocks[j].ops:
            for sub in op.sub_blocks():
                if sub != j:
                    owners.setdefault(sub, j)
    for bi in drawn[1:]:
        owner = owners.get(bi, drawn[0])
        g.clusters[f"b{bi}"].parent = None if owner == drawn[0] else f"b{owner}"
    root = f"b{drawn[0]}"
    for n in g.nodes.values():
        if n.cluster == root:
            n.cluster = None
    for c in g.clusters.values():
        if c.parent == root:
            c.parent = None
    # Clusters no drawn node lives in (all ops outside --around) are left out: an empty one
    # goes, then its parent if that is left empty, and so on (linear: child counts).
    used = {n.cluster for n in g.nodes.values()}
    children: dict[str, int] = {}
    for c in g.clusters.values():
        if c.parent is not None:
            children[c.parent] = children.get(c.parent, 0) + 1
    empty = [cid for cid in g.clusters if cid not in used and not children.get(cid)]
    while empty:
        cid = empty.pop()
        c = g.clusters.pop(cid, None)
        if c is None or c.parent is None:
            continue
        children[c.parent] -= 1
        if not children[c.parent] and c.parent not in used and c.parent in g.clusters:
            empty.append(c.parent)


def _collapsed(g: Graph, ctx: _Ctx, drawn: list[int]) -> None:
    """One node per (name scope, side) of the root block; vars flowing between scopes are edges."""
    bi = drawn[0]
    block = ctx.program.blocks[bi]
    f = ctx.folds.get(bi, _NO_FOLD)
    roles = ctx.roles
    groups: dict[tuple[str, str], dict] = {}
    producer: dict[str, tuple[str, str]] = {}

    def scope_of(op: Operator) -> str:
        # A grad op belongs with its forward op: the scope of the forward
        # output whose gradient it reads (slot Out@GRAD), else of what it writes.
        if is_backward(op):
            for slot, args in op.inputs.items():
                if slot.endswith("@GRAD") and args and args[0] != _EMPTY:
                    return name_scope(f.name(args[0]))
        for names in (op.output_arg_names, op.input_arg_names):
            for n in names:
                if n != _EMPTY:
                    return name_scope(f.name(n))
        return op.type

    def key_of(op: Operator) -> tuple[str, str]:
        return (scope_of(op), "backward" if op_kind(op) == "backward" else "forward")

    drawn_ops = list(ctx.ops(bi))
    for i, op in drawn_ops:
        kind = op_kind(op)
        key = key_of(op)
        g_ = groups.get(key)
        if g_ is None:
            g_ = groups[key] = {"types": [], "n": 0, "params": [], "grads": [], "loss": False, "hit": False,
                                "subs": [], "repeat": 1}
        g_["n"] += 1
        run = f.run_of.get(i)
        if run is not None:
            g_["repeat"] = max(g_["repeat"], run.count)
        if op.type not in g_["types"]:
            g_["types"].append(op.type)
        g_["loss"] |= kind == "loss"
        g_["hit"] |= ctx.hit(op.type)
        g_["subs"].extend(op.sub_blocks())
        for _, n in _args(op.inputs, f):
            if kind != "backward" and roles.kind(n) == "param" and n not in g_["params"]:
                g_["params"].append(n)
            g_["hit"] |= ctx.hit(n)
        for _, n in _args(op.outputs, f):
            producer.setdefault(n, key)
            if roles.kind(n) == "grad" and n not in g_["grads"]:
                g_["grads"].append(n)
            g_["hit"] |= ctx.hit(n)

    def gid(key: tuple[str, str]) -> str:
        return f"g:{key[0]}:{key[1]}"

    for key, g_ in groups.items():
        scope, side = key
        types = ", ".join(g_["types"][:4]) + (", ..." if len(g_["types"]) > 4 else "")
        label = f"{scope}{' (grad)' if side == 'backward' else ''}\n{g_['n']} op{'s' if g_['n'] != 1 else ''}: {types}"
        if g_["repeat"] > 1:
            label += f"\nx{g_['repeat']} (a repeated layer, drawn once)"
        if g_["params"]:
            label += "\nparams: " + ", ".join(g_["params"][:3]) + (" ..." if len(g_["params"]) > 3 else "")
        if g_["grads"]:
            label += "\ngrads: " + ", ".join(g_["grads"][:3]) + (" ..." if len(g_["grads"]) > 3 else "")
        if g_["subs"]:
            label += "\nsub-blocks: " + ", ".join(str(s) for s in g_["subs"])
        g.add_node(Node(gid(key), label, "loss" if g_["loss"] else side, highlight=g_["hit"],
                        repeat=g_["repeat"], emphasis=bool(g_["params"])))

    flows: dict[tuple[str, str], list[str]] = {}
    feeds: dict[str, list[str]] = {}
    for _, op in drawn_ops:
        dst = gid(key_of(op))
        for _, n in _args(op.inputs, f):
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
    feed_edges = []
    for n, dsts in feeds.items():
        v = block.find_var_recursive(n)
        g.add_node(Node("v:" + n, f"{n}\n{var_type_text(v)}", "var", highlight=ctx.hit(n)))
        feed_edges.extend(Edge("v:" + n, d) for d in dsts)
    g.edges.extend(feed_edges)
    for (src, dst), names in flows.items():
        g.edges.append(Edge(src, dst, names[0] if len(names) == 1 else f"{len(names)} vars"))


def count_ops(g: Graph) -> int:
    """Op nodes (or op groups, collapsed) in the graph."""
    return sum(1 for n in g.nodes.values() if n.kind in ("forward", "backward", "loss", "optimize"))
