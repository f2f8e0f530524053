"""Every kernel sample against Paddle 3.3.1's CPU kernels, in float32 and float64.

`testdata/kernels/<family>.samples.*` are the registry's samples (written by
`export_samples.py`); `<family>.paddle.*` are Paddle's forward outputs and
gradients of sum(<cot, out>) for them (written by `gen_kernel_refs.py` with a
live Paddle). Here pybackward's forward and grad kernels run on the same
inputs and must give Paddle's values: the same dtype and shape, float64 to
1e-6 relative, float32 within 1e-4 relative plus twice Paddle's own
float32-to-float64 distance on that element. No Paddle needed.
"""
from __future__ import annotations

import json
from functools import lru_cache

import numpy as np
import pytest

from pybackward.ops import opcheck, registry
from conftest import TESTDATA

KDIR = TESTDATA / "kernels"
#: Complex inputs run in the complex type of each float precision.
COMPLEX = {"float32": np.complex64, "float64": np.complex128}
FAMILIES = sorted(p.name[: -len(".paddle.json")] for p in KDIR.glob("*.paddle.json"))

#: Samples Paddle 3.3.1 refuses to run, with why; pybackward's kernels accept them.
PADDLE_REFUSES = {
    "matmul_v2-10": "Paddle's CPU matmul_v2_grad refuses this batch-broadcast shape",
    "reshape2-2": "the sample passes Shape as a tensor Paddle reads differently at compile time",
    "gather-2": "Axis given as a tensor: Paddle's compile-time shape inference fails",
    "bilinear_interp_v2-5": "OutSize/SizeTensor form Paddle's shape inference rejects in a one-op program",
    "bilinear_interp_v2-6": "OutSize/SizeTensor form Paddle's shape inference rejects in a one-op program",
    "bilinear_interp_v2-7": "Scale tensor of another dtype than X",
    "elementwise_max-1": "Paddle 3.3.1's maximum kernel ignores axis and refuses mid-axis broadcasting",
    "elementwise_min-1": "Paddle 3.3.1's minimum kernel ignores axis and refuses mid-axis broadcasting",
    "elementwise_pow-1": "Paddle 3.3.1's pow kernel ignores axis and refuses mid-axis broadcasting",
    **{f"elementwise_mod-{i}": "Paddle 3.3.1 has no CPU kernel for remainder_grad (elementwise_mod's grad op)"
       for i in range(4)},
    # float32-only Paddle kernels: float32 is checked by tests/ops/test_nn_regressions.py
    "hinge_loss-0": "Paddle 3.3.1 registers hinge_loss for float32 only",
    "log_loss-0": "Paddle 3.3.1 registers log_loss for float32 only",
    "log_loss-1": "Paddle 3.3.1 registers log_loss for float32 only",
    **{f"l1_norm-{i}": "Paddle 3.3.1 registers l1_norm for float32 only (checked by tests/ops/test_math_reductions_scans.py)"
       for i in range(2)},
    "lrn-0": "Paddle 3.3.1 registers lrn for float32 only",
    "lrn-1": "Paddle 3.3.1 registers lrn for float32 only",
    "lrn-2": "Paddle 3.3.1 registers lrn for float32 only",
    "expand-0": "legacy expand's compile-time shape inference keeps X's shape, so the one-op program's "
                "loss refuses the cotangent (the samples with ExpandTimes tensors are compared)",
    "reshape-1": "the sample passes Shape as a tensor Paddle reads differently at compile time",
    "strided_slice-0": "Paddle 3.3.1's CPU strided_slice_grad reads Out@GRAD at the undecreased rank and "
                       "refuses any decrease_axis (a real x[::-2, 1] program fails the same way)",
    "strided_slice-3": "decrease_axis: Paddle's CPU strided_slice_grad refuses it (as strided_slice-0)",
    "slogdeterminant-0": "legacy shape inference declares Out like Input, so the one-op program's "
                         "backward fails to broadcast; dygraph Paddle gives pybackward's values",
    "slogdeterminant-1": "legacy shape inference declares Out like Input (as slogdeterminant-0)",
    # collective (ops/dist/collective.py): Paddle's CPU kernels of the communication ops need a communicator
    # or refuse outright; pybackward runs them as the one rank of a world of one process
    **{f"c_identity-{i}": "Paddle 3.3.1's CPU c_identity raises 'Do not support c_identity for cpu kernel now'"
       for i in (0, 1)},
    "c_concat-0": "Paddle 3.3.1's c_concat requires nranks >= 2 (a world of one process is refused)",
    **{f"mp_allreduce_sum-{i}": "Paddle 3.3.1's mp_allreduce_sum needs an NCCL communicator, even on CPU"
       for i in (0, 1)},
    # plumbing (ops/control_flow/plumbing.py): ops a one-op legacy program cannot hold
    **{f"fetch_v2-{i}": "fetch_v2 writes the executor's fetch list: the harness's fetch of its Out fails "
                        "(a copy of X; checked by tests/ops/test_control_flow_plumbing.py)" for i in (0, 1)},
    **{f"shadow_output-{i}": "the legacy executor has no shadow_output kernel (a PIR op)" for i in (0, 1)},
    "share_buffer-0": "Paddle's Out shares X's memory but not its dims unless share_dims_and_dtype (then shape "
                      "()), and with it the one-op program cannot fetch XOut; tests/ops/test_control_flow_plumbing.py checks "
                      "the values",
    "nce-3": "float64 run: the harness casts CustomDistProbs/AliasProbs to float64, Paddle's nce kernel reads "
             "them only as float32 (the float32 run equals pybackward's: Paddle's alias draws reproduced)",
    "solve-3": "Y a batch of vectors: legacy shape inference declares Out like X, so the one-op "
               "program's backward fails to broadcast; dygraph Paddle gives pybackward's values",
    # sequence families (ops/sequence/sequence_ops.py, seq_conv.py, rnn_legacy.py): float32-only Paddle kernels,
    # their float32 values are checked by tests/ops/test_sequence.py
    **{f"sequence_conv-{i}": "Paddle 3.3.1's sequence_conv registers float64 but its context projection "
                             "reads the data as float32 and fails" for i in range(6)},
    **{f"row_conv-{i}": "Paddle 3.3.1 registers row_conv for float32 only" for i in range(3)},
    **{f"im2sequence-{i}": "Paddle 3.3.1 registers im2sequence for float32 only" for i in range(2)},
    **{f"match_matrix_tensor-{i}": "Paddle 3.3.1 registers match_matrix_tensor for float32 only"
       for i in range(3)},
    # linalg_more / linalg_decomp (k-sym)
    **{f"einsum-{i}": "'...' equation: Paddle 3.3.1's legacy einsum op reads uninitialised label sizes for it "
                      "(garbage sizes in its error; its Python API writes letters and unsqueezes instead, as "
                      "einsum-10); dygraph paddle.einsum gives pybackward's values and gradients to 1e-15" for i in (11, 12)},
    # family optimizer / misc_more: float32-only Paddle kernels (float32 checked by tests/ops/test_optim.py)
    **{f"ftrl-{i}": "Paddle 3.3.1 registers ftrl for float32 only" for i in range(2)},
    "decayed_adagrad-0": "Paddle 3.3.1 registers decayed_adagrad for float32 only",
    **{f"clip_by_norm-{i}": "Paddle 3.3.1 registers clip_by_norm for float32 only" for i in range(2)},
    **{f"auc-{i}": "Paddle 3.3.1 registers auc for float32 only (checked by tests/ops/test_optim.py)"
       for i in range(2)},
    # complex / fft families
    **{f"stft-{i}": "onesided=False: Paddle 3.3.1's CPU stft kernel allocates its one-sided spectrum as "
                    "real and fails reading it as complex (float32 and float64); onesided=True is compared"
       for i in (2, 3)},
    # misc_extra / graph / median / random_more (k-misc)
    **{f"linear_v2-{i}": "Paddle 3.3.1's linear_v2 shape inference refuses a float64 bias (is_valid_bias); "
                         "float32 is compared by tests/ops/test_kernel_cases.py" for i in (0, 1)},
    **{f"as_strided-{i}": "the legacy executor has no as_strided kernel (strided layout only); dygraph values "
                          "are checked by tests/ops/test_kernel_cases.py" for i in range(4)},
    **{f"index_select_strided-{i}": "the legacy executor has no index_select_strided kernel (strided layout "
                                    "only); dygraph values are checked by tests/ops/test_kernel_cases.py" for i in range(3)},
    # complex grads (k-conj): Paddle's legacy reduce_prod op has a complex kernel for reduce_all only
    "reduce_prod-6": "complex input reduced over dim=[1]: Paddle 3.3.1's legacy reduce_prod op finds no "
                     "complex kernel ('no kernels registered'); reduce_all (reduce_prod-7) runs",
    # --- vision / detection / quant families (ops/quant/fake_quant.py, vision_more.py, detection.py) ---
    # graph_sample / tdm / sparse_misc (k4-graph): their float32 runs are compared by
    # tests/ops/test_graph_sampling_tdm.py and tests/ops/test_dist_optim_sparse.py
    "graph_sample_neighbors-3": "sample_size -1: Paddle 3.3.1's CPU kernel resizes a vector to -1 and fails "
                                "(vector::_M_default_append); pybackward returns every neighbour, the API's meaning",
    **{f"weighted_sample_neighbors-{i}": "float64 run: the harness casts edge_weight to float64, Paddle's kernel "
                                         "reads float32 only" for i in range(2)},
    **{f"class_center_sample-{i}": "float64 run (the same integer sample again): Paddle's executor then refuses "
                                   "the ring_id op ('NCCLCommContext is nullptr'); the float32 run is compared"
       for i in range(3)},
    **{f"{op}-{i}": f"Paddle 3.3.1 registers {op} for float32 only" for op in ("dgc_clip_by_norm", "dgc_momentum")
       for i in range(4)},
    # float32-only Paddle kernels: their float32 values are compared by tests/ops/test_nn_detection_quant.py
    **{f"{op}-{i}": f"Paddle 3.3.1 registers {op} for float32 only (checked by tests/ops/test_nn_detection_quant.py)"
       for op, n in (("fake_quantize_abs_max", 3), ("fake_channel_wise_quantize_abs_max", 3),
                     ("fake_quantize_dequantize_abs_max", 3), ("fake_channel_wise_quantize_dequantize_abs_max", 3),
                     ("fake_quantize_moving_average_abs_max", 3),
                     ("fake_quantize_dequantize_moving_average_abs_max", 3), ("fake_quantize_range_abs_max", 2),
                     ("moving_average_abs_max_scale", 2), ("quantize_linear", 4), ("lookup_table_dequant", 2))
       for i in range(n)},
    **{f"{op}-{i}": f"{op}: Paddle's executor casts the float {slot} to X's int8/int16 kernel type before its "
                    f"kernel reads it as float32, so the one-op program always fails"
       for op, slot, n in (("dequantize_abs_max", "Scale", 2), ("dequantize_log", "Dict", 1)) for i in range(n)},
    **{f"margin_cross_entropy-{i}": "Paddle 3.3.1's CPU margin_cross_entropy kernel only raises (GPU only; the "
                                    "one-op program without Softmax is refused first); pybackward follows the GPU "
                                    "kernel, its grad checked by finite differences" for i in range(3)},
    # p2p (k4-io): Paddle refuses nranks 1 (shape inference) and any nranks on CPU (kernel only raises)
    **{f"partial_allgather-{i}": "Paddle 3.3.1 refuses nranks 1 ('The value of nranks should be >=2') and its "
                                 "CPU kernel refuses any nranks; over one rank pybackward gives Out = X "
                                 "(docs/deviations.md)" for i in range(2)},
    **{f"correlation-{i}": "Paddle 3.3.1's CPU correlation kernel only raises (GPU only, no CPU grad); "
                           "pybackward follows the GPU kernel, its grad checked by finite differences"
       for i in range(3)},
    # --- last differentiable ops (ops/index/index_elementwise.py) ---
    "index_elementwise_get-4": "two index tensors: Paddle's legacy executor refuses index_elementwise_get_grad "
                               "('DataType of ... slot Variable index must be consistent'); the forward equals "
                               "Paddle's (tests/ops/test_index_elementwise_eig_pyramid_hash.py)",
    **{f"pyramid_hash-{i}": "Paddle 3.3.1 registers pyramid_hash for float32 / int8 W only (float32 is checked by "
                            "tests/ops/test_index_elementwise_eig_pyramid_hash.py: DropPos rows past the ones it writes are unset memory)"
       for i in range(3)},
    # --- beam search (ops/sequence/beam_search.py, branch k4-fused) ---
    **{f"beam_search-{i}": "Paddle's CPU beam_search reads scores as float32 whatever the dtype: float64 fails "
                           "its data<float>() check (float32 runs compared by tests/ops/test_sequence_beam_search.py)"
       for i in (0, 1, 3, 4)},
    "beam_search-2": "without ids Paddle's beam_search fails (float32 read as int64); see tests/ops/test_sequence_beam_search.py",
    # --- inference-only ops (ops/fusion/inference.py, branch k4-fused) ---
    **{f"coalesce_tensor-{i}": "the samples' dtype attr is FP32, so Paddle refuses the float64 inputs (as "
                               "pybackward does); float32 compared by tests/ops/test_fusion_inference.py, which also "
                               "skips the alignment padding Paddle leaves unset" for i in range(4)},
}

#: Samples where Paddle's gradient is wrong (off finite differences in
#: float64) and pybackward's is right: docs/deviations.md.
PADDLE_WRONG = {
    "group_norm-2": "group_norm_grad on a 3-D input without Scale/Bias: Paddle's X@GRAD is off "
                    "finite differences by up to 0.83; pybackward's agrees with them to 1e-9",
    "roi_align-1": "roi_align_grad with aligned=True and a box under 1x1 bin: Paddle's grad kernel clamps the "
                   "box to 1x1, its forward does not, so X@GRAD is off finite differences by up to 0.48; "
                   "pybackward's grad is its forward's",
    **{f"masked_fill-{i}": "masked_fill_grad: Paddle's value@GRAD is out@GRAD where mask, unreduced (the "
                           "broadcast shape of x and mask, not value's); pybackward's is its sum, in value's "
                           "shape; x@GRAD and the forward equal Paddle's" for i in (0, 1)},
    **{f"shuffle_channel-{i}": "Paddle's float64 shuffle_channel kernels copy sizeof(int) * H * W bytes per "
                               "channel (half of each plane); in float32 forward and grad equal Paddle's"
       for i in (0, 1)},
    "triangular_solve-5": "unitriangular lower: Paddle's X@GRAD keeps the diagonal and first "
                          "superdiagonal (tril with k=1), entries the forward never reads",
    **{f"rnn-{i}": "bidirectional with SequenceLength and non-zero h0: Paddle's rnn_grad takes the "
                   "masked (zero) output as the previous hidden state of the reverse direction's "
                   "first valid step" for i in (1, 3, 5, 7)},
    "spectral_norm-0": "spectral_norm_grad: Paddle's kernel computes dOut * (1 - u v^T sum(W / sigma)) / sigma, "
                       "off finite differences by up to 0.28; pybackward's dOut / sigma - u v^T "
                       "sum(dOut * W) / sigma^2 agrees with them (forward equal to Paddle's to 1e-16)",
    "spectral_norm-1": "spectral_norm_grad (4-D weight, dim 1): as spectral_norm-0, Paddle off by up to 0.45",
    # misc_extra / graph / median / fused_elemwise (k-misc)
    **{c: "functor_list gelu,elementwise_add: Paddle's grad takes the tanh approximation's derivative against "
          "its erf forward (off finite differences by 5e-4), and with Y broadcast along axis 1 its X@GRAD is "
          "off by up to 2.5; pybackward's is the erf forward's derivative"
       for c in ("fused_elemwise_activation-8", "fused_elemwise_add_activation-5", "fused_elemwise_add_activation-6")},
    **{f"view_shape-{i}": "the legacy executor's view_shape leaves Out in input's shape (dims ignored); dygraph "
                          "Paddle gives dims' shape, as pybackward (tests/ops/test_kernel_cases.py)" for i in (0, 1)},
    # linalg_more / linalg_decomp (k-sym)
    **{f"eigh-{i}": "batched eigh_grad: Paddle's X@GRAD for a batch differs from the gradient it gives "
                    "each matrix alone (which equals pybackward's and finite differences); forward equal"
       for i in (2, 3)},
    "eigvalsh-1": "batched eigvalsh_grad: as eigh-2, Paddle's batch X@GRAD is not even symmetric; each "
                  "matrix alone gives pybackward's",
    **{f"lu_solve-{i}": "lu_solve_grad with trans T/C: Paddle's lu@GRAD is off finite differences (by up "
                        "to 8); b@GRAD and the forward equal Paddle's" for i in (2, 3)},
    # complex grads (k-conj): Paddle's complex kernels that miss or misplace the conjugate (forwards equal)
    **{f"elementwise_pow-{i}": "complex elementwise_pow_grad: Paddle's kernel returns conj(dOut * dOut/dX), "
                               "conjugating dOut too; pybackward's dOut * conj(dOut/dX) agrees with finite "
                               "differences" for i in (6, 7, 8)},
    "reduce_prod-7": "complex reduce_prod_grad: Paddle's kernel returns dOut * Out / X, without the conjugate "
                     "(off finite differences); pybackward's dOut * conj(Out / X) agrees with them",
    **{f"frobenius_norm-{i}": "complex frobenius_norm_grad: Out = sqrt(sum(X^2)) is holomorphic, Paddle's "
                              "grad dOut * X / Out lacks the conjugate; pybackward's dOut * conj(X / Out) "
                              "agrees with finite differences" for i in (3, 4)},
    **{f"softsign-{i}": "complex softsign_grad: X / (1 + |X|) is not holomorphic; Paddle's kernel "
                        "dOut * (1/(1+|X|) + Re(-X/(1+|X|)^2) X/|X|) is off finite differences by up to "
                        "0.5; pybackward's Wirtinger gradient agrees with them" for i in (3, 4)},
    "acosh-5": "complex acosh_grad where Re(X) < 0: Paddle's dOut * conj(1 / sqrt(X^2 - 1)) has the wrong "
               "sign there; pybackward's dOut * conj(1 / (sqrt(X - 1) sqrt(X + 1))) agrees with finite "
               "differences (and with Paddle where Re(X) > 0, acosh-3 and acosh-4)",
    # --- vision / detection / quant families (ops/nn/deformable_conv.py) ---
    **{f"{op}-{i}": f"{op}_grad with im2col_step {step}: Paddle's grad kernel does not clamp the step to the "
                    f"batch as its forward does ({why}); with step 1 (the Python API's) it equals pybackward's"
       for op in ("deformable_conv", "deformable_conv_v1")
       for i, step, why in ((2, 2, "every gradient off finite differences by up to 15"),
                            (3, 64, "0 blocks run: every gradient 0"))},
    "yolov3_loss-3": "two GT boxes in one cell and anchor: Paddle's loss adds both boxes' location and class "
                     "terms, its yolov3_loss_grad assigns (not adds) them, so X@GRAD keeps only the last box's "
                     "(off finite differences by up to 2); the Loss equals Paddle's",
    # --- last differentiable ops (ops/index/index_elementwise.py) ---
    "index_elementwise_get-6": "a view Paddle walks out of order (input_strides [1, 3]): its forward writes Out "
                               "in walk order, its grad reads Out@GRAD in the view's logical order, so x@GRAD is "
                               "off finite differences; forwards equal (tests/ops/test_index_elementwise_eig_pyramid_hash.py)",
    **{f"index_elementwise_put_with_tensor-{i}": "float64 value@GRAD: Paddle's kernel steps through it with a 4-byte "
                                                 "element and leaves most of it uninitialised; float32 and every "
                                                 "other value equal Paddle's (tests/ops/test_index_elementwise_eig_pyramid_hash.py)"
       for i in range(4)},
    "eig-1": "batched eig_grad: Paddle fills the diagonal of every matrix's inner term with the FIRST matrix's "
             "Eigenvalues@GRAD, so X@GRAD beyond the first matrix is off finite differences (by 2.5 here); "
             "the forward and the first matrix's X@GRAD equal Paddle's (tests/ops/test_index_elementwise_eig_pyramid_hash.py)",
}


@lru_cache(maxsize=None)
def _family(family: str):
    cases = json.loads((KDIR / f"{family}.samples.json").read_text())
    arrays = dict(np.load(KDIR / f"{family}.samples.npz"))
    report = json.loads((KDIR / f"{family}.paddle.json").read_text())
    paddle = dict(np.load(KDIR / f"{family}.paddle.npz"))
    return {c["case"]: c for c in cases}, arrays, report, paddle


def _params():
    for family in FAMILIES:
        cases, _, report, _ = _family(family)
        for name in cases:
            if name in report:
                yield pytest.param(family, name, id=name)


def _close32(got, want, want64):
    tol = 1e-4 * np.abs(want) + 1e-5
    if want64 is not None and want64.shape == want.shape:
        tol = tol + 2 * np.abs(want.astype(want64.dtype) - want64)
    wide = np.complex128 if want.dtype.kind == "c" else np.float64
    err = np.abs(got.astype(wide) - want.astype(wide))
    return bool(np.all(err <= tol)), float(err.max(initial=0.0))


def _compare(label, got, want, dtype, want64):
    assert got is not None, f"{label}: pybackward made no value, Paddle did"
    got = np.asarray(got)
    assert got.shape == want.shape, f"{label}: shape {got.shape}, Paddle {want.shape}"
    assert got.dtype == want.dtype, f"{label}: dtype {got.dtype}, Paddle {want.dtype}"
    if want.dtype.kind not in "fc":
        np.testing.assert_array_equal(got, want, err_msg=label)
    elif dtype == "float64" or want.dtype in (np.float64, np.complex128):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9, equal_nan=True, err_msg=label)
    else:
        ok, err = _close32(got, want, want64)
        assert ok, f"{label}: max abs err {err:.3g} beyond float32 tolerance"


@pytest.mark.parametrize("family,name", list(_params()))
def test_kernel_equals_paddle(family, name):
    cases, arrays, report, paddle = _family(family)
    case = cases[name]
    runs = report[name]
    refused = {d: r["error"] for d, r in runs.items() if "error" in r}
    if refused:
        assert name in PADDLE_REFUSES, f"Paddle refused {name}: {refused}"
        return
    assert name not in PADDLE_REFUSES, f"{name}: Paddle runs it now; drop it from PADDLE_REFUSES"
    if name in PADDLE_WRONG:  # ours must agree with finite differences instead
        op, index = name.rsplit("-", 1)
        opdef = registry.get(op)
        sample = opdef.samples(np.random.default_rng(1234))[int(index)]
        results = opcheck.check_op_grad(opdef, sample)
        assert results and all(r.ok for r in results), results
        return
    for dtype in ("float32", "float64"):
        ins = {}
        for slot, n in case["inputs"].items():
            ins[slot] = []
            for i in range(n):
                a = arrays[f"{name}|in|{slot}|{i}"]
                ins[slot].append(a.astype(dtype) if a.dtype.kind == "f" else
                                 a.astype(COMPLEX[dtype]) if a.dtype.kind == "c" else a)
        cots = {slot: [arrays[f"{name}|cot|{slot}|{i}"] if use else None for i, use in enumerate(flags)]
                for slot, flags in case["loss"].items()}
        lod, out_lods = case.get("lod"), {}
        outs, grads = opcheck.run_with_grads(case["op"], ins, case["attrs"], case["outputs"], {}, lod=lod)
        cots = {slot: [None if c is None else c.astype(outs[slot][i].dtype) for i, c in enumerate(cs)]
                for slot, cs in cots.items()}
        outs, grads = opcheck.run_with_grads(case["op"], ins, case["attrs"], case["outputs"], cots, lod=lod,
                                             out_lods=out_lods)
        if lod is not None:  # sequence ops: the outputs' LoDs too
            want_lods = runs[dtype].get("lods", {})
            for key in runs[dtype]["fetched"]:
                kind, slot, i = key.split("|")
                if kind == "out" and slot not in registry.get(case["op"]).intermediate_outputs:
                    got = out_lods.get(slot, [None] * (int(i) + 1))[int(i)]
                    assert got == want_lods.get(key), f"{name} [{dtype}] {key}: LoD {got}, Paddle {want_lods.get(key)}"
        fetched = runs[dtype]["fetched"]
        for key in fetched:
            kind, slot, i = key.split("|")
            want = paddle[f"{name}|{dtype}|{key}"]
            other = paddle.get(f"{name}|float64|{key}") if dtype == "float32" else None
            got = (outs if kind == "out" else grads)[slot][int(i)] if slot in (outs if kind == "out" else grads) else None
            if kind == "out" and slot in registry.get(case["op"]).intermediate_outputs:
                continue  # XShape, Mask...: Paddle's internal layout, not a value users read
            _compare(f"{name} [{dtype}] {key}", got, want, dtype, other)
