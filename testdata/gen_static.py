#!/usr/bin/env python
"""Golden programs for `pybackward.static`, built by a live PaddlePaddle 3.3.1.

Every case below is a *builder*: a function of three namespaces,
``(paddle, static, F)``. The generator calls it with Paddle's own
(``paddle``, ``paddle.static``, ``paddle.nn.functional``); the tests
(``tests/test_static_*.py``) import this file and call the very same function
with pybackward's (``pybackward.static``, ``pybackward.static``,
``pybackward.static.nn.functional``). So "the program we build equals the one
Paddle builds from the same code" is checked on literally the same code.

A few Paddle 3.3.1 functions no longer have a legacy (ProgramDesc) branch and
fail on legacy Variables (``sigmoid``, ``tanh``, ``gelu``, ``matmul``,
``sum``): the generator passes a ``paddle`` namespace in which those build
exactly what their last legacy implementation (Paddle 2.6) emitted, through
Paddle's own ``LayerHelper`` (see ``_legacy_namespaces``). ``paddle.sum`` is
replaced on the module too, because ``F.cross_entropy(reduction='sum')`` calls
it. The generated file's ``op_callstack`` strings hold this script's path and
line numbers (and the Paddle install's), so editing or moving the script
changes them and nothing else; the tests ignore ``op_callstack``.

For each case ``testdata/static/<case>/`` holds:

* ``main.pb`` / ``startup.pb`` (+ ``.pbtxt``): the programs right after the
  builder ran (``main.random_seed = startup.random_seed = 2024``);
* ``test.pb``: ``main.clone(for_test=True)`` (cases that ask for it), and
  ``test_after_backward.pb``: the same clone taken after the ``default``
  variant appended its backward ops;
* ``backward_<variant>.pb``: a fresh build, then the variant's
  ``append_backward`` / ``gradients`` calls, serialised;
* ``params.npz``: every persistable var after Paddle's Executor ran
  ``startup.pb``; ``feeds.npz``: the feeds used for ``fetch``;
* ``case.json``: what the variants returned, the values of ``fetch`` (Paddle's
  Executor, after the startup program, on ``feeds.npz``), the parameters in
  creation order, and the docstring comments of the docs cases.

Run with the Paddle interpreter (it re-executes itself with
``PYTHONHASHSEED=0`` and ``FLAGS_enable_pir_api=0``)::

    /work/paddle-venv/bin/python testdata/gen_static.py [case ...]

Importing this module (as the tests do) needs neither Paddle nor pybackward.
"""
from __future__ import annotations

import json
import os
import sys

SEED = 2024
BATCH = 4
HERE = os.path.dirname(os.path.abspath(__file__))
OUT_ROOT = os.path.join(HERE, "static")


# --------------------------------------------------------------------------
# helpers shared by the builders (no Paddle, no pybackward)
# --------------------------------------------------------------------------
def pairs(params_grads):
    """append_backward's result as JSON: [[param, grad], ...]."""
    return [[p.name, None if g is None else g.name] for p, g in params_grads]


def names(vs):
    """gradients' result as JSON: [grad name or None, ...]."""
    return [None if v is None else v.name for v in vs]


CASES = []


def case(fn):
    CASES.append(fn)
    return fn


# --------------------------------------------------------------------------
# the docs examples
# --------------------------------------------------------------------------
@case
def doc_append_backward(paddle, static, F):
    """The paddle.static.append_backward docstring, verbatim."""
    x = static.data(name='x', shape=[None, 13], dtype='int64')
    y = static.data(name='y', shape=[None, 1], dtype='float32')
    x_emb = static.nn.embedding(x, size=[100, 256])
    y_predict = static.nn.fc(x=x_emb, size=1, activation=None, name='my_fc')
    loss = F.square_error_cost(input=y_predict, label=y)
    avg_loss = paddle.mean(loss)

    # Get all weights in main_program, not include bias.
    all_weights = [param for param in static.default_main_program().block(0).all_parameters()
                   if 'w_' in param.name]
    all_weights_name = [w.name for w in all_weights]

    def p1():
        return pairs(static.append_backward(loss=avg_loss))

    def p2():
        return pairs(static.append_backward(loss=avg_loss, parameter_list=all_weights))

    def p3():
        return pairs(static.append_backward(loss=avg_loss, parameter_list=all_weights_name))

    def p4():
        return pairs(static.append_backward(loss=avg_loss, no_grad_set=set([x_emb])))

    def p5():
        return pairs(static.append_backward(loss=avg_loss, no_grad_set=set(['my_fc.b_0'])))

    def p6():
        return pairs(static.append_backward(loss=avg_loss, parameter_list=all_weights,
                                            no_grad_set=set(all_weights)))

    def sequential():
        # The docstring as it runs: all six calls on one program.
        return [f() for f in (p1, p2, p3, p4, p5, p6)]

    return dict(
        description="paddle.static.append_backward docstring: embedding -> fc(my_fc) -> "
                    "square_error_cost -> mean; p_g_list1..6 each on a fresh build, and all "
                    "six in sequence on one build (as the docstring runs).",
        feeds={"x": ("int", 100), "y": None}, fetch=[avg_loss],
        variants={"p1": p1, "p2": p2, "p3": p3, "p4": p4, "p5": p5, "p6": p6,
                  "sequential": sequential},
        docs={"p1": [["embedding_0.w_0", "embedding_0.w_0@GRAD"], ["my_fc.w_0", "my_fc.w_0@GRAD"],
                     ["my_fc.b_0", "my_fc.b_0@GRAD"]],
              "p2": [["embedding_0.w_0", "embedding_0.w_0@GRAD"], ["my_fc.w_0", "my_fc.w_0@GRAD"]],
              "p3": [["embedding_0.w_0", "embedding_0.w_0@GRAD"], ["my_fc.w_0", "my_fc.w_0@GRAD"]],
              "p4": [["my_fc.w_0", "my_fc.w_0@GRAD"], ["my_fc.b_0", "my_fc.b_0@GRAD"]],
              "p5": [["embedding_0.w_0", "embedding_0.w_0@GRAD"], ["my_fc.w_0", "my_fc.w_0@GRAD"]],
              "p6": []},
    )


@case
def doc_gradients(paddle, static, F):
    """The paddle.static.gradients docstring, verbatim."""
    x = paddle.static.data(name='x', shape=[None, 2, 8, 8], dtype='float32')
    x.stop_gradient = False
    y = paddle.static.nn.conv2d(x, 4, 1, bias_attr=False)
    y = F.relu(y)

    def default():
        z = paddle.static.gradients([y], x)
        return {"returned": names(z), "printed": [str(v) for v in z]}

    return dict(
        description="paddle.static.gradients docstring: conv2d(x, 4, 1, bias_attr=False) -> "
                    "relu; gradients([y], x).",
        feeds={"x": None}, fetch=[y], variants={"default": default},
        docs={"printed": ["var x@GRAD : DENSE_TENSOR.shape(-1, 2, 8, 8).dtype(float32)"
                          ".stop_gradient(False)"]},
    )


@case
def doc_gradients_two_conv(paddle, static, F):
    """The gradients example as the issue tells it: conv -> relu -> conv -> relu.
    (The issue's `data([2, 8, 8])` is 3-D; conv2d wants 4-D, so the batch dim
    stays, as in the docstring.)"""
    x = static.data(name='x', shape=[None, 2, 8, 8], dtype='float32')
    x.stop_gradient = False
    y = static.nn.conv2d(x, 4, 1, bias_attr=False)
    y = F.relu(y)
    y = static.nn.conv2d(y, 4, 1, bias_attr=False)
    y = F.relu(y)
    w1 = static.default_main_program().global_block().var('conv2d_1.w_0')

    def default():
        return names(static.gradients([y], x))

    def wrt_weights():
        return names(static.gradients([y], [x, w1]))

    return dict(
        description="conv2d -> relu -> conv2d -> relu; gradients([y], x) and w.r.t. x and "
                    "the second filter.",
        feeds={"x": None}, fetch=[y], variants={"default": default, "wrt_weights": wrt_weights},
    )


# --------------------------------------------------------------------------
# more builds
# --------------------------------------------------------------------------
@case
def mlp(paddle, static, F):
    x = static.data('x', [None, 16], 'float32')
    label = static.data('label', [None, 1], 'int64')
    h = static.nn.fc(x, 32, activation='relu')
    h = static.nn.fc(h, 32, activation='tanh')
    h = F.sigmoid(h) * 2.0 - 1.0
    logits = static.nn.fc(h, 10)
    loss = F.cross_entropy(logits, label)

    def default():
        return pairs(static.append_backward(loss))

    def wrt_input():
        return names(static.gradients([loss], [x, h]))

    return dict(description="MLP: fc(relu) -> fc(tanh) -> sigmoid*2-1 -> fc -> cross_entropy",
                feeds={"x": None, "label": ("int", 10)}, fetch=[loss, logits],
                variants={"default": default, "wrt_input": wrt_input}, clone_for_test=True)


@case
def cnn_bn(paddle, static, F):
    img = static.data('img', [None, 3, 8, 8], 'float32')
    label = static.data('label', [None, 1], 'int64')
    c = static.nn.conv2d(img, 4, 3, padding=1)
    c = static.nn.batch_norm(c, act='relu')
    c = F.max_pool2d(c, 2)
    c = static.nn.conv2d(c, 8, 3, padding='SAME', bias_attr=False)
    c = static.nn.batch_norm(c, momentum=0.8, epsilon=1e-4)
    c = F.relu(c)
    c = F.avg_pool2d(c, kernel_size=2, stride=2)
    c = paddle.reshape(c, [-1, 8 * 2 * 2])
    logits = static.nn.fc(c, 10)
    loss = paddle.mean(F.softmax_with_cross_entropy(logits, label))

    def default():
        return pairs(static.append_backward(loss))

    return dict(description="CNN: conv -> batch_norm(relu) -> max_pool -> conv(SAME) -> "
                            "batch_norm -> relu -> avg_pool -> reshape -> fc -> "
                            "softmax_with_cross_entropy -> mean",
                feeds={"img": None, "label": ("int", 10)}, fetch=[loss],
                variants={"default": default}, clone_for_test=True)


@case
def attention(paddle, static, F):
    x = static.data('x', [None, 4, 16], 'float32')
    q = static.nn.fc(x, 16, num_flatten_dims=2, name='q')
    k = static.nn.fc(x, 16, num_flatten_dims=2, name='k')
    v = static.nn.fc(x, 16, num_flatten_dims=2, name='v')
    scores = paddle.matmul(q, k, transpose_y=True) * 0.25
    probs = F.softmax(scores)
    ctx = probs @ v
    h = static.nn.layer_norm(ctx + x, begin_norm_axis=2)
    f = F.gelu(static.nn.fc(h, 32, num_flatten_dims=2))
    out = static.nn.fc(f, 16, num_flatten_dims=2) + h
    out = paddle.transpose(out, [0, 2, 1])
    loss = paddle.mean(-out / 2.0 + 1.0)

    def default():
        return pairs(static.append_backward(loss))

    return dict(description="attention block: q/k/v fc, matmul(trans_y)*scale, softmax, "
                            "@, residual + layer_norm, fc+gelu, fc, transpose, mean",
                feeds={"x": None}, fetch=[loss], variants={"default": default},
                clone_for_test=True)


@case
def shared_weights(paddle, static, F):
    x1 = static.data('x1', [None, 8], 'float32')
    x2 = static.data('x2', [None, 8], 'float32')
    w = paddle.ParamAttr(name='shared_w')
    b = paddle.ParamAttr(name='shared_b', initializer=paddle.nn.initializer.Constant(0.1))
    h1 = static.nn.fc(x1, 4, weight_attr=w, bias_attr=b)
    h2 = static.nn.fc(x2, 4, weight_attr=w, bias_attr=b)
    out = paddle.concat([h1, h2 * h1], axis=1)
    loss = paddle.mean(out)

    def default():
        return pairs(static.append_backward(loss))

    return dict(description="two fc layers sharing weight and bias through ParamAttr names",
                feeds={"x1": None, "x2": None}, fetch=[loss], variants={"default": default})


@case
def stop_gradient_mid(paddle, static, F):
    x = static.data('x', [None, 8], 'float32')
    x.stop_gradient = False
    h = static.nn.fc(x, 8, activation='relu')
    h.stop_gradient = True
    g = static.nn.fc(h, 6)
    g2 = static.nn.fc(x, 6)
    loss = paddle.mean(F.tanh(g) + g2)

    def default():
        return pairs(static.append_backward(loss))

    def wrt_x():
        return names(static.gradients([loss], [x, h]))

    return dict(description="an intermediate with stop_gradient=True cuts the first fc off",
                feeds={"x": None}, fetch=[loss],
                variants={"default": default, "wrt_x": wrt_x})


@case
def dropout(paddle, static, F):
    x = static.data('x', [None, 10], 'float32')
    h = static.nn.fc(x, 12)
    h = F.dropout(h, p=0.3)
    h = F.dropout(h, p=0.5, mode='downscale_in_infer')
    h = F.dropout(h, p=0.2, training=False)
    loss = paddle.mean(h)

    def default():
        return pairs(static.append_backward(loss))

    return dict(description="dropout upscale_in_train / downscale_in_infer / training=False; "
                            "seeds from main.random_seed",
                feeds={"x": None}, fetch=[loss], variants={"default": default},
                clone_for_test=True)


@case
def initializers(paddle, static, F):
    init = paddle.nn.initializer
    x = static.data('x', [None, 6], 'float32')
    ids = static.data('ids', [None, 3], 'int64')
    h = static.nn.fc(x, 5, weight_attr=paddle.ParamAttr(initializer=init.Normal(0.0, 0.02)),
                     bias_attr=paddle.ParamAttr(initializer=init.Constant(0.5)))
    h = static.nn.fc(h, 5, weight_attr=init.TruncatedNormal(0.0, 0.1), bias_attr=False)
    h = static.nn.fc(h, 5, weight_attr=paddle.ParamAttr(name='xn', initializer=init.XavierNormal()))
    h = static.nn.fc(h, 5, weight_attr=init.KaimingUniform(), activation='relu')
    h = static.nn.fc(h, 5, weight_attr=init.KaimingNormal(nonlinearity='leaky_relu',
                                                          negative_slope=0.1))
    h = static.nn.fc(h, 5, weight_attr=init.Uniform(-0.1, 0.1),
                     bias_attr=paddle.ParamAttr(initializer=init.Normal(1.0, 0.5)))
    h = static.nn.fc(h, 5, weight_attr=init.XavierUniform(fan_in=10.0, fan_out=20.0))
    h = static.nn.fc(h, 5, weight_attr=paddle.ParamAttr(trainable=False))
    e = static.nn.embedding(ids, size=[20, 5], padding_idx=0)
    e2 = static.nn.embedding(ids, size=[20, 5], padding_idx=-1,
                             param_attr=paddle.ParamAttr(initializer=init.Normal(0.0, 1.0)))
    n = static.nn.layer_norm(h, scale=False)
    loss = paddle.mean(n) + paddle.mean(e) + paddle.mean(e2)

    def default():
        return pairs(static.append_backward(loss))

    return dict(description="every initializer class on fc weights/biases, embedding "
                            "padding_idx, trainable=False, layer_norm without scale",
                feeds={"x": None, "ids": ("int", 20)}, fetch=[loss],
                variants={"default": default})


@case
def tensor_ops(paddle, static, F):
    x = static.data('x', [None, 4, 6], 'float32')
    idx = static.data('idx', [3], 'int64')
    x.stop_gradient = False
    a, b = paddle.split(x, 2, axis=2)
    c1, c2, c3 = paddle.split(x, [1, 2, -1], axis=1)
    s = paddle.slice(x, axes=[1, 2], starts=[1, 0], ends=[3, 4])
    g = paddle.gather(a, idx, axis=2)
    st = paddle.stack([a, b], axis=1)
    t = paddle.transpose(st, [0, 2, 1, 3])
    r = paddle.reshape(t, [-1, 4, 6])
    cat = paddle.concat([r, x, c1 + c3, c2], axis=1)
    m = paddle.sum(cat, axis=1) + paddle.sum(g) + paddle.sum(paddle.mean(s, axis=[1, 2]))
    cast = paddle.cast(m, 'float64')
    sc = paddle.scale(cast, scale=3.0, bias=1.0)
    y = paddle.cast(sc, 'float32') - 1.0
    y = 2.0 - y
    y = y * y / (y + 3.0)
    y = (1.0 + y) * 0.5
    loss = paddle.mean(paddle.matmul(y, y, transpose_y=True))

    def default():
        return names(static.gradients([loss], [x]))

    return dict(description="split (num and sections), slice, gather, stack, transpose, "
                            "reshape, concat, sum, mean(axis), cast, scale, scalar operators, "
                            "matmul",
                feeds={"x": None, "idx": ("fixed", [0, 2, 1])}, fetch=[loss],
                variants={"default": default})


@case
def fc_variants(paddle, static, F):
    x1 = static.data('x1', [None, 3, 4], 'float32')
    x2 = static.data('x2', [None, 6], 'float32')
    h = static.nn.fc([x1, x2], 5, activation='sigmoid')
    g = static.nn.fc(x1, 4, num_flatten_dims=-1, weight_attr=[paddle.ParamAttr(name='w3')],
                     bias_attr=paddle.ParamAttr(learning_rate=0.5))
    k = static.nn.fc([x2, x2], 2, weight_attr=paddle.ParamAttr(name='tied'), bias_attr=False)
    loss = paddle.mean(h) + paddle.mean(g) + paddle.mean(k)

    def default():
        return pairs(static.append_backward(loss))

    return dict(description="fc over a list of inputs (mul per input, then sum), "
                            "num_flatten_dims=-1, a ParamAttr list, one ParamAttr for two inputs "
                            "(tied weights)",
                feeds={"x1": None, "x2": None}, fetch=[loss], variants={"default": default})


@case
def losses_and_pools(paddle, static, F):
    img = static.data('img', [None, 2, 9, 9], 'float32')
    label = static.data('label', [None], 'int64')
    label2 = static.data('label2', [None, 1], 'int64')
    c = static.nn.conv2d(img, 4, [3, 2], stride=2, padding=[1, 1, 0, 0], dilation=[1, 2],
                         act='relu')
    c = static.nn.conv2d(c, 4, 1, padding='VALID', groups=2,
                         param_attr=paddle.ParamAttr(name='grouped_w'))
    p1 = F.max_pool2d(c, kernel_size=2, stride=1, padding='SAME')
    p2 = F.max_pool2d(c, kernel_size=[3, 2], stride=[2, 1], ceil_mode=True)
    p3 = F.avg_pool2d(c, kernel_size=2, stride=1, padding=[1, 0], exclusive=False)
    feat = paddle.concat([paddle.reshape(p1, [-1, 80]), paddle.reshape(p2, [0, 24]),
                          paddle.reshape(p3, [-1, 72])], axis=1)
    logits = static.nn.fc(feat, 5)
    probs = F.softmax(logits, dtype='float64')
    l1 = F.cross_entropy(logits, label)
    l2 = F.cross_entropy(logits, label2, reduction='sum')
    l3 = F.cross_entropy(logits, label, reduction='none')
    l4, sm = F.softmax_with_cross_entropy(logits, label2, return_softmax=True)
    sq = paddle.squeeze(paddle.unsqueeze(l3, [0, 2]), axis=0)
    loss = l1 + l2 * 0.01 + paddle.mean(l4) + paddle.mean(sq) + paddle.mean(sm) \
        + paddle.cast(paddle.mean(probs), 'float32')

    def default():
        return pairs(static.append_backward(loss))

    return dict(description="conv2d variants (strides, 4-value padding, dilation, VALID, "
                            "groups), pools (SAME, ceil_mode, exclusive=False), softmax(dtype), "
                            "cross_entropy with 1-D and 2-D labels and every reduction, "
                            "softmax_with_cross_entropy(return_softmax), unsqueeze, squeeze",
                feeds={"img": None, "label": ("int", 5), "label2": ("int", 5)}, fetch=[loss],
                variants={"default": default}, clone_for_test=True)


# --------------------------------------------------------------------------
# generation (Paddle only)
# --------------------------------------------------------------------------
def _legacy_namespaces(paddle):
    """paddle / F namespaces where the functions that lost their legacy
    branch in 3.3.1 build what Paddle 2.6's legacy branch built."""
    import types

    import paddle.nn.functional as F_real
    from paddle.base.layer_helper import LayerHelper

    def unary(op_type):
        def f(x, name=None):
            helper = LayerHelper(op_type, name=name)
            out = helper.create_variable_for_type_inference(x.dtype)
            helper.append_op(type=op_type, inputs={"X": x}, outputs={"Out": out})
            return out
        f.__name__ = op_type
        return f

    def gelu(x, approximate=False, name=None):
        helper = LayerHelper("gelu", name=name)
        out = helper.create_variable_for_type_inference(x.dtype)
        helper.append_op(type="gelu", inputs={"X": x}, outputs={"Out": out},
                         attrs={"approximate": approximate})
        return out

    def matmul(x, y, transpose_x=False, transpose_y=False, name=None):
        helper = LayerHelper("matmul_v2", name=name)
        out = helper.create_variable_for_type_inference(dtype=x.dtype)
        helper.append_op(type="matmul_v2", inputs={"X": x, "Y": y}, outputs={"Out": out},
                         attrs={"trans_x": transpose_x, "trans_y": transpose_y})
        return out

    def sum_(x, axis=None, dtype=None, keepdim=False, name=None):
        from paddle.tensor.math import _get_reduce_axis_with_tensor
        reduce_all, axis = _get_reduce_axis_with_tensor(axis, x)
        attrs = {"dim": axis, "keep_dim": keepdim, "reduce_all": reduce_all}
        out_dtype = x.dtype
        if dtype is not None:
            from paddle.base.framework import convert_np_dtype_to_dtype_
            out_dtype = convert_np_dtype_to_dtype_(dtype)
            attrs.update({"in_dtype": x.dtype, "out_dtype": out_dtype})
        helper = LayerHelper("sum", name=name)
        out = helper.create_variable_for_type_inference(dtype=out_dtype)
        helper.append_op(type="reduce_sum", inputs={"X": x}, outputs={"Out": out}, attrs=attrs)
        return out

    overrides = {"sigmoid": unary("sigmoid"), "tanh": unary("tanh"), "gelu": gelu}
    F = types.SimpleNamespace(**{k: getattr(F_real, k) for k in dir(F_real)
                                 if not k.startswith("__")})
    F.__dict__.update(overrides)
    nn = types.SimpleNamespace(functional=F, initializer=paddle.nn.initializer)
    pd = types.SimpleNamespace(**{k: getattr(paddle, k) for k in dir(paddle)
                                  if not k.startswith("__")})
    pd.__dict__.update(overrides)
    pd.matmul, pd.sum, pd.nn = matmul, sum_, nn
    # F.cross_entropy(reduction='sum') calls paddle.sum itself.
    paddle.sum = sum_
    return pd, F


def _main():
    script = os.path.abspath(__file__)
    if (os.environ.get("PYTHONHASHSEED") != "0" or os.environ.get("FLAGS_enable_pir_api") != "0"
            or sys.argv[0] != script):
        env = dict(os.environ, PYTHONHASHSEED="0", FLAGS_enable_pir_api="0")
        os.execve(sys.executable, [sys.executable, script] + sys.argv[1:], env)
    import hashlib
    import logging
    import shutil
    import warnings

    warnings.filterwarnings("ignore")
    import numpy as np
    import paddle
    from google.protobuf import text_format
    from paddle import static
    from paddle.base.proto import framework_pb2
    from paddle.utils import unique_name

    paddle.enable_static()
    logging.disable(logging.WARNING)
    pd, F = _legacy_namespaces(paddle)
    place = paddle.CPUPlace()

    def write_pb(path, data):
        with open(path, "wb") as f:
            f.write(data)
        m = framework_pb2.ProgramDesc()
        m.ParseFromString(data)
        with open(path[:-3] + ".pbtxt", "w") as f:
            f.write(text_format.MessageToString(m))

    def build(builder):
        main, startup = static.Program(), static.Program()
        main.random_seed = SEED
        startup.random_seed = SEED
        with unique_name.guard(), static.program_guard(main, startup):
            info = builder(pd, static, F)
        return main, startup, info

    def make_feeds(prog, spec):
        rs = np.random.RandomState(0)
        feeds = {}
        for name, kind in spec.items():
            v = prog.global_block().var(name)
            shape = [BATCH if d < 0 else d for d in v.shape]
            if kind is None:
                feeds[name] = rs.uniform(-1.0, 1.0, size=shape).astype("float32")
            elif kind[0] == "int":
                feeds[name] = rs.randint(0, kind[1], size=shape).astype("int64")
            else:
                feeds[name] = np.array(kind[1], dtype="int64").reshape(shape)
        return feeds

    only = set(sys.argv[1:])
    os.makedirs(OUT_ROOT, exist_ok=True)
    for builder in CASES:
        name = builder.__name__
        if only and name not in only:
            continue
        out = os.path.join(OUT_ROOT, name)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        paddle.seed(SEED)
        main, startup, info = build(builder)
        write_pb(os.path.join(out, "main.pb"), main.desc.serialize_to_string())
        write_pb(os.path.join(out, "startup.pb"), startup.desc.serialize_to_string())
        if info.get("clone_for_test"):
            write_pb(os.path.join(out, "test.pb"),
                     main.clone(for_test=True).desc.serialize_to_string())
        created = [p.name for p in main.global_block().all_parameters()]
        trainable = [p.name for p in main.global_block().all_parameters() if p.trainable]

        scope = static.Scope()
        exe = static.Executor(place)
        with static.scope_guard(scope):
            exe.run(startup, scope=scope)
            persist = sorted(v.name for v in main.list_vars() if v.persistable)
            params = {n: np.array(scope.find_var(n).get_tensor()) for n in persist}
            feeds = make_feeds(main, info["feeds"])
            fetched = exe.run(main, feed=feeds, fetch_list=info["fetch"], scope=scope)
        np.savez_compressed(os.path.join(out, "params.npz"), **params)
        np.savez_compressed(os.path.join(out, "feeds.npz"), **feeds)

        variants = {}
        for vname in info["variants"]:
            m2, _, info2 = build(builder)
            returned = info2["variants"][vname]()
            write_pb(os.path.join(out, f"backward_{vname}.pb"), m2.desc.serialize_to_string())
            variants[vname] = {"returned": returned, "file": f"backward_{vname}.pb"}
            if vname == "default" and info.get("clone_for_test"):
                write_pb(os.path.join(out, "test_after_backward.pb"),
                         m2.clone(for_test=True).desc.serialize_to_string())

        meta = {
            "description": info["description"],
            "feeds": {k: v for k, v in info["feeds"].items()},
            "fetch": [v.name for v in info["fetch"]],
            "fetched": [np.asarray(a).tolist() for a in fetched],
            "parameters": created, "trainable": trainable,
            "variants": variants,
            "clone_for_test": bool(info.get("clone_for_test")),
            "docs": info.get("docs"),
        }
        with open(os.path.join(out, "case.json"), "w") as f:
            json.dump(meta, f, indent=1)
            f.write("\n")
        print(f"{name}: {len(main.global_block().ops)} ops, variants {sorted(variants)}")

    digest = hashlib.sha256()
    for root, _, files in sorted(os.walk(OUT_ROOT)):
        for fn in sorted(files):
            p = os.path.join(root, fn)
            digest.update(os.path.relpath(p, OUT_ROOT).encode())
            digest.update(open(p, "rb").read())
    print("sha256 of static/:", digest.hexdigest())


if __name__ == "__main__":
    _main()
