"""Options beyond Paddle's pass (issue: unconnected inputs, empty inputs, stop edges)."""
from __future__ import annotations

import numpy as np
import pytest

import pybackward
from pybackward.interpreter.executor import Executor, Scope


def _program():
    """loss = mean(x * w); z is declared but unused; ids = cast(x) feeds an embedding."""
    p = pybackward.Program()
    b = p.global_block()
    b.create_var("x", [-1, 3], "float32")
    b.create_var("z", [-1, 5], "float32")
    b.create_var("w", [3], "float32", persistable=True, is_parameter=True)
    b.create_var("xw", [-1, 3], "float32")
    b.create_var("loss", [], "float32")
    b.append_op("elementwise_mul", {"X": ["x"], "Y": ["w"]}, {"Out": ["xw"]}, {"axis": -1, "op_role": 0})
    b.append_op("reduce_mean", {"X": ["xw"]}, {"Out": ["loss"]},
                {"dim": [], "keep_dim": False, "reduce_all": True, "in_dtype": -1, "out_dtype": -1,
                 "op_role": 0})
    return p


def _run(p, fetch):
    scope = Scope()
    scope.set("w", np.array([1.0, 2.0, 3.0], np.float32))
    feed = {"x": np.ones((2, 3), np.float32), "z": np.ones((4, 5), np.float32)}
    return Executor().run(p, feed=feed, fetch_list=fetch, scope=scope)


def test_unconnected_none_is_paddles_default():
    p = _program()
    gx, gz = pybackward.gradients(["loss"], ["x", "z"], program=p)
    assert gx.name == "x@GRAD" and gz is None


def test_unconnected_zero_has_the_inputs_own_shape_and_dtype():
    p = _program()
    gx, gz = pybackward.gradients(["loss"], ["x", "z"], program=p, unconnected="zero")
    assert gz.name == "z@GRAD" and gz.shape == (-1, 5) and gz.dtype == np.float32
    vx, vz = _run(p, [gx.name, gz.name])
    np.testing.assert_allclose(vx, np.tile([1, 2, 3], (2, 1)) / 6, rtol=1e-6)
    assert vz.shape == (4, 5) and vz.dtype == np.float32 and not vz.any()


def test_unconnected_error_names_the_inputs_and_leaves_the_program():
    p = _program()
    before = pybackward.dumps(p)
    with pytest.raises(pybackward.ArgumentError, match="the targets do not depend on 'z'"):
        pybackward.gradients(["loss"], ["x", "z"], program=p, unconnected="error")
    assert pybackward.dumps(p) == before


def test_empty_inputs_appends_the_backward_and_returns_nothing():
    """As Paddle's gradients(loss, []) (test_backward.py; replayed op for op in
    tests/backward/test_backward_replay.py)."""
    p = _program()
    n = len(p.global_block().ops)
    assert pybackward.gradients(["loss"], [], program=p) == []
    assert len(p.global_block().ops) > n
    with pytest.raises(pybackward.ArgumentError, match="unconnected must be one of"):
        pybackward.gradients(["loss"], ["x"], program=_program(), unconnected="maybe")


def _embedding_program():
    """ids = cast(x -> int64) (not stop_gradient), emb = lookup_table_v2(ids, W), loss = mean(emb)."""
    p = pybackward.Program()
    b = p.global_block()
    b.create_var("x", [4], "float32")
    b.create_var("ids", [4], "int64")
    b.create_var("W", [10, 2], "float32", persistable=True, is_parameter=True)
    b.create_var("emb", [4, 2], "float32")
    b.create_var("loss", [], "float32")
    b.append_op("cast", {"X": ["x"]}, {"Out": ["ids"]}, {"in_dtype": 5, "out_dtype": 3, "op_role": 0})
    b.append_op("lookup_table_v2", {"Ids": ["ids"], "W": ["W"]}, {"Out": ["emb"]},
                {"padding_idx": -1, "op_role": 0})
    b.append_op("reduce_mean", {"X": ["emb"]}, {"Out": ["loss"]},
                {"dim": [], "keep_dim": False, "reduce_all": True, "in_dtype": -1, "out_dtype": -1,
                 "op_role": 0})
    return p


def test_stop_edges_keeps_integer_ids_off_the_path():
    from pybackward.analysis.path import find_op_path
    p = _embedding_program()
    b = p.global_block()
    loss = b.var("loss")
    assert [op.type for op in find_op_path(b, [loss], [], set(), {})] == ["cast", "lookup_table_v2", "reduce_mean"]
    assert [op.type for op in find_op_path(b, [loss], [], set(), {}, stop_edges=True)] == \
        ["lookup_table_v2", "reduce_mean"]
    pairs = pybackward.append_backward("loss", program=p, stop_edges=True)
    types = [op.type for op in b.ops]
    assert [(a.name, g.name) for a, g in pairs] == [("W", "W@GRAD")]
    assert types.count("cast") == 1  # no grad cast for the int ids
    assert "x@GRAD" not in b.vars and "ids@GRAD" not in b.vars
