"""Kernel cases the registry-wide tests cannot hold, against Paddle 3.3.1's values.

median / nanmedian on tied values (the index output and the gradient follow
Paddle's libstdc++ nth_element order), on integers (C++ division) and with
NaNs (NaN outputs, which finite differences cannot check). The Paddle values
were taken by testdata/kernels/median_probe.py (dygraph, CPU) and are stored
in testdata/kernels/median_ties.ref.json.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from pybackward.ops import opcheck
from conftest import TESTDATA

REF = json.loads((TESTDATA / "kernels" / "median_ties.ref.json").read_text())
TIED = np.array([[3., 1, 2, 5], [4, 4, 1, 0], [2, 7, 2, 9]]) + 0.25
ALLN = np.array([[1., np.nan, 3, 2], [np.nan] * 4, [5, 1, np.nan, np.nan]])
CASES = {
    "tied-all-avg": (TIED, [], False, "avg"),
    "tied-1-avg": (TIED, [1], False, "avg"),
    "tied-1-min": (TIED, [1], True, "min"),
    "tiedT-0-avg": (TIED.T.copy(), [0], False, "avg"),
    "int64-avg": (np.array([[3, 1, 2, 6], [-3, -2, 5, 1]], np.int64), [1], False, "avg"),
    "int32-min": (np.array([[3, 1, 2], [-3, -2, 5]], np.int32), [0], True, "min"),
    "nan-avg": (ALLN, [1], False, "avg"),
    "nan-min": (ALLN, [1], False, "min"),
    "allnan-avg": (np.full((2, 3), np.nan), [1], False, "avg"),
    "nan3-min": (np.array([[1., np.nan, 3], [2, 5, 4]]), [1], False, "min"),
}


def _run(op, x, axis, keepdim, mode):
    xs, o, m, og, g = ("x", "out", "medians", "out@GRAD", "x@GRAD") if op == "median" else \
        ("X", "Out", "MedianIndex", "Out@GRAD", "X@GRAD")
    attrs = {"axis": axis, "keepdim": keepdim, "mode": mode}
    outs = opcheck.run_kernel(op, {xs: [x]}, attrs, {o: ["o"], m: ["m"]})
    out, idx = outs[o][0], outs[m][0]
    grad = None
    if x.dtype.kind == "f":
        cot = np.arange(1, out.size + 1, dtype=x.dtype).reshape(out.shape)
        ins = {xs: [x], o: [out], m: [idx], og: [cot]}
        grad = opcheck.run_kernel(op + "_grad", ins, attrs, {g: ["g"]})[g][0]
    return out, idx, grad


@pytest.mark.parametrize("key", sorted(REF))
def test_median_matches_paddle(key):
    op, case = key.split("-", 1)
    x, axis, keepdim, mode = CASES[case]
    ref = REF[key]
    out, idx, grad = _run(op, x, axis, keepdim, mode)
    assert str(out.dtype) == ref["odtype"]
    np.testing.assert_array_equal(out, np.array(ref["out"], dtype=out.dtype))
    np.testing.assert_array_equal(idx, np.array(ref["idx"]))
    if grad is not None and "grad" in ref:
        np.testing.assert_allclose(grad, np.array(ref["grad"]), rtol=1e-12)


def _paddle_float32(family: str, case: str):
    """Paddle's float32 values for a sample whose float64 run Paddle refused."""
    kdir = TESTDATA / "kernels"
    arrays = dict(np.load(kdir / f"{family}.samples.npz"))
    cases = {c["case"]: c for c in json.loads((kdir / f"{family}.samples.json").read_text())}
    ref = dict(np.load(kdir / f"{family}.paddle.npz"))
    return cases[case], arrays, {k.split("|", 2)[2]: v for k, v in ref.items() if k.startswith(f"{case}|float32|")}


@pytest.mark.parametrize("case", ["linear_v2-0", "linear_v2-1"])
def test_linear_v2_float32_matches_paddle(case):
    meta, arrays, ref = _paddle_float32("misc_extra", case)
    ins = {s: [arrays[f"{case}|in|{s}|{i}"].astype(np.float32) for i in range(n)] for s, n in meta["inputs"].items()}
    out = opcheck.run_kernel("linear_v2", ins, meta["attrs"], {"out": ["o"]})["out"][0]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, ref["out|out|0"], rtol=1e-5, atol=1e-5)
    g = arrays[f"{case}|cot|out|0"].astype(np.float32)
    grads = opcheck.run_kernel("linear_v2_grad", {**ins, "out@GRAD": [g]}, meta["attrs"],
                               {"input@GRAD": ["a"], "weight@GRAD": ["b"], "bias@GRAD": ["c"]})
    for slot in ("input", "weight", "bias"):
        np.testing.assert_allclose(grads[slot + "@GRAD"][0], ref[f"grad|{slot}|0"], rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------
# random_more: exact values where Paddle seeds its engine, distributions where
# it draws from its global generator (testdata/kernels/random_more_probe.py)
# --------------------------------------------------------------------------
RND = json.loads((TESTDATA / "kernels" / "random_more.ref.json").read_text())


def _run1(op, ins, attrs, outs, seed=0):
    return opcheck.run_kernel(op, ins, attrs, {s: [s] for s in outs}, np.random.default_rng(seed))


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_seeded_inplace_fills_equal_paddle(dt):
    x = np.zeros((2, 5), dt)
    u = _run1("uniform_random_inplace", {"X": [x]}, {"min": -1.0, "max": 2.0, "seed": 7}, ["Out"])["Out"][0]
    assert u.dtype == x.dtype
    np.testing.assert_array_equal(u, np.array(RND[f"uniform_inplace|{dt}"], dt))
    g = _run1("gaussian_inplace", {"x": [x]}, {"mean": 1.0, "std": 2.0, "seed": 7}, ["out"])["out"][0]
    np.testing.assert_allclose(g, np.array(RND[f"gaussian_inplace|{dt}"], dt), rtol=0, atol=0 if dt == "float64" else 1e-6)


def test_rrelu_matches_paddle():
    x = np.linspace(-2, 2, 9)
    attrs = {"lower": 0.1, "upper": 0.3, "is_test": True}
    outs = _run1("rrelu", {"X": [x]}, attrs, ["Out", "Noise"])
    np.testing.assert_array_equal(outs["Out"][0], RND["rrelu_test"]["out"])
    g = _run1("rrelu_grad", {"X": [x], "Noise": outs["Noise"], "Out@GRAD": [np.arange(1.0, 10.0)]}, attrs,
              ["X@GRAD"])["X@GRAD"][0]
    np.testing.assert_array_equal(g, RND["rrelu_test"]["grad"])
    attrs["is_test"] = False
    noise = -_run1("rrelu", {"X": [np.full(20000, -1.0)]}, attrs, ["Out", "Noise"])["Out"][0]
    ref = RND["rrelu_train"]
    assert ref["grad_equals_noise"]
    assert 0.1 <= noise.min() and noise.max() < 0.3 and abs(noise.mean() - ref["mean"]) < 0.005


def test_global_generator_distributions_match_paddle():
    a = _run1("exponential", {"X": [np.zeros(50000)]}, {"lambda": 2.0}, ["Out"])["Out"][0]
    ref = RND["exponential"]
    assert a.min() > 0 and abs(a.mean() - ref["mean"]) < 0.01 and abs(a.var() - ref["var"]) < 0.01
    a = _run1("poisson", {"X": [np.full(50000, 3.5)]}, {}, ["Out"])["Out"][0]
    ref = RND["poisson"]
    assert a.dtype == np.float64 and np.all(a == np.round(a))
    assert abs(a.mean() - ref["mean"]) < 0.05 and abs(a.var() - ref["var"]) < 0.1
    for dt, lo, hi in (("float32", 0, 5), ("int64", -3, 2)):
        a = _run1("random", {"x": [np.zeros(20000, dt)]}, {"from": lo, "to": hi}, ["out"])["out"][0]
        ref = RND[f"random|{dt}"]
        v, cnt = np.unique(a, return_counts=True)
        assert str(a.dtype) == ref["dtype"] and v.tolist() == ref["values"]
        assert np.all(np.abs(cnt - np.array(ref["counts"])) < 250)


def test_gumbel_softmax_against_paddle():
    ref = RND["gumbel_soft_T0.5"]
    out, cot = np.array(ref["out"]), np.array(ref["cot"])
    attrs = {"temperature": 0.5, "hard": False, "axis": -1}
    g = _run1("gumbel_softmax_grad", {"Out": [out], "Out@GRAD": [cot]}, attrs, ["X@GRAD"])["X@GRAD"][0]
    # Paddle's grad is the softmax grad of Out without 1/temperature (docs/deviations.md)
    np.testing.assert_allclose(g * 0.5, ref["grad"], rtol=1e-9, atol=1e-12)
    hard = _run1("gumbel_softmax", {"X": [np.zeros((5000, 3))]}, {"temperature": 1.0, "hard": True, "axis": -1},
                 ["Out"])["Out"][0]
    assert RND["gumbel_hard"]["row_sums_one"] and np.all(hard.sum(1) == 1)
    assert np.all(np.abs(hard.mean(0) - np.array(RND["gumbel_hard"]["freq"])) < 0.04)


@pytest.mark.parametrize("seed,seed_out", [(5, 84035), (0, 16807), (123456789, 469049721)])
def test_shuffle_batch_like_paddle(seed, seed_out):
    """SeedOut as Paddle 3.3.1 gives it (probed); the permutation is a
    derangement (Paddle draws it from std::random_device) and Out[idx] = X."""
    x = np.arange(12.).reshape(6, 2)
    outs = _run1("shuffle_batch", {"X": [x], "Seed": [np.array([seed], np.int64)]}, {"startup_seed": 3},
                 ["Out", "ShuffleIdx", "SeedOut"], seed=seed)
    idx = outs["ShuffleIdx"][0]
    assert outs["SeedOut"][0].tolist() == [seed_out] and outs["SeedOut"][0].dtype == np.int64
    assert sorted(idx.tolist()) == list(range(6)) and not np.any(idx == np.arange(6))
    np.testing.assert_array_equal(outs["Out"][0][idx], x)


# --------------------------------------------------------------------------
# strided views (Paddle's legacy executor has no kernel for as_strided and
# index_select_strided; these are its dygraph values, strided_probe.py)
# --------------------------------------------------------------------------
STR = json.loads((TESTDATA / "kernels" / "strided.ref.json").read_text())
X34 = np.arange(12.).reshape(3, 4)


@pytest.mark.parametrize("key,dims,stride,offset", [("t", [4, 3], [1, 4], 0), ("sub", [2, 2], [4, 2], 8),
                                                    ("overlap", [3, 3], [1, 1], 8)])
def test_as_strided_matches_paddle(key, dims, stride, offset):
    attrs = {"dims": dims, "stride": stride, "offset": offset}
    ref = STR["as_strided|" + key]
    out = _run1("as_strided", {"input": [X34]}, attrs, ["out"])["out"][0]
    np.testing.assert_array_equal(out, ref["out"])
    cot = np.arange(1.0, 1.0 + np.prod(dims)).reshape(dims)
    g = _run1("as_strided_grad", {"input": [X34], "out@GRAD": [cot]}, attrs, ["input@GRAD"])["input@GRAD"][0]
    if key == "overlap":  # Paddle copies Out@GRAD in (the last write wins); the gradient sums (deviations.md)
        np.testing.assert_array_equal(g.reshape(-1)[1:6], [1, 2 + 4, 3 + 5 + 7, 6 + 8, 9])
        assert np.asarray(ref["grad"]).reshape(-1)[1:6].tolist() == [1, 4, 7, 8, 9]
    else:
        np.testing.assert_array_equal(g, ref["grad"])


def test_as_strided_refuses_a_misaligned_offset():
    with pytest.raises(Exception, match="offset"):
        _run1("as_strided", {"input": [X34]}, {"dims": [2], "stride": [1], "offset": 1}, ["out"])


def test_index_select_strided_and_view_shape_match_paddle():
    ref = STR["index_select_strided"]
    out = _run1("index_select_strided", {"x": [X34]}, {"index": 1, "axis": 0}, ["out"])["out"][0]
    np.testing.assert_array_equal(out, ref["out"])
    g = _run1("index_select_strided_grad", {"x": [X34], "out@GRAD": [np.ones(4)]}, {"index": 1, "axis": 0},
              ["x@GRAD"])["x@GRAD"][0]
    np.testing.assert_array_equal(g, ref["grad"])
    out = _run1("view_shape", {"input": [X34]}, {"dims": [2, 6]}, ["out"])["out"][0]
    assert list(out.shape) == STR["view_shape"]["shape"]
    np.testing.assert_array_equal(out, STR["view_shape"]["out"])


@pytest.mark.parametrize("use_cvm", [True, False])
def test_cvm_matches_paddle(use_cvm):
    """cvm_grad's show/click columns are CVM itself (Paddle's design, not a
    derivative): checked against Paddle's values (testdata/kernels/cvm_probe.py)."""
    ref = json.loads((TESTDATA / "kernels" / "cvm.ref.json").read_text())
    x, cvm, cot = (np.array(ref[k]) for k in ("x", "cvm", "cot"))
    want = ref[f"use_cvm={use_cvm}"]
    y = _run1("cvm", {"X": [x], "CVM": [cvm]}, {"use_cvm": use_cvm}, ["Y"])["Y"][0]
    np.testing.assert_allclose(y, want["y"], rtol=1e-12)
    g = _run1("cvm_grad", {"X": [x], "CVM": [cvm], "Y@GRAD": [cot if use_cvm else cot[:, 2:]]},
              {"use_cvm": use_cvm}, ["X@GRAD"])["X@GRAD"][0]
    np.testing.assert_allclose(g, want["grad"], rtol=1e-12)


def test_max_min_pool_grads_on_ties_match_paddle():
    """MAX/MIN grads send Out@GRAD to every input equal to the pooled value,
    once per edge (values probed on Paddle 3.3.1, dygraph CPU)."""
    x = np.array([[1., 5.], [1., 2.], [0., 5.]])
    ids = np.array([0, 0, 0])
    for pt, out, grad in (("MAX", [[1, 5]], [[10, 20], [10, 0], [0, 20]]),
                          ("MIN", [[0, 2]], [[0, 0], [0, 20], [10, 0]])):
        attrs = {"pooltype": pt}
        o = _run1("segment_pool", {"X": [x], "SegmentIds": [ids]}, attrs, ["Out", "SummedIds"])["Out"][0]
        np.testing.assert_array_equal(o, out)
        g = _run1("segment_pool_grad", {"X": [x], "SegmentIds": [ids], "Out": [o], "Out@GRAD": [np.array([[10., 20.]])]},
                  attrs, ["X@GRAD"])["X@GRAD"][0]
        np.testing.assert_array_equal(g, grad)
    src, dst = np.array([0, 0, 1, 2]), np.array([0, 0, 0, 1])
    cot = np.array([[10., 20.], [1., 2.], [3., 4.]])
    for r, out, grad in (("MAX", [[1, 5], [0, 5], [0, 0]], [[20, 40], [10, 0], [1, 2]]),
                         ("MIN", [[1, 2], [0, 5], [0, 0]], [[20, 0], [10, 20], [1, 2]]),
                         ("MEAN", [[1, 4], [0, 5], [0, 0]], [[20 / 3, 40 / 3], [10 / 3, 20 / 3], [1, 2]])):
        ins = {"X": [x], "Src_index": [src], "Dst_index": [dst]}
        o = _run1("graph_send_recv", ins, {"reduce_op": r}, ["Out", "Dst_count"])["Out"][0]
        np.testing.assert_array_equal(o, out)
        g = _run1("graph_send_recv_grad", {**ins, "Out": [o], "Out@GRAD": [cot]}, {"reduce_op": r},
                  ["X@GRAD"])["X@GRAD"][0]
        np.testing.assert_allclose(g, grad, rtol=1e-12)
    y = np.array([[1.], [0.], [1.], [2.]])
    ins = {"X": [x], "Y": [y], "Src_index": [src], "Dst_index": [dst]}
    attrs = {"message_op": "ADD", "reduce_op": "MAX"}
    o = _run1("graph_send_ue_recv", ins, attrs, ["Out", "Dst_count"])["Out"][0]
    np.testing.assert_array_equal(o, [[2, 6], [2, 7], [0, 0]])
    gs = _run1("graph_send_ue_recv_grad", {**ins, "Out": [o], "Out@GRAD": [cot]}, attrs, ["X@GRAD", "Y@GRAD"])
    np.testing.assert_array_equal(gs["X@GRAD"][0], [[10, 20], [10, 0], [1, 2]])
    np.testing.assert_array_equal(gs["Y@GRAD"][0], [[30], [0], [10], [3]])
