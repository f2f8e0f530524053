"""The registry's per-op samples, run through their PIR names.

For every forward op type with samples and a PIR form (`opmap.legacy_to_pir`
with the sample's inputs and attrs), each sample becomes a one-op PIR program:
its arrays fed through `pd_op.data` (a duplicable slot through
`builtin.combine`), the legacy attrs PIR passes as tensors made by
`pd_op.full_int_array` / `pd_op.full`, the others as PIR attributes, the
result types those of the legacy kernel's outputs. The PIR interpreter must
give what the legacy kernel gives the sample: the operand, attribute and
result maps are right, and the mutable attributes arrive. A sample is skipped
(with the reason) when the op has no PIR form, has LoDs (PIR has none), or is
one Paddle's translator turns into several PIR ops (an input or a non-default
attr the PIR op has no place for: elementwise `axis`, `reduce_all`,
`decrease_axis`, a `*Tensor` input); `test_most_samples_run_through_pir` keeps
those the exception.

The grad ops the legacy grad maker makes for each sample that runs (their
inputs: the sample, the forward kernel's outputs and a cotangent per output)
run the same way through their PIR names (`pd_op.matmul_grad`, ...), the
legacy `XShape` slot fed, as PIR does, the forward input itself; they must
give what the legacy grad kernels give (Paddle 3.3.1's map: 1,071 grad
samples of the 1,542 forward ones run; `test_most_sample_grads_run_through_pir`).
"""
from __future__ import annotations

import collections
from typing import Any

import numpy as np
import pytest

import pybackward.ops  # noqa: F401  (registers every op family)
from pybackward import pir
from pybackward.ops import registry
from pybackward.ops.opcheck import run_kernel
from pybackward.ops.paddle_data import paddle_op
from pybackward.pir import opmap
from pybackward.pir.model import Operation, make_value_ids
from pybackward.pir.types import NULL_TYPE, Attr, VectorType, dense
from pybackward.interpreter.pir_executor import PirExecutor
from pybackward.pir.opmap import resolve

def _attr(value: Any, type_: str) -> Attr | None:
    if value is None:
        return None
    if type_ == "DataType":
        return Attr.dtype(opmap.dtype_to_pir(int(value)))
    if type_ == "Place":
        return Attr.place()
    if isinstance(value, bool) or isinstance(value, np.bool_):
        return Attr.bool_(bool(value))
    if isinstance(value, (int, np.integer)):
        return Attr.i64(int(value))
    if isinstance(value, (float, np.floating)):
        return Attr.f64(float(value))
    if isinstance(value, str):
        return Attr.str_(value)
    if isinstance(value, (list, tuple)):
        if type_ == "IntArray":
            return Attr.int_array([int(v) for v in value])
        items = [_attr(v, type_.rstrip("[]")) for v in value]
        return Attr.array([a for a in items if a is not None])
    return None


def _dense(a: np.ndarray):
    return dense(np.asarray(a).dtype.name, list(np.shape(a)))


def _duplicable(op_type: str, slot: str) -> bool:
    rec = paddle_op(op_type) or {}
    return any(s == slot and "d" in flags for s, flags in rec.get("inputs", ()))


def build(op_type: str, sample) -> tuple[pir.Program, dict, Operation, dict] | str:
    """The one-op PIR program of a sample, its feeds, the op, the legacy kernel's outputs
    (or why there is none)."""
    d = registry.get(op_type)
    m = opmap.legacy_to_pir(op_type, sample.inputs, sample.attrs)
    if m is None or m.pir is None:
        return "unmapped"
    if sample.lod:
        return "lod"
    defaults = {n: v for n, _, v in registry.default_attrs(op_type) or ()}
    attrs = {**defaults, **sample.attrs}
    taken = {o.slot for o in m.operands} | {t for o in m.operands for t in o.tensor_slots}
    if any(vs and slot not in taken for slot, vs in sample.inputs.items()):
        return "not one PIR op"          # an input Paddle's translator turns into more ops
    implied = dict(resolve(m.pir).implied)
    if any(a in sample.attrs and a not in implied and sample.attrs[a] != defaults.get(a) or
           a in implied and attrs.get(a) != implied[a] for a in m.unused_attrs):
        return "not one PIR op"          # an attr PIR does not carry, not at its default
    counts = sample.outputs or {s: 1 for s in d.outputs}
    outs = {s: [f"{s.lower()}{i}" for i in range(n)] for s, n in counts.items()}
    try:
        want = run_kernel(op_type, {k: list(v) for k, v in sample.inputs.items()}, attrs, outs)
    except Exception as e:       # noqa: BLE001  (the legacy kernel refuses the sample: not ours to test)
        return f"legacy kernel: {type(e).__name__}"
    p = pir.Program()
    p.source = f"{op_type}.json"
    feeds: dict[str, np.ndarray] = {}

    def data(a: np.ndarray):
        name = f"in{len(feeds)}"
        feeds[name] = np.asarray(a)
        return p.block.append(Operation("pd_op.data", [], [_dense(a)], {
            "name": Attr.str_(name), "shape": Attr.int_array(list(np.shape(a))),
            "dtype": Attr.dtype(np.asarray(a).dtype.name)})).results[0]

    def fed(slot: str, arrays: list):
        if _duplicable(op_type, slot) or len(arrays) > 1:
            vs = [data(a) for a in arrays]
            return p.block.append(Operation("builtin.combine", vs, [VectorType(tuple(v.type for v in vs))])).results[0]
        return data(arrays[0])

    operands = []
    for om in m.operands:
        if om.slot == "XShape" and sample.inputs.get(om.slot):
            # PIR passes the forward input where the legacy grad op reads XShape ([0, *x.shape])
            operands.append(fed(om.slot, [np.zeros(np.shape(a)[1:], np.asarray(a).dtype)
                                          for a in sample.inputs[om.slot]]))
        elif om.slot and sample.inputs.get(om.slot):
            operands.append(fed(om.slot, sample.inputs[om.slot]))
        elif om.is_mutable_attr:
            slot = next((s for s in om.tensor_slots if sample.inputs.get(s)), None)
            if slot is not None:
                operands.append(fed(slot, sample.inputs[slot]))
                continue
            value = attrs.get(om.attr)
            if isinstance(value, str):    # isclose's rtol / atol are strings in the legacy op
                value = float(value)
            if value is None:
                operands.append(None)
            elif om.const_op == "pd_op.full_int_array":
                vals = [int(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
                operands.append(p.block.append(Operation("pd_op.full_int_array", [], [dense("int64", [len(vals)])], {
                    "value": Attr.int_array(vals), "dtype": Attr.dtype("int64")})).results[0])
            else:
                dt = "float64" if isinstance(value, float) else "bool" if isinstance(value, bool) else "int64"
                operands.append(p.block.append(Operation("pd_op.full", [], [dense(dt, [1])], {
                    "shape": Attr.int_array([1]), "value": Attr.f64(float(value)),
                    "dtype": Attr.dtype(dt)})).results[0])
        else:
            operands.append(None)
    pattrs = {}
    for am in m.attrs:
        if am.legacy is not None and am.legacy in attrs:
            a = _attr(attrs[am.legacy], am.type)
            if a is not None:
                pattrs[am.name] = a
    types = []
    for rm in m.results:
        got = want.get(rm.slot) if rm.slot else None
        if not got or any(g is None or isinstance(g, list) for g in got):
            types.append(NULL_TYPE)
        elif len(outs.get(rm.slot, ())) > 1 or _duplicable_out(op_type, rm.slot):
            types.append(VectorType(tuple(_dense(g) for g in got)))
        else:
            types.append(_dense(got[0]))
    op = p.block.append(Operation(m.pir, operands, types, pattrs))
    make_value_ids(p)
    return p, feeds, op, {rm.slot: want.get(rm.slot) for rm in m.results if rm.slot}


def _duplicable_out(op_type: str, slot: str) -> bool:
    rec = paddle_op(op_type) or {}
    return any(s == slot and "d" in flags for s, flags in rec.get("outputs", ()))


def cases():
    out = []
    for op_type, d in sorted(registry.all_ops().items()):
        if d.samples is None or d.kernel is None or d.grad_of is not None:
            continue
        for k, sample in enumerate(d.samples(np.random.default_rng(0))):
            out.append((op_type, k, sample))
    return out


def check(op_type: str, sample) -> str:
    built = build(op_type, sample)
    if isinstance(built, str):
        return built
    p, feeds, op, want = built
    refs = {f"%{r.id}": m for r, m in zip(op.results, opmap.legacy_to_pir(op_type, sample.inputs,
                                                                          sample.attrs).results)
            if not r.is_null and m.slot in want}
    got = PirExecutor(seed=0).run(p, feeds, {}, fetch=list(refs))
    for ref, rm in refs.items():
        have, expect = got[ref], want[rm.slot]
        have = have if isinstance(have, list) else [have]
        assert len(have) == len(expect), f"{op_type} {rm.slot}: {len(have)} values, legacy {len(expect)}"
        for h, e in zip(have, expect):
            e = np.asarray(e)
            assert h.dtype == e.dtype and h.shape == e.shape, \
                f"{op_type} {rm.slot}: {h.dtype}{h.shape}, legacy {e.dtype}{e.shape}"
            np.testing.assert_allclose(h, e, rtol=1e-6, atol=1e-12, equal_nan=True, err_msg=f"{op_type} {rm.slot}")
    return "ok"


CASES = cases()
#: (op type, sample index) -> what check() said (filled as the tests run).
RESULTS: dict[tuple[str, int], str] = {}
SKIP_REASONS = {"unmapped": "the op has no PIR form", "lod": "a LoD sample (PIR has no LoD)",
                "not one PIR op": "the translator makes more than one PIR op of this sample"}


def _result(op_type: str, k: int, sample) -> str:
    if (op_type, k) not in RESULTS:
        RESULTS[(op_type, k)] = check(op_type, sample)
    return RESULTS[(op_type, k)]


@pytest.mark.parametrize("op_type,k,sample", [pytest.param(t, k, s, id=f"{t}-{k}") for t, k, s in CASES])
def test_sample_through_the_pir_op(op_type, k, sample):
    result = _result(op_type, k, sample)
    if result != "ok":
        pytest.skip(SKIP_REASONS.get(result, result))


def test_most_samples_run_through_pir():
    """The skips above stay the exception (Paddle 3.3.1's map: 1,541 of 1,760 samples, of 438 op types, run)."""
    results = [_result(t, k, s) for t, k, s in CASES]
    ok_types = {t for (t, _k, _s), r in zip(CASES, results) if r == "ok"}
    assert results.count("ok") >= 1500 and len(ok_types) >= 430, (results.count("ok"), len(ok_types))


# ------------------------------------------------------------------ the grad ops of the samples
#: (grad op type, inputs, attrs, outputs) of a forward sample, the legacy grad maker's ops
#: with their inputs computed: the forward kernel's outputs, and a cotangent for each output
#: (random for a float output, zeros else, as Paddle's backward fills a missing one).
class GradSample:
    """A grad op of a forward sample, shaped as a Sample for `build` / `check`."""

    def __init__(self, inputs: dict, attrs: dict, outputs: dict) -> None:
        self.inputs, self.attrs, self.outputs, self.lod = inputs, attrs, outputs, None


def grad_samples(op_type: str, sample) -> list[tuple[str, GradSample]] | str:
    """The legacy grad ops of a forward sample, as (grad type, GradSample), or why there are none."""
    from pybackward.ops.opcheck import encode_attrs, grad_op_attrs
    from pybackward.ops.registry import EMPTY_VAR_NAME, FwdOp
    d = registry.get(op_type)
    if d.grad is None:
        return "no grad op"
    attrs = {**{n: v for n, _, v in registry.default_attrs(op_type) or ()}, **sample.attrs}
    ins = {s: [f"{s}.{i}" for i in range(len(v))] for s, v in sample.inputs.items() if v}
    counts = sample.outputs or {s: 1 for s in d.outputs}
    outs = {s: [f"{s}.out{i}" for i in range(n)] for s, n in counts.items()}
    scope = {n: np.asarray(a) for s, names in ins.items() for n, a in zip(names, sample.inputs[s])}
    try:
        res = run_kernel(op_type, {s: [scope[n] for n in names] for s, names in ins.items()}, attrs, outs)
    except Exception as e:      # noqa: BLE001
        return f"legacy kernel: {type(e).__name__}"
    rng = np.random.default_rng(1)
    for s, names in outs.items():
        for n, a in zip(names, res.get(s, [])):
            if not isinstance(a, np.ndarray):
                continue
            scope[n] = a
            scope[n + "@GRAD"] = (rng.standard_normal(a.shape).astype(a.dtype) if a.dtype.kind == "f"
                                  else np.zeros_like(a))
    try:
        gops = d.make_grad(FwdOp(op_type, ins, outs, encode_attrs(attrs), frozenset()))
    except Exception as e:      # noqa: BLE001
        return f"grad maker: {type(e).__name__}"
    out = []
    for g in gops:
        if any(a not in scope for args in g.inputs.values() for a in args if a != EMPTY_VAR_NAME):
            return "a grad op reads a value the sample does not make"
        g_ins = {k: [scope[a] for a in args if a != EMPTY_VAR_NAME] for k, args in g.inputs.items()}
        g_outs = {k: sum(1 for a in args if a != EMPTY_VAR_NAME) for k, args in g.outputs.items()}
        out.append((g.type, GradSample(g_ins, grad_op_attrs(g), {k: n for k, n in g_outs.items() if n})))
    return out


def grad_check(op_type: str, sample) -> str:
    gs = grad_samples(op_type, sample)
    if isinstance(gs, str):
        return gs
    results = [check(t, g) for t, g in gs]
    return "ok" if results and all(r == "ok" for r in results) else next((r for r in results if r != "ok"), "none")


GRAD_RESULTS: dict[tuple[str, int], str] = {}
GRAD_SKIPS = {"no grad op": "the op has no grad op", "unmapped": "the grad op has no PIR form",
              "not one PIR op": "the translator makes more than one PIR op of the grad op"}


def _grad_result(op_type: str, k: int, sample) -> str:
    if (op_type, k) not in GRAD_RESULTS:
        GRAD_RESULTS[(op_type, k)] = grad_check(op_type, sample)
    return GRAD_RESULTS[(op_type, k)]


@pytest.mark.parametrize("op_type,k,sample", [pytest.param(t, k, s, id=f"{t}-{k}") for t, k, s in CASES])
def test_sample_grad_through_the_pir_grad_op(op_type, k, sample):
    """The grad ops of each forward sample that runs through PIR, run through their PIR names
    (`pd_op.matmul_grad`, ...), give what the legacy grad kernels give."""
    if _result(op_type, k, sample) != "ok":
        pytest.skip("the forward sample does not run through PIR")
    result = _grad_result(op_type, k, sample)
    if result != "ok":
        pytest.skip(GRAD_SKIPS.get(result, result))


def test_most_sample_grads_run_through_pir():
    """The grad skips stay the exception too."""
    results = [_grad_result(t, k, s) for t, k, s in CASES if _result(t, k, s) == "ok"]
    assert results.count("ok") >= 1000, collections.Counter(results).most_common(12)


if __name__ == "__main__":      # a summary: python tests/interpreter/test_pir_samples.py
    tally: collections.Counter = collections.Counter()
    for t, k, s in CASES:
        try:
            r = check(t, s)
        except Exception as e:   # noqa: BLE001
            r = "FAIL"
            print(t, k, type(e).__name__, str(e)[:200])
        tally[r if not r.startswith("legacy") else "legacy kernel refuses"] += 1
    print(dict(tally))
