"""save, load, save_combine, load_combine: tensors to and from files in
Paddle's binary format (the format `paddle.static.save_vars` /
`save_persistables` and `save_inference_model` write).

A program that names files is only run with the executor's permission
(`Executor(files=DIR)`, `pybackward run --files DIR`): the ops read and
write through `call.env`, which takes a relative `file_path` from DIR and
refuses one that leaves it - so running a program from someone else never
touches a file it names. Writes are atomic (never a partial file).

As Paddle's CPU kernels do:
* save writes X (with its LoD) to file_path; `save_as_fp16` stores a float
  tensor as float16; `overwrite` false refuses an existing file;
* save_combine writes every X, in order, into one file (`save_to_memory`,
  a string output, is refused: it has no use outside Paddle's Python);
* load reads one tensor into Out (with its LoD); `load_as_fp16` gives a
  float tensor as float16; `seek` (a slice of a tensor) is refused;
* load_combine reads the file's tensors into the Out vars, in order, and
  refuses a file holding another number of them (`model_from_memory` is
  refused).
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import LOD_KEY, Call, register


def _env(c: Call):
    if c.env is None or not hasattr(c.env, "read_tensors"):
        raise ExecutionError(f"op {c.op_type} reads or writes files: it runs only in the interpreter")
    return c.env


def _path(c: Call) -> str:
    path = c.attr("file_path", "")
    if not path:
        raise ExecutionError(f"op {c.op_type}: its file_path attr is empty")
    return str(path)


def _fp16(a: np.ndarray, flag: bool) -> np.ndarray:
    return a.astype(np.float16) if flag and a.dtype.kind == "f" else a


def _save(c: Call):
    x = c.x("X")
    if x is None:
        raise ExecutionError("op save: X has no value")
    lod = c.lod("X")
    _env(c).write_tensors(c.op_type, _path(c), [(_fp16(np.asarray(x), bool(c.attr("save_as_fp16", False))), lod)],
                          overwrite=bool(c.attr("overwrite", True)))
    return {}


def _save_combine(c: Call):
    if c.attr("save_to_memory", False):
        raise c.unsupported("save_to_memory", True, "a string output for Paddle's Python")
    xs = c.xs("X")
    fp16 = bool(c.attr("save_as_fp16", False))
    lods = [c.lod("X", i) for i in range(len(xs))]
    _env(c).write_tensors(c.op_type, _path(c), [(_fp16(np.asarray(x), fp16), lod) for x, lod in zip(xs, lods)],
                          overwrite=bool(c.attr("overwrite", True)))
    return {}


def _load(c: Call):
    if int(c.attr("seek", -1)) != -1:
        raise c.unsupported("seek", c.attr("seek"), "reading a slice of a saved tensor")
    tensors = _env(c).read_tensors(c.op_type, _path(c))
    if len(tensors) != 1:
        raise ExecutionError(f"op load: {_path(c)!r} holds {len(tensors)} tensors, not 1 "
                             "(load_combine reads a combined file)")
    arr, lod = tensors[0]
    out = {"Out": _fp16(arr, bool(c.attr("load_as_fp16", False)))}
    if lod:
        out[LOD_KEY] = {"Out": lod}
    return out


def _load_combine(c: Call):
    if c.attr("model_from_memory", False):
        raise c.unsupported("model_from_memory", True, "a model passed as a string by Paddle's Python")
    tensors = _env(c).read_tensors(c.op_type, _path(c))
    n = c.n_out("Out")
    if len(tensors) != n:
        raise ExecutionError(f"op load_combine: {_path(c)!r} holds {len(tensors)} tensors, the op has {n} "
                             "Out vars")
    fp16 = bool(c.attr("load_as_fp16", False))
    return {"Out": [_fp16(a, fp16) for a, _ in tensors]}


register(paddle_opdef("save", _save, attrs_handled=("file_path", "overwrite", "save_as_fp16"),
                      doc="writes X to file_path (Paddle's tensor format); needs Executor(files=DIR)"))
register(paddle_opdef("save_combine", _save_combine,
                      attrs_handled=("file_path", "overwrite", "save_as_fp16", "save_to_memory"),
                      doc="writes every X, in order, to one file; needs Executor(files=DIR)"))
register(paddle_opdef("load", _load, attrs_handled=("file_path", "load_as_fp16", "seek"),
                      doc="reads one tensor from file_path into Out; needs Executor(files=DIR)"))
register(paddle_opdef("load_combine", _load_combine, attrs_handled=("file_path", "load_as_fp16", "model_from_memory"),
                      doc="reads a combined file's tensors into the Out vars, in order; needs Executor(files=DIR)"))
