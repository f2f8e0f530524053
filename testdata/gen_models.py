#!/usr/bin/env python
"""Generate model-sized golden programs with a live PaddlePaddle 3.3.1.

Companion of ``generate.py``: it writes more cases under
``testdata/programs/<case>/`` in exactly the same layout (forward/startup/
backward ``.pb`` + ``.pbtxt``, ``params.npz``, ``feeds.npz``, ``grads*.npz``,
``case.json``), using ``generate.py``'s own machinery (``generate_case``,
``op``, ``param``, ``data``, ``ab``, ``call``, ...), so the golden tests pick
the new cases up unchanged.  The cases are small whole models (a ResNet
block, a transformer encoder layer, a text classifier, a detection head, ...)
and op zoos (shape ops, activations, convolution variants).

Run it with the Paddle interpreter (all cases, or some by name)::

    /work/paddle-venv/bin/python testdata/gen_models.py [case ...]

Like ``generate.py`` it re-executes itself with ``PYTHONHASHSEED=0``,
``FLAGS_enable_pir_api=0`` and its absolute path; the output is byte-for-byte
deterministic for a given checkout location, Paddle install and script text
(``op_callstack`` records lines of this file and of ``generate.py``).
"""

from __future__ import annotations

import os
import sys

_SCRIPT = os.path.abspath(__file__)
if (
    os.environ.get("PYTHONHASHSEED") != "0"
    or os.environ.get("FLAGS_enable_pir_api") != "0"
    or sys.argv[0] != _SCRIPT
):
    env = dict(os.environ, PYTHONHASHSEED="0", FLAGS_enable_pir_api="0")
    os.execve(sys.executable, [sys.executable, _SCRIPT] + sys.argv[1:], env)

HERE = os.path.dirname(_SCRIPT)
sys.path.insert(0, HERE)
# generate.py re-executes itself unless sys.argv[0] is its own path; the
# environment is already right here, so import it under its own name.
_argv0 = sys.argv[0]
sys.argv[0] = os.path.join(HERE, "generate.py")
try:
    import generate as G  # noqa: E402
finally:
    sys.argv[0] = _argv0

import hashlib  # noqa: E402

import paddle  # noqa: E402
import paddle.nn.functional as F  # noqa: E402
from paddle import static  # noqa: E402
from paddle.base.layer_helper import LayerHelper  # noqa: E402

from generate import ab, call, data, elementwise, matmul_v2, op, param, unary  # noqa: E402

OUT_ROOT = G.OUT_ROOT

MODELS = []


def model(fn):
    MODELS.append(fn)
    return fn


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def out1(type, inputs, attrs=None, slot="Out", dtype="float32"):
    return op(type, inputs, {slot: 1}, attrs, dtype=dtype)[slot][0]


def with_xshape(type, x, attrs):
    """reshape2 / transpose2 / squeeze2 / unsqueeze2 / flatten_contiguous_range."""
    return op(type, {"X": [x]}, {"Out": 1, "XShape": 1}, attrs,
              dtype=x.dtype)["Out"][0]


def reshape2(x, shape):
    return with_xshape("reshape2", x, {"shape": list(shape)})


def transpose2(x, axis):
    return with_xshape("transpose2", x, {"axis": list(axis)})


def scale(x, s, bias=0.0):
    return out1("scale", {"X": [x]},
                {"scale": float(s), "bias": float(bias), "bias_after_scale": True})


def reduce(type, x, dim=None, keep_dim=False):
    if dim is None:
        attrs = {"dim": [], "keep_dim": keep_dim, "reduce_all": True}
    else:
        attrs = {"dim": list(dim), "keep_dim": keep_dim, "reduce_all": False}
    return out1(type, {"X": [x]}, attrs)


def dropout(x, p, mode, seed):
    """dropout with fix_seed=True (extra attrs fix_seed/seed) and a uint8 Mask."""
    helper = LayerHelper("dropout")
    out = helper.create_variable_for_type_inference(x.dtype)
    mask = helper.create_variable_for_type_inference(
        paddle.base.core.VarDesc.VarType.UINT8, stop_gradient=True)
    helper.append_op(
        type="dropout", inputs={"X": [x]}, outputs={"Out": [out], "Mask": [mask]},
        attrs={"dropout_prob": p, "is_test": False, "fix_seed": True,
               "seed": seed, "dropout_implementation": mode})
    return out


def swce(logits, label):
    outs = op("softmax_with_cross_entropy",
              {"Logits": [logits], "Label": [label]},
              {"Softmax": 1, "Loss": 1},
              {"soft_label": False, "ignore_index": -100,
               "numeric_stable_mode": True, "axis": -1})
    return outs["Loss"][0]


def conv_attrs(strides=(1, 1), paddings=(0, 0), dilations=(1, 1), groups=1):
    return {"strides": list(strides), "paddings": list(paddings),
            "dilations": list(dilations), "groups": groups,
            "padding_algorithm": "EXPLICIT", "data_format": "NCHW"}


def conv(type, x, filt, **kw):
    return op(type, {"Input": [x], "Filter": [filt]}, {"Output": 1},
              conv_attrs(**kw))["Output"][0]


def pool2d(x, pooling_type, ksize, strides=(1, 1), paddings=(0, 0),
           global_pooling=False, ceil_mode=False):
    return out1("pool2d", {"X": [x]}, {
        "pooling_type": pooling_type, "ksize": list(ksize),
        "strides": list(strides), "paddings": list(paddings),
        "global_pooling": global_pooling, "ceil_mode": ceil_mode,
        "exclusive": True, "adaptive": False, "data_format": "NCHW",
        "padding_algorithm": "EXPLICIT", "use_cudnn": False})


def input_of(var, slot):
    return var.op.input(slot)[0]


# --------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------


@model
def resnet_block():
    img = data("image", [-1, 3, 8, 8])
    label = data("label", [-1, 1], "int64")
    c1 = static.nn.conv2d(img, 8, 3, padding=1, bias_attr=False)
    b1 = static.nn.batch_norm(c1, is_test=False)
    r1 = F.relu(b1)
    c2 = static.nn.conv2d(r1, 8, 3, padding=1, bias_attr=False)
    b2 = static.nn.batch_norm(c2, is_test=False)
    sc = static.nn.conv2d(img, 8, 1, bias_attr=False)
    s = elementwise("elementwise_add", b2, sc)
    r = F.relu(s)
    p = pool2d(r, "avg", [8, 8], global_pooling=True)       # [-1, 8, 1, 1]
    logits = static.nn.fc(p, 10)
    loss = paddle.mean(swce(logits, label))
    w1, w2, wsc = (input_of(v, "Filter") for v in (c1, c2, sc))
    return dict(
        loss=loss.name,
        feeds={"image": None, "label": ("int", 10)},
        description="ResNet basic block: conv2d(8,3x3,pad 1,no bias) -> "
                    "batch_norm (training) -> relu -> conv2d(8,3x3,pad 1) -> "
                    "batch_norm, plus a 1x1 conv2d shortcut; elementwise_add "
                    "-> relu -> pool2d avg global_pooling -> fc(10) -> "
                    "softmax_with_cross_entropy -> mean. param_list_convs "
                    "returns the three conv filters; no_grad_shortcut puts "
                    "the shortcut filter in no_grad_set by name.",
        variants={
            "default": [ab(loss.name)],
            "param_list_convs": [ab(loss.name, parameter_list=[w1, w2, wsc])],
            "no_grad_shortcut": [ab(loss.name, no_grad_set=[wsc])],
        },
    )


@model
def transformer_encoder():
    x = data("x", [-1, 4, 16], stop_gradient=False)
    ln1 = static.nn.layer_norm(x, begin_norm_axis=2)
    wq, wk, wv = (param(n, [16, 16]) for n in ("enc_wq", "enc_wk", "enc_wv"))

    def heads(t):                                    # [-1,4,16] -> [-1,2,4,8]
        return transpose2(reshape2(t, [0, 0, 2, 8]), [0, 2, 1, 3])

    q, k, v = (heads(matmul_v2(ln1, w)) for w in (wq, wk, wv))
    scores = matmul_v2(q, k, trans_y=True)           # [-1,2,4,4]
    scaled = scale(scores, 8 ** -0.5)
    probs = unary("softmax", scaled, axis=-1)
    dropped = dropout(probs, 0.1, "upscale_in_train", 7)
    ctx = matmul_v2(dropped, v)                      # [-1,2,4,8]
    ctx = reshape2(transpose2(ctx, [0, 2, 1, 3]), [0, 0, 16])
    attn = static.nn.fc(ctx, 16, num_flatten_dims=2)
    h1 = elementwise("elementwise_add", attn, x)
    ln2 = static.nn.layer_norm(h1, begin_norm_axis=2)
    ff = static.nn.fc(ln2, 32, num_flatten_dims=2, activation="gelu")
    ff = static.nn.fc(ff, 16, num_flatten_dims=2)
    h2 = elementwise("elementwise_add", ff, h1)
    loss = paddle.mean(h2)
    return dict(
        loss=loss.name,
        feeds={"x": None},
        description="Transformer encoder layer: x [-1,4,16] "
                    "(stop_gradient=False) -> layer_norm -> q/k/v matmul_v2 "
                    "with enc_wq/wk/wv [16,16] -> reshape2 [0,0,2,8] + "
                    "transpose2 [0,2,1,3] (2 heads) -> matmul_v2(trans_y) -> "
                    "scale(1/sqrt 8) -> softmax -> dropout(0.1, "
                    "upscale_in_train, fix_seed, seed 7) -> matmul_v2 -> "
                    "transpose2 -> reshape2 [0,0,16] -> fc(16) -> residual "
                    "add -> layer_norm -> fc(32, gelu) -> fc(16) -> residual "
                    "add -> mean. gradients_x = gradients([loss],[x]); "
                    "no_grad_wk puts enc_wk in no_grad_set; param_list_qv "
                    "returns enc_wq and enc_wv (as Variables).",
        variants={
            "default": [ab(loss.name)],
            "gradients_x": [call("gradients", [loss.name], [x.name])],
            "no_grad_wk": [ab(loss.name, no_grad_set=[wk.name])],
            "param_list_qv": [ab(loss.name, parameter_list=[wq.name, wv.name],
                                 parameter_list_kind="var")],
        },
    )


@model
def text_classifier():
    ids = data("ids", [-1, 6], "int64")
    label = data("label", [-1, 1], "int64")
    emb = static.nn.embedding(ids, size=[20, 16], padding_idx=0)   # [-1,6,16]
    avg = reduce("reduce_mean", emb, [1])
    mx = reduce("reduce_max", emb, [1])
    feat = paddle.concat([avg, mx], axis=1)                        # [-1,32]
    h = static.nn.fc(feat, 32, activation="relu")
    logits = static.nn.fc(h, 5)
    loss = paddle.mean(swce(logits, label))
    table = input_of(emb, "W")
    fcs = [p.name for p in static.default_main_program().all_parameters()
           if p.name.startswith("fc_")]
    return dict(
        loss=loss.name,
        feeds={"ids": ("int", 20), "label": ("int", 5)},
        description="Text classifier: ids int64 [-1,6] (vocab 20) -> "
                    "embedding [20,16] padding_idx=0 (lookup_table_v2) -> "
                    "concat(reduce_mean over the sequence, reduce_max over "
                    "the sequence) -> fc(32, relu) -> fc(5) -> "
                    "softmax_with_cross_entropy -> mean. Repeated ids in a "
                    "row make reduce_max ties (Paddle's grad goes to every "
                    "tied position). no_grad_embedding puts the table in "
                    "no_grad_set; param_list_fc returns the fc params only.",
        variants={
            "default": [ab(loss.name)],
            "no_grad_embedding": [ab(loss.name, no_grad_set=[table])],
            "param_list_fc": [ab(loss.name, parameter_list=fcs)],
        },
    )


@model
def detection_head():
    feat = data("features", [-1, 16], stop_gradient=False)
    target = data("target", [-1, 3])
    row_target = data("row_target", [-1, 12])
    scores = static.nn.fc(feat, 8)
    tk = op("top_k_v2", {"X": [scores]}, {"Out": 1, "Indices": 1},
            {"k": 3, "axis": -1, "largest": True, "sorted": True})
    top, idx = tk["Out"][0], tk["Indices"][0]                       # [-1,3]
    # (take_along_axis(boxes, idx, Axis=1) builds and runs in Paddle, but
    # pybackward has no rule for it; the gathered anchor rows are used instead.)
    flat = reshape2(idx, [-1])                                       # [-1*3]
    table = param("anchor_table", [8, 4])
    rows = out1("gather", {"X": [table], "Index": [flat]}, {"axis": 0})
    sel = reduce("reduce_mean", reshape2(rows, [-1, 3, 4]), [2])     # [-1,3]
    rows = reshape2(rows, [-1, 12])
    zero = paddle.full(shape=[1], fill_value=0.0, dtype="float32")
    cond = out1("greater_than", {"X": [top], "Y": [zero]},
                {"axis": -1, "force_cpu": False}, dtype="bool")
    logits = out1("where", {"Condition": [cond], "X": [top], "Y": [sel]})
    lab = scale(target, 0.5, 0.5)                                    # [0,1)
    sce = out1("sigmoid_cross_entropy_with_logits",
               {"X": [logits], "Label": [lab]},
               {"normalize": False, "ignore_index": -100})
    hub = op("huber_loss", {"X": [rows], "Y": [row_target]},
             {"Out": 1, "Residual": 1}, {"delta": 0.5})["Out"][0]
    loss = paddle.mean(sce) + paddle.mean(hub)
    return dict(
        loss=loss.name,
        feeds={"features": None, "target": None, "row_target": None},
        description="Detection head: features [-1,16] (stop_gradient=False) "
                    "-> scores = fc(8) -> top_k_v2(k=3) -> Out, Indices "
                    "(int64); reshape2 Indices to [-1] -> gather("
                    "anchor_table [8,4], axis 0) -> reshape2 [-1,12] -> "
                    "huber_loss(delta 0.5) vs row_target; sel = reduce_mean("
                    "reshape2(rows, [-1,3,4]), [2]); greater_than(top, full "
                    "0) -> where(cond, top, sel) -> "
                    "sigmoid_cross_entropy_with_logits with label "
                    "scale(target, 0.5, bias 0.5); loss = mean(sce) + "
                    "mean(huber). gradients_features = gradients([loss], "
                    "[features]); no_grad_table puts anchor_table in "
                    "no_grad_set.",
        variants={
            "default": [ab(loss.name)],
            "gradients_features": [call("gradients", [loss.name], [feat.name])],
            "no_grad_table": [ab(loss.name, no_grad_set=["anchor_table"])],
        },
    )


@model
def mlp_dropout_norm():
    x = data("x", [-1, 16])
    h = static.nn.fc(x, 32)
    d = dropout(h, 0.3, "downgrade_in_infer", 11)
    ln = static.nn.layer_norm(d, begin_norm_axis=1)
    t = unary("tanh", ln)
    o = static.nn.fc(t, 8)
    loss = paddle.mean(o)
    ln_scale = input_of(ln, "Scale")
    return dict(
        loss=loss.name,
        feeds={"x": None},
        description="fc(32) -> dropout(0.3, downgrade_in_infer, fix_seed, "
                    "seed 11) -> layer_norm(begin_norm_axis=1) -> tanh -> "
                    "fc(8) -> mean. no_grad_ln puts the layer_norm Scale in "
                    "no_grad_set by name.",
        variants={
            "default": [ab(loss.name)],
            "no_grad_ln": [ab(loss.name, no_grad_set=[ln_scale])],
        },
    )


@model
def shape_ops():
    a = param("a", [3, 4])
    a2 = param("a2", [3, 4])
    b = param("b", [2, 3, 4])
    c = param("c", [1, 4])
    d = param("d", [2, 2])
    u = with_xshape("unsqueeze2", a, {"axes": [0]})                  # [1,3,4]
    s = with_xshape("squeeze2", u, {"axes": [0]})                    # [3,4]
    f = with_xshape("flatten_contiguous_range", b,
                    {"start_axis": 1, "stop_axis": 2})               # [2,12]
    st = op("stack", {"X": [s, a2]}, {"Y": 1}, {"axis": 0})["Y"][0]  # [2,3,4]
    us = op("unstack", {"X": [st]}, {"Y": 3}, {"axis": 1, "num": 3})["Y"]
    e = out1("expand_v2", {"X": [c]}, {"shape": [3, 4]})             # [3,4]
    t = out1("tile", {"X": [d]}, {"repeat_times": [2, 3]})           # [4,6]
    cc = paddle.concat([us[0], us[2]], axis=1)                       # [2,8]
    p1, p2 = paddle.split(f, [5, 7], axis=1)                         # [2,5],[2,7]
    pieces = [s, cc, e, t, p1, p2]
    parts = [G.reduce_sum_all(unary("tanh", v)) for v in pieces]
    loss = op("sum", {"X": parts}, {"Out": 1})["Out"][0]
    return dict(
        loss=loss.name,
        feeds={},
        description="Shape ops on parameters: unsqueeze2(a,[0]) -> "
                    "squeeze2([0]); flatten_contiguous_range(b [2,3,4], 1..2); "
                    "stack([squeezed a, a2], axis 0) -> unstack(axis 1, num 3) "
                    "with Y[1] unused; expand_v2(c [1,4] -> [3,4]); tile(d "
                    "[2,2], [2,3]); concat(unstacked 0 and 2); split(flat b, "
                    "[5,7]); loss = sum op over reduce_sum(tanh(piece)). "
                    "no_grad_b puts b in no_grad_set; param_list_ac returns "
                    "a and c only.",
        variants={
            "default": [ab(loss.name)],
            "no_grad_b": [ab(loss.name, no_grad_set=["b"])],
            "param_list_ac": [ab(loss.name, parameter_list=["a", "c"])],
        },
    )


@model
def activations_zoo():
    p = param("p", [4, 8], paddle.nn.initializer.Uniform(-1.0, 1.0))
    q = param("q", [4, 8], paddle.nn.initializer.Uniform(0.5, 1.5))
    alpha = param("prelu_alpha", [8], paddle.nn.initializer.Uniform(0.1, 0.3))
    acts = [
        unary("elu", p, alpha=0.7),
        unary("silu", p),
        unary("swish", p),
        unary("hard_swish", scale(p, 4.0),
              threshold=6.0, scale=6.0, offset=3.0),
        unary("softplus", p, beta=2.0, threshold=20.0),
        unary("relu6", scale(p, 8.0)),
        unary("leaky_relu", p, alpha=0.1),
        out1("prelu", {"X": [p], "Alpha": [alpha]},
             {"mode": "channel", "data_format": "NCHW"}),
        unary("clip", p, min=-0.3, max=0.4),
        unary("pow", q, factor=1.5),
        unary("rsqrt", q),
        unary("reciprocal", q),
        unary("cumsum", p, axis=1, flatten=False, exclusive=False,
              reverse=False),
        unary("p_norm", p, porder=2.0, axis=1, epsilon=1e-12,
              keepdim=False, asvector=False),
        reduce("reduce_max", p, [1]),
        reduce("reduce_min", p, [0]),
        reduce("reduce_prod", q, [1]),
    ]
    # a short chain too: elu(silu(softplus(p)))
    chain = unary("elu", unary("silu", unary("softplus", p, beta=1.0,
                                              threshold=20.0)), alpha=1.0)
    means = [paddle.mean(v) for v in acts + [chain]]
    total = op("sum", {"X": means}, {"Out": 1})["Out"][0]
    loss = paddle.mean(total)
    return dict(
        loss=loss.name,
        feeds={},
        description="Activation zoo on parameters p [4,8] ~U(-1,1), q [4,8] "
                    "~U(0.5,1.5) (positive), prelu_alpha [8]: elu(0.7), silu, "
                    "swish, hard_swish(scale(p,4)), softplus(beta 2), "
                    "relu6(scale(p,8)), leaky_relu(0.1), prelu(channel), "
                    "clip[-0.3,0.4], pow(q,1.5), rsqrt(q), reciprocal(q), "
                    "cumsum(axis 1), p_norm(2, axis 1), reduce_max(p,[1]), "
                    "reduce_min(p,[0]), reduce_prod(q,[1]), and the chain "
                    "elu(silu(softplus(p))); loss = mean(sum op over the "
                    "reduce_mean of each). no_grad_q puts q in no_grad_set; "
                    "param_list_p returns p only.",
        variants={
            "default": [ab(loss.name)],
            "no_grad_q": [ab(loss.name, no_grad_set=["q"])],
            "param_list_p": [ab(loss.name, parameter_list=["p"])],
        },
    )


@model
def conv_variants():
    x = data("x", [-1, 4, 8, 8], stop_gradient=False)
    dw_f = param("dw_filter", [4, 1, 3, 3])
    g_f = param("grp_filter", [8, 2, 3, 3])
    t_f = param("tconv_filter", [8, 4, 3, 3])
    dw = conv("depthwise_conv2d", x, dw_f, paddings=(1, 1), groups=4)  # [-1,4,8,8]
    gc = conv("conv2d", dw, g_f, strides=(2, 2), paddings=(2, 2),
              dilations=(2, 2), groups=2)                               # [-1,8,4,4]
    tattrs = conv_attrs(strides=(2, 2), paddings=(1, 1))
    tattrs.update(output_padding=[], output_size=[])
    tc = op("conv2d_transpose", {"Input": [gc], "Filter": [t_f]},
            {"Output": 1}, tattrs)["Output"][0]                         # [-1,4,7,7]
    mp = pool2d(tc, "max", [2, 2], strides=(2, 2), ceil_mode=True)      # [-1,4,4,4]
    u = with_xshape("unsqueeze2", mp, {"axes": [2]})                    # [-1,4,1,4,4]
    pd = out1("pad3d", {"X": [u]}, {"paddings": [1, 1, 2, 0, 0, 0],
                                    "mode": "reflect", "value": 0.0,
                                    "data_format": "NCDHW"})            # [-1,4,1,6,6]
    sq = with_xshape("squeeze2", pd, {"axes": [2]})                     # [-1,4,6,6]
    bi = out1("bilinear_interp_v2", {"X": [sq]}, {
        "data_layout": "NCHW", "out_d": -1, "out_h": 9, "out_w": 5,
        "scale": [], "interp_method": "bilinear", "align_corners": False,
        "align_mode": 0})                                               # [-1,4,9,5]
    loss = paddle.mean(unary("square", bi))
    return dict(
        loss=loss.name,
        feeds={"x": None},
        description="Convolution variants: x [-1,4,8,8] (stop_gradient="
                    "False) -> depthwise_conv2d(dw_filter [4,1,3,3], pad 1, "
                    "groups 4) -> conv2d(grp_filter [8,2,3,3], stride 2, pad "
                    "2, dilation 2, groups 2) -> conv2d_transpose("
                    "tconv_filter [8,4,3,3], stride 2, pad 1) [7x7] -> pool2d "
                    "max 2x2 stride 2 ceil_mode -> unsqueeze2 -> pad3d reflect "
                    "[1,1,2,0,0,0] NCDHW -> squeeze2 -> bilinear_interp_v2 "
                    "(out 9x5, align_corners False, align_mode 0) -> square "
                    "-> mean. gradients_x = gradients([loss],[x]); "
                    "no_grad_grp puts grp_filter in no_grad_set.",
        variants={
            "default": [ab(loss.name)],
            "gradients_x": [call("gradients", [loss.name], [x.name])],
            "no_grad_grp": [ab(loss.name, no_grad_set=["grp_filter"])],
        },
    )


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------


def main():
    only = set(sys.argv[1:])
    unknown = only - {m.__name__ for m in MODELS}
    if unknown:
        sys.exit(f"unknown case(s): {sorted(unknown)}")
    os.makedirs(OUT_ROOT, exist_ok=True)
    summary = {}
    for builder in MODELS:
        if only and builder.__name__ not in only:
            continue
        G.generate_case(builder, summary)
    digest = hashlib.sha256()
    for builder in MODELS:
        case_dir = os.path.join(OUT_ROOT, builder.__name__)
        if not os.path.isdir(case_dir):
            continue
        for fn in sorted(os.listdir(case_dir)):
            p = os.path.join(case_dir, fn)
            digest.update(os.path.relpath(p, OUT_ROOT).encode())
            digest.update(open(p, "rb").read())
    print("sha256 of the gen_models cases:", digest.hexdigest())


if __name__ == "__main__":
    main()
