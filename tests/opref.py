"""Helpers shared by the op tests that compare with values Paddle 3.3.1 produced
(testdata/ops/math_activation.*, made by testdata/ops/gen_math_activation.py)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

import pybackward
from pybackward.ops import opcheck, registry
from pybackward.ops.registry import EMPTY_VAR_NAME, FwdOp

ROOT = Path(__file__).resolve().parent.parent
REF = json.loads((ROOT / "testdata/ops/math_activation.json").read_text())["cases"]
DATA = np.load(ROOT / "testdata/ops/math_activation.npz")
# --------------------------------------------------------------------------
# shared helpers
# --------------------------------------------------------------------------
def run_reference_case(name: str) -> None:
    """Forward and grads of one stored case vs Paddle's values."""
    m = REF[name]
    ins = {s: [DATA[f"{name}/in/{s}/{i}"] for i in range(k)] for s, k in m["inputs"].items()}
    attrs = m["attrs"]
    out = opcheck.run_kernel(m["op"], ins, attrs, {"Out": ["out"]})["Out"][0]
    want = DATA[f"{name}/out/Out"]
    assert isinstance(out, np.ndarray), type(out)
    assert out.dtype == want.dtype and out.shape == want.shape, (out.dtype, out.shape, want.dtype, want.shape)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(out, want, rtol=2e-5, atol=2e-6, equal_nan=True)
    else:
        np.testing.assert_array_equal(out, want)
    if not m["grads"]:
        return
    names = {s: [f"{s.lower()}{i}" for i in range(k)] for s, k in m["inputs"].items()}
    scope = {n: a for s in ins for n, a in zip(names[s], ins[s])}
    scope.update({"out": out, "out@GRAD": DATA[f"{name}/cot"]})
    fwd = FwdOp(m["op"], names, {"Out": ["out"]}, opcheck.encode_attrs(attrs), frozenset())
    for g in registry.get(m["op"]).make_grad(fwd):
        res = opcheck.run_kernel(g.type, {s: [scope[a] for a in args] for s, args in g.inputs.items()},
                                 opcheck.grad_op_attrs(g), g.outputs)
        for s, args in g.outputs.items():
            for a, v in zip(args, res.get(s, [])):
                if a != EMPTY_VAR_NAME:
                    scope[a] = scope[a] + v if a in scope else v
    for key in m["grads"]:
        slot, i = key.split("/")
        want = DATA[f"{name}/grad/{key}"]
        got = scope[f"{names[slot][int(i)]}@GRAD"]
        assert got.dtype == want.dtype and got.shape == want.shape, (key, got.dtype, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6, equal_nan=True, err_msg=f"{key}@GRAD")


def _strip(name: str) -> str:
    return re.sub(r"@RENAME@block\d+@\d+$", "", name)


def golden_grad_ops(case: str, types: set[str]):
    """For each forward op of `types` in a golden backward.pb: our grad ops and
    the golden grad op each one matches (by type and inputs)."""
    prog = pybackward.load(ROOT / "testdata/programs" / case / "backward.pb")
    block = prog.global_block()
    no_grad = {n + "@GRAD" for n, v in block.vars.items() if v.stop_gradient}
    ops = block.ops
    grads = [op for op in ops if op.attr("op_role", 0) & 1]
    pairs = []
    for op in ops:
        if op.attr("op_role", 0) & 1 or op.type not in types:
            continue
        fwd = FwdOp(op.type, op.inputs, op.outputs, list(op.desc.attrs), no_grad)
        for g in registry.get(op.type).make_grad(fwd):
            match = [o for o in grads if o.type == g.type and o.inputs == g.inputs
                     and {s: [_strip(a) for a in v] for s, v in o.outputs.items()} == g.outputs]
            pairs.append((op, g, match))
    return pairs


def check_golden(case: str, types: set[str], expect: int) -> None:
    pairs = golden_grad_ops(case, types)
    assert len(pairs) == expect, [(op.type, g.type) for op, g, _ in pairs]
    skip = {"op_role", "op_role_var", "op_callstack"}
    for op, g, match in pairs:
        assert len(match) == 1, f"{case}: no golden grad op for {op.type} -> {g.type} {g.inputs} {g.outputs}"
        golden = {k: v for k, v in match[0].all_attrs.items() if k not in skip}
        ours = opcheck.grad_op_attrs(g)
        if g.fresh:  # attrs Paddle fills with its defaults: only ours are set
            assert golden["op_namescope"] == "" and all(golden[k] == v for k, v in ours.items()), (golden, ours)
        else:
            assert {k: v for k, v in ours.items() if k not in skip} == golden


def maker_output(op_type: str, inputs: dict, outputs: dict, attrs: dict | None = None, no_grad=()):
    fwd = FwdOp(op_type, inputs, outputs, opcheck.encode_attrs(attrs or {}), frozenset(no_grad))
    return [(g.type, g.inputs, g.outputs) for g in registry.get(op_type).make_grad(fwd)]


