"""Interpreter behaviour beyond the golden values: errors, dtypes, scopes."""
from __future__ import annotations

import numpy as np
import pytest

import pybackward
from conftest import PROGRAMS
from pybackward._proto import framework_pb2 as pb
from pybackward.base.errors import ExecutionError, ProgramFileError
from pybackward.interpreter.executor import Executor, Scope

FIT = PROGRAMS / "fit_a_line"


def _scope() -> Scope:
    s = Scope()
    for k, v in np.load(FIT / "params.npz").items():
        s.set(k, v)
    return s


def test_feed_of_wrong_shape_or_dtype_is_a_clear_error():
    prog = pybackward.load(FIT / "forward.pb")
    y = np.zeros((4, 1), np.float32)
    with pytest.raises(ExecutionError, match=r"var 'x': feed has shape \[4, 12\], the variable is declared \[-1, 13\]"):
        Executor().run(prog, feed={"x": np.zeros((4, 12), np.float32), "y": y}, scope=_scope())
    with pytest.raises(ExecutionError, match="var 'x': feed has dtype int64, the variable is float32"):
        Executor().run(prog, feed={"x": np.zeros((4, 13), np.int64), "y": y}, scope=_scope())
    with pytest.raises(ExecutionError, match="var 'nope': fed, but the program declares no such variable"):
        Executor().run(prog, feed={"nope": y}, scope=_scope())


def test_float64_feed_into_float32_var_is_cast_and_dtypes_are_kept():
    prog = pybackward.load(FIT / "backward.pb")
    feeds = dict(np.load(FIT / "feeds.npz"))
    feeds["x"] = feeds["x"].astype(np.float64)
    loss, gw = Executor().run(prog, feed=feeds, fetch_list=["mean_0.tmp_0", "fc_0.w_0@GRAD"], scope=_scope())
    assert loss.dtype == np.float32 and loss.shape == () and gw.dtype == np.float32


def test_check_nan_names_the_first_op_that_produced_one():
    prog = pybackward.load(FIT / "forward.pb")
    feeds = dict(np.load(FIT / "feeds.npz"))
    feeds["x"] = feeds["x"].copy()
    feeds["x"][0, 0] = np.inf
    scope = _scope()
    (loss,) = Executor().run(prog, feed=feeds, fetch_list=["mean_0.tmp_0"], scope=scope)
    assert not np.isfinite(loss)
    with pytest.raises(ExecutionError, match=r"block 0, op 0 \(mul\), var 'fc_0.tmp_0': produced NaN or Inf"):
        Executor(check_nan=True).run(prog, feed=feeds, fetch_list=["mean_0.tmp_0"], scope=_scope())


def test_unknown_op_has_no_kernel_error_naming_it():
    d = pb.ProgramDesc()
    d.ParseFromString((FIT / "forward.pb").read_bytes())
    d.blocks[0].ops[3].type = "dequantize"
    prog = pybackward.loads(d.SerializeToString(), source="p.pb")
    with pytest.raises(ExecutionError, match=r"p.pb: block 0, op 3 \(dequantize\): no kernel for op type "
                                             r"'dequantize' \(\d+ op types have kernels"):
        Executor().run(prog, feed=dict(np.load(FIT / "feeds.npz")), scope=_scope())


def test_persistable_values_live_in_the_scope_across_runs():
    startup = pybackward.load(FIT / "startup.pb")
    scope = Scope()
    Executor().run(startup, scope=scope)
    assert set(np.load(FIT / "params.npz")) <= set(scope.vars)
    prog = pybackward.load(FIT / "backward.pb")
    Executor().run(prog, feed=dict(np.load(FIT / "feeds.npz")), fetch_list=["mean_0.tmp_0"], scope=scope)
    assert "fc_0.tmp_0" not in scope.vars  # activations live in the run's own scope


def test_while_whose_body_never_writes_its_condition_is_rejected():
    d = pb.ProgramDesc()
    d.ParseFromString((PROGRAMS / "while_loop" / "forward.pb").read_bytes())
    wop = next(op for op in d.blocks[0].ops if op.type == "while")
    cond = next(v for v in wop.inputs if v.parameter == "Condition").arguments[0]
    sub = next(a.block_idx for a in wop.attrs if a.name == "sub_block")
    for op in d.blocks[sub].ops:
        for v in op.outputs:
            for i, a in enumerate(v.arguments):
                if a == cond:
                    v.arguments[i] = "ghost_cond"
    d.blocks[sub].vars.add().CopyFrom(next(v for v in d.blocks[0].vars if v.name == cond))
    d.blocks[sub].vars[-1].name = "ghost_cond"
    with pytest.raises(ProgramFileError, match=rf"w.pb: block 0, op \d+ \(while\), var '{cond}': the loop body "
                                               rf"\(block {sub}\) never writes its Condition"):
        pybackward.loads(d.SerializeToString(), source="w.pb")


def test_an_op_paddle_cannot_run_on_cpu_says_so():
    from pybackward.ops.paddle_data import paddle_runs_on_cpu
    assert paddle_runs_on_cpu("flash_attn") is False and paddle_runs_on_cpu("relu") is True
    assert paddle_runs_on_cpu("flash_attn_grad", grad_of="flash_attn") is False
    assert paddle_runs_on_cpu("no_such_op") is None
    d = pb.ProgramDesc()
    d.ParseFromString((FIT / "forward.pb").read_bytes())
    d.blocks[0].ops[3].type = "dequantize"  # declared by Paddle; GPU/oneDNN only
    prog = pybackward.loads(d.SerializeToString(), source="p.pb")
    with pytest.raises(ExecutionError, match=r"\(dequantize\): no kernel .* Paddle 3\.3\.1 has no CPU kernel "
                                             r"for this op either$"):
        Executor().run(prog, feed=dict(np.load(FIT / "feeds.npz")), scope=_scope())


def _scale_into(x_dtype: str, y_dtype: str) -> pybackward.Program:
    """A feed `x` scaled by 2 into a var `y` the program declares with
    another dtype (the fuzzer's dtype mutations write such programs)."""
    prog = pybackward.Program()
    b = prog.global_block()
    b.create_var("x", [2], x_dtype, need_check_feed=True)
    b.create_var("y", [2], y_dtype)
    b.append_op("scale", {"X": ["x"]}, {"Out": ["y"]}, {"scale": 2.0, "bias": 0.0, "bias_after_scale": True})
    return prog


def test_complex_values_with_imaginary_parts_are_not_cast_into_a_real_var():
    with pytest.raises(ExecutionError, match=r"op 0 \(scale\), var 'y': wrote complex values into 'y', which the "
                                             "program declares float32; their imaginary parts would be lost"):
        Executor().run(_scale_into("complex64", "float32"), feed={"x": np.array([1 + 1j, 2], np.complex64)},
                       fetch_list=["y"])


def test_complex_values_that_are_real_go_into_a_real_var_without_a_warning():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")    # numpy's ComplexWarning included
        (y,) = Executor().run(_scale_into("complex64", "float32"), feed={"x": np.array([1, 2], np.complex64)},
                              fetch_list=["y"])
    assert y.dtype == np.float32 and y.tolist() == [2.0, 4.0]


def test_floats_with_fractional_parts_are_not_cast_into_an_int_var():
    prog = _scale_into("float32", "int32")
    with pytest.raises(ExecutionError, match=r"var 'y': wrote floats into 'y', which the program declares int32; "
                                             "their fractional parts would be lost"):
        Executor().run(prog, feed={"x": np.array([0.25, 1], np.float32)}, fetch_list=["y"])
    with pytest.raises(ExecutionError, match="fractional parts would be lost"):     # NaN has no integer
        Executor().run(prog, feed={"x": np.array([np.nan, 1], np.float32)}, fetch_list=["y"])
    with pytest.raises(ExecutionError, match="fractional parts would be lost"):     # the real part's, too
        Executor().run(_scale_into("complex64", "int32"), feed={"x": np.array([0.25, 1], np.complex64)},
                       fetch_list=["y"])
    (y,) = Executor().run(prog, feed={"x": np.array([0.5, 1], np.float32)}, fetch_list=["y"])
    assert y.dtype == np.int32 and y.tolist() == [1, 2]


@pytest.mark.parametrize("x_dtype, y_dtype, x, what", [
    ("int64", "int32", [2**30, 1], r"values outside int32's range into 'y', which the program declares int32; "
                                   "they would wrap around"),
    ("float32", "uint8", [-1, 1], "values outside uint8's range"),
    ("float32", "int32", [np.inf, 1], "values outside int32's range"),
    ("float32", "bool", [0.25, 0], "fractional parts would be lost"),
    ("int64", "bool", [1, 0], "values other than 0 and 1 into 'y', which the program declares bool; they would "
                              "all become True"),      # 2 * 1 is 2
])
def test_values_a_declared_int_or_bool_cannot_hold_are_refused(x_dtype, y_dtype, x, what):
    with pytest.raises(ExecutionError, match=what):
        Executor().run(_scale_into(x_dtype, y_dtype), feed={"x": np.array(x, x_dtype)}, fetch_list=["y"])


def test_values_a_declared_int_or_bool_can_hold_pass():
    (y,) = Executor().run(_scale_into("int64", "int32"), feed={"x": np.array([2**29, -3], np.int64)},
                          fetch_list=["y"])
    assert y.dtype == np.int32 and y.tolist() == [2**30, -6]
    (y,) = Executor().run(_scale_into("float32", "bool"), feed={"x": np.array([0.5, 0], np.float32)},
                          fetch_list=["y"])
    assert y.dtype == np.bool_ and y.tolist() == [True, False]
