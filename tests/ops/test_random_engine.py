"""Random ops (ops/random/engine.py): Paddle's exact streams for fixed seeds (live
Paddle values and every golden startup program), reproducibility, moments,
dropout masks that a recomputation reproduces, and dropout's grad."""
from __future__ import annotations

import numpy as np
import pytest

import pybackward
from pybackward.base.errors import ExecutionError
from pybackward.ops.random.engine import MT19937_64

from test_tensor_shape_index import PROGRAMS, PaddleCase, paddle_case_names, run

RANDOM_OPS = {"uniform_random", "gaussian_random", "truncated_gaussian_random", "seed", "dropout"}
CASES = paddle_case_names(RANDOM_OPS)


@pytest.mark.parametrize("name", CASES)
def test_forward_equals_paddle_bit_for_bit(name):
    PaddleCase(name).check_forward(exact=True)


@pytest.mark.parametrize("name", [n for n in CASES if PaddleCase(n).c["grad_ops"]])
def test_dropout_grad_ops_and_grads_match_paddle(name):
    case = PaddleCase(name)
    case.check_grad_ops()
    case.check_lod_level_flags()
    case.check_grads(rtol=0, atol=0)


def test_reference_covers_every_op():
    assert {PaddleCase(n).op for n in CASES} == RANDOM_OPS


STARTUPS = sorted(p.parent.name for p in PROGRAMS.glob("*/startup.pb"))


@pytest.mark.parametrize("case", STARTUPS)
def test_golden_startup_program_reproduces_paddle_params(case):
    """Every initializer of every golden startup program (seed 2024) gives
    exactly the parameters Paddle wrote to params.npz."""
    prog = pybackward.load(PROGRAMS / case / "startup.pb")
    params = np.load(PROGRAMS / case / "params.npz")
    checked = 0
    for op in prog.global_block().ops:
        (name,) = op.outputs["Out"]
        res = run(op.type, {}, dict(op.all_attrs), {"Out": 1})["Out"][0]
        if name in params.files:
            np.testing.assert_array_equal(res, params[name], err_msg=f"{case}: {op.type} -> {name}")
            checked += 1
    assert checked == len(params.files)


def test_mt19937_64_reference_value():
    # the C++ standard: the 10000th output of a default-constructed mt19937_64
    assert int(MT19937_64(5489).raw(10000)[-1]) == 9981545732273789042


def test_mt19937_64_streams_continue_across_calls():
    a = MT19937_64(7)
    b = MT19937_64(7)
    np.testing.assert_array_equal(np.concatenate([a.raw(5), a.raw(700), a.raw(1)]), b.raw(706))


@pytest.mark.parametrize("op,attrs", [
    ("uniform_random", {"shape": [50, 40], "min": -3.0, "max": 5.0, "seed": 0}),
    ("gaussian_random", {"shape": [50, 40], "mean": 1.0, "std": 2.0, "seed": 0}),
    ("truncated_gaussian_random", {"shape": [50, 40], "mean": 0.0, "std": 1.0, "seed": 0}),
])
def test_seed_zero_draws_from_call_rng(op, attrs):
    a = run(op, {}, attrs, rng=np.random.default_rng(1))["Out"][0]
    b = run(op, {}, attrs, rng=np.random.default_rng(1))["Out"][0]
    c = run(op, {}, attrs, rng=np.random.default_rng(2))["Out"][0]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    fixed = dict(attrs, seed=99)
    np.testing.assert_array_equal(run(op, {}, fixed, rng=np.random.default_rng(1))["Out"][0],
                                  run(op, {}, fixed, rng=np.random.default_rng(2))["Out"][0])


def test_moments():
    u = run("uniform_random", {}, {"shape": [200000], "min": -1.0, "max": 3.0, "seed": 5})["Out"][0]
    assert u.dtype == np.float32 and u.min() >= -1 and u.max() < 3
    assert abs(u.mean() - 1.0) < 0.01 and abs(u.var() - 16 / 12) < 0.01
    g = run("gaussian_random", {}, {"shape": [200000], "mean": 0.5, "std": 2.0, "seed": 5, "dtype": 6})["Out"][0]
    assert g.dtype == np.float64 and abs(g.mean() - 0.5) < 0.02 and abs(g.std() - 2.0) < 0.02
    t = run("truncated_gaussian_random", {}, {"shape": [200000], "mean": 1.0, "std": 2.0, "seed": 5})["Out"][0]
    assert t.min() >= -2.0 and t.max() <= 2.0  # a, b are absolute bounds (default -2, 2)
    # standard normal truncated to [-2, 2] has std 0.8796
    t = run("truncated_gaussian_random", {}, {"shape": [200000], "mean": 0.0, "std": 1.0, "seed": 6})["Out"][0]
    assert abs(t.mean()) < 0.01 and abs(t.std() - 0.8796) < 0.01


def test_uniform_diag_and_fp16():
    out = run("uniform_random", {}, {"shape": [3, 3], "seed": 1, "diag_num": 3, "diag_step": 3, "diag_val": 7.0})
    np.testing.assert_array_equal(np.diag(out["Out"][0]), [7, 7, 7])
    half = run("uniform_random", {}, {"shape": [4], "seed": 1, "dtype": 4})["Out"][0]
    full = run("uniform_random", {}, {"shape": [4], "seed": 1, "dtype": 5})["Out"][0]
    assert half.dtype == np.float16
    np.testing.assert_array_equal(half, full.astype(np.float16))


def test_seed_op():
    assert run("seed", {}, {"seed": 42})["Out"][0].tolist() == [42]
    s = run("seed", {}, {"seed": 0}, rng=np.random.default_rng(3))["Out"][0]
    assert s.dtype == np.int32 and s.shape == (1,) and s[0] != 0


def test_dropout_mask_is_a_function_of_the_seed():
    """A recomputed dropout (same Seed input, e.g. from the `seed` op that
    recompute inserts) gives the same mask; fix_seed/seed does the same."""
    x = np.random.default_rng(0).standard_normal((30, 40)).astype(np.float32)
    seed = run("seed", {}, {"seed": 0}, rng=np.random.default_rng(9))["Out"][0]
    first = run("dropout", {"X": [x], "Seed": [seed]}, {"dropout_prob": 0.3}, rng=np.random.default_rng(1))
    again = run("dropout", {"X": [x], "Seed": [seed]}, {"dropout_prob": 0.3}, rng=np.random.default_rng(2))
    np.testing.assert_array_equal(first["Mask"][0], again["Mask"][0])
    np.testing.assert_array_equal(first["Out"][0], again["Out"][0])
    fixed = run("dropout", {"X": [x]}, {"dropout_prob": 0.3, "fix_seed": True, "seed": int(seed[0])})
    np.testing.assert_array_equal(fixed["Mask"][0], first["Mask"][0])
    assert abs(1 - first["Mask"][0].mean() - 0.3) < 0.03
    free1 = run("dropout", {"X": [x]}, {"dropout_prob": 0.3}, rng=np.random.default_rng(1))
    free2 = run("dropout", {"X": [x]}, {"dropout_prob": 0.3}, rng=np.random.default_rng(2))
    assert not np.array_equal(free1["Mask"][0], free2["Mask"][0])


def test_dropout_modes():
    x = np.full((2, 50), 2.0, np.float32)
    down = run("dropout", {"X": [x]}, {"dropout_prob": 0.25, "fix_seed": True, "seed": 3})
    up = run("dropout", {"X": [x]}, {"dropout_prob": 0.25, "fix_seed": True, "seed": 3,
                                     "dropout_implementation": "upscale_in_train"})
    m = down["Mask"][0].astype(bool)
    assert down["Mask"][0].dtype == np.uint8
    np.testing.assert_array_equal(down["Out"][0], np.where(m, 2.0, 0.0))
    np.testing.assert_allclose(up["Out"][0], np.where(m, 2.0 / 0.75, 0.0), rtol=1e-6)
    infer = run("dropout", {"X": [x]}, {"dropout_prob": 0.25, "is_test": True}, {"Out": 1, "Mask": 1})
    np.testing.assert_allclose(infer["Out"][0], 1.5)
    assert "Mask" not in infer  # Paddle does not write Mask at inference
    g = np.ones_like(x)
    gx = run("dropout_grad", {"Mask": up["Mask"], "Out@GRAD": [g]},
             {"dropout_prob": 0.25, "dropout_implementation": "upscale_in_train"}, {"X@GRAD": 1})["X@GRAD"][0]
    np.testing.assert_allclose(gx, np.where(m, 1 / 0.75, 0.0), rtol=1e-6)


@pytest.mark.parametrize("op,ins,attrs", [
    ("dropout", {"X": [np.ones(3)]}, {"dropout_implementation": "scale_in_train"}),
    ("dropout", {"X": [np.ones(3)]}, {"dropout_prob": 1.5}),
    ("uniform_random", {}, {"shape": [2], "dtype": 3}),             # int64
    ("gaussian_random", {}, {"shape": [2], "dtype": 22}),           # bf16: no NumPy dtype
])
def test_unsupported_attr_raises(op, ins, attrs):
    with pytest.raises(ExecutionError, match="not supported"):
        run(op, ins, attrs)
