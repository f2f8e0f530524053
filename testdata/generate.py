#!/usr/bin/env python
"""Generate pybackward's golden programs with a live PaddlePaddle 3.3.1.

Every case under ``testdata/programs/<case>/`` gets:

* ``forward.pb`` / ``startup.pb``: Paddle's own serialization of the main
  program (before any backward) and of its startup program;
* ``backward.pb`` / ``backward_<variant>.pb``: the forward file re-parsed with
  ``Program.parse_from_string`` and then differentiated by Paddle's
  ``append_backward`` or ``gradients`` (once per option variant);
* a protobuf text-format ``.pbtxt`` beside every ``.pb``;
* ``params.npz`` (persistable values after the startup program, seed 2024),
  ``feeds.npz`` (``np.random.RandomState(0)``, batch 4),
  ``grads.npz`` / ``grads_<variant>.npz`` (values computed by Paddle's Executor
  running the backward file), and ``case.json`` (what was called and what
  Paddle returned).

Run it with the Paddle interpreter; it re-executes itself with
``PYTHONHASHSEED=0``, ``FLAGS_enable_pir_api=0`` and an absolute script path,
because Paddle records Python set iteration order (control-flow op inputs) and
the creating call stack (``op_callstack``) in the program files.
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

os.environ["FLAGS_enable_pir_api"] = "0"
os.environ.setdefault("GLOG_v", "0")

import hashlib  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import shutil  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

warnings.filterwarnings("ignore")

import paddle  # noqa: E402
import paddle.nn.functional as F  # noqa: E402
from google.protobuf import text_format  # noqa: E402
from paddle import static  # noqa: E402
from paddle.base.layer_helper import LayerHelper  # noqa: E402
from paddle.base.proto import framework_pb2  # noqa: E402
from paddle.static.nn.control_flow import ConditionalBlock, While  # noqa: E402
from paddle.utils import unique_name  # noqa: E402

paddle.enable_static()
logging.disable(logging.WARNING)

HERE = os.path.dirname(_SCRIPT)
OUT_ROOT = os.path.join(HERE, "programs")
SEED = 2024
BATCH = 4
PLACE = paddle.CPUPlace()


# --------------------------------------------------------------------------
# small program-building helpers (legacy ops appended directly)
# --------------------------------------------------------------------------


def op(type, inputs, outputs, attrs=None, dtype="float32"):
    """Append a legacy op through a LayerHelper.

    ``outputs`` maps slot -> int (that many fresh ``<type>_N.tmp_M`` vars) or a
    list of existing Variables.  Returns the dict of output Variables.
    """
    helper = LayerHelper(type)
    outs = {}
    for slot, spec in outputs.items():
        if isinstance(spec, int):
            outs[slot] = [
                helper.create_variable_for_type_inference(dtype)
                for _ in range(spec)
            ]
        else:
            outs[slot] = list(spec)
    helper.append_op(type=type, inputs=inputs, outputs=outs, attrs=attrs or {})
    return outs


def unary(type, x, **attrs):
    return op(type, {"X": [x]}, {"Out": 1}, attrs, dtype=x.dtype)["Out"][0]


def matmul_v2(x, y, trans_x=False, trans_y=False):
    return op(
        "matmul_v2",
        {"X": [x], "Y": [y]},
        {"Out": 1},
        {"trans_x": trans_x, "trans_y": trans_y},
    )["Out"][0]


def elementwise(type, x, y, axis=-1):
    return op(type, {"X": [x], "Y": [y]}, {"Out": 1}, {"axis": axis})["Out"][0]


def reduce_sum_all(x):
    return op(
        "reduce_sum",
        {"X": [x]},
        {"Out": 1},
        {"dim": [], "keep_dim": False, "reduce_all": True},
    )["Out"][0]


def param(name, shape, init=None):
    if init is None:
        init = paddle.nn.initializer.Uniform(-0.5, 0.5)
    return static.create_parameter(
        shape=shape, dtype="float32", name=name, default_initializer=init
    )


def data(name, shape, dtype="float32", stop_gradient=True):
    v = static.data(name, shape, dtype)
    v.stop_gradient = stop_gradient
    return v


# --------------------------------------------------------------------------
# case registry
# --------------------------------------------------------------------------

CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def call(api, targets, inputs=(), parameter_list=None, parameter_list_kind="name",
         no_grad_set=None, no_grad_set_kind="name", target_gradients=None):
    """Describe one call of append_backward (targets=[loss]) or gradients."""
    return {
        "api": api,
        "targets": list(targets),
        "inputs": list(inputs),
        "parameter_list": parameter_list,
        "parameter_list_kind": parameter_list_kind,
        "no_grad_set": no_grad_set,
        "no_grad_set_kind": no_grad_set_kind,
        "target_gradients": target_gradients,
    }


def ab(loss, **kw):
    return call("append_backward", [loss], **kw)


# Every builder runs inside program_guard + unique_name.guard and returns a
# dict: loss, feeds (name -> None | ("int", high)), description, variants
# (name -> list of calls, in order), optional notes.


@case
def fit_a_line():
    x = data("x", [-1, 13])
    y = data("y", [-1, 1])
    pred = static.nn.fc(x, 1)
    cost = F.square_error_cost(pred, y)
    loss = paddle.mean(cost)
    bias = [p.name for p in static.default_main_program().all_parameters()
            if ".b_" in p.name][0]
    return dict(
        loss=loss.name,
        feeds={"x": None, "y": None},
        description="fit-a-line: fc(x,1) -> square_error_cost -> mean "
                    "(reduce_mean). no_grad_by_name puts the fc bias in "
                    "no_grad_set by name.",
        variants={
            "default": [ab(loss.name)],
            "no_grad_by_name": [ab(loss.name, no_grad_set=[bias])],
        },
    )


@case
def doc_append_backward():
    # Exactly the paddle.static.append_backward docs example.
    x = static.data(name="x", shape=[None, 13], dtype="int64")
    y = static.data(name="y", shape=[None, 1], dtype="float32")
    x_emb = static.nn.embedding(x, size=[100, 256])
    y_predict = static.nn.fc(x=x_emb, size=1, activation=None, name="my_fc")
    loss = F.square_error_cost(input=y_predict, label=y)
    avg_loss = paddle.mean(loss)
    all_weights = [p.name for p in
                   static.default_main_program().global_block().all_parameters()
                   if "w_" in p.name]
    return dict(
        loss=avg_loss.name,
        feeds={"x": ("int", 100), "y": None},
        description="The paddle.static.append_backward docs example: "
                    "embedding([100,256]) -> fc(size 1, name my_fc) -> "
                    "square_error_cost -> mean. Variants follow the docs "
                    "(p_g_list1..5).",
        variants={
            "default": [ab(avg_loss.name)],
            "param_list_vars": [ab(avg_loss.name, parameter_list=all_weights,
                                   parameter_list_kind="var")],
            "param_list_names": [ab(avg_loss.name, parameter_list=all_weights)],
            "no_grad_var": [ab(avg_loss.name, no_grad_set=[x_emb.name],
                               no_grad_set_kind="var")],
            "no_grad_name": [ab(avg_loss.name, no_grad_set=["my_fc.b_0"])],
        },
    )


@case
def doc_gradients():
    # The docs use x of shape [2, 8, 8]; conv2d rejects 3-D input
    # ("Input size should be 4, but received 3"), so a batch dim is added.
    x = static.data(name="x", shape=[-1, 2, 8, 8], dtype="float32")
    x.stop_gradient = False
    y = static.nn.conv2d(x, 4, 1, bias_attr=False)
    y = F.relu(y)
    z = static.nn.conv2d(y, 4, 1, bias_attr=False)
    z = F.relu(z)
    tg = data("tg", list(z.shape))
    return dict(
        loss=z.name,
        feeds={"x": None, "tg": None},
        description="The paddle.static.gradients docs example: conv2d(4,1, "
                    "no bias) -> relu -> conv2d -> relu; gradients([z],[x]). "
                    "x is [-1,2,8,8] instead of the docs' [2,8,8] because "
                    "static.nn.conv2d rejects 3-D input. target_grad passes "
                    "data var 'tg' (z's shape) as target_gradients.",
        variants={
            "default": [call("gradients", [z.name], [x.name])],
            "target_grad": [call("gradients", [z.name], [x.name],
                                 target_gradients=[tg.name])],
        },
    )


@case
def mlp_softmax_ce():
    x = data("x", [-1, 16])
    label = data("label", [-1, 1], "int64")
    h = static.nn.fc(x, 32, activation="relu")
    h = static.nn.fc(h, 32, activation="relu")
    logits = static.nn.fc(h, 10)
    outs = op("softmax_with_cross_entropy",
              {"Logits": [logits], "Label": [label]},
              {"Softmax": 1, "Loss": 1},
              {"soft_label": False, "ignore_index": -100,
               "numeric_stable_mode": True, "axis": -1})
    loss = paddle.mean(outs["Loss"][0])
    return dict(
        loss=loss.name,
        feeds={"x": None, "label": ("int", 10)},
        description="MLP fc(32,relu) -> fc(32,relu) -> fc(10) -> "
                    "softmax_with_cross_entropy op -> mean. "
                    "param_list_subset returns only fc_0.w_0.",
        variants={
            "default": [ab(loss.name)],
            "param_list_subset": [ab(loss.name, parameter_list=["fc_0.w_0"])],
        },
    )


@case
def cnn_bn_pool():
    img = data("image", [-1, 3, 8, 8])
    label = data("label", [-1, 1], "int64")
    c = static.nn.conv2d(img, 8, 3, padding=1)
    b = static.nn.batch_norm(c, is_test=False)
    r = F.relu(b)
    p = F.max_pool2d(r, kernel_size=2, stride=2)
    logits = static.nn.fc(p, 10)
    outs = op("softmax_with_cross_entropy",
              {"Logits": [logits], "Label": [label]},
              {"Softmax": 1, "Loss": 1},
              {"soft_label": False, "ignore_index": -100,
               "numeric_stable_mode": True, "axis": -1})
    loss = paddle.mean(outs["Loss"][0])
    return dict(
        loss=loss.name,
        feeds={"image": None, "label": ("int", 10)},
        description="conv2d(8,3,pad 1)+bias -> batch_norm (training; "
                    "MeanOut/VarianceOut alias Mean/Variance) -> relu -> "
                    "pool2d max 2x2 -> fc(10) -> softmax_with_cross_entropy "
                    "-> mean.",
        variants={"default": [ab(loss.name)]},
    )


@case
def shared_weights():
    x = data("x", [-1, 8])
    W = param("W", [8, 8])
    h1 = matmul_v2(x, W)
    h2 = matmul_v2(h1, W)
    out = unary("tanh", h1) + h2
    shared = paddle.ParamAttr(name="shared_fc_w")
    a = static.nn.fc(out, 8, weight_attr=shared)
    b = static.nn.fc(a, 8, weight_attr=shared)
    loss = paddle.mean(b)
    return dict(
        loss=loss.name,
        feeds={"x": None},
        description="Parameter W [8,8] read by two matmul_v2 ops (h1=x@W, "
                    "h2=h1@W, out=tanh(h1)+h2), then two fc layers sharing "
                    "the weight 'shared_fc_w' via ParamAttr(name=...); mean. "
                    "Exercises @RENAME@ + sum accumulation for W, h1 and "
                    "shared_fc_w.",
        variants={"default": [ab(loss.name)]},
    )


@case
def var_reused():
    x = data("x", [-1, 6], stop_gradient=False)
    w = param("w", [6])
    s = unary("relu", x) + unary("sigmoid", x)
    s = s + unary("tanh", x)
    y = x * w
    z = y + y
    loss = paddle.mean(s + z)
    return dict(
        loss=loss.name,
        feeds={"x": None},
        description="x (data, stop_gradient=False) read by relu, sigmoid, "
                    "tanh and elementwise_mul(x*w); y=x*w; z=y+y (same var "
                    "as X and Y); loss=mean(relu+sigmoid+tanh+z).",
        variants={"default": [ab(loss.name)]},
    )


def _two_layer(stop_flag):
    x = data("x", [-1, 8])
    h = static.nn.fc(x, 8, activation="relu")
    if stop_flag:
        h.stop_gradient = True
    o = static.nn.fc(h, 4)
    loss = paddle.mean(o)
    return x, h, loss


@case
def stop_gradient_mid():
    _, h, loss = _two_layer(True)
    return dict(
        loss=loss.name,
        feeds={"x": None},
        description="h = relu(fc1(x)) with h.stop_gradient=True; "
                    "loss = mean(fc2(h)). fc1 gets no grads. The same graph "
                    "without the flag is case stop_gradient_mid_free.",
        variants={"default": [ab(loss.name)]},
    )


@case
def stop_gradient_mid_free():
    _, h, loss = _two_layer(False)
    return dict(
        loss=loss.name,
        feeds={"x": None},
        description="Same graph as stop_gradient_mid but without the "
                    "stop_gradient flag on h. default: all grads; no_grad_h: "
                    "no_grad_set={h} by name (should match stop_gradient_mid).",
        variants={
            "default": [ab(loss.name)],
            "no_grad_h": [ab(loss.name, no_grad_set=[h.name])],
        },
    )


@case
def attention():
    x = data("x", [-1, 4, 16], stop_gradient=False)
    ln = static.nn.layer_norm(x, begin_norm_axis=2)
    wq, wk, wv = (param(n, [16, 16]) for n in ("wq", "wk", "wv"))
    q, k, v = matmul_v2(ln, wq), matmul_v2(ln, wk), matmul_v2(ln, wv)
    scores = matmul_v2(q, k, trans_y=True)
    scaled = op("scale", {"X": [scores]}, {"Out": 1},
                {"scale": 0.25, "bias": 0.0, "bias_after_scale": True})["Out"][0]
    probs = unary("softmax", scaled, axis=-1)
    ctx = matmul_v2(probs, v)
    res = elementwise("elementwise_add", ctx, x)
    loss = paddle.mean(res)
    return dict(
        loss=loss.name,
        feeds={"x": None},
        description="Single-head self attention: x [-1,4,16] "
                    "(stop_gradient=False) -> layer_norm(begin_norm_axis=2) "
                    "-> q,k,v = matmul_v2 with wq/wk/wv [16,16] -> "
                    "matmul_v2(q,k,trans_y) -> scale(0.25) -> softmax(-1) -> "
                    "matmul_v2(probs,v) -> elementwise_add residual x -> "
                    "reduce_mean.",
        variants={"default": [ab(loss.name)]},
    )


@case
def broadcast_axis():
    x = data("x", [4, 3, 5], stop_gradient=False)
    y_add = param("y_add", [3])
    y_mul = param("y_mul", [3, 5])
    y_sub = param("y_sub", [5])
    y_div = param("y_div", [4, 1, 5], paddle.nn.initializer.Uniform(1.0, 2.0))
    a = elementwise("elementwise_add", x, y_add, axis=1)
    b = elementwise("elementwise_mul", a, y_mul, axis=1)
    c = elementwise("elementwise_sub", b, y_sub, axis=-1)
    d = elementwise("elementwise_div", c, y_div, axis=-1)
    loss = paddle.mean(d)
    return dict(
        loss=loss.name,
        feeds={"x": None},
        description="Broadcasting with the axis attr: x[4,3,5] + y_add[3] "
                    "(axis=1), * y_mul[3,5] (axis=1), - y_sub[5] (axis=-1), "
                    "/ y_div[4,1,5] (axis=-1); mean.",
        variants={"default": [ab(loss.name)]},
    )


@case
def concat_split_slice_gather():
    a = data("a", [-1, 4], stop_gradient=False)
    b = data("b", [-1, 6])
    idx = data("idx", [3], "int64")
    w = param("w", [6])
    bw = b * w
    c = paddle.concat([a, bw], axis=1)                      # [-1, 10]
    halves = paddle.split(c, 2, axis=1)                      # num=2
    s0 = halves[0]                                           # halves[1] unused
    secs = paddle.split(c, [2, 3, 5], axis=1)                # sections
    t = op("slice", {"Input": [secs[2]]}, {"Out": 1},
           {"axes": [1], "starts": [1], "ends": [2], "decrease_axis": [1],
            "infer_flags": [1]})["Out"][0]                   # [-1]
    g = paddle.gather(c, idx)                                # [3, 10]
    parts = [reduce_sum_all(v) for v in (s0, secs[0], secs[2], t, g)]
    total = op("sum", {"X": parts}, {"Out": 1})["Out"][0]
    loss = paddle.mean(total)
    return dict(
        loss=loss.name,
        feeds={"a": None, "b": None, "idx": ("int", 4)},
        description="c = concat([a, b*w], axis=1); split(c, 2) using only "
                    "the first half (the unused half gets a zero "
                    "fill_any_like); split(c, [2,3,5]) using parts 0 and 2; "
                    "slice(part2, axes=[1], starts=[1], ends=[2], "
                    "decrease_axis=[1]); gather(c, idx int64); loss = "
                    "mean(sum op over reduce_sum(all) of each piece).",
        variants={"default": [ab(loss.name)]},
    )


@case
def cond_block():
    x = data("x", [-1, 8], stop_gradient=False)
    w = param("w", [8, 8])
    w2 = param("w2", [8, 8])
    h = matmul_v2(x, w)
    m = paddle.mean(h)
    limit = paddle.full(shape=[], fill_value=100.0, dtype="float32")
    cond = paddle.less_than(m, limit)
    block = static.default_main_program().current_block()
    o = block.create_var(name="o", dtype="float32", shape=list(h.shape))
    cb = ConditionalBlock([cond], is_scalar_condition=True)
    with cb.block():
        t = matmul_v2(h, w2)
        th = unary("tanh", t)
        op("assign", {"X": [th]}, {"Out": [o]})
    loss = paddle.mean(o)
    return dict(
        loss=loss.name,
        feeds={"x": None},
        description="h = x@w; if mean(h) < 100 (always true for the golden "
                    "feeds): o = tanh(h@w2) (assign to parent var 'o'), built "
                    "with ConditionalBlock(is_scalar_condition=True); "
                    "loss = mean(o). w2 is used only inside the branch.",
        variants={"default": [ab(loss.name)]},
    )


@case
def while_loop():
    x = data("x", [-1, 8], stop_gradient=False)
    w = param("w", [8, 8])
    h = op("scale", {"X": [x]}, {"Out": 1},
           {"scale": 1.0, "bias": 0.0, "bias_after_scale": True})["Out"][0]
    i = paddle.full(shape=[1], fill_value=0, dtype="int64")
    n = paddle.full(shape=[1], fill_value=3, dtype="int64")
    cond = paddle.less_than(i, n)
    loop = While(cond)
    with loop.block():
        t = matmul_v2(h, w)
        th = unary("tanh", t)
        op("assign", {"X": [th]}, {"Out": [h]})
        op("increment", {"X": [i]}, {"Out": [i]}, {"step": 1.0}, dtype="int64")
        op("less_than", {"X": [i], "Y": [n]}, {"Out": [cond]},
           {"axis": -1, "force_cpu": False}, dtype="bool")
    loss = paddle.mean(h)
    return dict(
        loss=loss.name,
        feeds={"x": None},
        description="h = scale(x); i = 0; n = 3; while i < n: "
                    "h = tanh(h@w); i += 1 (increment); cond = less_than(i,n). "
                    "Built with paddle.static.nn.control_flow.While; "
                    "loss = mean(h). h is loop-carried, w used in the body.",
        variants={"default": [ab(loss.name)]},
    )


@case
def two_gradients_calls():
    x = data("x", [4, 3], stop_gradient=False)
    y = x * x
    y2 = unary("tanh", y)
    return dict(
        loss=y.name,
        feeds={"x": None},
        description="y = x*x (elementwise_mul), y2 = tanh(y). default = the "
                    "first call gradients([y],[x]). second = on the same "
                    "re-parsed program, gradients([y],[x]) then "
                    "gradients([x@GRAD],[x]) (double grad; "
                    "elementwise_mul_grad_grad). second_other = "
                    "gradients([y],[x]) then gradients([y2],[x]) (grad/grad/ "
                    "renaming of clashing names).",
        variants={
            "default": [call("gradients", [y.name], [x.name])],
            "second": [call("gradients", [y.name], [x.name]),
                       call("gradients", [x.name + "@GRAD"], [x.name])],
            "second_other": [call("gradients", [y.name], [x.name]),
                             call("gradients", [y2.name], [x.name])],
        },
    )


@case
def append_twice():
    x = data("x", [-1, 3])
    W = param("W", [3, 3])
    h = matmul_v2(x, W)
    l1 = paddle.mean(h)
    l2 = reduce_sum_all(h)
    return dict(
        loss=l1.name,
        feeds={"x": None},
        description="h = x@W; l1 = mean(h); l2 = reduce_sum(h). default = "
                    "append_backward(l1). twice = append_backward(l1) then "
                    "append_backward(l2) on the same re-parsed program "
                    "(second pass names get the grad/grad/ prefix).",
        variants={
            "default": [ab(l1.name)],
            "twice": [ab(l1.name), ab(l2.name)],
        },
    )


# --------------------------------------------------------------------------
# machinery
# --------------------------------------------------------------------------


def to_text(b: bytes) -> str:
    m = framework_pb2.ProgramDesc()
    m.ParseFromString(b)
    return text_format.MessageToString(m)


def write_pb(path: str, b: bytes) -> None:
    with open(path, "wb") as f:
        f.write(b)
    with open(path[:-3] + ".pbtxt", "w") as f:
        f.write(to_text(b))


def resolve(block, names, kind):
    if names is None:
        return None
    if kind == "var":
        return [block.var(n) for n in names]
    return list(names)


def run_calls(fwd_bytes: bytes, calls, with_callbacks=True):
    """Re-parse forward bytes and run the calls in order on that program."""
    prog = static.Program.parse_from_string(fwd_bytes)
    blk = prog.global_block()
    results = []
    with unique_name.guard(), static.program_guard(prog, static.Program()):
        for c in calls:
            res = dict(c)
            ngs = resolve(blk, c["no_grad_set"], c["no_grad_set_kind"])
            ngs = set(ngs) if ngs is not None else None
            if c["api"] == "append_backward":
                rec = []

                def cb(block, context, rec=rec):
                    rec.append([
                        context["__current_op_desc__"].type(),
                        sorted(k for k in context if k != "__current_op_desc__"),
                    ])

                plist = resolve(blk, c["parameter_list"], c["parameter_list_kind"])
                ret = static.append_backward(
                    blk.var(c["targets"][0]), parameter_list=plist,
                    no_grad_set=ngs,
                    callbacks=[cb] if with_callbacks else None)
                res["returned"] = [[p.name, None if g is None else g.name]
                                   for p, g in ret]
                res["callbacks"] = rec
            else:
                tg = c["target_gradients"]
                ret = static.gradients(
                    [blk.var(n) for n in c["targets"]],
                    [blk.var(n) for n in c["inputs"]],
                    target_gradients=None if tg is None else [blk.var(n) for n in tg],
                    no_grad_set=ngs)
                res["returned"] = [None if g is None else g.name for g in ret]
            results.append(res)
    return prog.desc.serialize_to_string(), results


def make_feeds(prog, feed_spec):
    rs = np.random.RandomState(0)
    feeds = {}
    blk = prog.global_block()
    for name, spec in feed_spec.items():
        v = blk.var(name)
        shape = [BATCH if d < 0 else d for d in v.shape]
        if spec is None:
            feeds[name] = rs.uniform(-1.0, 1.0, size=shape).astype("float32")
        else:
            feeds[name] = rs.randint(0, spec[1], size=shape).astype("int64")
    return feeds


def load_scope(params):
    scope = static.Scope()
    for name, arr in params.items():
        scope.var(name).get_tensor().set(arr, PLACE)
    return scope


def fetch_names(bwd_bytes, results, feeds, case_info):
    prog = static.Program.parse_from_string(bwd_bytes)
    blk = prog.global_block()
    names = []
    for r in results:
        names += r["targets"]
        if r["api"] == "append_backward":
            names += [g for _, g in r["returned"] if g is not None]
        else:
            names += [g for g in r["returned"] if g is not None]
    for f in feeds:
        v = blk.var(f)
        if not v.stop_gradient and blk.has_var(f + "@GRAD"):
            names.append(f + "@GRAD")
    out = []
    for n in names:
        if n not in out:
            out.append(n)
    return prog, out


def compute_grads(bwd_bytes, results, feeds, params, case_info):
    prog, names = fetch_names(bwd_bytes, results, feeds, case_info)
    scope = load_scope(params)
    exe = static.Executor(PLACE)
    with static.scope_guard(scope):
        vals = exe.run(prog, feed=feeds, fetch_list=names, scope=scope,
                       return_numpy=True)
    return {n: np.asarray(v) for n, v in zip(names, vals)}


def save_npz(path, arrays):
    np.savez_compressed(path, **{k: arrays[k] for k in sorted(arrays)})


def generate_case(builder, summary):
    name = builder.__name__
    out_dir = os.path.join(OUT_ROOT, name)
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)

    paddle.seed(SEED)
    main, startup = static.Program(), static.Program()
    main.random_seed = SEED
    startup.random_seed = SEED
    with unique_name.guard(), static.program_guard(main, startup):
        info = builder()
    fwd = main.desc.serialize_to_string()
    st = startup.desc.serialize_to_string()
    write_pb(os.path.join(out_dir, "forward.pb"), fwd)
    write_pb(os.path.join(out_dir, "startup.pb"), st)

    # params: run the startup program once in a fresh scope
    scope = static.Scope()
    exe = static.Executor(PLACE)
    with static.scope_guard(scope):
        exe.run(startup, scope=scope)
    persist = sorted(v.name for v in main.list_vars() if v.persistable
                     and v.name not in ("feed", "fetch"))
    params = {n: np.array(scope.find_var(n).get_tensor()) for n in persist}
    save_npz(os.path.join(out_dir, "params.npz"), params)
    # Parameter order matters for the default parameter_list: the builder
    # program lists parameters in creation order, but the re-parsed file
    # (which is what append_backward saw) lists them sorted by name, and the
    # re-parse loses `trainable=False` (e.g. batch_norm moving mean/variance).
    created = [p.name for p in main.global_block().all_parameters()
               if p.trainable]

    fwd_prog = static.Program.parse_from_string(fwd)
    reparsed = [p.name for p in fwd_prog.global_block().all_parameters()]
    feeds = make_feeds(fwd_prog, info["feeds"])
    save_npz(os.path.join(out_dir, "feeds.npz"), feeds)

    notes = list(info.get("notes", []))
    variants = {}
    for vname, calls in info["variants"].items():
        fname = "backward.pb" if vname == "default" else f"backward_{vname}.pb"
        bwd, results = run_calls(fwd, calls)
        # the recording callback must not change the program
        if any(c["api"] == "append_backward" for c in calls):
            bwd_plain, _ = run_calls(fwd, calls, with_callbacks=False)
            assert bwd_plain == bwd, f"{name}/{vname}: callbacks changed program"
        write_pb(os.path.join(out_dir, fname), bwd)
        last = results[-1]
        entry = {
            "api": last["api"],
            "targets": last["targets"],
            "inputs": last["inputs"],
            "parameter_list": last["parameter_list"],
            "parameter_list_kind": last["parameter_list_kind"],
            "no_grad_set": last["no_grad_set"],
            "no_grad_set_kind": last["no_grad_set_kind"],
            "target_gradients": last["target_gradients"],
            "file": fname,
            "returned": last["returned"],
        }
        if last["api"] == "append_backward":
            entry["callbacks"] = last["callbacks"]
        if len(results) > 1:
            entry["calls"] = results
        gname = "grads.npz" if vname == "default" else f"grads_{vname}.npz"
        try:
            grads = compute_grads(bwd, results, feeds, params, info)
            save_npz(os.path.join(out_dir, gname), grads)
            entry["grads_file"] = gname
        except Exception as e:  # noqa: BLE001
            msg = f"{vname}: Paddle Executor failed: {type(e).__name__}: " + \
                  str(e).strip().splitlines()[0][:300]
            notes.append(msg)
            entry["grads_file"] = None
            print("   !!", msg)
            traceback.print_exc(limit=2)
        variants[vname] = entry

    case_json = {
        "loss": info["loss"],
        "feeds": list(info["feeds"]),
        "params": persist,
        "parameters_created": created,
        "parameters_reparsed": reparsed,
        "description": info["description"],
        "variants": variants,
    }
    if notes:
        case_json["notes"] = notes
    with open(os.path.join(out_dir, "case.json"), "w") as f:
        json.dump(case_json, f, indent=2)
        f.write("\n")
    summary[name] = sorted(variants)
    print(f"{name}: variants={sorted(variants)}"
          + (f" notes={len(notes)}" if notes else ""))


def check_files():
    """Report var ordering and proto re-serialization round trips."""
    unsorted, mismatched, total, nfiles = [], [], 0, 0
    attrs_every_op = None
    for root, _, files in os.walk(OUT_ROOT):
        for fn in sorted(files):
            path = os.path.join(root, fn)
            total += os.path.getsize(path)
            if not fn.endswith(".pb"):
                continue
            nfiles += 1
            b = open(path, "rb").read()
            m = framework_pb2.ProgramDesc()
            m.ParseFromString(b)
            if m.SerializeToString() != b:
                mismatched.append(os.path.relpath(path, OUT_ROOT))
            for blk in m.blocks:
                names = [v.name for v in blk.vars]
                if names != sorted(names):
                    unsorted.append(f"{os.path.relpath(path, OUT_ROOT)}"
                                    f"#block{blk.idx}")
                if fn == "forward.pb":
                    for o in blk.ops:
                        s = {a.name for a in o.attrs}
                        attrs_every_op = s if attrs_every_op is None else attrs_every_op & s
    print(f"\n{nfiles} .pb files, {total} bytes total under programs/")
    print("var lists not sorted by name:", unsorted or "none")
    print("python protobuf re-serialization differs:", mismatched or "none")
    print("attrs on every forward op:", sorted(attrs_every_op or []))


def main():
    only = set(sys.argv[1:])
    os.makedirs(OUT_ROOT, exist_ok=True)
    summary = {}
    for builder in CASES:
        if only and builder.__name__ not in only:
            continue
        generate_case(builder, summary)
    check_files()
    digest = hashlib.sha256()
    for root, _, files in sorted(os.walk(OUT_ROOT)):
        for fn in sorted(files):
            p = os.path.join(root, fn)
            digest.update(os.path.relpath(p, OUT_ROOT).encode())
            digest.update(open(p, "rb").read())
    print("sha256 of programs/:", digest.hexdigest())


if __name__ == "__main__":
    main()
