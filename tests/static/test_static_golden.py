"""The builder against Paddle 3.3.1: every case of `testdata/gen_static.py`
built by pybackward equals, op for op and var for var, what Paddle built from
the same code (stored in `testdata/static/<case>/`). Paddle is not needed."""
from __future__ import annotations

import numpy as np
import pytest

import pybackward
from pybackward import static
from pybackward._proto import framework_pb2 as pb
from test_static_support import (STATIC_DATA, build, case_meta, case_names, diff_descs, golden,
                                 read_desc, strip_callstack)

CASES = case_names()


def _variants():
    return [(c, v) for c in CASES for v in case_meta(c)["variants"]]


def _for_test_cases():
    return [c for c in CASES if case_meta(c)["clone_for_test"]]


def test_at_least_the_required_builds():
    # docs examples + >= 6 more builds (MLP, CNN+batch_norm, attention, shared
    # weights, stop_gradient intermediate, dropout, ...)
    assert {"doc_append_backward", "doc_gradients", "mlp", "cnn_bn", "attention",
            "shared_weights", "stop_gradient_mid", "dropout"} <= set(CASES)
    assert len(CASES) >= 9


@pytest.mark.parametrize("case", CASES)
def test_main_program_equals_paddles(case):
    main, _, _ = build(case)
    assert diff_descs(main.desc, golden(case, "main.pb")) == []
    # byte for byte, once op_callstack is left out
    assert main.desc.SerializeToString() == golden(case, "main.pb").SerializeToString()


@pytest.mark.parametrize("case", CASES)
def test_startup_program_equals_paddles(case):
    _, startup, _ = build(case)
    assert diff_descs(startup.desc, golden(case, "startup.pb")) == []
    assert startup.desc.SerializeToString() == golden(case, "startup.pb").SerializeToString()


@pytest.mark.parametrize("case", CASES)
def test_builder_leaves_op_callstack_empty(case):
    main, startup, _ = build(case)
    for prog in (main, startup):
        for op in prog.global_block().ops:
            assert op.attr("op_callstack") == []
            assert op.attr("op_namescope") == "/" and op.attr("op_role") == 0
            assert op.attr("op_device") == "" and op.attr("op_role_var") == []


@pytest.mark.parametrize("case", CASES)
def test_startup_values_identical_to_paddles(case):
    """Our startup and Paddle's stored startup, both run by the interpreter,
    give the same parameters bit for bit - and both equal what Paddle's own
    Executor produced (params.npz)."""
    _, startup, _ = build(case)
    paddle_startup = pybackward.load(STATIC_DATA / case / "startup.pb")
    ours, theirs = static.Scope(), static.Scope()
    static.Executor().run(startup, scope=ours)
    static.Executor().run(paddle_startup, scope=theirs)
    params = dict(np.load(STATIC_DATA / case / "params.npz"))
    assert set(case_meta(case)["parameters"]) <= set(params)
    for name, value in params.items():
        a, b = ours[name], theirs[name]
        assert a.dtype == value.dtype and a.shape == value.shape, name
        assert np.array_equal(a, b), name
        assert np.array_equal(a, value), f"{name}: differs from Paddle's executor"


@pytest.mark.parametrize("case", CASES)
def test_forward_values_match_paddle(case):
    main, startup, _ = build(case)
    meta = case_meta(case)
    feeds = dict(np.load(STATIC_DATA / case / "feeds.npz"))
    scope = static.Scope()
    exe = static.Executor()
    exe.run(startup, scope=scope)
    got = exe.run(main, feed=feeds, fetch_list=meta["fetch"], scope=scope)
    for g, want in zip(got, meta["fetched"]):
        np.testing.assert_allclose(g, np.asarray(want, dtype=g.dtype), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", _for_test_cases())
def test_clone_for_test_equals_paddles(case):
    main, _, _ = build(case)
    test_prog = main.clone(for_test=True)
    assert diff_descs(test_prog.desc, golden(case, "test.pb")) == []
    ops = test_prog.global_block().ops
    for op in ops:
        if op.has_attr("is_test"):
            assert op.attr("is_test") is True
        if op.type == "batch_norm":
            assert "ReserveSpace" not in op.output_names
    # the original is left as it was
    assert diff_descs(main.desc, golden(case, "main.pb")) == []


def _sorted_vars(desc: pb.ProgramDesc) -> pb.ProgramDesc:
    d = pb.ProgramDesc()
    d.CopyFrom(desc)
    for b in d.blocks:
        vs = sorted(b.vars, key=lambda v: v.name)
        copies = [pb.VarDesc() for _ in vs]
        for c, v in zip(copies, vs):
            c.CopyFrom(v)
        del b.vars[:]
        b.vars.extend(copies)
    return d


@pytest.mark.parametrize("case", _for_test_cases())
def test_clone_for_test_after_backward(case):
    """After append_backward, clone(for_test=True) prunes the backward ops and
    the vars only they used. Paddle lists the kept vars in C++ unordered_set
    order; ours are sorted by name: same vars, same ops."""
    main, _, info = build(case)
    info["variants"]["default"]()
    test_prog = main.clone(for_test=True)
    gold = golden(case, "test_after_backward.pb")
    assert diff_descs(test_prog.desc, _sorted_vars(gold)) == []
    assert all(not (op.attr("op_role", 0) & 1) for op in test_prog.global_block().ops)


# --------------------------------------------------------------------------
# append_backward / gradients on the built programs
# --------------------------------------------------------------------------
#: Where pybackward's gradient pass (not the builder) differs from Paddle's
#: in-memory pass; reported for the pass's owners. Each entry is normalised
#: away below, and `test_backward_exact_pass_differences` keeps them visible.
KNOWN_PASS_DIFFERENCES = {
    ("cnn_bn", "default"): "reshape2_grad: Paddle copies reshape2's attrs verbatim, including "
                           "`mkldnn_data_type` and `use_quantizer` written twice; pybackward "
                           "writes each once",
    ("tensor_ops", "default"): "reshape2_grad as in cnn_bn",
    ("losses_and_pools", "default"): "reshape2_grad as in cnn_bn",
}


def _normalise_known(gold: pb.ProgramDesc) -> pb.ProgramDesc:
    d = pb.ProgramDesc()
    d.CopyFrom(gold)
    for b in d.blocks:
        for op in b.ops:
            role = next((a.i for a in op.attrs if a.name == "op_role"), 0)
            if not role & 1:
                continue
            seen, kept = set(), []
            for a in op.attrs:
                if a.name not in seen:
                    seen.add(a.name)
                    c = pb.OpDesc.Attr()
                    c.CopyFrom(a)
                    kept.append(c)
            del op.attrs[:]
            op.attrs.extend(kept)
    return d


@pytest.mark.parametrize("case,variant", _variants())
def test_backward_returns_what_paddle_returned(case, variant):
    _, _, info = build(case)
    assert info["variants"][variant]() == case_meta(case)["variants"][variant]["returned"]


@pytest.mark.parametrize("case,variant", _variants())
def test_backward_program_equals_paddles(case, variant):
    main, _, info = build(case)
    info["variants"][variant]()
    entry = case_meta(case)["variants"][variant]
    gold = golden(case, entry["file"])
    if (case, variant) in KNOWN_PASS_DIFFERENCES:
        gold = _normalise_known(gold)
    assert diff_descs(main.desc, gold) == []


@pytest.mark.parametrize("case,variant", sorted(KNOWN_PASS_DIFFERENCES))
@pytest.mark.xfail(strict=True, reason="gradient-pass differences from Paddle's in-memory "
                                       "append_backward, outside pybackward.static (see "
                                       "KNOWN_PASS_DIFFERENCES)")
def test_backward_exact_pass_differences(case, variant):
    main, _, info = build(case)
    info["variants"][variant]()
    gold = golden(case, case_meta(case)["variants"][variant]["file"])
    assert diff_descs(main.desc, gold) == []


def test_golden_files_are_paddles_own():
    """The stored files are what Paddle wrote (op_callstack filled in)."""
    d = read_desc(STATIC_DATA / "mlp" / "main.pb")
    stacks = [a for op in d.blocks[0].ops for a in op.attrs if a.name == "op_callstack"]
    assert stacks and all(len(a.strings) > 0 for a in stacks)
    assert strip_callstack(d) != d
