"""Complex gradients of every op whose Paddle 3.3.1 CPU kernel takes complex.

Paddle's convention for a real loss L and a complex input z is
dL/dRe(z) + i dL/dIm(z), so a grad kernel computes dOut * conj(dOut/dX)
(opcheck's complex finite differences, tests/ops/test_math_complex_fft.py). This file
sweeps the registry generically: for every op with a kernel, a grad and
samples whose Paddle CPU kernel registers complex64 / complex128
(testdata/kernels/cpu_kernels.json), each sample's float inputs are replaced
by random complex ones of the same shapes and the op's grad kernels are
checked by central finite differences. A grad kernel that forgets a
conjugate fails here. Values against Paddle's own complex kernels are in
tests/ops/test_kernels_vs_paddle.py (the complex samples of each family).
"""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from pybackward.base.errors import ExecutionError
from pybackward.ops import opcheck, registry
from pybackward.ops.registry import Sample

CPU_KERNELS = json.loads((pathlib.Path(__file__).resolve().parents[2] / "testdata" / "kernels"
                          / "cpu_kernels.json").read_text())["ops"]
OPS = registry.all_ops()

#: Ops with complex Paddle kernels that pybackward refuses complex for, each with why.
#: The test checks they refuse with an ExecutionError (not a wrong value).
REFUSES_COMPLEX = {
    "determinant": "linalg kernels are real-only in pybackward so far (Paddle: complex det)",
    "inverse": "linalg kernels are real-only in pybackward so far",
    "matrix_power": "linalg kernels are real-only in pybackward so far",
    "slogdeterminant": "linalg kernels are real-only in pybackward so far",
    "slogdet_v2": "linalg kernels are real-only in pybackward so far",
    "triangular_solve": "linalg kernels are real-only in pybackward so far",
    "elementwise_mod": "Paddle 3.3.1 has no CPU kernel for its grad op remainder_grad",
    **{t: "decompositions are real-only in pybackward so far (Paddle: complex kernels)"
       for t in ("eigh", "eigvalsh", "lu", "lu_solve", "lu_unpack", "qr", "svd")},
    "gaussian_inplace": "Paddle 3.3.1's CPU kernel draws float32 / float64 only",
}

#: Ops whose complex gradient is not checked, each with why.
NO_CHECK = {
    "as_strided": "its `offset` attr counts bytes: the sweep's complex copy of a float sample keeps an "
                  "offset that is not a multiple of the complex item size (refused, as Paddle reads "
                  "misaligned memory there)",
    "sign": "X/|X| is not constant for complex X, but Paddle's grad maker emits `scale` by 0 "
            "(the grad op comes from Paddle's records; docs/deviations.md)",
}


#: Attrs that count bytes of X's element (Paddle's strided-view ops): the
#: complex copy of a float64 sample doubles them, so they still name whole elements.
BYTE_ATTRS = {
    "index_elementwise_get": ("index_stride", "slice_offset"),
    "index_elementwise_put": ("index_strides", "slice_offset"),
    "index_elementwise_put_with_tensor": ("index_strides", "slice_offset"),
}


def _scale_byte_attrs(op_type: str, sample: Sample, factor: int) -> None:
    for name in BYTE_ATTRS.get(op_type, ()):
        v = sample.attrs.get(name)
        if v is not None:
            sample.attrs[name] = [int(e) * factor for e in v] if isinstance(v, (list, tuple)) else int(v) * factor


def _complex_op(op_type: str) -> bool:
    info = CPU_KERNELS.get(op_type)
    return bool(info) and any(t in info["cpu"] for t in ("complex<float>", "complex<double>"))


def _complex_sample(sample: Sample, rng: np.random.Generator) -> Sample:
    """The sample with each float input replaced by a random complex one of its shape."""
    ins = {}
    for slot, arrs in sample.inputs.items():
        ins[slot] = []
        for a in arrs:
            a = np.asarray(a)
            if a.dtype.kind == "f":
                a = 0.5 * (rng.standard_normal(a.shape) + 1j * rng.standard_normal(a.shape)) + (0.3 + 0.2j)
            ins[slot].append(a)
    return Sample(ins, dict(sample.attrs), outputs=sample.outputs, wrt=sample.wrt, note=sample.note)


def _cases():
    for op_type, d in sorted(OPS.items()):
        if (d.kernel is None or d.grad is None or d.grad_of is not None or d.samples is None
                or not _complex_op(op_type)):
            continue
        for i, s in enumerate(d.samples(np.random.default_rng(1234))):
            if any(np.asarray(a).dtype.kind == "f" for arrs in s.inputs.values() for a in arrs):
                yield pytest.param(op_type, i, id=f"{op_type}-{i}")


CASES = list(_cases())


def test_the_sweep_covers_the_complex_ops():
    ops = {p.values[0] for p in CASES}
    must = {"elementwise_mul", "elementwise_div", "elementwise_pow", "matmul_v2", "dot", "kron", "cross", "exp",
            "log", "sin", "tanh", "sigmoid", "sqrt", "square", "abs", "pow", "reduce_prod", "cumprod",
            "frobenius_norm", "nansum", "softsign", "softplus", "hard_swish", "acosh", "log1p"}
    assert must <= ops, must - ops


@pytest.mark.parametrize("op_type,index", CASES)
def test_complex_grad_matches_finite_differences(op_type, index):
    if op_type in NO_CHECK:
        pytest.skip(NO_CHECK[op_type])
    d = OPS[op_type]
    real = d.samples(np.random.default_rng(1234))[index]
    sample = _complex_sample(real, np.random.default_rng(7 + index))
    if op_type in BYTE_ATTRS:
        x = np.asarray(next(iter(real.inputs.values()))[0])
        _scale_byte_attrs(op_type, sample, np.dtype(np.complex128).itemsize // x.dtype.itemsize)
    if op_type in REFUSES_COMPLEX:
        with pytest.raises(ExecutionError):
            opcheck.check_op_grad(d, sample)
        return
    results = opcheck.check_op_grad(d, sample)
    assert results, f"{op_type}: nothing was checked"
    bad = [r for r in results if not r.ok]
    assert not bad, f"{op_type} sample {index} (complex): " + ", ".join(
        f"{r.var} max abs err {r.max_abs:.3g}, rel {r.max_rel:.3g}" for r in bad)


def _sin_grad_unconjugated(c):
    return {"X@GRAD": c.x("Out@GRAD") * np.cos(c.x("X"))}


def _dot_grad_unconjugated(c):
    g = c.x("Out@GRAD")[..., None]
    return {"X@GRAD": g * c.x("Y"), "Y@GRAD": g * c.x("X")}


@pytest.mark.parametrize("op_type,grad_type,wrong", [("sin", "sin_grad", _sin_grad_unconjugated),
                                                     ("dot", "dot_grad", _dot_grad_unconjugated)])
def test_the_sweep_rejects_a_missing_conjugate(monkeypatch, op_type, grad_type, wrong):
    """A grad kernel giving dOut * dOut/dX (no conjugate) fails the sweep."""
    index = next(p.values[1] for p in CASES if p.values[0] == op_type)
    sample = _complex_sample(OPS[op_type].samples(np.random.default_rng(1234))[index], np.random.default_rng(7))
    assert all(r.ok for r in opcheck.check_op_grad(OPS[op_type], sample))
    monkeypatch.setattr(registry.get(grad_type), "kernel", wrong)
    assert not any(r.ok for r in opcheck.check_op_grad(OPS[op_type], sample))


# --------------------------------------------------------------------------
# dtypes, and refusing complex where Paddle has no complex kernel
# --------------------------------------------------------------------------
def _run(op_type, ins, attrs=None, outs=None):
    d = OPS[op_type]
    outs = outs or {s: [s.lower()] for s in d.outputs}
    return opcheck.run_kernel(op_type, ins, attrs or {}, outs)


@pytest.mark.parametrize("dtype,real", [(np.complex64, np.float32), (np.complex128, np.float64)])
def test_abs_of_complex_is_real_and_its_grad_is_dout_z_over_abs_z(dtype, real):
    z = np.array([3 + 4j, 0j, -1 - 1j], dtype)
    out = _run("abs", {"X": [z]})["Out"][0]
    assert out.dtype == real
    np.testing.assert_allclose(out, [5.0, 0.0, np.sqrt(2.0)], rtol=1e-6)
    g = np.array([1.0, 2.0, -1.0], real)
    dz = opcheck.run_kernel("abs_grad", {"X": [z], "Out@GRAD": [g]}, {}, {"X@GRAD": ["dx"]})["X@GRAD"][0]
    assert dz.dtype == dtype
    np.testing.assert_allclose(dz, [0.6 + 0.8j, 0.0, -(-1 - 1j) / np.sqrt(2.0)], rtol=1e-6)


@pytest.mark.parametrize("op_type,ins", [
    ("rsqrt", {"X": [np.array([1 + 1j])]}),
    ("relu", {"X": [np.array([1 + 1j])]}),
    ("erf", {"X": [np.array([1 + 1j])]}),
    ("floor", {"X": [np.array([1 + 1j])]}),
    ("mul", {"X": [np.ones((2, 2), complex)], "Y": [np.ones((2, 2), complex)]}),
    ("matmul", {"X": [np.ones((2, 2), complex)], "Y": [np.ones((2, 2), complex)]}),
    ("bmm", {"X": [np.ones((1, 2, 2), complex)], "Y": [np.ones((1, 2, 2), complex)]}),
    ("elementwise_max", {"X": [np.ones(2, complex)], "Y": [np.ones(2, complex)]}),
    ("reduce_max", {"X": [np.ones(2, complex)]}),
    ("p_norm", {"X": [np.ones(2, complex)]}),
])
def test_ops_without_a_paddle_complex_kernel_refuse_complex(op_type, ins):
    assert not _complex_op(op_type)
    with pytest.raises(ExecutionError, match="complex"):
        _run(op_type, ins)


def test_real_inputs_keep_their_real_kernels():
    """The conjugates are taken only for complex arrays: real grads stay real."""
    x, y, g = np.array([1.5, -2.0]), np.array([0.5, 3.0]), np.array([1.0, 1.0])
    res = opcheck.run_kernel("elementwise_mul_grad", {"X": [x], "Y": [y], "Out@GRAD": [g]}, {"axis": -1},
                             {"X@GRAD": ["dx"], "Y@GRAD": ["dy"]})
    assert res["X@GRAD"][0].dtype == np.float64
    np.testing.assert_array_equal(res["X@GRAD"][0], y)
    np.testing.assert_array_equal(res["Y@GRAD"][0], x)
