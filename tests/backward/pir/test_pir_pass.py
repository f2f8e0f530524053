"""The PIR gradient pass against Paddle 3.3.1's: op for op on the PIR goldens
(testdata/pir/*_bwd.json, written by Paddle's `append_backward` in PIR mode),
finite differences in float64, and what Paddle's PIR pass drops (names,
callbacks, checkpoints)."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import pybackward
from pybackward.backward.pir.api import append_backward, calc_gradient, gradients
from pybackward.base.errors import ArgumentError, PaddleDeviationWarning, UnknownOpError, VarNotFoundError
from pybackward.interpreter.pir_executor import run
from pybackward.interpreter.pir_gradcheck import check_gradients
from pybackward.pir import codec
from pybackward.pir.canonical import diff, equal
from pybackward.tensors.paddle_files import load_arrays

PIR = Path(__file__).resolve().parents[3] / "testdata" / "pir"
VALUES = Path(__file__).resolve().parents[3] / "testdata" / "pir_values"


def _remove(op) -> None:
    for r in op.regions:
        for b in r.blocks:
            for inner in reversed(list(b.ops)):
                _remove(inner)
    op.block.remove(op)


def paddle_forward(case: str):
    """Paddle's `<case>_bwd.json` with its backward section taken out again (the grad
    ops, the stacks and pushes Paddle's pass added): the program Paddle's pass ran on.
    (`<case>.json` is the same model built a second time: other parameter names.)"""
    n = len(pybackward.load(PIR / f"{case}.json").ops)
    prog = pybackward.load(PIR / f"{case}_bwd.json")
    n += sum(1 for op in prog.ops if op.name == "cf.stack_create")
    for op in reversed(prog.ops[n:]):
        _remove(op)
    for op in list(prog.walk()):
        if op.name == "cf.tuple_push":
            op.block.remove(op)
    for op in list(prog.ops):
        if op.name == "cf.stack_create":
            prog.block.remove(op)
    return prog


def loss_of(prog):
    return prog.ops[-1].results[0]


def assert_same(prog, golden: Path) -> None:
    again = codec.loads(codec.dumps(prog))
    gold = pybackward.load(golden)
    assert equal(again, gold), "\n".join(diff(again, gold, names=("pybackward", golden.name))[:80])


@pytest.mark.parametrize("case", ["mlp", "cnn", "transformer", "cond", "while"])
def test_op_for_op_equal_to_paddle(case):
    prog = paddle_forward(case)
    append_backward(loss_of(prog))
    assert_same(prog, PIR / f"{case}_bwd.json")


def test_cond_in_while_paddle_exact_is_paddles_program():
    prog = paddle_forward("cond_in_while")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        append_backward(loss_of(prog), paddle_exact=True)
    assert_same(prog, PIR / "cond_in_while_bwd.json")


def test_cond_in_while_default_departs_from_paddle_with_a_warning():
    prog = paddle_forward("cond_in_while")
    with pytest.warns(PaddleDeviationWarning, match="cond inside while"):
        append_backward(loss_of(prog))
    again = codec.loads(codec.dumps(prog))
    assert not equal(again, pybackward.load(PIR / "cond_in_while_bwd.json"))


def _values(run_name: str):
    return (dict(np.load(VALUES / f"{run_name}.feeds.npz")), dict(np.load(VALUES / f"{run_name}.params.npz")))


@pytest.mark.parametrize("run_name", ["mlp", "cnn", "transformer", "while", "cond-pos", "cond-neg",
                                      "cond_in_while-pos", "cond_in_while-neg"])
def test_gradients_equal_finite_differences(run_name):
    case = run_name.split("-")[0]
    prog = pybackward.load(PIR / f"{case}.json")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PaddleDeviationWarning)
        append_backward(loss_of(prog))
    feeds, params = _values(run_name)
    rows = check_gradients(prog, feeds, params, paddle_seed=2024)
    assert rows and all(r.ok for r in rows), [(r.var, r.max_abs_err) for r in rows]


@pytest.mark.parametrize("variant", ["pos", "neg"])
def test_paddles_cond_in_while_gradient_is_wrong(variant):
    """What the deviation is for: Paddle's program fails finite differences."""
    prog = pybackward.load(PIR / "cond_in_while.json")
    append_backward(loss_of(prog), paddle_exact=True)
    feeds, params = _values(f"cond_in_while-{variant}")
    assert not all(r.ok for r in check_gradients(prog, feeds, params))


def test_pairs_include_non_trainable_persistables_as_none():
    prog = paddle_forward("cnn")
    pairs = append_backward(loss_of(prog))
    by_name = {p.defining_op.attr("parameter_name"): g for p, g in pairs}
    assert by_name["batch_norm2d_1.w_1"] is None and by_name["batch_norm2d_1.w_2"] is None
    assert by_name["conv2d_1.w_0"] is not None
    assert len(pairs) == len(prog.parameters())


def test_names_wherever_a_value_goes():
    """Paddle refuses names in parameter_list / no_grad_set (TypeError); pybackward takes them."""
    prog = pybackward.load(PIR / "mlp.json")
    pairs = append_backward("%16", parameter_list=["fc_0.w_0", "fc_1.w_0"], no_grad_set=["%9"], program=prog)
    assert [p.defining_op.attr("parameter_name") for p, _ in pairs] == ["fc_0.w_0", "fc_1.w_0"]
    assert pairs[0][1] is None          # relu's output is in no_grad_set: nothing reaches fc_0
    assert pairs[1][1] is not None
    with pytest.raises(VarNotFoundError, match="fc_0.w_9"):
        append_backward("%16", parameter_list=["fc_0.w_9"], program=pybackward.load(PIR / "mlp.json"))


def test_gradients_of_inputs_and_unconnected_ones():
    prog = pybackward.load(PIR / "mlp.json")
    g_w, g_x = gradients([loss_of(prog)], ["fc_0.w_0", "x"], program=prog)
    assert g_w is not None and g_x is None   # x is data with stop_gradient
    prog = pybackward.load(PIR / "mlp.json")
    assert calc_gradient(loss_of(prog), "fc_1.b_0", program=prog)[0].type.dims == (1,)


def test_target_gradients_shape_is_checked():
    prog = pybackward.load(PIR / "mlp.json")
    with pytest.raises(ArgumentError, match="target_gradients"):
        gradients(["%16"], ["fc_0.w_0"], target_gradients=["fc_0.w_0"], program=prog)


def test_callbacks_see_every_new_grad_op_once_with_its_context():
    prog = pybackward.load(PIR / "mlp.json")
    seen = []

    def cb(block, context):
        op = context["__current_op_desc__"]
        assert op.block is block
        seen.append((op.name, {k.id: v.id for k, v in context.items() if k != "__current_op_desc__"}))

    pairs = append_backward(loss_of(prog), callbacks=[cb])
    appended = [op for op in prog.ops if op.name in ("pd_op.full", "pd_op.full_like") or op.name.endswith("_grad")]
    assert [n for n, _ in seen] == [op.name for op in appended[-10:]]
    w_grad = dict((p.defining_op.attr("parameter_name"), g) for p, g in pairs)["fc_0.w_0"]
    assert any(ctx.get(w_grad.id) == prog.value("fc_0.w_0").id for _, ctx in seen)


def test_callbacks_reach_grad_ops_inside_control_flow():
    prog = pybackward.load(PIR / "cond.json")
    names = []
    append_backward(loss_of(prog), callbacks=[lambda b, c: names.append(c["__current_op_desc__"].name)])
    assert "pd_op.tanh_grad" in names and "cf.tuple_pop" in names and "pd_op.if" in names


@pytest.mark.parametrize("case,checkpoints", [("mlp", "auto"), ("transformer", "auto"), ("mlp", ["%9"])])
def test_checkpoints_recompute_with_bit_equal_gradients(case, checkpoints):
    rng = np.random.RandomState(0)
    feeds = {"mlp": {"x": rng.rand(3, 4).astype("float32"), "y": rng.rand(3, 1).astype("float32")},
             "transformer": {"tokens": rng.rand(2, 4, 8).astype("float32")}}[case]
    got = []
    for cps in (None, checkpoints):
        prog = pybackward.load(PIR / f"{case}.json")
        params = load_arrays(str(PIR / f"{case}.pdparams"), prog)
        out = append_backward(loss_of(prog), checkpoints=cps)
        pairs, used = (out, None) if cps is None else out
        got.append((prog.num_ops(), run(prog, feeds, params, [g for _, g in pairs if g is not None])))
        if cps is not None:
            assert used
    (n_plain, plain), (n_rc, rc) = got
    assert n_rc > n_plain                       # the recomputed forward ops are there
    assert all(np.array_equal(a, b) for a, b in zip(plain.values(), rc.values()))


def test_recomputed_ops_feed_the_grad_ops():
    prog = pybackward.load(PIR / "mlp.json")
    _, used = append_backward(loss_of(prog), checkpoints=["%10"])
    relu = [op for op in prog.ops if op.name == "pd_op.relu"]
    assert len(relu) == 2                       # the forward one and its recomputed copy
    assert all(u.name != "pd_op.relu_grad" for u, _ in relu[0].results[0].uses)


def test_an_op_without_a_vjp_is_named():
    prog = pybackward.load(PIR / "mlp.json")
    relu = next(op for op in prog.ops if op.name == "pd_op.relu")
    relu.name = "pd_op.sinc"      # has no VJP in Paddle 3.3.1
    with pytest.raises(UnknownOpError, match="pd_op.sinc"):
        append_backward(loss_of(prog))


def test_pylayer_is_refused_clearly():
    prog = pybackward.load(PIR / "pylayer.json")
    with pytest.raises(UnknownOpError, match="pylayer"):
        append_backward(loss_of(prog))


def test_the_facade_dispatches_on_pir_programs():
    prog = pybackward.load(PIR / "mlp.json")
    pairs = pybackward.append_backward(loss_of(prog))
    assert len(pairs) == 4 and all(g is not None for _, g in pairs)
    prog = pybackward.load(PIR / "mlp.json")
    with pytest.raises(ArgumentError, match="legacy programs only"):
        pybackward.append_backward(loss_of(prog), aggregation="pairwise")


def test_a_memory_budget_chooses_checkpoints_that_fit():
    from pybackward.analysis import pir_liveness
    from pybackward.pir.summary import backward_start

    def peak(prog):
        return pir_liveness.memory(prog, 4, backward_start=backward_start(prog)).peak_bytes

    plain = pybackward.load(PIR / "transformer.json")
    append_backward(loss_of(plain))
    budget = peak(plain) - 1                      # the plain pass does not fit
    prog = pybackward.load(PIR / "transformer.json")
    pairs, used = append_backward(loss_of(prog), checkpoints="auto", memory_budget=budget, batch_size=4)
    assert used and peak(prog) <= budget < peak(plain)
    roomy = pybackward.load(PIR / "transformer.json")
    _, none_needed = append_backward(loss_of(roomy), memory_budget=10 ** 9, batch_size=4)
    assert none_needed == [] and roomy.num_ops() == plain.num_ops()
    with pytest.raises(ArgumentError, match="no checkpoint set fits"):
        append_backward(loss_of(pybackward.load(PIR / "transformer.json")), memory_budget=100, batch_size=4)
