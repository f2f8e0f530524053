"""Paddle's saved tensor files, read and written; and `.npz`, beside them.

Paddle saves a static program's values in three ways:

* `paddle.static.save(program, "m")` writes `m.pdparams` (the parameters) and
  `m.pdopt` (the other persistable vars: optimizer state, learning rate) as
  pickles of a dict name -> numpy array. They are read here without running
  any code from the file (`safe_pickle`) and written with `pickle` as Paddle
  does (protocol 4). A dict whose arrays were split because they passed 4 GB
  (protocol 2/3, key `UnpackBigParamInfor@@`) is joined again; a dygraph
  `state_dict` (key `StructuredToParameterName@@`) comes back under its
  parameter names.
* `paddle.static.save_inference_model(path, ...)` writes `path.pdiparams`:
  every persistable var of the program (`persistable_names`: not feed, fetch,
  reader or raw vars), sorted by name, one after another in Paddle's tensor
  format, with no names in the file. Reading one needs the program
  (`path.pdmodel`, found beside it when not given).
* `paddle.static.save_vars` / `save_persistables` without a file name write
  one file per var, named after it, in the same tensor format.

The per-tensor binary format is in `tensor_format`.

`load_arrays` / `save_arrays` pick the format from the path (the suffix, or a
directory); `convert` in the CLI goes from any to any.
"""
from __future__ import annotations

import io
import os
import pickle
import stat
import struct
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Union

import numpy as np

from ..base import _args, dtypes
from . import safe_pickle
from .._proto import framework_pb2 as pb
from ..base.errors import ArrayFileError, OutputError, ProgramFileError, PyBackwardError
from ..base.suffixes import ARRAY_SUFFIXES, is_array_path  # noqa: F401  (is_array_path: part of this API)
from ..base.files import TEMP_PREFIX, TEMP_SUFFIX, read_input_file, read_input_head, write_atomic
from ..legacy.io import load as load_program
from ..legacy.program import Program
from .. import pir
from ..pir.sniff import SNIFF_BYTES
from .npz_format import NpyError, read_npy_stream, read_npz_bytes
from .safe_pickle import describe
from .tensor_format import decode_tensor, decode_tensors, encode_tensor  # noqa: F401  (part of this API)
from .tensor_format import shape_problem

PathLike = Union[str, os.PathLike]

#: Suffix -> format of the array files (`dir` is a directory of per-var files).
SUFFIXES = ARRAY_SUFFIXES
FORMAT_NAMES = {"npz": ".npz", "pickle": "Paddle pickle (.pdparams/.pdopt)",
                "combined": "Paddle combined tensors (.pdiparams)", "dir": "directory of per-var files"}

#: Var types Paddle leaves out of its saved files (`paddle.static.io.is_persistable`, and RAW).
_NOT_SAVED = frozenset({pb.VarType.FEED_MINIBATCH, pb.VarType.FETCH_LIST, pb.VarType.READER,
                        pb.VarType.RAW})
_BIG_PARAMS_KEY = "UnpackBigParamInfor@@"        # Paddle's spelling
_STRUCTURED_KEY = "StructuredToParameterName@@"
#: Files in a per-var directory that are not tensors.
_NOT_TENSOR_FILES = ("__model__", "__params__")
_NOT_TENSOR_SUFFIXES = (".pdmodel", ".pdparams", ".pdopt", ".pdiparams", ".npz", ".json", ".pb", ".pbtxt")


# -- which format ----------------------------------------------------------
def array_format(path: PathLike, writing: bool = False) -> str:
    """The format of an array file by its path: "npz", "pickle", "combined" or "dir".

    Reading, a path with another suffix is a directory if it is one, else
    sniffed from its first bytes. Writing, the suffix decides; an existing
    directory or a path ending in "/" means per-var files.
    """
    text = os.fspath(path)
    fmt = SUFFIXES.get(Path(text).suffix.lower())
    if fmt is not None:
        return fmt
    if os.path.isdir(text) or text.endswith(("/", os.sep)):
        return "dir"
    if writing:
        raise ArrayFileError(f"{text}: cannot tell which format to write from the name: use .npz, "
                             ".pdparams, .pdopt or .pdiparams, or end it with / for a directory "
                             "of per-var files")
    data = _read_bytes(text, limit=16)
    sniffed = _sniff(data)
    if sniffed is None:
        raise ArrayFileError(f"{text}: not a file of arrays: {_describe(data)}")
    return sniffed


def _sniff(head: bytes) -> str | None:
    if head[:4] == b"PK\x03\x04" or head[:4] == b"PK\x05\x06":
        return "npz"
    if head[:1] == b"\x80" and len(head) > 1 and 2 <= head[1] <= 5:
        return "pickle"
    if len(head) >= 12 and head[:4] == b"\0\0\0\0" and struct.unpack_from("<Q", head, 4)[0] < 64:
        return "combined"   # version 0, then a LoD level count
    return None


def _describe(data: bytes) -> str:
    """What a file that is not the expected format seems to be, in a few words."""
    if not data:
        return "the file is empty"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "this is a PNG image"
    if data[:6] == b"\x93NUMPY":
        return "this is a single NumPy .npy array (give it as --feed NAME=FILE.npy, or save a .npz)"
    if data[:2] == b"\x1f\x8b":
        return "this is a gzip file"
    if data[:2] == b"PK":
        return "this is a zip archive"
    if data[:1] == b"\x80":
        return "this is a Python pickle"
    if data[:1] in (b"{", b"["):
        return "this is text (JSON?)"
    if data[:6] == b"blocks":
        return "this is a program in protobuf text format, not arrays"
    if data[:1] == b"\x0a":
        return "this looks like a program (ProgramDesc protobuf), not arrays"
    if all(32 <= b < 127 or b in (9, 10, 13) for b in data[:64]):
        return "this is text"
    return f"unrecognised content (first bytes {data[:8].hex(' ')})"


#: The largest array file read (no limit of its own: memory is the limit, and a
#: `.pdparams` of a large model passes protobuf's 2 GiB).
MAX_ARRAY_FILE_BYTES = sys.maxsize


def _read_bytes(path: PathLike, limit: int | None = None) -> bytes:
    """The bytes of an array file (the first `limit` only, to sniff its format):
    regular files only, through `base.files` (a FIFO never blocks, a device is never read)."""
    name = os.fspath(path)
    if limit is not None:
        return read_input_head(name, limit, ArrayFileError, "file of arrays")
    return read_input_file(name, ArrayFileError, "file of arrays", MAX_ARRAY_FILE_BYTES)


# -- which vars, in which order --------------------------------------------
def persistable_names(program: "Program | pir.Program") -> list[str]:
    """The vars Paddle saves for a program, in the order of its combined files.

    Every block's persistable vars except feed, fetch, reader and raw ones,
    sorted by name (`save_vars` sorts before `save_combine`); for a PIR
    program, its parameters (`builtin.parameter`), sorted by name.
    """
    if isinstance(program, pir.Program):
        return sorted(_program_vars(program))
    names = set()
    for block in program.blocks:
        for v in block.vars.values():
            if v.persistable and v.type not in _NOT_SAVED:
                names.add(v.name)
    return sorted(names)


@dataclass(frozen=True)
class _PirParameter:
    """What the checks of a tensor file read of a var, for a PIR program's parameter."""
    name: str
    data_type: int | None
    shape: list[int]
    type: int
    is_parameter: bool = True


def _pir_parameters(program: "pir.Program") -> dict:
    found = {}
    for op in program.parameters():
        name, t = op.attr("parameter_name", None), op.results[0].type if op.results else None
        if not isinstance(name, str) or t is None:
            continue
        dense = isinstance(t, pir.DenseTensorType)
        try:
            data_type = dtypes.from_any(np.dtype(t.dtype)) if dense else None
        except (TypeError, ValueError, KeyError, PyBackwardError):
            data_type = None                    # bfloat16 and the like: no NumPy dtype to compare with
        found.setdefault(name, _PirParameter(name, data_type, t.shape if dense else [],
                                             pb.VarType.DENSE_TENSOR if dense else pb.VarType.RAW))
    return found


def _program_vars(program: "Program | pir.Program") -> dict:
    if isinstance(program, pir.Program):
        return _pir_parameters(program)
    found = {}
    for block in program.blocks:
        for v in block.vars.values():
            found.setdefault(v.name, v)
    return found


def _unsupported_type(var) -> str | None:
    if var.type == pb.VarType.DENSE_TENSOR:
        return None
    return dtypes.type_name(var.type)


# -- combined files (.pdiparams) -------------------------------------------
def read_combined(path: PathLike, program: Program | None = None, with_lod: bool = False) -> dict:
    """A `.pdiparams` (or other `save_combine` file) as name -> array.

    The names are the program's `persistable_names`; without a program the
    `.pdmodel` with the same prefix (or `__model__` in the same directory)
    is used. Each tensor must have its var's data type, and each parameter
    its declared shape (as Paddle's `load_inference_model` checks), which
    catches a file paired with the wrong program. With `with_lod`, values
    are (array, LoD) pairs.
    """
    name = os.fspath(path)
    data = _read_bytes(name)
    if program is None:
        program = _program_beside(name)
    names = persistable_names(program)
    tensors = decode_tensors(data, name)
    where = f"the program {program.source}" if program.source else "the program"
    if len(tensors) != len(names):
        listed = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
        raise ArrayFileError(f"{name}: holds {len(tensors)} tensors, but {where} has {len(names)} "
                             f"persistable vars ({listed or 'none'}); a .pdiparams file goes with the "
                             "program saved beside it")
    by_name = _program_vars(program)
    out = {}
    for var_name, (arr, lod) in zip(names, tensors):
        var = by_name[var_name]
        bad = _unsupported_type(var)
        if bad:
            raise ArrayFileError(f"{name}: var '{var_name}' is a {bad}; only dense tensors are read")
        _check_fits(name, var, arr, where)
        out[var_name] = (arr, lod) if with_lod else arr
    return out


def _check_fits(label: str, var, arr: np.ndarray, where: str) -> None:
    """The tensor read for `var` has its declared data type and shape (-1 matches
    any size; a 0-D and a [1] value stand for each other, as Paddle mixes them)."""
    if var.data_type is not None and dtypes.from_any(arr.dtype) != var.data_type:
        raise ArrayFileError(f"{label}: tensor for '{var.name}' is {arr.dtype}, but {where} declares it "
                             f"{dtypes.type_name(var.data_type)} (is this the program it was saved with?)")
    shape = var.shape
    if len(shape) == arr.ndim and all(d in (-1, s) for d, s in zip(shape, arr.shape)):
        return
    if arr.size == 1 and arr.ndim <= 1 and len(shape) <= 1 and all(d in (-1, 1) for d in shape):
        return
    kind = "parameter" if var.is_parameter else "var"
    raise ArrayFileError(f"{label}: tensor for {kind} '{var.name}' has shape {list(arr.shape)}, but "
                         f"{where} declares {list(shape)} (is this the program it was saved with?)")


def _program_beside(path: str) -> "Program | pir.Program":
    """The program saved with a .pdiparams: PREFIX.pdmodel (legacy), PREFIX.json (PIR) or __model__,
    each read as what its content is."""
    p = Path(path)
    for cand in (p.with_suffix(".pdmodel"), p.with_suffix(".json"), p.parent / "__model__"):
        if cand.is_file():
            try:
                if pir.is_pir_bytes(read_input_head(cand, SNIFF_BYTES, ProgramFileError)):
                    return pir.load(cand)
                return load_program(cand)
            except ProgramFileError as e:
                raise ArrayFileError(f"{path}: the program beside it cannot be read: {e}") from None
    raise ArrayFileError(f"{path}: a .pdiparams file holds its tensors without names; they come from "
                         f"the program saved with it, and there is no {p.with_suffix('.pdmodel').name} "
                         "beside it: give the program (PROGRAM, or --program)")


def write_combined(path: PathLike, arrays: Mapping[str, np.ndarray], program: Program | None = None) -> None:
    """Write a `.pdiparams`: the arrays sorted by name, as Paddle's `save_combine`.

    With a program, the names must be exactly its `persistable_names` (a
    combined file is read back by position).
    """
    name = os.fspath(path)
    names = sorted(arrays)
    if program is not None:
        want = persistable_names(program)
        missing = [n for n in want if n not in arrays]
        extra = [n for n in names if n not in set(want)]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"no value for {_listing(missing)}")
            if extra:
                parts.append(f"{_listing(extra)} not persistable vars of the program")
            raise ArrayFileError(f"{name}: a .pdiparams file holds exactly the program's persistable vars: "
                                 + "; ".join(parts))
        names = want
    _write(name, b"".join(encode_tensor(_value(arrays[n], n, name)) for n in names))


def _listing(names: list[str]) -> str:
    return ", ".join(describe(n) for n in names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")


def _value(value, key: str, label: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.hasobject or arr.dtype.kind not in "biufc":
        raise ArrayFileError(f"{label}: {describe(key)} is not a numeric array ({arr.dtype})")
    return arr


# -- one file per var --------------------------------------------------------
def read_var_dir(path: PathLike, program: Program | None = None) -> dict[str, np.ndarray]:
    """A directory of per-var files (`save_vars` / `save_persistables`).

    With a program: the files named after its persistable vars (missing
    ones are left out; at least one must be there). Without: every file in
    the directory tree but hidden ones, `__model__` and program / archive
    files (`skipped_name`). Only files inside the directory are read: a
    name, or a symlink in the directory, that leads out of it is an error.
    """
    root = Path(path)
    if not root.is_dir():
        raise ArrayFileError(f"{path}: no such directory")
    inside = _Inside(root, path)
    out = {}
    if program is not None:
        by_name = _program_vars(program)
        for var_name in persistable_names(program):
            if not _safe_name(var_name):
                continue
            f = root / var_name
            inside.check(f)
            if f.is_file():
                var = by_name[var_name]
                bad = _unsupported_type(var)
                if bad:
                    raise ArrayFileError(f"{f}: var '{var_name}' is a {bad}; only dense tensors are read")
                out[var_name] = _read_one(f, var_name)
        if not out and persistable_names(program):
            raise ArrayFileError(f"{path}: holds no file named after a persistable var of the program "
                                 f"(such as {describe(persistable_names(program)[0])})")
        return out
    for f in sorted(root.rglob("*")):
        rel = f.relative_to(root).as_posix()
        if skipped_name(rel) or not f.is_file():
            continue
        inside.check(f)
        out[rel] = _read_one(f, rel)
    if not out:
        raise ArrayFileError(f"{path}: holds no per-var tensor files")
    return out


class _Inside:
    """Checks that a path under a directory stays in it once symlinks are followed."""

    def __init__(self, root: Path, label: PathLike):
        self.real = os.path.realpath(root)
        self.label = os.fspath(label)

    def check(self, f: Path) -> str:
        real = os.path.realpath(f)
        if real != self.real and not real.startswith(self.real.rstrip(os.sep) + os.sep):
            raise ArrayFileError(f"{f}: leads out of {self.label} (a symlink in it points elsewhere): "
                                 "pybackward reads and writes per-var files only inside the directory")
        return real


def skipped_name(rel: str) -> str | None:
    """Why reading a directory of per-var files without a program skips the
    file at `rel` (a '/'-separated path in it), or None when it reads it:
    hidden names (a part starting with '.', as pybackward's temporary files
    are), Paddle's `__model__` / `__params__`, and program or archive suffixes."""
    parts = rel.split("/")
    if any(p.startswith(".") for p in parts):
        return "names with a part starting with '.'"
    if parts[-1] in _NOT_TENSOR_FILES:
        return f"files named {parts[-1]} (Paddle's program and combined parameters)"
    suffix = Path(parts[-1]).suffix.lower()
    if suffix in _NOT_TENSOR_SUFFIXES:
        return f"files named *{suffix} (programs and archives)"
    return None


def _read_one(f: Path, var_name: str) -> np.ndarray:
    data = _read_bytes(f)
    if _sniff(data[:16]) != "combined":
        raise ArrayFileError(f"{f}: not a Paddle tensor file: {_describe(data)}")
    arr, _, end = decode_tensor(data, 0, str(f), var_name)
    if end != len(data):
        raise ArrayFileError(f"{f}: {len(data) - end} bytes after the tensor (a combined file? give it "
                             "with a .pdiparams name and its program)")
    return arr


def _safe_name(name: str) -> bool:
    """A var name that stays inside the directory as a relative path (of at most
    PATH_MAX, 4096 bytes: no longer path can be opened anyway)."""
    if not name or len(name) > 4096 or "\0" in name or "\\" in name or name.startswith("/"):
        return False
    return len(name.encode("utf-8", "surrogatepass")) <= 4096 \
        and all(p not in ("", ".", "..") for p in name.split("/"))


def write_var_dir(path: PathLike, arrays: Mapping[str, np.ndarray]) -> None:
    """Write one file per var into the directory (made if missing), all or nothing.

    Everything is checked before anything is written: each name is a path
    inside the directory that reading it back would not skip (`skipped_name`),
    no name is another's directory, no two names lead to one file, no symlink
    leads out, every value is numeric. Then each file is written to a
    temporary file beside its target and fsynced, and only when all are
    written are they renamed over their targets; a failure before that (a
    value Paddle's format cannot hold, a full disk) removes the temporary
    files and the directories made for them, so the directory holds the old
    files or, once the renames ran, all the new ones.
    """
    label = os.fspath(path)
    root = Path(path)
    values = {}
    for key in arrays:
        if type(key) is not str or not _safe_name(key):
            raise ArrayFileError(f"{label}: {describe(key)} cannot be a file name inside the directory")
        why = skipped_name(key)
        if why:
            raise ArrayFileError(f"{label}: {describe(key)} cannot be a per-var file: reading the directory "
                                 f"skips {why} (write a .npz or .pdparams instead)")
        values[key] = _value(arrays[key], key, label)
    for key in values:
        parts = key.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in values:
                raise ArrayFileError(f"{label}: {describe('/'.join(parts[:i]))} and {describe(key)} cannot "
                                     "both be per-var files (one would be the other's directory)")
    if root.exists() and not root.is_dir():
        raise OutputError(f"{label}: is a file, not a directory")
    inside = _Inside(root, label)
    targets: dict[str, str] = {}
    for key in values:
        real = inside.check(root / key)
        if real in targets:
            raise ArrayFileError(f"{label}: {describe(targets[real])} and {describe(key)} lead to one file")
        targets[real] = key
        if os.path.isdir(real):
            raise OutputError(f"{root / key}: is a directory, not a per-var file")
        parent = os.path.dirname(real)
        while parent != inside.real and len(parent) > len(inside.real):
            if os.path.exists(parent) and not os.path.isdir(parent):
                raise OutputError(f"{parent}: is a file, not a directory")
            parent = os.path.dirname(parent)
    if not values:                      # nothing to write: the directory, as asked
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OutputError(f"{label}: cannot make the directory: {e.strerror or e}") from None
    _write_all(label, [(real, values[key]) for real, key in targets.items()])


def _write_all(label: str, files: list[tuple[str, np.ndarray]]) -> None:
    """Write every (path, array) as a tensor file, all or nothing (see `write_var_dir`)."""
    made: list[str] = []
    staged: list[tuple[str, str]] = []
    mask = os.umask(0)
    os.umask(mask)
    try:
        for target, value in files:
            missing = []
            parent = os.path.dirname(target)
            while not os.path.isdir(parent):
                missing.append(parent)
                parent = os.path.dirname(parent)
            for d in reversed(missing):
                os.mkdir(d)
                made.append(d)
            fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX, dir=os.path.dirname(target))
            staged.append((tmp, target))
            with os.fdopen(fd, "wb") as f:
                f.write(encode_tensor(value))
                f.flush()
                os.fsync(f.fileno())
            try:
                old = os.stat(target)
                os.chmod(tmp, old.st_mode & 0o7777 if stat.S_ISREG(old.st_mode) else 0o666 & ~mask)
            except FileNotFoundError:
                os.chmod(tmp, 0o666 & ~mask)
        for i, (tmp, target) in enumerate(staged):
            os.replace(tmp, target)
            staged[i] = ("", target)
    except BaseException as e:
        for tmp, _ in staged:
            if tmp:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        if not any(not tmp for tmp, _ in staged):      # nothing renamed yet: undo the directories
            for d in reversed(made):
                try:
                    os.rmdir(d)
                except OSError:
                    pass
        if isinstance(e, OSError):
            where = getattr(e, "filename", None) or label
            raise OutputError(f"{where}: cannot write: {e.strerror or e}") from None
        raise


# -- pickles (.pdparams, .pdopt) ---------------------------------------------
def read_pickle(path: PathLike) -> dict[str, np.ndarray]:
    """A `.pdparams` / `.pdopt` as name -> array, without running code from it.

    Entries that are not arrays (a dygraph optimizer's `LR_Scheduler` dict)
    are left out.
    """
    name = os.fspath(path)
    data = _read_bytes(name)
    try:
        obj = safe_pickle.loads(data, name)
    except safe_pickle.RefusedPickleError:
        raise
    except ArrayFileError:
        if _sniff(data[:16]) == "pickle":
            raise
        raise ArrayFileError(f"{name}: not a Paddle pickle (.pdparams/.pdopt): {_describe(data)}") from None
    if not isinstance(obj, dict):
        raise ArrayFileError(f"{name}: holds a {type(obj).__name__}, not a dict of arrays")
    out: dict[str, np.ndarray] = {}
    for key, value in obj.items():
        if not isinstance(key, str):
            raise ArrayFileError(f"{name}: a key that is not a name ({type(key).__name__})")
        if safe_pickle.is_array(value):
            out[key] = safe_pickle.array_of(value, name, key)
    if _BIG_PARAMS_KEY in obj:
        _join_slices(out, obj[_BIG_PARAMS_KEY], name)
    structured = obj.get(_STRUCTURED_KEY)
    if isinstance(structured, dict):   # a dygraph state_dict: structured name -> parameter name
        renamed: dict[str, np.ndarray] = {}
        source: dict[str, str] = {}
        for key, value in out.items():
            new = structured.get(key, key)
            new = new if isinstance(new, str) else key
            if new in renamed:
                raise ArrayFileError(f"{name}: {_STRUCTURED_KEY} gives {describe(source[new])} and "
                                     f"{describe(key)} the one name {describe(new)}: one array would be lost")
            renamed[new] = value
            source[new] = key
        out = renamed
    return out


def _join_slices(out: dict, info, label: str) -> None:
    """Undo Paddle's split of arrays past 4 GB (`name@@.0`, `name@@.1`, ...)."""
    if not isinstance(info, dict):
        raise ArrayFileError(f"{label}: a damaged {_BIG_PARAMS_KEY} entry")
    for key, entry in info.items():
        try:
            slices = [out.pop(s) for s in entry["slices"]]
            shape = tuple(int(d) for d in entry["OriginShape"])
            joined = np.concatenate(slices)
            if shape_problem(shape, joined.itemsize):
                raise ValueError(shape)
            joined = joined.reshape(shape)
        except Exception:
            raise ArrayFileError(f"{label}: cannot join the slices of {describe(key)} ({_BIG_PARAMS_KEY})") from None
        if key in out:
            raise ArrayFileError(f"{label}: {_BIG_PARAMS_KEY} joins slices into {describe(key)}, which the file "
                                 "also holds as an array: one would be lost")
        out[key] = joined


def write_pickle(path: PathLike, arrays: Mapping[str, np.ndarray]) -> None:
    """Write a `.pdparams` / `.pdopt` as `paddle.static.save` does (protocol 4)."""
    name = os.fspath(path)
    plain = {}
    for key, value in arrays.items():
        arr = _value(value, key, name)
        # C order, native byte order and numpy's shared dtype instance: the pickle
        # then names each dtype once, as Paddle's `np.array(tensor)` values do.
        plain[str(key)] = arr.astype(np.dtype(arr.dtype.char), order="C")
    _write(name, pickle.dumps(plain, protocol=4))


# -- .npz ----------------------------------------------------------------------
def read_npz(path: PathLike) -> dict[str, np.ndarray]:
    """A `.npz` as name -> array (no pickled objects), every member's name and
    size checked before any is decompressed (`npz_format`)."""
    name = os.fspath(path)
    data = _read_bytes(name)
    if _sniff(data[:16]) != "npz":
        raise ArrayFileError(f"{name}: not a .npz archive: {_describe(data[:64])}")
    return read_npz_bytes(data, name)


def read_npy(path: PathLike) -> np.ndarray:
    """One `.npy` array (no pickled objects), its header checked against the
    file's size before the array is allocated."""
    name = os.fspath(path)
    data = _read_bytes(name)
    if data[:6] != b"\x93NUMPY":
        if _sniff(data[:16]) == "npz":
            raise ArrayFileError(f"{name}: a .npz archive, not one .npy array (give it as --feeds)")
        raise ArrayFileError(f"{name}: not a .npy array: {_describe(data[:64])}")
    try:
        return read_npy_stream(io.BytesIO(data), len(data))
    except NpyError as e:
        raise ArrayFileError(f"{name}: cannot read the array: {e}") from None
    except MemoryError:
        raise ArrayFileError(f"{name}: cannot read the array: not enough memory for it") from None


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """A `.npz` archive as bytes (what `np.savez` writes, any key allowed)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for key, value in arrays.items():
            with zf.open(f"{key}.npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(value), allow_pickle=False)
    return buf.getvalue()


def write_npz(path: PathLike, arrays: Mapping[str, np.ndarray]) -> None:
    name = os.fspath(path)
    _write(name, npz_bytes({k: _value(v, k, name) for k, v in arrays.items()}))


# -- any format --------------------------------------------------------------
def load_arrays(path: PathLike, program: Program | None = None) -> dict[str, np.ndarray]:
    """Read name -> array from a `.npz`, `.pdparams`, `.pdopt`, `.pdiparams` or
    a directory of per-var files (see `array_format`). The program names the
    tensors of a `.pdiparams` and picks the files of a directory."""
    if not isinstance(path, (str, os.PathLike)):
        raise ArrayFileError(f"load_arrays() takes a path, not {type(path).__name__}")
    fmt = array_format(path)
    if fmt == "npz":
        return read_npz(path)
    if fmt == "pickle":
        return read_pickle(path)
    if fmt == "combined":
        return read_combined(path, program)
    return read_var_dir(path, program)


def save_arrays(path: PathLike, arrays: Mapping[str, np.ndarray], program: Program | None = None) -> str:
    """Write name -> array in the format the path names; returns the format."""
    _args.path(path, "save_arrays(path)")
    _args.mapping(arrays, "save_arrays(arrays)")
    fmt = array_format(path, writing=True)
    if fmt == "npz":
        write_npz(path, arrays)
    elif fmt == "pickle":
        write_pickle(path, arrays)
    elif fmt == "combined":
        write_combined(path, arrays, program)
    else:
        write_var_dir(path, arrays)
    return fmt


def _write(path: str, data: bytes) -> None:
    try:
        write_atomic(path, data)
    except OSError as e:
        raise OutputError(f"{path}: cannot write: {e.strerror or e}") from None
