"""Every op type's grad ops against Paddle 3.3.1's own grad-op makers.

`testdata/grad_makers/` holds what Paddle's makers emitted (recorded by
`gen_grad_makers.py` with a live Paddle) for one-op programs of every op type
with a grad maker, in every variant: all inputs present, dispensable inputs
absent, and each differentiable input in the no-grad set. pybackward's
`grad_op_descs` must give the same descs byte for byte, and the same
grad-to-var map - no Paddle needed.
"""
from __future__ import annotations

import json
from functools import lru_cache

import pytest

import pybackward
from pybackward.backward.maker_check import check_grad_makers
from pybackward.ops import registry
from pybackward.ops.paddle_data import paddle_ops
from conftest import TESTDATA

REC = TESTDATA / "grad_makers"
CASES = json.loads((REC / "cases.json").read_text())
OP_TYPES = sorted({c["op"] for c in CASES})


@lru_cache(maxsize=1)
def _results():
    out: dict[str, list] = {}
    for r in check_grad_makers(REC):
        out.setdefault(r.op_type, []).append(r)
    return out


def test_all_recorded_op_types_have_a_maker_with_variants():
    """384 op types with a maker (all but the four sub-block ones), every one recorded."""
    makers = sorted(t for t, e in paddle_ops().items() if e["grad"] == "maker")
    assert len(makers) == 384
    assert OP_TYPES == makers
    variants = {c["variant"].split(":")[0] for c in CASES}
    assert variants == {"full", "no_dispensable", "no_grad"}


@pytest.mark.parametrize("op_type", OP_TYPES)
def test_grad_ops_equal_paddles_maker(op_type):
    results = _results()[op_type]
    bad = [f"[{r.variant}] {r.detail}" for r in results if not r.equal]
    assert not bad, f"{op_type}: " + "; ".join(bad)


def test_the_check_can_fail(monkeypatch):
    """A maker that drops one attr is caught (the comparison is byte-exact)."""
    from pybackward.ops import paddle_table
    opdef = registry.get("flip")
    rules = [dict(r, drop=list(r["drop"]) + ["axis"]) for r in opdef.grad.rules]
    monkeypatch.setattr(opdef, "grad", paddle_table.TemplateGrad("flip", rules))
    res = check_grad_makers(REC, {"flip"})
    assert res and not any(r.equal for r in res)
    assert "attrs" in res[0].detail


def test_every_paddle_op_type_is_known():
    ops = paddle_ops()
    assert len(ops) == 764
    known = registry.all_ops()
    assert not [t for t in ops if t not in known]
    kinds: dict[str, int] = {}
    for e in ops.values():
        kinds[e["grad"]] = kinds.get(e["grad"], 0) + 1
    assert kinds == {"maker": 384, "empty": 360, "none": 16, "sub_block": 4}


def test_an_op_with_no_paddle_gradient_on_the_path_is_a_clear_error():
    """`dequantize` has no grad maker in Paddle: on the path it is an error naming it."""
    prog = pybackward.load(TESTDATA / "programs" / "fit_a_line" / "forward.pb")
    op = prog.block(0).ops[0]
    op.desc.type = "dequantize"
    with pytest.raises(pybackward.UnknownOpError, match="dequantize.*no gradient"):
        pybackward.grad_op_descs(op)


def test_grad_op_descs_is_public_and_does_not_touch_the_program():
    prog = pybackward.load(TESTDATA / "programs" / "fit_a_line" / "forward.pb")
    before = pybackward.dumps(prog)
    mul = next(op for op in prog.block(0).ops if op.type in ("mul", "matmul_v2"))
    descs, g2v = pybackward.grad_op_descs(mul, no_grad_set=[mul.input("X")[0]])
    assert [d.type for d in descs] == [mul.type + "_grad"]
    outs = {v.parameter: list(v.arguments) for v in descs[0].outputs}
    assert outs["X@GRAD"] == [] and outs["Y@GRAD"] == [mul.input("Y")[0] + "@GRAD"]
    assert g2v[mul.input("Y")[0] + "@GRAD"] == mul.input("Y")[0]
    assert pybackward.dumps(prog) == before
    with pytest.raises(pybackward.ArgumentError):
        pybackward.grad_op_descs("mul")


#: Grad op types whose recorded LoD behaviour comes from a one-op program with
#: dense placeholder vars, where the real programs (tensor arrays) differ; the
#: control-flow goldens hold their flags.
LOD_FROM_GOLDENS = {"read_from_array", "write_to_array"}


def test_grad_vars_get_paddles_lod_level_field():
    """Whether a grad op's new vars carry `legacy_lod_level` (Paddle's shape
    inference, recorded by probe_lod.py) is what the registry declares."""
    lod = json.loads((REC / "lod.json").read_text())
    ops = registry.all_ops()
    assert len(lod) > 200
    bad = [(t, want) for t, want in lod.items()
           if t in ops and t not in LOD_FROM_GOLDENS and ops[t].sets_lod_level != want]
    assert not bad
