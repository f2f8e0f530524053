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
import zipfile
from pathlib import Path
from typing import Mapping, Union

import numpy as np

from ..base import _args, dtypes
from . import safe_pickle
from .._proto import framework_pb2 as pb
from ..base.errors import ArrayFileError, OutputError, ProgramFileError
from ..base.files import write_atomic
from ..legacy.io import load as load_program
from ..legacy.program import Program
from .tensor_format import decode_tensor, decode_tensors, encode_tensor  # noqa: F401  (part of this API)

PathLike = Union[str, os.PathLike]

#: Suffix -> format of the array files (`dir` is a directory of per-var files).
SUFFIXES = {".npz": "npz", ".pdparams": "pickle", ".pdopt": "pickle", ".pdiparams": "combined"}
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


def is_array_path(path: PathLike) -> bool:
    """True when the path names an array file by its suffix, or is a directory."""
    text = os.fspath(path)
    return Path(text).suffix.lower() in SUFFIXES or os.path.isdir(text)


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


def _read_bytes(path: PathLike, limit: int | None = None) -> bytes:
    name = os.fspath(path)
    try:
        # A pipe would block the open, a device never end the read: regular files only.
        if not stat.S_ISREG(os.stat(name).st_mode) and not os.path.isdir(name):
            raise ArrayFileError(f"{name}: not a regular file (a device or a pipe?)")
        with open(name, "rb") as f:
            return f.read() if limit is None else f.read(limit)
    except FileNotFoundError:
        raise ArrayFileError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise ArrayFileError(f"{name}: is a directory, not a file of arrays") from None
    except OSError as e:
        raise ArrayFileError(f"{name}: cannot read: {e.strerror or e}") from None


# -- which vars, in which order --------------------------------------------
def persistable_names(program: Program) -> list[str]:
    """The vars Paddle saves for a program, in the order of its combined files.

    Every block's persistable vars except feed, fetch, reader and raw ones,
    sorted by name (`save_vars` sorts before `save_combine`).
    """
    names = set()
    for block in program.blocks:
        for v in block.vars.values():
            if v.persistable and v.type not in _NOT_SAVED:
                names.add(v.name)
    return sorted(names)


def _program_vars(program: Program) -> dict:
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


def _program_beside(path: str) -> Program:
    p = Path(path)
    for cand in (p.with_suffix(".pdmodel"), p.parent / "__model__"):
        if cand.is_file():
            try:
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
    return ", ".join(repr(n) for n in names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")


def _value(value, key: str, label: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.hasobject or arr.dtype.kind not in "biufc":
        raise ArrayFileError(f"{label}: '{key}' is not a numeric array ({arr.dtype})")
    return arr


# -- one file per var --------------------------------------------------------
def read_var_dir(path: PathLike, program: Program | None = None) -> dict[str, np.ndarray]:
    """A directory of per-var files (`save_vars` / `save_persistables`).

    With a program: the files named after its persistable vars (missing
    ones are left out; at least one must be there). Without: every file in
    the directory tree but `__model__` and program / archive files.
    """
    root = Path(path)
    if not root.is_dir():
        raise ArrayFileError(f"{path}: no such directory")
    out = {}
    if program is not None:
        by_name = _program_vars(program)
        for var_name in persistable_names(program):
            f = root / var_name
            if _safe_name(var_name) and f.is_file():
                var = by_name[var_name]
                bad = _unsupported_type(var)
                if bad:
                    raise ArrayFileError(f"{f}: var '{var_name}' is a {bad}; only dense tensors are read")
                out[var_name] = _read_one(f, var_name)
        if not out and persistable_names(program):
            raise ArrayFileError(f"{path}: holds no file named after a persistable var of the program "
                                 f"(such as {persistable_names(program)[0]!r})")
        return out
    for f in sorted(root.rglob("*")):
        rel = f.relative_to(root).as_posix()
        if not f.is_file() or any(part.startswith(".") for part in f.relative_to(root).parts) \
                or f.name in _NOT_TENSOR_FILES or f.suffix.lower() in _NOT_TENSOR_SUFFIXES:
            continue
        out[rel] = _read_one(f, rel)
    if not out:
        raise ArrayFileError(f"{path}: holds no per-var tensor files")
    return out


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
    """A var name that stays inside the directory as a relative path."""
    parts = name.split("/")
    return bool(name) and "\0" not in name and "\\" not in name and not name.startswith("/") \
        and all(p not in ("", ".", "..") for p in parts)


def write_var_dir(path: PathLike, arrays: Mapping[str, np.ndarray]) -> None:
    """Write one file per var into the directory (made if missing), each atomically."""
    root = Path(path)
    for key in arrays:
        if not _safe_name(key):
            raise ArrayFileError(f"{path}: {key!r} cannot be a file name inside the directory")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"{path}: cannot make the directory: {e.strerror or e}") from None
    for key, value in arrays.items():
        target = root / key
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OutputError(f"{target.parent}: cannot make the directory: {e.strerror or e}") from None
        _write(str(target), encode_tensor(_value(value, key, str(path))))


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
        renamed = {}
        for key, value in out.items():
            new = structured.get(key, key)
            renamed[new if isinstance(new, str) else key] = value
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
            out[key] = np.concatenate(slices).reshape(shape)
        except Exception:
            raise ArrayFileError(f"{label}: cannot join the slices of '{key}' ({_BIG_PARAMS_KEY})") from None


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
    """A `.npz` as name -> array (no pickled objects)."""
    name = os.fspath(path)
    head = _read_bytes(name, limit=16)
    if _sniff(head) != "npz":
        raise ArrayFileError(f"{name}: not a .npz archive: {_describe(head)}")
    try:
        archive = np.load(name, allow_pickle=False)
    except Exception:
        raise ArrayFileError(f"{name}: a damaged .npz archive (the zip cannot be read)") from None
    out = {}
    with archive:
        for key in archive.files:
            try:
                out[key] = archive[key]
            except ValueError as e:
                why = ("it holds Python objects, which pybackward does not load" if "pickle" in str(e)
                       else "it is damaged")
                raise ArrayFileError(f"{name}: cannot read array '{key}': {why}") from None
            except Exception:
                raise ArrayFileError(f"{name}: cannot read array '{key}': it is damaged") from None
            if not isinstance(out[key], np.ndarray):     # numpy hands back other members as bytes
                raise ArrayFileError(f"{name}: cannot read array '{key}': it is damaged (not a .npy array)")
    return out


def read_npy(path: PathLike) -> np.ndarray:
    """One `.npy` array (no pickled objects)."""
    name = os.fspath(path)
    head = _read_bytes(name, limit=16)
    if head[:6] != b"\x93NUMPY":
        if _sniff(head) == "npz":
            raise ArrayFileError(f"{name}: a .npz archive, not one .npy array (give it as --feeds)")
        raise ArrayFileError(f"{name}: not a .npy array: {_describe(head)}")
    try:
        return np.load(name, allow_pickle=False)
    except ValueError as e:
        why = "it holds Python objects, which pybackward does not load" if "pickle" in str(e) else "it is damaged"
        raise ArrayFileError(f"{name}: cannot read the array: {why}") from None
    except Exception:
        raise ArrayFileError(f"{name}: cannot read the array: it is damaged") from None


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
