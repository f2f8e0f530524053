"""Reading Paddle's pickled parameter files without running their code.

`paddle.static.save` writes `.pdparams` and `.pdopt` as pickles of a dict
name -> numpy array (protocol 2 to 4). A pickle is a program: loading one
with `pickle.load` calls whatever global it names (`os.system` included),
and Python's unpickler trusts the file with its memory and its C stack.
`loads` runs the pickle on `pickle_machine.Machine` instead (time linear in
the file, memory bounded by it, nesting, memo ids, dict keys and messages
bounded), with a policy that knows exactly the globals numpy's array pickles
name, each a checked stand-in, never numpy's own function:

* `numpy.core.multiarray._reconstruct` / `numpy._core.multiarray._reconstruct`
  makes an `_ArrayStub`, which becomes an array from the state the pickle's
  BUILD gives it (shape, dtype, byte order, raw bytes), checked field by
  field before anything is allocated: at most 64 dims, sizes NumPy can hold
  (`tensor_format.shape_problem`), data of exactly that many bytes, and the
  bytes of all arrays within the machine's budget (twice the file);
* `numpy.ndarray` is only a token `_reconstruct` accepts as its class;
* `numpy.dtype` makes a `_DtypeStub` for a numeric type code (`f4`, `i8`,
  `b1`, ...) and nothing else (no object, string, void or record dtypes);
* `_codecs.encode` (protocol 2 spells raw bytes as a latin-1 string) only
  turns a str into latin-1 bytes.

BUILD fills only those two stubs, through their own checked method: it can
never set an attribute of anything else, the reader's own functions and
tokens included. Anything else in the pickle (another global, a persistent
id, an extension code, an object built by INST / OBJ / NEWOBJ) is refused
with `RefusedPickleError` naming the file and what was asked. The opcodes
that build dicts, lists, tuples, sets, strings, bytes and numbers need no
global and pass.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..base.errors import ArrayFileError
from .pickle_machine import Machine, Malformed, Opaque, Refused, describe
from .tensor_format import dims_text, shape_problem

__all__ = ["RefusedPickleError", "NUMERIC_CODES", "ALLOWED_GLOBALS", "loads", "is_array", "array_of",
           "describe"]


class RefusedPickleError(ArrayFileError):
    """A pickle that asks for a global (code) or a structure this reader refuses."""


#: The numeric type codes a `numpy.dtype` global may ask for.
NUMERIC_CODES = frozenset({"b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8",
                           "f2", "f4", "f8", "c8", "c16"})
_BYTE_ORDERS = frozenset({"<", ">", "|", "="})


class _Global(Opaque):
    """A global the pickle may name, as a read-only token: what REDUCE may call."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        object.__setattr__(self, "name", name)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"{self.name} is read-only")

    def described(self) -> str:
        return self.name


_RECONSTRUCT = _Global("numpy.core.multiarray._reconstruct")
_NDARRAY = _Global("numpy.ndarray")
_DTYPE = _Global("numpy.dtype")
_ENCODE = _Global("_codecs.encode")

#: (module, name) -> the token a GLOBAL resolves to. Nothing else resolves.
ALLOWED_GLOBALS = {
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy", "ndarray"): _NDARRAY,
    ("numpy", "dtype"): _DTYPE,
    ("_codecs", "encode"): _ENCODE,
}


def _is_int(v: Any) -> bool:
    return type(v) is int or type(v) is bool


class _DtypeStub(Opaque):
    """A numeric dtype from the pickle (type code, then byte order from BUILD)."""

    __slots__ = ("code", "byteorder")

    def __init__(self, code: str):
        self.code = code
        self.byteorder = "="

    def described(self) -> str:
        return f"numpy.dtype({self.code!r})"

    def build(self, state: Any) -> None:
        # numpy pickles a plain dtype's state as (3, byteorder, None, None, None, -1, -1, 0).
        ok = (type(state) is tuple and len(state) in (8, 9) and _is_int(state[0]) and state[0] in (3, 4)
              and type(state[1]) is str and state[1] in _BYTE_ORDERS
              and all(v is None for v in state[2:5])
              and all(_is_int(v) for v in state[5:8]) and state[5:8] == (-1, -1, 0)
              and (len(state) == 8 or state[8] is None))
        if not ok:
            raise Refused(f"a dtype state this reader does not take ({describe(state)}); "
                          "only plain numeric dtypes are read")
        self.byteorder = state[1]

    def dtype(self) -> np.dtype:
        dt = np.dtype(self.code)
        return dt if self.byteorder in "|=" else dt.newbyteorder(self.byteorder)


class _ArrayStub(Opaque):
    """An array from the pickle: made empty by `_reconstruct`, filled by BUILD."""

    __slots__ = ("array",)

    def __init__(self) -> None:
        self.array: np.ndarray | None = None

    def described(self) -> str:
        return "a numpy array"

    def build(self, state: Any, machine: Machine) -> None:
        # numpy's ndarray state: (version 1, shape, dtype, is_fortran, raw bytes).
        if not (type(state) is tuple and len(state) == 5 and _is_int(state[0]) and state[0] == 1):
            raise Refused(f"an array state this reader does not take ({describe(state)})")
        if self.array is not None:
            raise Refused("an array built twice")
        _, shape, dt, fortran, raw = state
        if type(dt) is not _DtypeStub:
            raise Refused("an array whose dtype is not a plain numeric numpy dtype")
        if type(shape) is not tuple or not all(_is_int(d) for d in shape):
            raise Refused(f"an array shape that is not a tuple of sizes ({describe(shape)})")
        if not (_is_int(fortran) and fortran in (0, 1)):
            raise Refused(f"an array whose order flag is {describe(fortran)}, not a bool")
        if type(raw) not in (bytes, bytearray):
            raise Refused("an array whose data is not raw bytes (an object array?)")
        dtype = dt.dtype()
        problem = shape_problem(shape, dtype.itemsize)
        if problem:
            raise Refused(f"an array of {problem}")
        count = 1
        for d in shape:
            count *= d
        if count * dtype.itemsize != len(raw):
            raise Refused(f"an array of shape {dims_text(shape)} {dtype} whose data has {len(raw)} bytes, "
                          f"not {count * dtype.itemsize}")
        machine.charge(len(raw))
        arr = np.frombuffer(raw, dtype=dtype).reshape(shape, order="F" if fortran else "C")
        # A copy in native byte order, 0-D kept, with numpy's own dtype instance
        # (so that pickling it again shares one dtype, as Paddle's files do).
        self.array = arr.astype(np.dtype(dtype.char), order="C")


def _reconstruct(args: tuple, machine: Machine) -> _ArrayStub:
    if len(args) != 3 or args[0] is not _NDARRAY:
        raise Refused("_reconstruct of something other than numpy.ndarray")
    _, shape, code = args
    if not (type(shape) is tuple and len(shape) == 1 and type(shape[0]) is int and shape[0] == 0
            and type(code) in (bytes, str) and code in (b"b", "b")):
        raise Refused(f"_reconstruct with arguments numpy does not write ({describe(args)})")
    return _ArrayStub()


def _dtype(args: tuple, machine: Machine) -> _DtypeStub:
    code = args[0] if args else None
    if not 1 <= len(args) <= 3 or type(code) is not str or code not in NUMERIC_CODES:
        raise Refused(f"numpy.dtype({describe(code)}): only numeric dtypes are read "
                      f"({', '.join(sorted(NUMERIC_CODES))})")
    return _DtypeStub(code)


def _latin1(args: tuple, machine: Machine) -> bytes:
    text = args[0] if args else None
    encoding = args[1] if len(args) == 2 else None
    if type(text) is not str or type(encoding) is not str or encoding not in ("latin1", "latin-1"):
        raise Refused(f"_codecs.encode({describe(text)}, {describe(encoding)}): only str to latin-1 is read")
    machine.charge(len(text))
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        raise Malformed("_codecs.encode of text that is not latin-1") from None


_CALLS = {_RECONSTRUCT: _reconstruct, _DTYPE: _dtype, _ENCODE: _latin1}


class _NumpyArrays:
    """The policy: numpy's array globals as the stand-ins above, nothing else."""

    def find(self, module: str, name: str) -> _Global:
        token = ALLOWED_GLOBALS.get((module, name))
        if token is None:
            full = f"{module}.{name}"
            shown = full if len(full) <= 100 and full.isprintable() else describe(full, 100)
            raise Refused(f"it asks for the global {shown}, which is not part of a numpy array (a "
                          "parameter file holds only a dict of arrays; pybackward never runs code from one)")
        return token

    def call(self, func: Any, args: tuple, machine: Machine) -> Any:
        call = _CALLS.get(func) if type(func) is _Global else None
        if call is None:
            raise Refused(f"it calls {describe(func)}, which is not a function numpy's array pickles call")
        return call(args, machine)

    def build(self, target: Any, state: Any, machine: Machine) -> None:
        if type(target) is _ArrayStub:
            target.build(state, machine)
        elif type(target) is _DtypeStub:
            target.build(state)
        else:
            raise Refused(f"it sets the state of {describe(target)} (BUILD fills only numpy arrays and dtypes)")


_POLICY = _NumpyArrays()


def loads(data: bytes, label: str) -> Any:
    """Unpickle `data` with only numpy's array globals, in time linear in the
    file and memory bounded by it; arrays come back as stubs that `array_of`
    turns into numpy arrays. `label` names the file in errors."""
    try:
        return Machine(bytes(data), _POLICY).run()
    except Refused as e:
        raise RefusedPickleError(f"{label}: refused: {e}") from None
    except Malformed as e:
        raise ArrayFileError(f"{label}: not a readable pickle ({e})") from None
    except MemoryError:
        raise ArrayFileError(f"{label}: not a readable pickle: it asks for more memory than there is") from None
    except Exception as e:  # a bad number, bad UTF-8, a struct size: a damaged or foreign file
        msg = " ".join(str(e).split())[:200]
        raise ArrayFileError(f"{label}: not a readable pickle ({type(e).__name__}"
                             f"{': ' + msg if msg else ''})") from None


def is_array(value: Any) -> bool:
    """True for an array of the pickle (what `array_of` takes)."""
    return type(value) is _ArrayStub


def array_of(value: Any, label: str, key: str) -> np.ndarray:
    """The numpy array an `_ArrayStub` holds (an error if the pickle never filled it)."""
    if type(value) is not _ArrayStub or value.array is None:
        raise ArrayFileError(f"{label}: entry {describe(key)} is not a complete numpy array")
    return value.array
