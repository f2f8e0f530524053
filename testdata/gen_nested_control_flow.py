#!/usr/bin/env python
"""Generate nested control-flow golden programs with a live PaddlePaddle 3.3.1
(issue #35 items 1 and 2).

Same layout, files and ``case.json`` format as ``generate.py`` (whose
machinery - ``generate_case``, the op helpers, seeds, feeds - this script
loads and reuses, as gen_control_flow.py does), written to
``testdata/nested_control_flow/<case>/`` (tests/backward/test_nested_control_flow.py
reads them):

* ``while_nested``: ``h = x; 3 times { 4 times { h = tanh(h@w) } }``: a
  ``while`` inside a ``while`` (each inner ``while_grad`` must read the
  values of its own outer step);
* ``while_nested3``: three levels, a parameter read at each level and an
  if/else in the innermost;
* ``while_nested_read_after``: the outer body reads ``h`` after the nested
  loop reassigns it;
* ``while_nested_through``: the loss reads only an accumulator, so ``h``'s
  gradient reaches the nested loop only through the next outer step;
* ``cond_in_nested_while``: an if/else inside the inner loop of two;
* ``cond_params_in_while``: ``3 times { if i is even: h = tanh(h@W) else:
  h = tanh(h@V) }``, branches taken true, false, true, with the parameters
  read inside the branches.

Run it with the Paddle interpreter (it re-executes itself with
``PYTHONHASHSEED=0``, ``FLAGS_enable_pir_api=0`` and its absolute path, like
generate.py)::

    /path/to/paddle/venv/bin/python testdata/gen_nested_control_flow.py [case ...]

``PYBACKWARD_GOLDEN_OUT=DIR`` writes the cases under DIR instead (for probes).
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

import importlib.util  # noqa: E402

_GEN = os.path.join(os.path.dirname(_SCRIPT), "generate.py")


def _load_generate():
    """Import generate.py as a module without letting it re-execute itself."""
    argv0 = sys.argv[0]
    sys.argv[0] = _GEN
    try:
        spec = importlib.util.spec_from_file_location("pybackward_generate", _GEN)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.argv[0] = argv0
    return mod


gen = _load_generate()
gen.OUT_ROOT = os.path.abspath(os.environ.get("PYBACKWARD_GOLDEN_OUT")
                               or os.path.join(os.path.dirname(_SCRIPT), "nested_control_flow"))
os.makedirs(gen.OUT_ROOT, exist_ok=True)

import paddle  # noqa: E402
from paddle.static.nn.control_flow import ConditionalBlock, While  # noqa: E402

op, unary, matmul_v2, param, data, ab = gen.op, gen.unary, gen.matmul_v2, gen.param, gen.data, gen.ab

CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def less_than(x, y, out=None):
    outs = {"Out": [out]} if out is not None else {"Out": 1}
    return op("less_than", {"X": [x], "Y": [y]}, outs,
              {"axis": -1, "force_cpu": False}, dtype="bool")["Out"][0]


def increment(i):
    op("increment", {"X": [i]}, {"Out": [i]}, {"step": 1.0}, dtype="int64")


def counter(value):
    return paddle.full(shape=[1], fill_value=value, dtype="int64")


def scale(x, s=1.0):
    return op("scale", {"X": [x]}, {"Out": 1},
              {"scale": s, "bias": 0.0, "bias_after_scale": True})["Out"][0]


def assign(x, out):
    op("assign", {"X": [x]}, {"Out": [out]})


def loop(n, body):
    """``for _ in range(n): body()`` as Paddle's While: a fresh counter in the
    current block, the body, increment, and the condition rewritten."""
    i = counter(0)
    limit = counter(n)
    cond = less_than(i, limit)
    w = While(cond)
    with w.block():
        body(i)
        increment(i)
        less_than(i, limit, out=cond)


def _if_else(pred, then, other):
    """Two ConditionalBlocks on pred / not pred (static.nn.cond's legacy shape
    without the select_input: each branch assigns to a parent var)."""
    neg = op("logical_not", {"X": [pred]}, {"Out": 1}, dtype="bool")["Out"][0]
    a = ConditionalBlock([pred], is_scalar_condition=True)
    with a.block():
        then()
    b = ConditionalBlock([neg], is_scalar_condition=True)
    with b.block():
        other()


@case
def while_nested():
    x = data("x", [-1, 8], stop_gradient=False)
    w = param("w", [8, 8])
    h = scale(x)

    def inner(_):
        assign(unary("tanh", matmul_v2(h, w)), h)

    loop(3, lambda _: loop(4, inner))
    loss = paddle.mean(h)
    return dict(
        loss=loss.name,
        feeds={"x": None},
        description="h = scale(x); 3 times { 4 times { h = tanh(h@w) } } - a While "
                    "inside a While, the inner counter made afresh in each outer step; "
                    "loss = mean(h).",
        variants={"default": [ab(loss.name)],
                  "gradients_x": [gen.call("gradients", [loss.name], ["x"])]},
    )


@case
def while_nested3():
    x = data("x", [-1, 8], stop_gradient=False)
    w = param("w", [8, 8])
    u = param("u", [8, 8])
    v = param("v", [8, 8])
    h = scale(x)
    s1 = scale(x, 0.0)
    s2 = scale(x, 0.0)
    zero = paddle.full(shape=[], fill_value=0.0, dtype="float32")

    def level3(_):
        t = matmul_v2(h, w)
        pos = less_than(zero, paddle.mean(t))
        _if_else(pos, lambda: assign(unary("tanh", t), h), lambda: assign(unary("sigmoid", t), h))

    def level2(_):
        assign(gen.elementwise("elementwise_add", s2, unary("sigmoid", matmul_v2(h, u))), s2)
        loop(2, level3)

    def level1(_):
        assign(gen.elementwise("elementwise_add", s1, unary("tanh", matmul_v2(h, v))), s1)
        loop(2, level2)

    loop(2, level1)
    loss = gen.elementwise("elementwise_add", gen.elementwise("elementwise_add", paddle.mean(h),
                                                              paddle.mean(s1)), paddle.mean(s2))
    return dict(
        loss=loss.name,
        feeds={"x": None},
        description="h = x; s1 = s2 = 0; 2 times { s1 += tanh(h@v); 2 times { s2 += "
                    "sigmoid(h@u); 2 times { t = h@w; if mean(t) > 0: h = tanh(t) else: "
                    "h = sigmoid(t) } } } - three nested Whiles, a parameter read at each "
                    "level, an if/else in the innermost; loss = mean(h) + mean(s1) + mean(s2).",
        variants={"default": [ab(loss.name)]},
    )


@case
def while_nested_read_after():
    x = data("x", [-1, 8], stop_gradient=False)
    w = param("w", [8, 8])
    u = param("u", [8, 8])
    h = scale(x)
    y = scale(x, 0.0)

    def outer(_):
        loop(2, lambda _: assign(unary("tanh", matmul_v2(h, w)), h))
        assign(gen.elementwise("elementwise_add", y, unary("tanh", matmul_v2(h, u))), y)

    loop(2, outer)
    loss = gen.elementwise("elementwise_add", paddle.mean(h), paddle.mean(y))
    return dict(
        loss=loss.name,
        feeds={"x": None},
        description="h = x; y = 0; 2 times { 2 times { h = tanh(h@w) }; y += tanh(h@u) } - "
                    "the outer body reads h after the nested While reassigns it; "
                    "loss = mean(h) + mean(y).",
        variants={"default": [ab(loss.name)]},
    )


@case
def while_nested_through():
    x = data("x", [-1, 8], stop_gradient=False)
    w = param("w", [8, 8])
    v = param("v", [8, 8])
    h = scale(x)
    s = scale(x, 0.0)

    def outer(_):
        assign(gen.elementwise("elementwise_add", s, unary("tanh", matmul_v2(h, v))), s)
        loop(2, lambda _: assign(unary("tanh", matmul_v2(h, w)), h))

    loop(2, outer)
    loss = paddle.mean(s)
    return dict(
        loss=loss.name,
        feeds={"x": None},
        description="h = x; s = 0; 2 times { s += tanh(h@v); 2 times { h = tanh(h@w) } } - "
                    "the loss reads only s, so h's gradient reaches the nested While only "
                    "through the next outer step; loss = mean(s).",
        variants={"default": [ab(loss.name)]},
    )


@case
def cond_in_nested_while():
    x = data("x", [-1, 8], stop_gradient=False)
    w = param("w", [8, 8])
    v = param("v", [8, 8])
    h = scale(x)
    zero = paddle.full(shape=[], fill_value=0.0, dtype="float32")

    def inner(_):
        t = matmul_v2(h, w)
        pos = less_than(zero, paddle.mean(t))
        _if_else(pos, lambda: assign(unary("tanh", t), h),
                 lambda: assign(unary("sigmoid", matmul_v2(t, v)), h))

    loop(2, lambda _: loop(3, inner))
    loss = paddle.mean(h)
    return dict(
        loss=loss.name,
        feeds={"x": None},
        description="h = scale(x); 2 times { 3 times { t = h@w; if mean(t) > 0: "
                    "h = tanh(t) else: h = sigmoid(t@v) } } - an if/else inside the inner "
                    "of two Whiles; loss = mean(h).",
        variants={"default": [ab(loss.name)]},
    )


@case
def cond_params_in_while():
    x = data("x", [-1, 8], stop_gradient=False)
    w = param("W", [8, 8])
    v = param("V", [8, 8])
    h = scale(x)
    two = counter(2)
    nought = counter(0)

    def body(i):
        even = op("equal", {"X": [op("elementwise_mod", {"X": [i], "Y": [two]}, {"Out": 1},
                                     {"axis": -1}, dtype="int64")["Out"][0]], "Y": [nought]},
                  {"Out": 1}, {"axis": -1, "force_cpu": False}, dtype="bool")["Out"][0]
        _if_else(even, lambda: assign(unary("tanh", matmul_v2(h, w)), h),
                 lambda: assign(unary("tanh", matmul_v2(h, v)), h))

    loop(3, body)
    loss = paddle.mean(h)
    return dict(
        loss=loss.name,
        feeds={"x": None},
        description="h = scale(x); for i in 0..2: if i % 2 == 0: h = tanh(h@W) else: "
                    "h = tanh(h@V) - branches taken true, false, true, with the "
                    "parameters read inside the branches; loss = mean(h).",
        variants={"default": [ab(loss.name)]},
    )


def main():
    only = set(sys.argv[1:])
    summary = {}
    for builder in CASES:
        if only and builder.__name__ not in only:
            continue
        gen.generate_case(builder, summary)
    print(summary)


if __name__ == "__main__":
    main()
