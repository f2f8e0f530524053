"""What a picture of a PIR program shows: the same `Graph` the legacy view builds,
drawn by the same `dot` and `html` writers.

Every op is a box and every value an ellipse, an edge per operand and per
result (labelled with its position); a value is named as a user sees it
(parameter, data, fetch or shadow_output name) or `%N` as in the file, with
its type. The regions of `pd_op.if` / `pd_op.while` are boxes (clusters)
holding their ops, nested as the regions nest, and a dotted edge runs from
the op to the first op of each of its regions. Ops of the backward section
(`*_grad` ops and the `cf` stack ops of control-flow grads) are drawn as
backward ops, parameters and the values a grad op writes for them as
parameters and gradients. `max_nodes` refuses a picture too large to draw.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..base.errors import ArgumentError
from ..pir.model import Block, Operation, Program, Value
from ..pir.summary import is_grad_op
from ..pir.text import type_text
from .graph import DEFAULT_MAX_NODES, Cluster, Edge, Graph, Node

__all__ = ["build_pir_graph"]

#: The ops of a control-flow backward section that are not `*_grad` ops.
_BACKWARD_GLUE = frozenset({"cf.stack_create", "cf.tuple_push", "cf.tuple_pop", "cf.has_elements"})


def _is_backward(op: Operation) -> bool:
    return is_grad_op(op) or op.name in _BACKWARD_GLUE


def build_pir_graph(program: Program, highlight: str | None = None,
                    max_nodes: int | None = DEFAULT_MAX_NODES) -> Graph:
    """The graph of a PIR program, regions drawn as nested boxes; see the module doc."""
    try:
        pattern = re.compile(highlight) if highlight else None
    except re.error as e:
        raise ArgumentError(f"--highlight: not a regular expression: {highlight!r} ({e})") from None
    names = {id(v): n for n, v in program.names().items()}
    params = {id(op.results[0]) for op in program.parameters() if op.results}
    grads: set[int] = set()
    src = Path(program.source) if getattr(program, "source", None) else None
    name = "program" if src is None else "/".join(src.parts[-2:])
    g = Graph(title=f"{name}: PIR, {program.num_ops()} ops", collapsed=False)

    def hit(text: str) -> bool:
        return bool(pattern and pattern.search(text))

    serial: dict[int, int] = {}       # id() of a value or block -> its number in walk order (stable node ids)

    def number(obj: object) -> int:
        return serial.setdefault(id(obj), len(serial))

    def value_node(v: Value, cluster: str | None) -> str:
        nid = f"v{number(v)}"
        if nid not in g.nodes:
            label = names.get(id(v)) or (f"%{v.id}" if v.id is not None else "%?")
            kind = "param" if id(v) in params else "grad" if id(v) in grads else "var"
            g.add_node(Node(nid, f"{label}\n{type_text(v.type)}", kind, cluster=cluster, highlight=hit(label)))
        return nid

    counter = 0
    # (block, the cluster it is drawn in); an explicit stack, so deep nesting cannot overflow Python's.
    stack: list[tuple[Block, str | None]] = [(program.block, None)]
    firsts: list[tuple[str, Block, str]] = []     # (op node, region block, its cluster): the dotted edges
    first_op: dict[int, str] = {}
    while stack:
        block, cluster = stack.pop()
        for arg in block.args:
            value_node(arg, cluster)
        if not block.ops:
            first_op[id(block)] = g.add_node(Node(f"empty{number(block)}", "(no ops)", "empty", cluster=cluster))
        for op in block.ops:
            oid = f"op{counter}"
            counter += 1
            first_op.setdefault(id(block), oid)
            backward = _is_backward(op)
            g.add_node(Node(oid, op.name, "backward" if backward else "forward", cluster=cluster,
                            highlight=hit(op.name)))
            for i, v in enumerate(op.operands):
                if v is not None:
                    g.edges.append(Edge(value_node(v, cluster), oid, str(i)))
            for i, v in enumerate(op.results):
                if v.is_null:
                    continue
                if backward and any(u is not None and id(u) in params for u in op.operands):
                    grads.add(id(v))
                g.edges.append(Edge(oid, value_node(v, cluster), str(i)))
            inner = []
            for r, region in enumerate(op.regions):
                for k, sub in enumerate(region.blocks):
                    cid = f"r{number(sub)}"
                    label = f"{op.name} region {r}" + (f" block {k}" if len(region.blocks) > 1 else "")
                    g.clusters[cid] = Cluster(cid, label, cluster, "block")
                    inner.append((oid, sub, cid))
            firsts.extend(inner)
            stack.extend((sub, cid) for _, sub, cid in reversed(inner))
    for oid, sub, cid in firsts:
        if id(sub) in first_op:
            g.edges.append(Edge(oid, first_op[id(sub)], "region", "dotted", cid))
    if max_nodes is not None and len(g.nodes) > max_nodes:
        raise ArgumentError(
            f"{name}: the picture would have {len(g.nodes)} nodes, more than --max-nodes {max_nodes}: "
            "raise --max-nodes, or draw an HTML view (-o FILE.html), which takes more and needs no Graphviz")
    return g
