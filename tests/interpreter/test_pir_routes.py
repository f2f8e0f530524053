"""Mapped PIR ops whose own legacy type has no kernel, run on another legacy kernel or on glue
(`pir_glue.ROUTES` / `GLUE`, issue #33 item 3), each checked against NumPy written here; and the
coverage file listing every mapped PIR name without a kernel (testdata/pir_opmap/no_kernel.json)."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import TESTDATA, require_paddle
from pybackward import pir
from pybackward.interpreter.pir_executor import PirExecutor
from pybackward.interpreter.pir_glue import GLUE, ROUTES, paddle_cpu, routed
from pybackward.pir.model import Operation, make_value_ids
from pybackward.pir.types import Attr, dense

COVERAGE = TESTDATA / "pir_opmap" / "no_kernel.json"


def one_op(name: str, inputs: list, consts: list | None = None, attrs: dict | None = None, results=None):
    """A program: data ops for `inputs` (arrays, or None: a null operand), `consts` as
    (position, 'full' | 'full_int_array', value) operands, then op `name`; returns (program, feeds, op)."""
    p = pir.Program()
    p.source = f"{name}.json"
    feeds, operands = {}, []
    for a in inputs:
        if a is None:
            operands.append(None)
            continue
        a = np.asarray(a)
        n = f"in{len(feeds)}"
        feeds[n] = a
        operands.append(p.block.append(Operation("pd_op.data", [], [dense(a.dtype.name, list(a.shape))], {
            "name": Attr.str_(n), "shape": Attr.int_array(list(a.shape)),
            "dtype": Attr.dtype(a.dtype.name)})).results[0])
    for pos, kind, value in consts or ():
        if kind == "full_int_array":
            v = p.block.append(Operation("pd_op.full_int_array", [], [dense("int64", [len(value)])], {
                "value": Attr.int_array(list(value)), "dtype": Attr.dtype("int64")})).results[0]
        else:
            v = p.block.append(Operation("pd_op.full", [], [dense("float32", [1])], {
                "shape": Attr.int_array([1]), "value": Attr.f64(float(value)),
                "dtype": Attr.dtype("float32")})).results[0]
        operands.insert(pos, v)
    op = p.block.append(Operation(name, operands, results or [dense("float32", [1])], attrs or {}))
    make_value_ids(p)
    return p, feeds, op


def run1(p, feeds, op, k: int = 0):
    ref = f"%{op.results[k].id}"
    return PirExecutor().run(p, feeds, {}, fetch=[ref])[ref]


rng = np.random.default_rng(0)


def test_abs_and_clip_double_grads():
    x = rng.standard_normal((3, 4)).astype(np.float32)
    ddx = rng.standard_normal((3, 4)).astype(np.float32)
    p, f, op = one_op("pd_op.abs_double_grad", [x, ddx], results=[dense("float32", [3, 4])])
    np.testing.assert_allclose(run1(p, f, op), np.sign(x) * ddx, rtol=1e-6)
    p, f, op = one_op("pd_op.clip_double_grad", [x, ddx], consts=[(2, "full", -0.5), (3, "full", 0.7)],
                      results=[dense("float32", [3, 4])])
    np.testing.assert_allclose(run1(p, f, op), np.where((x > -0.5) & (x < 0.7), ddx, 0), rtol=1e-6)


def test_pad3d_double_grad_pads_ddx():
    ddx = rng.standard_normal((1, 2, 2, 3, 3)).astype(np.float32)
    pads = [1, 0, 2, 1, 0, 1]          # left, right, top, bottom, front, back
    p, f, op = one_op("pd_op.pad3d_double_grad", [ddx], consts=[(1, "full_int_array", pads)],
                      attrs={"mode": Attr.str_("constant"), "pad_value": Attr.f64(0.5),
                             "data_format": Attr.str_("NCDHW")},
                      results=[dense("float32", [1, 2, 3, 6, 4])])
    want = np.pad(ddx, [(0, 0), (0, 0), (0, 1), (2, 1), (1, 0)], constant_values=0.5)
    np.testing.assert_allclose(run1(p, f, op), want)


def _causal(x):
    s = x.shape[-1]
    m = np.where(np.triu(np.ones((s, s), bool), 1), -np.inf, x)
    e = np.exp(m - m.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_causal_softmax_and_its_grad():
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    p, f, op = one_op("pd_op.fused_softmax_mask_upper_triangle", [x], results=[dense("float32", [2, 3, 4, 4])])
    out = run1(p, f, op)
    np.testing.assert_allclose(out, _causal(x.astype(np.float64)), rtol=1e-5, atol=1e-7)
    assert np.all(out[..., 0, 1:] == 0)
    dout = rng.standard_normal(x.shape).astype(np.float32)
    p, f, op = one_op("pd_op.fused_softmax_mask_upper_triangle_grad", [out, dout],
                      results=[dense("float32", list(x.shape))])
    got = run1(p, f, op)
    want = out * (dout - (dout * out).sum(-1, keepdims=True))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # finite differences of sum(dout * causal_softmax(x)) in float64, on the unmasked entries
    x64, d64, eps = x.astype(np.float64), dout.astype(np.float64), 1e-6
    for idx in [(0, 0, 2, 1), (1, 2, 3, 3), (0, 1, 1, 0)]:
        xp, xm = x64.copy(), x64.copy()
        xp[idx] += eps
        xm[idx] -= eps
        fd = ((d64 * _causal(xp)).sum() - (d64 * _causal(xm)).sum()) / (2 * eps)
        assert abs(fd - got[idx]) < 1e-4, (idx, fd, got[idx])


def test_range_v2():
    start, end, step = (np.array([v], np.int64) for v in (2, 11, 3))
    p, f, op = one_op("pd_op.range_v2", [start, end, step], attrs={"dtype": Attr.dtype("int64")},
                      results=[dense("int64", [3])])
    got = run1(p, f, op)
    assert got.dtype == np.int64 and got.tolist() == [2, 5, 8]


def test_view_dtype():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    p, f, op = one_op("pd_op.view_dtype", [x], attrs={"dtype": Attr.dtype("int16")}, results=[dense("int16", [3, 8])])
    np.testing.assert_array_equal(run1(p, f, op), x.view(np.int16))
    g = rng.standard_normal((3, 8)).astype(np.float32).view(np.int16)[:, :8]
    p, f, op = one_op("pd_op.view_dtype_grad", [x, g], attrs={"dtype": Attr.dtype("int16")},
                      results=[dense("float32", [3, 4])])
    np.testing.assert_array_equal(run1(p, f, op), np.ascontiguousarray(g).view(np.float32))


def test_embedding_with_scaled_gradient_and_max_pool2d_v2_forwards():
    w = rng.standard_normal((5, 3)).astype(np.float32)
    ids = np.array([[0, 4], [2, 2]], np.int64)
    p, f, op = one_op("pd_op.embedding_with_scaled_gradient", [ids, w], attrs={"padding_idx": Attr.i64(-1)},
                      results=[dense("float32", [2, 2, 3])])
    np.testing.assert_array_equal(run1(p, f, op), w[ids])
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    ints = lambda v: Attr.array([Attr.i32(i) for i in v])      # noqa: E731
    p, f, op = one_op("pd_op.max_pool2d_v2", [x], attrs={
        "kernel_size": ints([2, 2]), "strides": ints([2, 2]), "paddings": ints([0, 0]),
        "data_format": Attr.str_("NCHW"), "global_pooling": Attr.bool_(False), "adaptive": Attr.bool_(False)},
        results=[dense("float32", [1, 2, 2, 2]), dense("int32", [1, 2, 2, 2])])
    np.testing.assert_array_equal(run1(p, f, op), x.reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5)))


def test_print_and_stream_syncs_pass_their_value_through():
    x = rng.standard_normal((2, 2)).astype(np.float32)
    for name in ("pd_op.print", "pd_op.sync_calc_stream", "pd_op.sync_comm_stream_"):
        p, f, op = one_op(name, [x], results=[dense("float32", [2, 2])])
        np.testing.assert_array_equal(run1(p, f, op), x)


def test_every_route_is_a_mapped_name_whose_type_has_no_kernel():
    from pybackward.ops import registry
    from pybackward.pir import opmap
    for name, r in ROUTES.items():
        m = opmap.pir_to_legacy(name)
        assert m is not None and (registry.find(m.legacy_type) is None or registry.find(m.legacy_type).kernel is None)
        assert registry.get(r.legacy_type).kernel is not None and routed(name) is not None, name


# ------------------------------------------------------------------ the coverage file
def test_the_coverage_file_is_current(tmp_path):
    out = tmp_path / "no_kernel.json"
    r = subprocess.run([sys.executable, str(COVERAGE.parent / "gen_no_kernel.py"), "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text()) == json.loads(COVERAGE.read_text())


def test_the_coverage_file_lists_every_mapped_name_without_a_kernel():
    cov = json.loads(COVERAGE.read_text())
    rows = cov["ops"]
    assert len(rows) >= 200
    runs = [n for n, r in rows.items() if r["runs"]]
    assert set(ROUTES) | {n for n in GLUE if n in rows} <= set(runs)
    for n, r in rows.items():
        rec = paddle_cpu(n)
        assert r["paddle_cpu"] == (rec["cpu"] if rec else None), n
    assert cov["counts"]["runs"] == len(runs) and cov["counts"]["names"] == len(rows)


@pytest.mark.paddle
def test_the_cpu_kernel_record_is_current(tmp_path):
    """Re-record pybackward/data/pir_cpu_kernels.json with the live Paddle: it must not have changed."""
    from pybackward.interpreter.pir_glue import CPU_KERNELS_FILE
    py = require_paddle()
    out = tmp_path / "pir_cpu_kernels.json"
    r = subprocess.run([py, str(COVERAGE.parent / "gen_cpu_kernels.py"), "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(out.read_text())["ops"] == json.loads(CPU_KERNELS_FILE.read_text())["ops"]
