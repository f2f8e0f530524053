"""Registry-wide op tests: every registered op is checked by what it declares.

For each op with a grad and `samples`, its forward kernel, grad maker and grad
kernel are run together and compared with central finite differences in
float64. A newly registered op is picked up automatically; an op with a grad
but no samples fails `test_every_differentiable_op_has_samples`.
"""
from __future__ import annotations

import numpy as np
import pytest

from pybackward.ops import opcheck, registry
from pybackward.ops.registry import Sample

OPS = registry.all_ops()

# Ops exempt from finite differences, each with the reason.
NO_FD = {
    "increment": "its grad maker emits Paddle's reverse increment (it restores a loop counter), "
                 "which is not a gradient",
    # --- vision / detection / quant families: straight-through estimators (Paddle's grad is
    # Out@GRAD itself, not the derivative of the rounding); tests/ops/test_nn_detection_quant.py checks them ---
    **{t: "straight-through estimator: X@GRAD = Out@GRAD by design (Paddle's grad kernel)"
       for t in ("fake_quantize_dequantize_abs_max", "fake_channel_wise_quantize_dequantize_abs_max",
                 "fake_quantize_dequantize_moving_average_abs_max", "moving_average_abs_max_scale")},
    # --- last differentiable ops (ops/index/index_elementwise.py) ---
    "pyramid_hash": "Paddle's pyramid_hash_grad computes no gradient (X is int32 ids; it takes an in-place SGD "
                    "step on W instead); tests/ops/test_index_elementwise_eig_pyramid_hash.py checks the op against Paddle",
}


def _cases():
    for op_type, opdef in OPS.items():
        if opdef.grad is None or opdef.samples is None or opdef.grad_of is not None:
            continue
        for i, sample in enumerate(opdef.samples(np.random.default_rng(1234))):
            yield pytest.param(op_type, i, id=f"{op_type}-{i}" + (f"-{sample.note}" if sample.note else ""))


@pytest.mark.parametrize("op_type,index", list(_cases()))
def test_grad_kernel_matches_finite_differences(op_type, index):
    if op_type in NO_FD:
        pytest.skip(NO_FD[op_type])
    opdef = OPS[op_type]
    sample = opdef.samples(np.random.default_rng(1234))[index]
    results = opcheck.check_op_grad(opdef, sample)
    assert results, f"{op_type}: nothing was checked"
    bad = [r for r in results if not r.ok]
    assert not bad, f"{op_type} sample {index} ({sample.note}): " + ", ".join(
        f"{r.var} max abs err {r.max_abs:.3g}, rel {r.max_rel:.3g}" for r in bad)


#: Ops that cannot be run alone: they execute a sub-block or a tensor array of
#: the program around them. Their gradients are checked end to end on whole
#: programs (tests/backward/test_control_flow.py), by finite differences there.
NEEDS_A_PROGRAM = {"conditional_block", "while", "read_from_array", "write_to_array", "select_output",
                   "select_input", "array_length",
                   # file ops (Paddle: no grad maker at all): they need files and Executor(files=DIR),
                   # tests/ops/test_io_file_ops.py runs them against Paddle's files
                   "save", "load", "save_combine", "load_combine",
                   # k4-io: Paddle records "no grad maker" for it; its inputs are a vocabulary and strings, not
                   # arrays a Sample holds; tests/ops/test_io_read_file_tokenizer.py compares it with Paddle's values
                   "faster_tokenizer",
                   # k4-graph: Paddle's input is a SelectedRows and it registers no grad maker ("none", an
                   # error on the gradient path); tests/ops/test_dist_optim_sparse.py checks it with Paddle's values
                   "get_tensor_from_selected_rows"}


def _runs(d) -> bool:
    """An op pybackward can run: it has a forward kernel."""
    return d.kernel is not None


def test_every_differentiable_op_has_samples():
    missing = [t for t, d in OPS.items() if d.grad is not None and d.grad_of is None and _runs(d)
               and d.samples is None and t not in NEEDS_A_PROGRAM]
    assert not missing, f"ops with a kernel and a grad but no samples to check it: {missing}"


def test_every_grad_op_type_of_a_runnable_op_has_a_kernel():
    missing = [t for t, d in OPS.items() if d.grad_of is not None and d.kernel is None
               and _runs(OPS[d.grad_of])]
    assert not missing, f"grad op types without a kernel: {missing}"


def test_ops_without_kernels_are_only_paddles_declared_ones():
    """Every op type a family module declares has a kernel, or says why it has
    none (`OpDef.no_kernel`: a send to a peer process in a world of one); the
    ones without come from Paddle's records (differentiated, not run)."""
    bad = [t for t, d in OPS.items() if d.kernel is None and not d.no_kernel and d.family != "paddle_table"
           and (d.grad_of is None or _runs(OPS[d.grad_of]))]
    assert not bad, bad


def _double_grad_cases():
    """Grad ops that have a grad themselves, with samples derived from their forward op's."""
    for op_type, opdef in OPS.items():
        if opdef.grad_of is None or opdef.grad is None:
            continue
        fwd = OPS[opdef.grad_of]
        if fwd.samples is None:
            continue
        for i, _ in enumerate(fwd.samples(np.random.default_rng(1234))):
            yield pytest.param(op_type, i, id=f"{op_type}-{i}")


@pytest.mark.parametrize("op_type,index", list(_double_grad_cases()))
def test_double_grad_kernel_matches_finite_differences(op_type, index):
    """Treat the grad op as the forward op: its inputs are the forward op's
    inputs and outputs plus a random Out@GRAD; its own grad op is checked by
    finite differences of its outputs."""
    gdef = OPS[op_type]
    fdef = OPS[gdef.grad_of]
    sample = fdef.samples(np.random.default_rng(1234))[index]
    rng = np.random.default_rng(7)
    out_names = {s: [f"{s.lower()}0"] for s in fdef.outputs}
    fwd_out = opcheck.run_kernel(fdef.type, sample.inputs, sample.attrs, out_names)
    ins = dict(sample.inputs)
    for s in fdef.outputs:
        if s in gdef.inputs:
            ins[s] = fwd_out[s]
        if f"{s}@GRAD" in gdef.inputs:
            ins[f"{s}@GRAD"] = [rng.standard_normal(np.shape(a)) for a in fwd_out[s]]
    grad_sample = Sample(ins, dict(sample.attrs), {s: 1 for s in gdef.outputs})
    results = opcheck.check_op_grad(gdef, grad_sample)
    assert results, f"{op_type}: nothing was checked"
    bad = [r for r in results if not r.ok]
    assert not bad, f"{op_type} sample {index}: " + ", ".join(
        f"{r.var} max abs err {r.max_abs:.3g}, rel {r.max_rel:.3g}" for r in bad)


def test_block_attrs_are_paddles():
    """`OpDef.block_attrs` is what Paddle's op protos declare (recorded by
    testdata/grad_makers/probe_block_attrs.py), a grad op's is its forward
    op's, and every other registered type carries none - the loader refuses a
    BLOCK attr on it (wire.check_block_attrs)."""
    import json
    from pathlib import Path
    recorded = json.loads((Path(__file__).resolve().parents[2] / "testdata" / "grad_makers" /
                           "block_attrs.json").read_text())
    for op_type, opdef in OPS.items():
        fwd = opdef.grad_of or op_type
        assert opdef.block_attrs == tuple(recorded.get(fwd, ())), op_type
    assert {t for t, d in OPS.items() if d.block_attrs} >= set(recorded)
