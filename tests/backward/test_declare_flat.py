"""The grad var declarations' shortcuts (pybackward/backward/emit.py):

- `_append_vars_sorted` writes exactly the vars a plain rebuild writes (the
  file's vars, then every var added since and every new one, sorted by name
  with a stable sort, each `VarDesc(name, type, stop_gradient=False)`), and
  the block's var index it leaves names each var at its position, bound to
  the block's own desc - on random mixes of added vars, NewVars (long names,
  non-ASCII names, shared types), VarDescs and duplicate-looking names.
- `Block.reindex_vars(start, names)` gives the index `reindex_vars(start)`
  reads back from the descs (also on the static API's Block).
- `Operator(..., in_args, out_args)` holds the names it was given.
- `_declare_flat` keys its per-call grad type dicts by `sets_lod`: one
  forward type read by a grad op that sets the LoD level and by one that
  does not (transpose2_grad) gets two grad types, as the step-by-step pass
  declares them.
"""
from __future__ import annotations

import random
import sys
import warnings
from pathlib import Path

import pybackward
from pybackward._proto import framework_pb2 as pb
from pybackward.backward import emit, fused
from pybackward.legacy.program import Operator, Program

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from randprog import OpSpec, VarSpec, materialize  # noqa: E402


def _type(dtype: int, dims: list[int], lod: int | None = None, rows: bool = False) -> pb.VarType:
    t = pb.VarType(type=pb.VarType.SELECTED_ROWS if rows else pb.VarType.DENSE_TENSOR)
    tensor = t.selected_rows if rows else t.dense_tensor.tensor
    tensor.data_type = dtype
    tensor.dims.extend(dims)
    if lod is not None and not rows:
        t.dense_tensor.legacy_lod_level = lod
    return t


def _random_name(rng: random.Random, taken: set[str]) -> str:
    while True:
        kind = rng.random()
        if kind < 0.1:
            name = "long_" + "x" * rng.randint(120, 300) + "@GRAD"      # fields of 128 bytes and more
        elif kind < 0.2:
            name = "é名_" + str(rng.randint(0, 99)) + "@GRAD"           # multi-byte UTF-8
        else:
            name = rng.choice("abcxyz") + str(rng.randint(0, 60)) + rng.choice(("@GRAD", "", "@GRAD@RENAME@block0@1"))
        if name not in taken:
            taken.add(name)
            return name


def _var_desc(name: str, t: pb.VarType) -> pb.VarDesc:
    d = pb.VarDesc(name=name, stop_gradient=False)
    d.type.CopyFrom(t)
    return d


def test_append_vars_sorted_matches_a_plain_rebuild():
    types = [_type(pb.VarType.FP32, [-1, 4]), _type(pb.VarType.FP32, [4, 4], lod=1),
             _type(pb.VarType.INT64, [3]), _type(pb.VarType.FP64, [2, 2, 2], rows=True)]
    for seed in range(40):
        rng = random.Random(seed)
        taken: set[str] = set()
        desc = pb.ProgramDesc()
        bdesc = desc.blocks.add(idx=0, parent_idx=-1)
        for _ in range(rng.randint(0, 6)):
            bdesc.vars.append(_var_desc(_random_name(rng, taken), rng.choice(types)))
        prog = Program(desc)
        block = prog.block(0)
        keep = len(block.desc.vars)
        # vars the forward part added after the load
        added = [_var_desc(_random_name(rng, taken), rng.choice(types)) for _ in range(rng.randint(0, 4))]
        for d in added:
            block.desc.vars.append(d)
        block.sync()
        # the pass's: NewVars sharing their grad type templates, and VarDescs
        new: list = []
        for _ in range(rng.randint(0, 30)):
            name = _random_name(rng, taken)
            t = rng.choice(types)
            if rng.random() < 0.15:
                new.append(_var_desc(name, t))
            else:
                new.append(emit.NewVar(name, emit._grad_type(t, rng.random() < 0.5)))
        expected_rest = sorted([(d.name, d.SerializePartialToString()) for d in added]
                               + [(v.name, (_var_desc(v.name, v.type) if type(v) is emit.NewVar else v)
                                   .SerializePartialToString()) for v in new],
                               key=lambda r: r[0])
        want = pb.BlockDesc()
        want.CopyFrom(block.desc)
        del want.vars[keep:]
        for _, data in expected_rest:
            want.vars.add().MergeFromString(data)

        emit._append_vars_sorted(block, list(new))

        assert block.desc.SerializePartialToString() == want.SerializePartialToString(), seed
        names = [d.name for d in block.desc.vars]
        assert list(block.vars) == names
        for i, (name, var) in enumerate(block.vars.items()):
            assert var.desc.name == name
            # the view is bound to the block's own desc: an edit through it shows there
            var.persistable = True
            assert block.desc.vars[i].persistable, (seed, name)


def test_reindex_vars_with_names_is_reading_them_back():
    for make in (Program, pybackward.static.Program):
        desc = pb.ProgramDesc()
        bdesc = desc.blocks.add(idx=0, parent_idx=-1)
        for n in ("b", "a"):
            bdesc.vars.append(_var_desc(n, _type(pb.VarType.FP32, [2])))
        prog = make(desc)
        block = prog.block(0)
        for n in ("z", "c", "m"):
            block.desc.vars.append(_var_desc(n, _type(pb.VarType.FP32, [3])))
        block.reindex_vars(2)
        read_back = {n: v.desc.SerializePartialToString() for n, v in block.vars.items()}
        block.reindex_vars(2, ["z", "c", "m"])
        given = {n: v.desc.SerializePartialToString() for n, v in block.vars.items()}
        assert list(given) == list(read_back) == ["b", "a", "z", "c", "m"]
        assert given == read_back
        assert block.vars["c"].desc.type.dense_tensor.tensor.dims == [3]


def test_operator_holds_the_names_it_was_given():
    prog = materialize({"x": VarSpec("x", (2, 2)), "y": VarSpec("y", (2, 2))},
                       [OpSpec("relu", {"X": ["x"]}, {"Out": ["y"]}, {})])
    block = prog.block(0)
    desc = block.desc.ops[0]
    assert list(Operator(block, desc).input_arg_names) == ["x"]
    op = Operator(block, desc, None, None, ("x",), ("y",))
    assert op._in_args == ("x",) and op._out_args == ("y",)
    assert list(op.input_arg_names) == ["x"] and list(op.output_arg_names) == ["y"]
    assert op.sub_block is None


def _lod_chain() -> bytes:
    """p -> relu -> h0 -> transpose2 -> h1 -> mean, every var of one type with
    LoD level 1: relu_grad and mean_grad's output grads keep the level,
    transpose2_grad's (`sets_lod_level=False`) does not."""
    vars_ = {"p": VarSpec("p", (4, 4), "param"), "h0": VarSpec("h0", (4, 4)), "h1": VarSpec("h1", (4, 4)),
             "xs": VarSpec("xs", (0, 4, 4), "xshape"), "loss": VarSpec("loss", (1,))}
    ops = [OpSpec("relu", {"X": ["p"]}, {"Out": ["h0"]}, {}),
           OpSpec("transpose2", {"X": ["h0"]}, {"Out": ["h1"], "XShape": ["xs"]}, {"axis": [1, 0]}),
           OpSpec("mean", {"X": ["h1"]}, {"Out": ["loss"]}, {})]
    prog = materialize(vars_, ops)
    for n in ("p", "h0", "h1"):
        prog.block(0).vars[n].desc.type.dense_tensor.legacy_lod_level = 1
    return pybackward.dumps(prog)


def test_declare_flat_keeps_the_grad_types_of_both_lod_cases_apart():
    data = _lod_chain()
    out = []
    walks = fused.STATS["walks"]
    for on in (True, False):
        fused.ENABLED = on
        try:
            prog = pybackward.loads(data)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pybackward.append_backward("loss", program=prog)
            out.append(prog)
        finally:
            fused.ENABLED = True
    assert fused.STATS["walks"] == walks + 1          # the walk (and `_declare_flat`) ran once
    walked, stepped = out
    assert pybackward.dumps(walked) == pybackward.dumps(stepped)
    levels = {n: walked.block(0).vars[n + "@GRAD"].desc.type.dense_tensor for n in ("p", "h0", "h1")}
    assert levels["p"].legacy_lod_level == 1 and levels["h1"].legacy_lod_level == 1
    assert not levels["h0"].HasField("legacy_lod_level")
