"""Graph sampling and TDM kernels (ops/graph/sampling.py, ops/recsys/tdm.py) beyond the
samples compared with Paddle (tests/ops/test_kernels_vs_paddle.py): the random
draws Paddle seeds from std::random_device, checked by invariants and
statistics; float32 runs of samples Paddle refuses in float64; errors."""
from __future__ import annotations

import json

import numpy as np
import pytest

from pybackward.base.errors import ExecutionError
from pybackward.ops import opcheck, registry
from conftest import TESTDATA

KDIR = TESTDATA / "kernels"
ROW = np.array([1, 2, 3, 0, 2, 4, 0, 1, 3, 4, 0, 2, 1], np.int64)
COLPTR = np.array([0, 3, 6, 10, 12, 13], np.int64)
EIDS = np.arange(13, dtype=np.int64) + 100


def run(op, ins, attrs, seed=0):
    d = registry.get(op)
    outs, _ = opcheck.run_with_grads(op, ins, attrs, {k: 1 for k in d.outputs}, {})
    return {k: (None if not v or v[0] is None else np.asarray(v[0])) for k, v in outs.items()}


def float32_runs(family):
    """(case, our outputs, Paddle's float32 outputs) for samples Paddle ran in float32 only."""
    cases = {c["case"]: c for c in json.loads((KDIR / f"{family}.samples.json").read_text())}
    arrays = dict(np.load(KDIR / f"{family}.samples.npz"))
    report = json.loads((KDIR / f"{family}.paddle.json").read_text())
    paddle = dict(np.load(KDIR / f"{family}.paddle.npz"))
    for name, runs in report.items():
        if "error" in runs.get("float32", {}) or "error" not in runs.get("float64", {}):
            continue
        case = cases[name]
        ins = {slot: [arrays[f"{name}|in|{slot}|{i}"].astype(np.float32)
                      if arrays[f"{name}|in|{slot}|{i}"].dtype.kind == "f" else arrays[f"{name}|in|{slot}|{i}"]
                      for i in range(n)] for slot, n in case["inputs"].items()}
        outs, _ = opcheck.run_with_grads(case["op"], ins, case["attrs"], case["outputs"], {})
        for key in runs["float32"]["fetched"]:
            _, slot, i = key.split("|")
            yield name, key, np.asarray(outs[slot][int(i)]), paddle[f"{name}|float32|{key}"]


@pytest.mark.parametrize("family", ["graph_sample"])
def test_float32_runs_equal_paddle(family):
    seen = 0
    for name, key, got, want in float32_runs(family):
        assert got.dtype == want.dtype and got.shape == want.shape, (name, key, got, want)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{name} {key}")
        seen += 1
    assert seen


def _neighbours(n):
    return ROW[COLPTR[n]:COLPTR[n + 1]], EIDS[COLPTR[n]:COLPTR[n + 1]]


@pytest.mark.parametrize("op", ["graph_sample_neighbors", "weighted_sample_neighbors"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_sampled_neighbours_are_distinct_real_neighbours(op, k):
    x = np.array([0, 2, 3, 4, 2])
    if op == "graph_sample_neighbors":
        ins = {"Row": [ROW], "Col_Ptr": [COLPTR], "X": [x], "Eids": [EIDS]}
        out, cnt, eid = "Out", "Out_Count", "Out_Eids"
        attrs = {"sample_size": k, "return_eids": True, "flag_perm_buffer": False}
    else:
        w = np.linspace(0.5, 2, 13).astype(np.float32)
        ins = {"row": [ROW], "colptr": [COLPTR], "edge_weight": [w], "input_nodes": [x], "eids": [EIDS]}
        out, cnt, eid = "out_neighbors", "out_count", "out_eids"
        attrs = {"sample_size": k, "return_eids": True}
    for _ in range(20):
        r = run(op, ins, attrs)
        assert r[cnt].dtype == np.int32
        deg = np.diff(COLPTR)[x]
        np.testing.assert_array_equal(r[cnt], np.minimum(deg, k))
        starts = np.concatenate([[0], np.cumsum(r[cnt])])
        for j, n in enumerate(x):
            got, got_e = r[out][starts[j]:starts[j + 1]], r[eid][starts[j]:starts[j + 1]]
            nb, ne = _neighbours(n)
            assert len(set(got_e.tolist())) == got_e.size  # no edge twice
            assert set(got_e.tolist()) <= set(ne.tolist())
            np.testing.assert_array_equal(got, ROW[got_e - 100])  # the eid goes with its neighbour
            if deg[j] <= k:
                np.testing.assert_array_equal(got, nb)  # all, in order


def test_uniform_sampling_is_uniform():
    ins = {"Row": [ROW], "Col_Ptr": [COLPTR], "X": [np.full(4000, 2)], "Eids": [EIDS]}
    r = run("graph_sample_neighbors", ins, {"sample_size": 2, "return_eids": True})
    freq = np.bincount(r["Out_Eids"] - 106, minlength=4) / 8000
    np.testing.assert_allclose(freq, 0.25, atol=0.03)
    first = r["Out_Eids"][::2]
    np.testing.assert_allclose(np.bincount(first - 106, minlength=4) / 4000, 0.25, atol=0.03)


def test_weighted_sampling_follows_weights():
    # node 2's four edges weighted 1, 2, 3, 4: one draw picks edge e with probability w_e / 10
    w = np.ones(13, np.float32)
    w[6:10] = [1, 2, 3, 4]
    ins = {"row": [ROW], "colptr": [COLPTR], "edge_weight": [w], "input_nodes": [np.full(8000, 2)],
           "eids": [EIDS]}
    r = run("weighted_sample_neighbors", ins, {"sample_size": 1, "return_eids": True})
    freq = np.bincount(r["out_eids"] - 106, minlength=4) / 8000
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.3, 0.4], atol=0.025)


def test_sample_size_minus_one_returns_every_neighbour():
    r = run("graph_sample_neighbors", {"Row": [ROW], "Col_Ptr": [COLPTR], "X": [np.array([2, 0])], "Eids": [EIDS]},
            {"sample_size": -1, "return_eids": True})
    np.testing.assert_array_equal(r["Out"], np.concatenate([_neighbours(2)[0], _neighbours(0)[0]]))
    np.testing.assert_array_equal(r["Out_Count"], [4, 3])
    with pytest.raises(ExecutionError, match="sample_size"):
        run("graph_sample_neighbors", {"Row": [ROW], "Col_Ptr": [COLPTR], "X": [np.array([2])]},
            {"sample_size": -2})


def test_sample_errors():
    with pytest.raises(ExecutionError, match="node ids"):
        run("graph_sample_neighbors", {"Row": [ROW], "Col_Ptr": [COLPTR], "X": [np.array([5])]}, {"sample_size": 2})
    with pytest.raises(ExecutionError, match="int32/int64"):
        run("graph_sample_neighbors", {"Row": [ROW], "Col_Ptr": [COLPTR], "X": [np.array([1.0])]},
            {"sample_size": 2})
    with pytest.raises(ExecutionError, match="Neighbors must be int64"):
        run("graph_reindex", {"X": [np.array([1])], "Neighbors": [np.array([2], np.int32)],
                              "Count": [np.array([1], np.int32)]}, {})
    with pytest.raises(ExecutionError, match="Count must be int32"):
        run("graph_reindex", {"X": [np.array([1], np.int32)], "Neighbors": [np.array([2], np.int32)],
                              "Count": [np.array([1])]}, {})
    with pytest.raises(ExecutionError, match="Count"):
        run("graph_reindex", {"X": [np.array([1])], "Neighbors": [np.array([2])],
                              "Count": [np.array([2], np.int32)]}, {})


def test_reindex_is_a_consistent_renumbering():
    rng = np.random.default_rng(3)
    x = rng.permutation(50)[:10]
    count = rng.integers(0, 5, 10).astype(np.int32)
    nb = rng.integers(0, 60, count.sum())
    r = run("graph_reindex", {"X": [x], "Neighbors": [nb], "Count": [count]}, {})
    nodes = r["Out_Nodes"]
    assert len(set(nodes.tolist())) == nodes.size
    np.testing.assert_array_equal(nodes[:10], x)
    np.testing.assert_array_equal(nodes[r["Reindex_Src"]], nb)
    np.testing.assert_array_equal(nodes[r["Reindex_Dst"]], np.repeat(x, count))


def test_khop_layers():
    """Two layers: every edge is a real edge, counts are min(degree, k), the second layer samples the
    first layer's new neighbours (sorted), and the reindexing is consistent."""
    x = np.array([0, 2, 4])
    for _ in range(10):
        r = run("graph_khop_sampler", {"Row": [ROW], "Col_Ptr": [COLPTR], "X": [x], "Eids": [EIDS]},
                {"sample_sizes": [2, 1], "return_eids": True})
        nodes = r["Sample_Index"]
        src, dst = nodes[r["Out_Src"].reshape(-1)], nodes[r["Out_Dst"].reshape(-1)]
        np.testing.assert_array_equal(src, ROW[r["Out_Eids"] - 100])  # a real edge src -> dst
        for s, d, e in zip(src, dst, r["Out_Eids"]):
            assert COLPTR[d] <= e - 100 < COLPTR[d + 1]
        np.testing.assert_array_equal(nodes[r["Reindex_X"]], x)
        n0 = np.minimum(np.diff(COLPTR)[x], 2).sum()
        layer1 = np.setdiff1d(np.unique(ROW[r["Out_Eids"][:n0] - 100]), x)
        np.testing.assert_array_equal(nodes[3:3 + layer1.size], layer1)
        assert r["Out_Eids"].size == n0 + np.minimum(np.diff(COLPTR)[layer1], 1).sum()


def test_khop_errors():
    with pytest.raises(ExecutionError, match="at least one"):
        run("graph_khop_sampler", {"Row": [ROW], "Col_Ptr": [np.array([0, 0, 13])], "X": [np.array([0])]},
            {"sample_sizes": [2]})
    with pytest.raises(ExecutionError, match="sample_sizes"):
        run("graph_khop_sampler", {"Row": [ROW], "Col_Ptr": [COLPTR], "X": [np.array([0])]}, {"sample_sizes": [-1]})


# --------------------------------------------------------------------------
# tdm
# --------------------------------------------------------------------------
TRAVEL = np.array([[1, 3], [1, 4], [2, 5], [2, 0]], np.int32)
LAYER = np.array([1, 2, 3, 4, 5, 6], np.int32)


def test_tdm_sampler_global_generator_invariants():
    """Seed 0 (Paddle's global generator): negatives are distinct nodes of the layer, never the positive."""
    x = np.repeat(np.arange(4), 50).reshape(-1, 1)
    attrs = {"output_positive": True, "neg_samples_num_list": [1, 3], "layer_offset": [0, 2, 6], "seed": 0,
             "dtype": 3}
    r = run("tdm_sampler", {"X": [x], "Travel": [TRAVEL], "Layer": [LAYER]}, attrs)
    out, lab, mask = r["Out"], r["Labels"], r["Mask"]
    assert out.dtype == np.int64 and out.shape == (200, 6)
    for row, xid in zip(range(200), x.reshape(-1)):
        pos0, pos1 = TRAVEL[xid]
        assert out[row, 0] == pos0 and lab[row, 0] == 1 and out[row, 1] in (1, 2) and out[row, 1] != pos0
        if pos1 == 0:
            assert not out[row, 2:].any() and not mask[row, 2:].any()
        else:
            negs = out[row, 3:]
            assert out[row, 2] == pos1 and len(set(negs.tolist())) == 3 and pos1 not in negs
            assert set(negs.tolist()) <= {3, 4, 5, 6} and mask[row].all()
    # every other node of layer 1 shows up as a negative
    assert set(out[:150, 3:].reshape(-1).tolist()) == {3, 4, 5, 6}


def test_tdm_errors():
    attrs = {"output_positive": True, "neg_samples_num_list": [2, 2], "layer_offset": [0, 2, 6], "seed": 1,
             "dtype": 2}
    with pytest.raises(ExecutionError, match="Neg sample nums"):
        run("tdm_sampler", {"X": [np.array([[0]])], "Travel": [TRAVEL], "Layer": [LAYER]}, attrs)
    with pytest.raises(ExecutionError, match="wrong type"):
        run("tdm_child", {"X": [np.array([1.0])], "TreeInfo": [np.zeros((3, 5), np.int32)]},
            {"child_nums": 2, "dtype": 2})
    with pytest.raises(ExecutionError, match="expected >= 0"):
        run("tdm_child", {"X": [np.array([3])], "TreeInfo": [np.zeros((3, 5), np.int32)]},
            {"child_nums": 2, "dtype": 2})
