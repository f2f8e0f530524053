#!/usr/bin/env python
"""Record the gradient calls of more of Paddle's legacy backward tests
(issue #35 item 5): test_backward.py, test_cond.py, test_while_loop_op.py,
test_while_op.py, the recompute cases of test_optimizer_deprecated.py and the
sparse/dense bow net of test_regularizer_deprecated.py.

Same format and Recorder as testdata/gen_backward_replay.py (which it
imports); tests/backward/test_backward_replay.py replays both. Each scenario
also checks the test's own assertions on Paddle's values before it is
written, so a scenario that does not rebuild its test faithfully fails here.
Where a test calls an optimizer's `minimize`, the scenario records the
`append_backward` call `minimize` makes (optimizer ops are not pybackward's
business). Run it with the Paddle interpreter::

    /path/to/paddle/venv/bin/python testdata/gen_backward_replay_legacy.py [scenario ...]
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

sys.path.insert(0, os.path.dirname(_SCRIPT))

import numpy as np  # noqa: E402
import paddle  # noqa: E402

import gen_backward_replay as g  # noqa: E402

SCENARIOS = []


def _legacy_unary(op_type, pir_fn, dtype=None):
    """Paddle 3.3.1 routes some static functions to the PIR API even in legacy
    mode (`paddle.logical_not`, which `cond` calls); given a legacy Variable,
    append the legacy op instead."""
    def fn(x, *args, **kwargs):
        if not isinstance(x, paddle.base.framework.Variable):
            return pir_fn(x, *args, **kwargs)
        helper = paddle.base.layer_helper.LayerHelper(op_type)
        out = helper.create_variable_for_type_inference(dtype or x.dtype)
        helper.append_op(type=op_type, inputs={"X": [x]}, outputs={"Out": [out]})
        return out
    return fn


paddle.logical_not = _legacy_unary("logical_not", paddle.logical_not, dtype="bool")
paddle.tanh = _legacy_unary("tanh", paddle.tanh)


def scenario(fn):
    SCENARIOS.append(fn)
    return fn


# --------------------------------------------------------------------------
# test_backward.py
# --------------------------------------------------------------------------
@scenario
def backward_simple_net(rec):
    """TestSimpleNet: three embeddings sharing `w2v`, two fcs sharing `fc_w`
    (one unused by the loss); append_backward, then minimize's own call."""
    shape = [16, 50]
    xs = [paddle.static.data(name=n, shape=shape, dtype="int64") for n in ("x_no_grad", "x2_no_grad", "x3_no_grad")]
    label = paddle.static.data(name="label_no_grad", shape=[shape[0], 1], dtype="float32")
    embs = [paddle.static.nn.embedding(x, size=[100, 64], param_attr=paddle.ParamAttr(name="w2v")) for x in xs]
    x_merge = paddle.add(embs[0], embs[1], name="x_add_x2")
    x2_merge = paddle.add(embs[1], embs[2], name="x2_add_x3")
    predict = paddle.static.nn.fc(x=x_merge, size=1, activation="softmax",
                                  weight_attr=paddle.ParamAttr(name="fc_w"), name="fc_predict")
    paddle.static.nn.fc(x=x2_merge, size=1, activation="sigmoid", weight_attr=paddle.ParamAttr(name="fc_w"),
                        name="fc_no_use")
    cost = paddle.nn.functional.square_error_cost(input=predict, label=label)
    loss = paddle.mean(cost, name="mean_loss")
    pg = rec.append_backward(loss)
    assert {p.name for p, _ in pg} == {"w2v", "fc_predict.b_0", "fc_w"}
    pg2 = rec.append_backward(loss)  # optimizer.minimize(loss)
    rng = np.random.RandomState(7)
    feed = {n: rng.randint(0, 90, shape).astype("int64") for n in ("x_no_grad", "x2_no_grad", "x3_no_grad")}
    feed["label_no_grad"] = rng.random_sample([shape[0], 1]).astype("float32")
    return {"test": "test_backward.py::TestSimpleNet::test_backward", "feed": feed,
            "fetch": [loss] + [gv for _, gv in pg2 if gv.name != "w2v@GRAD"],
            "expect_params": ["fc_predict.b_0", "fc_w", "w2v"]}


def _reduce_sum(x):
    """Tensor.sum() as a legacy `reduce_sum` op (Paddle 3.3.1's sum takes the
    PIR path even in legacy mode)."""
    helper = paddle.base.layer_helper.LayerHelper("reduce_sum")
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type="reduce_sum", inputs={"X": [x]}, outputs={"Out": [out]},
                     attrs={"dim": [], "keep_dim": False, "reduce_all": True})
    return out


@scenario
def backward_gradients_no_inputs(rec):
    """TestBackwardUninitializedVariable: gradients(loss, []) appends the
    backward section (aggregating into gt's slices) and returns []."""
    gt = paddle.static.data(name="gt", shape=[4], dtype="float32")
    x = paddle.static.data(name="x", shape=[2], dtype="float32")
    gt.stop_gradient = True
    x.stop_gradient = False
    gt = gt.reshape([4, 1]).reshape([4])
    loss = paddle.nn.functional.binary_cross_entropy(x, gt[:2]) + _reduce_sum(gt[2:4] * x)
    out = rec.gradients(loss, [])
    assert out == []
    feed = {"gt": np.array([1.0, 1.0, 0.0, 0.0], np.float32), "x": np.array([0.5, 0.5], np.float32)}
    return {"test": "test_backward.py::TestBackwardUninitializedVariable::test", "feed": feed,
            "fetch": [loss, "x@GRAD"], "expect_close": {loss.name: [[float(np.log(2.0))], 1e-6, 1e-6]}}


# --------------------------------------------------------------------------
# test_cond.py
# --------------------------------------------------------------------------
@scenario
def cond_0d_tensor_backward(rec):
    a = paddle.full(shape=[], dtype="float32", fill_value=-2.0)
    a.stop_gradient = False
    out = paddle.static.nn.cond(a >= 0, lambda: a, lambda: -a)
    rec.append_backward(out)
    return {"test": "test_cond.py::TestCondInputOutput::test_0d_tensor_backward",
            "fetch": [out, a.name + "@GRAD"], "expect": {out.name: 2.0, a.name + "@GRAD": -1.0}}


@scenario
def cond_op_in_condition_simple(rec):
    a = paddle.tensor.fill_constant(shape=[1], dtype="float32", value=1.23)
    a.stop_gradient = False
    b = paddle.tensor.fill_constant(shape=[1], dtype="float32", value=1.25)
    b.stop_gradient = False
    out = paddle.static.nn.cond(a - b < -1.0, lambda: a, lambda: b)
    rec.append_backward(out)
    return {"test": "test_cond.py::TestCondInputOutput::test_extremely_simple_net_with_op_in_condition",
            "fetch": [out, b, a.name + "@GRAD", b.name + "@GRAD"],
            "expect": {a.name + "@GRAD": [0.0], b.name + "@GRAD": [1.0]}}


def _cond_inside_cond_expect(i):
    a = 2.0 * i
    if i < 5:
        return (a + a if i >= 3 else 0.0), (2.0 if i >= 3 else 0.0)
    return (a * a if i < 8 else 1.0), (2.0 * a if i < 8 else 0.0)


@scenario
def cond_inside_cond(rec):
    i = paddle.static.data(name="i", shape=[1], dtype="float32")
    i.stop_gradient = False
    a = 2.0 * i
    out = paddle.static.nn.cond(
        i < 5.0,
        lambda: paddle.static.nn.cond(i >= 3.0, lambda: paddle.add(a, a), lambda: paddle.subtract(a, a)),
        lambda: paddle.static.nn.cond(i < 8.0, lambda: a * a, lambda: a / a))
    mean = paddle.mean(out)
    rec.append_backward(mean)
    runs = []
    for feed_i in range(10):
        want_out, want_grad = _cond_inside_cond_expect(feed_i)
        runs.append({"feed": {"i": np.full(1, feed_i, np.float32)},
                     "expect": {out.name: [want_out], a.name + "@GRAD": [want_grad]}})
    return {"test": "test_cond.py::TestCondNestedControlFlow::test_cond_inside_cond",
            "fetch": [out, a.name + "@GRAD"], **runs[0], "runs": runs[1:]}


@scenario
def cond_inside_cond_0d(rec):
    i = paddle.full(fill_value=3.0, shape=[], dtype="float32")
    i.stop_gradient = False
    a = 2.0 * i
    out = paddle.static.nn.cond(
        i < 5.0,
        lambda: paddle.static.nn.cond(i >= 3.0, lambda: a + 1, lambda: 1 - a),
        lambda: paddle.static.nn.cond(i < 8.0, lambda: a * 2, lambda: a / 2))
    paddle.mean(out)
    rec.append_backward(out)
    return {"test": "test_cond.py::TestCondNestedControlFlow::test_cond_inside_cond_0d_tensor",
            "fetch": [out, i.name + "@GRAD"], "expect": {out.name: 7.0, i.name + "@GRAD": 2.0}}


@scenario
def cond_op_in_condition_nested(rec):
    a = paddle.tensor.fill_constant(shape=[1], dtype="float32", value=1.23)
    a.stop_gradient = False
    b = paddle.tensor.fill_constant(shape=[1], dtype="float32", value=1.24)
    b.stop_gradient = False
    out = paddle.static.nn.cond(
        a < b,
        lambda: paddle.static.nn.cond(a - b < -1.0, lambda: paddle.add(a, b), lambda: a * b),
        lambda: paddle.static.nn.cond(a == b, lambda: paddle.subtract(a, b), lambda: a ** b))
    rec.append_backward(out)
    # assertAlmostEqual: 7 places
    return {"test": "test_cond.py::TestCondNestedControlFlow::test_cond_op_in_condition",
            "fetch": [out, a.name + "@GRAD", b.name + "@GRAD"],
            "expect_close": {out.name: [[1.5252], 0, 5e-8], a.name + "@GRAD": [[1.24], 0, 5e-8],
                             b.name + "@GRAD": [[1.23], 0, 5e-8]}}


def _simple_fc_net(img, label):
    hidden = img
    for _ in range(2):
        hidden = paddle.static.nn.fc(hidden, size=100, activation="relu", bias_attr=paddle.ParamAttr(
            initializer=paddle.nn.initializer.Constant(value=1.0)))
    prediction = paddle.static.nn.fc(hidden, size=10, activation="softmax")
    loss = paddle.nn.functional.cross_entropy(input=prediction, label=label, reduction="none", use_softmax=False)
    return paddle.mean(loss)


def _batchnorm_fc(img, label):
    hidden = img
    for _ in range(2):
        hidden = paddle.static.nn.fc(hidden, size=200, activation="relu", bias_attr=paddle.ParamAttr(
            initializer=paddle.nn.initializer.Constant(value=1.0)))
        hidden = paddle.static.nn.batch_norm(input=hidden)
    prediction = paddle.static.nn.fc(hidden, size=10, activation="softmax")
    loss = paddle.nn.functional.cross_entropy(input=prediction, label=label, reduction="none", use_softmax=False)
    return paddle.mean(loss)


def _cond_backward(rec, cond_func, test, feeds):
    """TestCondBackward.backward_value_helper: img@GRAD against one-sided
    finite differences (delta 0.005, rtol = atol = 0.05) for each feed i."""
    paddle.static.default_main_program().random_seed = 123
    img = paddle.static.data(name="image", shape=[-1, 9], dtype="float32")
    img.stop_gradient = False
    label = paddle.static.data(name="label", shape=[-1, 1], dtype="int64")
    i = paddle.static.data(name="i", shape=[1], dtype="int32")
    loss = cond_func(i, img, label)
    rec.append_backward(loss)
    rng = np.random.RandomState(123)
    runs = [{"feed": {"i": np.full(1, k, np.int32), "image": rng.random_sample([1, 9]).astype(np.float32),
                      "label": rng.randint(0, 10, [1, 1]).astype(np.int64)}} for k in feeds]
    return {"test": test, "fetch": ["image@GRAD", loss], **runs[0], "runs": runs[1:],
            "expect_fd": {"wrt": "image", "loss": loss.name, "grad": "image@GRAD", "delta": 0.005,
                          "rtol": 0.05, "atol": 0.05}}


@scenario
def cond_backward(rec):
    def cond_func(i, img, label):
        return paddle.static.nn.cond((i % 2) == 0, lambda: _simple_fc_net(img, label),
                                     lambda: _batchnorm_fc(img, label))
    return _cond_backward(rec, cond_func, "test_cond.py::TestCondBackward::test_cond_backward", [0, 1])


def _half_branch(i, img, label):
    return paddle.static.nn.cond((i % 2) == 0, lambda: _simple_fc_net(img, label), lambda: _batchnorm_fc(img, label))


@scenario
def cond_half_nested_at_true(rec):
    def cond_func(i, img, label):
        return paddle.static.nn.cond(i < 5, lambda: _half_branch(i, img, label), lambda: paddle.mean(img))
    return _cond_backward(rec, cond_func, "test_cond.py::TestCondBackward::test_half_nested_cond_backward",
                          [0, 1, 6])


@scenario
def cond_half_nested_at_false(rec):
    def cond_func(i, img, label):
        return paddle.static.nn.cond(i < 5, lambda: paddle.mean(img), lambda: _half_branch(i, img, label))
    return _cond_backward(rec, cond_func, "test_cond.py::TestCondBackward::test_half_nested_cond_backward",
                          [1, 6, 7])


@scenario
def cond_nested_backward(rec):
    def branch(i, img, label, mod_two):
        pred = (i % 2) == 0 if mod_two else (i % 2) != 0
        return paddle.static.nn.cond(pred, lambda: _simple_fc_net(img, label), lambda: _batchnorm_fc(img, label))

    def cond_func(i, img, label):
        return paddle.static.nn.cond(i < 5, lambda: branch(i, img, label, True),
                                     lambda: branch(i, img, label, False))
    return _cond_backward(rec, cond_func, "test_cond.py::TestCondBackward::test_nested_cond_backward",
                          [0, 1, 6, 7])


# --------------------------------------------------------------------------
# test_while_loop_op.py
# --------------------------------------------------------------------------
@scenario
def while_loop_backward2(rec):
    i = paddle.static.data(name="i", shape=[1], dtype="float32")
    i.stop_gradient = False
    i.persistable = True
    x = paddle.static.data(name="x", shape=[1], dtype="float32")
    x.stop_gradient = False
    x.persistable = True
    out = paddle.static.nn.while_loop(lambda i, x: i < 3, lambda i, x: [i + 1, x * i], [i, x])
    mean = paddle.mean(out[1])
    rec.append_backward(mean)
    return {"test": "test_while_loop_op.py::TestApiWhileLoop_Backward::test_while_loop_backward2",
            "feed": {"i": np.ones(1, np.float32), "x": np.ones(1, np.float32)},
            "fetch": [out[1], "i@GRAD", "x@GRAD"],
            "expect_close": {out[1].name: [[2.0], 1e-5, 0], "i@GRAD": [[3.0], 1e-5, 0], "x@GRAD": [[2.0], 1e-5, 0]}}


@scenario
def while_loop_nested_lodtensor_array(rec):
    """TestApiWhileLoop_NestedWithBackwardAndLoDTensorArray."""
    def external_body(i, j, x, mem_array):
        def internal_body(j, x, mem_array):
            inner_data = paddle.tensor.array_read(array=data_array, i=j)
            inner_prev = paddle.tensor.array_read(array=mem_array, i=j)
            inner_sum_1 = paddle.add(x=x, y=paddle.add(x=inner_data, y=inner_prev))
            j = paddle.increment(x=j)
            paddle.tensor.array_write(inner_sum_1, i=j, array=mem_array)
            return [j, x, mem_array]
        outer_data = paddle.tensor.array_read(array=data_array, i=i)
        outer_prev = paddle.tensor.array_read(array=mem_array, i=i)
        outer_sum_1 = paddle.add(x=x, y=paddle.add(x=outer_data, y=outer_prev))
        i = paddle.increment(x=i)
        paddle.tensor.array_write(outer_sum_1, i=i, array=mem_array)
        j, x, mem_array = paddle.static.nn.while_loop(lambda j, x, m: paddle.less_than(j, array_len2),
                                                      internal_body, [j, x, mem_array])
        return [i, j, x, mem_array]

    d0 = paddle.static.data(name="d0", shape=[10], dtype="float32")
    d1 = paddle.static.data(name="d1", shape=[10], dtype="float32")
    d2 = paddle.static.data(name="d2", shape=[10], dtype="float32")
    x = paddle.static.data(name="x", shape=[10], dtype="float32")
    d0.persistable = True
    d0.stop_gradient = False
    d1.persistable = True
    d2.persistable = True
    x.stop_gradient = False
    x.persistable = True
    i = paddle.zeros(shape=[1], dtype="int64")
    i.stop_gradient = True
    i.persistable = True
    init = paddle.zeros(shape=[10], dtype="float32")
    init.stop_gradient = False
    mem_array = paddle.tensor.array_write(x=init, i=i)
    data_array = paddle.tensor.array_write(x=d0, i=i)
    mem_array.stop_gradient = False
    mem_array.persistable = True
    i = paddle.increment(i)
    paddle.tensor.array_write(d1, i, array=data_array)
    i = paddle.increment(i)
    paddle.tensor.array_write(d2, i, array=data_array)
    i = paddle.zeros(shape=[1], dtype="int64")
    i.stop_gradient = True
    array_len = paddle.tensor.fill_constant(shape=[1], dtype="int64", value=1)
    j = paddle.tensor.fill_constant(shape=[1], dtype="int64", value=1)
    j.stop_gradient = True
    array_len2 = paddle.tensor.fill_constant(shape=[1], dtype="int64", value=3)
    out = paddle.static.nn.while_loop(lambda i, j, x, m: paddle.less_than(i, array_len), external_body,
                                      [i, j, x, mem_array])
    sum_result = paddle.tensor.array_read(array=out[3], i=j)
    mean = paddle.mean(sum_result)
    rec.append_backward(mean)
    rng = np.random.RandomState(3)
    d = [rng.random_sample([10]).astype("float32") for _ in range(3)]
    feed_x = np.ones(10, np.float32)
    return {"test": "test_while_loop_op.py::TestApiWhileLoop_NestedWithBackwardAndLoDTensorArray::"
                    "test_nested_net_with_backward_and_lodtensor",
            "feed": {"d0": d[0], "d1": d[1], "d2": d[2], "x": feed_x}, "fetch": [sum_result, "x@GRAD"],
            "expect_close": {sum_result.name: [(d[0] + d[1] + d[2] + 3 * feed_x).tolist(), 1e-5, 0],
                             "x@GRAD": [[0.3] * 10, 1e-5, 0]}}


# --------------------------------------------------------------------------
# test_while_op.py
# --------------------------------------------------------------------------
@scenario
def while_op_simple_net(rec):
    """TestWhileOp.test_simple_net: While inside While over tensor arrays."""
    d0 = paddle.static.data("d0", shape=[10], dtype="float32")
    d1 = paddle.static.data("d1", shape=[10], dtype="float32")
    d2 = paddle.static.data("d2", shape=[10], dtype="float32")
    i = paddle.zeros(shape=[1], dtype="int64")
    i.stop_gradient = True
    init = paddle.zeros(shape=[10], dtype="float32")
    mem_array = paddle.tensor.array_write(x=init, i=i)
    data_array = paddle.tensor.array_write(x=d0, i=i)
    i = paddle.increment(i)
    paddle.tensor.array_write(d1, i, array=data_array)
    i = paddle.increment(i)
    paddle.tensor.array_write(d2, i, array=data_array)
    i = paddle.zeros(shape=[1], dtype="int64")
    i.stop_gradient = True
    array_len = paddle.tensor.fill_constant(shape=[1], dtype="int64", value=1)
    array_len.stop_gradient = True
    cond = paddle.less_than(x=i, y=array_len)
    j = paddle.tensor.fill_constant(shape=[1], dtype="int64", value=1)
    j.stop_gradient = True
    array_len2 = paddle.tensor.fill_constant(shape=[1], dtype="int64", value=3)
    array_len2.stop_gradient = True
    cond2 = paddle.less_than(x=j, y=array_len2)
    while_op = paddle.static.nn.control_flow.While(cond=cond)
    while_op2 = paddle.static.nn.control_flow.While(cond=cond2)
    with while_op.block():
        d = paddle.tensor.array_read(array=data_array, i=i)
        prev = paddle.tensor.array_read(array=mem_array, i=i)
        result = paddle.add_n([d, prev])
        i = paddle.increment(x=i)
        paddle.tensor.array_write(result, i=i, array=mem_array)
        with while_op2.block():
            d2 = paddle.tensor.array_read(array=data_array, i=j)
            prev2 = paddle.tensor.array_read(array=mem_array, i=j)
            result2 = paddle.add_n([d2, prev2])
            j = paddle.increment(x=j)
            paddle.tensor.array_write(result2, i=j, array=mem_array)
            paddle.assign(paddle.less_than(x=j, y=array_len2), cond2)
        paddle.assign(paddle.less_than(x=i, y=array_len), cond)
    sum_result = paddle.tensor.array_read(array=mem_array, i=j)
    loss = paddle.mean(sum_result)
    rec.append_backward(loss)
    rng = np.random.RandomState(5)
    d = [rng.random_sample([10]).astype("float32") for _ in range(3)]
    return {"test": "test_while_op.py::TestWhileOp::test_simple_net",
            "feed": {"d0": d[0], "d1": d[1], "d2": d[2]}, "fetch": [sum_result],
            # assertAlmostEqual(sum(d), sum(out), delta=0.01): the fetched values sum to sum(d)
            "expect_sum": {sum_result.name: [float(np.sum(d)), 0.01]}}


# --------------------------------------------------------------------------
# test_optimizer_deprecated.py: TestRecomputeOptimizer
# --------------------------------------------------------------------------
def _recompute_net(with_dropout=False, with_seed=False):
    block = paddle.static.default_main_program().global_block()
    mul_x = block.create_parameter(dtype="float32", shape=[5, 10], name="mul.x")
    mul_y = block.create_var(dtype="float32", shape=[10, 8], name="mul.y")
    mul_out = block.create_var(dtype="float32", shape=[5, 8], name="mul.out")
    if with_dropout:
        mul_out_drop = block.create_var(dtype="float32", shape=[5, 8], name="mul.out.dropout")
        mul_out_mask = block.create_var(dtype="uint8", shape=[5, 8], name="mul.out.mask")
        if with_seed:
            seed_out = block.create_var(dtype="int32", shape=[1], name="seed.out")
    b1 = block.create_parameter(dtype="float32", shape=[5, 8], name="b1")
    b1_out = block.create_var(dtype="float32", shape=[5, 8], name="b1_out")
    b2 = block.create_parameter(dtype="float32", shape=[5, 8], name="b2")
    b2_out = block.create_var(dtype="float32", shape=[5, 8], name="b2_out")
    mean_out = block.create_var(dtype="float32", shape=[1], name="mean.out")
    block.append_op(type="mul", inputs={"X": mul_x, "Y": mul_y}, outputs={"Out": mul_out},
                    attrs={"x_num_col_dims": 1})
    add_in = mul_out
    if with_dropout:
        inputs = {"X": [mul_out]}
        if with_seed:
            block.append_op(type="seed", outputs={"Out": seed_out},
                            attrs={"deterministic": True, "rng_name": "rng0", "force_cpu": True})
            inputs = {"X": [mul_out], "Seed": [seed_out]}
        block.append_op(type="dropout", inputs=inputs, outputs={"Out": [mul_out_drop], "Mask": [mul_out_mask]},
                        attrs={"dropout_prob": 0.5})
        add_in = mul_out_drop
    block.append_op(type="elementwise_add", inputs={"X": add_in, "Y": b1}, outputs={"Out": b1_out})
    block.append_op(type="elementwise_add", inputs={"X": b1_out, "Y": b2}, outputs={"Out": b2_out})
    block.append_op(type="mean", inputs={"X": b2_out}, outputs={"Out": mean_out})
    return mul_x, mul_out, b1_out, b2_out, mean_out


_FWD = ["mul", "elementwise_add", "elementwise_add", "mean", "fill_constant", "mean_grad"]


def _recompute(rec, test, pick, ops, **net):
    mul_x, mul_out, b1_out, b2_out, mean_out = _recompute_net(**net)
    names = dict(mul_x=mul_x, mul_out=mul_out, b1_out=b1_out, b2_out=b2_out)
    ckpt = [names[n] for n in pick]  # (test_str_checkpoints: RecomputeOptimizer maps names to these vars)
    rec.append_backward(mean_out, checkpoints=ckpt)
    got = [op.type for op in paddle.static.default_main_program().global_block().ops]
    assert got == ops, (test, got)
    return {"test": f"test_optimizer_deprecated.py::TestRecomputeOptimizer::{test}", "expect_ops": ops}


@scenario
def recompute_no_checkpoint(rec):
    return _recompute(rec, "test_no_checkpoint", [],
                      _FWD + ["elementwise_add_grad", "elementwise_add_grad", "mul_grad"])


@scenario
def recompute_one_checkpoint(rec):
    return _recompute(rec, "test_one_checkpoint", ["b1_out"],
                      _FWD + ["elementwise_add_grad", "mul", "elementwise_add_grad", "mul_grad"])


@scenario
def recompute_multi_checkpoint(rec):
    return _recompute(rec, "test_multi_checkpoint", ["mul_out", "b2_out"],
                      _FWD + ["elementwise_add", "elementwise_add_grad", "elementwise_add_grad", "mul_grad"])


@scenario
def recompute_adjacent_checkpoint(rec):
    return _recompute(rec, "test_adjacent_checkpoint", ["mul_out", "b1_out"],
                      _FWD + ["elementwise_add_grad", "elementwise_add_grad", "mul_grad"])


@scenario
def recompute_out_of_order_checkpoint(rec):
    return _recompute(rec, "test_out_of_order_checkpoint", ["b2_out", "mul_out"],
                      _FWD + ["elementwise_add", "elementwise_add_grad", "elementwise_add_grad", "mul_grad"])


@scenario
def recompute_input_as_checkpoints(rec):
    return _recompute(rec, "test_input_as_checkpoints", ["mul_x", "b2_out"],
                      _FWD + ["mul", "elementwise_add", "elementwise_add_grad", "elementwise_add_grad", "mul_grad"])


_DROP = ["mul", "seed", "dropout", "elementwise_add", "elementwise_add", "mean", "fill_constant", "mean_grad",
         "elementwise_add_grad", "mul", "dropout", "elementwise_add_grad", "dropout_grad", "mul_grad"]


@scenario
def recompute_dropout(rec):
    return _recompute(rec, "test_dropout", ["b1_out"], _DROP, with_dropout=True)


@scenario
def recompute_dropout_with_determinate_seed(rec):
    return _recompute(rec, "test_dropout_with_determinate_seed", ["b1_out"], _DROP, with_dropout=True,
                      with_seed=True)


# --------------------------------------------------------------------------
# test_regularizer_deprecated.py: bow_net, sparse and dense embedding
# --------------------------------------------------------------------------
def _bow(rec, is_sparse):
    paddle.framework.random._manual_program_seed(1)
    data = paddle.static.data(name="words", shape=[-1, 1], dtype="int64", lod_level=1)
    label = paddle.static.data(name="label", shape=[-1, 1], dtype="int64")
    emb = paddle.static.nn.embedding(input=data, is_sparse=is_sparse, size=[1500, 8])
    bow = paddle.static.nn.sequence_lod.sequence_pool(input=emb, pool_type="sum")
    fc_1 = paddle.static.nn.fc(x=paddle.tanh(bow), size=8, activation="tanh")
    fc_2 = paddle.static.nn.fc(x=fc_1, size=6, activation="tanh")
    prediction = paddle.static.nn.fc(x=[fc_2], size=2, activation="softmax")
    cost = paddle.nn.functional.cross_entropy(input=prediction, label=label, reduction="none", use_softmax=False)
    avg_cost = paddle.mean(x=cost)
    pg = rec.append_backward(avg_cost)  # optimizer.minimize(avg_cost)
    rng = np.random.RandomState(11)
    words = rng.choice(1000, 10, replace=False).astype(np.int64).reshape(10, 1)
    return {"test": "test_regularizer_deprecated.py::TestRegularizer::test_l2",
            "feed": {"words": (words, [[0, 10]]), "label": np.zeros([1, 1], np.int64)},
            "fetch": [avg_cost] + [gv for p, gv in pg if not p.name.startswith("embedding")]}


@scenario
def regularizer_bow_sparse(rec):
    return _bow(rec, True)


@scenario
def regularizer_bow_dense(rec):
    return _bow(rec, False)


if __name__ == "__main__":
    g.main(SCENARIOS)
