#!/usr/bin/env python
"""Reference values for the activation / comparison / math op kernels, from a
live PaddlePaddle 3.3.1 (legacy ProgramDesc IR).

For every case below, one op is appended with ``block.append_op`` to a fresh
program, its inputs fed, and Paddle's Executor run on CPU. Cases marked
``grad`` also get ``loss = reduce_sum(Out * cot)`` (``cot`` a fed random
cotangent) and ``append_backward(loss)``, so the fetched ``<input>@GRAD`` is
what Paddle's own grad op computes for ``Out@GRAD = cot``.

Writes ``math_activation.json`` (per case: op type, attrs, input/output slots)
and ``math_activation.npz`` (keys ``<case>/in/<slot>/<i>``,
``<case>/out/<slot>``, ``<case>/cot``, ``<case>/grad/<slot>/<i>``) beside this
script. The tests (tests/ops/test_math_activation.py, tests/ops/test_math_core.py) read
them; they never need Paddle.

    /path/to/paddle/venv/bin/python testdata/ops/gen_math_activation.py
"""
from __future__ import annotations

import json
import os
import sys
import warnings
import zlib

os.environ["FLAGS_enable_pir_api"] = "0"
os.environ.setdefault("GLOG_v", "0")
warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import paddle  # noqa: E402

paddle.enable_static()

HERE = os.path.dirname(os.path.abspath(__file__))
F32 = np.float32
INF = float("inf")


def _rs(seed):
    return np.random.RandomState(seed)


def n(shape, seed, scale=1.0, dtype=F32):
    return (_rs(seed).standard_normal(shape) * scale).astype(dtype)


def pos(shape, seed, lo=0.2, hi=3.0):
    return _rs(seed).uniform(lo, hi, shape).astype(F32)


def arr(values, dtype=F32):
    return np.array(values, dtype=dtype)


def ints(shape, seed, lo=-5, hi=6, dtype=np.int32):
    return _rs(seed).randint(lo, hi, shape).astype(dtype)


# Special points: kinks and boundaries, where the grad convention matters.
KINKS = arr([[-7.0, -6.0, -3.0, -1.0, -0.5, 0.0], [0.5, 1.0, 3.0, 6.0, 7.0, 25.0]])

CASES: list[dict] = []


def case(name, op, inputs, attrs=None, out_dtype=None, grad=True, outs=("Out",)):
    CASES.append(dict(name=name, op=op, inputs=inputs, attrs=attrs or {}, out_dtype=out_dtype,
                      grad=grad, outs=list(outs)))


# ---------------------------------------------------------------- activations
for t in ["relu", "sigmoid", "tanh", "exp", "square", "abs", "silu", "swish", "relu6"]:
    case(f"{t}_normal", t, {"X": [n((3, 4), 1, 3.0)]})
    case(f"{t}_kinks", t, {"X": [KINKS]})
for t in ["log", "sqrt", "rsqrt", "reciprocal"]:
    case(f"{t}_pos", t, {"X": [pos((3, 4), 2)]})
case("reciprocal_neg", "reciprocal", {"X": [-pos((2, 3), 3)]})
case("gelu_exact", "gelu", {"X": [n((3, 4), 4, 2.0)]})
case("gelu_tanh", "gelu", {"X": [n((3, 4), 5, 2.0)]}, {"approximate": True})
case("gelu_kinks", "gelu", {"X": [KINKS]})
case("leaky_relu_default", "leaky_relu", {"X": [KINKS]})
case("leaky_relu_alpha", "leaky_relu", {"X": [n((3, 4), 6)]}, {"alpha": 0.1})
case("elu_default", "elu", {"X": [KINKS]})
case("elu_alpha", "elu", {"X": [n((3, 4), 7, 2.0)]}, {"alpha": 0.5})
case("elu_neg_alpha", "elu", {"X": [KINKS]}, {"alpha": -0.5})
case("hard_swish_default", "hard_swish", {"X": [KINKS]})
case("hard_swish_normal", "hard_swish", {"X": [n((3, 4), 8, 3.0)]})
case("hard_swish_attrs", "hard_swish", {"X": [KINKS]}, {"threshold": 5.0, "scale": 4.0, "offset": 2.0})
case("softplus_default", "softplus", {"X": [n((3, 4), 9, 5.0)]})
case("softplus_beta", "softplus", {"X": [KINKS]}, {"beta": 2.0, "threshold": 5.0})
case("relu6_threshold_attr", "relu6", {"X": [KINKS]}, {"threshold": 3.0})
case("swish_beta_attr", "swish", {"X": [KINKS]}, {"beta": 2.0})
case("softmax_last", "softmax", {"X": [n((3, 5), 10, 3.0)]})
case("softmax_axis0", "softmax", {"X": [n((3, 5), 11, 3.0)]}, {"axis": 0})
case("softmax_3d_axis1", "softmax", {"X": [n((2, 3, 4), 12, 3.0)]}, {"axis": 1})
case("softmax_large", "softmax", {"X": [arr([[1000.0, 1001.0, 999.0], [-1000.0, -1002.0, -1001.0]])]})
case("log_softmax_last", "log_softmax", {"X": [n((3, 5), 13, 3.0)]})
case("log_softmax_axis0", "log_softmax", {"X": [n((2, 3, 4), 14, 3.0)]}, {"axis": 0})
case("pow_2", "pow", {"X": [n((3, 4), 15)]}, {"factor": 2.0})
case("pow_3", "pow", {"X": [n((3, 4), 16)]}, {"factor": 3.0})
case("pow_half", "pow", {"X": [pos((3, 4), 17)]}, {"factor": 0.5})
case("pow_factor_tensor", "pow", {"X": [pos((3, 4), 18)], "FactorTensor": [arr([1.5])]}, {"factor": 2.0})
case("pow_int", "pow", {"X": [ints((2, 3), 19, 0, 5)]}, {"factor": 2.0}, grad=False)
case("clip_attrs", "clip", {"X": [KINKS]}, {"min": -1.0, "max": 6.0})
case("clip_normal", "clip", {"X": [n((3, 4), 20, 2.0)]}, {"min": -0.5, "max": 1.0})
case("clip_tensors", "clip", {"X": [KINKS], "Min": [arr([0.0])], "Max": [arr([3.0])]}, {"min": -1.0, "max": 6.0})
case("clip_int", "clip", {"X": [ints((2, 3), 21)]}, {"min": -1.5, "max": 2.5}, grad=False)
X4 = n((2, 3, 2, 2), 22, 2.0)
case("prelu_all", "prelu", {"X": [X4], "Alpha": [arr([0.25])]}, {"mode": "all"})
case("prelu_channel", "prelu", {"X": [X4], "Alpha": [arr([0.1, 0.2, 0.3])]}, {"mode": "channel"})
case("prelu_channel_4d_alpha", "prelu", {"X": [X4], "Alpha": [arr([0.1, 0.2, 0.3]).reshape(1, 3, 1, 1)]},
     {"mode": "channel"})
case("prelu_channel_nhwc", "prelu", {"X": [n((2, 2, 2, 3), 23, 2.0)], "Alpha": [arr([0.1, 0.2, 0.3])]},
     {"mode": "channel", "data_format": "NHWC"})
case("prelu_element", "prelu", {"X": [X4], "Alpha": [pos((1, 3, 2, 2), 24, 0.05, 0.5)]}, {"mode": "element"})
case("prelu_channel_2d", "prelu", {"X": [n((3, 4), 25, 2.0)], "Alpha": [arr([0.1, 0.2, 0.3, 0.4])]},
     {"mode": "channel"})
case("prelu_kinks", "prelu", {"X": [KINKS], "Alpha": [arr([0.3])]}, {"mode": "all"})

# ---------------------------------------------------------------- comparisons
A = n((3, 4), 30)
B = A.copy()
B[0, :2] += 1.0
B[1, 1] -= 1.0
B[2, 2] += arr(5e-9)  # |a-b| < 1e-8: Paddle's float `equal` tolerance
EQ_X = arr([1e-7, 1.0, INF, -INF, np.nan, 0.0])
EQ_Y = arr([1.05e-7, 1.0, INF, INF, np.nan, -0.0])
for t in ["equal", "not_equal", "less_than", "less_equal", "greater_than", "greater_equal"]:
    case(f"{t}_same", t, {"X": [A], "Y": [B]}, out_dtype="bool", grad=False)
    case(f"{t}_bcast", t, {"X": [A], "Y": [B[1]]}, out_dtype="bool", grad=False)
    case(f"{t}_axis0", t, {"X": [n((3, 3), 31)], "Y": [arr([0.5, -0.2, 0.0])]}, {"axis": 0},
         out_dtype="bool", grad=False)
    case(f"{t}_int", t, {"X": [ints((2, 3), 32)], "Y": [ints((2, 3), 33)]}, out_dtype="bool", grad=False)
    case(f"{t}_special", t, {"X": [EQ_X], "Y": [EQ_Y]}, out_dtype="bool", grad=False)
BOOL_X = np.array([[True, False, True], [False, False, True]])
BOOL_Y = np.array([True, False, False])
for t in ["logical_and", "logical_or", "logical_xor"]:
    case(f"{t}_bool", t, {"X": [BOOL_X], "Y": [BOOL_Y]}, out_dtype="bool", grad=False)
    case(f"{t}_float", t, {"X": [arr([[0.0, 1.5, -2.0], [0.0, 0.0, 3.0]])], "Y": [arr([0.0, 2.0, 0.0])]},
         out_dtype="bool", grad=False)
case("logical_not_bool", "logical_not", {"X": [BOOL_X]}, out_dtype="bool", grad=False)
case("logical_not_int", "logical_not", {"X": [ints((2, 3), 34, -1, 2)]}, out_dtype="bool", grad=False)

# ---------------------------------------------------------------- math
case("mul_2d", "mul", {"X": [n((3, 4), 40)], "Y": [n((4, 5), 41)]})
case("mul_xcol2", "mul", {"X": [n((2, 3, 4), 42)], "Y": [n((4, 5), 43)]}, {"x_num_col_dims": 2})
case("mul_x3d_flat", "mul", {"X": [n((2, 3, 4), 44)], "Y": [n((12, 5), 45)]}, {"x_num_col_dims": 1})
case("mul_ycol2", "mul", {"X": [n((2, 6), 46)], "Y": [n((2, 3, 5), 47)]}, {"y_num_col_dims": 2})
MM = [
    ("2d", (3, 4), (4, 5), {}),
    ("tx", (4, 3), (4, 5), {"T_X": True}),
    ("ty", (3, 4), (5, 4), {"T_Y": True}),
    ("txty", (4, 3), (5, 4), {"T_X": True, "T_Y": True}),
    ("batch", (2, 3, 4), (2, 4, 5), {}),
    ("batch_2d", (2, 3, 4), (4, 5), {}),
    ("2d_batch", (3, 4), (2, 4, 5), {"T_Y": False}),
    ("batch_ty", (2, 3, 4), (2, 5, 4), {"T_Y": True}),
    ("1d_1d", (4,), (4,), {}),
    ("1d_2d", (4,), (4, 5), {}),
    ("2d_1d", (3, 4), (4,), {}),
    ("batch_1d", (2, 3, 4), (4,), {}),
]
for tag, xs, ys, flags in MM:
    v2 = {"trans_x": flags.get("T_X", False), "trans_y": flags.get("T_Y", False)}
    v1 = {"transpose_X": flags.get("T_X", False), "transpose_Y": flags.get("T_Y", False)}
    case(f"matmul_v2_{tag}", "matmul_v2", {"X": [n(xs, 50)], "Y": [n(ys, 51)]}, v2)
    case(f"matmul_{tag}", "matmul", {"X": [n(xs, 52)], "Y": [n(ys, 53)]}, v1)
case("matmul_alpha", "matmul", {"X": [n((3, 4), 54)], "Y": [n((4, 2), 55)]}, {"alpha": 0.5})
case("matmul_v2_bcast", "matmul_v2", {"X": [n((2, 1, 3, 4), 56)], "Y": [n((5, 4, 2), 57)]})
case("matmul_v2_bcast_same_rank", "matmul_v2", {"X": [n((2, 1, 3, 4), 68)], "Y": [n((1, 5, 4, 2), 69)]})
case("matmul_v2_bcast_ty", "matmul_v2", {"X": [n((1, 3, 4), 58)], "Y": [n((2, 2, 4), 59)]}, {"trans_y": True})
case("matmul_v2_1d_ty", "matmul_v2", {"X": [n((4,), 60)], "Y": [n((3, 4), 61)]}, {"trans_y": True})
case("matmul_v2_tx_1d", "matmul_v2", {"X": [n((4, 3), 62)], "Y": [n((4,), 63)]}, {"trans_x": True})
case("matmul_v2_int", "matmul_v2", {"X": [ints((2, 3), 64)], "Y": [ints((3, 2), 65)]}, grad=False)
case("bmm", "bmm", {"X": [n((2, 3, 4), 66)], "Y": [n((2, 4, 5), 67)]})
case("scale_after", "scale", {"X": [n((3, 4), 70)]}, {"scale": 2.5, "bias": 1.0})
case("scale_before", "scale", {"X": [n((3, 4), 71)]}, {"scale": -1.5, "bias": 0.5, "bias_after_scale": False})
case("scale_tensor", "scale", {"X": [n((3, 4), 72)], "ScaleTensor": [arr([3.0])]}, {"scale": 2.0, "bias": 1.0})
case("scale_bias_tensor", "scale", {"X": [n((3, 4), 73)], "BiasTensor": [arr([5.0])]}, {"scale": 2.0, "bias": 1.0})
case("scale_int", "scale", {"X": [ints((2, 3), 74)]}, {"scale": -2.5, "bias": 1.5}, grad=False)
case("scale_0d", "scale", {"X": [arr(1.5)]}, {"scale": 3.0, "bias": 1.0})
case("sum_3", "sum", {"X": [n((3, 4), 75), n((3, 4), 76), n((3, 4), 77)]})
case("sum_int", "sum", {"X": [ints((2, 3), 78), ints((2, 3), 79)]}, grad=False)
case("mean", "mean", {"X": [n((3, 4), 80)]})
R3 = n((2, 3, 4), 81)
RED = [
    ("dim1", {"dim": [1]}),
    ("dim1_keep", {"dim": [1], "keep_dim": True}),
    ("dim_neg", {"dim": [-1]}),
    ("dim02", {"dim": [0, 2]}),
    ("all", {"dim": [], "reduce_all": True}),
    ("all_keep", {"dim": [0], "reduce_all": True, "keep_dim": True}),
    ("dim_empty", {"dim": []}),
    ("dim_full", {"dim": [0, 1, 2]}),
]
for t in ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"]:
    for tag, attrs in RED:
        case(f"{t}_{tag}", t, {"X": [R3]}, attrs)
    case(f"{t}_int", t, {"X": [ints((2, 3), 82)]}, {"dim": [1]}, grad=False)
TIES = arr([[1.0, 3.0, 3.0, -2.0], [-1.0, -1.0, 0.5, -1.0]])
for t in ["reduce_max", "reduce_min"]:
    case(f"{t}_ties", t, {"X": [TIES]}, {"dim": [1]})
    case(f"{t}_ties_all", t, {"X": [TIES]}, {"reduce_all": True, "dim": []})
case("reduce_prod_zero", "reduce_prod", {"X": [arr([[1.0, 0.0, 2.0], [3.0, 0.5, 2.0]])]}, {"dim": [1]})
case("reduce_sum_bool", "reduce_sum", {"X": [BOOL_X]}, {"dim": [1]}, grad=False)
case("reduce_sum_int64", "reduce_sum", {"X": [ints((2, 3), 83, dtype=np.int64)]}, {"dim": [0]}, grad=False)
case("reduce_sum_out_fp64", "reduce_sum", {"X": [n((2, 3), 84)]}, {"dim": [1], "out_dtype": 6}, out_dtype="float64")
case("reduce_mean_int_neg", "reduce_mean", {"X": [arr([[-7, 7, -1], [-8, 1, 2]], np.int32)]}, {"dim": [1]},
     grad=False)
case("reduce_sum_0d", "reduce_sum", {"X": [arr(2.5)]}, {"dim": [], "reduce_all": True})
for tag, attrs in [
    ("p2_axis1", {"porder": 2.0, "axis": 1}),
    ("p3_axis0", {"porder": 3.0, "axis": 0}),
    ("p1_axis_neg", {"porder": 1.0, "axis": -1}),
    ("phalf", {"porder": 0.5, "axis": 1}),
    ("p2_keep", {"porder": 2.0, "axis": 1, "keepdim": True}),
    ("inf", {"porder": INF, "axis": 1}),
    ("neg_inf", {"porder": -INF, "axis": 1}),
    ("p0", {"porder": 0.0, "axis": 1}),
    ("asvector", {"porder": 2.0, "asvector": True}),
    ("asvector_keep", {"porder": 3.0, "asvector": True, "keepdim": True}),
]:
    case(f"p_norm_{tag}", "p_norm", {"X": [n((3, 4), 90)]}, attrs)
case("p_norm_zeros", "p_norm", {"X": [arr([[0.0, 3.0, -4.0], [0.0, 0.0, 0.0]])]}, {"porder": 2.0, "axis": 1})
case("p_norm_ties_inf", "p_norm", {"X": [arr([[3.0, -3.0, 1.0], [0.5, 2.0, -1.0]])]}, {"porder": INF, "axis": 1})
case("p_norm_1d", "p_norm", {"X": [arr([3.0, 4.0])]}, {"porder": 2.0, "axis": 0})
case("squared_l2_norm", "squared_l2_norm", {"X": [n((3, 4), 91)]})
for tag, attrs in [
    ("default", {}),
    ("axis0", {"axis": 0}),
    ("flatten", {"flatten": True}),
    ("exclusive", {"axis": 1, "exclusive": True}),
    ("reverse", {"axis": 1, "reverse": True}),
    ("excl_rev", {"axis": 0, "exclusive": True, "reverse": True}),
]:
    case(f"cumsum_{tag}", "cumsum", {"X": [n((3, 4), 92)]}, attrs)
case("cumsum_int", "cumsum", {"X": [ints((2, 3), 93)]}, {"axis": 1}, grad=False)


# ---------------------------------------------------------------- running
def run_case(c, exe):
    main, startup = paddle.static.Program(), paddle.static.Program()
    feed, in_names = {}, {}
    with paddle.static.program_guard(main, startup):
        blk = main.global_block()
        ins = {}
        for slot, arrs in c["inputs"].items():
            vs = []
            for i, a in enumerate(arrs):
                name = f"{slot.lower()}_{i}"
                v = paddle.static.data(name, list(a.shape), str(a.dtype))
                v.stop_gradient = not (c["grad"] and a.dtype.kind == "f")
                feed[name] = a
                vs.append(v)
            ins[slot] = vs
            in_names[slot] = [v.name for v in vs]
        x0 = next(iter(c["inputs"].values()))[0]
        odt = c["out_dtype"] or str(x0.dtype)
        outs = {s: [blk.create_var(name=f"out_{s.lower()}", dtype=odt)] for s in c["outs"]}
        blk.append_op(type=c["op"], inputs=ins, outputs=outs, attrs=dict(c["attrs"]))
        out = outs[c["outs"][0]][0]
        fetch = [out]
        grad_keys = []
        cot = None
        if c["grad"]:
            shape = list(out.shape)
            cot = _rs(zlib.crc32(c["name"].encode())).standard_normal(shape).astype(F32)
            cv = paddle.static.data("cot", shape, "float32")
            prod = blk.create_var(name="prod", dtype="float32")
            blk.append_op(type="elementwise_mul", inputs={"X": [out], "Y": [cv]}, outputs={"Out": [prod]},
                          attrs={"axis": -1})
            loss = blk.create_var(name="loss", dtype="float32", shape=[])
            blk.append_op(type="reduce_sum", inputs={"X": [prod]}, outputs={"Out": [loss]},
                          attrs={"reduce_all": True, "dim": [], "keep_dim": False})
            feed["cot"] = cot
            paddle.static.append_backward(loss)
            for slot, names in in_names.items():
                for i, nm in enumerate(names):
                    if blk.has_var(nm + "@GRAD"):
                        grad_keys.append((slot, i))
                        fetch.append(blk.var(nm + "@GRAD"))
    res = exe.run(main, feed=feed, fetch_list=fetch)
    return res, cot, grad_keys


def main():
    exe = paddle.static.Executor(paddle.CPUPlace())
    arrays, meta = {}, {}
    names = set()
    for c in CASES:
        assert c["name"] not in names, c["name"]
        names.add(c["name"])
        try:
            res, cot, grad_keys = run_case(c, exe)
        except Exception as e:  # a case Paddle itself rejects is recorded, with no values
            msg = [ln.strip() for ln in str(e).splitlines() if "Error" in ln or "error" in ln]
            meta[c["name"]] = dict(op=c["op"], attrs=c["attrs"], paddle_error=" | ".join(msg)[:400])
            print(f"{c['name']}: Paddle failed: {meta[c['name']]['paddle_error']}", file=sys.stderr)
            continue
        for slot, arrs_ in c["inputs"].items():
            for i, a in enumerate(arrs_):
                arrays[f"{c['name']}/in/{slot}/{i}"] = a
        arrays[f"{c['name']}/out/{c['outs'][0]}"] = np.asarray(res[0])
        if cot is not None:
            arrays[f"{c['name']}/cot"] = cot
        for (slot, i), g in zip(grad_keys, res[1:]):
            arrays[f"{c['name']}/grad/{slot}/{i}"] = np.asarray(g)
        meta[c["name"]] = dict(op=c["op"], attrs=c["attrs"],
                               inputs={s: len(a) for s, a in c["inputs"].items()},
                               outputs=c["outs"], grads=[f"{s}/{i}" for s, i in grad_keys])
    with open(os.path.join(HERE, "math_activation.json"), "w") as f:
        json.dump({"paddle": paddle.__version__, "cases": meta}, f, indent=1, sort_keys=True)
        f.write("\n")
    np.savez_compressed(os.path.join(HERE, "math_activation.npz"), **arrays)
    print(f"{len(meta)} cases, {len(arrays)} arrays")


if __name__ == "__main__":
    main()
