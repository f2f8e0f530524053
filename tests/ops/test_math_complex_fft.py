"""Complex and spectral ops (ops/math/complex.py, ops/math/fft.py): the complex mode of
the finite-difference check, a whole program with complex vars, and the
kernels' edges and errors. Values against Paddle 3.3.1 are in
tests/ops/test_kernels_vs_paddle.py (families `complex` and `fft`)."""
from __future__ import annotations

import numpy as np
import pytest

import pybackward
from pybackward._proto import framework_pb2 as pb
from pybackward.base.errors import ExecutionError
from pybackward.interpreter.executor import Executor, Scope
from pybackward.ops import opcheck, registry
from pybackward.ops.registry import Sample


# --------------------------------------------------------------------------
# The complex finite-difference mode and Paddle's convention
# --------------------------------------------------------------------------
def _conjugated(monkeypatch, grad_type: str, slot: str = "X@GRAD") -> None:
    """Make a grad kernel return the conjugate of its gradient: the other
    convention (dL/dRe - i dL/dIm), which the check must reject."""
    gdef = registry.get(grad_type)
    right = gdef.kernel
    monkeypatch.setattr(gdef, "kernel", lambda c: {slot: np.conj(right(c)[slot])})


@pytest.mark.parametrize("op,grad_type", [("imag", "imag_grad"), ("fft_c2c", "fft_c2c_grad"),
                                          ("angle", "angle_grad"), ("fft_c2r", "fft_c2r_grad")])
def test_complex_fd_check_rejects_the_conjugate_convention(monkeypatch, op, grad_type):
    opdef = registry.get(op)
    sample = opdef.samples(np.random.default_rng(1234))[0]
    assert all(r.ok for r in opcheck.check_op_grad(opdef, sample))
    _conjugated(monkeypatch, grad_type)
    results = opcheck.check_op_grad(opdef, sample)
    assert results and not all(r.ok for r in results)


def test_complex_fd_check_uses_dre_plus_i_dim_by_hand():
    """out = Re(w z) for a fixed complex w: Paddle's gradient is conj(w) dOut
    (dL/dRe z = Re(w) dOut, dL/dIm z = -Im(w) dOut) - the convention checked
    against a live Paddle; complex_grad of (X, Y) splits it into (Re, Im)."""
    z = np.array([1 + 2j, -0.5 + 0.3j])
    w = np.array([0.7 - 1.1j, 2.0 + 0.5j])
    scope = {"x0": z, "out0@GRAD": np.array([1.0, -2.0])}
    fwd = registry.FwdOp("real", {"X": ["x0"]}, {"Out": ["out0"]}, [], frozenset())
    (g,) = registry.get("real").make_grad(fwd)
    dz = opcheck.run_kernel(g.type, {"Out@GRAD": [scope["out0@GRAD"]]}, {}, g.outputs)["X@GRAD"][0]
    np.testing.assert_array_equal(dz, [1.0, -2.0])      # d Re(z): the real axis
    # a complex cotangent c on a complex output stands for Re(conj(c) out)
    c = np.array([0.3 - 0.4j, 1.5 + 2.0j])
    out = w * z
    assert opcheck._objective({"Out": [out]}, {"Out": ["o"]}, {"o": c}) == pytest.approx(
        float(np.sum(c.real * out.real + c.imag * out.imag)))
    results = opcheck.check_op_grad(registry.get("complex"), Sample(
        {"X": [z.real.copy()], "Y": [z.imag.copy()]}))
    assert len(results) == 2 and all(r.ok for r in results)


def test_complex_cotangents_are_complex_and_reproducible():
    a = opcheck.complex_cotangent(np.random.default_rng(3), (2, 3))
    b = opcheck.complex_cotangent(np.random.default_rng(3), (2, 3))
    assert a.dtype == np.complex128 and np.array_equal(a, b) and np.all(a.imag != 0)


# --------------------------------------------------------------------------
# A program with complex vars: backward pass + interpreter + sum of complex grads
# --------------------------------------------------------------------------
def _var(block, name: str, dtype: int, shape: list[int]) -> None:
    v = block.vars.add()
    v.name = name
    v.type.type = pb.VarType.DENSE_TENSOR
    v.type.dense_tensor.tensor.data_type = dtype
    v.type.dense_tensor.tensor.dims.extend(shape)


def _op(block, op_type: str, ins: dict, outs: dict, attrs: dict | None = None) -> None:
    op = block.ops.add()
    op.type = op_type
    for slot, args in ins.items():
        op.inputs.add(parameter=slot, arguments=args)
    for slot, args in outs.items():
        op.outputs.add(parameter=slot, arguments=args)
    op.attrs.extend(opcheck.encode_attrs(attrs or {}))


def _spectral_program() -> pybackward.Program:
    """loss = sum(Re(fft(x, ortho)) * angle(x)) + sum(irfft(rfft(y)) * y): x
    complex128 (read twice, so its two gradients are summed), y float64."""
    d = pb.ProgramDesc()
    b = d.blocks.add()
    b.idx, b.parent_idx = 0, -1
    C, F = pb.VarType.COMPLEX128, pb.VarType.FP64
    for name, t, shape in [("x", C, [4]), ("y", F, [6]), ("fx", C, [4]), ("re", F, [4]), ("ang", F, [4]),
                           ("t", F, [4]), ("s1", F, []), ("ry", C, [4]), ("iy", F, [6]), ("u", F, [6]),
                           ("s2", F, []), ("loss", F, [])]:
        _var(b, name, t, shape)
    _op(b, "fft_c2c", {"X": ["x"]}, {"Out": ["fx"]}, {"axes": [0], "normalization": "ortho", "forward": True})
    _op(b, "real", {"X": ["fx"]}, {"Out": ["re"]})
    _op(b, "angle", {"X": ["x"]}, {"Out": ["ang"]})
    _op(b, "elementwise_mul", {"X": ["re"], "Y": ["ang"]}, {"Out": ["t"]}, {"axis": -1})
    _op(b, "reduce_sum", {"X": ["t"]}, {"Out": ["s1"]}, {"reduce_all": True, "dim": [], "keep_dim": False})
    _op(b, "fft_r2c", {"X": ["y"]}, {"Out": ["ry"]},
        {"axes": [0], "normalization": "backward", "forward": True, "onesided": True})
    _op(b, "fft_c2r", {"X": ["ry"]}, {"Out": ["iy"]},
        {"axes": [0], "normalization": "backward", "forward": False, "last_dim_size": 6})
    _op(b, "elementwise_mul", {"X": ["iy"], "Y": ["y"]}, {"Out": ["u"]}, {"axis": -1})
    _op(b, "reduce_sum", {"X": ["u"]}, {"Out": ["s2"]}, {"reduce_all": True, "dim": [], "keep_dim": False})
    _op(b, "elementwise_add", {"X": ["s1"], "Y": ["s2"]}, {"Out": ["loss"]}, {"axis": -1})
    return pybackward.loads(d.SerializeToString(), source="spectral.pb")


def test_program_with_complex_vars_differentiates_and_runs():
    prog = _spectral_program()
    pybackward.append_backward(prog.var("loss"))
    types = [op.type for op in prog.global_block().ops]
    assert {"fft_c2c_grad", "real_grad", "angle_grad", "fft_r2c_grad", "fft_c2r_grad", "sum"} <= set(types)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    y = rng.standard_normal(6)
    loss, gx, gy = Executor().run(prog, feed={"x": x, "y": y}, fetch_list=["loss", "x@GRAD", "y@GRAD"],
                                  scope=Scope())

    def f(xv, yv):
        return float(np.sum(np.fft.fft(xv, norm="ortho").real * np.angle(xv))
                     + np.sum(np.fft.irfft(np.fft.rfft(yv), 6) * yv))

    assert loss == pytest.approx(f(x, y))
    assert gx.dtype == np.complex128 and gy.dtype == np.float64
    e = 1e-6
    num_x = [(f(x + d, y) - f(x - d, y)) / (2 * e) + 1j * (f(x + 1j * d, y) - f(x - 1j * d, y)) / (2 * e)
             for d in np.eye(4) * e]
    num_y = [(f(x, y + d) - f(x, y - d)) / (2 * e) for d in np.eye(6) * e]
    np.testing.assert_allclose(gx, num_x, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gy, num_y, rtol=1e-6, atol=1e-8)


# --------------------------------------------------------------------------
# Edges and errors
# --------------------------------------------------------------------------
def _run(op: str, ins: dict, attrs: dict | None = None, out: str = "Out"):
    return opcheck.run_kernel(op, ins, attrs or {}, {out: ["o"]})[out][0]


def test_dtypes_follow_paddle():
    f32 = np.ones((2, 2), np.float32)
    assert _run("complex", {"X": [f32], "Y": [f32]}).dtype == np.complex64
    c64 = _run("as_complex", {"X": [f32]})
    assert c64.dtype == np.complex64 and c64.shape == (2,)
    assert _run("real", {"X": [c64]}).dtype == np.float32
    assert _run("as_real", {"X": [c64]}).shape == (2, 2)
    r2c = _run("fft_r2c", {"X": [np.ones(8, np.float32)]}, {"axes": [0], "normalization": "backward",
                                                            "forward": True, "onesided": True})
    assert r2c.dtype == np.complex64 and r2c.shape == (5,)
    c2r = _run("fft_c2r", {"X": [r2c]}, {"axes": [0], "normalization": "backward", "forward": False,
                                         "last_dim_size": 0})
    assert c2r.dtype == np.float32 and c2r.shape == (8,)
    np.testing.assert_allclose(c2r, 1.0, rtol=1e-6)
    ints = np.array([[1, -2], [3, 4]], np.int64)
    out = _run("conj", {"X": [ints]})
    assert out.dtype == np.int64 and np.array_equal(out, ints)


def test_angle_of_real_input_is_pi_for_negatives_and_keeps_nan():
    x = np.array([-2.0, -0.0, 0.0, 3.0, np.nan])
    out = _run("angle", {"X": [x]})
    np.testing.assert_array_equal(out[:4], [np.pi, 0, 0, 0])
    assert np.isnan(out[4])


def test_fft_normalizations_match_numpy():
    x = np.random.default_rng(0).standard_normal((3, 4)) + 0j
    for norm in ("backward", "forward", "ortho"):
        fwd = _run("fft_c2c", {"X": [x]}, {"axes": [0, 1], "normalization": norm, "forward": True})
        inv = _run("fft_c2c", {"X": [x]}, {"axes": [0, 1], "normalization": norm, "forward": False})
        np.testing.assert_allclose(fwd, np.fft.fft2(x, norm=norm))
        np.testing.assert_allclose(inv, np.fft.ifft2(x, norm=norm))


@pytest.mark.parametrize("op,ins,attrs,match", [
    ("fft_c2c", {"X": [np.ones(4, complex)]}, {"axes": [0], "normalization": "none"}, "normalization"),
    ("fft_c2c", {"X": [np.ones(4)]}, {"axes": [0]}, "must be complex64 or complex128"),
    ("fft_c2c", {"X": [np.ones(4, complex)]}, {"axes": [1]}, "out of range"),
    ("fft_c2r", {"X": [np.ones(2, complex)]}, {"axes": [0], "last_dim_size": 8}, "read 5 bins"),
    ("as_complex", {"X": [np.ones((2, 3))]}, {}, "last dim must be 2"),
    ("real", {"X": [np.ones(3)]}, {}, "complex64 or complex128"),
    ("overlap_add", {"X": [np.ones((3, 4))]}, {"hop_length": 4, "axis": -1}, "must not exceed"),
    ("frame", {"X": [np.ones(3)]}, {"frame_length": 4, "hop_length": 1, "axis": -1}, "frame_length"),
    ("frame", {"X": [np.ones(6)]}, {"frame_length": 2, "hop_length": 1, "axis": 1}, "axis"),
    ("stft", {"X": [np.ones(8)], "Window": [np.ones(4)]}, {"n_fft": 4, "hop_length": 1}, "2-D"),
])
def test_bad_inputs_are_execution_errors(op, ins, attrs, match):
    with pytest.raises(ExecutionError, match=match):
        _run(op, ins, attrs)
