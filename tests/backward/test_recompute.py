"""Recompute: `append_backward(..., checkpoints=[...])` equals Paddle 3.3.1's
output op for op and byte for byte (testdata/programs/recompute_*, written by
testdata/gen_recompute.py), and gives the gradients the plain backward gives,
bit for bit in float64 (dropout included)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import pybackward
from conftest import PROGRAMS, case_json, paddle_execute_many, require_paddle, run_paddle
from golden import diff_programs, paddle_seed_callstacks, replay, variants
from pybackward.backward import recompute
from pybackward.interpreter.gradcheck import to_float64
from pybackward.interpreter.executor import Executor, Scope

RECOMPUTE = [(c, v) for c, v in variants()
             if c.startswith("recompute_") and "checkpoints" in case_json(c)["variants"][v]]
#: Cases whose dropout masks Paddle draws at run time: no gradient values.
UNSEEDED = {"recompute_dropout_unseeded"}


def test_the_golden_set_covers_what_it_should():
    cases = {c for c, _ in RECOMPUTE}
    assert {"recompute_mlp", "recompute_mlp_dropout", "recompute_transformer", "recompute_cnn",
            "recompute_dropout_unseeded"} <= cases
    assert case_json("recompute_mlp")["variants"]["default"]["checkpoints"] == ["fc_1.tmp_2", "fc_3.tmp_2"]
    assert len(case_json("recompute_transformer")["variants"]["default"]["checkpoints"]) == 3
    assert len(RECOMPUTE) >= 14


@pytest.mark.parametrize("case,variant", RECOMPUTE, ids=[f"{c}-{v}" for c, v in RECOMPUTE])
def test_matches_paddle_op_for_op_and_byte_for_byte(case, variant):
    spec = case_json(case)["variants"][variant]
    prog, results, cb_logs, calls = replay(case, variant)   # checks the checkpoint names too
    gold = pybackward.load(PROGRAMS / case / spec["file"])
    assert diff_programs(prog, gold) == []
    assert results[-1] == spec["returned"]
    assert cb_logs[-1] == [] == spec["callbacks"]           # Paddle ignores callbacks here
    assert pybackward.dumps(prog) == (PROGRAMS / case / spec["file"]).read_bytes()
    # Paddle's two leftover blocks: its scratch copies, never run.
    assert [(b.idx, b.parent_idx) for b in prog.blocks[-2:]] == [(1, 0), (2, 1)]


@pytest.mark.parametrize("case,variant", [cv for cv in RECOMPUTE if cv[0] in
                                          ("recompute_mlp_dropout", "recompute_transformer")])
def test_only_the_seed_op_callstack_is_not_ours(case, variant):
    """Without replay's transplant, our seed ops differ from Paddle's in op_callstack only."""
    spec = case_json(case)["variants"][variant]
    prog = pybackward.load(PROGRAMS / case / "forward.pb")
    pybackward.append_backward(spec["targets"][0], program=prog, checkpoints=spec["checkpoints"])
    seeds = [op for b in prog.blocks for op in b.ops if op.type == "seed"]
    assert seeds and all(op.attr("op_callstack") == [] for op in seeds)
    gold = pybackward.load(PROGRAMS / case / spec["file"])
    assert diff_programs(prog, gold, ignore=frozenset({"op_callstack"})) == []
    problems = diff_programs(prog, gold)
    assert problems and all("(seed): attr op_callstack" in p for p in problems)
    paddle_seed_callstacks(prog, PROGRAMS / case / spec["file"])
    assert pybackward.dumps(prog) == (PROGRAMS / case / spec["file"]).read_bytes()


def test_seed_ops_and_dropouts_as_paddle_writes_them():
    spec = case_json("recompute_mlp_dropout")["variants"]["default"]
    prog = pybackward.load(PROGRAMS / "recompute_mlp_dropout" / "forward.pb")
    pybackward.append_backward(spec["targets"][0], program=prog, checkpoints=spec["checkpoints"])
    ops = prog.global_block().ops
    seed, drop = ops[3], ops[4]
    assert (seed.type, drop.type) == ("seed", "dropout")
    assert seed.output("Out") == ["seed_0.tmp_0"] and seed.attr("seed") == 2024
    assert seed.attr("force_cpu") is True and seed.attr("op_role") == 0
    assert drop.input_names == ["Seed", "X"] and drop.input("Seed") == ["seed_0.tmp_0"]
    assert not drop.has_attr("fix_seed") and not drop.has_attr("seed")
    again = [op for op in ops if op.type == "dropout" and op.attr("op_role") == 1]
    assert [op.input("Seed") for op in again] == [["seed_1.tmp_0"], ["seed_0.tmp_0"]]
    v = prog.global_block().var("seed_0.tmp_0")
    assert (v.shape, str(v.dtype), v.persistable) == ((1,), "int32", False)


# --------------------------------------------------------------------------
# Gradients
# --------------------------------------------------------------------------
def _run64(prog, case, fetch):
    d = PROGRAMS / case
    scope = Scope()
    for k, v in np.load(d / "params.npz").items():
        scope.set(k, v.astype(np.float64) if v.dtype.kind == "f" else v)
    feed = {k: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in np.load(d / "feeds.npz").items()}
    return dict(zip(fetch, Executor().run(prog, feed=feed, fetch_list=fetch, scope=scope)))


@pytest.mark.parametrize("case,variant", [cv for cv in RECOMPUTE if cv[0] not in UNSEEDED],
                         ids=[f"{c}-{v}" for c, v in RECOMPUTE if c not in UNSEEDED])
def test_gradients_equal_the_plain_ones_bit_for_bit_in_float64(case, variant):
    cj = case_json(case)
    spec = cj["variants"][variant]
    ng = set(spec["no_grad_set"] or ()) or None
    fwd = pybackward.load(PROGRAMS / case / "forward.pb")
    plain = to_float64(fwd)
    pairs = pybackward.append_backward(cj["loss"], program=plain, no_grad_set=ng)
    fetch = [cj["loss"]] + [g.name for _, g in pairs if g is not None]
    fetch += [f + "@GRAD" for f in cj["feeds"] if plain.global_block().has_var(f + "@GRAD")]
    ours = to_float64(fwd)
    pairs2, names = pybackward.append_backward(cj["loss"], program=ours, no_grad_set=ng,
                                               checkpoints=spec["checkpoints"])
    assert names == spec["checkpoint_names"]
    assert [(p.name, g.name) for p, g in pairs2] == [(p.name, g.name) for p, g in pairs]
    want, got = _run64(plain, case, fetch), _run64(ours, case, fetch)
    for n in fetch:
        assert want[n].dtype == np.float64
        np.testing.assert_array_equal(got[n], want[n], err_msg=n)


def test_unseeded_dropout_recomputes_the_same_mask():
    """seed 0: the seed op draws a seed at run time, once; both dropouts read it."""
    case = "recompute_dropout_unseeded"
    spec = case_json(case)["variants"]["default"]
    prog, *_ = replay(case, "default", record_callbacks=False)
    seed_op = prog.global_block().ops[3]
    assert seed_op.type == "seed" and seed_op.attr("seed") == 0
    d = PROGRAMS / case
    scope = Scope()
    for k, v in np.load(d / "params.npz").items():
        scope.set(k, v)
    fetch = ["dropout_0.tmp_1", "dropout_0.tmp_1.subprog_1", "dropout_0.tmp_0"]
    for seed in (1, 2):
        m, m2, out = Executor(seed=seed).run(prog, feed=dict(np.load(d / "feeds.npz")),
                                             fetch_list=fetch, scope=scope)
        np.testing.assert_array_equal(m, m2)
        assert 0 < m.mean() < 1
    assert spec["grads_file"] is None


# --------------------------------------------------------------------------
# The steps
# --------------------------------------------------------------------------
def test_segments_held_vars_and_renames_of_the_six_layer_mlp():
    prog = pybackward.load(PROGRAMS / "recompute_mlp" / "forward.pb")
    block = prog.global_block()
    loss = block.var("mean_0.tmp_0")
    from pybackward.analysis.path import find_op_path
    path = find_op_path(block, [loss], [], {"x"}, {})
    use = recompute.VarUse.of(path)
    names = recompute.sort_checkpoints(["fc_3.tmp_2", "tanh_0.tmp_0", "fc_1.tmp_2"], use)
    assert names == ["fc_1.tmp_2", "fc_3.tmp_2"]
    segs = recompute.find_segments(names, use, path, block)
    assert segs == [(0, 6), (6, 12)]
    assert recompute.held_vars(segs, use, path, block, names) == {"x", "fc_1.tmp_2", "fc_3.tmp_2"}
    assert recompute.find_segments(["fc_2.tmp_2"], use, path, block) == [(0, 9)]
    assert recompute.find_segments(["fc_0.tmp_0"], use, path, block) == []
    assert recompute.is_recompute_var("fc_0.tmp_0.subprog_12") and not recompute.is_recompute_var("fc_0.tmp_0")


def test_transformer_segments_skip_parallel_checkpoints():
    cj = case_json("recompute_transformer")
    prog = pybackward.load(PROGRAMS / "recompute_transformer" / "forward.pb")
    done = []
    loss = prog.var(cj["loss"])
    recompute.append_backward_with_checkpoints(
        prog, loss, prog.global_block().ops[-1], [], set(), cj["variants"]["parallel"]["checkpoints"],
        on_done=done.append)
    (r,) = done
    assert r.names == ["stack_0.tmp_0", "stack_1.tmp_0", "elementwise_add_0.tmp_0"]
    assert len(r.segments) == 2 and r.segments[0][0] == 0      # q..k has no segment: only k..h1
    assert "stack_2.tmp_0" in r.held                             # v crosses the border
    assert r.seeds == 1


# --------------------------------------------------------------------------
# Arguments and errors
# --------------------------------------------------------------------------
def _fresh(case="recompute_mlp"):
    return pybackward.load(PROGRAMS / case / "forward.pb")


def test_not_a_list_means_no_recompute_as_in_paddle():
    for ck in ((), [], None, ("fc_1.tmp_2",)):
        prog = _fresh()
        out = pybackward.append_backward("mean_0.tmp_0", program=prog, checkpoints=ck)
        assert isinstance(out, list) and len(prog.blocks) == 1
        assert pybackward.dumps(prog) == (PROGRAMS / "recompute_mlp" / "backward_plain.pb").read_bytes()


def test_bad_checkpoints_are_refused_and_leave_the_program_alone():
    before = (PROGRAMS / "recompute_mlp" / "forward.pb").read_bytes()
    for ck, err in ((["nope"], pybackward.VarNotFoundError), ([3], pybackward.ArgumentError),
                    ("everything", pybackward.ArgumentError)):
        prog = _fresh()
        with pytest.raises(err):
            pybackward.append_backward("mean_0.tmp_0", program=prog, checkpoints=ck)
        assert pybackward.dumps(prog) == before


def test_ops_with_sub_blocks_are_refused_atomically():
    case = "cond_block"
    prog = pybackward.load(PROGRAMS / case / "forward.pb")
    before = pybackward.dumps(prog)
    loss = case_json(case)["loss"]
    act = next(op.output_arg_names[0] for op in prog.global_block().ops
               if op.output_arg_names and op.sub_block is None and op.type != "fill_constant")
    with pytest.raises(pybackward.ArgumentError, match="sub_block"):
        pybackward.append_backward(loss, program=prog, checkpoints=[act])
    assert pybackward.dumps(prog) == before and prog.appending_grad_times == 0


def test_callbacks_are_not_called_with_checkpoints():
    def boom(block, context):
        raise AssertionError("called")
    prog = _fresh()
    pairs, names = pybackward.append_backward("mean_0.tmp_0", program=prog, callbacks=[boom],
                                              checkpoints=["fc_1.tmp_2"])
    assert names == ["fc_1.tmp_2"] and len(pairs) == 12


def test_pairwise_aggregation_with_checkpoints():
    cj = case_json("recompute_transformer")
    fwd = pybackward.load(PROGRAMS / "recompute_transformer" / "forward.pb")
    a, b = to_float64(fwd), to_float64(fwd)
    pybackward.append_backward(cj["loss"], program=a, checkpoints=cj["variants"]["default"]["checkpoints"])
    pairs, _ = pybackward.append_backward(cj["loss"], program=b, aggregation="pairwise",
                                          checkpoints=cj["variants"]["default"]["checkpoints"])
    types = [op.type for op in b.global_block().ops]
    assert "grad_add" in types and "sum" not in types
    fetch = [g.name for _, g in pairs]
    want, got = _run64(a, "recompute_transformer", fetch), _run64(b, "recompute_transformer", fetch)
    for n in fetch:
        np.testing.assert_allclose(got[n], want[n], rtol=1e-13, atol=1e-15, err_msg=n)


def test_auto_checkpoints_through_append_backward():
    prog = _fresh()
    pairs, names = pybackward.append_backward("mean_0.tmp_0", program=prog, checkpoints="auto")
    assert names and all(prog.global_block().has_var(n) for n in names)
    assert any(recompute.is_recompute_var(n) for n in prog.global_block().vars)
    from pybackward.memory import AutoCheckpoints
    prog = _fresh()
    pairs, names = pybackward.append_backward("mean_0.tmp_0", program=prog,
                                              checkpoints=AutoCheckpoints(budget=10 ** 9))
    assert names == [] and len(prog.blocks) == 1      # everything fits: plain backward
    assert pybackward.dumps(prog) == (PROGRAMS / "recompute_mlp" / "backward_plain.pb").read_bytes()


# --------------------------------------------------------------------------
# Live Paddle (skipped without it, failed with CI=true): a second call, not in
# the golden set; Paddle runs our recompute output
# --------------------------------------------------------------------------
TWICE = r"""
import sys, threading
import paddle
from paddle import static
from paddle.utils import unique_name
paddle.enable_static()
prog = static.Program.parse_from_string(open(sys.argv[1], "rb").read())
blk = prog.global_block()
with unique_name.guard(), static.program_guard(prog, static.Program()):
    for names in (["fc_1.tmp_2", "fc_3.tmp_2"], ["fc_2.tmp_2"]):
        static.append_backward(blk.var("mean_0.tmp_0"), checkpoints=[blk.var(n) for n in names])
open(sys.argv[2], "wb").write(prog.desc.serialize_to_string())
print("ok")
"""


@pytest.mark.paddle
def test_second_call_matches_paddle_ops_live(tmp_path):
    out = tmp_path / "twice.pb"
    r = run_paddle(TWICE, str(PROGRAMS / "recompute_mlp" / "forward.pb"), str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    prog = _fresh()
    pybackward.append_backward("mean_0.tmp_0", program=prog, checkpoints=["fc_1.tmp_2", "fc_3.tmp_2"])
    pybackward.append_backward("mean_0.tmp_0", program=prog, checkpoints=["fc_2.tmp_2"])
    gold = pybackward.load(out)
    problems = diff_programs(prog, gold)
    # Only the VarDescs of the `x@GRAD_0` names differ (see recompute's module doc).
    assert problems and all(" var " in p and "@GRAD_0" in p for p in problems), problems[:3]
    assert json.dumps(sorted(b.idx for b in prog.blocks)) == json.dumps(sorted(b.idx for b in gold.blocks))


LIVE_CASES = ["recompute_mlp_dropout", "recompute_transformer", "recompute_op_mix"]


@pytest.fixture(scope="module")
def paddle_recompute_runs(tmp_path_factory):
    """Paddle's Executor over our recompute programs and over Paddle's own
    (the goldens), every case in one Paddle process: case -> (ours, paddle's)."""
    require_paddle()
    d = tmp_path_factory.mktemp("paddle_recompute")
    jobs = []
    for case in LIVE_CASES:
        prog, *_ = replay(case, "default", record_callbacks=False)
        pybackward.save(prog, d / f"{case}.pb")
        fetch = sorted(np.load(PROGRAMS / case / "grads.npz"))
        for who, path in (("ours", d / f"{case}.pb"), ("paddle", PROGRAMS / case / "backward.pb")):
            jobs.append({"case": case, "who": who, "program": str(path), "params": str(PROGRAMS / case / "params.npz"),
                         "feeds": str(PROGRAMS / case / "feeds.npz"), "fetch": fetch,
                         "out": str(d / f"{case}.{who}.npz")})
    runs: dict = {}
    for job in paddle_execute_many(jobs, d):
        runs.setdefault(job["case"], {})[job["who"]] = job
    return runs


@pytest.mark.paddle
@pytest.mark.parametrize("case", LIVE_CASES)
def test_paddle_runs_our_recompute_output_live(case, paddle_recompute_runs):
    """Paddle parses our recompute program and its Executor gets, bit for bit,
    the gradients it gets from its own program on this machine; both match the
    recorded grads.npz (float32 kernels differ in the last bits across CPUs, so
    that comparison has a tolerance)."""
    ours, theirs = paddle_recompute_runs[case]["ours"], paddle_recompute_runs[case]["paddle"]
    assert "error" not in ours, ours.get("error")
    assert "error" not in theirs, theirs.get("error")
    got, want = np.load(ours["out"]), np.load(theirs["out"])
    recorded = np.load(PROGRAMS / case / "grads.npz")
    for name in ours["fetch"]:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
        np.testing.assert_allclose(got[name], recorded[name], rtol=1e-5, atol=1e-6, err_msg=name)
