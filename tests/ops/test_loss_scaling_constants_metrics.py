"""Ops of pybackward/ops/optim/loss_scaling.py the Paddle comparison cannot cover.

(Values here were read from Paddle 3.3.1 where noted; the other samples of
the family are compared with Paddle by tests/ops/test_kernels_vs_paddle.py.)
"""
from __future__ import annotations

import numpy as np
import pytest

from pybackward.base import dtypes
from pybackward.ops import opcheck


def _run(op, ins, attrs, outs):
    return opcheck.run_kernel(op, ins, attrs, {s: [f"{s}{i}" for i in range(n)] for s, n in outs.items()})


def test_check_finite_and_unscale_with_an_inf():
    """Paddle 3.3.1 (float32): the tensor holding the inf and every later one
    become X * 0 - NaN where X is inf - the earlier ones are unscaled."""
    a = np.array([[2.0, -4.0]], np.float32)
    b = np.array([-1.0, 2.0, np.inf, -3.0, 4.0], np.float32)
    c = np.array([5.0, 6.0], np.float32)
    out = _run("check_finite_and_unscale", {"X": [a, b, c], "Scale": [np.array([2.0], np.float32)]}, {},
               {"Out": 3, "FoundInfinite": 1})
    np.testing.assert_array_equal(out["Out"][0], a / 2)
    np.testing.assert_array_equal(out["Out"][1], [-0.0, 0.0, np.nan, -0.0, 0.0])
    assert np.signbit(out["Out"][1][0]) and not np.signbit(out["Out"][1][1])
    np.testing.assert_array_equal(out["Out"][2], [0.0, 0.0])
    assert out["FoundInfinite"][0].tolist() == [True] and out["Out"][1].dtype == np.float32


def test_full_int_array():
    """(Paddle 3.3.1's legacy executor crashes on a one-op program with it.)"""
    out = _run("full_int_array", {}, {"value": [3, -1, 4], "dtype": dtypes.VarType.INT64}, {"out": 1})
    assert out["out"][0].dtype == np.int64 and out["out"][0].tolist() == [3, -1, 4]
    out = _run("full_int_array", {}, {"value": [7], "dtype": dtypes.VarType.INT32}, {"out": 1})
    assert out["out"][0].dtype == np.int32 and out["out"][0].tolist() == [7]


def test_nop_passes_its_inputs_through():
    xs = [np.arange(3.0), np.ones((2, 2), np.int64)]
    out = _run("nop", {"X": xs}, {}, {"Out": 2})
    for got, want in zip(out["Out"], xs):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype


def test_empty_has_the_shape_and_dtype_asked_for():
    out = _run("empty", {}, {"shape": [2, 0, 3], "dtype": dtypes.VarType.INT32}, {"Out": 1})["Out"][0]
    assert out.shape == (2, 0, 3) and out.dtype == np.int32
    out = _run("empty", {"ShapeTensor": [np.array([4, 2], np.int64)]}, {"shape": [], "dtype": dtypes.VarType.FP64},
               {"Out": 1})["Out"][0]
    assert out.shape == (4, 2) and out.dtype == np.float64


def test_edit_distance_equals_the_textbook_table():
    rng = np.random.default_rng(3)

    def textbook(h, r):
        d = [[i + j if i * j == 0 else 0 for j in range(len(r) + 1)] for i in range(len(h) + 1)]
        for i in range(1, len(h) + 1):
            for j in range(1, len(r) + 1):
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (h[i - 1] != r[j - 1]))
        return d[-1][-1]
    for _ in range(30):
        m, n = rng.integers(1, 9, 2)
        h, r = rng.integers(0, 3, (1, m)), rng.integers(0, 3, (1, n))
        out = _run("edit_distance", {"Hyps": [h], "Refs": [r], "HypsLength": [np.array([m])],
                                     "RefsLength": [np.array([n])]}, {"normalized": False},
                   {"Out": 1, "SequenceNum": 1})
        assert out["Out"][0][0, 0] == textbook(h[0].tolist(), r[0].tolist())


def test_check_numerics_with_nan_and_inf():
    """Values read from Paddle 3.3.1: levels >= 1 report, level 0 raises."""
    from pybackward.base.errors import ExecutionError
    x = np.array([1.0, np.nan, 0.0, np.inf, -2.0, 0.0], np.float32)
    attrs = {"op_type": "x", "var_name": "v", "stack_height_limit": -1, "output_dir": ""}
    out = _run("check_numerics", {"tensor": [x]}, dict(attrs, check_nan_inf_level=1), {"stats": 1, "values": 1})
    assert out["stats"][0].tolist() == [1, 1, 2]
    np.testing.assert_array_equal(out["values"][0], np.array([np.inf, -2.0, np.nan], np.float32))
    out = _run("check_numerics", {"tensor": [np.array([1.0, -np.inf], np.float32)]},
               dict(attrs, check_nan_inf_level=2), {"stats": 1, "values": 1})
    assert out["stats"][0].tolist() == [0, 1, 0]
    np.testing.assert_array_equal(out["values"][0], np.array([1.0, -np.inf, -np.inf], np.float32))
    import pytest
    with pytest.raises(ExecutionError, match="NaN or inf"):
        _run("check_numerics", {"tensor": [x]}, dict(attrs, check_nan_inf_level=0), {"stats": 1, "values": 1})


def test_data_op_passes_the_fed_value_through():
    import pybackward
    from pybackward.base import attrs as pattrs
    from pybackward._proto import framework_pb2 as pb
    from pybackward.base.errors import ExecutionError
    from pybackward.interpreter.executor import Executor
    prog = pb.ProgramDesc()
    block = prog.blocks.add(idx=0, parent_idx=-1)
    for name in ("x", "y"):
        v = block.vars.add(name=name)
        v.type.type = pb.VarType.DENSE_TENSOR
        v.type.dense_tensor.tensor.data_type = pb.VarType.FP32
        v.type.dense_tensor.tensor.dims.extend([2, 3])
    op = block.ops.add(type="data")
    op.outputs.add(parameter="out", arguments=["x"])
    for k, val in {"name": "x", "shape": [2, 3], "dtype": dtypes.VarType.FP32, "place": 0}.items():
        pattrs.encode(op.attrs.add(), k, val)
    op = block.ops.add(type="scale")
    op.inputs.add(parameter="X", arguments=["x"])
    op.outputs.add(parameter="Out", arguments=["y"])
    pattrs.encode(op.attrs.add(), "scale", 2.0)
    program = pybackward.loads(prog.SerializeToString())
    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    (out,) = Executor().run(program, feed={"x": v}, fetch_list=["y"])
    np.testing.assert_array_equal(out, 2 * v)
    with pytest.raises(ExecutionError, match="was not fed"):
        Executor().run(program, feed={}, fetch_list=["y"])
