"""Reading Paddle's pickled parameter files without running their code.

`paddle.static.save` writes `.pdparams` and `.pdopt` as pickles of a dict
name -> numpy array (protocol 2 to 4). A pickle is a program: loading one
with `pickle.load` calls whatever global it names (`os.system` included).
`loads` reads one with an unpickler whose `find_class` knows exactly the
globals numpy's array pickles name, and hands back stand-ins for them:

* `numpy.core.multiarray._reconstruct` / `numpy._core.multiarray._reconstruct`
  makes an `_ArrayStub`, which becomes an array from the state pickle's BUILD
  gives it (shape, dtype, byte order, raw bytes), checked field by field;
* `numpy.ndarray` is only a token `_reconstruct` accepts as its class;
* `numpy.dtype` makes a `_DtypeStub` for a numeric type code (`f4`, `i8`,
  `b1`, ...) and nothing else (no object, string, void or record dtypes);
* `_codecs.encode` (protocol 2 spells raw bytes as a latin-1 string) only
  turns a str into latin-1 bytes.

No numpy or Python callable ever runs on the file's arguments beyond
`np.dtype(code)` on an allowed code and `np.frombuffer` on checked bytes;
anything else in the pickle (another global, a persistent id, an extension
code) is refused with `ArrayFileError` naming the file and the global.
The pickle opcodes that build dicts, lists, tuples, sets, strings, bytes and
numbers need no global and pass as they are.
"""
from __future__ import annotations

import io
import pickle
from typing import Any

import numpy as np

from ..base.errors import ArrayFileError


class RefusedPickleError(ArrayFileError):
    """A pickle that asks for a global (code) or a structure this reader refuses."""

#: The numeric type codes a `numpy.dtype` global may ask for.
NUMERIC_CODES = frozenset({"b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8",
                           "f2", "f4", "f8", "c8", "c16"})
_BYTE_ORDERS = frozenset({"<", ">", "|", "="})


class _NdarrayToken:
    """Stands for `numpy.ndarray`; `_reconstruct` accepts only this as its class."""

    __slots__ = ()  # no __dict__: a BUILD on the token fails instead of changing it


_NDARRAY = _NdarrayToken()


class _DtypeStub:
    """A numeric dtype from the pickle (type code, then byte order from BUILD)."""

    def __init__(self, code: str):
        self.code = code
        self.byteorder = "="

    def __setstate__(self, state: Any) -> None:
        # numpy pickles a plain dtype's state as (3, byteorder, None, None, None, -1, -1, 0).
        if not (isinstance(state, tuple) and len(state) in (8, 9) and state[0] in (3, 4)
                and state[1] in _BYTE_ORDERS and state[2:5] == (None, None, None)
                and state[5:8] == (-1, -1, 0) and (len(state) == 8 or state[8] is None)):
            raise _Refused(f"a dtype state this reader does not take ({_short(state)}); "
                           "only plain numeric dtypes are read")
        self.byteorder = state[1]

    def dtype(self) -> np.dtype:
        dt = np.dtype(self.code)
        return dt if self.byteorder in "|=" else dt.newbyteorder(self.byteorder)


class _ArrayStub:
    """An array from the pickle: made empty by `_reconstruct`, filled by BUILD."""

    def __init__(self) -> None:
        self.array: np.ndarray | None = None

    def __setstate__(self, state: Any) -> None:
        # numpy's ndarray state: (version 1, shape, dtype, is_fortran, raw bytes).
        if not (isinstance(state, tuple) and len(state) == 5 and state[0] == 1):
            raise _Refused(f"an array state this reader does not take ({_short(state)})")
        _, shape, dt, fortran, raw = state
        if not isinstance(dt, _DtypeStub):
            raise _Refused("an array whose dtype is not a plain numeric numpy dtype")
        if not (isinstance(shape, tuple) and all(type(d) is int and d >= 0 for d in shape)):
            raise _Refused(f"an array shape that is not a tuple of sizes ({_short(shape)})")
        if not isinstance(raw, (bytes, bytearray)):
            raise _Refused("an array whose data is not raw bytes (an object array?)")
        dtype = dt.dtype()
        count = 1
        for d in shape:
            count *= d
        if count * dtype.itemsize != len(raw):
            raise _Refused(f"an array of shape {list(shape)} {dtype} whose data has {len(raw)} bytes, "
                           f"not {count * dtype.itemsize}")
        flat = np.frombuffer(bytes(raw), dtype=dtype)
        arr = flat.reshape(shape, order="F" if fortran else "C")
        # A copy in native byte order, 0-D kept, with numpy's own dtype instance
        # (so that pickling it again shares one dtype, as Paddle's files do).
        self.array = arr.astype(np.dtype(dtype.char), order="C")


class _Refused(Exception):
    """Something the pickle asks for that this reader will not do."""


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _reconstruct(cls: Any, shape: Any, code: Any) -> _ArrayStub:
    if cls is not _NDARRAY:
        raise _Refused("_reconstruct of something other than numpy.ndarray")
    if shape != (0,) or code not in (b"b", "b"):
        raise _Refused(f"_reconstruct with arguments numpy does not write ({_short((shape, code))})")
    return _ArrayStub()


def _dtype(code: Any, align: Any = False, copy: Any = True) -> _DtypeStub:
    if not isinstance(code, str) or code not in NUMERIC_CODES:
        raise _Refused(f"numpy.dtype({_short(code)}): only numeric dtypes are read "
                       f"({', '.join(sorted(NUMERIC_CODES))})")
    return _DtypeStub(code)


def _latin1(text: Any, encoding: Any = "latin1") -> bytes:
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise _Refused(f"_codecs.encode({_short(text)}, {encoding!r}): only str to latin-1 is read")
    return text.encode("latin-1")


#: (module, name) -> the stand-in `find_class` returns for it. Nothing else resolves.
ALLOWED_GLOBALS = {
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy", "ndarray"): _NDARRAY,
    ("numpy", "dtype"): _dtype,
    ("_codecs", "encode"): _latin1,
}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return ALLOWED_GLOBALS[(module, name)]
        except (KeyError, TypeError):
            raise _Refused(f"it asks for the global {module}.{name}, which is not part of a numpy "
                           "array (a parameter file holds only a dict of arrays; pybackward never "
                           "runs code from one)") from None

    def persistent_load(self, pid: Any) -> Any:
        raise _Refused("it uses a persistent id (a torch-style or custom pickle, not Paddle's)")


def loads(data: bytes, label: str) -> Any:
    """Unpickle `data` with only numpy's array globals; arrays come back as
    `_ArrayStub`s that `arrays_of` turns into numpy arrays. `label` names the
    file in errors."""
    try:
        return _Unpickler(io.BytesIO(data)).load()
    except _Refused as e:
        raise RefusedPickleError(f"{label}: refused: {e}") from None
    except RecursionError:
        raise ArrayFileError(f"{label}: not a readable pickle: nested too deep") from None
    except MemoryError:
        raise ArrayFileError(f"{label}: not a readable pickle: it asks for more memory than there is") from None
    except Exception as e:  # UnpicklingError, EOFError, ValueError, ...: a damaged or foreign file
        msg = " ".join(str(e).split())[:200]
        raise ArrayFileError(f"{label}: not a readable pickle ({type(e).__name__}"
                             f"{': ' + msg if msg else ''})") from None


def is_array(value: Any) -> bool:
    return isinstance(value, _ArrayStub)


def array_of(value: Any, label: str, key: str) -> np.ndarray:
    """The numpy array an `_ArrayStub` holds (an error if the pickle never filled it)."""
    if not isinstance(value, _ArrayStub) or value.array is None:
        raise ArrayFileError(f"{label}: entry {key!r} is not a complete numpy array")
    return value.array
