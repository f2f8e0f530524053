"""The PIR interpreter (pybackward/interpreter/pir_executor.py) against Paddle's PIR Executor.

testdata/pir_values/ holds, per run of a PIR golden (testdata/pir/), the feeds
and parameters it ran with and every top-level value Paddle 3.3.1's Executor
computed (gen_pir_values.py): the interpreter must give each of them, same
dtype and shape, within the legacy corpus' tolerances (rtol 1e-5, atol 1e-6,
float32). Then: which value is `NAME@GRAD`, the in-place ops, the glue and
control flow on small hand-made programs, and the errors.
"""
from __future__ import annotations

import json

import numpy as np

import pybackward
import pytest

from conftest import TESTDATA
from pybackward import pir
from pybackward.base.errors import ArgumentTypeError, ExecutionError, ExecutionLimitError, VarNotFoundError
from pybackward.interpreter.pir_executor import PirExecutor, default_fetch, gradient_names, run
from pybackward.pir.model import Operation, make_value_ids
from pybackward.pir.types import Attr, DenseTensorType, OpaqueType, VectorType, dense

VALUES = TESTDATA / "pir_values"
MANIFEST = json.loads((VALUES / "manifest.json").read_text())
RUNS = MANIFEST["runs"]
RTOL, ATOL = 1e-5, 1e-6     # tests/interpreter/test_interpreter_golden.py's


def _load(run_name: str):
    spec = RUNS[run_name]
    prog = pir.load(TESTDATA / spec["program"])
    feeds = dict(np.load(VALUES / f"{run_name}.feeds.npz"))
    params = dict(np.load(VALUES / f"{run_name}.params.npz"))
    want = dict(np.load(VALUES / f"{run_name}.values.npz"))
    return spec, prog, feeds, params, want


def _assert_same(have, want, what):
    assert have.dtype == want.dtype, f"{what}: dtype {have.dtype}, Paddle {want.dtype}"
    assert have.shape == want.shape, f"{what}: shape {have.shape}, Paddle {want.shape}"
    np.testing.assert_allclose(have, want, rtol=RTOL, atol=ATOL, err_msg=what)


# --------------------------------------------------------------------------
# Paddle's values
# --------------------------------------------------------------------------
def test_every_runnable_golden_has_recorded_values():
    bwd = {r for r in RUNS if "_bwd" in r}
    assert {RUNS[r]["case"] for r in RUNS} == {
        "mlp", "mlp_bwd", "cnn", "cnn_bwd", "transformer", "transformer_bwd", "cond", "cond_bwd", "while",
        "while_bwd", "cond_in_while", "cond_in_while_bwd", "pylayer", "pylayer_bwd", "cnn_infer", "jit"}
    assert len(bwd) == 9 and all(len(RUNS[r]["values"]) >= 4 for r in RUNS)


@pytest.mark.parametrize("run_name", sorted(RUNS))
def test_every_value_equals_paddles(run_name):
    spec, prog, feeds, params, want = _load(run_name)
    got = PirExecutor(paddle_seed=spec["paddle_seed"]).run(prog, feeds, params, fetch=sorted(want))
    for ref, w in want.items():
        _assert_same(got[ref], w, f"{run_name} {ref} ({spec['values'][ref]})")


@pytest.mark.paddle
def test_the_generator_gives_the_recorded_values(tmp_path):
    """gen_pir_values.py, run again with a live Paddle, writes these very bytes."""
    import shutil
    import subprocess
    from conftest import require_paddle
    out = tmp_path / "pir_values"
    out.mkdir()
    shutil.copy(VALUES / "gen_pir_values.py", out)
    (tmp_path / "pir").symlink_to(TESTDATA / "pir")
    subprocess.run([require_paddle(), str(out / "gen_pir_values.py")], check=True, capture_output=True, timeout=600)
    ours = sorted(p.relative_to(VALUES) for p in VALUES.rglob("*") if p.is_file() and p.name != "README.md")
    again = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert again == ours
    for rel in ours:
        if rel.suffix == ".pdmodel":    # legacy programs record Paddle's install path in op_callstack
            assert str(pybackward.load(out / rel)) == str(pybackward.load(VALUES / rel)), rel
            continue
        assert (out / rel).read_bytes() == (VALUES / rel).read_bytes(), rel


def test_zoo_runs_but_for_bfloat16():
    """zoo (forward only; Paddle's executor cannot fetch its values): every op runs but the
    cast to bfloat16, which NumPy cannot hold; each value has the dtype and known dims its
    type declares (tensor arrays, vectors, the in-place assign_value_ and array_write_ included)."""
    prog = pir.load(TESTDATA / "pir" / "zoo.json")
    feeds = {'in"put\\数据': np.random.default_rng(0).standard_normal((2, 3, 4, 4)).astype(np.float32)}
    with pytest.raises(ExecutionError, match=r"op 40 \(pd_op.cast\), var '%45': .*BF16 has no NumPy equivalent"):
        run(prog, feeds, {})
    bf16 = next(op for op in prog.ops if op.name == "pd_op.cast" and op.attr("dtype") == "bfloat16")
    prog.block.remove(bf16)
    values = [v for op in prog.ops for v in op.results if isinstance(v.type, DenseTensorType)]
    out = run(prog, feeds, {}, fetch=[f"%{v.id}" for v in values])
    assert len(out) == len(values) == 55      # the dense tensors (not the vectors, not the arrays)
    for v in values:
        x = out[f"%{v.id}"]
        assert x.dtype == np.dtype(v.type.dtype), (v, x.dtype)
        assert x.ndim == len(v.type.dims) and all(d < 0 or d == n for d, n in zip(v.type.dims, x.shape)), v
    write = next(op for op in prog.ops if op.name == "pd_op.array_write_")
    read = next(op for op in prog.ops if op.name == "pd_op.array_read")
    assert read.operands[0] is write.operands[0]         # Paddle reads the array it wrote in place
    np.testing.assert_array_equal(out[f"%{read.results[0].id}"], out[f"%{write.operands[1].id}"])


@pytest.mark.parametrize("run_name", sorted(RUNS))
def test_value_ids_are_paddles(run_name):
    """`%N` names the value Paddle's walk order gives id N (what the recorded values are keyed by)."""
    spec, prog, *_ = _load(run_name)
    for ref, op_name in spec["values"].items():
        assert prog.value(ref).defining_op.name == op_name, ref


def test_dropout_draws_from_paddles_global_generator():
    """Without paddle_seed the CNN's dropout mask is NumPy's, and the loss is not Paddle's."""
    spec, prog, feeds, params, want = _load("cnn_bwd")
    mask = next(op for op in prog.walk() if op.name == "pd_op.dropout").results[1]
    ref = f"%{mask.id}"
    same = PirExecutor(paddle_seed=spec["paddle_seed"]).run(prog, feeds, params, fetch=[ref])
    other = PirExecutor(seed=1).run(prog, feeds, params, fetch=[ref])
    np.testing.assert_array_equal(same[ref], want[ref])
    assert not np.array_equal(other[ref], want[ref])


def test_in_place_batch_norm_updates_the_running_statistics():
    """pd_op.batch_norm_ writes its mean and variance operands: reading the parameter
    afterwards gives the updated statistics, as Paddle's fetch of it does."""
    spec, prog, feeds, params, want = _load("cnn_bwd")
    bn = next(op for op in prog.walk() if op.name == "pd_op.batch_norm_")
    mean_param = bn.operands[1]
    name = mean_param.defining_op.attr("parameter_name")
    got = run(prog, feeds, params, fetch=[name, f"%{mean_param.id}"], paddle_seed=spec["paddle_seed"])
    assert not np.allclose(got[name], params[name])
    _assert_same(got[name], want[f"%{mean_param.id}"], name)


# --------------------------------------------------------------------------
# NAME@GRAD
# --------------------------------------------------------------------------
def _differentiable_inputs(prog) -> set[str]:
    out = set()
    for op in prog.ops:
        if op.name in ("builtin.parameter", "pd_op.data") and op.results[0].stop_gradient is False:
            out.add(op.attr("parameter_name" if op.name == "builtin.parameter" else "name"))
    return out


@pytest.mark.parametrize("run_name", sorted(r for r in RUNS if "_bwd" in r))
def test_every_differentiable_input_has_its_gradient(run_name):
    spec, prog, feeds, params, want = _load(run_name)
    grads = gradient_names(prog)
    assert set(grads) == {n + "@GRAD" for n in _differentiable_inputs(prog)}
    got = run(prog, feeds, params, fetch=sorted(grads), paddle_seed=spec["paddle_seed"])
    for name, v in grads.items():
        _assert_same(got[name], want[f"%{v.id}"], name)
        assert got[name].shape == np.shape(params.get(name[:-5], feeds.get(name[:-5])))


def test_gradient_names_of_the_mlp():
    """mlp_bwd: each parameter's gradient is the matching result of its grad op."""
    prog = pir.load(TESTDATA / "pir" / "mlp_bwd.json")
    assert {k: f"%{v.id}" for k, v in gradient_names(prog).items()} == {
        "fc_3.b_0@GRAD": "%25", "fc_3.w_0@GRAD": "%27", "fc_2.b_0@GRAD": "%30", "fc_2.w_0@GRAD": "%32"}


def test_default_fetch_is_the_loss_and_every_gradient():
    spec, prog, feeds, params, want = _load("transformer_bwd")
    refs = default_fetch(prog)
    assert refs[0] == "%58" and len(refs) == 17 and all(r.endswith("@GRAD") for r in refs[1:])
    out = run(prog, feeds, params)
    assert list(out) == refs
    _assert_same(out["%58"], want["%58"], "loss")


def test_a_forward_full_like_is_no_seed():
    """A while started from zeros_like(x) / ones_like(x) in the forward section: no backward section."""
    from pybackward.interpreter.pir_grads import backward_info
    for value in (0.0, 1.0):
        prog = pir.load(TESTDATA / "pir" / "while.json")
        w = next(op for op in prog.ops if op.name == "pd_op.while")
        x = prog.value("x")
        at = prog.ops.index(w)
        fill = prog.block.insert(at, Operation("pd_op.full", [], [dense("float32", [])], {
            "shape": Attr.int_array([]), "value": Attr.f32(value), "dtype": Attr.dtype("float32")})).results[0]
        init = prog.block.insert(at + 1, Operation("pd_op.full_like", [x, fill], [x.type], {
            "dtype": Attr.dtype("float32")})).results[0]
        w.set_operand(2, init)
        make_value_ids(prog)
        assert backward_info(prog).loss is None and gradient_names(prog) == {}
        out = run(prog, {"x": np.ones(4, np.float32)}, {"create_parameter_1.w_0": np.ones(4, np.float32)})
        assert list(out) == [f"%{prog.ops[-1].results[0].id}"]      # the loss candidate


def test_default_fetch_of_forward_programs():
    assert default_fetch(pir.load(TESTDATA / "pir" / "mlp.json")) == ["%16"]           # the loss candidate
    assert default_fetch(pir.load(TESTDATA / "pir" / "jit.json")) == ["fetch_name_0"]
    spec, prog, feeds, params, want = _load("jit")
    out = run(prog, feeds, params)
    _assert_same(out["fetch_name_0"], want["%9"], "fetch_name_0")


def test_parameter_files_beside_the_goldens():
    """What the CLI will read: a .pdparams is a pickle of name -> array; a PIR .pdiparams
    holds the program's parameters in sorted name order (as Paddle's loader read them)."""
    from pybackward.tensors.paddle_files import read_pickle
    from pybackward.tensors.tensor_format import decode_tensors
    spec, prog, feeds, params, want = _load("jit")
    names = sorted(op.attr("parameter_name") for op in prog.parameters())
    tensors = decode_tensors((TESTDATA / "pir" / "jit.pdiparams").read_bytes(), "jit.pdiparams")
    read = {n: a for n, (a, _lod) in zip(names, tensors)}
    for n in names:
        np.testing.assert_array_equal(read[n], params[n])
    _assert_same(run(prog, feeds, read)["fetch_name_0"], want["%9"], "fetch_name_0")
    spec, prog, feeds, params, want = _load("mlp_bwd")
    pickled = read_pickle(TESTDATA / "pir" / "mlp_bwd.pdparams")
    assert sorted(pickled) == sorted(params)
    _assert_same(run(prog, feeds, pickled, fetch=["%16"])["%16"], want["%16"], "loss")


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------
def test_missing_feeds_and_parameters_are_all_named():
    prog = pir.load(TESTDATA / "pir" / "mlp_bwd.json")
    with pytest.raises(ExecutionError) as e:
        run(prog, {"x": np.zeros((2, 4), np.float32)}, {"fc_2.w_0": np.zeros((4, 8), np.float32)})
    msg = str(e.value)
    assert "mlp_bwd.json" in msg and "\n" not in msg
    assert "missing feeds: 'y' (give them with feeds= / --feeds FILE.npz / --feed NAME=FILE.npy)" in msg
    assert "missing parameters: 'fc_3.b_0', 'fc_3.w_0', 'fc_2.b_0' (give them with params= / --params FILE" in msg


def test_bad_feeds_are_refused():
    spec, prog, feeds, params, _ = _load("mlp_bwd")
    with pytest.raises(ExecutionError, match=r"feed 'x' has shape \[2, 5\], the program declares \[-1, 4\]"):
        run(prog, {**feeds, "x": np.zeros((2, 5), np.float32)}, params)
    with pytest.raises(ExecutionError, match="feed 'x' has dtype int64, the program declares float32"):
        run(prog, {**feeds, "x": np.zeros((2, 4), np.int64)}, params)
    with pytest.raises(ExecutionError, match="fed, but the program has no data named 'z'"):
        run(prog, {**feeds, "z": np.zeros(1)}, params)
    with pytest.raises(ExecutionError, match=r"parameter 'fc_2.w_0' has shape \[8, 4\]"):
        run(prog, feeds, {**params, "fc_2.w_0": np.zeros((8, 4), np.float32)})
    out = run(prog, {k: v.astype(np.float64) for k, v in feeds.items()}, params, fetch=["%16"])
    assert out["%16"].dtype == np.float32       # float64 feeds are cast to the declared float32


def test_fetch_errors_name_what_exists():
    spec, prog, feeds, params, _ = _load("mlp_bwd")
    with pytest.raises(VarNotFoundError, match="no gradient 'x@GRAD'.*gradients: fc_2.b_0@GRAD"):
        run(prog, feeds, params, fetch=["x@GRAD"])
    with pytest.raises(VarNotFoundError, match="close: 'fc_2.w_0'"):
        run(prog, feeds, params, fetch=["fc_2.w_1"])
    with pytest.raises(ExecutionError, match="cannot fetch '%31': no op computed it"):
        run(prog, feeds, params, fetch=["%31"])         # matmul_grad's null x_grad
    with pytest.raises(ArgumentTypeError, match="fetch must be a list"):
        run(prog, feeds, params, fetch="%16")


@pytest.mark.parametrize("name,why", [
    ("pd_op.embedding_with_scaled_gradient_grad",
     "Paddle 3.3.1 has a CPU kernel for it ('embedding_with_scaled_gradient_grad'), pybackward none yet"),
    ("pd_op.batched_gemm", "Paddle 3.3.1 has no CPU kernel for it either"),
    ("pd_op.not_an_op", "Paddle 3.3.1 registers no op of that name"),
])
def test_an_op_without_a_kernel_names_it_and_says_whether_paddle_runs_it(name, why):
    prog = pir.load(TESTDATA / "pir" / "mlp.json")
    prog.block.append(Operation(name, [], [dense("float32", [2])]))
    with pytest.raises(ExecutionError) as e:
        run(prog, {}, {})                    # refused before anything runs: no feed is asked for
    msg = str(e.value)
    assert f"op 16 ({name})" in msg and f"no kernel for PIR op '{name}'" in msg and why in msg


def test_a_failing_kernel_names_the_op_and_its_operands():
    """A program that lies about a parameter's shape: one line naming the op, its result and operands."""
    spec, prog, feeds, params, _ = _load("mlp_bwd")
    prog.value("fc_2.b_0").type = dense("float32", [7])
    with pytest.raises(ExecutionError) as e:
        run(prog, feeds, {**params, "fc_2.b_0": np.zeros(7, np.float32)}, fetch=["%16"])
    msg = str(e.value)
    assert "mlp_bwd.json: op 7 (pd_op.add), var '%8': kernel failed on operands [(2, 8), (7,)]: ValueError" in msg
    prog.value("fc_2.b_0").type = dense("float32", [8])
    prog.value("fc_3.w_0").type = dense("float32", [7, 1])
    with pytest.raises(ExecutionError, match=r"op 9 \(pd_op.matmul\), var '%10': matmul: shapes X\(2, 8\) and "
                                             r"Y\(7, 1\)"):
        run(prog, feeds, {**params, "fc_3.w_0": np.zeros((7, 1), np.float32)}, fetch=["%16"])


def test_check_nan_names_the_first_op_writing_one():
    spec, prog, feeds, params, _ = _load("mlp_bwd")
    bad = {**params, "fc_2.b_0": np.full(8, np.inf, np.float32)}
    with np.errstate(all="ignore"):
        assert not np.isfinite(run(prog, feeds, bad, fetch=["%16"])["%16"])
    with pytest.raises(ExecutionError, match=r"op 7 \(pd_op.add\), var '%8': produced NaN or Inf"):
        run(prog, feeds, bad, fetch=["%16"], check_nan=True)


def test_while_step_limit_and_timeout():
    spec, prog, feeds, params, _ = _load("while")
    with pytest.raises(ExecutionLimitError, match=r"op 6 \(pd_op.while\), var '%7': stopped after 2 steps"):
        run(prog, feeds, params, max_while_steps=2)
    assert run(prog, feeds, params, max_while_steps=3)      # it takes 3


def test_progress_and_timeout():
    spec, prog, feeds, params, _ = _load("cond_bwd-pos")
    seen = []
    run(prog, feeds, params, progress=lambda done, total, name: seen.append((done, total, name)))
    assert seen[0][0] == 0 and seen[-1][0] == seen[-1][1] - 1 and [n for *_, n in seen].count("pd_op.if") == 2
    exe = PirExecutor(timeout=1e-9)
    with pytest.raises(ExecutionLimitError, match="timed out before this op: the run took longer than its time "
                                                  "limit of 1e-09 s"):
        exe.run(prog, feeds, params)


# --------------------------------------------------------------------------
# Glue and control flow on hand-made programs
# --------------------------------------------------------------------------
def _program():
    p = pir.Program()
    p.source = "hand.json"
    return p


def _op(p, block, op_name, operands=(), types=(), regions=0, **attrs):
    op = Operation(op_name, list(operands), list(types), attrs, num_regions=regions)
    (block or p.block).append(op)
    return op


def test_combine_split_add_n_int_arrays_and_shadow_output():
    p = _program()
    x = _op(p, None, "pd_op.data", types=[dense("float32", [2, 3])], name=Attr.str_("x"),
            shape=Attr.int_array([2, 3]), dtype=Attr.dtype("float32")).results[0]
    t = dense("float32", [2, 3])
    vec = _op(p, None, "builtin.combine", [x, x, x], [VectorType((t, t, t))]).results[0]
    s = _op(p, None, "pd_op.add_n", [vec], [t]).results[0]
    axis = _op(p, None, "pd_op.full_int_array", types=[dense("int64", [1])], value=Attr.int_array([1]),
               dtype=Attr.dtype("int64")).results[0]
    m = _op(p, None, "pd_op.sum", [s, axis], [dense("float32", [2])], keepdim=Attr.bool_(False),
            dtype=Attr.dtype("float32")).results[0]
    halves = _op(p, None, "pd_op.split_with_num",
                 [x, _op(p, None, "pd_op.full", types=[dense("int32", [1])], value=Attr.f32(1),
                         dtype=Attr.dtype("int32"), shape=Attr.int_array([1])).results[0]],
                 [VectorType((dense("float32", [2, 1]),) * 3)], num=Attr.i32(3)).results[0]
    parts = _op(p, None, "builtin.split", [halves], [dense("float32", [2, 1])] * 3).results
    _op(p, None, "builtin.shadow_output", [m], output_name=Attr.str_("row_sums"))
    make_value_ids(p)
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert default_fetch(p) == ["row_sums"]
    out = run(p, {"x": xv}, {}, fetch=[f"%{m.id}", f"%{parts[2].id}", f"%{axis.id}", "row_sums"])
    np.testing.assert_array_equal(out[f"%{m.id}"], (3 * xv).sum(1))
    np.testing.assert_array_equal(out["row_sums"], (3 * xv).sum(1))
    np.testing.assert_array_equal(out[f"%{parts[2].id}"], xv[:, 2:])
    assert out[f"%{axis.id}"].dtype == np.int64 and out[f"%{axis.id}"].tolist() == [1]


def test_while_with_block_args_captures_and_a_stack():
    """A while whose body reads an outer value directly (implicit capture) and pushes its
    loop variable each step; a second while pops them back in reverse."""
    p = _program()
    f32, i64, b = dense("float32", [2]), dense("int64", [1]), dense("bool", [1])

    def full(block, value, t, dtype):
        return _op(p, block, "pd_op.full", types=[t], value=Attr.f32(value), dtype=Attr.dtype(dtype),
                   shape=Attr.int_array([t.dims[0]] if t.dims else [])).results[0]

    stack, inlet, outlet = _op(p, None, "cf.stack_create", types=[OpaqueType("2.t_stack"), OpaqueType("2.t_inlet"),
                                                                  OpaqueType("2.t_outlet")]).results
    x = _op(p, None, "pd_op.data", types=[f32], name=Attr.str_("x"), shape=Attr.int_array([2]),
            dtype=Attr.dtype("float32")).results[0]
    step = full(None, 1.5, f32, "float32")                        # captured by the body
    i0, n = full(None, 0, i64, "int64"), full(None, 3, i64, "int64")
    c0 = _op(p, None, "pd_op.less_than", [i0, n], [b]).results[0]
    w = _op(p, None, "pd_op.while", [c0, i0, x], [i64, f32], regions=1)
    body = w.regions[0].add_block()
    ai, av = body.add_arg(i64), body.add_arg(f32)
    one = full(body, 1, i64, "int64")
    i1 = _op(p, body, "pd_op.add", [ai, one], [i64]).results[0]
    v1 = _op(p, body, "pd_op.multiply", [av, step], [f32]).results[0]
    _op(p, body, "cf.tuple_push", [inlet, av])
    c1 = _op(p, body, "pd_op.less_than", [i1, n], [b]).results[0]
    _op(p, body, "cf.yield", [c1, i1, v1])
    has = _op(p, None, "cf.has_elements", [stack], [b]).results[0]
    w2 = _op(p, None, "pd_op.while", [has, x], [f32], regions=1)
    body2 = w2.regions[0].add_block()
    acc = body2.add_arg(f32)
    popped = _op(p, body2, "cf.tuple_pop", [outlet], [f32]).results[0]
    acc2 = _op(p, body2, "pd_op.subtract", [acc, popped], [f32]).results[0]
    more = _op(p, body2, "cf.has_elements", [stack], [b]).results[0]
    _op(p, body2, "cf.yield", [more, acc2])
    make_value_ids(p)
    xv = np.array([1.0, 2.0], np.float32)
    out = run(p, {"x": xv}, {}, fetch=[f"%{w.results[1].id}", f"%{w2.results[0].id}", f"%{w.results[0].id}"])
    np.testing.assert_allclose(out[f"%{w.results[1].id}"], xv * 1.5 ** 3)
    np.testing.assert_allclose(out[f"%{w2.results[0].id}"], xv - xv * (1 + 1.5 + 1.5 ** 2))
    assert out[f"%{w.results[0].id}"].tolist() == [3]
