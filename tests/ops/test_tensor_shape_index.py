"""Tensor, shape and indexing ops (ops/tensor/creation.py, shape.py, indexing.py).

Two kinds of checks:

* against live Paddle 3.3.1: `testdata/ops/tensor_loss.{json,npz}` (written
  by testdata/ops/gen_tensor_loss.py) hold, per case, the op's inputs and
  attrs, Paddle's forward outputs, the grad ops Paddle's append_backward made
  (with symbolic var names) and Paddle's vector-Jacobian products for random
  cotangents. `PaddleCase` replays a case through our kernel, grad maker and
  grad kernels (tests/ops/test_loss.py and tests/ops/test_random_engine.py use it too);
* against formulas written here independently of the kernels, and golden
  backward.pb files for the grad-op conventions.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import pybackward
from pybackward.base.errors import ExecutionError
from pybackward.ops import opcheck, registry
from pybackward.ops.registry import EMPTY_VAR_NAME, GRAD_SUFFIX, FwdOp

ROOT = Path(__file__).resolve().parents[2]
REF_DIR = ROOT / "testdata" / "ops"
PROGRAMS = ROOT / "testdata" / "programs"


# --------------------------------------------------------------------------
# Paddle reference harness (shared with tests/ops/test_loss.py / tests/ops/test_random_engine.py)
# --------------------------------------------------------------------------
_REF: dict = {}


def _load_ref():
    if not _REF:
        meta = json.loads((REF_DIR / "tensor_loss.json").read_text())
        _REF["cases"] = {c["name"]: c for c in meta["cases"]}
        with np.load(REF_DIR / "tensor_loss.npz") as z:
            _REF["arrays"] = {k: z[k] for k in z.files}
    return _REF


def paddle_case_names(ops: set[str]) -> list[str]:
    return [n for n, c in _load_ref()["cases"].items() if c["op"] in ops]


def _sym_grad(name: str) -> str:
    """Our grad var name for a symbolic forward name -> Paddle's symbolic form."""
    if name.endswith(GRAD_SUFFIX):
        return f"d({name[:-len(GRAD_SUFFIX)]})"
    return name


def _close(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return abs(float(a) - float(b)) <= 1e-6 * max(1.0, abs(float(b)))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return a == b


class PaddleCase:
    """One recorded Paddle case, replayed through the registry."""

    def __init__(self, name: str):
        ref = _load_ref()
        self.c = ref["cases"][name]
        self.a = ref["arrays"]
        self.op = self.c["op"]
        self.attrs = self.c["attrs"]
        self.ins = {s: [self.a[k] for k in ks] for s, ks in self.c["inputs"].items()}

    def run_forward(self, rng=None) -> dict[str, list[np.ndarray]]:
        outs = {s: [f"out:{s}:{i}" for i in range(n)] for s, n in self.c["output_counts"].items()}
        return opcheck.run_kernel(self.op, self.ins, dict(self.attrs), outs, rng)

    def check_forward(self, rtol=1e-6, atol=1e-6, exact=False) -> dict[str, list[np.ndarray]]:
        got = self.run_forward()
        for slot, keys in self.c["outputs"].items():
            for i, k in enumerate(keys):
                want, mine = self.a[k], np.asarray(got[slot][i])
                assert mine.shape == want.shape, f"{slot}[{i}] shape {mine.shape} != Paddle {want.shape}"
                assert mine.dtype == want.dtype, f"{slot}[{i}] dtype {mine.dtype} != Paddle {want.dtype}"
                if exact or want.dtype.kind not in "fc":
                    np.testing.assert_array_equal(mine, want, err_msg=f"{slot}[{i}]")
                else:
                    np.testing.assert_allclose(mine, want, rtol=rtol, atol=atol, err_msg=f"{slot}[{i}]")
        return got

    def fwd_op(self) -> FwdOp:
        no_grad = {n + GRAD_SUFFIX for n in (f"in:{s}" for s in self.c["stop_gradient"])}
        attrs = opcheck.encode_attrs(self.attrs)
        return FwdOp(self.op, {s: list(v) for s, v in self.c["fwd_inputs"].items()},
                     {s: list(v) for s, v in self.c["fwd_outputs"].items()}, attrs, frozenset(no_grad))

    def our_grad_ops(self):
        return registry.get(self.op).make_grad(self.fwd_op())

    def check_grad_ops(self) -> None:
        """Same grad op types, slots (as symbolic names) and attrs as Paddle's
        (the pass's zero fills `fill_any_like` are not the maker's)."""
        paddle_ops = [g for g in self.c["grad_ops"] if g["type"] != "fill_any_like"]
        ours = self.our_grad_ops()
        assert [g.type for g in ours] == [g["type"] for g in paddle_ops]
        for g, p in zip(ours, paddle_ops):
            assert {s: [_sym_grad(a) for a in v] for s, v in g.inputs.items()} == p["inputs"], g.type
            assert {s: [_sym_grad(a) for a in v] for s, v in g.outputs.items()} == p["outputs"], g.type
            mine = opcheck.grad_op_attrs(g)
            for k, v in p["attrs"].items():
                assert k in mine and _close(mine[k], v), f"{g.type} attr {k}: {mine.get(k)!r} != Paddle {v!r}"

    def check_lod_level_flags(self) -> None:
        """OpDef.sets_lod_level of each grad op type says what Paddle's shape
        inference does to the grad vars it creates."""
        for p in self.c["grad_ops"]:
            if p["type"] == "fill_any_like":
                continue
            for var, has_lod in p["lod_level_set"].items():
                assert registry.get(p["type"]).sets_lod_level == has_lod, (p["type"], var)

    def check_grads(self, rtol=1e-5, atol=1e-6) -> None:
        """Our grad kernels on Paddle's cotangents give Paddle's input grads."""
        fwd = self.run_forward()
        scope: dict[str, np.ndarray] = {}
        for s, arrs in self.ins.items():
            for i, v in enumerate(arrs):
                scope[f"in:{s}:{i}"] = v
        for s, arrs in fwd.items():
            for i, v in enumerate(arrs):
                scope[f"out:{s}:{i}"] = np.asarray(v)
                scope[f"out:{s}:{i}{GRAD_SUFFIX}"] = np.zeros_like(v)  # the pass's zero fill
        for s, per in self.c["cotangents"].items():
            for i, k in per.items():
                scope[f"out:{s}:{i}{GRAD_SUFFIX}"] = self.a[k]
        written: set[str] = set()
        for g in self.our_grad_ops():
            ins = {s: [scope[a] for a in args if a != EMPTY_VAR_NAME] for s, args in g.inputs.items()}
            res = opcheck.run_kernel(g.type, ins, opcheck.grad_op_attrs(g), g.outputs)
            for s, args in g.outputs.items():
                for a, v in zip(args, res.get(s, [])):
                    if a == EMPTY_VAR_NAME or v is None:
                        continue
                    scope[a] = scope[a] + v if a in written else np.asarray(v)
                    written.add(a)
        assert self.c["grads"], "Paddle recorded no grads for this case"
        for s, keys in self.c["grads"].items():
            for i, k in keys.items():
                name = f"in:{s}:{i}{GRAD_SUFFIX}"
                assert name in scope, f"no grad computed for {s}[{i}]"
                want = self.a[k]
                mine = np.asarray(scope[name])
                assert mine.shape == want.shape and mine.dtype == want.dtype, (mine.shape, mine.dtype, want.shape)
                np.testing.assert_allclose(mine, want, rtol=rtol, atol=atol, err_msg=f"grad of {s}[{i}]")


def run(op_type: str, ins: dict, attrs: dict | None = None, outs: dict | None = None, rng=None):
    opdef = registry.get(op_type)
    outs = outs or {s: 1 for s in opdef.outputs}
    names = {s: [f"{s.lower()}{i}" for i in range(n)] for s, n in outs.items()}
    return opcheck.run_kernel(op_type, ins, attrs or {}, names, rng)


# --------------------------------------------------------------------------
# Paddle cases
# --------------------------------------------------------------------------
TENSOR_OPS = {
    "fill_constant", "fill_any_like", "assign", "assign_value", "cast", "shape", "increment", "range",
    "one_hot_v2", "arg_max", "reshape2", "transpose2", "squeeze2", "unsqueeze2", "flatten_contiguous_range",
    "concat", "split", "stack", "unstack", "expand_v2", "tile", "slice", "gather", "gather_nd", "index_select",
    "scatter", "where", "top_k_v2", "lookup_table_v2",
}
#: Cases whose Paddle result pybackward refuses to reproduce (checked separately).
REJECTED = {"slice_neg_axis"}
CASES = [n for n in paddle_case_names(TENSOR_OPS) if n not in REJECTED]


@pytest.mark.parametrize("name", CASES)
def test_forward_matches_paddle(name):
    PaddleCase(name).check_forward(exact=True)


def test_slice_negative_axis_is_rejected():
    """Paddle 3.3.1's slice leaves a negative axis unsliced (and slice_grad
    segfaults on it): we raise instead of copying that."""
    case = PaddleCase("slice_neg_axis")
    np.testing.assert_array_equal(case.a[case.c["outputs"]["Out"][0]], case.ins["Input"][0])
    with pytest.raises(ExecutionError, match="negative axes"):
        case.run_forward()


@pytest.mark.parametrize("name", [n for n in CASES if PaddleCase(n).c["grad_ops"]])
def test_grad_ops_match_paddle(name):
    PaddleCase(name).check_grad_ops()
    PaddleCase(name).check_lod_level_flags()


@pytest.mark.parametrize("name", [n for n in CASES if PaddleCase(n).c["grads"]])
def test_grads_match_paddle(name):
    PaddleCase(name).check_grads()


def test_reference_covers_every_op():
    assert {_load_ref()["cases"][n]["op"] for n in CASES} == TENSOR_OPS


# --------------------------------------------------------------------------
# grad-op conventions in the golden programs written by Paddle
# --------------------------------------------------------------------------
def _ops(case: str, file: str = "backward.pb", block: int = 0):
    return pybackward.load(PROGRAMS / case / file).blocks[block].ops


def _our_grads(fwd_op, no_grad=frozenset()):
    fwd = FwdOp(fwd_op.type, {k: list(v) for k, v in fwd_op.inputs.items()},
                {k: list(v) for k, v in fwd_op.outputs.items()}, list(fwd_op.desc.attrs), no_grad)
    return registry.get(fwd_op.type).make_grad(fwd)


def _slots(d):
    return {k: list(v) for k, v in d.items()}


@pytest.mark.parametrize("fwd_type,grad_type", [("slice", "slice_grad"), ("gather", "gather_grad"),
                                                ("concat", "concat_grad")])
def test_golden_concat_split_slice_gather(fwd_type, grad_type):
    ops = _ops("concat_split_slice_gather")
    fwd = next(o for o in ops if o.type == fwd_type and o.attr("op_role") == 0)
    golden = next(o for o in ops if o.type == grad_type)
    (ours,) = _our_grads(fwd)
    assert ours.type == grad_type
    assert ours.inputs == _slots(golden.inputs)
    # our unrenamed outputs vs Paddle's (renamed by gradient accumulation)
    for slot, names in _slots(golden.outputs).items():
        assert [n.split("@RENAME@")[0] for n in names] == ours.outputs[slot]


def test_golden_split_grad_is_concat():
    ops = _ops("concat_split_slice_gather")
    splits = [o for o in ops if o.type == "split"]
    grads = [o for o in ops if o.type == "concat" and o.attr("op_role") == 1]
    assert len(splits) == len(grads) == 2
    for fwd in splits:
        (ours,) = _our_grads(fwd)
        golden = next(g for g in grads if g.inputs["X"][0] == fwd.outputs["Out"][0] + "@GRAD")
        assert ours.type == "concat"
        assert ours.inputs == _slots(golden.inputs)
        assert [n.split("@RENAME@")[0] for n in golden.outputs["Out"]] == ours.outputs["Out"]
        attrs = opcheck.grad_op_attrs(ours)
        for k in ("axis", "num", "sections"):
            assert attrs[k] == golden.attr(k)


def test_golden_lookup_table_v2_grad():
    ops = _ops("doc_append_backward")
    fwd = next(o for o in ops if o.type == "lookup_table_v2")
    golden = next(o for o in ops if o.type == "lookup_table_v2_grad")
    (ours,) = _our_grads(fwd)
    assert (ours.type, ours.inputs, ours.outputs) == (golden.type, _slots(golden.inputs), _slots(golden.outputs))
    assert opcheck.grad_op_attrs(ours)["padding_idx"] == golden.attr("padding_idx")


@pytest.mark.parametrize("case", ["cond_block", "while_loop"])
def test_golden_assign_grad(case):
    prog = pybackward.load(PROGRAMS / case / "backward.pb")
    fwd = next(o for b in prog.blocks for o in b.ops if o.type == "assign" and o.attr("op_role") == 0)
    golden = next(o for b in prog.blocks for o in b.ops if o.type == "assign" and o.attr("op_role") == 1)
    (ours,) = _our_grads(fwd)
    assert ours.type == "assign"
    assert ours.inputs == {"X": [fwd.outputs["Out"][0] + "@GRAD"]}
    assert ours.outputs == {"Out": [fwd.inputs["X"][0] + "@GRAD"]}
    assert golden.inputs["X"] == ours.inputs["X"] and golden.outputs["Out"] == ours.outputs["Out"]


def test_split_grad_drops_no_grad_input():
    fwd = FwdOp("split", {"X": ["x"], "AxisTensor": []}, {"Out": ["a", "b"]}, [], frozenset({"x@GRAD"}))
    (g,) = registry.get("split").make_grad(fwd)
    assert g.inputs == {"X": ["a@GRAD", "b@GRAD"], "AxisTensor": []} and g.outputs == {"Out": []}


def test_concat_grad_keeps_empty_positions():
    fwd = FwdOp("concat", {"X": ["a", "b", "c"], "AxisTensor": []}, {"Out": ["o"]}, [], frozenset({"b@GRAD"}))
    (g,) = registry.get("concat").make_grad(fwd)
    assert g.outputs == {"X@GRAD": ["a@GRAD", EMPTY_VAR_NAME, "c@GRAD"]}


def test_increment_grad_reverses_the_step():
    fwd = FwdOp("increment", {"X": ["i"]}, {"Out": ["i"]}, opcheck.encode_attrs({"step": 1.0}), frozenset())
    (g,) = registry.get("increment").make_grad(fwd)
    assert (g.type, g.inputs, g.outputs) == ("increment", {"X": ["i"]}, {"Out": ["i"]})
    assert opcheck.grad_op_attrs(g)["step"] == -1.0
    out = run("increment", {"X": [np.array([4], np.int64)]}, opcheck.grad_op_attrs(g))["Out"][0]
    assert out.dtype == np.int64 and out.tolist() == [3]


def test_cast_grad_swaps_dtypes_and_keeps_attr_types():
    attrs = opcheck.encode_attrs({"in_dtype": 5, "out_dtype": 6})
    fwd = FwdOp("cast", {"X": ["x"]}, {"Out": ["y"]}, attrs, frozenset())
    (g,) = registry.get("cast").make_grad(fwd)
    assert g.inputs == {"X": ["y@GRAD"]} and g.outputs == {"Out": ["x@GRAD"]}
    assert g.attrs["in_dtype"][0] == 6 and g.attrs["out_dtype"][0] == 5


# --------------------------------------------------------------------------
# independent formulas and edge cases
# --------------------------------------------------------------------------
def test_fill_constant_attr_and_tensor_priority():
    out = run("fill_constant", {}, {"shape": [2, 1], "dtype": 3, "value": 2.9})["Out"][0]
    assert out.dtype == np.int64 and out.tolist() == [[2], [2]]
    out = run("fill_constant", {"ShapeTensor": [np.array([3])], "ShapeTensorList": [np.array([5])]},
              {"shape": [1], "dtype": 6, "value": 1.0, "str_value": "-inf"})["Out"][0]
    assert out.shape == (3,) and out.dtype == np.float64 and np.all(out == -np.inf)


def test_assign_value_legacy_lists():
    out = run("assign_value", {}, {"shape": [2], "dtype": 3, "int64_values": [7, -1]})["Out"][0]
    assert out.dtype == np.int64 and out.tolist() == [7, -1]
    with pytest.raises(ExecutionError):
        run("assign_value", {}, {"shape": [3], "dtype": 5, "values": [1.0]})


def test_reshape_rules():
    from pybackward.ops.shape.core import reshape_target, unsqueeze_shape
    assert reshape_target((3, 4), [0, -1]) == (3, 4)
    assert reshape_target((2, 3, 4), [-1, 0]) == (8, 3)
    assert unsqueeze_shape((3, 4), [-1, 0, -2]) == (1, 3, 4, 1, 1)
    assert unsqueeze_shape((3, 4), [1, 1]) == (3, 1, 1, 4)
    with pytest.raises(ExecutionError):
        reshape_target((3, 4), [5, -1])


def test_xshape_outputs_carry_input_shape():
    x = np.arange(24.0).reshape(2, 3, 4)
    for op, attrs in [("reshape2", {"shape": [6, 4]}), ("transpose2", {"axis": [1, 0, 2]}),
                      ("squeeze2", {"axes": []}), ("unsqueeze2", {"axes": [0]}),
                      ("flatten_contiguous_range", {"start_axis": 0, "stop_axis": 1})]:
        xs = run(op, {"X": [x]}, attrs)["XShape"][0]
        assert xs.shape == (0, 2, 3, 4) and xs.size == 0


def test_slice_matches_numpy():
    x = np.arange(60.0).reshape(3, 4, 5)
    out = run("slice", {"Input": [x]}, {"axes": [1, 2], "starts": [-3, 1], "ends": [10, -1]})["Out"][0]
    np.testing.assert_array_equal(out, x[:, -3:10, 1:-1])
    out = run("slice", {"Input": [x]}, {"axes": [0, 2], "starts": [2, 4], "ends": [3, 5],
                                        "decrease_axis": [0, 2]})["Out"][0]
    np.testing.assert_array_equal(out, x[2, :, 4])


def test_scatter_semantics():
    x = np.zeros((4, 2))
    upd = np.array([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    ids = np.array([1, 1, 3])
    over = run("scatter", {"X": [x + 5], "Ids": [ids], "Updates": [upd]}, {"overwrite": True})["Out"][0]
    np.testing.assert_array_equal(over, [[5, 5], [2, 2], [5, 5], [3, 3]])
    add = run("scatter", {"X": [x + 5], "Ids": [ids], "Updates": [upd]}, {"overwrite": False})["Out"][0]
    np.testing.assert_array_equal(add, [[5, 5], [3, 3], [5, 5], [3, 3]])


def test_tile_and_expand_grads_sum_repeats():
    g = np.arange(12.0).reshape(2, 6)
    res = run("tile_grad", {"X": [np.zeros((1, 3))], "Out@GRAD": [g]}, {"repeat_times": [2, 2]},
              {"X@GRAD": 1})["X@GRAD"][0]
    np.testing.assert_array_equal(res, (g[:, :3] + g[:, 3:]).sum(0, keepdims=True))
    res = run("expand_v2_grad", {"X": [np.zeros((3, 1))], "Out@GRAD": [np.ones((2, 3, 4))]},
              {"shape": [2, -1, 4]}, {"X@GRAD": 1})["X@GRAD"][0]
    np.testing.assert_array_equal(res, np.full((3, 1), 8.0))


def test_lookup_table_padding_row_gets_no_grad():
    w = np.arange(12.0).reshape(4, 3)
    ids = np.array([[0, 2], [2, 3]])
    out = run("lookup_table_v2", {"W": [w], "Ids": [ids]}, {"padding_idx": 2})["Out"][0]
    np.testing.assert_array_equal(out[0, 1], 0)
    np.testing.assert_array_equal(out[1, 1], w[3])
    gw = run("lookup_table_v2_grad", {"Ids": [ids], "W": [w], "Out@GRAD": [np.ones((2, 2, 3))]},
             {"padding_idx": 2}, {"W@GRAD": 1})["W@GRAD"][0]
    np.testing.assert_array_equal(gw.sum(1), [3, 0, 0, 3])


def test_top_k_ties_and_nan():
    x = np.array([[1.0, np.nan, 3.0, 3.0, 0.0]], np.float32)
    res = run("top_k_v2", {"X": [x]}, {"k": 3})
    np.testing.assert_array_equal(res["Indices"][0], [[1, 2, 3]])
    res = run("top_k_v2", {"X": [x]}, {"k": 2, "largest": False})
    np.testing.assert_array_equal(res["Indices"][0], [[4, 0]])


def test_range_accumulates_in_dtype():
    out = run("range", {"Start": [np.array([0.0], np.float32)], "End": [np.array([1.0], np.float32)],
                        "Step": [np.array([0.1], np.float32)]})["Out"][0]
    acc, want = np.float32(0), []
    for _ in range(10):
        want.append(acc)
        acc = np.float32(acc + np.float32(0.1))
    np.testing.assert_array_equal(out, np.array(want, np.float32))


def test_feed_and_fetch_copy():
    x = np.arange(3.0)
    assert run("feed", {"X": [[x * 0, x]]}, {"col": 1})["Out"][0].tolist() == x.tolist()
    assert run("feed", {"X": [[]]}, {"col": 0}) == {}
    assert run("fetch", {"X": [x]}, {"col": 0})["Out"][0].tolist() == x.tolist()


@pytest.mark.parametrize("op,ins,attrs", [
    ("fill_constant", {}, {"shape": [2], "dtype": 22, "value": 1.0}),        # bf16: no NumPy dtype
    ("cast", {"X": [np.ones(2)]}, {"in_dtype": 6, "out_dtype": 22}),
    ("transpose2", {"X": [np.ones((2, 3))]}, {"axis": [0, 0]}),
    ("split", {"X": [np.ones((2, 6))]}, {"axis": 1, "sections": [-1, -1]}),
    ("fill_constant", {}, {"shape": [2], "dtype": 5, "str_value": "abc"}),
])
def test_unsupported_attr_raises(op, ins, attrs):
    with pytest.raises(ExecutionError, match="not supported"):
        run(op, ins, attrs)


@pytest.mark.parametrize("op,ins,attrs", [
    ("lookup_table_v2", {"W": [np.ones((3, 2))], "Ids": [np.array([3])]}, {}),
    ("one_hot_v2", {"X": [np.array([4])]}, {"depth": 4, "allow_out_of_range": True}),
    ("gather", {"X": [np.ones((3, 2))], "Index": [np.array([-4])]}, {}),
    ("reshape2", {"X": [np.ones((3, 4))]}, {"shape": [5, -1]}),
    ("slice", {"Input": [np.ones((3, 4))]}, {"axes": [1], "starts": [0], "ends": [2], "decrease_axis": [1]}),
])
def test_bad_inputs_raise(op, ins, attrs):
    with pytest.raises(ExecutionError):
        run(op, ins, attrs)


@pytest.mark.parametrize("op", ["assign", "cast"])
def test_out_grad_inputs_are_never_dropped(op):
    """Like Paddle's C++ makers: Out@GRAD stays an input even in the no-grad
    set (the pass zero-fills it); X@GRAD in the no-grad set is dropped."""
    attrs = opcheck.encode_attrs({"in_dtype": 5, "out_dtype": 5} if op == "cast" else {})
    fwd = FwdOp(op, {"X": ["x"]}, {"Out": ["y"]}, attrs, frozenset({"y@GRAD", "x@GRAD"}))
    (g,) = registry.get(op).make_grad(fwd)
    assert g.inputs == {"X": ["y@GRAD"]} and g.outputs == {"Out": []}


def test_lookup_table_v1_is_v2_on_ids_with_a_trailing_1():
    """Paddle 3.3.1: lookup_table(Ids [4,1]) -> Out [4,3]; W@GRAD rows of padding_idx stay 0."""
    from pybackward.ops.opcheck import run_kernel
    w = np.arange(30, dtype=np.float32).reshape(10, 3)
    ids = np.array([[1], [2], [2], [5]], dtype=np.int64)
    out = run_kernel("lookup_table", {"Ids": [ids], "W": [w]}, {"padding_idx": 2}, {"Out": ["o"]})["Out"][0]
    assert out.shape == (4, 3)
    np.testing.assert_array_equal(out, np.stack([w[1], 0 * w[0], 0 * w[0], w[5]]))
    g = np.full((4, 3), 1 / 12, dtype=np.float32)
    gw = run_kernel("lookup_table_grad", {"Ids": [ids], "W": [w], "Out@GRAD": [g]}, {"padding_idx": 2},
                    {"W@GRAD": ["gw"]})["W@GRAD"][0]
    assert gw[2].sum() == 0 and np.allclose(gw[1], 1 / 12) and np.allclose(gw[5], 1 / 12)
    with pytest.raises(pybackward.ExecutionError, match="last dim is 1"):
        run_kernel("lookup_table", {"Ids": [ids[:, 0]], "W": [w]}, {}, {"Out": ["o"]})
