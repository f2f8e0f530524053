"""The PIR <-> legacy op map (pybackward/data/pir_op_map.json, pybackward/pir/opmap.py).

Checked against sources the map was not derived from: `paddle_ops.json` and
`testdata/grad_makers/ops.json` (every legacy op's slots and attrs, from
Paddle's OpProtos), `pir_op_names.json` (every PIR op Paddle registers), facts
from Paddle's op_compat / ops.yaml quoted by hand below, and translations
Paddle made of ~50 ops with non-default attrs (`testdata/pir_opmap/`), which
the map must predict: op name, operand order and sources, results, attribute
order and values.
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import ROOT, TESTDATA, require_paddle
from pybackward.base.errors import PyBackwardError, UnknownOpError
from pybackward.pir import opmap

DATA = ROOT / "pybackward" / "data"
TABLE = json.loads(opmap.DATA_FILE.read_text())
PADDLE_OPS = json.loads((DATA / "paddle_ops.json").read_text())
PROTOS = json.loads((TESTDATA / "grad_makers" / "ops.json").read_text())
SAMPLES_FILE = TESTDATA / "pir_opmap" / "samples.json"
SAMPLES = json.loads(SAMPLES_FILE.read_text())
TYPES = {"bool", "int32", "int64", "float32", "float64", "str", "DataType", "Place", "IntArray",
         "Scalar", "index", "array", "?"}


def forms(entry: dict) -> list[dict]:
    return [entry, *entry.get("alt", [])]


# --------------------------------------------------------------------------
# Well formed, and consistent with what pybackward knows of the legacy ops
# --------------------------------------------------------------------------
def test_table_is_well_formed():
    assert next(iter(TABLE)) == "_generated_by"
    assert TABLE["_generated_by"] == "tools/gen_pir_op_map.py"
    assert TABLE["_paddle"].startswith("3.3.1 ")
    for section in ("ops", "grad_ops"):
        for t, e in TABLE[section].items():
            for f in forms(e):
                if f.get("pir") is None:
                    assert f.get("composite") or e.get("error"), (t, f)
                    continue
                assert f["pir"].split(".")[0] in ("pd_op", "builtin", "onednn_op"), (t, f["pir"])
                for row in f["in"] + f["out"]:
                    assert len(row) == 2 and isinstance(row[0], str), (t, row)
                for row in f["attrs"]:
                    assert len(row) in (3, 4) and row[2].removesuffix("[]") in TYPES, (t, row)
                    if row[1] is None and e.get("verified", True):
                        assert len(row) == 4, (t, row)  # a PIR-only attr records its value
    for t, why in TABLE["unmapped"].items():
        assert why["category"] and why["why"] and t not in TABLE["ops"]
    assert not set(TABLE["ops"]) & set(TABLE["grad_ops"])
    # compact: defaults equal to the legacy ones are not repeated
    assert len(opmap.DATA_FILE.read_bytes()) < 500_000


def test_every_legacy_type_is_mapped_or_explained():
    assert set(TABLE["ops"]) | set(TABLE["unmapped"]) == set(PADDLE_OPS)


def _slots(t: str, key: str) -> set[str]:
    return {s for s, _flags in PADDLE_OPS[t][key]}


def test_legacy_slots_exist():
    """Every legacy slot the map names is a slot of that op in paddle_ops.json."""
    for t, e in TABLE["ops"].items():
        ins, outs = _slots(t, "inputs"), _slots(t, "outputs")
        for f in forms(e):
            for name, src in f.get("in", []):
                if isinstance(src, str):
                    assert src in ins, (t, name, src)
                elif isinstance(src, dict):
                    assert set(src.get("tensor", [])) <= ins, (t, name, src)
            for name, slot in f.get("out", []):
                assert slot is None or slot in outs, (t, name, slot)
            assert set(f.get("dropped_out", [])) <= outs, t
            assert set(f.get("when", {}).get("with", [])) <= ins, t


def _grad_rule(g: str, fwd: str) -> dict:
    return next(r for r in PADDLE_OPS[fwd]["rule"] if r["type"] == g)


def test_grad_slots_exist():
    """A legacy grad op's slots are the ones paddle_ops.json's grad template gives it."""
    for g, e in TABLE["grad_ops"].items():
        fwd = e["of"]
        if fwd in TABLE["grad_ops"]:  # a double grad: listed on its grad op
            assert g in TABLE["grad_ops"][fwd]["grad"], g
            continue
        assert g in TABLE["ops"][fwd]["grad"], g
        rule = _grad_rule(g, fwd)
        for name, src in e.get("in", []):
            slots = [src] if isinstance(src, str) else (src or {}).get("tensor", [])
            assert set(slots) <= set(rule["inputs"]), (g, name, src)
        for name, slot in e.get("out", []):
            assert slot is None or slot in rule["outputs"], (g, name, slot)


def test_grad_types_match_the_legacy_makers():
    """The grad op types recorded per forward type are the ones paddle_ops.json's
    grad templates emit."""
    checked = 0
    for t, e in TABLE["ops"].items():
        rule = PADDLE_OPS[t].get("rule")
        if rule and e.get("grad"):
            assert e["grad"] == [r["type"] for r in rule], t
            checked += 1
    assert checked > 300


def test_legacy_attrs_exist():
    """Every legacy attr the map names is an attr of that legacy op (its OpProto)."""
    for t, e in TABLE["ops"].items():
        names = {a["name"] for a in PROTOS[t]["attrs"]} | set(PROTOS[t]["extras"])
        for f in forms(e):
            used = [row[1] for row in f.get("attrs", []) if row[1]]
            used += [src["attr"] for _n, src in f.get("in", [])
                     if isinstance(src, dict) and src.get("attr")]
            used += list(f.get("when", {}).get("attr_not", {}))
            assert set(used) <= names, (t, set(used) - names)
    for g, e in TABLE["grad_ops"].items():
        if e["of"] not in PROTOS:
            continue  # a double grad
        names = {a["name"] for a in PROTOS[e["of"]]["attrs"]} | set(PROTOS[e["of"]]["extras"])
        names |= {a[0] for a in _grad_rule(g, e["of"])["set"]}  # attrs the maker sets
        used = {row[1] for row in e.get("attrs", []) if row[1]}
        assert used <= names, (g, used - names)


def test_pir_names_are_registered():
    """Every PIR op the map names is one Paddle registers (pir_op_names.json)."""
    names = json.loads((DATA / "pir_op_names.json").read_text())["ops"]
    registered = {f"{d}.{n}" for d, ops in names.items() for n in ops}
    used = {f["pir"] for sec in ("ops", "grad_ops") for e in TABLE[sec].values() for f in forms(e)
            if f.get("pir") and not f["pir"].startswith("onednn_op.")}
    used |= {e["inplace"] for e in TABLE["ops"].values() if e.get("inplace")}
    assert used and used <= registered, sorted(used - registered)[:10]


def test_reverse_map_round_trips():
    for pir in opmap.pir_names():
        m = opmap.pir_to_legacy(pir)
        assert m.pir == pir
        assert m in opmap.legacy_forms(m.legacy_type)


# --------------------------------------------------------------------------
# Spot facts (Paddle's op_compat.yaml / ops.yaml, reference/pir.md)
# --------------------------------------------------------------------------
def test_spot_facts():
    m = opmap.require_legacy("matmul_v2")
    assert (m.pir, [o.slot for o in m.operands]) == ("pd_op.matmul", ["X", "Y"])
    assert [(a.name, a.legacy) for a in m.attrs] == [("transpose_x", "trans_x"), ("transpose_y", "trans_y")]
    assert opmap.require_legacy("elementwise_add").pir == "pd_op.add"
    assert opmap.require_legacy("sum").pir == "pd_op.add_n"
    assert opmap.require_legacy("lookup_table_v2").pir == "pd_op.embedding"
    assert opmap.require_legacy("softmax_with_cross_entropy").pir == "pd_op.cross_entropy_with_softmax"
    mean = opmap.require_legacy("reduce_mean")
    axis = mean.operand("axis")
    assert (mean.pir, axis.attr, axis.const_op) == ("pd_op.mean", "dim", "pd_op.full_int_array")
    pool = opmap.require_legacy("pool2d")
    assert pool.operand_of_attr("ksize").name == "kernel_size"
    drop = opmap.require_legacy("dropout")
    assert drop.operand("p").attr == "dropout_prob" and drop.operand("p").const_op == "pd_op.full"
    assert drop.result_of_slot("Mask").name == "mask"
    assert opmap.require_legacy("scale").operand_of_slot("ScaleTensor").name == "scale"
    assert opmap.require_legacy("concat").operand_of_slot("AxisTensor").name == "axis"
    split = opmap.require_legacy("split")
    assert [o.name for o in split.operands] == ["x", "sections", "axis"]
    reshape = opmap.require_legacy("reshape2")
    assert reshape.pir == "pd_op.reshape" and "XShape" in reshape.dropped_outputs
    assert set(reshape.operand("shape").tensor_slots) == {"Shape", "ShapeTensor"}
    bn = opmap.require_legacy("batch_norm")
    assert bn.result_of_slot("SavedMean").name == "saved_mean"
    assert bn.result_of_slot("Y").name == "out"
    g = opmap.require_legacy("matmul_v2_grad")
    assert g.pir == "pd_op.matmul_grad" and g.forward == "matmul_v2"
    assert [(o.name, o.slot) for o in g.operands] == [("x", "X"), ("y", "Y"), ("out_grad", "Out@GRAD")]
    assert [(r.name, r.slot) for r in g.results] == [("x_grad", "X@GRAD"), ("y_grad", "Y@GRAD")]
    assert opmap.pir_to_legacy("pd_op.add").legacy_type == "elementwise_add"
    assert opmap.pir_to_legacy("pd_op.matmul").legacy_type == "matmul_v2"
    assert opmap.pir_to_legacy("pd_op.reshape").legacy_type == "reshape2"
    dd = opmap.require_legacy("matmul_v2_grad_grad")  # a double grad
    assert dd.pir == "pd_op.matmul_double_grad" and dd.forward == "matmul_v2_grad"
    assert dd.operand("grad_x_grad").slot == "grad_x@GRAD"
    assert opmap.dtype_to_pir(5) == "float32" and opmap.dtype_from_pir("bfloat16") == 22


def test_forms_chosen_by_inputs_and_attrs():
    assert opmap.legacy_to_pir("split", {"X": ["a"]}, {"num": 2}).pir == "pd_op.split_with_num"
    assert opmap.legacy_to_pir("split", {"X": ["a"]}, {"num": 0}).pir == "pd_op.split"
    assert opmap.legacy_to_pir("tril_triu", attrs={"lower": True}).pir == "pd_op.tril"
    assert opmap.legacy_to_pir("tril_triu", attrs={"lower": False}).pir == "pd_op.triu"
    assert opmap.legacy_to_pir("fill_constant", {"ValueTensor": ["v"]}).pir == "pd_op.full_with_tensor"
    assert opmap.legacy_to_pir("fill_constant", ["ShapeTensor"]).pir == "pd_op.full_with_tensor"
    assert opmap.legacy_to_pir("fill_constant", {"ValueTensor": []}).pir == "pd_op.full"
    assert opmap.legacy_to_pir("mul").composite[-1] == "pd_op.reshape"


def test_grad_maker_types_without_pir_op():
    """reference/pir.md: these legacy types with grad makers have no PIR op."""
    for t in ("bilinear_interp", "nearest_interp", "crop", "cross_entropy", "cross_entropy2",
              "expand", "flatten2", "top_k", "py_func"):
        assert opmap.legacy_to_pir(t) is None, t
        assert opmap.unmapped_reason(t)
    assert TABLE["unmapped"]["while"]["pir"] == "pd_op.while"


def test_lookup_errors_are_one_line():
    with pytest.raises(UnknownOpError,
                       match=r"^legacy op 'flatten2' has no PIR counterpart: .*pd_op\.flatten2"):
        opmap.require_legacy("flatten2")
    with pytest.raises(UnknownOpError, match="not in the PIR op map"):
        opmap.require_legacy("no_such_op")
    with pytest.raises(UnknownOpError, match="'pd_op.nope'"):
        opmap.require_pir("pd_op.nope")
    with pytest.raises(UnknownOpError):
        opmap.dtype_to_pir(99)
    assert opmap.legacy_to_pir("no_such_op") is None and opmap.pir_to_legacy("x") is None


@pytest.mark.parametrize("content", ["{not json", '{"_generated_by": "someone else"}', None])
def test_bad_data_file(tmp_path, monkeypatch, content):
    path = tmp_path / "pir_op_map.json"
    if content is not None:
        path.write_text(content)
    monkeypatch.setattr(opmap, "DATA_FILE", path)
    opmap._table.cache_clear()
    try:
        with pytest.raises(PyBackwardError) as info:
            opmap.legacy_to_pir("relu")
        assert "pir_op_map.json" in str(info.value) and "\n" not in str(info.value)
    finally:
        monkeypatch.undo()
        opmap._table.cache_clear()


# --------------------------------------------------------------------------
# The map predicts Paddle's own translations (testdata/pir_opmap/samples.json)
# --------------------------------------------------------------------------
def _value(at: dict):
    if at.get("#") == "0.a_array":
        return [_value(e) for e in at["D"]]
    return at.get("D")


def _same(a, b) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-6 * max(1.0, abs(b))
    return a == b


class Translated:
    """A recorded translation: the PIR ops and where each legacy var went."""

    def __init__(self, sample: dict):
        self.legacy = sample["legacy"]
        self.ops = sample["pir"]["program"]["regions"][0]["blocks"][0]["ops"]
        self.where = {v: tuple(p) for v, p in sample["vars"].items()}
        self.producer = {r["%"]: (i, j) for i, op in enumerate(self.ops)
                         for j, r in enumerate(op.get("O", []))}

    def value_id(self, var: str) -> int:
        i, j = self.where[var]
        return self.ops[i]["O"][j]["%"]

    def fed_by_vars(self, vid: int, names: list[str]) -> bool:
        """Operand value `vid` is the legacy vars `names` (one var, or a combine of them)."""
        want = [self.value_id(n) for n in names]
        if want == [vid]:
            return True
        i, _ = self.producer[vid]
        op = self.ops[i]
        if op["#"] == "1.stack":  # a *TensorList of scalars, stacked
            i, _ = self.producer[op["I"][0]["%"]]
            op = self.ops[i]
        return op["#"] == "0.combine" and [x["%"] for x in op["I"]] == want


@pytest.mark.parametrize("sample", SAMPLES, ids=[s["name"] for s in SAMPLES])
def test_map_predicts_translation(sample):
    tr = Translated(sample)
    legacy = tr.legacy
    attrs = {k: v[1] for k, v in legacy["attrs"].items()}
    m = opmap.legacy_to_pir(legacy["type"], legacy["inputs"], attrs, legacy["outputs"])
    assert m is not None and m.pir, legacy["type"]
    # the op name
    want = "1." + m.pir.removeprefix("pd_op.")
    mains = [i for i, op in enumerate(tr.ops) if op["#"] == want]
    assert len(mains) == 1, (want, [op["#"] for op in tr.ops])
    main = tr.ops[mains[0]]
    # operands, in order
    operands = [x["%"] for x in main["I"]]
    assert len(operands) == len(m.operands)
    for vid, o in zip(operands, m.operands):
        filled = [s for s in ((o.slot,) if o.slot else o.tensor_slots) if legacy["inputs"].get(s)]
        if filled:
            assert tr.fed_by_vars(vid, legacy["inputs"][filled[0]]), (o, vid)
        elif o.is_mutable_attr:
            op = tr.ops[tr.producer[vid][0]]
            assert op["#"] == "1." + o.const_op.removeprefix("pd_op."), (o, op["#"])
            made = _value(next(a["AT"] for a in op["A"] if a["N"] == "value"))
            assert _same(made, attrs[o.attr] if o.attr else o.value), (o, made)
        else:
            assert vid == 0, o  # no legacy source: a null operand
    # results; a var the op reads and writes is an in-place pair of the x_ op
    read = {v: slot for slot, vs in legacy["inputs"].items() for v in vs}
    for j, r in enumerate(m.results):
        for var in legacy["outputs"].get(r.slot, []) if r.slot else []:
            if var in read:
                assert m.pir == m.inplace
                assert (m.operand_of_slot(read[var]).name, r.name) in m.inplace_map, (r, var)
            else:
                assert tr.where[var] == (mains[0], j), (r, var)
    for slot in m.dropped_outputs:
        for var in legacy["outputs"].get(slot, []):
            assert tr.where.get(var, (None,))[0] != mains[0], (slot, var)
    # attributes: order, and values carried from the legacy attrs
    pir_attrs = {a["N"]: _value(a["AT"]) for a in main.get("A", [])}
    assert [a["N"] for a in main.get("A", [])] == [a.name for a in m.attrs]
    for a in m.attrs:
        if a.legacy and a.legacy in attrs and not a.has_value:
            expect = attrs[a.legacy]
            if a.type == "DataType":
                expect = opmap.dtype_to_pir(expect)
            assert _same(pir_attrs[a.name], expect), (a, pir_attrs[a.name])
        elif a.legacy is None and a.type != "Place":
            assert _same(pir_attrs[a.name], a.value), (a, pir_attrs[a.name])


def test_samples_cover_the_brief():
    """~30 representative ops, forward and grad, with the mutable-attribute cases."""
    types = {s["legacy"]["type"] for s in SAMPLES}
    assert len(types) >= 30
    assert {"matmul_v2_grad", "reshape2_grad", "reduce_mean_grad", "dropout_grad"} <= types
    assert {"reduce_mean", "pool2d", "dropout", "scale", "concat", "split"} <= types


@pytest.mark.paddle
def test_samples_are_current(tmp_path):
    """Re-record the samples with the live Paddle: they must not have changed."""
    py = require_paddle()
    out = tmp_path / "samples.json"
    env = {k: v for k, v in os.environ.items() if k != "FLAGS_enable_pir_api"}
    env["PYTHONHASHSEED"] = "0"
    r = subprocess.run([py, str(SAMPLES_FILE.parent / "gen_samples.py"), "--out", str(out)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(out.read_text()) == SAMPLES
