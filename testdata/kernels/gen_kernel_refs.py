"""Run every exported kernel sample with Paddle 3.3.1's CPU kernels.

Reads `<family>.samples.{json,npz}` (see export_samples.py) and writes
`<family>.paddle.{json,npz}`: for each sample and each of float32 and float64
(float inputs cast to it, complex ones to complex64 / complex128; integer
inputs as they are), a one-op program built with `block.append_op` (legacy
IR), the loss sum over outputs of <cot, out> (<as_real(cot), as_real(out)>
for a complex output: its gradient is cot in Paddle's dL/dRe + i dL/dIm),
`paddle.static.gradients(loss, differentiated inputs)`, and
Paddle's Executor on CPU. Keys: `<case>|<dtype>|out|<slot>|<i>`,
`<case>|<dtype>|grad|<slot>|<i>`; the JSON says per case and dtype what ran,
or Paddle's error. A case with a "lod" (sequence ops) feeds those inputs as
LoDTensors and records the outputs' LoDs too ("lods": `out|<slot>|<i>` -> lod).

    FLAGS_enable_pir_api=0 /path/to/paddle/python testdata/kernels/gen_kernel_refs.py [family ...]
"""
import json
import os
import pathlib
import sys
import warnings

os.environ["FLAGS_enable_pir_api"] = "0"
os.environ.setdefault("GLOG_v", "0")
warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import paddle  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
DTYPES = ("float32", "float64")
#: Complex inputs and outputs run in the complex type of each float precision.
COMPLEX = {"float32": "complex64", "float64": "complex128"}
#: Outputs Paddle requires to be the same var as an input (in-place updates).
ALIAS = {"batch_norm": {"MeanOut": "Mean", "VarianceOut": "Variance"},
         "sync_batch_norm": {"MeanOut": "Mean", "VarianceOut": "Variance"},
         "hierarchical_sigmoid": {"W_Out": "W"}}
#: Inputs Paddle's kernel splits by their LoD (and crashes without one): fed as
#: one sequence (a single image), which is what pybackward's kernel assumes.
LOD_INPUTS = {"box_clip": ("Input",)}
#: Ops whose outputs carry a LoD (fetched as tensors, compared as arrays).
LOD_OUTPUTS = {"box_clip", "multiclass_nms", "distribute_fpn_proposals", "collect_fpn_proposals",
               "generate_proposals"}


def _var_lod(lod, i):
    """The LoD of var i of a slot: a case's "lod" entry is one LoD (the first var's) or a list, one per var."""
    if not lod:
        return None
    per_var = lod if isinstance(lod[0], list) and lod[0] and isinstance(lod[0][0], list) else [lod]
    return per_var[i] if i < len(per_var) else None
# Optimizers and loss scaling (family optimizer / misc_more): Paddle updates these in place.
_ADAM = {"ParamOut": "Param", "Moment1Out": "Moment1", "Moment2Out": "Moment2", "Moment2MaxOut": "Moment2Max",
         "Beta1PowOut": "Beta1Pow", "Beta2PowOut": "Beta2Pow"}
_MOMENTUM = {"ParamOut": "Param", "VelocityOut": "Velocity"}
ALIAS.update({
    "sgd": {"ParamOut": "Param"}, "momentum": _MOMENTUM, "merged_momentum": _MOMENTUM,
    "lars_momentum": _MOMENTUM, "adam": _ADAM, "adamw": _ADAM, "merged_adam": _ADAM, "lamb": _ADAM,
    "adagrad": {"ParamOut": "Param", "MomentOut": "Moment"},
    "decayed_adagrad": {"ParamOut": "Param", "MomentOut": "Moment"},
    "adamax": {"ParamOut": "Param", "MomentOut": "Moment", "InfNormOut": "InfNorm"},
    "adadelta": {"ParamOut": "Param", "AvgSquaredGradOut": "AvgSquaredGrad",
                 "AvgSquaredUpdateOut": "AvgSquaredUpdate"},
    "rmsprop": {"ParamOut": "Param", "MomentOut": "Moment", "MeanSquareOut": "MeanSquare",
                "MeanGradOut": "MeanGrad"},
    "ftrl": {"ParamOut": "Param", "SquaredAccumOut": "SquaredAccumulator",
             "LinearAccumOut": "LinearAccumulator"},
    "nadam": {"param_out": "param", "momentum_decay_pow_out": "momentum_decay_pow",
              "beta2_pow_out": "beta2_pow", "mu_product_out": "mu_product", "moment1_out": "moment1",
              "moment2_out": "moment2"},
    "radam": {"param_out": "param", "beta1_pow_out": "beta1_pow", "beta2_pow_out": "beta2_pow",
              "rho_out": "rho", "moment1_out": "moment1", "moment2_out": "moment2"},
    "asgd": {"param_out": "param", "d_out": "d", "y_out": "y"},
    "rprop": {"param_out": "param", "prev_out": "prev", "learning_rate_out": "learning_rate"},
    "dpsgd": {"ParamOut": "Param"},
    "average_accumulates": {"out_sum_1": "in_sum_1", "out_sum_2": "in_sum_2", "out_sum_3": "in_sum_3",
                            "out_num_accumulates": "in_num_accumulates",
                            "out_old_num_accumulates": "in_old_num_accumulates",
                            "out_num_updates": "in_num_updates"},
    "fused_adam": {"ParamsOut": "Params", "Moments1Out": "Moments1", "Moments2Out": "Moments2",
                   "Moments2MaxOut": "Moments2Max", "Beta1PowsOut": "Beta1Pows", "Beta2PowsOut": "Beta2Pows"},
    "check_finite_and_unscale": {"Out": "X"}, "depend": {"Out": "X"},
    "coalesce_tensor": {"Output": "Input"},  # its Output vars are its Input vars (ops/fusion/inference.py)
    "auc": {"StatPosOut": "StatPos", "StatNegOut": "StatNeg"},
    "update_loss_scaling": {"Out": "X", "LossScaling": "PrevLossScaling", "OutGoodSteps": "InGoodSteps",
                            "OutBadSteps": "InBadSteps"},
})
# k4-graph (sparse_misc): DGC programs update Out/Param/Velocity/Grad in place; before rampup Paddle writes nothing
ALIAS.update({"dgc_clip_by_norm": {"Out": "X"},
              "dgc_momentum": {"ParamOut": "Param", "VelocityOut": "Velocity", "Grad_out": "Grad"}})

#: Float outputs whose dtype does not follow the inputs' (declared as such in both runs).
OUT_DTYPE = {"accuracy": {"Accuracy": "float32"}, "auc": {"AUC": "float64"},
             "check_numerics": {"values": "float32"}}
#: Ops without gradients whose compile-time output dtypes clash with the loss ops: no loss.
NO_LOSS = set(OUT_DTYPE) | {"viterbi_decode"}


def run_case(case, arrays, dtype, exe, with_loss=True):
    """Fetched values: `out|slot|i` (and `grad|slot|i` with the loss)."""
    name = case["case"]
    main, startup = paddle.static.Program(), paddle.static.Program()
    feed, diff = {}, []
    lods = case.get("lod")
    with paddle.static.program_guard(main, startup):
        block = main.global_block()
        ins = {}
        for slot, n in case["inputs"].items():
            vs = []
            for i in range(n):
                a = arrays[f"{name}|in|{slot}|{i}"]
                if a.dtype.kind == "f":
                    a = a.astype(dtype)
                elif a.dtype.kind == "c":
                    a = a.astype(COMPLEX[dtype])
                lod = _var_lod(lods.get(slot), i) if lods else None
                one_image = lod is None and slot in LOD_INPUTS.get(case["op"], ())
                # a LoD input's rows are unknown at compile time, as in real programs
                v = paddle.static.data(f"in_{slot}_{i}", [-1] + list(a.shape[1:]) if lod else list(a.shape),
                                       str(a.dtype), lod_level=len(lod) if lod else int(one_image))
                v.stop_gradient = not (slot in case["wrt"] and a.dtype.kind in "fc")
                if not v.stop_gradient:
                    diff.append((slot, i, v))
                if lod:
                    t = paddle.base.core.LoDTensor()
                    t.set(a, paddle.CPUPlace())
                    t.set_lod(lod)
                    a = t
                elif one_image:
                    a = paddle.base.create_lod_tensor(a, [[a.shape[0]]], paddle.CPUPlace())
                feed[v.name] = a
                vs.append(v)
            ins[slot] = vs
        alias = ALIAS.get(case["op"], {})
        outs = {}
        for slot, n in case["outputs"].items():
            if slot in alias and alias[slot] in ins:
                outs[slot] = ins[alias[slot]]
                continue
            ours = case["out_dtypes"].get(slot, [])
            fixed = OUT_DTYPE.get(case["op"], {}).get(slot)
            outs[slot] = [block.create_var(name=f"out_{slot}_{i}",
                                           dtype=fixed or (dtype if i >= len(ours) or ours[i].startswith("float")
                                                           else COMPLEX[dtype] if ours[i].startswith("complex")
                                                           else ours[i])) for i in range(n)]
        block.append_op(type=case["op"], inputs=ins, outputs=outs, attrs=case["attrs"])
        terms = []
        for slot, flags in (case["loss"].items() if with_loss and case["op"] not in NO_LOSS else ()):
            for i, use in enumerate(flags):
                if use:
                    out = outs[slot][i]
                    cot = arrays[f"{name}|cot|{slot}|{i}"]
                    if cot.dtype.kind == "c":  # Re(conj(cot) * out) = <as_real(cot), as_real(out)>
                        cot = np.stack([cot.real, cot.imag], axis=-1)
                        real = block.create_var(name=f"as_real_{slot}_{i}", dtype=dtype)
                        block.append_op(type="as_real", inputs={"X": [out]}, outputs={"Out": [real]})
                        out = real
                    cot = cot.astype(paddle.base.data_feeder.convert_dtype(out.dtype))
                    c = paddle.static.data(f"cot_{slot}_{i}", [-1] + list(cot.shape[1:]) if lods is not None
                                           and cot.ndim else list(cot.shape), str(cot.dtype))
                    feed[c.name] = cot
                    prod = block.create_var(name=f"prod_{slot}_{i}", dtype=out.dtype)
                    block.append_op(type="elementwise_mul", inputs={"X": [out], "Y": [c]},
                                    outputs={"Out": [prod]}, attrs={"axis": -1})
                    term = block.create_var(name=f"term_{slot}_{i}", dtype=out.dtype)
                    block.append_op(type="reduce_sum", inputs={"X": [prod]}, outputs={"Out": [term]},
                                    attrs={"reduce_all": True, "dim": [], "keep_dim": False})
                    terms.append(term)
        grads = []
        if terms and diff:
            loss = block.create_var(name="loss", dtype=terms[0].dtype)
            block.append_op(type="sum", inputs={"X": terms}, outputs={"Out": [loss]})
            grads = paddle.static.gradients([loss], [v for _, _, v in diff])
    fetch = [(f"out|{slot}|{i}", v) for slot, vs in outs.items() for i, v in enumerate(vs)]
    fetch += [(f"grad|{slot}|{i}", g) for (slot, i, _), g in zip(diff, grads) if g is not None]
    exe.run(startup)
    values = exe.run(main, feed=feed, fetch_list=[v for _, v in fetch],
                     return_numpy=lods is None and case["op"] not in LOD_OUTPUTS)
    out = {}
    for (k, _), v in zip(fetch, values):
        if v is not None and not isinstance(v, np.ndarray):      # fetched as a LoDTensor
            lod = v.lod()
            if lods is not None and lod and k.startswith("out|"):
                out.setdefault("@lods", {})[k] = [list(level) for level in lod]
            v = np.array(v) if v._is_initialized() else None
        a = np.asarray(v)
        if a.dtype != object:  # an output Paddle leaves unset (an empty XShape, a None)
            out[k] = a
    return out


def main() -> None:
    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())
    families = sys.argv[1:] or sorted(p.name[: -len(".samples.json")] for p in HERE.glob("*.samples.json"))
    for family in families:
        cases = json.loads((HERE / f"{family}.samples.json").read_text())
        arrays = dict(np.load(HERE / f"{family}.samples.npz"))
        out_arrays, report = {}, {}
        for case in cases:
            report[case["case"]] = {}
            for dtype in DTYPES:
                try:
                    vals = run_case(case, arrays, dtype, exe, with_loss=False)
                    shapes_agree = all(
                        vals[f"out|{slot}|{i}"].shape == arrays[f"{case['case']}|cot|{slot}|{i}"].shape
                        for slot, flags in case["loss"].items() for i, use in enumerate(flags) if use)
                    if shapes_agree:
                        vals = run_case(case, arrays, dtype, exe)
                except Exception as e:  # Paddle refuses the sample: recorded, not hidden
                    msg = [m.strip() for m in str(e).strip().splitlines() if m.strip()]
                    why = next((m for m in msg if "Error" in m or "Expected" in m), msg[0] if msg else "")
                    report[case["case"]][dtype] = {"error": (why or type(e).__name__)[:300]}
                    continue
                out_lods = vals.pop("@lods", None)
                for k, v in vals.items():
                    out_arrays[f"{case['case']}|{dtype}|{k}"] = v
                report[case["case"]][dtype] = {"fetched": sorted(vals)}
                if out_lods:
                    report[case["case"]][dtype]["lods"] = out_lods
        (HERE / f"{family}.paddle.json").write_text(json.dumps(report, indent=0, sort_keys=True) + "\n")
        np.savez_compressed(HERE / f"{family}.paddle.npz", **out_arrays)
        bad = sum(1 for r in report.values() for d in r.values() if "error" in d)
        print(f"{family}: {len(cases)} samples, {bad} runs Paddle refused", file=sys.stderr)


if __name__ == "__main__":
    main()
