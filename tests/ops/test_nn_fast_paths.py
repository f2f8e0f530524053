"""The conv2d input gradient's fast paths (issue #37 item 4) against a direct reference.

conv2d_grad's Input@GRAD takes one of several routes by geometry: a strided
conv on a small map spreads Out@GRAD out by the stride and convolves it with
the flipped filter (one gather, one GEMM); a filter as wide as the input (a
text CNN's) convolves along H only; a strided conv on a large map scatters.
Each is checked here against the gradient written out tap by tap in float64:
float64 inputs give it to rounding, and float32 inputs on the gather paths
give it rounded once (each pixel one float64 sum), which the old KH*KW-pass
scatter of float32-rounded columns did not.
"""
from __future__ import annotations

import numpy as np
import pytest

from pybackward.ops import registry
from pybackward.ops.registry import Call


def _reference(dy, w, x_shape, p, s, d, groups):
    """d conv / d x in float64, one scatter-add of sum_m dy[m] w[m, c, i, j] per tap."""
    n, ch, h, wd = x_shape
    m, cg, kh, kw = w.shape
    oh, ow = dy.shape[2:]
    dx = np.zeros((n, ch, h + p[0] + p[1], wd + p[2] + p[3]))
    mg = m // groups
    for g in range(groups):
        dyg = dy[:, g * mg:(g + 1) * mg].astype(np.float64)
        for i in range(kh):
            for j in range(kw):
                wg = w[g * mg:(g + 1) * mg, :, i, j].astype(np.float64)
                dx[:, g * cg:(g + 1) * cg, i * d[0]:i * d[0] + s[0] * (oh - 1) + 1:s[0],
                   j * d[1]:j * d[1] + s[1] * (ow - 1) + 1:s[1]] += np.einsum("nmab,mc->ncab", dyg, wg)
    return dx[:, :, p[0]:p[0] + h, p[2]:p[2] + wd]


# (input shape, filter shape, strides, paddings [t, b, l, r], dilations, groups)
SPREAD = [((2, 6, 7, 7), (6, 6, 3, 3), (2, 2), (0, 0, 0, 0), (1, 1), 1),
          ((2, 4, 8, 8), (8, 4, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),
          ((2, 6, 9, 9), (6, 2, 3, 3), (2, 2), (1, 1, 1, 1), (2, 2), 3),
          ((1, 3, 8, 7), (4, 3, 2, 3), (2, 3), (0, 1, 1, 0), (1, 1), 1),
          ((2, 3, 6, 6), (3, 1, 3, 3), (2, 1), (1, 1, 1, 1), (1, 1), 3)]      # depthwise
FULL_WIDTH = [((2, 1, 8, 16), (4, 1, 4, 16), (1, 1), (0, 0, 0, 0), (1, 1), 1),
              ((2, 1, 8, 16), (4, 1, 3, 16), (1, 1), (1, 2, 0, 0), (2, 1), 1),
              ((2, 4, 5, 3), (6, 2, 2, 3), (1, 1), (1, 0, 0, 0), (1, 1), 2)]
SCATTER = [((2, 3, 32, 32), (12, 3, 7, 7), (2, 2), (0, 0, 0, 0), (1, 1), 1),      # a large map
           ((2, 12, 3, 3), (20, 12, 3, 3), (2, 2), (0, 0, 0, 0), (1, 1), 1)]      # one output position


def _input_grad(x, w, dy, s, p, d, groups):
    kernel = registry.find("conv2d_grad").kernel
    attrs = {"strides": list(s), "paddings": list(p), "dilations": list(d), "groups": groups,
             "padding_algorithm": "EXPLICIT", "data_format": "NCHW"}
    res = kernel(Call("conv2d_grad", {"Input": [x], "Filter": [w], "Output@GRAD": [dy]}, attrs,
                      {"Input@GRAD": ["x@GRAD"], "Filter@GRAD": ["w@GRAD"]}))
    return res["Input@GRAD"]


def _case(rng, xs, ws, s, p, d, dtype):
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    oh = (xs[2] + p[0] + p[1] - (d[0] * (ws[2] - 1) + 1)) // s[0] + 1
    ow = (xs[3] + p[2] + p[3] - (d[1] * (ws[3] - 1) + 1)) // s[1] + 1
    dy = rng.standard_normal((xs[0], ws[0], oh, ow)).astype(dtype)
    return x, w, dy


@pytest.mark.parametrize("xs, ws, s, p, d, groups", SPREAD + FULL_WIDTH + SCATTER)
def test_conv_input_grad_float64_is_the_reference(xs, ws, s, p, d, groups):
    x, w, dy = _case(np.random.default_rng(1), xs, ws, s, p, d, np.float64)
    got = _input_grad(x, w, dy, s, p, d, groups)
    assert got.dtype == np.float64 and got.shape == x.shape
    np.testing.assert_allclose(got, _reference(dy, w, xs, p, s, d, groups), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("xs, ws, s, p, d, groups", SPREAD + FULL_WIDTH)
def test_conv_input_grad_float32_is_each_pixel_rounded_once(xs, ws, s, p, d, groups):
    """The gather paths sum each pixel in float64 and round once: the
    float64 reference rounded to float32, bit for bit (a strided conv used to
    scatter float32-rounded columns, tens of ulps away)."""
    x, w, dy = _case(np.random.default_rng(2), xs, ws, s, p, d, np.float32)
    got = _input_grad(x, w, dy, s, p, d, groups)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, _reference(dy, w, xs, p, s, d, groups).astype(np.float32))


@pytest.mark.parametrize("xs, ws, s, p, d, groups", SCATTER)
def test_conv_input_grad_float32_scatter_stays_close(xs, ws, s, p, d, groups):
    x, w, dy = _case(np.random.default_rng(3), xs, ws, s, p, d, np.float32)
    ref = _reference(dy, w, xs, p, s, d, groups)
    got = _input_grad(x, w, dy, s, p, d, groups)
    assert np.abs(got - ref).max() <= 1e-6 * np.abs(ref).max()
