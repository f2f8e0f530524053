"""nn kernels (conv, pool, norm, pad3d, bilinear_interp_v2): forward values,
grad makers and grad kernels against Paddle 3.3.1 and against slow loop
references written here independently.

* `testdata/ops/nn_ref.{json,npz}` (written by testdata/ops/gen_nn.py with a
  live Paddle): per case the inputs, attrs, Paddle's forward outputs, the grad
  op(s) Paddle made and Paddle's input gradients of sum(Out * cot);
* the golden programs (cnn_bn_pool, doc_gradients, attention): our grad
  makers must produce the grad ops Paddle wrote there;
* loop references: direct per-pixel definitions of the ops.

Finite-difference checks of every op are in tests/ops/test_registry.py.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import pybackward
from pybackward.base.errors import ExecutionError
from pybackward.ops import opcheck, registry
from pybackward.ops.registry import GRAD_SUFFIX, FwdOp

ROOT = Path(__file__).resolve().parents[2]
OPS_DATA = ROOT / "testdata" / "ops"
PROGRAMS = ROOT / "testdata" / "programs"

_REF = json.loads((OPS_DATA / "nn_ref.json").read_text())
_ARR = np.load(OPS_DATA / "nn_ref.npz")
CASES = {c["name"]: c for c in _REF["cases"]}

NN_OPS = ("conv2d", "depthwise_conv2d", "conv2d_transpose", "pool2d", "batch_norm", "layer_norm",
          "group_norm", "instance_norm", "pad3d", "bilinear_interp_v2")


def _tol(dtype):
    return dict(rtol=2e-4, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-7, atol=1e-9)


def _case_inputs(case):
    """{slot: [arrays]} and {var name: array} of a reference case."""
    ins, values = {}, {}
    for slot, names in case["fwd_inputs"].items():
        arrs = [_ARR[f"{case['name']}|in|{slot}|{i}"] for i in range(len(names))]
        if arrs:
            ins[slot] = arrs
        values.update(zip(names, arrs))
    return ins, values


def _run_case(case):
    """Our forward outputs and the input grads our grad ops compute."""
    ins, scope = _case_inputs(case)
    outs = case["fwd_outputs"]
    fwd = opcheck.run_kernel(case["op"], ins, dict(case["attrs"]), outs)
    for slot, names in outs.items():
        for n, a in zip(names, fwd.get(slot, [])):
            scope[n] = a
    for slot in case["loss"]:
        scope[outs[slot][0] + GRAD_SUFFIX] = _ARR[f"{case['name']}|cot|{slot}"]
    fop = FwdOp(case["op"], case["fwd_inputs"], outs, opcheck.encode_attrs(case["attrs"]), frozenset())
    grad_ops = registry.get(case["op"]).make_grad(fop)
    for g in grad_ops:
        g_ins = {s: [scope[a] for a in args] for s, args in g.inputs.items() if args}
        res = opcheck.run_kernel(g.type, g_ins, opcheck.grad_op_attrs(g), g.outputs)
        for s, args in g.outputs.items():
            for a, arr in zip(args, res.get(s, [])):
                scope[a] = scope[a] + arr if a in scope else arr
    return fwd, grad_ops, scope


# --------------------------------------------------------------------------
# Paddle reference values
# --------------------------------------------------------------------------
def test_reference_data_complete():
    assert not _REF["failed"], _REF["failed"]
    assert {c["op"] for c in _REF["cases"]} == set(NN_OPS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_matches_paddle(name):
    case = CASES[name]
    fwd, _, _ = _run_case(case)
    checked = 0
    for slot in case["outs"]:
        key = f"{name}|out|{slot}"
        if key not in _ARR.files:
            continue
        want = _ARR[key]
        got = fwd[slot][0]
        assert got.dtype == want.dtype, f"{slot}: dtype {got.dtype} != Paddle's {want.dtype}"
        assert got.shape == want.shape, f"{slot}: shape {got.shape} != Paddle's {want.shape}"
        np.testing.assert_allclose(got, want, err_msg=slot, **_tol(want.dtype))
        checked += 1
    assert checked


@pytest.mark.parametrize("name", sorted(CASES))
def test_grad_op_matches_paddle(name):
    case = CASES[name]
    _, grad_ops, _ = _run_case(case)
    ours = [dict(type=g.type, inputs=g.inputs, outputs=g.outputs) for g in grad_ops]
    assert ours == case["grad_ops"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_grads_match_paddle(name):
    case = CASES[name]
    _, _, scope = _run_case(case)
    for slot in case["diff"]:
        want = _ARR[f"{name}|grad|{slot}"]
        got = scope[case["fwd_inputs"][slot][0] + GRAD_SUFFIX]
        assert got.dtype == want.dtype and got.shape == want.shape, slot
        np.testing.assert_allclose(got, want, err_msg=slot, **_tol(want.dtype))


def test_paddle_conventions_recorded():
    """Conventions the kernels rely on, as Paddle showed them."""
    bn = CASES["bn_train"]
    x = _ARR["bn_train|in|X|0"]
    mean, var = _ARR["bn_train|in|Mean|0"], _ARR["bn_train|in|Variance|0"]
    bm, bv = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))  # biased batch variance
    mom = bn["attrs"]["momentum"]
    np.testing.assert_allclose(_ARR["bn_train|out|MeanOut"], mom * mean + (1 - mom) * bm, rtol=1e-6)
    np.testing.assert_allclose(_ARR["bn_train|out|VarianceOut"], mom * var + (1 - mom) * bv, rtol=1e-6)
    np.testing.assert_allclose(_ARR["bn_train|out|SavedMean"], bm, rtol=1e-6)
    np.testing.assert_allclose(_ARR["bn_train|out|SavedVariance"], 1 / np.sqrt(bv + 1e-5), rtol=1e-6)
    assert bn["fwd_outputs"]["MeanOut"] == bn["fwd_inputs"]["Mean"]
    # with global stats the grad op also reads Mean/Variance (the MeanOut/VarianceOut vars)
    assert "Mean" not in bn["grad_ops"][0]["inputs"]
    for name in ("bn_test", "bn_global_stats", "bn_test_trainable"):
        g = CASES[name]["grad_ops"][0]["inputs"]
        assert g["Mean"] == g["MeanOut"] and g["Variance"] == g["VarianceOut"]
    # MomentumTensor is ignored by Paddle's CPU kernel: the attr momentum is used
    x = _ARR["bn_momentum_tensor|in|X|0"]
    m = _ARR["bn_momentum_tensor|in|Mean|0"]
    np.testing.assert_allclose(_ARR["bn_momentum_tensor|out|MeanOut"], 0.9 * m + 0.1 * x.mean(axis=(0, 2, 3)),
                               rtol=1e-6)
    # layer_norm's Variance is the variance itself, shaped X.shape[:begin_norm_axis]
    x = _ARR["ln_axis2|in|X|0"]
    np.testing.assert_allclose(_ARR["ln_axis2|out|Variance"], x.var(axis=2), rtol=1e-6)
    # instance_norm's SavedVariance is the inverse std
    x = _ARR["in_basic|in|X|0"]
    np.testing.assert_allclose(_ARR["in_basic|out|SavedVariance"],
                               1 / np.sqrt(x.var(axis=(2, 3)).reshape(-1) + 1e-5), rtol=1e-6)


# --------------------------------------------------------------------------
# Grad makers against the golden programs written by Paddle
# --------------------------------------------------------------------------
GOLDEN = [("cnn_bn_pool", "backward.pb"), ("doc_gradients", "backward.pb"),
          ("doc_gradients", "backward_target_grad.pb"), ("attention", "backward.pb")]


def _strip_rename(names):
    return [n.split("@RENAME@")[0] for n in names]


@pytest.mark.parametrize("case,file", GOLDEN)
def test_grad_makers_match_golden_programs(case, file):
    prog = pybackward.load(PROGRAMS / case / file)
    block = prog.block(0)
    ops = list(block.ops)
    checked = 0
    for op in ops:
        if op.type not in NN_OPS:
            continue
        no_grad = {n + GRAD_SUFFIX for args in op.inputs.values() for n in args if block.var(n).stop_gradient}
        ours = registry.get(op.type).make_grad(FwdOp(op.type, op.inputs, op.outputs, op.desc.attrs, no_grad))
        assert len(ours) == 1
        g = ours[0]
        # Paddle's grad op: the one of that type reading this op's output grads
        out_grads = {n + GRAD_SUFFIX for args in op.outputs.values() for n in args}
        theirs = [o for o in ops if o.type == g.type
                  and out_grads & set(_strip_rename(o.input_arg_names))]
        assert len(theirs) == 1, f"{op.type}: {len(theirs)} matching grad ops"
        t = theirs[0]
        assert {s: _strip_rename(v) for s, v in t.inputs.items()} == g.inputs
        assert {s: _strip_rename(v) for s, v in t.outputs.items()} == g.outputs
        assert not g.attrs  # all forward attrs copied, nothing overridden
        checked += 1
    assert checked


@pytest.mark.parametrize("case", ["cnn_bn_pool", "doc_gradients", "attention"])
def test_golden_program_runs_to_paddle_grads(case):
    """The whole golden backward program through the interpreter (needs the
    other op families; skipped while one of their ops is missing)."""
    from pybackward.base.errors import UnknownOpError
    from pybackward.interpreter.executor import Executor, Scope, load_params

    prog = pybackward.load(PROGRAMS / case / "backward.pb")
    for op in prog.block(0).ops:
        d = registry.find(op.type)
        if d is None or d.kernel is None:
            pytest.skip(f"op {op.type} not implemented yet")
    want = np.load(PROGRAMS / case / "grads.npz")
    scope = Scope()
    load_params(scope, np.load(PROGRAMS / case / "params.npz"))
    feeds = dict(np.load(PROGRAMS / case / "feeds.npz"))
    try:
        got = Executor().run(prog, feed=feeds, fetch_list=list(want.files), scope=scope)
    except UnknownOpError as e:  # pragma: no cover - depends on other families
        pytest.skip(str(e))
    for name, g in zip(want.files, got):
        np.testing.assert_allclose(g, want[name], rtol=2e-3, atol=2e-5, err_msg=name)


# --------------------------------------------------------------------------
# Slow, obviously-correct loop references (written from the definitions)
# --------------------------------------------------------------------------
def _run(op_type, ins, attrs, outs=None):
    outs = outs or {s: [s.lower()] for s in registry.get(op_type).outputs}
    return {k: v[0] for k, v in opcheck.run_kernel(op_type, ins, attrs, outs).items()}


def _grads(op_type, ins, attrs, cot):
    """Input grads of sum(out * cot) through our grad maker + grad kernel."""
    opdef = registry.get(op_type)
    in_names = {s: [f"{s}{i}" for i in range(len(a))] for s, a in ins.items()}
    out_names = {s: [f"o_{s}"] for s in opdef.outputs}
    fwd = opcheck.run_kernel(op_type, ins, attrs, out_names)
    scope = {n: a for s, arrs in ins.items() for n, a in zip(in_names[s], arrs)}
    scope.update({out_names[s][0]: v[0] for s, v in fwd.items()})
    scope.update({f"o_{s}@GRAD": v for s, v in cot.items()})
    (g,) = opdef.make_grad(FwdOp(op_type, in_names, out_names, opcheck.encode_attrs(attrs), frozenset()))
    res = opcheck.run_kernel(g.type, {s: [scope[a] for a in args] for s, args in g.inputs.items() if args},
                             opcheck.grad_op_attrs(g), g.outputs)
    return {k[: -len(GRAD_SUFFIX)]: v[0] for k, v in res.items()}


def ref_conv2d(x, w, s, p, d, groups, dy=None):
    """Direct convolution NCHW / OIHW, p = [top, bottom, left, right]; with
    dy also the input and filter grads, accumulated the same direct way."""
    n, ch, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.zeros((n, ch, h + p[0] + p[1], wd + p[2] + p[3]))
    xp[:, :, p[0]:p[0] + h, p[2]:p[2] + wd] = x
    oh = (xp.shape[2] - (d[0] * (kh - 1) + 1)) // s[0] + 1
    ow = (xp.shape[3] - (d[1] * (kw - 1) + 1)) // s[1] + 1
    out = np.zeros((n, m, oh, ow))
    dxp, dw = np.zeros_like(xp), np.zeros_like(w, dtype=np.float64)
    mg = m // groups
    for b in range(n):
        for o in range(m):
            g = o // mg
            for i in range(oh):
                for j in range(ow):
                    for c in range(cg):
                        for u in range(kh):
                            for v in range(kw):
                                r, q = i * s[0] + u * d[0], j * s[1] + v * d[1]
                                out[b, o, i, j] += xp[b, g * cg + c, r, q] * w[o, c, u, v]
                                if dy is not None:
                                    dxp[b, g * cg + c, r, q] += dy[b, o, i, j] * w[o, c, u, v]
                                    dw[o, c, u, v] += dy[b, o, i, j] * xp[b, g * cg + c, r, q]
    return out, dxp[:, :, p[0]:p[0] + h, p[2]:p[2] + wd], dw


def _same_pads(in_hw, k_hw, s):
    p = []
    for i in range(2):
        out = -(-in_hw[i] // s[i])
        total = max((out - 1) * s[i] + k_hw[i] - in_hw[i], 0)
        p += [total // 2, total - total // 2]
    return p


CONV_CONFIGS = [
    # xshape, wshape, attrs, (strides, pads4, dilations) the reference uses
    ((2, 2, 5, 5), (3, 2, 3, 3), dict(strides=[1, 1], paddings=[1, 1]), ([1, 1], [1, 1, 1, 1], [1, 1])),
    ((1, 2, 6, 5), (2, 2, 3, 2), dict(strides=[2, 1], paddings=[1, 0, 2, 1]), ([2, 1], [1, 0, 2, 1], [1, 1])),
    ((1, 2, 7, 6), (2, 2, 3, 2), dict(strides=[1, 2], paddings=[2, 1], dilations=[2, 2]),
     ([1, 2], [2, 2, 1, 1], [2, 2])),
    ((1, 2, 5, 6), (2, 2, 3, 3), dict(strides=[2, 2], padding_algorithm="SAME", dilations=[2, 2]),
     ([2, 2], _same_pads((5, 6), (3, 3), (2, 2)), [1, 1])),
    ((1, 2, 5, 6), (2, 2, 2, 3), dict(strides=[2, 1], paddings=[3, 3], padding_algorithm="VALID"),
     ([2, 1], [0, 0, 0, 0], [1, 1])),
    ((1, 4, 4, 5), (6, 2, 3, 3), dict(paddings=[1, 1], groups=2), ([1, 1], [1, 1, 1, 1], [1, 1])),
    ((1, 3, 5, 5), (6, 1, 3, 3), dict(strides=[2, 2], paddings=[1, 1], groups=3), ([2, 2], [1, 1, 1, 1], [1, 1])),
]


@pytest.mark.parametrize("cfg", range(len(CONV_CONFIGS)))
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_conv2d_matches_loop_reference(cfg, layout):
    xs, ws, attrs, (s, p, d) = CONV_CONFIGS[cfg]
    rng = np.random.default_rng(cfg)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    groups = attrs.get("groups", 1)
    want, _, _ = ref_conv2d(x, w, s, p, d, groups)
    dy = rng.standard_normal(want.shape)
    _, want_dx, want_dw = ref_conv2d(x, w, s, p, d, groups, dy)
    op = "depthwise_conv2d" if groups == xs[1] else "conv2d"
    to = (lambda a: a.transpose(0, 2, 3, 1)) if layout == "NHWC" else (lambda a: a)
    attrs = dict(attrs, data_format=layout)
    got = _run(op, {"Input": [to(x)], "Filter": [w]}, attrs)["Output"]
    np.testing.assert_allclose(got, to(want), rtol=1e-10, atol=1e-12)
    g = _grads(op, {"Input": [to(x)], "Filter": [w]}, attrs, {"Output": to(dy)})
    np.testing.assert_allclose(g["Input"], to(want_dx), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g["Filter"], want_dw, rtol=1e-10, atol=1e-12)


def ref_conv2d_transpose(x, w, s, p, d, groups, out_hw):
    """Each input pixel scatters its filter (C_in, M/g, kh, kw) into the output."""
    n, cin, h, wd = x.shape
    _, mg, kh, kw = w.shape
    out = np.zeros((n, mg * groups, out_hw[0], out_hw[1]))
    cg = cin // groups
    for b in range(n):
        for c in range(cin):
            g = c // cg
            for i in range(h):
                for j in range(wd):
                    for o in range(mg):
                        for u in range(kh):
                            for v in range(kw):
                                r, q = i * s[0] - p[0] + u * d[0], j * s[1] - p[2] + v * d[1]
                                if 0 <= r < out_hw[0] and 0 <= q < out_hw[1]:
                                    out[b, g * mg + o, r, q] += x[b, c, i, j] * w[c, o, u, v]
    return out


@pytest.mark.parametrize("xs,ws,attrs,ref", [
    ((2, 3, 3, 3), (3, 2, 3, 3), dict(paddings=[1, 1]), ([1, 1], [1, 1, 1, 1], [1, 1], (3, 3))),
    ((1, 2, 3, 4), (2, 3, 3, 3), dict(strides=[2, 2], paddings=[1, 1], output_padding=[1, 0]),
     ([2, 2], [1, 1, 1, 1], [1, 1], (6, 7))),
    ((1, 4, 3, 3), (4, 2, 2, 3), dict(strides=[2, 1], paddings=[0, 1, 1, 0], groups=2, dilations=[2, 1]),
     ([2, 1], [0, 1, 1, 0], [2, 1], (6, 4))),
    ((1, 2, 3, 3), (2, 2, 3, 3), dict(strides=[2, 2], paddings=[1, 1], output_size=[6, 5]),
     ([2, 2], [1, 1, 1, 1], [1, 1], (6, 5))),
])
def test_conv2d_transpose_matches_loop_reference(xs, ws, attrs, ref):
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    s, p, d, out_hw = ref
    want = ref_conv2d_transpose(x, w, s, p, d, attrs.get("groups", 1), out_hw)
    got = _run("conv2d_transpose", {"Input": [x], "Filter": [w]}, attrs)["Output"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # NHWC gives the same numbers transposed
    got = _run("conv2d_transpose", {"Input": [x.transpose(0, 2, 3, 1)], "Filter": [w]},
               dict(attrs, data_format="NHWC"))["Output"]
    np.testing.assert_allclose(got, want.transpose(0, 2, 3, 1), rtol=1e-10, atol=1e-12)


def ref_pool2d(x, ksize, s, p, kind, exclusive=True, adaptive=False, out_hw=None, dy=None):
    """Paddle's Pool2dFunctor loop, p = [top, left] (the pads it uses for the
    windows); out_hw from the caller. With dy also the input grad."""
    n, ch, h, w = x.shape
    oh, ow = out_hw
    out = np.zeros((n, ch, oh, ow))
    dx = np.zeros_like(x)
    for b in range(n):
        for c in range(ch):
            for i in range(oh):
                for j in range(ow):
                    if adaptive:
                        hs, he = math.floor(i * h / oh), math.ceil((i + 1) * h / oh)
                        ws, we = math.floor(j * w / ow), math.ceil((j + 1) * w / ow)
                        size = (he - hs) * (we - ws)
                    else:
                        hs, ws = i * s[0] - p[0], j * s[1] - p[1]
                        he, we = min(hs + ksize[0], h + p[0]), min(ws + ksize[1], w + p[1])
                        size = (he - hs) * (we - ws)
                        hs, ws, he, we = max(hs, 0), max(ws, 0), min(he, h), min(we, w)
                        if exclusive:
                            size = (he - hs) * (we - ws)
                    win = x[b, c, hs:he, ws:we]
                    if kind == "max" and win.size == 0:
                        out[b, c, i, j] = -np.finfo(np.float32).max
                    elif kind == "max":
                        out[b, c, i, j] = win.max()
                        if dy is not None:
                            u, v = np.unravel_index(np.argmax(win), win.shape)
                            dx[b, c, hs + u, ws + v] += dy[b, c, i, j]
                    else:
                        out[b, c, i, j] = win.sum() / size
                        if dy is not None:
                            dx[b, c, hs:he, ws:we] += dy[b, c, i, j] / size
    return out, dx


POOL_CONFIGS = [
    (dict(pooling_type="max", ksize=[2, 2], strides=[2, 2]), dict(p=[0, 0], out=(2, 3))),
    (dict(pooling_type="max", ksize=[3, 3], strides=[2, 2], paddings=[1, 1]), dict(p=[1, 1], out=(2, 3))),
    (dict(pooling_type="avg", ksize=[3, 3], strides=[2, 2], paddings=[1, 1]), dict(p=[1, 1], out=(2, 3))),
    (dict(pooling_type="avg", ksize=[3, 3], strides=[2, 2], paddings=[1, 1], exclusive=False),
     dict(p=[1, 1], out=(2, 3), exclusive=False)),
    (dict(pooling_type="avg", ksize=[2, 2], strides=[2, 2], ceil_mode=True, exclusive=False),
     dict(p=[0, 0], out=(2, 3), exclusive=False)),
    (dict(pooling_type="max", ksize=[2, 3], strides=[1, 2], paddings=[1, 0, 0, 2], ceil_mode=True),
     dict(p=[1, 0], out=(4, 4))),  # the last W window is empty (only the left pad moves windows)
    (dict(pooling_type="avg", ksize=[2, 3], strides=[2, 2], paddings=[0, 1, 1, 0], exclusive=False),
     dict(p=[0, 1], out=(2, 3), exclusive=False)),
    (dict(pooling_type="avg", ksize=[3, 2], adaptive=True), dict(adaptive=True, out=(3, 2))),
    (dict(pooling_type="avg", ksize=[1, 1], global_pooling=True, paddings=[1, 1]), dict(ksize=[4, 6], out=(1, 1))),
    (dict(pooling_type="max", ksize=[1, 1], global_pooling=True), dict(ksize=[4, 6], out=(1, 1))),
    (dict(pooling_type="max", ksize=[3, 3], strides=[2, 2], padding_algorithm="SAME"), dict(p=[0, 0], out=(2, 3))),
]


@pytest.mark.parametrize("cfg", range(len(POOL_CONFIGS)))
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_pool2d_matches_loop_reference(cfg, layout):
    attrs, ref = POOL_CONFIGS[cfg]
    rng = np.random.default_rng(cfg)
    x = rng.permutation(2 * 2 * 4 * 6).reshape(2, 2, 4, 6) * 0.1 + 0.01 * rng.random((2, 2, 4, 6))
    want, _ = ref_pool2d(x, ref.get("ksize", attrs["ksize"]), attrs.get("strides", [1, 1]), ref.get("p", [0, 0]),
                         attrs["pooling_type"], ref.get("exclusive", True), ref.get("adaptive", False), ref["out"])
    dy = rng.standard_normal(want.shape)
    _, want_dx = ref_pool2d(x, ref.get("ksize", attrs["ksize"]), attrs.get("strides", [1, 1]), ref.get("p", [0, 0]),
                            attrs["pooling_type"], ref.get("exclusive", True), ref.get("adaptive", False),
                            ref["out"], dy)
    to = (lambda a: a.transpose(0, 2, 3, 1)) if layout == "NHWC" else (lambda a: a)
    attrs = dict(attrs, data_format=layout)
    got = _run("pool2d", {"X": [to(x)]}, attrs)["Out"]
    np.testing.assert_allclose(got, to(want), rtol=1e-12)
    g = _grads("pool2d", {"X": [to(x)]}, attrs, {"Out": to(dy)})
    # Paddle scales the avg grad by float32(1/pool_size)
    np.testing.assert_allclose(g["X"], to(want_dx), rtol=1e-6, atol=1e-12)


def test_norms_match_loop_references():
    rng = np.random.default_rng(3)
    eps = 1e-5
    # layer_norm over the last two dims
    x, sc, bi = rng.standard_normal((2, 3, 4)), rng.standard_normal(12), rng.standard_normal(12)
    out = _run("layer_norm", {"X": [x], "Scale": [sc], "Bias": [bi]}, {"begin_norm_axis": 1, "epsilon": eps})
    for b in range(2):
        row = x[b].reshape(-1)
        want = (row - row.mean()) / np.sqrt(row.var() + eps) * sc + bi
        np.testing.assert_allclose(out["Y"][b].reshape(-1), want, rtol=1e-10)
        assert np.isclose(out["Mean"][b], row.mean()) and np.isclose(out["Variance"][b], row.var())
    # group_norm, 2 groups of 2 channels
    x, sc, bi = rng.standard_normal((2, 4, 3, 2)), rng.standard_normal(4), rng.standard_normal(4)
    out = _run("group_norm", {"X": [x], "Scale": [sc], "Bias": [bi]}, {"groups": 2, "epsilon": eps})
    for b in range(2):
        for g in range(2):
            blk = x[b, 2 * g:2 * g + 2]
            for c in range(2):
                ch = 2 * g + c
                want = (x[b, ch] - blk.mean()) / np.sqrt(blk.var() + eps) * sc[ch] + bi[ch]
                np.testing.assert_allclose(out["Y"][b, ch], want, rtol=1e-10)
            assert np.isclose(out["Variance"][b, g], blk.var())
    # instance_norm
    x, sc, bi = rng.standard_normal((2, 3, 2, 3)), rng.standard_normal(3), rng.standard_normal(3)
    out = _run("instance_norm", {"X": [x], "Scale": [sc], "Bias": [bi]}, {"epsilon": eps})
    for b in range(2):
        for c in range(3):
            want = (x[b, c] - x[b, c].mean()) / np.sqrt(x[b, c].var() + eps) * sc[c] + bi[c]
            np.testing.assert_allclose(out["Y"][b, c], want, rtol=1e-10)
            assert np.isclose(out["SavedVariance"][b * 3 + c], 1 / np.sqrt(x[b, c].var() + eps))
    # batch_norm NHWC training: per channel over N, H, W
    x = rng.standard_normal((3, 2, 2, 4))
    sc, bi, mean, var = (rng.standard_normal(4) for _ in range(4))
    var = np.abs(var) + 0.5
    out = _run("batch_norm", {"X": [x], "Scale": [sc], "Bias": [bi], "Mean": [mean], "Variance": [var]},
               {"data_layout": "NHWC", "momentum": 0.8, "epsilon": eps})
    for c in range(4):
        v = x[..., c]
        want = (v - v.mean()) / np.sqrt(v.var() + eps) * sc[c] + bi[c]
        np.testing.assert_allclose(out["Y"][..., c], want, rtol=1e-10)
        assert np.isclose(out["MeanOut"][c], 0.8 * mean[c] + 0.2 * v.mean())
        assert np.isclose(out["VarianceOut"][c], 0.8 * var[c] + 0.2 * v.var())
        assert np.isclose(out["SavedVariance"][c], 1 / np.sqrt(v.var() + eps))
    # is_test: running stats used, not updated
    out = _run("batch_norm", {"X": [x], "Scale": [sc], "Bias": [bi], "Mean": [mean], "Variance": [var]},
               {"data_layout": "NHWC", "is_test": True, "epsilon": eps})
    np.testing.assert_allclose(out["Y"], (x - mean) / np.sqrt(var + eps) * sc + bi, rtol=1e-10)
    np.testing.assert_array_equal(out["MeanOut"], mean)
    np.testing.assert_array_equal(out["VarianceOut"], var)


def ref_pad3d_index(o, pad, n, mode):
    i = o - pad
    if mode == "reflect":
        i = max(i, -i)
        return min(i, 2 * n - i - 2)
    if mode == "replicate":
        return min(max(i, 0), n - 1)
    if mode == "circular":
        return ((i % n) + n) % n
    return i if 0 <= i < n else None


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad3d_matches_loop_reference(mode):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 2, 3, 4))
    pads = [2, 1, 1, 2, 1, 0]  # left, right, top, bottom, front, back
    out = _run("pad3d", {"X": [x]}, {"paddings": pads, "mode": mode, "value": 1.5})["Out"]
    d, h, w = x.shape[2:]
    assert out.shape == (1, 2, d + 1, h + 3, w + 3)
    for c in range(2):
        for od in range(out.shape[2]):
            for oh in range(out.shape[3]):
                for ow in range(out.shape[4]):
                    idx = (ref_pad3d_index(od, pads[4], d, mode), ref_pad3d_index(oh, pads[2], h, mode),
                           ref_pad3d_index(ow, pads[0], w, mode))
                    want = 1.5 if None in idx else x[0, c][idx]
                    assert out[0, c, od, oh, ow] == want


def test_bilinear_align_corners_matches_loop_reference():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 2, 3, 4))
    oh, ow = 5, 7
    out = _run("bilinear_interp_v2", {"X": [x]}, {"out_h": oh, "out_w": ow, "align_corners": True})["Out"]
    for i in range(oh):
        for j in range(ow):
            sy, sx = i * (3 - 1) / (oh - 1), j * (4 - 1) / (ow - 1)
            y0, x0 = min(int(sy), 1), min(int(sx), 2)
            fy, fx = sy - y0, sx - x0
            want = (x[0, :, y0, x0] * (1 - fy) * (1 - fx) + x[0, :, y0 + 1, x0] * fy * (1 - fx)
                    + x[0, :, y0, x0 + 1] * (1 - fy) * fx + x[0, :, y0 + 1, x0 + 1] * fy * fx)
            np.testing.assert_allclose(out[0, :, i, j], want, rtol=1e-6, atol=1e-7)


# --------------------------------------------------------------------------
# Attr values the kernels do not handle: an error, never a guess
# --------------------------------------------------------------------------
_X4 = np.ones((1, 2, 4, 4))
UNSUPPORTED = [
    ("conv2d", {"Input": [_X4], "Filter": [np.ones((2, 2, 2, 2))]}, {"padding_algorithm": "FULL"}),
    ("conv2d", {"Input": [_X4], "Filter": [np.ones((2, 2, 2, 2))]}, {"data_format": "NCDHW"}),
    ("conv2d", {"Input": [_X4], "Filter": [np.ones((2, 2, 2, 2))]}, {"paddings": [1, 1, 1]}),
    ("conv2d_transpose", {"Input": [_X4], "Filter": [np.ones((2, 2, 2, 2))]},
     {"strides": [2, 2], "output_size": [20, 20]}),
    ("pool2d", {"X": [_X4]}, {"pooling_type": "lp", "ksize": [2, 2]}),
    ("pool2d", {"X": [_X4]}, {"pooling_type": "", "ksize": [2, 2]}),
    ("pool2d", {"X": [_X4]}, {"pooling_type": "max", "ksize": [2, 2], "padding_algorithm": "FULL"}),
    ("batch_norm", {"X": [_X4], "Scale": [np.ones(2)], "Bias": [np.ones(2)], "Mean": [np.ones(2)],
                    "Variance": [np.ones(2)]}, {"data_layout": "NDHWC"}),
    ("layer_norm", {"X": [_X4]}, {"begin_norm_axis": 0}),
    ("layer_norm", {"X": [_X4]}, {"begin_norm_axis": 4}),
    ("group_norm", {"X": [_X4]}, {"groups": 3}),
    ("group_norm", {"X": [_X4]}, {}),
    ("pad3d", {"X": [np.ones((1, 1, 2, 2, 2))]}, {"paddings": [1] * 6, "mode": "edge"}),
    ("pad3d", {"X": [np.ones((1, 1, 2, 2, 2))]}, {"paddings": [2, 0, 0, 0, 0, 0], "mode": "reflect"}),
    ("bilinear_interp_v2", {"X": [_X4]}, {"out_h": 3, "out_w": 3, "interp_method": "nearest"}),
    ("bilinear_interp_v2", {"X": [_X4]}, {"scale": [2.0]}),
    ("bilinear_interp_v2", {"X": [_X4]}, {}),
]


@pytest.mark.parametrize("op_type,ins,attrs", UNSUPPORTED,
                         ids=[f"{u[0]}-{i}" for i, u in enumerate(UNSUPPORTED)])
def test_unsupported_attr_raises(op_type, ins, attrs):
    with pytest.raises(ExecutionError, match="not supported"):
        _run(op_type, ins, attrs)


def test_dtype_preserved_float32():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    f = rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
    assert _run("conv2d", {"Input": [x], "Filter": [f]}, {})["Output"].dtype == np.float32
    g = _grads("conv2d", {"Input": [x], "Filter": [f]}, {}, {"Output": np.ones((1, 2, 2, 2), np.float32)})
    assert g["Input"].dtype == np.float32 and g["Filter"].dtype == np.float32
    assert _run("pool2d", {"X": [x]}, {"pooling_type": "max", "ksize": [2, 2]})["Out"].dtype == np.float32
    out = _run("batch_norm", {"X": [x], "Scale": [np.ones(2, np.float32)], "Bias": [np.zeros(2, np.float32)],
                              "Mean": [np.zeros(2, np.float32)], "Variance": [np.ones(2, np.float32)]}, {})
    assert all(v.dtype == np.float32 for v in out.values())


TILING_POOLS = [
    (dict(pooling_type="max", ksize=[2, 2], strides=[2, 2]), (2, 3, 6, 8)),
    (dict(pooling_type="avg", ksize=[2, 2], strides=[2, 2]), (2, 3, 6, 8)),
    (dict(pooling_type="avg", ksize=[2, 2], strides=[2, 2], exclusive=False), (2, 3, 6, 8)),
    (dict(pooling_type="max", ksize=[3, 2], strides=[3, 2], ceil_mode=True), (1, 2, 9, 4)),
    (dict(pooling_type="max", ksize=[1, 1], global_pooling=True), (2, 3, 5, 7)),
    (dict(pooling_type="avg", ksize=[1, 1], global_pooling=True), (2, 3, 5, 7)),
    (dict(pooling_type="avg", ksize=[2, 3], adaptive=True), (1, 2, 6, 9)),
    (dict(pooling_type="max", ksize=[2, 2], strides=[2, 2], data_format="NHWC"), (2, 6, 8, 3)),
]


@pytest.mark.parametrize("cfg", range(len(TILING_POOLS)))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pool2d_tiling_fast_path_equals_the_general_one(cfg, dtype, monkeypatch):
    """Windows that tile the input (a 2x2 stride-2 pool of an even map, global
    and evenly adaptive pooling) take a reshape instead of the gather and
    scatter-add: max pooling and every grad equal the general path's bit for
    bit, ties included (max's grad goes to the first maximum of the window);
    an average sums each window in Paddle's order (row-major, one element
    after another), which the general path's NumPy sum may not: it equals a
    loop in that order bit for bit, and the general path to 2 ulp."""
    from pybackward.ops.nn import pool
    attrs, shape = TILING_POOLS[cfg]
    rng = np.random.default_rng(cfg)
    x = (rng.integers(0, 4, shape) * 0.25 + (0 if cfg % 2 else rng.random(shape))).astype(dtype)   # ties
    dy_shape = _run("pool2d", {"X": [x]}, attrs)["Out"].shape
    dy = rng.standard_normal(dy_shape).astype(dtype)

    def both():
        pool._WINDOWS.clear()
        return _run("pool2d", {"X": [x]}, attrs)["Out"], _grads("pool2d", {"X": [x]}, attrs, {"Out": dy})["X"]

    fast_out, fast_dx = both()
    assert pool._windows(_call(attrs), x.shape[1:3] if attrs.get("data_format") == "NHWC" else x.shape[2:],
                         attrs["pooling_type"]).tiles is not None
    real = pool._Windows.__init__

    def no_tiles(self, *a):
        real(self, *a)
        self.tiles = None
    monkeypatch.setattr(pool._Windows, "__init__", no_tiles)
    slow_out, slow_dx = both()
    pool._WINDOWS.clear()
    assert fast_out.dtype == slow_out.dtype and fast_dx.dtype == slow_dx.dtype
    np.testing.assert_array_equal(fast_dx, slow_dx)
    if attrs["pooling_type"] == "max":
        np.testing.assert_array_equal(fast_out, slow_out)
        return
    np.testing.assert_array_max_ulp(fast_out, slow_out, maxulp=2)
    xn = x.transpose(0, 3, 1, 2) if attrs.get("data_format") == "NHWC" else x
    oh, ow = (1, 1) if attrs.get("global_pooling") else (xn.shape[2] // attrs["ksize"][0] if not attrs.get(
        "adaptive") else attrs["ksize"][0], xn.shape[3] // attrs["ksize"][1] if not attrs.get("adaptive")
        else attrs["ksize"][1])
    kh, kw = xn.shape[2] // oh, xn.shape[3] // ow
    want = np.zeros(xn.shape[:2] + (oh, ow), dtype)
    for a in range(oh):
        for b in range(ow):
            acc = np.zeros(xn.shape[:2], dtype)
            for i in range(kh):
                for j in range(kw):
                    acc += xn[:, :, a * kh + i, b * kw + j]
            want[:, :, a, b] = acc / np.asarray(kh * kw)
    if kh * kw <= 16:
        np.testing.assert_array_equal(fast_out, want.astype(dtype))


def _call(attrs):
    from pybackward.ops.registry import Call
    return Call("pool2d", {}, dict(attrs), {})


@pytest.mark.parametrize("kh,kw,s,d", [(3, 8, (1, 1), (1, 1)), (5, 3, (2, 1), (1, 2)), (2, 2, (1, 3), (2, 1)),
                                       (3, 3, (1, 1), (1, 1)), (1, 8, (2, 2), (1, 1)), (8, 1, (1, 1), (1, 1)),
                                       (4, 6, (1, 1), (1, 1))])
def test_col2im_by_output_position_adds_in_kernel_tap_order(kh, kw, s, d):
    """conv's col2im loops over output positions when there are fewer of them
    than kernel taps (a text CNN's full-width filters), backwards, so each
    pixel's contributions are added in the tap order of the other loop: the
    sums are equal bit for bit, overlapping windows and dilation included."""
    from pybackward.ops.nn import conv
    rng = np.random.default_rng(kh * 100 + kw)
    n, ch, groups = 2, 4, 2
    # (the last two: up to 4 windows over a pixel with fewer outputs than
    # taps, where the order of the adds shows in float32)
    for hp, wp in [(12, 10), (d[0] * (kh - 1) + 2, d[1] * (kw - 1) + 1), (7, 17), (kh + 3, kw), (kh + 3, kw + 1)]:
        eh, ew = d[0] * (kh - 1) + 1, d[1] * (kw - 1) + 1
        if hp < eh or wp < ew:
            continue
        oh, ow = (hp - eh) // s[0] + 1, (wp - ew) // s[1] + 1
        cols = rng.standard_normal((groups, n * oh * ow, ch // groups * kh * kw)).astype(np.float32)
        c6 = cols.reshape(groups, n, oh, ow, ch // groups, kh, kw).transpose(1, 0, 4, 5, 6, 2, 3)
        c6 = np.ascontiguousarray(c6.reshape(n, ch, kh, kw, oh, ow))
        got = conv._col2im(c6, (n, ch, hp, wp), s, d, oh, ow)      # columns as (N, C, KH, KW, OH, OW)
        want = np.zeros((n, ch, hp, wp), np.float32)
        for i in range(kh):
            for j in range(kw):
                want[:, :, i * d[0]:i * d[0] + s[0] * (oh - 1) + 1:s[0],
                     j * d[1]:j * d[1] + s[1] * (ow - 1) + 1:s[1]] += c6[:, :, i, j]
        np.testing.assert_array_equal(got, want)
