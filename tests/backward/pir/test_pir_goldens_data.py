"""The PIR backward goldens (testdata/pir_backward/) agree with their manifest.

Pure pybackward, no Paddle: every case's files exist and load, every value id the manifest names
exists in the file it names (and is the named parameter / data value), op counts match the files,
feeds / parameters / values have the keys and shapes the programs give them. The comparison of
pybackward's pass with these goldens is a separate test.
"""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from pir_cases import ARG_KEYS, DATA, Case, cases, manifest
from pybackward import pir

ALL = cases()
IDS = [c.name for c in ALL]
GEN_FILES = {"gen_pir_backward.py", "README.md", "manifest.json"}


def op_names(prog: pir.Program) -> list[str]:
    return [op.name for op in prog.walk()]


def same_value(a: pir.Value, b: pir.Value) -> bool:
    """`a` (in the backward file) and `b` (in the forward file) are one value: the same kind of
    defining op, result index and type, and (for results) the same operand op names."""
    if a.is_block_arg or b.is_block_arg:
        return a.is_block_arg and b.is_block_arg and a.index == b.index and a.type == b.type
    oa, ob = a.defining_op, b.defining_op
    return (oa.name == ob.name and a.index == b.index and a.type == b.type
            and [None if x is None else (x.defining_op.name if x.defining_op else "arg") for x in oa.operands]
            == [None if x is None else (x.defining_op.name if x.defining_op else "arg") for x in ob.operands])


def check_ref(prog: pir.Program, ref: dict | None, where: str) -> pir.Value | None:
    """A reference {"id", "name"} resolves in `prog`; its name (if any) names the same value.
    None is a list entry left out on purpose (target_gradients=[g, None])."""
    if ref is None:
        return None
    if ref["id"] is None:                     # a name Paddle refused (error cases)
        assert ref["name"], where
        return None
    v = prog.value(ref["id"])
    assert f"%{v.id}" == ref["id"], where
    if ref["name"] is not None:
        assert prog.value(ref["name"]) is v, f"{where}: {ref['name']} is not {ref['id']}"
    return v


def test_manifest_covers_the_directory():
    files = {p.name for p in DATA.iterdir() if p.is_file()}
    used = {f for c in ALL for f in c.entry["files"].values() if f is not None}
    assert used <= files, sorted(used - files)
    assert files - used == GEN_FILES, sorted(files - used - GEN_FILES)


def test_groups_and_model_corpus():
    """Every model of testdata/models/ that Paddle built there is here (or listed as not building)."""
    groups = Counter(c.group for c in ALL)
    assert groups["option"] >= 15 and groups["control_flow"] >= 8, groups
    index = json.loads((DATA.parent / "models" / "index.json").read_text())["models"]
    legacy_ok = {n for n, v in index.items() if v["status"] == "ok"}
    here = {c.entry["model"] for c in ALL if c.group == "model"}
    failed = {n.split("_generator")[0] for n in manifest()["model_build_failures"]}
    assert legacy_ok <= here | failed, sorted(legacy_ok - here - failed)
    assert {c.call for c in ALL} == {"append_backward", "gradients", "calc_gradient"}
    assert any(c.error for c in ALL)


@pytest.mark.parametrize("case", ALL, ids=IDS)
def test_case_consistent(case: Case):
    e = case.entry
    assert case.call in ("append_backward", "gradients", "calc_gradient")
    fwd = case.forward()
    assert len(op_names(fwd)) == e["op_counts"]["forward"]

    # arguments: ids in <c>.json, names where the value has one
    for key in ARG_KEYS:
        for ref in case.refs(key):
            check_ref(fwd, ref, f"{case.name} {key}")
    if case.call == "append_backward":
        assert case.args["loss"] is not None
    else:
        assert case.args["targets"] and case.args["inputs"]
    for sg in e["stop_gradient"]:
        v = check_ref(fwd, sg, f"{case.name} stop_gradient")
        assert v.stop_gradient is sg["value"], f"{case.name}: {sg}"

    # feeds: one per data op, shapes as declared (-1 filled); params: the program's parameters
    data_ops = {op.attr("name"): op.results[0] for op in fwd.block.ops if op.name == "pd_op.data"}
    feeds = case.feeds()
    assert set(feeds) == set(data_ops) == set(e["feeds"])
    for name, arr in feeds.items():
        dims = data_ops[name].type.dims
        assert arr.ndim == len(dims) and all(d < 0 or d == n for d, n in zip(dims, arr.shape)), name
        assert list(arr.shape) == e["feeds"][name]["shape"] and str(arr.dtype) == e["feeds"][name]["dtype"]
    params = case.params()
    assert sorted(params) == e["params"]
    declared = {op.attr("parameter_name"): op.results[0] for op in fwd.parameters()}
    assert set(params) <= set(declared)
    for name, arr in params.items():
        assert tuple(arr.shape) == declared[name].type.dims, name

    if case.error:
        assert case.backward_path is None and case.path("values") is None
        assert case.returned is None
        return

    # the backward program: counts, the arguments again, what Paddle returned
    bwd = case.backward()
    names = op_names(bwd)
    assert len(names) == e["op_counts"]["backward"]
    added = Counter(names) - Counter(op_names(fwd))
    assert dict(added) == e["op_counts"]["added"]
    assert e["control_flow"] == any(op.regions for op in bwd.block.ops)
    assert e["save_cf_stack_op"] == e["control_flow"]
    if e["control_flow"]:
        assert added["cf.stack_create"] >= 1
    for key in ARG_KEYS:
        assert len(case.refs(key, bwd=True)) == len(case.refs(key)), key
        for ref, ref0 in zip(case.refs(key, bwd=True), case.refs(key)):
            assert (ref is None) == (ref0 is None) and (ref is None or ref["name"] == ref0["name"])
            v, v0 = check_ref(bwd, ref, f"{case.name} {key} (bwd)"), check_ref(fwd, ref0, f"{case.name} {key}")
            if v is not None:                 # the same value in both files
                assert same_value(v, v0), (key, ref, ref0)
    if case.call == "append_backward":        # Paddle seeds the loss: full_like(loss, full(1))
        loss = bwd.value(case.args_bwd["loss"]["id"])
        assert any(op.name == "pd_op.full_like" and i == 0 for op, i in loss.uses), case.args_bwd["loss"]
    if case.call == "append_backward":
        assert len(case.returned) == len(e["returned_names"])
        for (p, g), pname in zip(case.returned, e["returned_names"]):
            pv = bwd.value(p)
            assert pv.defining_op.name == "builtin.parameter" and bwd.value(pname) is pv
            if g is not None:
                gv = bwd.value(g)
                assert not gv.is_null and gv.type.dims == pv.type.dims, (p, g)
    else:
        assert len(case.returned) == len(case.refs("inputs"))
        for g, ref in zip(case.returned, case.refs("inputs", bwd=True)):
            if g is not None:
                gv, xv = bwd.value(g), bwd.value(ref["id"])
                assert not gv.is_null and gv.type.dims == xv.type.dims, (g, ref)

    # Paddle's values: keyed by ids of the backward file, the loss/targets and every returned grad
    values = case.values()
    if case.path("values") is None:
        assert "executor_error" in e
        return
    want = [r["id"] for r in case.refs("loss" if case.call == "append_backward" else "targets", bwd=True)]
    grads = [g for _, g in case.returned] if case.call == "append_backward" else case.returned
    want += [g for g in grads if g is not None]
    assert list(values) == sorted(set(want)) and e["fetched"] == list(dict.fromkeys(want))
    for key, arr in values.items():
        dims = bwd.value(key).type.dims
        assert arr.dtype == np.float32, key
        assert arr.ndim == len(dims) and all(d < 0 or d == n for d, n in zip(dims, arr.shape)), (key, dims)
        assert np.isfinite(arr).all(), key
