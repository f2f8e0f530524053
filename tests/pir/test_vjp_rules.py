"""Paddle's PIR VJP rules as data (pybackward/data/pir_vjp_rules.json, pybackward/pir/vjp_rules.py).

Checked against: the table's own invariants; `pir_op_names.json` (every PIR op
Paddle registers, recorded separately); the backward programs Paddle's real
PIR pass wrote (`testdata/pir/*_bwd.json`): a handful of rules written out by
hand from them, then every grad op in them; and, with Paddle, a re-probe of a
sample of ops by the generator.
"""
from __future__ import annotations

import json
import os
import subprocess
from collections import Counter

import pytest

from conftest import ROOT, TESTDATA, require_paddle
from pybackward import pir
from pybackward.base.errors import PyBackwardError, UnknownOpError
from pybackward.pir import vjp_rules
from pybackward.pir.types import Attr, Type
from pybackward.pir.vjp_rules import Copied, Source

TABLE = json.loads(vjp_rules.DATA_FILE.read_text())
NAMES = json.loads((ROOT / "pybackward" / "data" / "pir_op_names.json").read_text())
REGISTERED = {f"{d}.{n}" for d, ops in NAMES["ops"].items() for n in ops}
GENERATOR = TESTDATA / "pir_vjp" / "gen_vjp_rules.py"
GOLDENS = TESTDATA / "pir"


def entries():
    return TABLE["rules"].items()


def bodies(e: dict):
    """(key, ops, returns) of the default and of every variant stored whole."""
    op_keys = ("op", "operands", "attrs", "results", "stop_gradient", "regions")
    yield "default", (e["ops"] if "ops" in e else [{k: e[k] for k in op_keys if k in e}]), e["returns"]
    for key, v in e.get("variants", {}).items():
        if "ops" in v:
            yield key, v["ops"], v["returns"]


# --------------------------------------------------------------------------
# Well formed
# --------------------------------------------------------------------------
def test_table_is_well_formed():
    assert next(iter(TABLE)) == "_generated_by"
    assert TABLE["_generated_by"] == "testdata/pir_vjp/gen_vjp_rules.py"
    assert TABLE["paddle"] == "3.3.1" and len(TABLE["paddle_commit"]) == 40
    kinds = {"dense", "inplace", "grad", "sparse", "control"}
    for name, e in entries():
        assert e["kind"] in kinds, name
        assert e["probe"].split()[0] in {"api", "via", "twin", "legacy", "array"}, (name, e["probe"])
        sig = e["sig"]
        assert set(sig) <= {"inputs", "grad", "vector", "optional", "outputs", "attrs"}, name
        for k in ("grad", "vector", "optional"):
            assert set(sig.get(k, ())) <= set(sig["inputs"]), (name, k)
        assert ("ops" in e) != ("op" in e), name   # compact when one op, a list otherwise
        for key, ops, returns in bodies(e):
            assert isinstance(ops, list) and isinstance(returns, dict), (name, key)
            for m, op in enumerate(ops):
                assert set(op) <= {"op", "operands", "attrs", "results", "stop_gradient", "regions"}, (name, m)
                for a, v in op["attrs"].items():
                    assert (isinstance(v, str) and v.startswith("@")) or (isinstance(v, dict) and "#" in v), \
                        (name, key, a, v)
                if op.get("stop_gradient") == []:   # an op that sets no flags (array_write_)
                    assert op["results"], (name, key, m)
                elif "stop_gradient" in op:
                    assert len(op["stop_gradient"]) == len(op["results"]) and any(op["stop_gradient"])
        checked = e["variants_checked"]
        for key in [*checked, *e.get("variants", {})]:
            kind, _, what = key.partition(":")
            assert kind in {"stop", "absent", "attr"}, (name, key)
            if kind == "absent":
                assert what in sig.get("optional", ()), (name, key)
            if kind == "attr":
                assert what in sig["attrs"] and "value" in e["variants"][key], (name, key)
        assert not set(checked) & set(e.get("variants", {})), name
    for name, f in TABLE["failed"].items():
        assert set(f) == {"kind", "stage", "reason"} and f["reason"], name
        assert f["stage"] in {"build", "vjp", "crash", "skipped", "probe"}, name
        assert f["stage"] != "probe", f"{name}: the probe itself failed: {f['reason']}"
    assert not set(TABLE["rules"]) & set(TABLE["failed"])


def test_sources_point_at_what_exists():
    """Every source names a forward operand / result / out_grad the op has, or an
    earlier appended op's result; returns name the inputs with grad semantics."""
    for name, e in entries():
        sig = e["sig"]
        n_in, n_out = len(sig["inputs"]), len(sig["outputs"])
        grad_index = {sig["inputs"].index(g) for g in sig["grad"]}
        for key, ops, returns in bodies(e):
            def check(token, m):
                s = Source.parse(token)
                if s.kind == "in":
                    assert s.index < n_in and (s.elem is None or sig["inputs"][s.index] in sig["vector"]), \
                        (name, key, token)
                elif s.kind in ("out", "grad"):
                    extra = 1 if name == "pd_op.array_read" and s.kind == "grad" else 0  # its array's grad
                    assert s.index < n_out + extra, (name, key, token)
                else:
                    assert s.index < m and s.elem < len(ops[s.index]["results"]), (name, key, token)
            for m, op in enumerate(ops):
                for t in op["operands"]:
                    if t is not None:
                        check(t, m)
                for r in op["results"]:
                    if isinstance(r, str):
                        check(r, len(ops))
            for k, src in returns.items():
                assert Source.parse(k).kind == "in" and Source.parse(k).index in grad_index, (name, key, k)
                if src is not None:
                    check(src, len(ops))


def test_counts_are_the_entries():
    c = TABLE["counts"]
    rules, failed = TABLE["rules"], TABLE["failed"]
    assert c["recorded"] == {k: sum(e["kind"] == k for e in rules.values()) for k in c["recorded"]}
    assert c["failed"] == {k: sum(e["kind"] == k for e in failed.values()) for k in c["failed"]}
    for k in c["has_vjp"]:
        assert c["has_vjp"][k] == c["recorded"][k] + c["failed"][k], k
    assert c["single_op"] == sum("ops" not in e for e in rules.values())
    assert c["variants_stored"] == sum(len(e.get("variants", {})) for e in rules.values())
    assert dict(Counter(f["stage"] for f in failed.values())) == c["failed_by_stage"]


def test_coverage_is_the_brief():
    """Paddle 3.3.1 has 664 VJPs (reference/pir.md §4): 386 dense forward ops (if and while among
    them), 109 in-place, 80 higher-order grads, 88 sparse, cf.tuple_push; every one is recorded or
    failed with a reason, and the dense, in-place and grad ones are nearly all recorded."""
    c = TABLE["counts"]
    assert c["has_vjp"] == {"dense": 386, "inplace": 109, "grad": 80, "sparse": 88, "control": 1}
    assert c["recorded"]["dense"] >= 320 and c["recorded"]["inplace"] >= 100 and c["recorded"]["grad"] >= 75
    assert c["single_own_grad_op"] >= 400       # "~90% of rules are one pd_op.<op>_grad"
    skipped = {n for n, f in TABLE["failed"].items() if f["stage"] == "skipped"}
    assert skipped == {"pd_op.if", "pd_op.while", "cf.tuple_push"}


# --------------------------------------------------------------------------
# Consistent with the op names Paddle registers
# --------------------------------------------------------------------------
def test_every_name_is_a_registered_op():
    for name, e in entries():
        assert name in REGISTERED, name
        for key, ops, _ in bodies(e):
            for op in ops:
                assert op["op"] in REGISTERED, (name, key, op["op"])
    for name in TABLE["failed"]:
        assert name in REGISTERED, name


def test_kinds_follow_the_names():
    for name, e in [*entries(), *TABLE["failed"].items()]:
        base = name.split(".", 1)[1]
        want = ("control" if not name.startswith("pd_op.") else "sparse" if base.endswith(("_sp", "_sp_"))
                else "grad" if base.rstrip("_").endswith("grad") else "inplace" if base.endswith("_")
                else "dense")
        assert e["kind"] == want, name


def test_in_place_ops_share_their_twin_rule():
    """x_ differs from x only in overwriting its input: Paddle gives both the same rule, but for
    increment_, whose input has no grad semantics (its rule appends increment_ with -value)."""
    same = 0
    for name, e in entries():
        twin = TABLE["rules"].get(name[:-1]) if e["kind"] in ("inplace", "grad") and name.endswith("_") else None
        if twin is None or name == "pd_op.increment_":
            continue
        strip = ("kind", "probe", "variants_checked", "variants", "attrs_unverified")
        assert {k: v for k, v in e.items() if k not in strip} == \
            {k: v for k, v in twin.items() if k not in strip}, name
        same += 1
    assert same >= 80


# --------------------------------------------------------------------------
# The loader
# --------------------------------------------------------------------------
def test_loader_decodes_every_rule():
    for name in vjp_rules.rule_names():
        r = vjp_rules.rule(name)
        assert r.op == name and r.ops is not None
        for op in r.ops:
            for a in op.attrs.values():
                assert isinstance(a, (Copied, Attr))
            for t in op.results:
                assert t is None or isinstance(t, (Source, Type))
    assert len(vjp_rules.rule_names()) == sum(TABLE["counts"]["recorded"].values())


def test_loader_matmul():
    r = vjp_rules.require_rule("pd_op.matmul")
    g = r.single
    assert g.name == "pd_op.matmul_grad"
    assert [str(s) for s in g.operands] == ["in0", "in1", "grad0"]
    assert g.copied_attrs == {"transpose_x": "transpose_x", "transpose_y": "transpose_y"}
    assert {k: str(v) for k, v in r.returns.items()} == {"in0": "op0.0", "in1": "op0.1"}
    stopped = r.apply(stop={"x"})
    assert stopped.ops[0].results[0] is None and stopped.ops[0].results[1] == Source("in", 1)
    assert stopped.returns["in0"] is None and str(stopped.returns["in1"]) == "op0.1"
    assert r.apply(stop={"in0", "in1"}).ops[0].results == (None, None)
    relu = vjp_rules.rule("pd_op.relu")            # one input: "all" is probed as stop:in0
    assert relu.apply(stop={"all"}).returns == {"in0": None}


def test_loader_constants_and_vectors():
    scale = vjp_rules.rule("pd_op.scale").single
    # the grad of scale is scale(out_grad, the same scale operand) with bias 0 whatever the forward's
    assert scale.name == "pd_op.scale" and [str(s) for s in scale.operands] == ["grad0", "in1"]
    assert scale.const_attrs["bias"] == Attr("0.a_f32", 0.0)
    assert scale.const_attrs["bias_after_scale"] == Attr("0.a_bool", True)
    concat = vjp_rules.rule("pd_op.concat")
    assert [o.name for o in concat.ops] == ["builtin.combine", "pd_op.concat_grad", "builtin.split"]
    one = concat.apply(stop={"in0.1"})
    assert one.returns["in0.1"] is None and one.returns["in0.0"] is not None
    assert one.ops[2].results[1] is None


def test_loader_ops_that_set_no_stop_gradient():
    """array_write_ sets no stop_gradient flags (Paddle's file writes none for it): recorded as
    (), apart from the all-False default of an op whose flags are all false."""
    ops = vjp_rules.rule("pd_op.array_write_").ops
    assert [o.name for o in ops][-1] == "pd_op.array_write_" and ops[-1].stop_gradient == ()
    assert ops[0].stop_gradient is None     # array_read: flags, all false
    assert vjp_rules.rule("pd_op.array_read").ops[-1].stop_gradient == ()


def test_loader_refuses_what_was_not_recorded():
    with pytest.raises(UnknownOpError, match=r"op 'pd_op.argmax' has no grad op"):
        vjp_rules.require_rule("pd_op.argmax")
    assert vjp_rules.has_vjp("pd_op.if") and vjp_rules.rule("pd_op.if") is None
    with pytest.raises(UnknownOpError, match=r"'pd_op.if' has a VJP in Paddle 3.3.1, but its rule was not "
                                             r"recorded \(skipped: control flow"):
        vjp_rules.require_rule("pd_op.if")
    r = vjp_rules.rule("pd_op.matmul")
    with pytest.raises(UnknownOpError, match="no input 'z'"):
        r.apply(stop={"z"})
    with pytest.raises(UnknownOpError, match="without bias was not recorded"):
        r.apply(absent={"bias"})


def test_loader_refuses_a_foreign_file(tmp_path, monkeypatch):
    bad = tmp_path / "rules.json"
    bad.write_text(json.dumps({"_generated_by": "someone else", "rules": {}, "failed": {}}))
    monkeypatch.setattr(vjp_rules, "DATA_FILE", bad)
    vjp_rules._table.cache_clear()
    try:
        with pytest.raises(PyBackwardError, match="not a PIR VJP rule table"):
            vjp_rules.rule("pd_op.matmul")
    finally:
        monkeypatch.undo()
        vjp_rules._table.cache_clear()


# --------------------------------------------------------------------------
# Against what Paddle's real pass wrote (testdata/pir/*_bwd.json)
# --------------------------------------------------------------------------
#: Written out by hand from the goldens (value ids as in the .json file, 1 more than in
#: the .txt print): the grad op (the id of its first result), the forward op it is the
#: gradient of (its first result), the grad op's name, its operands as the forward's
#: operands / results (in / out) or an out_grad (grad), the attrs it copies, its constant
#: attrs, and its null results.
HAND = [
    ("mlp_bwd", 19, 16, "pd_op.mean_grad", ["in0", "grad0", "in1"], {"keepdim"}, {"reduce_all": False}, []),
    ("mlp_bwd", 20, 14, "pd_op.elementwise_pow_grad", ["in0", "in1", "grad0"], set(), {}, [1]),
    ("mlp_bwd", 22, 12, "pd_op.subtract_grad", ["in0", "in1", "grad0"], set(), {"axis": -1}, [1]),
    ("mlp_bwd", 24, 11, "pd_op.add_grad", ["in0", "in1", "grad0"], set(), {"axis": -1}, []),
    ("mlp_bwd", 26, 10, "pd_op.matmul_grad", ["in0", "in1", "grad0"], {"transpose_x", "transpose_y"}, {}, []),
    ("mlp_bwd", 28, 9, "pd_op.relu_grad", ["out0", "grad0"], set(), {}, []),
    ("mlp_bwd", 31, 7, "pd_op.matmul_grad", ["in0", "in1", "grad0"], {"transpose_x", "transpose_y"}, {}, [0]),
    ("cnn_bwd", 40, 30, "pd_op.cross_entropy_with_softmax_grad", ["in1", "out0", "grad1"],
     {"axis", "ignore_index", "numeric_stable_mode", "soft_label", "use_softmax"}, {}, []),
    ("cnn_bwd", 45, 27, "pd_op.flatten_grad", ["in0", "grad0"], set(), {}, []),
    ("cnn_bwd", 46, 25, "pd_op.dropout_grad", ["out1", "grad0", "in2"], {"is_test", "mode"}, {}, []),
    ("cnn_bwd", 47, 23, "pd_op.pool2d_grad", ["in0", "out0", "grad0", "in1"],
     {"adaptive", "ceil_mode", "data_format", "exclusive", "global_pooling", "padding_algorithm", "paddings",
      "pooling_type", "strides"}, {}, []),
    ("cnn_bwd", 49, 15, "pd_op.batch_norm_grad",
     ["in0", "in3", "in4", "out1", "out2", "out3", "out4", "out5", "grad0"],
     {"data_format", "epsilon", "is_test", "momentum", "trainable_statistics", "use_global_stats"}, {}, []),
    ("cnn_bwd", 54, 11, "pd_op.conv2d_grad", ["in0", "in1", "grad0"],
     {"data_format", "dilations", "groups", "padding_algorithm", "paddings", "strides"}, {}, [0]),
    ("cnn_bwd", 56, 13, "pd_op.reshape_grad", ["in0", "grad0"], set(), {}, []),
]


def _golden(name: str):
    prog = pir.load(GOLDENS / f"{name}.json")
    return prog, {r.id: op for op in prog.walk() for r in op.results}


def _popped(prog) -> dict:
    """A value cf.tuple_pop gives back in a control-flow backward -> the forward value pushed."""
    stack_of, pushed, alias = {}, {}, {}
    for op in prog.walk():
        if op.name == "cf.stack_create":
            stack, inlet, outlet = op.results
            stack_of[inlet] = stack_of[outlet] = stack
        elif op.name == "cf.tuple_push":
            pushed[stack_of[op.operands[0]]] = op.operands[1:]
        elif op.name == "cf.tuple_pop":
            alias.update(zip(op.results, pushed[stack_of[op.operands[0]]]))
    return alias


def _resolve(token: str, fwd) -> object:
    s = Source.parse(token)
    return fwd.operands[s.index] if s.kind == "in" else fwd.results[s.index] if s.kind == "out" else None


def _stopped_inputs(fwd, rule) -> set[str]:
    """The forward inputs with grad semantics Paddle's pass stops: stop_gradient values."""
    return {f"in{rule.inputs.index(g)}" for g in rule.grad_inputs
            if fwd.operands[rule.inputs.index(g)] is not None
            and fwd.operands[rule.inputs.index(g)].stop_gradient}


@pytest.mark.parametrize("case", HAND, ids=[f"{c[0]}:{c[3]}@{c[1]}" for c in HAND])
def test_hand_written_rules_from_the_goldens(case):
    golden, grad_id, fwd_id, grad_name, operands, copied, consts, nulls = case
    prog, by_id = _golden(golden)
    grad, fwd = by_id[grad_id], by_id[fwd_id]
    # the hand-written facts hold in Paddle's file ...
    assert grad.name == grad_name
    assert len(grad.operands) == len(operands)
    forward_values = {r for op in prog.walk() if op is not grad for r in op.results if r.id < grad_id}
    for token, value in zip(operands, grad.operands):
        want = _resolve(token, fwd)
        if want is None:   # an out_grad: a value the backward made, not a forward one
            assert value is not None and value.id > fwd_id and value not in set(fwd.operands), token
        else:
            assert value is want, (token, value, want)
    for a in copied:
        assert grad.attrs[a] == fwd.attrs[a], a
    for a, v in consts.items():
        assert grad.attrs[a].py() == v and a not in fwd.attrs, a
    assert [i for i, r in enumerate(grad.results) if r.is_null] == nulls
    assert forward_values  # the grad op reads the forward section
    # ... and the table says the same
    rule = vjp_rules.require_rule(fwd.name)
    body = rule.apply(stop=_stopped_inputs(fwd, rule))
    assert len(body.ops) == 1
    g = body.ops[0]
    assert g.name == grad_name
    assert [str(s) for s in g.operands] == operands
    assert set(g.copied_attrs) == copied and all(g.copied_attrs[a] == a for a in copied)
    assert {k: v.py() for k, v in g.const_attrs.items()} == consts
    assert [i for i, r in enumerate(g.results) if r is None] == nulls


GOLDEN_BWD = sorted(p.stem for p in GOLDENS.glob("*_bwd.json"))
#: Ops of a backward section the pass makes itself, not a VJP rule: the seed, zero out_grads,
#: the sums of several gradients, the grad if / while / pylayer.
PASS_MADE = {"pd_op.full", "pd_op.full_like", "pd_op.add_n", "pd_op.if", "pd_op.while", "pd_op.pylayer"}


@pytest.mark.parametrize("golden", GOLDEN_BWD)
def test_every_grad_op_in_the_goldens(golden):
    """Every op Paddle's pass wrote after its seed (inside if / while bodies too), but those the
    pass makes itself, is what the table's rule of some forward op predicts: name, operands,
    attrs, null results, stop_gradient (`scale`'s grad is a `scale`, not a `*_grad`)."""
    prog, _ = _golden(golden)
    ops = list(prog.walk())
    popped = _popped(prog)
    seed = next(i for i, op in enumerate(ops) if op.name == "pd_op.full_like")  # the backward starts
    # a pylayer's backward block is the user's Python backward function, not VJP rules
    user = {id(inner) for op in ops[seed:] if op.name == "pd_op.pylayer" for inner in op.walk() if inner is not op}
    checked = 0
    for gi, grad in enumerate(ops):
        if gi <= seed or grad.name in PASS_MADE or grad.name.startswith(("builtin.", "cf.")) or id(grad) in user:
            continue
        found = []
        for fwd in ops[:seed]:
            rule = vjp_rules.rule(fwd.name)
            if rule is None or rule.single is None or rule.single.name != grad.name:
                continue
            pred = rule.apply(stop=_stopped_inputs(fwd, rule)).ops[0]
            if len(pred.operands) != len(grad.operands):
                continue
            if all((t is None) == (v is None) and (t is None or t.kind == "grad"
                                                   or _resolve(str(t), fwd) is popped.get(v, v))
                   for t, v in zip(pred.operands, grad.operands)):
                found.append((fwd, pred))
        assert found, f"{golden}: no forward op's rule predicts {grad.name} (result %{grad.results[0].id})"
        fwd, pred = found[-1]
        for a, v in pred.attrs.items():
            want = fwd.attrs[v.name] if isinstance(v, Copied) else v
            assert grad.attrs[a] == want, (golden, grad.name, a)
        assert set(grad.attrs) == set(pred.attrs), (golden, grad.name)
        assert [r.is_null for r in grad.results] == [r is None for r in pred.results], (golden, grad.name)
        assert [bool(r.stop_gradient) for r in grad.results] == \
            list(pred.stop_gradient or [False] * len(pred.results)), (golden, grad.name)
        checked += 1
    assert checked >= {"mlp_bwd": 8, "cnn_bwd": 13, "transformer_bwd": 28}.get(golden, 1), (golden, checked)


# --------------------------------------------------------------------------
# Paddle: the table is what the generator records now
# --------------------------------------------------------------------------
#: ~30 ops across kinds, probe routes and rule shapes.
SAMPLE = ["pd_op.matmul", "pd_op.relu", "pd_op.mean", "pd_op.add", "pd_op.subtract", "pd_op.conv2d",
          "pd_op.batch_norm_", "pd_op.dropout", "pd_op.pool2d", "pd_op.softmax", "pd_op.layer_norm",
          "pd_op.scale", "pd_op.cast", "pd_op.concat", "pd_op.split", "pd_op.add_n", "pd_op.sign",
          "pd_op.reshape", "pd_op.transpose", "pd_op.cross_entropy_with_softmax", "pd_op.relu_",
          "pd_op.matmul_grad", "pd_op.multiply_grad", "pd_op.tanh_double_grad", "pd_op.add_double_grad_",
          "pd_op.lrn", "pd_op.array_write_", "pd_op.assign_out_", "pd_op.rnn", "pd_op.logsumexp",
          "pd_op.flash_attn", "pd_op.increment_"]


def test_sample_covers_the_shapes():
    probes = {TABLE["rules"][n]["probe"].split()[0] for n in SAMPLE if n in TABLE["rules"]}
    assert probes == {"api", "via", "twin", "legacy", "array"}
    assert any(n in TABLE["failed"] for n in SAMPLE)
    assert any("ops" in TABLE["rules"][n] for n in SAMPLE if n in TABLE["rules"])
    assert any("variants" in TABLE["rules"][n] for n in SAMPLE if n in TABLE["rules"])
    assert len(SAMPLE) >= 30


@pytest.mark.paddle
def test_sample_reprobed_with_paddle(tmp_path):
    """Re-probe the sample with the live Paddle: every entry is what the table holds."""
    py = require_paddle()
    out = tmp_path / "sample.json"
    env = {k: v for k, v in os.environ.items() if k != "FLAGS_enable_pir_api"}
    env["PYTHONHASHSEED"] = "0"
    r = subprocess.run([py, str(GENERATOR), "--ops", ",".join(SAMPLE), "--out", str(out)],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["paddle"] == TABLE["paddle"] and got["paddle_commit"] == TABLE["paddle_commit"]
    for name in SAMPLE:
        if name in TABLE["rules"]:
            assert got["rules"].get(name) == TABLE["rules"][name], name
        else:
            assert got["failed"].get(name) == TABLE["failed"][name], name
