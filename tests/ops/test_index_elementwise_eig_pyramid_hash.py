"""Kernels of ops/index/index_elementwise.py beyond the registry-wide checks.

eig on a REAL X: Paddle's eig_grad kernel makes a complex X@GRAD, which Paddle's executor (as
pybackward's interpreter, which casts every output to its declared dtype) hands on as its real
part in X's dtype. Checked here by finite differences (phase-invariant, see opcheck.PhaseSample)
and against Paddle's values (testdata/kernels/last_diff_probe.py).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from pybackward.ops import opcheck, registry
from conftest import TESTDATA

EIG_REF = TESTDATA / "kernels" / "last_diff_probe.ref.npz"
EIG_CASES = ("real_spectrum", "pair", "batch_pairs", "one")


@pytest.mark.parametrize("name", EIG_CASES)
def test_eig_real_x_grad_matches_finite_differences(name):
    x = np.load(EIG_REF)[f"{name}|in|X|0"]
    sample = opcheck.PhaseSample({"X": [x]}, phase_invariant=("Eigenvectors",))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)  # the real part is X's gradient
        results = opcheck.check_op_grad(registry.get("eig"), sample)
    assert results and all(r.ok for r in results), results


@pytest.mark.parametrize("dtype", ("float32", "float64"))
@pytest.mark.parametrize("name", EIG_CASES)
def test_eig_real_x_matches_paddle(name, dtype):
    """Forward: Paddle's values (in float32 up to each eigenvector's sign: Paddle's own sgeev picks
    other signs than its dgeev on batch_pairs, numpy's sgeev those of dgeev). Grad: eig_grad on
    Paddle's own eigenvectors gives Paddle's X@GRAD (for a batch, its first matrix only: Paddle
    fills every matrix's diagonal with the first matrix's Eigenvalues@GRAD, docs/deviations.md)."""
    ref = np.load(EIG_REF)
    x = ref[f"{name}|in|X|0"].astype(dtype)
    ct = np.complex64 if dtype == "float32" else np.complex128
    outs = opcheck.run_kernel("eig", {"X": [x]}, {}, {"Eigenvalues": ["w"], "Eigenvectors": ["v"]})
    tol = dict(rtol=2e-4, atol=2e-5) if dtype == "float32" else dict(rtol=1e-7, atol=1e-10)
    w, v = ref[f"{name}|{dtype}|out|Eigenvalues|0"], ref[f"{name}|{dtype}|out|Eigenvectors|0"]
    assert outs["Eigenvalues"][0].dtype == w.dtype == outs["Eigenvectors"][0].dtype == v.dtype == ct
    np.testing.assert_allclose(outs["Eigenvalues"][0], w, **tol)
    got_v = outs["Eigenvectors"][0]
    np.testing.assert_allclose(opcheck.align_phases(got_v, v) if dtype == "float32" else got_v, v, **tol)
    g = opcheck.run_kernel("eig_grad", {"Eigenvalues": [w], "Eigenvectors": [v],
                                        "Eigenvalues@GRAD": [ref[f"{name}|cot|Eigenvalues|0"].astype(ct)],
                                        "Eigenvectors@GRAD": [ref[f"{name}|cot|Eigenvectors|0"].astype(ct)]},
                           {}, {"X@GRAD": ["g"]})["X@GRAD"][0]
    assert g.dtype == ct    # Paddle's kernel: complex; its executor keeps the real part
    want = ref[f"{name}|{dtype}|grad|X|0"]
    assert want.dtype == x.dtype
    got = np.real(g).astype(x.dtype)
    if x.ndim == 3:
        got, want = got[0], want[0]
    np.testing.assert_allclose(got, want, **(tol if dtype == "float64" else dict(rtol=2e-3, atol=2e-4)))


def test_paddle_eig_grad_batch_uses_first_eigenvalue_grad():
    """The Paddle deviation itself: its batch X@GRAD beyond the first matrix is eig_grad's
    formula with the first matrix's Eigenvalues@GRAD on the diagonal."""
    ref = np.load(EIG_REF)
    w, v = ref["batch_pairs|float64|out|Eigenvalues|0"], ref["batch_pairs|float64|out|Eigenvectors|0"]
    gw, gv = ref["batch_pairs|cot|Eigenvalues|0"], ref["batch_pairs|cot|Eigenvectors|0"]
    gw_first = np.broadcast_to(gw[:1], gw.shape).copy()
    g = opcheck.run_kernel("eig_grad", {"Eigenvalues": [w], "Eigenvectors": [v], "Eigenvalues@GRAD": [gw_first],
                                        "Eigenvectors@GRAD": [gv]}, {}, {"X@GRAD": ["g"]})["X@GRAD"][0]
    np.testing.assert_allclose(np.real(g), ref["batch_pairs|float64|grad|X|0"], rtol=1e-7, atol=1e-10)


def test_eig_real_x_grad_in_a_program_is_real():
    """In a program the complex X@GRAD of a real X is cast to X's dtype by the interpreter (as
    Paddle's executor does), its real part taken without a ComplexWarning: sum(Re + Im of the
    eigenvalues) has the identity as gradient."""
    import pybackward as pb
    prog = pb.Program()
    b = prog.global_block()
    b.create_var("x", shape=(3, 3), dtype="float64")
    b.create_var("w", shape=(3,), dtype="complex128")
    b.create_var("v", shape=(3, 3), dtype="complex128")
    b.append_op("eig", {"X": ["x"]}, {"Eigenvalues": ["w"], "Eigenvectors": ["v"]})
    b.create_var("r", shape=(3, 2), dtype="float64")
    b.append_op("as_real", {"X": ["w"]}, {"Out": ["r"]})
    b.create_var("loss", shape=(), dtype="float64")
    b.append_op("reduce_sum", {"X": ["r"]}, {"Out": ["loss"]}, {"reduce_all": True, "dim": [], "keep_dim": False})
    pb.append_backward("loss", program=prog)
    x = np.load(EIG_REF)["pair|in|X|0"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.ComplexWarning)
        (g,) = pb.Executor().run(prog, feed={"x": x}, fetch_list=["x@GRAD"])
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, np.eye(3), atol=1e-9)   # d(trace)/dX; the pair's imaginary parts cancel


# --------------------------------------------------------------------------
# index_elementwise_*: the samples Paddle refuses or gets wrong, compared where it is right
# --------------------------------------------------------------------------
KDIR = TESTDATA / "kernels"


def _run_sample(name: str, dtype: str):
    """pybackward's outputs and grads for registry sample `name` (last_diff.samples.*) in dtype."""
    import json
    case = {c["case"]: c for c in json.loads((KDIR / "last_diff.samples.json").read_text())}[name]
    arrays = np.load(KDIR / "last_diff.samples.npz")
    ins = {s: [arrays[f"{name}|in|{s}|{i}"] for i in range(n)] for s, n in case["inputs"].items()}
    ins = {s: [a.astype(dtype) if a.dtype.kind == "f" else a for a in arrs] for s, arrs in ins.items()}
    cots = {s: [arrays[f"{name}|cot|{s}|{i}"].astype(dtype) if use else None for i, use in enumerate(flags)]
            for s, flags in case["loss"].items()}
    outs, grads = opcheck.run_with_grads(case["op"], ins, case["attrs"], case["outputs"], cots)
    return ins, cots, outs, grads


def _close(got, want, dtype):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_allclose(got, want, **(dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else
                                             dict(rtol=1e-10, atol=1e-12)))


@pytest.mark.parametrize("dtype", ("float32", "float64"))
def test_index_elementwise_get_two_index_tensors_forward_matches_paddle(dtype):
    """Paddle's legacy executor refuses index_elementwise_get_grad with two index tensors (its
    kernel-type check across the index slot); the forward runs and equals pybackward's."""
    ref = np.load(EIG_REF)
    _, _, outs, _ = _run_sample("index_elementwise_get-4", dtype)
    _close(outs["Out"][0], ref[f"index_elementwise_get-4|{dtype}|out|Out|0"], dtype)


@pytest.mark.parametrize("dtype", ("float32", "float64"))
def test_index_elementwise_get_walk_order(dtype):
    """A transposed view (input_strides [1, 3]): Paddle's forward lays Out out in its walk order
    (here x's first 6 elements in x's order), as pybackward's; Paddle's grad reads Out@GRAD in
    the view's logical order instead (x@GRAD[a + 3b] = Out@GRAD[a, b]) - not its forward's
    derivative (docs/deviations.md); pybackward's is (registry finite differences)."""
    paddle = np.load(KDIR / "last_diff.paddle.npz")
    ins, cots, outs, grads = _run_sample("index_elementwise_get-6", dtype)
    x = ins["x"][0]
    _close(outs["Out"][0], paddle[f"index_elementwise_get-6|{dtype}|out|Out|0"], dtype)
    np.testing.assert_array_equal(outs["Out"][0], x.reshape(-1)[:6].reshape(3, 2))
    cot = cots["Out"][0]
    logical = np.zeros(x.size, x.dtype)
    a, b = np.meshgrid(np.arange(3), np.arange(2), indexing="ij")
    np.add.at(logical, (a + 3 * b).reshape(-1), cot.reshape(-1))
    _close(logical.reshape(x.shape), paddle[f"index_elementwise_get-6|{dtype}|grad|x|0"], dtype)
    _close(grads["x"][0].reshape(-1)[:6], cot.reshape(-1), dtype)   # the derivative of the forward


@pytest.mark.parametrize("index", range(4))
def test_index_elementwise_put_with_tensor_matches_paddle_but_float64_value_grad(index):
    """Everything equals Paddle's except value@GRAD in float64, where Paddle's kernel steps through
    value@GRAD with a 4-byte element and leaves most of it uninitialised (docs/deviations.md)."""
    name = f"index_elementwise_put_with_tensor-{index}"
    paddle = np.load(KDIR / "last_diff.paddle.npz")
    for dtype in ("float32", "float64"):
        _, _, outs, grads = _run_sample(name, dtype)
        _close(outs["Out"][0], paddle[f"{name}|{dtype}|out|Out|0"], dtype)
        _close(grads["x"][0], paddle[f"{name}|{dtype}|grad|x|0"], dtype)
        if dtype == "float32":
            _close(grads["value"][0], paddle[f"{name}|{dtype}|grad|value|0"], dtype)


# --------------------------------------------------------------------------
# pyramid_hash
# --------------------------------------------------------------------------
def test_xxh32_known_values():
    from pybackward.ops.nn.pyramid_hash import xxh32
    for data, seed, want in ((b"", 0, 0x02CC5D05), (b"a", 0, 0x550D7456), (b"abc", 0, 0x32D153FF)):
        arr = np.frombuffer(data, np.uint8).reshape(1, -1) if data else np.zeros((1, 0), np.uint8)
        assert int(xxh32(arr, seed)[0]) == want


@pytest.mark.parametrize("index", range(3))
def test_pyramid_hash_matches_paddle_float32(index):
    """Out, X_Temp_Out and the LoDs equal Paddle's float32 kernel (XXH32 positions, rand_r dropout,
    the inference scaling by drop_out_percent); DropPos in the rows Paddle writes (the rest of its
    N * pyramid_layer rows are unset memory in Paddle, zeros here)."""
    import json
    name = f"pyramid_hash-{index}"
    case = {c["case"]: c for c in json.loads((KDIR / "last_diff.samples.json").read_text())}[name]
    arrays = np.load(KDIR / "last_diff.samples.npz")
    paddle = np.load(KDIR / "last_diff.paddle.npz")
    report = json.loads((KDIR / "last_diff.paddle.json").read_text())[name]["float32"]
    ins = {s: [arrays[f"{name}|in|{s}|0"]] for s in case["inputs"]}
    ins = {s: [a.astype(np.float32) if a.dtype.kind == "f" else a for a in v] for s, v in ins.items()}
    lods: dict = {}
    outs, _ = opcheck.run_with_grads("pyramid_hash", ins, case["attrs"], case["outputs"], {}, lod=case["lod"],
                                     out_lods=lods)
    for slot in ("Out", "X_Temp_Out"):
        want = paddle[f"{name}|float32|out|{slot}|0"]
        assert outs[slot][0].dtype == want.dtype
        np.testing.assert_array_equal(outs[slot][0], want)
    for slot in ("Out", "DropPos"):
        assert lods[slot][0] == report["lods"][f"out|{slot}|0"]
    want = paddle[f"{name}|float32|out|DropPos|0"]
    got = outs["DropPos"][0]
    assert got.shape == want.shape and got.dtype == want.dtype
    offs = case["lod"]["X"][0]
    layers = case["attrs"]["pyramid_layer"]
    written = sum(w - k for w in np.diff(offs) for k in range(1, min(layers, w)))
    np.testing.assert_array_equal(got[:written], want[:written])
    assert not got[written:].any()


def test_pyramid_hash_grad_refuses_a_learning_rate():
    from pybackward.base.errors import ExecutionError
    with pytest.raises(ExecutionError, match="lr"):
        opcheck.run_kernel("pyramid_hash_grad", {}, {"lr": 0.1}, {"X@GRAD": ["g"]})
    assert opcheck.run_kernel("pyramid_hash_grad", {}, {"lr": 0.0}, {"X@GRAD": ["g"]}) == {}
