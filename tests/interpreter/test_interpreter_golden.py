"""The interpreter reproduces Paddle's gradient values on every golden program.

For each recorded variant with Paddle's values (grads*.npz), both Paddle's own
backward program and pybackward's are run by the NumPy interpreter with the
stored parameters and feeds; every fetched value must equal Paddle executor's
within rtol 1e-5 / atol 1e-6 (float32).
"""
from __future__ import annotations

import numpy as np
import pytest

import pybackward
from conftest import PROGRAMS, case_json
from golden import replay, variants
from pybackward.interpreter.executor import Executor, Scope

#: Variants whose programs the interpreter cannot run yet, with the reason.
NOT_YET = {
}


def _cases():
    for case, variant in variants():
        spec = case_json(case)["variants"][variant]
        grads = spec.get("grads_file")
        if grads and (PROGRAMS / case / grads).exists():
            for which in ("paddle", "ours"):
                marks = [pytest.mark.xfail(reason=NOT_YET[(case, variant)], strict=False)] \
                    if (case, variant) in NOT_YET else []
                yield pytest.param(case, variant, which, marks=marks, id=f"{case}-{variant}-{which}")


def _run(prog, case: str, fetch: list[str]) -> dict[str, np.ndarray]:
    d = PROGRAMS / case
    scope = Scope()
    for k, v in np.load(d / "params.npz").items():
        scope.set(k, v)
    feed = dict(np.load(d / "feeds.npz"))
    return dict(zip(fetch, Executor().run(prog, feed=feed, fetch_list=fetch, scope=scope)))


@pytest.mark.parametrize("case,variant,which", list(_cases()))
def test_gradients_equal_paddle_values(case, variant, which):
    spec = case_json(case)["variants"][variant]
    expected = dict(np.load(PROGRAMS / case / spec["grads_file"]))
    if which == "paddle":
        prog = pybackward.load(PROGRAMS / case / spec["file"])
    else:
        prog, *_ = replay(case, variant, record_callbacks=False)
    got = _run(prog, case, sorted(expected))
    assert expected, "no values to compare"
    for name, want in expected.items():
        have = got[name]
        assert have.dtype == want.dtype, f"{name}: dtype {have.dtype}, Paddle {want.dtype}"
        assert have.shape == want.shape, f"{name}: shape {have.shape}, Paddle {want.shape}"
        np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-6, err_msg=name)


def test_startup_programs_reproduce_paddle_parameters():
    """Running each golden startup program gives Paddle's initial values exactly."""
    for case_dir in sorted(PROGRAMS.iterdir()):
        if not (case_dir / "startup.pb").exists():
            continue
        scope = Scope()
        Executor().run(pybackward.load(case_dir / "startup.pb"), scope=scope)
        for k, want in np.load(case_dir / "params.npz").items():
            np.testing.assert_array_equal(scope[k], want, err_msg=f"{case_dir.name}: {k}")
