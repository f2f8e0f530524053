"""Verification of backward sections, and the pairwise aggregation option."""
from __future__ import annotations

import numpy as np
import pytest

import pybackward
from conftest import PROGRAMS
from golden import replay, variants
from pybackward.backward.verify import VerificationError, check_backward, verify_backward
from pybackward.interpreter.executor import Executor, Scope


@pytest.mark.parametrize("case,variant", [v for v in variants() if v[1] == "default"])
def test_every_golden_backward_verifies(case, variant):
    prog, *_ = replay(case, variant, record_callbacks=False)
    assert verify_backward(prog) == []


def test_verification_catches_a_wrong_grad_shape_and_a_foreign_slot():
    prog, *_ = replay("fit_a_line", "default", record_callbacks=False)
    g = prog.global_block().vars["fc_0.w_0@GRAD"]
    g.desc.type.dense_tensor.tensor.dims[0] = 7
    mul_grad = next(op for op in prog.global_block().ops if op.type == "mul_grad")
    mul_grad.desc.inputs.add(parameter="Bogus", arguments=["x"])
    problems = verify_backward(prog)
    assert any("fc_0.w_0@GRAD': gradient is float32[7, 1] but 'fc_0.w_0' is float32[13, 1]" in p
               for p in problems), problems
    assert any("input slot 'Bogus' is not one of the registered inputs" in p for p in problems)
    with pytest.raises(VerificationError, match="and 1 more"):
        check_backward(prog)


def _grads(prog):
    d = PROGRAMS / "var_reused"
    scope = Scope()
    for k, v in np.load(d / "params.npz").items():
        scope.set(k, v)
    names = sorted(v for v in np.load(d / "grads.npz"))
    return dict(zip(names, Executor().run(prog, feed=dict(np.load(d / "feeds.npz")), fetch_list=names,
                                          scope=scope)))


def test_pairwise_aggregation_chains_grad_add_and_gives_the_same_gradients():
    loss = pybackward.load(PROGRAMS / "var_reused" / "forward.pb")
    summed = loss.clone()
    pybackward.append_backward("mean_0.tmp_0", program=summed)
    pybackward.append_backward("mean_0.tmp_0", program=loss, aggregation="pairwise")
    types = [op.type for op in loss.global_block().ops]
    assert "sum" not in types[types.index("fill_constant"):] and "grad_add" in types
    adds = [op for op in loss.global_block().ops if op.type == "grad_add"]
    # Paddle's chain: x@GRAD@ADD@1 = v0 + v1, ..., the last one writes x@GRAD.
    chain = [op for op in adds if op.output("Out")[0].startswith(adds[0].output("Out")[0].split("@ADD@")[0])]
    assert [op.output("Out")[0] for op in chain][-1].endswith("@GRAD")
    assert all("@ADD@" in op.output("Out")[0] for op in chain[:-1])
    assert verify_backward(loss) == []
    a, b = _grads(summed), _grads(loss)
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-6, atol=1e-7, err_msg=k)


def test_bad_aggregation_value():
    prog = pybackward.load(PROGRAMS / "fit_a_line" / "forward.pb")
    with pytest.raises(pybackward.ArgumentError, match="aggregation must be one of"):
        pybackward.append_backward("mean_0.tmp_0", program=prog, aggregation="mean")
