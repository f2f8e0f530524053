"""Optimizer ops (pybackward/ops/optim/optimizers.py) beyond the registry-wide checks.

* Whole training programs: Paddle 3.3.1 built and ran them
  (testdata/training/gen_training.py: an MLP, `paddle.optimizer.X.minimize`);
  the interpreter runs Paddle's main program for the same three steps from
  Paddle's initial state and must end with Paddle's parameters, optimizer
  state and losses. Its startup program must reproduce Paddle's initial state.
* Ops Paddle registers for float32 only: pybackward's float32 values against
  the float32 runs recorded in testdata/kernels/<family>.paddle.*.
* nadam / radam on params of more than one element, where Paddle's CPU kernels
  read past their one-element pow tensors (docs/deviations.md): each element
  is the one-element update.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import pybackward
from conftest import TESTDATA
from pybackward.interpreter.executor import Executor, Scope, load_params
from pybackward.ops import opcheck, registry

TRAINING = TESTDATA / "training"
CASES = sorted(p.parent.name for p in TRAINING.glob("*/case.json"))


def _case(name):
    d = TRAINING / name
    return (json.loads((d / "case.json").read_text()), dict(np.load(d / "init.npz")),
            dict(np.load(d / "feeds.npz")), dict(np.load(d / "after.npz")))


def test_there_are_training_cases():
    assert len(CASES) >= 10


@pytest.mark.parametrize("name", CASES)
def test_training_program_matches_paddle(name):
    meta, init, feeds, after = _case(name)
    main = pybackward.load(TRAINING / name / "main.pb")
    scope = Scope()
    load_params(scope, init)
    exe = Executor()
    for k in range(meta["steps"]):
        (loss,) = exe.run(main, feed={"x": feeds[f"x{k}"], "label": feeds[f"label{k}"]},
                          fetch_list=[meta["loss"]], scope=scope)
        np.testing.assert_allclose(loss, after[f"loss{k}"], rtol=2e-5, atol=1e-6,
                                   err_msg=f"{name}: loss of step {k}")
    for var in meta["persistables"]:
        if var not in after:
            continue
        got = scope.get(var)
        assert got is not None, f"{name}: {var} has no value after training"
        got = np.asarray(got)
        assert got.dtype == after[var].dtype and got.shape == after[var].shape, (var, got.dtype, got.shape)
        np.testing.assert_allclose(got, after[var], rtol=1e-4, atol=1e-6,
                                   err_msg=f"{name}: {var} after {meta['steps']} steps")
        if var in meta["params"]:  # the params moved: the test is not vacuous
            assert not np.array_equal(got, init[var]), f"{name}: {var} never changed"


@pytest.mark.parametrize("name", CASES)
def test_startup_program_reproduces_paddles_initial_state(name):
    meta, init, _, _ = _case(name)
    startup = pybackward.load(TRAINING / name / "startup.pb")
    scope = Scope()
    Executor().run(startup, scope=scope)
    for var, want in init.items():
        got = scope.get(var)
        assert got is not None, f"{name}: startup did not initialise {var}"
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-7, err_msg=f"{name}: {var}")


# --------------------------------------------------------------------------
# float32-only Paddle kernels
# --------------------------------------------------------------------------
KDIR = TESTDATA / "kernels"
FLOAT32_ONLY = {"optimizer_more": ("ftrl", "decayed_adagrad"), "misc_more": ("clip_by_norm", "auc")}


def _float32_cases():
    for family, ops in FLOAT32_ONLY.items():
        if not (KDIR / f"{family}.paddle.json").exists():
            continue
        for c in json.loads((KDIR / f"{family}.samples.json").read_text()):
            if c["op"] in ops:
                yield pytest.param(family, c["case"], id=c["case"])


@pytest.mark.parametrize("family,name", list(_float32_cases()))
def test_float32_only_kernel_equals_paddle(family, name):
    cases = {c["case"]: c for c in json.loads((KDIR / f"{family}.samples.json").read_text())}
    arrays = dict(np.load(KDIR / f"{family}.samples.npz"))
    report = json.loads((KDIR / f"{family}.paddle.json").read_text())
    paddle = dict(np.load(KDIR / f"{family}.paddle.npz"))
    case = cases[name]
    assert "error" not in report[name]["float32"], report[name]
    ins = {s: [arrays[f"{name}|in|{s}|{i}"].astype(np.float32) if arrays[f"{name}|in|{s}|{i}"].dtype.kind == "f"
               else arrays[f"{name}|in|{s}|{i}"] for i in range(n)] for s, n in case["inputs"].items()}
    outs = opcheck.run_kernel(case["op"], ins, case["attrs"],
                              {s: [f"{s}{i}" for i in range(n)] for s, n in case["outputs"].items()})
    for key in report[name]["float32"]["fetched"]:
        kind, slot, i = key.split("|")
        want = paddle[f"{name}|float32|{key}"]
        got = outs[slot][int(i)]
        assert got.dtype == want.dtype and got.shape == want.shape, key
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{name} {key}")


# --------------------------------------------------------------------------
# nadam / radam: elementwise on any param size
# --------------------------------------------------------------------------
@pytest.mark.parametrize("op_type", ["nadam", "radam"])
def test_multi_element_update_is_elementwise(op_type):
    opdef = registry.get(op_type)
    rng = np.random.default_rng(5)
    for sample in opdef.samples(np.random.default_rng(1234)):
        shape = (3, 4)
        ins = {s: list(a) for s, a in sample.inputs.items()}
        for slot in ("param", "grad", "moment1", "moment2"):
            base = np.abs(rng.standard_normal(shape)) * 0.1 if slot == "moment2" else rng.standard_normal(shape)
            ins[slot] = [base]
        names = {s: [s] for s in sample.outputs}
        whole = opcheck.run_kernel(op_type, ins, sample.attrs, names)
        for idx in np.ndindex(shape):
            one = {s: ([a[0][idx].reshape(1)] if s in ("param", "grad", "moment1", "moment2") else a)
                   for s, a in ins.items()}
            part = opcheck.run_kernel(op_type, one, sample.attrs, names)
            for s in ("param_out", "moment1_out", "moment2_out"):
                assert whole[s][0][idx] == part[s][0][0], (op_type, s, idx)
