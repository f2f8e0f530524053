"""The API docs' examples of `append_backward` and `gradients`, run on
pybackward alone, give what the docs' comments say."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pybackward import static
from test_static_support import ROOT, build, case_meta

F = static.nn.functional

#: The docstring's `# output:` comments, p_g_list1..6.
DOCS = {
    "p1": [("embedding_0.w_0", "embedding_0.w_0@GRAD"), ("my_fc.w_0", "my_fc.w_0@GRAD"),
           ("my_fc.b_0", "my_fc.b_0@GRAD")],
    "p2": [("embedding_0.w_0", "embedding_0.w_0@GRAD"), ("my_fc.w_0", "my_fc.w_0@GRAD")],
    "p3": [("embedding_0.w_0", "embedding_0.w_0@GRAD"), ("my_fc.w_0", "my_fc.w_0@GRAD")],
    "p4": [("my_fc.w_0", "my_fc.w_0@GRAD"), ("my_fc.b_0", "my_fc.b_0@GRAD")],
    "p5": [("embedding_0.w_0", "embedding_0.w_0@GRAD"), ("my_fc.w_0", "my_fc.w_0@GRAD")],
    "p6": [],
}


def _docs_program():
    """The append_backward docstring, written out (into fresh programs)."""
    main, startup = static.Program(), static.Program()
    with static.program_guard(main, startup):
        x = static.data(name='x', shape=[None, 13], dtype='int64')
        y = static.data(name='y', shape=[None, 1], dtype='float32')
        x_emb = static.nn.embedding(x, size=[100, 256])
        y_predict = static.nn.fc(x=x_emb, size=1, activation=None, name='my_fc')
        loss = F.square_error_cost(input=y_predict, label=y)
        avg_loss = static.mean(loss)
        all_weights = [param for param in static.default_main_program().block(0).all_parameters()
                       if 'w_' in param.name]
        all_weights_name = [w.name for w in all_weights]
    return main, startup, avg_loss, x_emb, all_weights, all_weights_name


def _call(variant, avg_loss, x_emb, all_weights, all_weights_name):
    kwargs = {
        "p1": {},
        "p2": {"parameter_list": all_weights},
        "p3": {"parameter_list": all_weights_name},
        "p4": {"no_grad_set": set([x_emb])},
        "p5": {"no_grad_set": set(['my_fc.b_0'])},
        "p6": {"parameter_list": all_weights, "no_grad_set": set(all_weights)},
    }[variant]
    return static.append_backward(loss=avg_loss, **kwargs)


@pytest.mark.parametrize("variant", sorted(DOCS))
def test_append_backward_docstring(variant):
    """Each p_g_list call, on a freshly built program, returns exactly the
    docstring's comment."""
    main, _, avg_loss, x_emb, all_weights, names = _docs_program()
    got = _call(variant, avg_loss, x_emb, all_weights, names)
    assert [(p.name, g.name) for p, g in got] == DOCS[variant]
    for p, g in got:
        assert p.is_parameter and g.block is main.global_block()
        assert g.shape == p.shape and g.dtype == p.dtype


def test_append_backward_docstring_as_it_runs():
    """The docstring runs its six calls on one program: the parameters are
    the comments' parameters; the gradients of calls 2..5 carry Paddle's
    `grad/` prefixes (what Paddle 3.3.1 returns too)."""
    _, _, avg_loss, x_emb, all_weights, names = _docs_program()
    got = [[(p.name, g.name) for p, g in _call(v, avg_loss, x_emb, all_weights, names)]
           for v in sorted(DOCS)]
    for v, pairs in zip(sorted(DOCS), got):
        assert [p for p, _ in pairs] == [p for p, _ in DOCS[v]]
    paddle = case_meta("doc_append_backward")["variants"]["sequential"]["returned"]
    assert got == [[tuple(pg) for pg in call] for call in paddle]
    assert got[1] == [("embedding_0.w_0", "grad/grad/embedding_0.w_0@GRAD"),
                      ("my_fc.w_0", "grad/grad/my_fc.w_0@GRAD")]


def test_append_backward_docstring_gradient_values():
    """The gradients the docs' program computes: run startup, then main."""
    main, startup, avg_loss, *_ = _docs_program()
    static.append_backward(loss=avg_loss)
    scope = static.Scope()
    exe = static.Executor()
    exe.run(startup, scope=scope)
    rs = np.random.RandomState(0)
    feed = {"x": rs.randint(0, 100, (4, 13)).astype("int64"),
            "y": rs.uniform(-1, 1, (4, 1)).astype("float32")}
    loss, gw, gb = exe.run(main, feed=feed, scope=scope,
                           fetch_list=[avg_loss, "my_fc.w_0@GRAD", "my_fc.b_0@GRAD"])
    emb = scope["embedding_0.w_0"][feed["x"]].reshape(4, -1)
    pred = emb @ scope["my_fc.w_0"] + scope["my_fc.b_0"]
    np.testing.assert_allclose(loss, np.mean((pred - feed["y"]) ** 2), rtol=1e-5)
    dpred = 2 * (pred - feed["y"]) / 4
    np.testing.assert_allclose(gb, dpred.sum(0), rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(gw, emb.T @ dpred, rtol=1e-4, atol=1e-7)


def test_gradients_docstring():
    """paddle.static.gradients' docstring: conv2d(4, 1, no bias) -> relu;
    gradients([y], x) prints [var x@GRAD : DENSE_TENSOR.shape(-1, 2, 8, 8)...]."""
    with static.program_guard(static.Program(), static.Program()):
        x = static.data(name='x', shape=[None, 2, 8, 8], dtype='float32')
        x.stop_gradient = False
        y = static.nn.conv2d(x, 4, 1, bias_attr=False)
        y = F.relu(y)
        z = static.gradients([y], x)
    assert str(z) == ("[var x@GRAD : DENSE_TENSOR.shape(-1, 2, 8, 8).dtype(float32)"
                      ".stop_gradient(False)]")


def test_gradients_issue_example_two_convs():
    """The issue's version: conv -> relu -> conv -> relu, gradients([y], x);
    its value checked against finite differences."""
    main, startup, info = build("doc_gradients_two_conv")
    (gx,) = static.gradients([main.var("relu_1.tmp_0")], main.var("x"))
    assert gx.name == "x@GRAD" and gx.shape == (-1, 2, 8, 8)
    scope = static.Scope()
    exe = static.Executor()
    exe.run(startup, scope=scope)
    x = np.random.RandomState(1).uniform(-1, 1, (1, 2, 8, 8)).astype("float32")
    (g,) = exe.run(main, feed={"x": x}, fetch_list=[gx], scope=scope)

    def f(xv):
        (out,) = exe.run(main, feed={"x": xv}, fetch_list=["relu_1.tmp_0"], scope=scope)
        return out.astype(np.float64).sum()
    i = (0, 1, 3, 4)
    eps = 1e-2
    xp, xm = x.copy(), x.copy()
    xp[i] += eps
    xm[i] -= eps
    np.testing.assert_allclose(g[i], (f(xp) - f(xm)) / (2 * eps), rtol=2e-2, atol=1e-3)


def test_gradients_issue_literal_3d_input_is_rejected_like_paddle():
    """`data([2, 8, 8])` as the issue writes it: conv2d wants 4-D input, and
    says so as Paddle does."""
    with static.program_guard(static.Program(), static.Program()):
        x = static.data(name='x', shape=[2, 8, 8], dtype='float32')
        with pytest.raises(ValueError, match="Input size should be 4, but received 3"):
            static.nn.conv2d(x, 4, 1, bias_attr=False)


README_SNIPPET = '''
from pybackward import static
F = static.nn.functional
x = static.data(name='x', shape=[None, 13], dtype='int64')
y = static.data(name='y', shape=[None, 1], dtype='float32')
x_emb = static.nn.embedding(x, size=[100, 256])
y_predict = static.nn.fc(x=x_emb, size=1, activation=None, name='my_fc')
avg_loss = static.mean(F.square_error_cost(input=y_predict, label=y))
print([(p.name, g.name) for p, g in static.append_backward(loss=avg_loss)])
exe = static.Executor(); exe.run(static.default_startup_program())
print(exe.run(feed={'x': [[1] * 13] * 4, 'y': [[0.5]] * 4}, fetch_list=['my_fc.w_0@GRAD'])[0].shape)
'''


def _run_without_paddle(code: str) -> subprocess.CompletedProcess:
    """Run code in a fresh interpreter where `import paddle` fails."""
    guard = "import sys; sys.modules['paddle'] = None\n"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", guard + textwrap.dedent(code)],
                          capture_output=True, text=True, env=env, timeout=120)


def test_readme_snippet_runs_without_paddle():
    res = _run_without_paddle(README_SNIPPET)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == str([("embedding_0.w_0", "embedding_0.w_0@GRAD"),
                            ("my_fc.w_0", "my_fc.w_0@GRAD"), ("my_fc.b_0", "my_fc.b_0@GRAD")])
    assert lines[1] == "(3328, 1)"


def test_docstring_verbatim_on_default_programs_without_paddle():
    """The docstring's lines, with `paddle` spelled `pybackward.static`, on the
    default main program, each p_g_list printed."""
    code = '''
    import pybackward.static as paddle_static
    import pybackward.static.functional as F
    static = paddle_static
    x = static.data(name='x', shape=[None, 13], dtype='int64')
    y = static.data(name='y', shape=[None, 1], dtype='float32')
    x_emb = static.nn.embedding(x, size=[100, 256])
    y_predict = static.nn.fc(x=x_emb, size=1, activation=None, name='my_fc')
    loss = F.square_error_cost(input=y_predict, label=y)
    avg_loss = static.mean(loss)
    all_weights = [param for param in static.default_main_program().block(0).all_parameters() if 'w_' in param.name]
    all_weights_name = [w.name for w in all_weights]
    p_g_list1 = static.append_backward(loss=avg_loss)
    p_g_list2 = static.append_backward(loss=avg_loss, parameter_list=all_weights)
    p_g_list3 = static.append_backward(loss=avg_loss, parameter_list=all_weights_name)
    p_g_list4 = static.append_backward(loss=avg_loss, no_grad_set=set([x_emb]))
    p_g_list5 = static.append_backward(loss=avg_loss, no_grad_set=set(['my_fc.b_0']))
    p_g_list6 = static.append_backward(loss=avg_loss, parameter_list=all_weights, no_grad_set=set(all_weights))
    for l in (p_g_list1, p_g_list2, p_g_list3, p_g_list4, p_g_list5, p_g_list6):
        print([p.name for p, g in l])
    '''
    res = _run_without_paddle(code)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [str([p for p, _ in DOCS[v]]) for v in sorted(DOCS)]
