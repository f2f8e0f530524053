"""class_center_sample, dgc_clip_by_norm, dgc_momentum, set, sparse_momentum and
the SelectedRows ops (ops/dist/class_center_sample.py) beyond tests/ops/test_kernels_vs_paddle.py:
float32 runs of samples Paddle registers for float32 only, unseeded draws by
invariants, Paddle's values for SelectedRows inputs (from
testdata/kernels/probe_k4-graph.py) on their dense equivalents, errors."""
from __future__ import annotations

import numpy as np
import pytest

from pybackward.base.errors import ExecutionError
from pybackward.ops import registry
from pybackward.ops.registry import Call
from test_graph_sampling_tdm import float32_runs, run


def test_float32_runs_equal_paddle():
    seen = set()
    for name, key, got, want in float32_runs("sparse_misc"):
        assert got.dtype == want.dtype and got.shape == want.shape, (name, key, got, want)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7, err_msg=f"{name} {key}")
        seen.add(name.rsplit("-", 1)[0])
    assert seen == {"dgc_clip_by_norm", "dgc_momentum", "class_center_sample"}


def test_class_center_sample_unseeded():
    label = np.array([3, 8, 3, 1, 15, 9])
    for fix_seed in (False, True):  # Paddle: std::random_device, or its global generator (seed 0)
        r = run("class_center_sample", {"Label": [label]},
                {"num_classes": 40, "num_samples": 12, "fix_seed": fix_seed, "seed": 0})
        centres = r["SampledLocalClassCenter"]
        assert centres.dtype == np.int64 and centres.size == 12 and len(set(centres.tolist())) == 12
        np.testing.assert_array_equal(centres[:5], [1, 3, 8, 9, 15])
        assert centres.min() >= 0 and centres.max() < 40
        np.testing.assert_array_equal(centres[r["RemappedLabel"]], label)


def test_class_center_sample_errors():
    for attrs in ({"num_classes": 5, "num_samples": 6}, {"num_classes": 0, "num_samples": 1}):
        with pytest.raises(ExecutionError, match="num_samples"):
            run("class_center_sample", {"Label": [np.array([1])]}, attrs)
    with pytest.raises(ExecutionError, match="1-D"):
        run("class_center_sample", {"Label": [np.array([[1]])]}, {"num_classes": 5, "num_samples": 2})


def test_dgc_momentum_needs_ranks():
    p = np.ones((2, 2), np.float32)
    ins = {"Param": [p], "Grad": [p], "Velocity": [p], "LearningRate": [np.array([0.1], np.float32)],
           "current_step": [np.array([5.0], np.float32)], "nranks": [np.array([1.0], np.float32)]}
    with pytest.raises(ExecutionError, match="nranks=1"):
        run("dgc_momentum", ins, {"mu": 0.9, "rampup_begin_step": 1.0})


def test_set_view_and_bounds():
    src = np.arange(12, dtype=np.float32)
    x = np.zeros((2, 3), np.float32)
    # views Paddle's legacy fetch reads wrongly (it copies numel elements from the offset only): the true view
    r = run("set", {"x": [x], "source": [src]}, {"dims": [3], "stride": [4], "offset": 0})
    np.testing.assert_array_equal(r["out"], [0, 4, 8])
    r = run("set", {"x": [x], "source": [src]}, {"dims": [2, 2], "stride": [3, 1], "offset": 4})
    np.testing.assert_array_equal(r["out"], [[1, 2], [4, 5]])
    with pytest.raises(ExecutionError, match="reaches past"):
        run("set", {"x": [x], "source": [src]}, {"dims": [4], "stride": [4], "offset": 0})
    with pytest.raises(ExecutionError, match="multiple of 4"):
        run("set", {"x": [x], "source": [src]}, {"dims": [2], "stride": [1], "offset": 2})


def test_sparse_momentum_is_momentum_on_the_scattered_gradient():
    rng = np.random.default_rng(0)
    p, v = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    g = rng.standard_normal((4, 3))
    idx = np.array([4, 1, 4, 7])  # 7 is no row of Param: Paddle's search never finds it
    r = run("sparse_momentum", {"Param": [p], "Grad": [g], "Velocity": [v], "Index": [idx],
                                "LearningRate": [np.array([0.5])]}, {"mu": 0.9})
    dense = np.zeros_like(p)
    dense[4] = g[0] + g[2]
    dense[1] = g[1]
    v_out = 0.9 * v + dense
    np.testing.assert_allclose(r["VelocityOut"], v_out)
    np.testing.assert_allclose(r["ParamOut"], p - 0.5 * v_out)
    with pytest.raises(ExecutionError, match="empty"):
        run("sparse_momentum", {"Param": [p], "Grad": [g], "Velocity": [v], "Index": [np.zeros(0, np.int64)],
                                "LearningRate": [np.array([0.5])]}, {"mu": 0.9})


def _dense(rows, height, value):
    out = np.zeros((height, value.shape[1]), value.dtype)
    np.add.at(out, rows, value)
    return out


def test_selected_rows_ops_on_dense_equivalents():
    """Paddle (probe_k4-graph.txt) on the SelectedRows height 6, rows [4, 1, 4, 0], value arange(8) as 4x2:
    merge_selected_rows gives rows [0, 1, 4] with [[6, 7], [2, 3], [4, 6]]; get_tensor_from_selected_rows
    gives the value. pybackward holds the SelectedRows as its dense equivalent: both ops keep it, and the
    dense equivalents of Paddle's results are what they return."""
    value = np.arange(8, dtype=np.float32).reshape(4, 2)
    dense = _dense([4, 1, 4, 0], 6, value)
    def run(op, ins, attrs):  # no grad maker to build: call the kernel
        return registry.get(op).kernel(Call(op, ins, attrs, {"Out": ["out"]}))
    merged = run("merge_selected_rows", {"X": [dense]}, {})["Out"]
    np.testing.assert_array_equal(merged, _dense([0, 1, 4], 6, np.array([[6, 7], [2, 3], [4, 6]], np.float32)))
    got = run("get_tensor_from_selected_rows", {"X": [dense]}, {})["Out"]
    np.testing.assert_array_equal(got, dense)
    # what programs read from it (gradient clipping's squared norm) is the same on both forms
    assert np.sum(np.square(got)) != np.sum(np.square(value))  # unmerged rows: only the merged form agrees
    np.testing.assert_allclose(np.sum(np.square(got)), np.sum(np.square(np.array([[6, 7], [2, 3], [4, 6]]))))
    assert registry.get("merge_selected_rows").kernel is not None
