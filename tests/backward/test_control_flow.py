"""Control flow: conditional_block, while, tensor arrays, select_input/output.

The golden control-flow programs (every case whose forward program has
sub-blocks) are checked here beyond the byte comparison of
tests/backward/test_backward_golden.py:

* the interpreter, on Paddle's own backward program and on pybackward's,
  reproduces the gradient values Paddle's Executor computed (grads.npz);
* pybackward's gradients, on a float64 copy, agree with central finite
  differences of the loss, and so do Paddle's float32 values (rtol 1e-3) -
  except where Paddle itself is wrong (KNOWN_PADDLE_WRONG: there the
  interpreter, run on Paddle's program, reproduces Paddle's wrong values,
  finite differences show it, and pybackward's default program is right -
  docs/deviations.md);
* broken sub-block structure is reported as a PyBackwardError naming the
  block and op.
"""
from __future__ import annotations

import functools
import shutil
import subprocess

import numpy as np
import pytest

import pybackward
from conftest import PROGRAMS, case_json
from golden import replay
from pybackward.base.errors import ExecutionError, PaddleDeviationWarning, ProgramFileError, PyBackwardError
from pybackward.interpreter.gradcheck import to_float64
from pybackward.interpreter.executor import Executor, Scope
from pybackward.ops.control_flow.cond_while import find_var_cpp, std_hash, unordered_set_order

#: Golden cases whose gradients Paddle 3.3.1 itself gets wrong (finite
#: differences disagree with Paddle's Executor, and with pybackward's
#: interpreter running Paddle's program), with the reason. pybackward's
#: default program is right there (golden.PADDLE_WRONG_CASES replays them
#: with paddle_exact=True).
KNOWN_PADDLE_WRONG = {
    "while_stale_read": "the body reads h after assigning it (y = y * h); Paddle's grad block names the "
                        "gradients of both values of h 'h@GRAD' (the one carried in from the next step "
                        "is lost) and its while keeps only the value h had when the step began in the "
                        "step scope, so elementwise_mul_grad multiplies by the stale h",
    "while_array_reread": "slot 1 of the array is read inside the loop and again after it; the grad of "
                          "the in-loop read_from_array is a write_to_array that overwrites the slot's "
                          "gradient from the later read instead of adding to it",
}


def _cf_cases() -> list[str]:
    out = []
    for d in sorted(PROGRAMS.iterdir()):
        if (d / "case.json").exists() and len(pybackward.load(d / "forward.pb").blocks) > 1:
            out.append(d.name)
    return out


CF_CASES = _cf_cases()


def _inputs(case: str) -> tuple[dict, dict]:
    d = PROGRAMS / case
    return dict(np.load(d / "params.npz")), dict(np.load(d / "feeds.npz"))


def _run(prog, params: dict, feed: dict, fetch: list[str]) -> dict[str, np.ndarray]:
    scope = Scope()
    for k, v in params.items():
        scope.set(k, v)
    return dict(zip(fetch, Executor().run(prog, feed=feed, fetch_list=fetch, scope=scope)))


def _wrt(case: str) -> list[str]:
    """Parameters, and the feeds that get a gradient."""
    params, feed = _inputs(case)
    fwd = pybackward.load(PROGRAMS / case / "forward.pb").global_block()
    return sorted(params) + sorted(f for f in feed if not fwd.var(f).stop_gradient)


def test_the_control_flow_goldens_are_there():
    assert {"cond_block", "while_loop", "nested_cond", "while_array", "cond_in_while",
            "cond_select", "while_multi", "while_stale_read", "while_array_reread"} <= set(CF_CASES)


# --------------------------------------------------------------------------
# Paddle's values
# --------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["paddle", "ours"])
@pytest.mark.parametrize("case", CF_CASES)
def test_interpreter_gives_paddles_gradient_values(case, which):
    spec = case_json(case)["variants"]["default"]
    expected = dict(np.load(PROGRAMS / case / spec["grads_file"]))
    if which == "paddle":
        prog = pybackward.load(PROGRAMS / case / spec["file"])
    else:
        prog, *_ = replay(case, "default", record_callbacks=False)
    params, feed = _inputs(case)
    got = _run(prog, params, feed, sorted(expected))
    for name, want in expected.items():
        assert got[name].dtype == want.dtype and got[name].shape == want.shape, name
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-6, err_msg=name)


# --------------------------------------------------------------------------
# Finite differences
# --------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _numeric(case: str, eps: float = 1e-6) -> dict[str, np.ndarray]:
    """d loss / d var by central differences, on a float64 copy of the forward program."""
    loss = case_json(case)["loss"]
    prog = to_float64(pybackward.load(PROGRAMS / case / "forward.pb"))
    params, feed = _inputs(case)
    params = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in params.items()}
    feed = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in feed.items()}
    exe = Executor()

    def f(p, fd):
        scope = Scope()
        for k, v in p.items():
            scope.set(k, v)
        return float(np.sum(exe.run(prog, feed=fd, fetch_list=[loss], scope=scope)[0]))
    out = {}
    for name in _wrt(case):
        src = params if name in params else feed
        x0 = src[name]
        num = np.zeros_like(x0)
        for i in range(x0.size):
            vals = []
            for sign in (1, -1):
                x = x0.copy()
                x.reshape(-1)[i] += sign * eps
                changed = dict(src, **{name: x})
                vals.append(f(changed, feed) if src is params else f(params, changed))
            num.reshape(-1)[i] = (vals[0] - vals[1]) / (2 * eps)
        out[name] = num
    return out


def _fd_marks(case: str):
    return [pytest.mark.xfail(reason="Paddle is wrong here: " + KNOWN_PADDLE_WRONG[case], strict=True)] \
        if case in KNOWN_PADDLE_WRONG else []


@pytest.mark.parametrize("case", CF_CASES)
def test_our_gradients_match_finite_differences_float64(case):
    loss = case_json(case)["loss"]
    prog = to_float64(pybackward.load(PROGRAMS / case / "forward.pb"))
    pairs = pybackward.append_backward(prog.global_block().var(loss))
    grads = {p.name: g.name for p, g in pairs}
    params, feed = _inputs(case)
    params = {k: v.astype(np.float64) for k, v in params.items()}
    feed = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in feed.items()}
    names = _wrt(case)
    fetch = [grads.get(n, n + "@GRAD") for n in names]
    got = _run(prog, params, feed, fetch)
    numeric = _numeric(case)
    for n, g in zip(names, fetch):
        np.testing.assert_allclose(got[g], numeric[n], rtol=1e-6, atol=1e-8, err_msg=n)


@pytest.mark.parametrize("case", [pytest.param(c, marks=_fd_marks(c)) for c in CF_CASES])
def test_paddles_float32_gradients_match_finite_differences(case):
    spec = case_json(case)["variants"]["default"]
    expected = dict(np.load(PROGRAMS / case / spec["grads_file"]))
    numeric = _numeric(case)
    for n in _wrt(case):
        np.testing.assert_allclose(expected[n + "@GRAD"], numeric[n], rtol=1e-3, atol=1e-5, err_msg=n)


def test_check_gradients_tool_on_a_loop():
    params, feed = _inputs("while_loop")
    rows = pybackward.check_gradients(pybackward.load(PROGRAMS / "while_loop" / "forward.pb"),
                                      "mean_0.tmp_0", feed, params, wrt=["w", "x"])
    assert rows and all(r.ok for r in rows), rows


def test_untaken_branch_gives_zero_gradient():
    """cond_select runs the sigmoid branch: w2 (used only in the other branch) gets zeros."""
    params, feed = _inputs("cond_select")
    prog, *_ = replay("cond_select", "default", record_callbacks=False)
    got = _run(prog, params, feed, ["w2@GRAD", "w@GRAD"])
    assert np.all(got["w2@GRAD"] == 0) and np.any(got["w@GRAD"] != 0)


def test_while_that_never_runs():
    """n = 0: no step scopes; while_grad passes the loop-carried gradient through."""
    prog = pybackward.load(PROGRAMS / "while_loop" / "forward.pb")
    for op in prog.global_block().ops:
        if op.type == "fill_constant" and op.output("Out") == ["fill_constant_3.tmp_0"]:
            op.set_attr("value", 0.0)
            op.set_attr("str_value", "0")
    pybackward.append_backward("mean_0.tmp_0", program=prog)
    params, feed = _inputs("while_loop")
    got = _run(prog, params, feed, ["mean_0.tmp_0", "x@GRAD"])
    np.testing.assert_allclose(got["mean_0.tmp_0"], feed["x"].mean(), rtol=1e-6)
    np.testing.assert_allclose(got["x@GRAD"], np.full_like(feed["x"], 1 / feed["x"].size), rtol=1e-6)


def test_non_scalar_condition_runs_when_every_input_is_non_empty():
    """is_scalar_condition=False: Paddle runs the block iff every Input holds
    elements (whatever Cond says); cond_block's inputs do, so nothing changes."""
    prog = pybackward.load(PROGRAMS / "cond_block" / "backward.pb")
    for op in prog.global_block().ops:
        if op.type in ("conditional_block", "conditional_block_grad"):
            op.set_attr("is_scalar_condition", False)
    params, feed = _inputs("cond_block")
    expected = dict(np.load(PROGRAMS / "cond_block" / "grads.npz"))
    got = _run(prog, params, feed, sorted(expected))
    for name, want in expected.items():
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-6, err_msg=name)


def test_tensor_array_kernels():
    """write_to_array grows the array (unwritten slots stay empty),
    read_from_array reads a slot, lod_array_length counts slots."""
    prog = pybackward.Program()
    b = prog.global_block()
    b.create_var("x", [2, 3])
    b.create_var("arr", [2, 3], type=pybackward.base.dtypes.VarType.DENSE_TENSOR_ARRAY)
    for n, v in (("i0", 0), ("i2", 2)):
        b.create_var(n, [1], dtype="int64")
        b.append_op("fill_constant", {}, {"Out": [n]}, {"shape": [1], "value": float(v), "dtype": 3})
    for n in ("r0", "r2"):
        b.create_var(n, [2, 3])
    b.create_var("len", [1], dtype="int64")
    b.append_op("write_to_array", {"X": ["x"], "I": ["i0"]}, {"Out": ["arr"]})
    b.append_op("write_to_array", {"X": ["x"], "I": ["i2"]}, {"Out": ["arr"]})
    b.append_op("read_from_array", {"X": ["arr"], "I": ["i2"]}, {"Out": ["r2"]})
    b.append_op("lod_array_length", {"X": ["arr"]}, {"Out": ["len"]})
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    arr, r2, n = Executor().run(prog, feed={"x": x}, fetch_list=["arr", "r2", "len"])
    assert isinstance(arr, list) and len(arr) == 3 and arr[1] is None
    np.testing.assert_array_equal(r2, x)
    assert n.tolist() == [3] and n.dtype == np.int64
    b.create_var("i1", [1], dtype="int64")
    b.append_op("fill_constant", {}, {"Out": ["i1"]}, {"shape": [1], "value": 1.0, "dtype": 3})
    b.append_op("read_from_array", {"X": ["arr"], "I": ["i1"]}, {"Out": ["r0"]})
    with pytest.raises(ExecutionError, match="read_from_array.*never written"):
        Executor().run(prog, feed={"x": x}, fetch_list=["r0"])


# --------------------------------------------------------------------------
# Paddle's container order and lookups, reproduced
# --------------------------------------------------------------------------
def test_while_grad_output_grads_in_unordered_set_order():
    """while_multi's grad block reads c@, b@, a@GRAD in that order; Paddle's
    std::unordered_set gives a, b, c (and pybackward's golden bytes agree)."""
    gold = pybackward.load(PROGRAMS / "while_multi" / "backward.pb")
    (wg,) = [op for op in gold.global_block().ops if op.type == "while_grad"]
    og = wg.input("Out@GRAD")
    assert len(og) == 3
    assert unordered_set_order(["scale_2.tmp_0@GRAD", "scale_1.tmp_0@GRAD", "scale_0.tmp_0@GRAD"]) == og
    assert wg.attr("original_output_grad") == og


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (libstdc++) to compare with")
def test_unordered_set_model_matches_libstdcxx(tmp_path):
    src = tmp_path / "u.cc"
    src.write_text(r"""
#include <unordered_set>
#include <string>
#include <iostream>
int main() {
  std::string line; std::unordered_set<std::string> s;
  while (std::getline(std::cin, line)) {
    if (line == "--") {
      bool first = true;
      for (auto &x : s) { std::cout << (first ? "" : "\t") << x; first = false; }
      std::cout << "\n"; s.clear(); s = std::unordered_set<std::string>(); continue;
    }
    s.insert(line);
    std::cout << std::hash<std::string>{}(line) << "\n";
  }
}
""")
    exe = tmp_path / "u"
    subprocess.run(["g++", "-O1", "-o", str(exe), str(src)], check=True)
    rng = np.random.default_rng(7)
    cases = [[f"{rng.choice(['scale_', 'tanh_', 'w', 'x.b_'])}{rng.integers(60)}"
              f"{rng.choice(['@GRAD', '.tmp_0@GRAD', '@GRAD@RENAME@block1@0', ''])}"
              for _ in range(n)] for n in (1, 2, 3, 12, 13, 14, 27, 28, 40, 90)]
    text = "".join("\n".join(c) + "\n--\n" for c in cases)
    lines = iter(subprocess.run([str(exe)], input=text, capture_output=True, text=True,
                                check=True).stdout.split("\n"))
    for c in cases:
        for name in c:
            assert int(next(lines)) == std_hash(name), name
        got = next(lines)
        assert unordered_set_order(c) == (got.split("\t") if got else []), c


def test_find_var_looks_in_the_forward_block_first():
    prog = pybackward.load(PROGRAMS / "cond_block" / "backward.pb")
    gblock = prog.block(2)
    assert find_var_cpp(gblock, "tanh_0.tmp_0").block.idx == 1     # via forward_block_idx
    assert find_var_cpp(gblock, "w").block.idx == 0                # via the parent
    assert find_var_cpp(gblock, "w2@GRAD").block.idx == 2          # its own first
    assert find_var_cpp(gblock, "@EMPTY@") is None


# --------------------------------------------------------------------------
# Broken sub-block structure
# --------------------------------------------------------------------------
def _op(prog, block: int, op_type: str):
    (op,) = [o for o in prog.block(block).ops if o.type == op_type][:1]
    return op


def test_append_backward_rejects_a_sub_block_of_another_block():
    prog = pybackward.load(PROGRAMS / "nested_cond" / "forward.pb")
    before = pybackward.dumps(prog)
    _op(prog, 0, "conditional_block").set_attr("sub_block", 2)   # block 2 is a child of block 1
    changed = pybackward.dumps(prog)
    with pytest.raises(ProgramFileError, match=r"block 0, op \d+ \(conditional_block\): attr 'sub_block' "
                                               r"names block 2, whose parent is block 1"):
        pybackward.append_backward(case_json("nested_cond")["loss"], program=prog)
    assert pybackward.dumps(prog) == changed != before          # all or nothing


def test_interpreter_rejects_a_grad_op_on_a_forward_block():
    prog = pybackward.load(PROGRAMS / "cond_block" / "backward.pb")
    _op(prog, 0, "conditional_block_grad").set_attr("sub_block", 1)
    params, feed = _inputs("cond_block")
    with pytest.raises(ExecutionError, match=r"block 0, op 8 \(conditional_block_grad\): attr 'sub_block' "
                                             r"names block 1, which is not a grad block"):
        _run(prog, params, feed, ["w@GRAD"])


def test_interpreter_rejects_a_forward_op_on_a_grad_block():
    prog = pybackward.load(PROGRAMS / "while_loop" / "backward.pb")
    _op(prog, 0, "while").set_attr("sub_block", 2)
    params, feed = _inputs("while_loop")
    with pytest.raises(ExecutionError, match=r"block 0, op 4 \(while\): attr 'sub_block' names block 2, "
                                             r"a grad block"):
        _run(prog, params, feed, ["w@GRAD"])


def test_grad_block_without_forward_block_idx():
    prog = pybackward.load(PROGRAMS / "while_loop" / "backward.pb")
    prog.desc.blocks[2].ClearField("forward_block_idx")
    data = pybackward.dumps(prog)
    # Its ops read the forward block's vars, which it can no longer see.
    with pytest.raises(ProgramFileError, match=r"block 2, op \d+ \(\w+\), var '(tanh|matmul)"):
        pybackward.loads(data)
    prog = pybackward.loads(data, check_vars=False)
    params, feed = _inputs("while_loop")
    with pytest.raises(ExecutionError, match=r"block 0, op 8 \(while_grad\): attr 'sub_block' names block 2, "
                                             r"which is not a grad block: it has no forward_block_idx"):
        _run(prog, params, feed, ["w@GRAD"])


def test_every_failure_is_a_pybackward_error():
    assert issubclass(ExecutionError, PyBackwardError) and issubclass(ProgramFileError, PyBackwardError)


# --------------------------------------------------------------------------
# issue #17: where Paddle's program or Executor is wrong (docs/deviations.md)
# --------------------------------------------------------------------------
def _fd64(fwd64, loss: str, params: dict, feed: dict, name: str, eps: float = 1e-6) -> np.ndarray:
    src = params if name in params else feed
    num = np.zeros_like(src[name])
    for i in range(num.size):
        vals = []
        for sign in (1, -1):
            x = src[name].copy()
            x.reshape(-1)[i] += sign * eps
            p, f = (dict(params, **{name: x}), feed) if src is params else (params, dict(feed, **{name: x}))
            vals.append(float(np.sum(_run(fwd64, p, f, [loss])[loss])))
        num.reshape(-1)[i] = (vals[0] - vals[1]) / (2 * eps)
    return num


def _as64(d: dict) -> dict:
    return {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in d.items()}


def test_stale_loop_var_is_right_by_default_and_paddles_with_paddle_exact():
    """while_stale_read (h = tanh(h @ w); y = y * h, twice): Paddle's w@GRAD and
    x@GRAD are off finite differences by 0.066 and 0.073; pybackward's default
    program recomputes the new h in the grad block and carries h's gradient
    across steps (Paddle's own Executor gives the finite-difference values on
    it too, to 3e-8); paddle_exact=True writes Paddle's program byte for byte."""
    import warnings
    from pybackward.base.errors import PaddleDeviationWarning
    case, loss = "while_stale_read", "mean_0.tmp_0"
    params, feed = (_as64(d) for d in _inputs(case))
    fwd64 = to_float64(pybackward.load(PROGRAMS / case / "forward.pb"))
    prog = fwd64.clone()
    with pytest.warns(PaddleDeviationWarning, match=r"stale loop var: block 1's while body reads "
                                                     r"'scale_0.tmp_0' after op 2 \(assign\)"):
        pybackward.append_backward(loss, program=prog)
    gblock = prog.block(2)
    assert gblock.ops[0].type == "assign" and gblock.ops[0].output("Out") == ["scale_0.tmp_0@AFTER@block1@op2"]
    exact = fwd64.clone()
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaddleDeviationWarning)
        pybackward.append_backward(loss, program=exact, paddle_exact=True)
    got = _run(prog, params, feed, ["w@GRAD", "x@GRAD"])
    bad = _run(exact, params, feed, ["w@GRAD", "x@GRAD"])
    for n in ("w", "x"):
        num = _fd64(fwd64, loss, params, feed, n)
        np.testing.assert_allclose(got[n + "@GRAD"], num, rtol=1e-6, atol=1e-8, err_msg=n)
        assert np.abs(bad[n + "@GRAD"] - num).max() > 0.05, n          # Paddle's program: wrong
    gold = pybackward.load(PROGRAMS / case / "forward.pb")
    pybackward.append_backward(loss, program=gold, paddle_exact=True)
    assert pybackward.dumps(gold) == (PROGRAMS / case / "backward.pb").read_bytes()


def test_stale_loop_var_whose_step_start_value_is_unread_is_refused():
    """The body writes h and reads the new value, but never reads the value h
    had when the step began: refused, naming the var, the op and the rule."""
    def program():
        prog = pybackward.load(PROGRAMS / "while_stale_read" / "forward.pb")
        prog.block(1).ops[0].set_input("X", ["x"])     # t = tanh(x @ w): h's old value is unread
        loop = _op(prog, 0, "while")
        loop.set_input("X", [n for n in loop.input("X") if n != "scale_0.tmp_0"] + ["x"])
        return prog
    with pytest.raises(ProgramFileError, match=r"block 1, op 2 \(assign\), var 'scale_0.tmp_0': the while "
                                               r"body reassigns the loop var .*never read .*rule:"):
        pybackward.append_backward("mean_0.tmp_0", program=program())
    pybackward.append_backward("mean_0.tmp_0", program=program(), paddle_exact=True)   # Paddle's program


def test_array_slot_read_in_and_after_a_loop_is_right_by_default():
    """while_array_reread (arr[1] read at step 1 and after the loop): Paddle's
    in-loop read grad overwrites slot 1's gradient (w@GRAD off finite
    differences by 0.054, x@GRAD by 0.039). By default the read's grad goes
    into an array of its own that a `sum` adds into the array's gradient
    (Paddle's own Executor agrees with finite differences on that program, to
    1e-8); paddle_exact=True writes Paddle's program byte for byte."""
    import warnings
    from pybackward.base.errors import PaddleDeviationWarning
    case = "while_array_reread"
    loss = case_json(case)["loss"]
    params, feed = (_as64(d) for d in _inputs(case))
    fwd64 = to_float64(pybackward.load(PROGRAMS / case / "forward.pb"))
    prog, exact = fwd64.clone(), fwd64.clone()
    with pytest.warns(PaddleDeviationWarning, match=r"tensor array read again: block 1's while body reads "
                                                     r"a slot of 'array_0.out' \(op 0\)"):
        pybackward.append_backward(loss, program=prog)
    assert [op.type for op in prog.block(2).ops][-2:] == ["write_to_array", "sum"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaddleDeviationWarning)
        pybackward.append_backward(loss, program=exact, paddle_exact=True)
    got = _run(prog, params, feed, ["w@GRAD", "x@GRAD"])
    bad = _run(exact, params, feed, ["w@GRAD", "x@GRAD"])
    for n in ("w", "x"):
        num = _fd64(fwd64, loss, params, feed, n)
        np.testing.assert_allclose(got[n + "@GRAD"], num, rtol=1e-6, atol=1e-8, err_msg=n)
        assert np.abs(bad[n + "@GRAD"] - num).max() > 0.03, n
    gold = pybackward.load(PROGRAMS / case / "forward.pb")
    pybackward.append_backward(loss, program=gold, paddle_exact=True)
    assert pybackward.dumps(gold) == (PROGRAMS / case / "backward.pb").read_bytes()


def test_array_reads_that_cannot_meet_stay_paddles():
    """while_array reads arr[i] while i < n and arr[n] after the loop: the
    slots never meet, Paddle is right, and the program is Paddle's as is."""
    import warnings
    from pybackward.base.errors import PaddleDeviationWarning
    prog = pybackward.load(PROGRAMS / "while_array" / "forward.pb")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaddleDeviationWarning)
        pybackward.append_backward(case_json("while_array")["loss"], program=prog)
    assert pybackward.dumps(prog) == (PROGRAMS / "while_array" / "backward.pb").read_bytes()


def _compare_before_increment(prog):
    """while_array with the body's `less_than(i, n)` moved before `increment(i)`: the last
    step starts with i == n and reads arr[n], the slot read again after the loop."""
    body = prog.desc.blocks[1]
    ops = [type(o)() for o in body.ops]
    for c, o in zip(ops, body.ops):
        c.CopyFrom(o)
    assert [o.type for o in ops] == ["read_from_array", "matmul_v2", "tanh", "increment", "write_to_array",
                                     "less_than"]
    del body.ops[:]
    body.ops.extend(ops[:3] + [ops[5], ops[3], ops[4]])
    prog.sync()
    return prog


def _entered_past_the_bound(prog):
    """while_array with i starting at n (arr[n] = x) and the loop entered on `0 < n`, not
    `i < n`: its one step reads arr[n], the slot read again after the loop."""
    block = prog.global_block()
    init = block.ops[0]
    init.set_attr("value", 3.0)
    init.set_attr("str_value", "3")
    zero = type(init.desc)()
    zero.CopyFrom(block.ops[1].desc)
    zero.outputs[0].arguments[:] = ["zero"]
    block.create_var_like("zero", block.var("fill_constant_3.tmp_0"))
    block.insert_op_desc(0, zero)
    block.ops[0].set_attr("value", 0.0)
    block.ops[0].set_attr("str_value", "0")
    (lt,) = [op for op in block.ops if op.type == "less_than"]
    lt.set_input("X", ["zero"])
    prog.sync()
    return prog


@pytest.mark.parametrize("edit", [_compare_before_increment, _entered_past_the_bound])
def test_a_loop_whose_steps_can_start_at_the_bound_gets_the_array_read_added(edit):
    """The RNN form of "the slots cannot meet" (the body reads arr[i] and loops while
    `i < n`, arr[n] read after the loop) needs every step to start with i < n: the
    comparison after the body's last change of i, and the same comparison before the loop.
    Where it is made before the increment, or the loop is entered on another condition,
    a step reads arr[n]; Paddle's in-loop read grad overwrites the gradient the later read
    put in that slot (w@GRAD off finite differences by 0.05, x@GRAD by 0.02-0.03, no
    warning, before this rule checked both): now it is added (`tensor array read again`)."""
    case = "while_array"
    loss = case_json(case)["loss"]
    params, feed = (_as64(d) for d in _inputs(case))
    fwd64 = edit(to_float64(pybackward.load(PROGRAMS / case / "forward.pb")))
    prog = fwd64.clone()
    with pytest.warns(PaddleDeviationWarning, match=r"tensor array read again: block 1's while body reads "
                                                     r"a slot of 'array_0.out' \(op 0\)"):
        pybackward.append_backward(loss, program=prog)
    got = _run(prog, params, feed, ["w@GRAD", "x@GRAD"])
    for n in ("w", "x"):
        np.testing.assert_allclose(got[n + "@GRAD"], _fd64(fwd64, loss, params, feed, n), rtol=1e-6, atol=1e-8,
                                   err_msg=n)


def test_cond_in_while_paddles_program_gives_finite_difference_values():
    """Issue #17 item 4 said Paddle's Executor keeps only the last iteration's
    term for a cond inside a while. Not so in Paddle 3.3.1 (CPU): on the golden
    data (branches F,T,T,F) and on random data with other branch patterns its
    values agree with finite differences to 1e-7 (docs/deviations.md). The
    interpreter, running Paddle's (= pybackward's) program, agrees as well."""
    case = "cond_in_while"
    loss = case_json(case)["loss"]
    fwd64 = to_float64(pybackward.load(PROGRAMS / case / "forward.pb"))
    prog = fwd64.clone()
    pybackward.append_backward(loss, program=prog)
    p0, f0 = (_as64(d) for d in _inputs(case))
    rng = np.random.default_rng(0)
    datasets = [(p0, f0)] + [({"w": rng.standard_normal((8, 8)) * 0.5}, {"x": rng.standard_normal((4, 8))})
                             for _ in range(3)]
    patterns = set()
    for params, feed in datasets:
        h, pattern = feed["x"], ""
        for _ in range(4):
            t = h @ params["w"]
            pattern += "T" if t.mean() > 0 else "F"
            h = np.tanh(t) if t.mean() > 0 else 1 / (1 + np.exp(-t))
        patterns.add(pattern)
        got = _run(prog, params, feed, ["w@GRAD", "x@GRAD"])
        for n in ("w", "x"):
            np.testing.assert_allclose(got[n + "@GRAD"], _fd64(fwd64, loss, params, feed, n),
                                       rtol=1e-6, atol=1e-8, err_msg=f"{n} {pattern}")
    assert len(patterns) >= 3, patterns        # the branch taken changes between steps
