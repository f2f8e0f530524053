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
* PIR -> legacy -> PIR keeps every PIR computation; what differs is only the
  named kinds of ops; and the program computes Paddle's recorded values.
"""
from __future__ import annotations

import json
from collections import Counter


import numpy as np
import pytest

import pybackward
from conftest import PROGRAMS, TESTDATA
from pybackward import pir
from pybackward.convert.to_legacy import SPECIAL_OPS, convert, to_legacy
from pybackward.pir.opmap import resolve
from pybackward.convert.to_pir import to_pir, to_pir_with_map
from pybackward.interpreter.executor import Executor, Scope
from pybackward.interpreter.pir_executor import PirExecutor
from pybackward.legacy.program import Program as LProgram

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
@pytest.mark.parametrize("case", STRAIGHT)
def test_pir_to_legacy_to_pir_differs_only_in_the_named_ways(case):
    orig = pir.load(TESTDATA / "pir" / f"{case}.json")
    back = to_pir(to_legacy(orig))
    a, b = Counter(op.name for op in orig.walk()), Counter(op.name for op in back.walk())
    assert set(b - a) <= ADDED, dict(b - a)
    assert set(a - b) <= REMOVED, dict(a - b)
    computations = Counter(op.name for op in orig.walk() if op.name not in SPECIAL_OPS and resolve(op.name))
    assert not computations - b


#: Round-tripped goldens the PIR interpreter cannot run, and why (none is the converter's doing).
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
    """Through the legacy var each value became, the round-tripped PIR program (run by the
    PIR interpreter) gives every value Paddle's PIR Executor recorded for the original."""
    spec = RUNS[run_name]
    orig = pir.load(TESTDATA / spec["program"])
    conv = convert(orig)
    back, by_name = to_pir_with_map(conv.program)
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
        back = to_pir(to_legacy(pir.load(TESTDATA / "pir" / f"{case}.json")))
        assert pir.loads(pir.dumps(back)).num_ops() == back.num_ops()



