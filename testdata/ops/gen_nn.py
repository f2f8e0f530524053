#!/usr/bin/env python
"""Reference values for pybackward's nn kernels, from a live PaddlePaddle 3.3.1.

Run with the Paddle interpreter (tests never need Paddle)::

    /path/to/paddle-venv/bin/python testdata/ops/gen_nn.py

For every case below one op is appended with `block.append_op` (legacy
ProgramDesc IR), the loss is `reduce_sum(Out * cot)` summed over the listed
outputs (`cot` a fixed random feed), and `paddle.static.append_backward` is
called. Paddle's Executor (CPU) then runs the program. Written:

* `nn_ref.npz`: `<case>|in|<slot>|<i>` inputs, `<case>|out|<slot>` forward
  outputs (values after the run: MeanOut/VarianceOut are the updated running
  stats), `<case>|cot|<slot>` the cotangent, `<case>|grad|<slot>` Paddle's
  gradient of the loss for each differentiated input;
* `nn_ref.json`: per case the op type, the attrs given (Paddle fills the rest
  with its defaults, so the kernels' defaults are checked too), the forward
  op's slots as Paddle wrote them and the grad op(s) Paddle made for it.

Var names: input slot S, index i -> `in_S<i>`; output slot S -> `out_S`
(batch_norm's MeanOut/VarianceOut alias its Mean/Variance inputs, as Paddle
requires).
"""
from __future__ import annotations

import json
import os
import sys
import zlib

os.environ["FLAGS_enable_pir_api"] = "0"
os.environ.setdefault("GLOG_v", "0")

import warnings  # noqa: E402

warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import paddle  # noqa: E402
from paddle import static  # noqa: E402

paddle.enable_static()
HERE = os.path.dirname(os.path.abspath(__file__))

CASES = []


def case(name, op, ins, attrs, outs, diff, loss=None, alias=None, fetch_skip=(), out_dtype=None):
    """ins: slot -> array or list of arrays; outs: output slots; diff: input
    slots that get gradients; loss: output slots the loss reads (default: the
    first output); alias: output slot -> input slot sharing its var."""
    CASES.append(dict(name=name, op=op, ins=ins, attrs=attrs, outs=outs, diff=diff,
                      loss=loss or [outs[0]], alias=alias or {}, fetch_skip=list(fetch_skip),
                      out_dtype=out_dtype))


def rng_for(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def R(name):
    r = rng_for(name)

    def f(*shape, dtype="float64", positive=False):
        v = r.standard_normal(shape)
        if positive:
            v = np.abs(v) + 0.5
        return v.astype(dtype)
    return f


# ------------------------------------------------------------------- conv2d
def conv_cases():
    for name, xs, ws, attrs in [
        ("conv2d_basic", (2, 3, 5, 5), (4, 3, 3, 3), dict(strides=[1, 1], paddings=[1, 1])),
        ("conv2d_stride2_asym", (2, 2, 6, 5), (3, 2, 3, 2), dict(strides=[2, 1], paddings=[1, 0, 2, 1])),
        ("conv2d_dilation2", (1, 2, 7, 6), (2, 2, 3, 2), dict(strides=[1, 2], paddings=[2, 1], dilations=[2, 2])),
        ("conv2d_same", (2, 2, 5, 6), (3, 2, 3, 3), dict(strides=[2, 2], paddings=[0, 0], padding_algorithm="SAME", dilations=[2, 2])),
        ("conv2d_valid", (2, 2, 5, 6), (3, 2, 2, 3), dict(strides=[2, 1], paddings=[3, 3], padding_algorithm="VALID")),
        ("conv2d_groups2", (2, 4, 5, 5), (6, 2, 3, 3), dict(strides=[1, 1], paddings=[1, 1], groups=2)),
        ("conv2d_nhwc_groups2", (2, 5, 4, 4), (4, 2, 3, 3), dict(strides=[2, 1], paddings=[1, 1], groups=2, data_format="NHWC")),
        ("conv2d_defaults", (1, 2, 4, 4), (2, 2, 2, 2), dict()),
    ]:
        r = R(name)
        case(name, "conv2d", {"Input": r(*xs), "Filter": r(*ws)}, attrs, ["Output"], ["Input", "Filter"])
    r = R("conv2d_f32")
    case("conv2d_f32", "conv2d", {"Input": r(2, 2, 5, 5, dtype="float32"), "Filter": r(3, 2, 3, 3, dtype="float32")},
         dict(strides=[2, 2], paddings=[1, 1]), ["Output"], ["Input", "Filter"])
    r = R("depthwise_conv2d")
    case("depthwise_conv2d", "depthwise_conv2d", {"Input": r(2, 3, 5, 5), "Filter": r(6, 1, 3, 3)},
         dict(strides=[2, 2], paddings=[1, 1], groups=3), ["Output"], ["Input", "Filter"])
    r = R("depthwise_conv2d_nhwc")
    case("depthwise_conv2d_nhwc", "depthwise_conv2d", {"Input": r(2, 4, 5, 2), "Filter": r(2, 1, 2, 3)},
         dict(strides=[1, 1], paddings=[1, 0], groups=2, data_format="NHWC", dilations=[1, 2]), ["Output"], ["Input", "Filter"])

    for name, xs, ws, attrs in [
        ("conv2d_transpose_basic", (2, 3, 3, 3), (3, 2, 3, 3), dict(strides=[1, 1], paddings=[1, 1])),
        ("conv2d_transpose_stride2", (2, 2, 3, 4), (2, 3, 3, 3), dict(strides=[2, 2], paddings=[1, 1], output_padding=[1, 0])),
        ("conv2d_transpose_groups_dil", (1, 4, 3, 3), (4, 2, 2, 3), dict(strides=[2, 1], paddings=[0, 1, 1, 0], groups=2, dilations=[2, 1])),
        ("conv2d_transpose_output_size", (2, 2, 3, 3), (2, 2, 3, 3), dict(strides=[2, 2], paddings=[1, 1], output_size=[6, 6])),
        ("conv2d_transpose_same", (1, 2, 3, 4), (2, 2, 3, 3), dict(strides=[2, 2], paddings=[0, 0], padding_algorithm="SAME")),
        ("conv2d_transpose_valid", (1, 2, 3, 3), (2, 2, 2, 2), dict(strides=[2, 2], paddings=[1, 1], padding_algorithm="VALID")),
        ("conv2d_transpose_nhwc", (2, 3, 3, 2), (2, 3, 2, 2), dict(strides=[2, 2], paddings=[0, 0], data_format="NHWC")),
    ]:
        r = R(name)
        case(name, "conv2d_transpose", {"Input": r(*xs), "Filter": r(*ws)}, attrs, ["Output"], ["Input", "Filter"])
    r = R("conv2d_transpose_bias")
    case("conv2d_transpose_bias", "conv2d_transpose", {"Input": r(1, 2, 3, 3), "Filter": r(2, 3, 2, 2), "Bias": r(3)},
         dict(strides=[1, 1], paddings=[0, 0]), ["Output"], ["Input", "Filter"])


# ------------------------------------------------------------------- pool2d
def pool_cases():
    for name, xs, attrs in [
        ("pool_max_2x2", (2, 2, 4, 4), dict(pooling_type="max", ksize=[2, 2], strides=[2, 2], paddings=[0, 0])),
        ("pool_max_3x3_pad", (2, 2, 5, 5), dict(pooling_type="max", ksize=[3, 3], strides=[2, 2], paddings=[1, 1])),
        ("pool_avg_excl_pad", (2, 2, 5, 5), dict(pooling_type="avg", ksize=[3, 3], strides=[2, 2], paddings=[1, 1], exclusive=True)),
        ("pool_avg_incl_pad", (2, 2, 5, 5), dict(pooling_type="avg", ksize=[3, 3], strides=[2, 2], paddings=[1, 1], exclusive=False)),
        ("pool_avg_asym_pad", (1, 2, 5, 6), dict(pooling_type="avg", ksize=[3, 2], strides=[2, 2], paddings=[0, 2, 1, 0], exclusive=False)),
        ("pool_max_asym_pad", (1, 2, 5, 6), dict(pooling_type="max", ksize=[3, 2], strides=[2, 2], paddings=[1, 0, 0, 1])),
        ("pool_avg_ceil", (2, 2, 5, 5), dict(pooling_type="avg", ksize=[2, 2], strides=[2, 2], paddings=[0, 0], ceil_mode=True, exclusive=False)),
        ("pool_avg_ceil_excl", (2, 2, 5, 5), dict(pooling_type="avg", ksize=[2, 2], strides=[2, 2], paddings=[0, 0], ceil_mode=True, exclusive=True)),
        ("pool_max_ceil", (2, 2, 5, 5), dict(pooling_type="max", ksize=[3, 3], strides=[2, 2], paddings=[0, 0], ceil_mode=True)),
        ("pool_avg_ceil_pad", (1, 2, 6, 6), dict(pooling_type="avg", ksize=[3, 3], strides=[2, 2], paddings=[1, 1], ceil_mode=True, exclusive=False)),
        ("pool_max_global", (2, 3, 4, 5), dict(pooling_type="max", ksize=[2, 2], global_pooling=True)),
        ("pool_avg_global", (2, 3, 4, 5), dict(pooling_type="avg", ksize=[1, 1], global_pooling=True, paddings=[1, 1])),
        ("pool_avg_adaptive", (2, 2, 5, 7), dict(pooling_type="avg", ksize=[3, 3], adaptive=True)),
        ("pool_max_adaptive", (2, 2, 5, 7), dict(pooling_type="max", ksize=[2, 3], adaptive=True)),
        ("pool_avg_same", (2, 2, 5, 6), dict(pooling_type="avg", ksize=[3, 3], strides=[2, 2], padding_algorithm="SAME")),
        ("pool_avg_same_incl", (2, 2, 5, 6), dict(pooling_type="avg", ksize=[2, 3], strides=[2, 2], padding_algorithm="SAME", exclusive=False)),
        ("pool_max_valid", (2, 2, 5, 6), dict(pooling_type="max", ksize=[2, 2], strides=[2, 2], paddings=[1, 1], padding_algorithm="VALID")),
        ("pool_max_nhwc", (2, 4, 4, 3), dict(pooling_type="max", ksize=[2, 2], strides=[2, 1], paddings=[0, 1], data_format="NHWC")),
        ("pool_avg_nhwc_adaptive", (2, 5, 4, 3), dict(pooling_type="avg", ksize=[2, 3], adaptive=True, data_format="NHWC")),
        ("pool_defaults", (1, 2, 4, 4), dict(ksize=[2, 2], pooling_type="avg")),
        ("pool_max_empty_window", (1, 1, 4, 6), dict(pooling_type="max", ksize=[2, 3], strides=[1, 2],
                                                      paddings=[1, 0, 0, 2], ceil_mode=True)),
        ("pool_avg_empty_window", (1, 1, 4, 6), dict(pooling_type="avg", ksize=[2, 3], strides=[1, 2],
                                                      paddings=[1, 0, 0, 2], exclusive=False)),
        ("pool_max_adaptive_big", (1, 2, 3, 4), dict(pooling_type="max", ksize=[3, 3], strides=[2, 1], adaptive=True)),
    ]:
        r = R(name)
        case(name, "pool2d", {"X": r(*xs)}, attrs, ["Out"], ["X"])
    r = R("pool_f32")
    case("pool_f32", "pool2d", {"X": r(2, 2, 4, 4, dtype="float32")},
         dict(pooling_type="avg", ksize=[2, 2], strides=[2, 2]), ["Out"], ["X"])


# -------------------------------------------------------------- batch_norm
BN_OUTS = ["Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance", "ReserveSpace"]


def bn_cases():
    for name, xs, attrs, dtype in [
        ("bn_train", (3, 2, 3, 3), dict(momentum=0.9, epsilon=1e-5, is_test=False), "float64"),
        ("bn_train_nhwc", (2, 3, 3, 3), dict(momentum=0.8, epsilon=1e-3, is_test=False, data_layout="NHWC"), "float64"),
        ("bn_train_2d", (5, 3), dict(momentum=0.9, epsilon=1e-5), "float64"),
        ("bn_train_3d", (3, 2, 4), dict(momentum=0.7, epsilon=1e-4), "float64"),
        ("bn_test", (2, 3, 2, 3), dict(momentum=0.9, epsilon=1e-5, is_test=True), "float64"),
        ("bn_global_stats", (2, 3, 2, 3), dict(momentum=0.9, epsilon=1e-5, is_test=False, use_global_stats=True), "float64"),
        ("bn_test_trainable", (2, 3, 2, 3), dict(momentum=0.9, epsilon=1e-5, is_test=True, trainable_statistics=True), "float64"),
        ("bn_defaults", (2, 2, 2, 2), dict(), "float64"),
        ("bn_f32", (3, 2, 3, 3), dict(momentum=0.9, epsilon=1e-5), "float32"),
    ]:
        r = R(name)
        C = xs[-1] if attrs.get("data_layout") == "NHWC" else xs[1]
        ins = {"X": r(*xs, dtype=dtype), "Scale": r(C, dtype=dtype), "Bias": r(C, dtype=dtype),
               "Mean": r(C, dtype=dtype), "Variance": r(C, dtype=dtype, positive=True)}
        skip = ["ReserveSpace"]
        if attrs.get("use_global_stats") or (attrs.get("is_test") and not attrs.get("trainable_statistics")):
            skip += ["SavedMean", "SavedVariance"]  # left uninitialised by Paddle with global stats
        case(name, "batch_norm", ins, attrs, BN_OUTS, ["X", "Scale", "Bias"], loss=["Y"],
             alias={"MeanOut": "Mean", "VarianceOut": "Variance"}, fetch_skip=skip)
    r = R("bn_momentum_tensor")
    ins = {"X": r(2, 2, 2, 2), "Scale": r(2), "Bias": r(2), "Mean": r(2), "Variance": r(2, positive=True),
           "MomentumTensor": np.array([0.5], dtype="float32")}
    case("bn_momentum_tensor", "batch_norm", ins, dict(momentum=0.9), BN_OUTS, ["X", "Scale", "Bias"], loss=["Y"],
         alias={"MeanOut": "Mean", "VarianceOut": "Variance"}, fetch_skip=["ReserveSpace"])


def norm_cases():
    for name, xs, axis, dtype, sb in [
        ("ln_axis1", (2, 3, 4), 1, "float64", True),
        ("ln_axis2", (2, 3, 4), 2, "float64", True),
        ("ln_axis_last_4d", (2, 2, 3, 4), 3, "float64", True),
        ("ln_noscale", (3, 5), 1, "float64", False),
        ("ln_f32", (2, 3, 4), 2, "float32", True),
    ]:
        r = R(name)
        D = int(np.prod(xs[axis:]))
        ins = {"X": r(*xs, dtype=dtype)}
        if sb:
            ins.update(Scale=r(D, dtype=dtype), Bias=r(D, dtype=dtype))
        case(name, "layer_norm", ins, dict(begin_norm_axis=axis, epsilon=1e-5), ["Y", "Mean", "Variance"],
             [s for s in ("X", "Scale", "Bias") if s in ins], loss=["Y"])
    for name, xs, attrs in [
        ("gn_nchw", (2, 4, 3, 3), dict(groups=2, epsilon=1e-5)),
        ("gn_nhwc", (2, 3, 3, 6), dict(groups=3, epsilon=1e-4, data_layout="NHWC")),
        ("gn_3d", (2, 4, 5), dict(groups=4, epsilon=1e-5)),
    ]:
        r = R(name)
        C = xs[-1] if attrs.get("data_layout") == "NHWC" else xs[1]
        case(name, "group_norm", {"X": r(*xs), "Scale": r(C), "Bias": r(C)}, attrs, ["Y", "Mean", "Variance"],
             ["X", "Scale", "Bias"], loss=["Y"])
    for name, xs, sb in [("in_basic", (2, 3, 3, 3), True), ("in_3d", (2, 2, 5), True), ("in_noscale", (2, 2, 3, 3), False)]:
        r = R(name)
        ins = {"X": r(*xs)}
        if sb:
            ins.update(Scale=r(xs[1]), Bias=r(xs[1]))
        case(name, "instance_norm", ins, dict(epsilon=1e-5), ["Y", "SavedMean", "SavedVariance"],
             [s for s in ("X", "Scale", "Bias") if s in ins], loss=["Y"])


def pad_interp_cases():
    for name, xs, attrs in [
        ("pad3d_constant", (1, 2, 2, 3, 3), dict(paddings=[1, 0, 0, 2, 1, 1], mode="constant", value=0.5)),
        ("pad3d_reflect", (1, 2, 3, 3, 4), dict(paddings=[2, 1, 1, 2, 0, 1], mode="reflect")),
        ("pad3d_replicate", (1, 2, 2, 3, 3), dict(paddings=[2, 1, 0, 2, 1, 0], mode="replicate")),
        ("pad3d_circular", (1, 2, 2, 3, 3), dict(paddings=[2, 1, 1, 2, 1, 1], mode="circular")),
        ("pad3d_ndhwc", (1, 2, 3, 3, 2), dict(paddings=[1, 1, 0, 1, 1, 0], mode="reflect", data_format="NDHWC")),
        ("pad3d_defaults", (1, 1, 2, 2, 2), dict(paddings=[1, 1, 1, 1, 1, 1])),
    ]:
        r = R(name)
        case(name, "pad3d", {"X": r(*xs)}, attrs, ["Out"], ["X"])
    r = R("pad3d_tensor")
    case("pad3d_tensor", "pad3d", {"X": r(1, 2, 2, 3, 3), "Paddings": np.array([1, 0, 2, 1, 0, 1], dtype="int32")},
         dict(paddings=[0, 0, 0, 0, 0, 0], mode="replicate"), ["Out"], ["X"])

    for name, xs, attrs, extra in [
        ("bilinear_ac", (2, 2, 3, 4), dict(out_h=5, out_w=7, align_corners=True), {}),
        ("bilinear_am0", (2, 2, 3, 4), dict(out_h=5, out_w=7, align_corners=False, align_mode=0), {}),
        ("bilinear_am1", (2, 2, 3, 4), dict(out_h=5, out_w=7, align_corners=False, align_mode=1), {}),
        ("bilinear_down_am0", (1, 2, 6, 7), dict(out_h=4, out_w=3, align_corners=False, align_mode=0), {}),
        ("bilinear_scale_attr", (1, 2, 3, 4), dict(scale=[1.5, 2.0], align_corners=False, align_mode=0), {}),
        ("bilinear_scale_attr_am1", (1, 2, 3, 4), dict(scale=[1.7, 1.3], align_corners=False, align_mode=1), {}),
        ("bilinear_scale_attr_ac", (1, 2, 3, 4), dict(scale=[1.5, 2.0], align_corners=True), {}),
        ("bilinear_outsize", (1, 2, 3, 4), dict(out_h=2, out_w=2, align_corners=False, align_mode=0),
         {"OutSize": np.array([5, 3], dtype="int32")}),
        ("bilinear_sizetensor", (1, 2, 3, 4), dict(out_h=2, out_w=2, align_corners=True),
         {"SizeTensor": [np.array([4], dtype="int32"), np.array([6], dtype="int32")]}),
        ("bilinear_scaletensor", (1, 2, 3, 4), dict(out_h=2, out_w=2, align_corners=False, align_mode=0),
         {"Scale": np.array([1.5, 2.5], dtype="float32")}),
        ("bilinear_scaletensor1", (1, 2, 3, 4), dict(align_corners=False, align_mode=1),
         {"Scale": np.array([2.0], dtype="float32")}),
        ("bilinear_nhwc", (2, 3, 4, 2), dict(out_h=5, out_w=3, align_corners=False, align_mode=1, data_layout="NHWC"), {}),
        ("bilinear_same", (1, 2, 3, 4), dict(out_h=3, out_w=4, align_corners=False), {}),
        ("bilinear_defaults", (1, 2, 3, 3), dict(out_h=4, out_w=5), {}),
    ]:
        r = R(name)
        ins = {"X": r(*xs)}
        ins.update(extra)
        attrs = dict(attrs)
        attrs.setdefault("interp_method", "bilinear")
        case(name, "bilinear_interp_v2", ins, attrs, ["Out"], ["X"])


conv_cases()
pool_cases()
bn_cases()
norm_cases()
pad_interp_cases()


def _append(blk, type, inputs, outputs, attrs=None):
    blk.append_op(type=type, inputs=inputs, outputs=outputs, attrs=attrs or {})


def build(cs, cot_shapes):
    """The case's program; with cot_shapes None, forward only (to learn the
    output shapes Paddle computes at run time)."""
    main, startup = static.Program(), static.Program()
    feed, arrays = {}, {}
    with static.program_guard(main, startup):
        blk = main.global_block()
        in_vars = {}
        for slot, val in cs["ins"].items():
            vals = val if isinstance(val, list) else [val]
            vs = []
            for i, a in enumerate(vals):
                n = f"in_{slot}{i}"
                v = static.data(n, list(a.shape), str(a.dtype))
                v.stop_gradient = slot not in cs["diff"]
                feed[n] = a
                arrays[f"{cs['name']}|in|{slot}|{i}"] = a
                vs.append(v)
            in_vars[slot] = vs
        xdtype = str(cs["ins"][next(iter(cs["ins"]))].dtype)
        out_vars = {}
        for slot in cs["outs"]:
            if slot in cs["alias"]:
                out_vars[slot] = in_vars[cs["alias"][slot]]
            else:
                out_vars[slot] = [blk.create_var(name=f"out_{slot}", dtype=cs["out_dtype"] or xdtype)]
        _append(blk, cs["op"], in_vars, out_vars, dict(cs["attrs"]))
        fwd_desc = [op for op in blk.ops if op.type == cs["op"]][0]
        fwd_slots = ({k: fwd_desc.input(k) for k in fwd_desc.input_names},
                     {k: fwd_desc.output(k) for k in fwd_desc.output_names})
        if cot_shapes is None:
            return main, feed, arrays, out_vars, fwd_slots
        terms = []
        for slot in cs["loss"]:
            v = out_vars[slot][0]
            cot = rng_for(cs["name"] + "/cot/" + slot).standard_normal(cot_shapes[slot]).astype(xdtype)
            cn = f"cot_{slot}"
            cv = static.data(cn, [-1] * cot.ndim, xdtype)
            feed[cn] = cot
            arrays[f"{cs['name']}|cot|{slot}"] = cot
            prod = blk.create_var(name=f"prod_{slot}", dtype=xdtype)
            _append(blk, "elementwise_mul", {"X": [v], "Y": [cv]}, {"Out": [prod]}, {"axis": -1})
            tot = blk.create_var(name=f"sum_{slot}", dtype=xdtype)
            _append(blk, "reduce_sum", {"X": [prod]}, {"Out": [tot]}, {"dim": [], "keep_dim": False, "reduce_all": True})
            terms.append(tot)
        if len(terms) == 1:
            loss = terms[0]
        else:
            loss = blk.create_var(name="loss", dtype=xdtype)
            _append(blk, "sum", {"X": terms}, {"Out": [loss]})
        static.append_backward(loss)
    return main, feed, arrays, out_vars, fwd_slots


def run_case(cs):
    exe = static.Executor(paddle.CPUPlace())
    main, feed, _, out_vars, _ = build(cs, None)
    res = exe.run(main, feed=feed, fetch_list=[out_vars[s][0].name for s in cs["loss"]])
    shapes = {s: np.asarray(r).shape for s, r in zip(cs["loss"], res)}
    main, feed, arrays, out_vars, fwd_slots = build(cs, shapes)
    grad_ops = []
    for op in main.global_block().ops:
        if op.type.startswith(cs["op"]) and op.type != cs["op"]:
            grad_ops.append(dict(type=op.type, inputs={k: op.input(k) for k in op.input_names},
                                 outputs={k: op.output(k) for k in op.output_names}))
    fetch = []
    for slot in cs["outs"]:
        if slot not in cs["fetch_skip"]:
            fetch.append((f"{cs['name']}|out|{slot}", out_vars[slot][0].name))
    for slot in cs["diff"]:
        fetch.append((f"{cs['name']}|grad|{slot}", f"in_{slot}0@GRAD"))
    res = exe.run(main, feed=feed, fetch_list=[n for _, n in fetch])
    uninit = []
    for (k, _), v in zip(fetch, res):
        v = np.asarray(v)
        if v.dtype == object:  # an output the kernel never wrote
            uninit.append(k.split("|")[-1])
            continue
        arrays[k] = v
    info = dict(name=cs["name"], op=cs["op"], attrs=cs["attrs"], outs=cs["outs"], diff=cs["diff"],
                loss=cs["loss"], uninitialized_outputs=uninit, fwd_inputs=fwd_slots[0], fwd_outputs=fwd_slots[1], grad_ops=grad_ops)
    return info, arrays


def save_npz(path, arrays):
    """np.savez_compressed, but byte-for-byte reproducible (fixed zip dates)."""
    import io
    import zipfile
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for k in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arrays[k]), allow_pickle=False)
            info = zipfile.ZipInfo(k + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, buf.getvalue())


def main():
    only = set(sys.argv[1:])
    infos, arrays, failed = [], {}, []
    for cs in CASES:
        if only and cs["name"] not in only:
            continue
        try:
            info, arr = run_case(cs)
        except Exception as e:  # noqa: BLE001 - record and go on
            msg = str(e).strip().splitlines()
            failed.append((cs["name"], " | ".join(m for m in msg if m.strip())[:600]))
            continue
        infos.append(info)
        arrays.update(arr)
    for n, m in failed:
        print("FAILED", n, m)
    if only:
        for k, v in sorted(arrays.items()):
            print(k, v.dtype, v.shape, np.round(v.ravel()[:8], 5))
        return
    with open(os.path.join(HERE, "nn_ref.json"), "w") as f:
        json.dump(dict(failed=failed, cases=infos), f, indent=1, sort_keys=True)
    save_npz(os.path.join(HERE, "nn_ref.npz"), arrays)
    print(f"{len(infos)} cases written, {len(failed)} failed")


if __name__ == "__main__":
    main()
