"""PIR -> legacy (pybackward/convert/to_legacy.py) on the PIR goldens of testdata/pir/.

Every golden converts to a legacy program pybackward's loader accepts, the same
bytes each time, with a legacy op for every PIR computation (nothing dropped);
the two that cannot be expressed are refused in one line naming the op. The
converted programs compute what Paddle's PIR Executor computed on the originals
(testdata/pir_values/, recorded by Paddle 3.3.1): pybackward's legacy
interpreter gives every recorded value that has a var (all but the constants
folded back into attributes), within the PIR interpreter's tolerances; with a
live Paddle, Paddle's own legacy Executor (FLAGS_enable_pir_api=0) gives them
too, and its legacy `load_inference_model` loads the converted inference models.
"""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from conftest import TESTDATA, run_paddle
from pybackward import pir
from pybackward.base.attrs import FLOAT, FLOATS, INTS
from pybackward.base.errors import PyBackwardError
from pybackward.convert import record
from pybackward.convert.to_legacy import (SPECIAL_OPS, ConversionError, NoLegacyCounterpartError, convert, refusals,
                                          resolve, to_legacy)
from pybackward.interpreter.executor import Executor, Scope
from pybackward.interpreter.pir_executor import PaddleGlobalRng
from pybackward.interpreter.pir_executor import run as run_pir
from pybackward.legacy.program import Program as LProgram
from pybackward.legacy.program import read_program
from pybackward.pir.model import Operation
from pybackward.pir.types import DenseTensorType, dense

VALUES = TESTDATA / "pir_values"
RUNS = json.loads((VALUES / "manifest.json").read_text())["runs"]
RTOL, ATOL = 1e-5, 1e-6     # tests/interpreter/test_pir_executor.py's
#: The goldens that are programs (not older format versions, re-saves or the printer's bare ops).
GOLDENS = sorted(p.stem for p in (TESTDATA / "pir").glob("*.json")
                 if "." not in p.stem and not p.stem.startswith("v") and p.stem not in ("print_zoo", "manifest"))
REFUSED = {"pylayer": 1, "pylayer_bwd": 2}          # pd_op.pylayer: its backward is a Python function
CONVERTED = [c for c in GOLDENS if c not in REFUSED]
RUNNABLE = sorted(r for r in RUNS if RUNS[r]["case"] not in REFUSED)


def _load(case: str) -> pir.Program:
    return pir.load(TESTDATA / "pir" / f"{case}.json")


def _ops(prog: LProgram):
    return [op for b in prog.blocks for op in b.ops]


def run_legacy(program, feeds: dict, params: dict, fetch: list[str], seed: int) -> dict[str, np.ndarray]:
    """pybackward's legacy interpreter on `program`, its random ops drawing what Paddle's
    draw after `paddle.seed(seed)` (dropout): fetch name -> value."""
    exe = Executor()
    exe.rng = PaddleGlobalRng(seed)
    scope = Scope()
    for k, v in params.items():
        scope.set(k, v)
    return dict(zip(fetch, exe.run(program, feed=feeds, fetch_list=fetch, scope=scope)))


def _legacy_run(conv, spec, feeds, params, refs):
    ids = conv.by_id()
    got = run_legacy(conv.program, feeds, params, [ids[r] for r in refs], spec["paddle_seed"])
    return {r: got[ids[r]] for r in refs}


def _assert_same(have, want, what):
    assert have.dtype == want.dtype, f"{what}: dtype {have.dtype}, Paddle {want.dtype}"
    assert have.shape == want.shape, f"{what}: shape {have.shape}, Paddle {want.shape}"
    np.testing.assert_allclose(have, want, rtol=RTOL, atol=ATOL, err_msg=what)


# --------------------------------------------------------------------------
# Every golden converts
# --------------------------------------------------------------------------
def test_the_golden_list():
    assert set(CONVERTED) == {"cnn", "cnn_bwd", "cnn_infer", "cond", "cond_bwd", "cond_in_while",
                              "cond_in_while_bwd", "jit", "mlp", "mlp_bwd", "nan", "transformer",
                              "transformer_bwd", "while", "while_bwd", "zoo"}


@pytest.mark.parametrize("case", CONVERTED)
def test_every_golden_converts_op_for_op(case):
    """A valid legacy program (pybackward's loader checks vars, slots, blocks), the same bytes
    from every conversion, and a legacy op of the right type for every PIR computation."""
    prog = _load(case)
    data = to_legacy(prog).to_bytes()
    assert to_legacy(_load(case)).to_bytes() == data
    legacy = read_program(data, source=case)
    have = Counter(op.type for op in _ops(legacy))
    want = Counter(r.map.legacy_type for op in prog.walk()
                   if op.name not in SPECIAL_OPS and (r := resolve(op.name)) is not None)
    assert not want - have, f"PIR computations with no legacy op: {dict(want - have)}"
    assert not refusals(prog)


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_pylayer_is_refused_in_one_line_naming_it(case):
    with pytest.raises(NoLegacyCounterpartError) as e:
        to_legacy(_load(case))
    msg = str(e.value)
    assert "\n" not in msg and "'pd_op.pylayer'" in msg and f"{case}.json" in msg
    assert f"{REFUSED[case]} op{'s' if REFUSED[case] > 1 else ''} in the program" in msg
    assert refusals(_load(case)) == Counter({"pd_op.pylayer": REFUSED[case]})


def test_ops_with_no_legacy_counterpart_are_counted_never_dropped():
    prog = pir.Program()
    x = prog.block.append(Operation("pd_op.data", (), [dense("float32", (2,))],
                                    {"name": pir.Attr("0.a_str", "x")})).results[0]
    for name in ("pd_op.fused_nothing", "pd_op.fused_nothing", "pd_op.sparse_thing_sp"):
        x = prog.block.append(Operation(name, [x], [dense("float32", (2,))])).results[0]
    with pytest.raises(NoLegacyCounterpartError, match=r"^PIR op 'pd_op.fused_nothing' has no legacy counterpart "
                                                       r".*: 3 ops in the program have none \(also "
                                                       r"pd_op.sparse_thing_sp x1\); nothing was converted$"):
        to_legacy(prog)
    assert isinstance(NoLegacyCounterpartError("x"), PyBackwardError)


def test_the_printers_bare_ops_are_refused_in_one_line():
    """print_zoo is Paddle's unverified bare ops (a relu reading a combine of nothing): no program."""
    with pytest.raises(ConversionError) as e:
        to_legacy(_load("print_zoo"))
    assert "\n" not in str(e.value) and "pd_op.relu" in str(e.value) and "print_zoo.json" in str(e.value)


# --------------------------------------------------------------------------
# Paddle's PIR values
# --------------------------------------------------------------------------
@pytest.mark.parametrize("run_name", RUNNABLE)
def test_the_legacy_interpreter_gives_paddles_pir_values(run_name):
    spec = RUNS[run_name]
    conv = convert(pir.load(TESTDATA / spec["program"]))
    feeds = dict(np.load(VALUES / f"{run_name}.feeds.npz"))
    params = dict(np.load(VALUES / f"{run_name}.params.npz"))
    want = dict(np.load(VALUES / f"{run_name}.values.npz"))
    ids = conv.by_id()
    folded = {r: spec["values"][r] for r in want if r not in ids}
    assert set(folded.values()) <= {"pd_op.full", "pd_op.full_int_array"}, folded
    refs = [r for r in want if r in ids]
    assert len(refs) >= 8
    got = _legacy_run(conv, spec, feeds, params, refs)
    for r in refs:
        _assert_same(got[r], want[r], f"{run_name} {r} ({spec['values'][r]}) as {ids[r]}")


def _zoo():
    prog = _load("zoo")
    feeds = {'in"put\\数据': np.random.default_rng(0).standard_normal((2, 3, 4, 4)).astype(np.float32)}
    return prog, feeds


def test_zoo_computes_what_the_pir_interpreter_computes():
    """zoo (Paddle's PIR executor cannot fetch its values): arrays, split into a vector,
    assign_value_, interpolations, complex, casts, +-inf constants nobody reads; every
    value with a var equals the PIR interpreter's (the bfloat16 cast, which NumPy cannot
    hold, left out)."""
    prog, feeds = _zoo()
    bf16 = next(op for op in prog.ops if op.name == "pd_op.cast" and op.attr("dtype") == "bfloat16")
    prog.block.remove(bf16)
    conv = convert(prog)
    ids = conv.by_id()
    refs = [f"%{v.id}" for op in prog.ops for v in op.results
            if isinstance(v.type, DenseTensorType) and f"%{v.id}" in ids]
    assert len(refs) == 48                     # the 7 constants nobody reads are kept too
    want = run_pir(prog, feeds, {}, fetch=refs)
    got = dict(zip(refs, Executor().run(conv.program, feed=feeds, fetch_list=[ids[r] for r in refs])))
    for r in refs:
        _assert_same(got[r], want[r], f"zoo {r} as {ids[r]}")


# --------------------------------------------------------------------------
# What the converted program looks like
# --------------------------------------------------------------------------
def test_names_parameters_data_and_gradients():
    conv = convert(_load("mlp_bwd"))
    block = conv.program.global_block()
    for p in ("fc_2.w_0", "fc_2.b_0", "fc_3.w_0", "fc_3.b_0"):
        v = block.vars[p]
        assert v.persistable and v.is_parameter and not v.stop_gradient
        assert f"{p}@GRAD" in block.vars and block.vars[f"{p}@GRAD"].shape == v.shape
    for d in ("x", "y"):
        assert block.vars[d].desc.need_check_feed and not block.vars[d].persistable
    ops = block.ops
    assert [op.type for op in ops[:3]] == ["matmul_v2", "elementwise_add", "relu"]
    assert ops[0].output("Out") == ["matmul_v2_0.tmp_0"] and ops[2].output("Out") == ["relu_0.tmp_0"]
    seed = next(op for op in ops if op.type == "fill_any_like")
    assert seed.output("Out") == ["mean_0.tmp_0@GRAD"] and seed.attr("op_role") == 1
    relu_grad = next(op for op in ops if op.type == "relu_grad")
    assert relu_grad.output("X@GRAD") == ["elementwise_add_0.tmp_0@GRAD"]
    assert all(op.attr("op_role") == (1 if op.type.endswith("_grad") or op is seed else 0) for op in ops)
    assert [op.type for op in ops if "feed" in op.type or "fetch" in op.type] == []   # training: no feed ops


def test_attributes_passed_as_tensors_are_folded_back_or_read_from_tensor_slots():
    cnn = to_legacy(_load("cnn_bwd"))
    types = Counter(op.type for op in _ops(cnn))
    assert types["fill_constant"] == 0 and "assign_value" not in types     # every full fed an attribute
    ops = {op.type: op for op in _ops(cnn)}
    assert ops["pool2d"].attr("ksize") == [2, 2] and ops["pool2d"].attr("strides") == [2, 2]
    # PIR widened these to int64[] / double (version patches 2, 4); legacy protos want int / float
    assert ops["pool2d"].attr_type("strides") == INTS and ops["pool2d"].attr_type("paddings") == INTS
    zoo = {op.type: op for op in _ops(to_legacy(_load("zoo")))}
    assert zoo["bilinear_interp_v2"].attr_type("scale") == FLOATS
    assert zoo["leaky_relu"].attr_type("alpha") == FLOAT and zoo["cast"].attr("in_dtype") == 5
    assert ops["dropout"].attr("dropout_prob") == pytest.approx(0.5)
    assert ops["reshape2"].attr("shape") == [1, -1, 1, 1] and ops["reshape2"].output("XShape")
    assert ops["reshape2_grad"].input("XShape") == ops["reshape2"].output("XShape")
    means = [op for op in _ops(cnn) if op.type in ("reduce_mean", "reduce_mean_grad")]
    assert len(means) == 4 and all(op.attr("dim") == [] for op in means)
    # a scale read from a stack inside the backward while is computed: the ScaleTensor slot
    scales = [op for op in _ops(to_legacy(_load("while_bwd"))) if op.type == "scale"]
    assert [op.input("ScaleTensor") != [] for op in scales] == [False, False, True]
    assert scales[1].attr("scale") == pytest.approx(1.5) and scales[0].attr("bias") == 1.0


def test_combine_and_add_n_become_a_duplicable_sum_of_renamed_partials():
    ops = _ops(to_legacy(_load("transformer_bwd")))
    sums = [op for op in ops if op.type == "sum"]
    assert len(sums) == 2
    for s in sums:
        (out,) = s.output("Out")
        assert len(s.input("X")) >= 2 and out.endswith("@GRAD")
        assert all(x.startswith(out + "@RENAME@block0") for x in s.input("X"))
    grads = [op for op in ops if op.type == "transpose2_grad"]
    assert len(grads) == 4 and all(op.input("XShape") for op in grads)


def test_if_becomes_paddles_legacy_cond():
    prog = to_legacy(_load("cond"))
    top = [op.type for op in prog.global_block().ops]
    i = top.index("conditional_block")
    assert top[i:i + 5] == ["conditional_block", "logical_not", "conditional_block", "cast", "select_input"]
    true_b, false_b = [op for op in prog.global_block().ops if op.type == "conditional_block"]
    assert true_b.attr("is_scalar_condition") and false_b.attr("is_scalar_condition")
    assert false_b.input("Cond") == prog.global_block().ops[i + 1].output("Out")
    select = prog.global_block().ops[i + 4]
    assert select.input("X") == [false_b.output("Out")[-1], true_b.output("Out")[-1]]
    for cb in (true_b, false_b):
        sub = prog.block(cb.sub_block)
        assert sub.parent_idx == 0 and sub.ops[-1].type == "assign"
        assert sub.ops[-1].output("Out") == [cb.output("Out")[-1]]


def test_while_gets_fresh_loop_vars_and_stacks_become_tensor_arrays():
    src = _load("while_bwd")
    conv = convert(src)
    prog = conv.program
    loops = [op for op in prog.global_block().ops if op.type == "while"]
    assert len(loops) == 2
    fwd = loops[0]
    body = prog.block(fwd.sub_block)
    (cond,) = fwd.input("Condition")
    assert body.ops[-3].output("Out") == [cond]         # the body recomputes its condition last
    types = Counter(op.type for op in body.ops)
    # 8 values pushed per step, 2 of them read by the backward (sin's input, the 1.5): 2 arrays
    assert types["write_to_array"] == 2 and types["increment"] == 1
    back = Counter(op.type for op in prog.block(loops[1].sub_block).ops)
    assert back["read_from_array"] == 2 and back["increment"] == 1 and back["greater_than"] == 1
    # the inits keep their values: the loop runs on assign copies
    assert [op.type for op in prog.global_block().ops[:2]] == ["fill_constant", "fill_constant"]
    w = next(op for op in src.ops if op.name == "pd_op.while")
    init, result = conv.var_of(w.operands[2]), conv.var_of(w.results[1])
    assert init == "elementwise_mul_0.tmp_0" and result not in (None, init)
    assert prog.global_block().ops[[op.type for op in prog.global_block().ops].index("while") - 2].input("X") == [init]


def test_inference_programs_get_feed_and_fetch_ops():
    for case, feeds in (("cnn_infer", ["img"]), ("jit", ["x"])):
        prog = to_legacy(_load(case))
        block = prog.global_block()
        ops = block.ops
        assert [(op.type, op.input("X"), op.output("Out"), op.attr("col")) for op in ops[:len(feeds)]] == \
            [("feed", ["feed"], [n], i) for i, n in reversed(list(enumerate(feeds)))]
        assert ops[-1].type == "fetch" and ops[-1].output("Out") == ["fetch"] and ops[-1].attr("col") == 0
        assert ops[-1].input("X") == ["fetch_name_0"] == ops[-2].output("Out")     # the fetch name is kept
        assert block.vars["feed"].persistable and block.vars["fetch"].persistable


# --------------------------------------------------------------------------
# Paddle's legacy Executor and loader on the converted programs
# --------------------------------------------------------------------------
_PADDLE_SCRIPT = r"""
import json, sys
import numpy as np
import paddle
paddle.enable_static()
jobs = json.load(open(sys.argv[1]))
place = paddle.CPUPlace()
for job in jobs:
    try:
        scope = paddle.static.Scope()
        with paddle.static.scope_guard(scope):
            exe = paddle.static.Executor(place)
            paddle.seed(job["seed"])
            if job.get("prefix"):
                prog, feed_names, fetch_vars = paddle.static.load_inference_model(job["prefix"], exe)
                feeds = dict(np.load(job["feeds"]))
                assert sorted(feed_names) == sorted(feeds), (feed_names, list(feeds))
                out = exe.run(prog, feed=feeds, fetch_list=fetch_vars)
                job["fetch"] = [v.name for v in fetch_vars]
            else:
                prog = paddle.static.Program.parse_from_string(open(job["program"], "rb").read())
                for k, v in np.load(job["params"]).items():
                    scope.var(k).get_tensor().set(v, place)
                out = exe.run(prog, feed=dict(np.load(job["feeds"])), fetch_list=job["fetch"])
        np.savez(job["out"], *out)
    except Exception as e:
        job["error"] = (type(e).__name__ + ": " + str(e))[-2000:]
json.dump(jobs, open(sys.argv[2], "w"))
print("ok", len(jobs))
"""


def _paddle_jobs(jobs: list[dict], tmp_path) -> list[dict]:
    """Runs `_PADDLE_SCRIPT`'s jobs in one Paddle process; the jobs back, each with its `out`
    file written (fails naming every job Paddle could not run)."""
    spec_file, result = tmp_path / "jobs.json", tmp_path / "results.json"
    spec_file.write_text(json.dumps(jobs))
    r = run_paddle(_PADDLE_SCRIPT, str(spec_file), str(result))
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stderr[-3000:]
    done = json.loads(result.read_text())
    errors = {j["name"]: j["error"] for j in done if "error" in j}
    assert not errors, errors
    return done


@pytest.mark.paddle
def test_paddles_legacy_executor_gives_its_pir_values_and_loads_the_inference_models(tmp_path):
    from pybackward.tensors.paddle_files import save_arrays
    jobs, wants = [], {}
    for run_name in RUNNABLE:
        spec = RUNS[run_name]
        conv = convert(pir.load(TESTDATA / spec["program"]))
        ids = conv.by_id()
        want = dict(np.load(VALUES / f"{run_name}.values.npz"))
        refs = [r for r in want if r in ids]
        model = tmp_path / f"{run_name}.pdmodel"
        model.write_bytes(conv.program.to_bytes())
        assert record.has_record(read_program(model.read_bytes()))     # Paddle runs it with the PIR record
        jobs.append(dict(name=run_name, program=str(model), params=str(VALUES / f"{run_name}.params.npz"),
                         feeds=str(VALUES / f"{run_name}.feeds.npz"), fetch=[ids[r] for r in refs],
                         seed=spec["paddle_seed"], out=str(tmp_path / f"{run_name}.out.npz")))
        wants[run_name] = [(r, want[r], f"{run_name} {r} ({spec['values'][r]}) as {ids[r]}") for r in refs]
    # the same programs without the record: Paddle computes the same bits (the record is ignored)
    for run_name in ("mlp_bwd", "cond_in_while_bwd-pos", "while_bwd"):
        job = dict(next(j for j in jobs if j["name"] == run_name))
        plain = tmp_path / f"{run_name}.plain.pdmodel"
        plain.write_bytes(to_legacy(pir.load(TESTDATA / RUNS[run_name]["program"]), record=False).to_bytes())
        assert not record.has_record(read_program(plain.read_bytes()))
        jobs.append(dict(job, name=f"plain:{run_name}", program=str(plain),
                         out=str(tmp_path / f"{run_name}.plain.out.npz")))
        wants[f"plain:{run_name}"] = wants[run_name]
    # zoo: Paddle's legacy Executor against pybackward's PIR interpreter (Paddle's PIR one cannot fetch it)
    prog, feeds = _zoo()
    conv = convert(prog)
    ids = conv.by_id()
    refs = [f"%{v.id}" for op in prog.ops for v in op.results
            if isinstance(v.type, DenseTensorType) and f"%{v.id}" in ids and v.type.dtype != "bfloat16"]
    bf16 = next(op for op in prog.ops if op.name == "pd_op.cast" and op.attr("dtype") == "bfloat16")
    (tmp_path / "zoo.pdmodel").write_bytes(conv.program.to_bytes())
    np.savez(tmp_path / "zoo.feeds.npz", **feeds)
    np.savez(tmp_path / "zoo.params.npz")
    jobs.append(dict(name="zoo", program=str(tmp_path / "zoo.pdmodel"), params=str(tmp_path / "zoo.params.npz"),
                     feeds=str(tmp_path / "zoo.feeds.npz"), fetch=[ids[r] for r in refs], seed=0,
                     out=str(tmp_path / "zoo.out.npz")))
    prog.block.remove(bf16)
    zoo_want = run_pir(prog, feeds, {}, fetch=refs)
    wants["zoo"] = [(r, zoo_want[r], f"zoo {r} as {ids[r]}") for r in refs]
    # the inference models, saved as legacy files and read by Paddle's legacy loader
    for case in ("cnn_infer", "jit"):
        conv = convert(_load(case))
        prefix = tmp_path / "infer" / case
        prefix.parent.mkdir(exist_ok=True)
        (tmp_path / "infer" / f"{case}.pdmodel").write_bytes(conv.program.to_bytes())
        assert record.has_record(conv.program)          # load_inference_model reads it with the record
        params = dict(np.load(VALUES / f"{case}.params.npz"))
        save_arrays(str(prefix) + ".pdiparams", params, conv.program)
        fetch_op = next(op for op in _load(case).ops if op.name == "pd_op.fetch")
        ref = f"%{fetch_op.operands[0].id}"
        jobs.append(dict(name=f"load:{case}", prefix=str(prefix), feeds=str(VALUES / f"{case}.feeds.npz"),
                         seed=RUNS[case]["paddle_seed"], out=str(tmp_path / f"load_{case}.out.npz")))
        want = dict(np.load(VALUES / f"{case}.values.npz"))[ref]
        wants[f"load:{case}"] = [(ref, want, f"load_inference_model({case}) {ref}")]
    done = _paddle_jobs(jobs, tmp_path)
    for job in done:
        got = np.load(job["out"])
        items = wants[job["name"]]
        assert len(got.files) == len(items)
        for k, (ref, want, what) in enumerate(items):
            _assert_same(np.asarray(got[f"arr_{k}"]), want, what)
        if job["name"].startswith("plain:"):
            with_record = np.load(next(j for j in done if j["name"] == job["name"][6:])["out"])
            for k in got.files:
                np.testing.assert_array_equal(got[k], with_record[k], err_msg=f"{job['name']} {k}")


# --------------------------------------------------------------------------
# The RNN goldens of testdata/pir_backward/ (issue #34): rnn's dropout state, array gradients
# --------------------------------------------------------------------------
PIR_BACKWARD = TESTDATA / "pir_backward"
RNN_STATE = ["crnn_ctc", "crnn_ctc.bwd", "gru", "gru.bwd", "lstm", "lstm.bwd", "seq2seq_while", "simplernn",
             "simplernn.bwd"]
ARRAY_GRADS = ["birnn_gru_cell.bwd", "rnn_lstm_cell.bwd", "rnn_simple_cell_reverse.bwd", "seq2seq_while.bwd"]
#: The backward ones with Paddle's PIR values (`<c>.values.npz`, keyed `%N`).
RNN_VALUES = ["birnn_gru_cell", "crnn_ctc", "gru", "lstm", "rnn_lstm_cell", "rnn_simple_cell_reverse",
              "seq2seq_while", "simplernn"]
#: PIR op -> the legacy op types it becomes, beyond the op map (array gradients).
ARRAY_LEGACY = {"pd_op.tensor_to_array": {"tensor_array_to_tensor_grad"},
                "pd_op.create_array_like": {"lod_array_length", "fill_constant", "less_than", "while",
                                            "read_from_array", "fill_any_like", "write_to_array", "increment"}}


def _pir_case(name: str):
    import sys
    sys.path.insert(0, str(TESTDATA.parent / "tests" / "backward" / "pir"))
    from pir_cases import cases
    return cases(names=[name])[0]


@pytest.mark.parametrize("case", RNN_STATE + ARRAY_GRADS)
def test_the_rnn_goldens_convert_op_for_op(case):
    """All 13 (refused before): a valid legacy program, the same bytes each time, a legacy op
    for every PIR computation, the array gradients' legacy ops included."""
    prog = pir.load(PIR_BACKWARD / f"{case}.json")
    assert not refusals(prog)
    data = to_legacy(prog).to_bytes()
    assert to_legacy(pir.load(PIR_BACKWARD / f"{case}.json")).to_bytes() == data
    legacy = read_program(data, source=case)
    have = Counter(op.type for op in _ops(legacy))
    want = Counter(r.map.legacy_type for op in prog.walk()
                   if op.name not in SPECIAL_OPS and (r := resolve(op.name)) is not None)
    assert not want - have, f"PIR computations with no legacy op: {dict(want - have)}"
    for name, types in ARRAY_LEGACY.items():
        if any(op.name == name for op in prog.walk()):
            assert types <= set(have), (name, types - set(have))


def test_a_computed_rnn_dropout_state_is_written_in_place_as_paddles_legacy_gru_does():
    """Paddle's legacy `rnn` has no DropoutState input, only the output rnn_grad reads back;
    its legacy `nn.GRU` makes that a plain (not persistable, not a parameter) uint8 var. The
    PIR parameter becomes that var, written by rnn and read by rnn_grad."""
    legacy = to_legacy(pir.load(PIR_BACKWARD / "gru.bwd.json"))
    block = legacy.global_block()
    rnn = next(op for op in block.ops if op.type == "rnn")
    grad = next(op for op in block.ops if op.type == "rnn_grad")
    assert "DropoutState" not in rnn.input_names
    assert rnn.output("DropoutState") == ["dropout_state__non_persistable"] == grad.input("DropoutState")
    v = block.vars["dropout_state__non_persistable"]
    assert not v.persistable and not v.is_parameter and v.dtype == np.uint8
    assert all(block.vars[p].persistable and block.vars[p].is_parameter
               for p in rnn.input("WeightList"))          # the real parameters stay parameters
    # PIR's in-place form `pd_op.rnn_` (dropout_state_in -> dropout_state_out) alike
    prog = pir.load(PIR_BACKWARD / "gru.json")
    next(op for op in prog.ops if op.name == "pd_op.rnn").name = "pd_op.rnn_"
    rnn = next(op for op in to_legacy(prog).global_block().ops if op.type == "rnn")
    assert rnn.output("DropoutState") == ["dropout_state__non_persistable"] and "DropoutState" not in rnn.input_names


def test_vector_gradients_are_named_after_the_vars_they_belong_to():
    """A grad op's vector result in slot `X@GRAD` (rnn_grad's WeightList@GRAD, concat_grad's
    X@GRAD) gets `x@GRAD` per item, as Paddle's legacy pass names them: the parameters'
    gradients are `w@GRAD` (they were `rnn_grad_0.tmp_N` before)."""
    block = to_legacy(pir.load(PIR_BACKWARD / "lstm.bwd.json")).global_block()
    grad = next(op for op in block.ops if op.type == "rnn_grad")
    weights = next(op for op in block.ops if op.type == "rnn").input("WeightList")
    assert len(weights) == 16 and grad.output("WeightList@GRAD") == [w + "@GRAD" for w in weights]
    assert all(block.vars[w + "@GRAD"].shape == block.vars[w].shape for w in weights)
    block = to_legacy(pir.load(PIR_BACKWARD / "birnn_gru_cell.bwd.json")).global_block()
    concat = next(op for op in block.ops if op.type == "concat")
    grad = next(op for op in block.ops if op.type == "concat_grad")
    assert grad.output("X@GRAD") == [x + "@GRAD" for x in concat.input("X")]


def test_a_constant_rnn_dropout_state_gets_a_var_of_its_own():
    """Paddle's translator gives rnn a zero `full` for its dropout state: legacy -> PIR -> legacy
    of the legacy GRU (a TypeError before) writes DropoutState to a var of its own, with no
    op for the constant (no legacy op reads it)."""
    import pybackward
    from pybackward.convert.to_pir import to_pir
    translated = to_pir(pybackward.load(TESTDATA / "models" / "gru" / "forward.pb"))
    rnn_op = next(op for op in translated.ops if op.name == "pd_op.rnn")
    assert rnn_op.operands[4].defining_op.name == "pd_op.full"
    legacy = to_legacy(translated)
    rnn = next(op for op in legacy.global_block().ops if op.type == "rnn")
    (state,) = rnn.output("DropoutState")
    assert state.startswith("rnn_0.tmp_") and "DropoutState" not in rnn.input_names
    assert [op.type for op in legacy.global_block().ops].count("fill_constant") == \
        [op.name for op in translated.ops].count("pd_op.full") - 1


def test_array_gradients_become_tensor_array_to_tensor_grad_and_a_fill_loop():
    """`tensor_to_array(x, g)` -> `tensor_array_to_tensor_grad(X=x, Out@GRAD=g) -> x@GRAD` (the
    grad op Paddle's legacy backward gives tensor_array_to_tensor: X, Out@GRAD -> X@GRAD, axis,
    use_stack); `create_array_like(x)` -> a while loop writing `fill_any_like(x[i], val)`."""
    src = pir.load(PIR_BACKWARD / "rnn_simple_cell_reverse.bwd.json")
    conv = convert(src)
    block = conv.program.global_block()
    t2a = next(op for op in src.ops if op.name == "pd_op.tensor_to_array")
    grad = next(op for op in block.ops if op.type == "tensor_array_to_tensor_grad")
    assert grad.input("X") == [conv.var_of(t2a.operands[0])]
    assert grad.input("Out@GRAD") == [conv.var_of(t2a.operands[1])]
    assert grad.output("X@GRAD") == [conv.var_of(t2a.results[0])] == [grad.input("X")[0] + "@GRAD"]
    assert grad.attr("axis") == 0 and grad.attr("use_stack") is True and grad.attr("op_role") == 1
    like = next(op for op in src.ops if op.name == "pd_op.create_array_like")
    out = conv.var_of(like.results[0])
    loop = next(op for op in block.ops if op.type == "while" and out in op.output("Out"))
    body = conv.program.block(loop.sub_block)
    assert [op.type for op in body.ops] == ["read_from_array", "fill_any_like", "write_to_array", "increment",
                                            "less_than"]
    assert body.ops[0].input("X") == [conv.var_of(like.operands[0])] and body.ops[2].output("Out") == [out]
    assert body.ops[1].attr("value") == 0.0 and body.ops[1].attr("dtype") == -1


def _add_tensor_to_array(prog, axis):
    """A second tensor_to_array on the array the golden's reads (as a second array_to_tensor
    of it would give), with `axis`."""
    first = next(op for op in prog.ops if op.name == "pd_op.tensor_to_array")
    op = Operation("pd_op.tensor_to_array", list(first.operands), [first.results[0].type],
                   {"axis": pir.Attr("0.a_i32", axis), "use_stack": pir.Attr("0.a_bool", True)})
    prog.block.insert(prog.block.ops.index(first) + 1, op)
    return op


def test_a_second_array_gradient_of_one_array_reads_a_copy_and_a_negative_axis_is_normalised():
    """Paddle's tensor_array_to_tensor_grad keeps the items in scope vars named after X and
    shares them with its output: a second one on the same X would overwrite the first's
    result, so it reads an `assign` copy. Its kernel indexes dims with a negative axis as it
    is, so the axis is made non-negative (the stacked out_grad's rank)."""
    prog = pir.load(PIR_BACKWARD / "rnn_simple_cell_reverse.bwd.json")
    op = _add_tensor_to_array(prog, -3)
    conv = convert(prog)
    ops = conv.program.global_block().ops
    grads = [o for o in ops if o.type == "tensor_array_to_tensor_grad"]
    assert len(grads) == 2 and grads[0].input("X") != grads[1].input("X")
    copy = next(o for o in ops if o.type == "assign" and o.output("Out") == grads[1].input("X"))
    assert copy.input("X") == grads[0].input("X")
    assert grads[1].attr("axis") == 0 and conv.var_of(op.results[0]) == grads[1].output("X@GRAD")[0]


def test_a_constant_the_forward_pushed_is_folded_where_the_backward_pops_it():
    """seq2seq_while's backward `sum_grad` reads its axis popped from the loop's stack; the
    legacy reduce_sum_grad takes it only as an attribute: every push is the same
    `full_int_array`, so the attribute is that constant."""
    src = pir.load(PIR_BACKWARD / "seq2seq_while.bwd.json")
    fwd_sum = next(op for op in src.walk() if op.name == "pd_op.sum")
    axis = [int(a) for a in fwd_sum.operands[1].defining_op.attr("value")]
    legacy = to_legacy(src)
    grads = [op for op in _ops(legacy) if op.type == "reduce_sum_grad"]
    assert grads and all(op.attr("dim") == axis for op in grads)


@pytest.mark.parametrize("name", RNN_VALUES)
def test_the_rnn_goldens_compute_paddles_values(name):
    """pybackward's legacy interpreter on the converted backward gives Paddle's PIR values, and
    the PIR interpreter's on the original to the bit. crnn_ctc's `linear_0.b_0@GRAD` is
    2.3e-6 off Paddle's in one element (rtol 1e-5 allows 1.1e-6 there) in both interpreters
    alike: the kernels', not the conversion's."""
    case = _pir_case(name)
    prog = case.backward()
    conv = convert(prog)
    ids = conv.by_id()
    want = case.values()
    assert set(want) <= set(ids)
    exe = Executor()
    exe.rng = PaddleGlobalRng(2024)
    scope = Scope()
    for k, v in case.params().items():
        scope.set(k, v)
    got = dict(zip(want, exe.run(conv.program, feed=case.feeds(), fetch_list=[ids[r] for r in want], scope=scope)))
    ours = run_pir(prog, case.feeds(), case.params(), list(want), paddle_seed=2024)
    for r in want:
        np.testing.assert_array_equal(got[r], ours[r], err_msg=f"{name} {r} as {ids[r]}")
        if (name, r) == ("crnn_ctc", "%115"):
            np.testing.assert_allclose(got[r], want[r], rtol=RTOL, atol=3e-6)
            continue
        _assert_same(got[r], want[r], f"{name} {r} as {ids[r]}")


@pytest.mark.paddle
def test_paddles_legacy_executor_runs_the_converted_rnn_goldens(tmp_path):
    """Paddle 3.3.1's legacy Executor runs the 13 converted programs: the backward ones give
    Paddle's PIR values; the forward ones give what pybackward's legacy interpreter gives. And
    the create_array_like loop over items of different shapes and over an empty array."""
    jobs, wants = [], {}
    for name in RNN_STATE + ARRAY_GRADS:
        stem = name.split(".")[0]
        case = _pir_case(stem)
        prog = pir.load(PIR_BACKWARD / f"{name}.json")
        conv = convert(prog)
        ids = conv.by_id()
        feeds, params = case.feeds(), case.params()
        if name.endswith(".bwd") and stem in RNN_VALUES:
            want = case.values()
            refs = list(want)
        else:       # forward: every top-level float result (not rnn's Reserve: the kernel's
            # workspace), against the legacy interpreter
            refs = [f"%{v.id}" for op in prog.ops for k, v in enumerate(op.results)
                    if isinstance(v.type, DenseTensorType) and v.type.dtype == "float32" and f"%{v.id}" in ids
                    and op.name != "builtin.parameter" and not (op.name == "pd_op.rnn" and k == 3)]
            exe = Executor()
            exe.rng = PaddleGlobalRng(2024)
            scope = Scope()
            for k, v in params.items():
                scope.set(k, v)
            want = dict(zip(refs, exe.run(conv.program, feed=feeds, fetch_list=[ids[r] for r in refs],
                                          scope=scope)))
        model = tmp_path / f"{name}.pdmodel"
        model.write_bytes(conv.program.to_bytes())
        np.savez(tmp_path / f"{name}.feeds.npz", **feeds)
        np.savez(tmp_path / f"{name}.params.npz", **params)
        jobs.append(dict(name=name, program=str(model), params=str(tmp_path / f"{name}.params.npz"),
                         feeds=str(tmp_path / f"{name}.feeds.npz"), fetch=[ids[r] for r in refs], seed=2024,
                         out=str(tmp_path / f"{name}.out.npz")))
        wants[name] = [(r, want[r], f"{name} {r} as {ids[r]}") for r in refs]
    # create_array_like over items of different shapes, and over an empty array
    prog, feeds, (r0, r1, none) = _arrays_program()
    conv = convert(prog)
    (tmp_path / "arrays.pdmodel").write_bytes(conv.program.to_bytes())
    np.savez(tmp_path / "arrays.feeds.npz", **feeds)
    np.savez(tmp_path / "arrays.params.npz")
    jobs.append(dict(name="arrays", program=str(tmp_path / "arrays.pdmodel"),
                     params=str(tmp_path / "arrays.params.npz"), feeds=str(tmp_path / "arrays.feeds.npz"),
                     fetch=[conv.var_of(r0), conv.var_of(r1)], seed=2024, out=str(tmp_path / "arrays.out.npz")))
    wants["arrays"] = [("r0", np.full((2, 3), 0.5, np.float32), "arrays item 0"),
                       ("r1", np.full((4,), 0.5, np.float32), "arrays item 1")]
    done = _paddle_jobs(jobs, tmp_path)
    for job in done:
        got = np.load(job["out"])
        items = wants[job["name"]]
        assert len(got.files) == len(items) > 0
        for k, (ref, want, what) in enumerate(items):
            _assert_same(np.asarray(got[f"arr_{k}"]), want, what)


def _arrays_program():
    """data a [2, 3], b [4]; arr = [a, b] (items of different shapes); like = create_array_like(arr,
    0.5), read back at 0 and 1; none = create_array_like(an empty array, 1.0)."""
    from pybackward.pir.types import Attr, DenseTensorArrayType, scalar
    prog = pir.Program()
    b = prog.block

    def add(name, operands, types, attrs=None):
        return b.append(Operation(name, operands, types, attrs or {})).results

    arr_t = DenseTensorArrayType(scalar("float32"), ())
    (a,) = add("pd_op.data", (), [dense("float32", (2, 3))], {"name": pir.Attr("0.a_str", "a")})
    (bb,) = add("pd_op.data", (), [dense("float32", (4,))], {"name": pir.Attr("0.a_str", "b")})
    idx = []
    for k in (0, 1):
        idx += add("pd_op.full", (), [dense("int64", (1,))],
                   {"shape": Attr.int_array([1]), "value": Attr.f64(k), "dtype": Attr.dtype("int64"),
                    "place": Attr.place(1)})
    (arr,) = add("pd_op.create_array", (), [arr_t], {"dtype": Attr.dtype("float32")})
    add("pd_op.array_write_", [arr, a, idx[0]], [arr_t])
    add("pd_op.array_write_", [arr, bb, idx[1]], [arr_t])
    (like,) = add("pd_op.create_array_like", [arr], [arr_t], {"val": Attr.f32(0.5)})
    (r0,) = add("pd_op.array_read", [like, idx[0]], [dense("float32", (2, 3))])
    (r1,) = add("pd_op.array_read", [like, idx[1]], [dense("float32", (4,))])
    (empty,) = add("pd_op.create_array", (), [arr_t], {"dtype": Attr.dtype("float32")})
    (none,) = add("pd_op.create_array_like", [empty], [arr_t], {"val": Attr.f32(1.0)})
    feeds = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(4, np.float32)}
    return prog, feeds, (r0, r1, none)


def test_create_array_like_takes_items_of_any_shape_and_an_empty_array():
    """The legacy loop fills each item like the item (a [2, 3] and a [4] in one array), and
    runs no step on an empty array (whose like is an array nothing writes: the interpreter,
    unlike Paddle, cannot fetch such an array, so only the loop's length is fetched)."""
    prog, feeds, (r0, r1, none) = _arrays_program()
    conv = convert(prog)
    loop = next(op for op in conv.program.global_block().ops
                if op.type == "while" and conv.var_of(none) in op.output("Out"))
    (n,) = next(op for op in conv.program.global_block().ops
                if op.type == "less_than" and op.output("Out") == loop.input("Condition")).input("Y")
    got = Executor().run(conv.program, feed=feeds, fetch_list=[conv.var_of(r0), conv.var_of(r1), n])
    _assert_same(got[0], np.full((2, 3), 0.5, np.float32), "item 0")
    _assert_same(got[1], np.full((4,), 0.5, np.float32), "item 1")
    assert got[2].tolist() == [0]
    want = run_pir(prog, feeds, {}, fetch=[f"%{r0.id}", f"%{r1.id}"])
    np.testing.assert_array_equal(got[0], want[f"%{r0.id}"])
    np.testing.assert_array_equal(got[1], want[f"%{r1.id}"])
