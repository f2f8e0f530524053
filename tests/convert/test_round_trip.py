"""Round trips between the IRs: PIR -> legacy -> PIR on the PIR goldens (testdata/pir/),
legacy -> PIR -> legacy on the legacy corpus (testdata/programs/).

Neither round trip is the identity: `convert.to_pir` does what Paddle 3.3.1's
translator does, and that translator changes programs (docs/convert.md,
"Round trips", names each change). What holds, and is checked here:

* legacy -> PIR -> legacy gives the original ops, op for op and in order, once
  the translator's own rewrites are undone (`mul` -> reshape2 + matmul_v2 +
  reshape2; the `assign`s around loop vars), for every program the
  translator takes; a `conditional_block` without an else comes back as
  Paddle's if/else pattern (the translator gives every `pd_op.if` an else);
  the backward programs compute the gradients Paddle computed on the original;
* PIR -> legacy -> PIR gives the original back, canonically equal, on every PIR
  golden `to_legacy` converts (API for all, CLI for a few): `to_legacy` records the
  PIR program in the legacy one (`convert.record`), `to_pir` gives it back while it
  fits. An edited legacy program, or one without the record, gets Paddle's plain
  translation, which keeps every PIR computation, differs only in the named kinds
  of ops, and computes Paddle's recorded values. The record changes nothing the
  legacy interpreter runs.
"""
from __future__ import annotations

import json
import shutil
from collections import Counter

import numpy as np
import pytest

import pybackward
from conftest import PROGRAMS, TESTDATA
from pybackward import pir
from pybackward.convert.to_legacy import SPECIAL_OPS, convert, to_legacy
from pybackward.pir.opmap import resolve
from pybackward.convert import record
from pybackward.convert.to_pir import recorded, to_pir, to_pir_with_map
from pybackward.interpreter.executor import Executor, Scope
from pybackward.interpreter.pir_executor import PirExecutor
from pybackward.legacy.program import Program as LProgram
from pybackward.legacy.program import read_program

VALUES = TESTDATA / "pir_values"
RUNS = json.loads((VALUES / "manifest.json").read_text())["runs"]
RTOL, ATOL = 1e-5, 1e-6
CONTROL_FLOW = {"cond", "cond_bwd", "while", "while_bwd", "cond_in_while", "cond_in_while_bwd"}
STRAIGHT = ["cnn", "cnn_bwd", "cnn_infer", "jit", "mlp", "mlp_bwd", "nan", "transformer", "transformer_bwd", "zoo"]

#: PIR -> legacy -> PIR on a golden without control flow: the ops the round trip may add
#: and remove (docs/convert.md), beyond which the two programs have the same ops.
ADDED = {"pd_op.full", "pd_op.full_int_array",     # the translator makes one constant per reader
         "pd_op.data",                             # ... and a data op for an XShape a grad op reads
         "pd_op.feed",                             # ... and a feed op for a legacy feed op
         "builtin.slice",                          # ... and slices a vector instead of splitting it
         "pd_op.assign_value"}                     # ... and writes values out of place
REMOVED = {"pd_op.data",                           # replaced by pd_op.feed in inference programs
           "builtin.split", "pd_op.assign_value_"}

#: legacy -> PIR -> legacy: what the translator rewrites (undone before comparing).
TRANSLATED = {"mul": "matmul_v2", "mul_grad": "matmul_v2_grad"}
GLUE = {"reshape2", "assign"}    # mul's reshapes, the assigns around while loop vars and yields


def _reached_ops(prog: LProgram) -> list[str]:
    """Op types of block 0 and the blocks its ops run, in block order (the translator reads
    only those)."""
    order, i, out = [0], 0, []
    while i < len(order):
        for op in prog.blocks[order[i]].ops:
            out.append(op.type)
            order.extend(b for b in op.sub_blocks() if b not in order)
        i += 1
    return out


def _legacy_cases() -> list[str]:
    return sorted(f"{p.parent.name}/{p.stem}" for p in PROGRAMS.glob("*/*.pb") if p.stem in ("forward", "backward"))


#: Legacy programs the translator refuses (a while_grad / conditional_block_grad: Paddle's refuses them too).
REFUSED_BY_TRANSLATOR = {"cond_block/backward", "cond_in_while/backward", "cond_select/backward",
                         "nested_cond/backward",
                         "while_array/backward", "while_array_reread/backward", "while_loop/backward",
                         "while_multi/backward", "while_stale_read/backward"}
#: Legacy programs whose lone conditional_blocks come back as if/else (the translator adds the else).
ELSE_ADDED = {"cond_block/forward", "cond_in_while/forward", "cond_select/forward", "nested_cond/forward"}


@pytest.mark.parametrize("case", [c for c in _legacy_cases() if c not in REFUSED_BY_TRANSLATOR])
def test_legacy_to_pir_to_legacy_gives_the_ops_back(case):
    orig = pybackward.load(PROGRAMS / f"{case}.pb")
    back = to_legacy(to_pir(orig))
    want = [TRANSLATED.get(t, t) for t in _reached_ops(orig) if t not in GLUE]
    have = [t for b in back.blocks for op in b.ops if (t := op.type) not in GLUE]
    if case not in ELSE_ADDED:
        assert have == want
        return
    extra = Counter(have) - Counter(want)
    assert not Counter(want) - Counter(have)
    assert set(extra) <= {"conditional_block", "logical_not", "cast", "select_input", "fill_constant"}
    assert extra["conditional_block"] == extra["logical_not"] == Counter(want)["conditional_block"]


def test_the_translator_refuses_what_the_round_trip_skips():
    for case in sorted(REFUSED_BY_TRANSLATOR):
        with pytest.raises(pybackward.UnknownOpError):
            to_pir(pybackward.load(PROGRAMS / f"{case}.pb"))


#: Backward programs in which the translator turns the XShape a grad op reads into a
#: `pd_op.data` (an input nobody feeds): the round trip cannot run them without it.
XSHAPE_AS_DATA = {"conv_variants/backward", "detection_head/backward", "shape_ops/backward",
                  "transformer_encoder/backward"}
BACKWARD_VALUES = [c for c in _legacy_cases() if c.endswith("/backward") and c not in REFUSED_BY_TRANSLATOR
                   and c not in XSHAPE_AS_DATA and "dropout" not in c
                   and (PROGRAMS / c.split("/")[0] / "grads.npz").exists()]


def test_the_translator_makes_data_ops_of_xshapes_exactly_where_the_gradient_check_skips():
    for case in _legacy_cases():
        if case in REFUSED_BY_TRANSLATOR or not case.endswith("/backward"):
            continue
        orig = pybackward.load(PROGRAMS / f"{case}.pb")
        fed = set(json.loads((PROGRAMS / case.split("/")[0] / "case.json").read_text()).get("feeds") or ())
        extra = {op.attr("name") for op in to_pir(orig).ops if op.name == "pd_op.data"} - fed
        assert bool(extra) == (case in XSHAPE_AS_DATA), (case, extra)


@pytest.mark.parametrize("case", BACKWARD_VALUES)
def test_legacy_to_pir_to_legacy_computes_paddles_gradients(case):
    """The round-tripped backward program gives the gradients (and loss) Paddle computed
    on the original legacy program (testdata/programs/<case>/grads.npz), found through
    both conversions' name maps."""
    d = PROGRAMS / case.split("/")[0]
    orig = pybackward.load(d / "backward.pb")
    p, by_name = to_pir_with_map(orig)
    conv = convert(p)
    want = dict(np.load(d / "grads.npz"))
    names = {n: _var(conv, orig, by_name[n], n) for n in want if n in by_name}
    assert names and all(names.values()), names
    scope = Scope()
    for k, v in np.load(d / "params.npz").items():
        scope.set(k, v)
    block = conv.program.global_block()      # a fed var no op reads is not carried across
    feeds = {k: v for k, v in np.load(d / "feeds.npz").items() if block.has_var(k)}
    got = Executor().run(conv.program, feed=feeds, fetch_list=list(names.values()), scope=scope)
    for (n, new), g in zip(names.items(), got):
        np.testing.assert_allclose(g, want[n], rtol=1e-4, atol=1e-5, err_msg=f"{case}: {n} (now {new})")


def _var(conv, orig: LProgram, value, name: str) -> str | None:
    """The var now holding legacy var `name`: the translator maps each var of a duplicable
    output slot to the slot's vector, so an item is found by its place in the slot."""
    if value in conv.vectors:
        for b in orig.blocks:
            for op in b.ops:
                for slot in op.output_names:
                    args = op.output(slot)
                    if name in args:
                        return conv.vectors[value][args.index(name)]
    return conv.var_of(value)


# --------------------------------------------------------------------------
# PIR -> legacy -> PIR
# --------------------------------------------------------------------------
#: Every PIR golden: Paddle's gradient-pass goldens (forward and .bwd) and the PIR format goldens.
PIR_GOLDENS = sorted(str(p.relative_to(TESTDATA)) for d in ("pir_backward", "pir")
                     for p in (TESTDATA / d).glob("*.json") if p.name != "manifest.json")
#: The goldens `to_legacy` refuses (so there is no round trip), and why.
NOT_CONVERTED = {
    "pir/pylayer.json": "pd_op.pylayer", "pir/pylayer_bwd.json": "pd_op.pylayer",
    "pir/print_zoo.json": "printer's bare ops", "pir/print_zoo.resave.json": "printer's bare ops",
}
ROUND_TRIPS = [g for g in PIR_GOLDENS if g not in NOT_CONVERTED]


def test_the_golden_lists():
    assert set(NOT_CONVERTED) <= set(PIR_GOLDENS)
    assert len(ROUND_TRIPS) == 142
    assert {"pir/cnn_infer.json", "pir/cond_in_while_bwd.json", "pir/while_bwd.json", "pir/v1_cnn.json",
            "pir_backward/lenet.bwd.json"} <= set(ROUND_TRIPS)
    # the RNN goldens (issue #34): rnn's computed dropout state, tensor_to_array / create_array_like
    assert {f"pir_backward/{c}.json" for c in ("crnn_ctc", "crnn_ctc.bwd", "gru", "gru.bwd", "lstm", "lstm.bwd",
                                               "seq2seq_while", "seq2seq_while.bwd", "simplernn", "simplernn.bwd",
                                               "birnn_gru_cell.bwd", "rnn_lstm_cell.bwd",
                                               "rnn_simple_cell_reverse.bwd")} <= set(ROUND_TRIPS)


@pytest.mark.parametrize("golden", sorted(NOT_CONVERTED))
def test_the_goldens_without_a_round_trip_are_refused_by_to_legacy(golden):
    with pytest.raises(pybackward.PyBackwardError):
        to_legacy(pir.load(TESTDATA / golden))


@pytest.mark.parametrize("golden", ROUND_TRIPS)
def test_pir_to_legacy_to_pir_is_canonically_equal(golden):
    """The original comes back, in memory and through the legacy program's bytes (what a
    .pdmodel holds), with the same var -> value map as the legacy program's names."""
    orig = pir.load(TESTDATA / golden)
    conv = convert(orig)
    back = to_pir(conv.program)
    assert pir.equal(orig, back), "\n".join(pir.diff(orig, back)[:40])
    loaded = read_program(conv.program.to_bytes(), source=golden)
    again, names = to_pir_with_map(loaded)
    assert pir.equal(orig, again), "\n".join(pir.diff(orig, again)[:40])
    top = {r for op in again.block.ops for r in op.results}
    held = convert(again, record=False)
    assert names or not loaded.global_block().vars
    for name, value in names.items():     # each block-0 var -> the top-level value it holds
        assert value in top and loaded.global_block().has_var(name), name
        assert held.names.get(value) == name or name in held.vectors.get(value, ()), name


CLI_CASES = [("pir/cnn_infer.json", ".pdiparams"), ("pir/mlp_bwd.json", ".pdparams"), ("pir/while_bwd.json", ""),
             ("pir/cond_in_while_bwd.json", ""), ("pir_backward/lenet.bwd.json", "")]


@pytest.mark.parametrize("golden, params", CLI_CASES)
def test_the_cli_round_trip_is_canonically_equal(golden, params, tmp_path):
    """`convert a.json b.pdmodel && convert b.pdmodel c.json`: c.json is a.json, and the
    parameter file comes back with the same arrays."""
    from pybackward.tensors import paddle_files
    src = TESTDATA / golden
    a = tmp_path / "a.json"
    shutil.copy(src, a)
    if params:
        shutil.copy(src.with_suffix(params), tmp_path / f"a{params}")
    r = invoke("convert", a, tmp_path / "b.pdmodel")
    assert r.exit_code == 0, r.output
    r = invoke("convert", "--json", tmp_path / "b.pdmodel", tmp_path / "c.json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.output)
    assert report["restored"] is True and report["kind"] == "pir program"
    orig, back = pir.load(str(a)), pir.load(str(tmp_path / "c.json"))
    assert pir.equal(orig, back), "\n".join(pir.diff(orig, back)[:40])
    if params:
        want = paddle_files.load_arrays(str(tmp_path / f"a{params}"), orig if params == ".pdiparams" else None)
        got = paddle_files.load_arrays(str(tmp_path / f"c{params}"), back if params == ".pdiparams" else None)
        assert want.keys() == got.keys()
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def invoke(*args):
    from click.testing import CliRunner
    from pybackward_cli.main import cli
    return CliRunner().invoke(cli, [str(a) for a in args])


# ----------------------------------------------------------------- the record
def _edits():
    """Edits of a converted legacy program, each changing what it computes or how it reads."""
    def drop_last_op(p):
        p.global_block().desc.ops.pop()
        p.global_block().sync()

    def change_an_attr(p):
        op = next(o for o in p.global_block().ops if o.type == "leaky_relu")
        op.set_attr("alpha", 0.5)

    def add_an_op(p):
        b = p.global_block()
        d = b.desc.ops.add()
        d.CopyFrom(next(o for o in b.ops if o.type == "leaky_relu").desc)
        b.sync()

    def rename_a_var(p):
        b = p.global_block()
        op = next(o for o in b.ops if o.type == "leaky_relu")
        old = op.output("Out")[0]
        b.create_var_like(old + "_edited", b.var(old))
        for o in b.ops:
            o.rename_input(old, old + "_edited")
            o.rename_output(old, old + "_edited")

    return {"drop_last_op": drop_last_op, "change_an_attr": change_an_attr, "add_an_op": add_an_op,
            "rename_a_var": rename_a_var}


EDITS = _edits()


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edited_legacy_program_gets_the_plain_translation(edit):
    """The record no longer fits an edited program: `to_pir` translates it as Paddle would,
    and says why it did not restore."""
    orig = pir.load(TESTDATA / "pir" / "zoo.json")
    legacy = to_legacy(orig)
    assert any(op.type == "leaky_relu" for op in legacy.global_block().ops)
    EDITS[edit](legacy)
    legacy = read_program(legacy.to_bytes(), source="edited.pdmodel")
    assert record.has_record(legacy)
    r = recorded(legacy)
    assert r.program is None and "edited since" in r.reason
    back = to_pir(legacy)
    assert pir.equal(back, to_pir(legacy, restore=False))
    assert not pir.equal(back, orig)


def test_an_unedited_program_is_restored_and_the_plain_translation_stays_available():
    orig = pir.load(TESTDATA / "pir" / "zoo.json")
    legacy = to_legacy(orig)
    assert recorded(legacy).program is not None and recorded(legacy).reason == ""
    plain = to_pir(legacy, restore=False)
    assert pir.equal(plain, to_pir(to_legacy(orig, record=False)))
    assert not pir.equal(plain, orig)


def test_a_record_that_is_not_ours_or_corrupt_or_of_another_program_is_not_used():
    orig = pir.load(TESTDATA / "pir" / "mlp.json")
    other = pir.dumps(pir.load(TESTDATA / "pir" / "cnn.json"))
    plain = to_pir(to_legacy(orig, record=False))
    for payload, why in ((b"something else", "cannot be used"),
                         (record.MAGIC + b"\x78\x9c not zlib", "cannot be used"),
                         (record.encode(b"{not json"), "cannot be used"),
                         (record.encode(pir.dumps(orig))[:-8], "truncated"),
                         (record.encode(other), "edited since")):
        legacy = to_legacy(orig, record=False)
        legacy.desc.MergeFromString(record.wire_field(payload))
        legacy = read_program(legacy.to_bytes())
        r = recorded(legacy)
        assert r.program is None and why in r.reason, (payload[:20], r.reason)
        assert pir.equal(to_pir(legacy), plain)


def test_a_text_format_copy_carries_no_record_and_is_translated():
    """Protobuf text format has no place for unknown fields."""
    orig = pir.load(TESTDATA / "pir" / "mlp.json")
    legacy = to_legacy(orig)
    text = pybackward.legacy.io.dumps(legacy, text=True)
    copy = read_program(text, text=True)
    assert not record.has_record(copy) and recorded(copy).reason == "no PIR record"
    assert pir.equal(to_pir(copy), to_pir(legacy, restore=False))


def test_the_record_changes_nothing_the_legacy_interpreter_runs():
    """The record is one field appended to the ProgramDesc: the program without it is byte for
    byte the program to_legacy(record=False) writes, and both run to the same values."""
    orig = pir.load(TESTDATA / "pir" / "mlp_bwd.json")
    with_record, without = convert(orig), convert(orig, record=False)
    assert record.has_record(with_record.program) and not record.has_record(without.program)
    data, plain = with_record.program.to_bytes(), without.program.to_bytes()
    assert data.startswith(plain) and len(data) > len(plain)
    assert record.program_without_records(with_record.program) == plain
    spec = RUNS["mlp_bwd"]
    feeds = dict(np.load(VALUES / "mlp_bwd.feeds.npz"))
    fetch = sorted(set(without.by_id().values()))
    outs = []
    for prog in (read_program(data), read_program(plain)):
        scope = Scope()
        for k, v in np.load(VALUES / "mlp_bwd.params.npz").items():
            scope.set(k, v)
        outs.append(Executor().run(prog, feed=feeds, fetch_list=fetch, scope=scope))
    assert spec["case"] == "mlp_bwd" and len(outs[0]) == len(fetch) > 10
    for a, b, n in zip(*outs, fetch):
        np.testing.assert_array_equal(a, b, err_msg=n)


def test_the_cli_says_when_a_record_was_not_used_and_no_restore_translates(tmp_path):
    a = tmp_path / "a.json"
    shutil.copy(TESTDATA / "pir" / "zoo.json", a)
    assert invoke("convert", a, tmp_path / "b.pdmodel").exit_code == 0
    legacy = pybackward.load(str(tmp_path / "b.pdmodel"))
    EDITS["change_an_attr"](legacy)
    pybackward.save(legacy, str(tmp_path / "e.pdmodel"))
    r = invoke("convert", tmp_path / "e.pdmodel", tmp_path / "e.json")
    assert r.exit_code == 0 and "Paddle's translation: the program is no longer" in r.output, r.output
    r = invoke("convert", "--no-restore", tmp_path / "b.pdmodel", tmp_path / "p.json")
    assert r.exit_code == 0 and "recorded" not in r.output, r.output
    plain = pir.load(str(tmp_path / "p.json"))
    assert pir.equal(plain, to_pir(pybackward.load(str(tmp_path / "b.pdmodel")), restore=False))
    assert not pir.equal(plain, pir.load(str(a)))
    r = invoke("convert", "--no-restore", a, tmp_path / "x.pdmodel")
    assert r.exit_code == 2 and "--no-restore goes with legacy -> PIR" in r.output


# ----------------------------------------------------------------- the plain translation
@pytest.mark.parametrize("case", STRAIGHT)
def test_the_plain_translation_differs_only_in_the_named_ways(case):
    """Paddle's translation of the converted program (no record, or --no-restore): every PIR
    computation is kept; only the kinds of ops docs/convert.md names differ."""
    orig = pir.load(TESTDATA / "pir" / f"{case}.json")
    back = to_pir(to_legacy(orig), restore=False)
    a, b = Counter(op.name for op in orig.walk()), Counter(op.name for op in back.walk())
    assert set(b - a) <= ADDED, dict(b - a)
    assert set(a - b) <= REMOVED, dict(a - b)
    computations = Counter(op.name for op in orig.walk() if op.name not in SPECIAL_OPS and resolve(op.name))
    assert not computations - b


#: Plain translations the PIR interpreter cannot run, and why (none is the converter's doing).
NOT_RUNNABLE_AFTER = {
    "cnn_bwd": "the translator makes the XShapes reshape_grad / flatten_grad read pd_op.data inputs",
    "transformer_bwd": "the translator makes the XShapes reshape_grad reads pd_op.data inputs",
    "cnn_infer": "the translator makes the legacy feed op a pd_op.feed, which the PIR interpreter does not feed",
    "jit": "the translator makes the legacy feed op a pd_op.feed, which the PIR interpreter does not feed",
    **{c: "the PIR interpreter has no kernel for pd_op.select_input (the translated legacy cond)"
       for c in ("cond", "cond_bwd", "cond_in_while", "cond_in_while_bwd")},
    **{c: "the PIR interpreter has no kernel for pd_op.assign_out_ (the translated while's assigns)"
       for c in ("while", "while_bwd")},
}


@pytest.mark.parametrize("run_name", sorted(r for r in RUNS if RUNS[r]["case"] not in ("pylayer", "pylayer_bwd")
                                            and RUNS[r]["case"] not in NOT_RUNNABLE_AFTER))
def test_pir_to_legacy_to_pir_computes_paddles_values(run_name):
    """Through the legacy var each value became, the plain translation of the converted program
    (run by the PIR interpreter) gives every value Paddle's PIR Executor recorded for the original."""
    spec = RUNS[run_name]
    orig = pir.load(TESTDATA / spec["program"])
    conv = convert(orig)
    back, by_name = to_pir_with_map(conv.program, restore=False)
    want = dict(np.load(VALUES / f"{run_name}.values.npz"))
    ids = conv.by_id()
    refs = [r for r in want if r in ids and ids[r] in by_name]
    assert len(refs) >= 0.75 * len([r for r in want if r in ids]), "most values keep a var"
    values = list(dict.fromkeys(by_name[ids[r]] for r in refs))
    got = PirExecutor(paddle_seed=spec["paddle_seed"]).run(
        back, dict(np.load(VALUES / f"{run_name}.feeds.npz")), dict(np.load(VALUES / f"{run_name}.params.npz")),
        fetch=values)
    assert len(got) == len(values)
    by_value = dict(zip(values, got.values()))
    for r in refs:
        have = by_value[by_name[ids[r]]]
        assert have.shape == want[r].shape and have.dtype == want[r].dtype, r
        np.testing.assert_allclose(have, want[r], rtol=RTOL, atol=ATOL, err_msg=f"{run_name} {r} as {ids[r]}")


def test_control_flow_goldens_round_trip_to_programs_pybackward_reads():
    for case in sorted(CONTROL_FLOW):
        back = to_pir(to_legacy(pir.load(TESTDATA / "pir" / f"{case}.json")), restore=False)
        assert pir.loads(pir.dumps(back)).num_ops() == back.num_ops()
