"""Graph sampling ops (no grads), as Paddle 3.3.1's CPU kernels compute them:

* graph_reindex: X's nodes then the Neighbors' new nodes (in order of first
  appearance) numbered 0, 1, ...; Reindex_Src the Neighbors' numbers,
  Reindex_Dst each X node's number repeated Count times, Out_Nodes the nodes
  in numbering order. As Paddle's map does, a node listed twice in X keeps
  both entries in Out_Nodes and maps to its last one.
* graph_sample_neighbors / weighted_sample_neighbors: for each node of X the
  neighbours Row[Col_Ptr[n]:Col_Ptr[n+1]] of a CSC graph; when there are more
  than sample_size of them, sample_size drawn without repeats (uniformly, or
  by A-Res weighted reservoir keys log2(u) / w, output in ascending key
  order as Paddle's min-heap pops them). Out_Count is int32.
* graph_khop_sampler: the same sampling layer after layer (the next layer's
  nodes are the sampled neighbours not in the current layer, sorted), the
  edges reindexed as graph_reindex does over all layers' nodes. Every node
  of every layer is sampled; Paddle's CPU kernel loops over len(X) nodes in
  each layer, so past the first layer its values are Paddle's only when the
  layer holds exactly len(X) nodes (otherwise it aborts, hangs or drops
  nodes: docs/deviations.md).

Paddle's CPU sampling draws from a std::mt19937 seeded by std::random_device:
its values cannot be reproduced, so random draws come from the interpreter's
generator; whatever is not random (which nodes, counts, order when no
sampling is needed, the reindexing) equals Paddle's. sample_size -1 means
"every neighbour" (the API's meaning; Paddle's CPU kernel fails on it, see
docs/deviations.md).
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


def _ints(c: Call, slot: str, dtype: np.dtype | None = None) -> np.ndarray:
    v = c.x(slot)
    if v is None:
        raise ExecutionError(f"op {c.op_type}: input {slot} is required")
    v = np.asarray(v)
    if v.dtype.kind not in "iu":
        raise ExecutionError(f"op {c.op_type}: {slot} must be an int32/int64 tensor, got {v.dtype}")
    if dtype is not None and v.dtype != dtype:
        raise ExecutionError(f"op {c.op_type}: {slot} must be {dtype} (as X is, or Paddle's kernel requires), "
                             f"got {v.dtype}")
    return v.reshape(-1)


def _rng(c: Call) -> np.random.Generator:
    return c.rng if c.rng is not None else np.random.default_rng()


def reindex(x: np.ndarray, nb: np.ndarray):
    """(numbers of nb, numbers of x, nodes in numbering order): x numbered by
    position (a repeated node takes its last position), nb's other nodes after
    them in order of first appearance."""
    x = x.astype(np.int64)
    nb = nb.astype(np.int64)
    ux, inv = np.unique(x, return_inverse=True)
    last = np.full(ux.size, -1, np.int64)
    np.maximum.at(last, inv.reshape(-1), np.arange(x.size, dtype=np.int64))
    in_x = np.isin(nb, ux)
    src = np.empty(nb.size, np.int64)
    src[in_x] = last[np.searchsorted(ux, nb[in_x])]
    new = nb[~in_x]
    un, first, inv2 = np.unique(new, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(un.size, np.int64)
    rank[order] = np.arange(un.size)
    src[~in_x] = x.size + rank[inv2.reshape(-1)]
    return src, last[inv.reshape(-1)], np.concatenate([x, un[order]])


# --------------------------------------------------------------------------
# graph_reindex
# --------------------------------------------------------------------------
def _graph_reindex(c: Call):
    x = _ints(c, "X")
    nb = _ints(c, "Neighbors", x.dtype)
    count = _ints(c, "Count", np.dtype(np.int32)).astype(np.int64)  # Paddle reads it as int32 only
    if count.size != x.size:
        raise ExecutionError(f"op graph_reindex: Count has {count.size} entries for {x.size} nodes of X")
    if np.any(count < 0) or count.sum() > nb.size:
        raise ExecutionError(f"op graph_reindex: Count must be >= 0 and sum to at most the {nb.size} Neighbors, "
                             f"got sum {count.sum()}")
    src, xid, nodes = reindex(x, nb)
    dst = np.zeros(nb.size, np.int64)  # Paddle's dst vector starts zeroed
    dst[:count.sum()] = np.repeat(xid, count)
    return {"Reindex_Src": src.astype(x.dtype), "Reindex_Dst": dst.astype(x.dtype),
            "Out_Nodes": nodes.astype(x.dtype)}


def _reindex_samples(rng):
    def i(*v, dt=np.int64):
        return np.array(v, dt)
    return [
        Sample({"X": [i(3, 7, 5)], "Neighbors": [i(7, 9, 3, 11, 9, 5)], "Count": [i(2, 3, 1, dt=np.int32)]}),
        Sample({"X": [i(0, 4, 2, 9, dt=np.int32)], "Neighbors": [i(8, 1, 1, 4, 6, 8, 2, 0, dt=np.int32)],
                "Count": [i(3, 0, 4, 1, dt=np.int32)]}, note="int32, a node without neighbours"),
        Sample({"X": [i(5, 2, 5)], "Neighbors": [i(2, 6, 5, 6)], "Count": [i(1, 2, 1, dt=np.int32)]},
               note="a node twice in X: both kept in Out_Nodes, mapped to the last"),
    ]


register(paddle_opdef("graph_reindex", _graph_reindex, samples=_reindex_samples,
                      doc="X's nodes then Neighbors' new nodes numbered from 0; edges renumbered"))


# --------------------------------------------------------------------------
# graph_sample_neighbors, weighted_sample_neighbors
# --------------------------------------------------------------------------
def _csc(c: Call, row_slot: str, ptr_slot: str, x_slot: str):
    x = _ints(c, x_slot)
    row = _ints(c, row_slot, x.dtype)
    ptr = _ints(c, ptr_slot, x.dtype).astype(np.int64)
    if x.size and (x.min() < 0 or x.max() + 1 >= ptr.size):
        raise ExecutionError(f"op {c.op_type}: node ids of {x_slot} must lie in [0, {ptr.size - 1}), "
                             f"got [{x.min()}, {x.max()}]")
    if ptr.size and (ptr[0] < 0 or ptr[-1] > row.size or np.any(np.diff(ptr) < 0)):
        raise ExecutionError(f"op {c.op_type}: {ptr_slot} must be non-decreasing offsets into {row_slot}")
    return row, ptr, x


def _sample_size(c: Call, attr: str, value) -> int:
    k = int(value)
    if k < 0 and k != -1:
        raise c.unsupported(attr, k, "-1 (every neighbour) or a size >= 0")
    return k


def _edges(ptr: np.ndarray, nodes: np.ndarray):
    """(edge positions of every node's neighbours in order, the node index of each, cap per node)."""
    begin, cap = ptr[nodes], ptr[nodes + 1] - ptr[nodes]
    seg = np.repeat(np.arange(nodes.size), cap)
    start = np.repeat(np.cumsum(cap) - cap, cap)
    pos = np.repeat(begin, cap) + np.arange(cap.sum()) - start
    return pos, seg, cap


def sample_edges(ptr: np.ndarray, nodes: np.ndarray, k: int, rng: np.random.Generator,
                 weight: np.ndarray | None = None):
    """Edge positions sampled per node (grouped by node) and the count per node."""
    pos, seg, cap = _edges(ptr, nodes)
    if k < 0:
        return pos, cap
    key = rng.random(pos.size, dtype=np.float32)
    over = np.repeat(cap > k, cap)  # nodes with more than k neighbours sample, the others keep all in order
    rank = np.arange(pos.size) - np.repeat(np.cumsum(cap) - cap, cap)
    if weight is None:
        order = np.lexsort((key, seg))  # a uniform random order within each node: take its first k
        take = over[order] & (rank < k)
    else:
        with np.errstate(divide="ignore"):
            key = np.log2(key) * (np.float32(1) / weight[pos].astype(np.float32))
        order = np.lexsort((key, seg))  # ascending keys within each node: the k largest, as the heap pops them
        take = over[order] & (rank >= np.repeat(cap - k, cap))
    rows = np.concatenate([order[take], np.arange(pos.size)[~over]])
    rows = rows[np.argsort(seg[rows], kind="stable")]
    return pos[rows], np.minimum(cap, k)


def _neighbors(c: Call, row_slot, ptr_slot, x_slot, eid_slot, weight_slot=None):
    row, ptr, x = _csc(c, row_slot, ptr_slot, x_slot)
    k = _sample_size(c, "sample_size", c.attr("sample_size", -1))
    return_eids = bool(c.attr("return_eids", False))
    eids = _ints(c, eid_slot, x.dtype) if return_eids else None
    if eids is not None and eids.size != row.size:
        raise ExecutionError(f"op {c.op_type}: {eid_slot} has {eids.size} entries for {row.size} edges")
    weight = None
    if weight_slot is not None:
        weight = np.asarray(c.x(weight_slot))
        if weight.dtype != np.float32 or weight.size != row.size:
            raise ExecutionError(f"op {c.op_type}: {weight_slot} must be float32 with one weight per edge "
                                 f"({row.size}), got {weight.dtype} {weight.shape}")
        weight = weight.reshape(-1)
    pos, count = sample_edges(ptr, x.astype(np.int64), k, _rng(c), weight)
    return row[pos], count.astype(np.int32), (eids[pos] if eids is not None else None)


def _graph_sample_neighbors(c: Call):
    out, count, eids = _neighbors(c, "Row", "Col_Ptr", "X", "Eids")
    res = {"Out": out, "Out_Count": count}
    if eids is not None:
        res["Out_Eids"] = eids
    return res


def _weighted_sample_neighbors(c: Call):
    out, count, eids = _neighbors(c, "row", "colptr", "input_nodes", "eids", "edge_weight")
    res = {"out_neighbors": out, "out_count": count}
    if eids is not None:
        res["out_eids"] = eids
    return res


def _graph(dt=np.int64):
    # a CSC graph of 5 nodes: the in-neighbours of node n are row[colptr[n]:colptr[n+1]]
    row = np.array([1, 2, 3, 0, 2, 4, 0, 1, 3, 4, 0, 2, 1], dt)
    colptr = np.array([0, 3, 6, 10, 12, 13], dt)
    return row, colptr, (np.arange(13) + 100).astype(dt)


def _sample_samples(rng):
    row, colptr, eids = _graph()
    r32, c32, e32 = _graph(np.int32)
    base = {"return_eids": True, "flag_perm_buffer": False}
    return [
        Sample({"Row": [row], "Col_Ptr": [colptr], "X": [np.array([0, 2, 4])], "Eids": [eids]},
               {**base, "sample_size": 4}, note="sample_size >= every degree: all neighbours, in order"),
        Sample({"Row": [r32], "Col_Ptr": [c32], "X": [np.array([3, 1, 3], np.int32)], "Eids": [e32]},
               {**base, "sample_size": 10}, note="int32, a node twice"),
        Sample({"Row": [row], "Col_Ptr": [colptr], "X": [np.array([1, 4])]},
               {**base, "sample_size": 3, "return_eids": False}, note="no eids: Out_Eids left unset"),
        Sample({"Row": [row], "Col_Ptr": [colptr], "X": [np.array([0, 2, 4])], "Eids": [eids]},
               {**base, "sample_size": -1}, note="-1: every neighbour (Paddle's CPU kernel fails)"),
    ]


def _weighted_samples(rng):
    row, colptr, eids = _graph()
    w = np.linspace(0.5, 2, 13).astype(np.float32)
    return [
        Sample({"row": [row], "colptr": [colptr], "edge_weight": [w], "input_nodes": [np.array([0, 2, 4])],
                "eids": [eids]}, {"sample_size": 5, "return_eids": True},
               note="sample_size >= every degree: all neighbours, in order"),
        Sample({"row": [row], "colptr": [colptr], "edge_weight": [w], "input_nodes": [np.array([3, 1])]},
               {"sample_size": 4, "return_eids": False}, note="no eids: out_eids left unset"),
    ]


register(paddle_opdef("graph_sample_neighbors", _graph_sample_neighbors, samples=_sample_samples,
                      attrs_handled=("sample_size", "return_eids", "flag_perm_buffer"),
                      doc="up to sample_size neighbours of each node of X, drawn without repeats"))
register(paddle_opdef("weighted_sample_neighbors", _weighted_sample_neighbors, samples=_weighted_samples,
                      attrs_handled=("sample_size", "return_eids"),
                      doc="up to sample_size neighbours of each node, drawn by edge weight (A-Res)"))


# --------------------------------------------------------------------------
# graph_khop_sampler
# --------------------------------------------------------------------------
def _graph_khop_sampler(c: Call):
    row, ptr, x = _csc(c, "Row", "Col_Ptr", "X")
    if row.size == 0 or ptr.size == 0 or x.size == 0:
        raise ExecutionError("op graph_khop_sampler: Row, Col_Ptr and X must not be empty")
    sizes = [int(s) for s in c.attr("sample_sizes", [])]
    if not sizes or any(s < 0 for s in sizes):
        raise c.unsupported("sample_sizes", sizes, "one size >= 0 per layer (Paddle's CPU kernel fails on -1)")
    return_eids = bool(c.attr("return_eids", False))
    eids = _ints(c, "Eids", x.dtype) if return_eids else None
    rng = _rng(c)
    keep = np.concatenate([[True], x[1:] != x[:-1]])  # std::unique: consecutive repeats only
    frontier = x[keep].astype(np.int64)
    dsts, srcs, counts, eid_parts = [], [], [], []
    for i, k in enumerate(sizes):
        if frontier.size == 0:
            raise ExecutionError(f"op graph_khop_sampler: layer {i} has no nodes to sample from "
                                 "(Paddle's kernel reads past its layers here)")
        dsts.append(frontier)
        pos, count = sample_edges(ptr, frontier, k, rng)
        if i == 0 and pos.size == 0:
            raise ExecutionError("op graph_khop_sampler: The input nodes `X` should have at least one "
                                 "neighbors, but none of the input nodes have neighbors.")
        srcs.append(row[pos].astype(np.int64))
        counts.append(count)
        if eids is not None:
            eid_parts.append(eids[pos])
        if i < len(sizes) - 1:
            frontier = np.setdiff1d(np.unique(srcs[-1]), frontier)
    dst_nodes = np.concatenate(dsts)
    src, dst_ids, nodes = reindex(dst_nodes, np.concatenate(srcs))
    dst = np.repeat(dst_ids, np.concatenate(counts))
    res = {"Out_Src": src.reshape(-1, 1).astype(x.dtype), "Out_Dst": dst.reshape(-1, 1).astype(x.dtype),
           "Sample_Index": nodes.astype(x.dtype), "Reindex_X": x_ids_of(x, dst_nodes, nodes).astype(x.dtype)}
    if eids is not None:
        res["Out_Eids"] = np.concatenate(eid_parts).astype(x.dtype)
    return res


def x_ids_of(x: np.ndarray, dst_nodes: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """The number of each X node in the reindexing (its last position among the layers' nodes)."""
    ux, inv = np.unique(dst_nodes, return_inverse=True)
    last = np.full(ux.size, -1, np.int64)
    np.maximum.at(last, inv.reshape(-1), np.arange(dst_nodes.size, dtype=np.int64))
    return last[np.searchsorted(ux, x.astype(np.int64))]


def _khop_samples(rng):
    row, colptr, eids = _graph()
    return [
        Sample({"Row": [row], "Col_Ptr": [colptr], "X": [np.array([0, 2, 4])], "Eids": [eids]},
               {"sample_sizes": [5], "return_eids": True}, note="one layer, every neighbour"),
        Sample({"Row": [row.astype(np.int32)], "Col_Ptr": [colptr.astype(np.int32)],
                "X": [np.array([1, 3], np.int32)]},
               {"sample_sizes": [4], "return_eids": False}, note="int32, no eids: Out_Eids left unset"),
    ]


register(paddle_opdef("graph_khop_sampler", _graph_khop_sampler, samples=_khop_samples,
                      attrs_handled=("sample_sizes", "return_eids"),
                      doc="neighbours sampled layer after layer, the edges reindexed"))
