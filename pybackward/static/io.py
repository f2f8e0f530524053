"""`save` and `save_inference_model`: the files Paddle 3.3.1's legacy
`paddle.static.save` / `paddle.static.save_inference_model` write, from a
builder program and the values in the global scope (after
`Executor().run(startup)`), so a model built here goes to Paddle - or to
`pybackward run` / `append` - as Paddle's own files do.

* `save(program, "m")`: `m.pdmodel` (the program as it is), `m.pdparams`
  (its parameters, a pickle of name -> array, protocol 4 by default) and
  `m.pdopt` (the other persistable vars that are not data vars: optimizer
  state), as `paddle.static.save`.
* `save_inference_model("inf", feed_vars, fetch_vars, executor)`:
  `inf.pdmodel` and `inf.pdiparams`. The program is Paddle's
  `normalize_program`: a copy without feed/fetch ops, pruned to what the
  fetch vars need from the feeds (`Program._prune_with_input`, Paddle's C++
  `prune`: ops kept in order, each block's vars cut to the ones its ops
  use, sorted by name), `is_test` set (`_inference_optimize`), feed ops
  prepended and fetch ops appended; then `_remove_training_info`: no var is a
  parameter any more and none carries `stop_gradient`, and each op loses its
  extra attrs and extra output slots (with the extra attrs, `op_callstack`
  and `with_quant_attr` go too). The values: every persistable var of that
  program, sorted by name, in Paddle's tensor format (`save_combine`).

Checked byte for byte against Paddle 3.3.1's files for the same build
(`tests/cli/test_everyday_path.py`); `op_callstack` is the one difference
(Paddle records the Python stack that created the feed and fetch ops, which
keep it). Not done: Paddle's `process_type_promotion` (casts inserted for
elementwise ops whose inputs differ in dtype; the builder makes none),
`separate_parameters`, `legacy_format` and PIR programs.
"""
from __future__ import annotations

import os
import pickle
from typing import Any, Iterable, Sequence

import numpy as np

from .._proto import framework_pb2 as pb
from ..base.attrs import BLOCK, BLOCKS, BOOLEAN, INT, STRING, STRINGS
from ..base.errors import ArgumentError, ArgumentTypeError, ExecutionError, OutputError
from ..base.files import write_atomic
from ..legacy.program import Program as _Program
from ..ops.paddle_data import paddle_op
from ..tensors.paddle_files import write_combined
from ._clone import inference_optimize
from ._opdesc import fill_var_desc
from .executor import global_scope
from .framework import Program, Variable, default_main_program

__all__ = ["save", "save_inference_model", "normalize_program", "is_persistable", "is_parameter",
           "is_belong_to_optimizer"]

_VT = pb.VarType
#: Var types Paddle's `is_persistable` leaves out.
_NOT_PERSISTABLE = frozenset({_VT.FEED_MINIBATCH, _VT.FETCH_LIST, _VT.READER})
_OPTIMIZE = 2                                     # OpRole.Optimize
_COMMON_CLIPPED = ("op_callstack", "with_quant_attr")
_QUANT_ATTRS = frozenset({"with_quant_attr", "quantization_type", "skip_quant", "activation_bits",
                          "bit_length", "quantize_weight_bits", "weight_quant_scale"})


# --------------------------------------------------------------------------
# Which vars
# --------------------------------------------------------------------------
def is_persistable(var: Variable) -> bool:
    """Paddle's `paddle.static.io.is_persistable`: persistable, and not a feed, fetch or reader var."""
    return bool(var.persistable) and var.type not in _NOT_PERSISTABLE


def is_parameter(var: Variable) -> bool:
    """A parameter (`paddle.static.save` puts it in the .pdparams)."""
    return bool(var.is_parameter)


def is_belong_to_optimizer(var: Variable) -> bool:
    """Paddle's rule for the .pdopt: persistable, neither a parameter nor a data var."""
    return not (var.is_parameter or var.desc.need_check_feed) and is_persistable(var)


def _values(names: Iterable[str], what: str) -> dict[str, np.ndarray]:
    scope = global_scope()
    out, missing = {}, []
    for n in names:
        v = scope.get(n)
        if v is None:
            missing.append(n)
        else:
            out[n] = np.asarray(v)
    if missing:
        listed = ", ".join(repr(n) for n in missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6
                                                            else "")
        raise ExecutionError(f"{what}: no value in the global scope for {listed}; run the startup program "
                             "first (static.Executor().run(static.default_startup_program()))")
    return out


def _prefix(path: str | os.PathLike, what: str) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise ArgumentTypeError(f"{what} takes a path prefix (str), not {type(path).__name__}")
    path = os.fspath(path)
    if not os.path.basename(path):
        raise ArgumentError(f"{what}: {path!r} names a directory; give DIR/NAME (the files are NAME.pdmodel, ...)")
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    return path


def _write(path: str, data: bytes) -> None:
    if os.path.isdir(path):
        raise OutputError(f"{path}: is an existing directory")
    try:
        write_atomic(path, data)
    except OSError as e:
        raise OutputError(f"{path}: cannot write: {e.strerror or e}") from None


# --------------------------------------------------------------------------
# save
# --------------------------------------------------------------------------
def save(program: Program, model_path: str | os.PathLike, protocol: int = 4, **configs: Any) -> None:
    """`paddle.static.save`: MODEL_PATH.pdparams (the parameters),
    MODEL_PATH.pdopt (the optimizer's persistable vars) and MODEL_PATH.pdmodel
    (the program), the values from the global scope."""
    if not isinstance(program, _Program):
        raise ArgumentTypeError(f"save() takes a Program, not {type(program).__name__}")
    protocol = configs.get("pickle_protocol", protocol)
    if not isinstance(protocol, int) or isinstance(protocol, bool):
        raise ArgumentTypeError(f"The 'protocol' MUST be `int`, but received {type(protocol)}")
    if not 2 <= protocol <= 4:
        raise ArgumentError(f"Expected 1<'protocol'<5, but received protocol={protocol}")
    path = _prefix(model_path, "save()")
    variables = list(program.list_vars())
    params = _values([v.name for v in variables if is_parameter(v)], "save()")
    opt = _values([v.name for v in variables if is_belong_to_optimizer(v)], "save()")
    _write(path + ".pdparams", pickle.dumps(_pickled(params), protocol=protocol))
    _write(path + ".pdopt", pickle.dumps(_pickled(opt), protocol=protocol))
    _write(path + ".pdmodel", program.desc.SerializeToString())


def _pickled(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    # C order, native byte order and numpy's shared dtype instance, as Paddle's
    # `np.array(tensor)` values pickle (tensors/paddle_files.write_pickle).
    return {k: a.astype(np.dtype(a.dtype.char), order="C") for k, a in arrays.items()}


# --------------------------------------------------------------------------
# save_inference_model
# --------------------------------------------------------------------------
def save_inference_model(path_prefix: str | os.PathLike, feed_vars: Variable | Sequence[Variable],
                         fetch_vars: Variable | Sequence[Variable], executor: Any = None,
                         **kwargs: Any) -> None:
    """`paddle.static.save_inference_model`: PATH_PREFIX.pdmodel (the program
    normalized for inference, see the module doc) and PATH_PREFIX.pdiparams
    (its persistable vars from the global scope). `program=` (default: the
    default main program), `clip_extra=` (default True) and
    `skip_prune_program=` as Paddle takes them; `executor` is accepted for
    Paddle's signature (the values come from the global scope, where
    `Executor.run` put them)."""
    path = _prefix(path_prefix, "save_inference_model()")
    program = kwargs.get("program") or default_main_program()
    infer = normalize_program(program, feed_vars, fetch_vars,
                              skip_prune_program=kwargs.get("skip_prune_program", False))
    desc = infer.desc
    remove_training_info(desc, clip_extra=kwargs.get("clip_extra", True))
    model, params = path + ".pdmodel", path + ".pdiparams"
    for p in (model, params):
        if os.path.isdir(p):
            raise OutputError(f"{p}: is an existing directory")
    saved = _Program(desc)
    names = sorted({v.name for b in saved.blocks for v in b.vars.values()
                    if v.persistable and v.type not in _NOT_PERSISTABLE and v.type != _VT.RAW})
    values = _values(names, "save_inference_model()")
    _write(model, desc.SerializeToString())
    if names:
        write_combined(params, values, saved)


def normalize_program(program: Program, feed_vars: Variable | Sequence[Variable],
                      fetch_vars: Variable | Sequence[Variable], **kwargs: Any) -> Program:
    """Paddle's `paddle.static.normalize_program`: a copy pruned to what
    `fetch_vars` need from `feed_vars`, `is_test` set, with feed and fetch
    ops (the program given is left as it is)."""
    if not isinstance(program, _Program):
        raise ArgumentTypeError(f"program must be a Program, not {type(program).__name__}")
    feeds = _var_list(feed_vars, "feed_vars")
    fetches = _var_list(fetch_vars, "fetch_vars")
    if not program.global_block().ops:
        raise ArgumentError("program must not be empty. at least one operator is required!")
    desc = pb.ProgramDesc()
    desc.CopyFrom(program.desc)
    block = desc.blocks[0]
    for op in block.ops:
        _set_op_device(op)
    kept = [op for op in block.ops if op.type not in ("feed", "fetch")]
    if len(kept) != len(block.ops):
        copies = [_copied(op) for op in kept]
        del block.ops[:]
        block.ops.extend(copies)
    feed_names = [v.name for v in feeds]
    if not kwargs.get("skip_prune_program", False):
        desc = _prune_with_input(desc, feed_names, [v.name for v in fetches])
    _remove_read_ops(desc)
    inference_optimize(desc)
    _prepend_feed_ops(desc, feed_names)
    _append_fetch_ops(desc, [v.name for v in fetches])
    out = Program(desc, program.source)
    out.random_seed = program.random_seed
    return out


def _var_list(vs: Any, what: str) -> list[Variable]:
    items = list(vs) if isinstance(vs, (list, tuple)) else [vs]
    if not items or not all(isinstance(v, Variable) or hasattr(v, "name") and hasattr(v, "desc") for v in items):
        raise ArgumentTypeError(f"{what} type must be a Variable or a list of Variable.")
    return items


def _copied(op: pb.OpDesc) -> pb.OpDesc:
    c = pb.OpDesc()
    c.CopyFrom(op)
    return c


def _set_op_device(op: pb.OpDesc) -> None:
    """`op._set_attr("op_device", "")`, as normalize_program does to every op of block 0."""
    for a in op.attrs:
        if a.name == "op_device":
            a.type = STRING
            a.s = ""
            return
    op.attrs.add(name="op_device", type=STRING, s="")


# -- Paddle's C++ prune ----------------------------------------------------
def _prune_with_input(desc: pb.ProgramDesc, feeds: list[str], targets: list[str]) -> pb.ProgramDesc:
    """`Program._prune_with_input(feeds, targets)`: the target ops are the last
    writer of each target (optimize ops skipped), unless a target is a feed
    no op can compute; then Paddle's `prune` (see `_prune_block`)."""
    block = desc.blocks[0]
    persistable = {v.name for v in block.vars if v.persistable}
    declared = {v.name for v in block.vars}
    generatable: set[str] = set()
    feed_set = set(feeds)
    for op in block.ops:
        ins = [n for s in op.inputs for n in s.arguments]
        if all(n not in declared or n in persistable or n in generatable or n in feed_set for n in ins):
            generatable.update(n for s in op.outputs for n in s.arguments)
    target_ops: set[int] = set()
    for name in targets:
        if name in feed_set and name not in generatable:
            continue
        found = None
        for i, op in enumerate(block.ops):
            if any(name in s.arguments for s in op.outputs) and not _role(op) & _OPTIMIZE:
                found = i
        if found is not None:
            target_ops.add(found)
    out = pb.ProgramDesc()
    out.CopyFrom(desc)
    del out.blocks[:]
    _prune_block(desc, out, 0, -1, set(), feed_set, target_ops)
    return out


def _role(op: pb.OpDesc) -> int:
    for a in op.attrs:
        if a.name == "op_role":
            return a.i
    return 0


def _prune_block(src: pb.ProgramDesc, out: pb.ProgramDesc, block_id: int, parent: int,
                 dependent: set[str], feeds: set[str], targets: set[int]) -> None:
    """One block of Paddle's `prune`: walking back from the end, an op stays
    when it is a target or writes a var a kept op reads (optimize ops only as
    targets); the feeds are not followed further. A kept op's sub-block is
    pruned the same way, for the vars the op reads and writes, and appended."""
    ops = src.blocks[block_id].ops
    keep = [False] * len(ops)
    for i in range(len(ops) - 1, -1, -1):
        op = ops[i]
        writes = any(n in dependent for s in op.outputs for n in s.arguments)
        if i in targets or (writes and not _role(op) & _OPTIMIZE):
            dependent.update(n for s in op.inputs for n in s.arguments if n not in feeds)
            keep[i] = True
    nb = out.blocks.add()
    nb.CopyFrom(src.blocks[block_id])
    nb.idx = len(out.blocks) - 1
    nb.parent_idx = parent
    del nb.ops[:]
    for i, op in enumerate(ops):
        if not keep[i]:
            continue
        new = nb.ops.add()
        new.CopyFrom(op)
        sub = _sub_block(new)
        if sub is not None:
            sub_dependent = {n for s in (*new.inputs, *new.outputs) for n in s.arguments if n not in feeds}
            _prune_block(src, out, sub.block_idx, nb.idx, sub_dependent, feeds, set())
            sub.block_idx = len(out.blocks) - 1
    used = {n for op in nb.ops for s in (*op.inputs, *op.outputs) for n in s.arguments}
    kept_vars = sorted((v for v in nb.vars if v.name in used), key=lambda v: v.name.encode())
    copies = [_copied_var(v) for v in kept_vars]
    del nb.vars[:]
    nb.vars.extend(copies)


def _sub_block(op: pb.OpDesc):
    for a in op.attrs:
        if a.type == BLOCK:
            return a
        if a.type == BLOCKS and a.blocks_idx:
            raise ArgumentError(f"op {op.type}: pruning an op with a list of sub-blocks is not supported")
    return None


def _copied_var(v: pb.VarDesc) -> pb.VarDesc:
    c = pb.VarDesc()
    c.CopyFrom(v)
    return c


def _remove_read_ops(desc: pb.ProgramDesc) -> None:
    """`_inference_optimize(prune_read_op=True)`: the ops up to the first `read`, and reader vars."""
    block = desc.blocks[0]
    idx = next((i for i, op in enumerate(block.ops) if op.type == "read"), None)
    if idx is not None:
        rest = [_copied(op) for op in block.ops[idx + 1:]]
        del block.ops[:]
        block.ops.extend(rest)
    readers = [v for v in block.vars if v.type.type == _VT.READER]
    if readers:
        rest_vars = [_copied_var(v) for v in block.vars if v.type.type != _VT.READER]
        del block.vars[:]
        block.vars.extend(rest_vars)


def _holder(block: pb.BlockDesc, name: str, var_type: int) -> None:
    if any(v.name == name for v in block.vars):
        return
    fill_var_desc(block.vars.add(), name, type=var_type, persistable=True)


def _prepend_feed_ops(desc: pb.ProgramDesc, feeds: list[str]) -> None:
    if not feeds:
        return
    block = desc.blocks[0]
    _holder(block, "feed", _VT.FEED_MINIBATCH)
    declared = {v.name for v in block.vars}
    ops = [_copied(op) for op in block.ops]
    for i, name in enumerate(feeds):
        if name not in declared:
            raise ArgumentError(f"The feeded_var_names[{i}]: '{name}' doesn't exist in pruned inference "
                                f"program. Please check whether '{name}' is a valid feed_var name, or remove "
                                f"it from feeded_var_names if '{name}' is not involved in the target_vars "
                                "calculation.")
        ops.insert(0, _feed_fetch_op("feed", "feed", name, i))
    del block.ops[:]
    block.ops.extend(ops)


def _append_fetch_ops(desc: pb.ProgramDesc, fetches: list[str]) -> None:
    block = desc.blocks[0]
    _holder(block, "fetch", _VT.FETCH_LIST)
    for i, name in enumerate(fetches):
        block.ops.append(_feed_fetch_op("fetch", name, "fetch", i))


def _feed_fetch_op(op_type: str, x: str, out: str, col: int) -> pb.OpDesc:
    """A feed or fetch op as Paddle's `Block._prepend_op` / `append_op` write it:
    `col`, then the attrs every op carries, sorted (`op_callstack` left empty)."""
    op = pb.OpDesc(type=op_type)
    op.inputs.add(parameter="X", arguments=[x])
    op.outputs.add(parameter="Out", arguments=[out])
    op.attrs.add(name="col", type=INT, i=col)
    op.attrs.add(name="op_callstack", type=STRINGS)
    op.attrs.add(name="op_device", type=STRING, s="")
    op.attrs.add(name="op_namescope", type=STRING, s="/")
    op.attrs.add(name="op_role", type=INT, i=0)
    op.attrs.add(name="op_role_var", type=STRINGS)
    op.attrs.add(name="with_quant_attr", type=BOOLEAN, b=False)
    return op


# -- _remove_training_info ------------------------------------------------
def remove_training_info(desc: pb.ProgramDesc, clip_extra: bool = True) -> None:
    """Paddle's `Program._remove_training_info`, in place: no var keeps
    `is_parameter` or `stop_gradient`; with `clip_extra`, each op of a known
    type loses its extra output slots and its extra attrs, and with them
    `op_callstack` and `with_quant_attr` (a quantized op keeps its quant
    attrs); an op type without extra attrs keeps every attr its proto declares."""
    for block in desc.blocks:
        for v in block.vars:
            v.ClearField("is_parameter")
            v.ClearField("stop_gradient")
        if not clip_extra:
            continue
        for op in block.ops:
            facts = paddle_op(op.type)
            if facts is None:
                continue
            outputs = {name: flags for name, flags in facts.get("outputs", ())}
            drop_out = [i for i, s in enumerate(op.outputs)
                        if s.parameter not in outputs or "x" in outputs[s.parameter]]
            for i in reversed(drop_out):
                del op.outputs[i]
            extras = set(facts.get("extras", ()))
            if not extras:
                continue
            quant = any(a.name == "with_quant_attr" and a.type == BOOLEAN and a.b for a in op.attrs)
            keep = []
            for a in op.attrs:
                if a.name in extras:
                    continue
                if quant and (a.name in _QUANT_ATTRS or a.name.endswith("_threshold")):
                    keep.append(a)
                    continue
                if a.name in _COMMON_CLIPPED:
                    continue
                keep.append(a)
            if len(keep) != len(op.attrs):
                copies = []
                for a in keep:
                    c = pb.OpDesc.Attr()
                    c.CopyFrom(a)
                    copies.append(c)
                del op.attrs[:]
                op.attrs.extend(copies)
