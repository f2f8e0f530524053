"""Paddle's VarType.Type data types and their NumPy equivalents.

NumPy is imported the first time a NumPy dtype is asked for, not with this
module: loading, showing and differentiating programs never need it.
"""
from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from .._proto import framework_pb2 as pb
from .errors import UnsupportedDtypeError

if TYPE_CHECKING:
    import numpy as np

VarType = pb.VarType

_NUMPY_NAMES = {
    VarType.BOOL: "bool", VarType.INT16: "int16", VarType.INT32: "int32", VarType.INT64: "int64",
    VarType.FP16: "float16", VarType.FP32: "float32", VarType.FP64: "float64", VarType.UINT8: "uint8",
    VarType.INT8: "int8", VarType.COMPLEX64: "complex64", VarType.COMPLEX128: "complex128",
    VarType.UINT16: "uint16", VarType.UINT32: "uint32", VarType.UINT64: "uint64",
}


@lru_cache(maxsize=1)
def _to_numpy() -> dict[int, "np.dtype"]:
    import numpy as np
    return {k: np.dtype(v) for k, v in _NUMPY_NAMES.items()}


@lru_cache(maxsize=1)
def _from_numpy() -> dict["np.dtype", int]:
    return {v: k for k, v in _to_numpy().items()}


#: Paddle's names for data types, as `paddle.float32` spells them.
_NAMES = {
    "bool": VarType.BOOL, "int16": VarType.INT16, "int32": VarType.INT32,
    "int64": VarType.INT64, "float16": VarType.FP16, "float32": VarType.FP32,
    "float64": VarType.FP64, "uint8": VarType.UINT8, "int8": VarType.INT8,
    "bfloat16": VarType.BF16, "complex64": VarType.COMPLEX64,
    "complex128": VarType.COMPLEX128, "uint16": VarType.UINT16,
    "uint32": VarType.UINT32, "uint64": VarType.UINT64,
}

FLOAT_TYPES = frozenset({VarType.FP16, VarType.FP32, VarType.FP64, VarType.BF16,
                         VarType.COMPLEX64, VarType.COMPLEX128,
                         VarType.FP8_E4M3FN, VarType.FP8_E5M2})

#: Var types that hold a tensor description (and so a dtype and dims).
TENSOR_VAR_TYPES = {
    VarType.DENSE_TENSOR: "dense_tensor",
    VarType.DENSE_TENSOR_ARRAY: "tensor_array",
    VarType.SELECTED_ROWS: "selected_rows",
}


def to_numpy(data_type: int) -> np.dtype:
    """NumPy dtype of a VarType.Type value (bfloat16 and fp8 have none)."""
    try:
        return _to_numpy()[data_type]
    except KeyError:
        raise UnsupportedDtypeError(f"data type {type_name(data_type)} has no NumPy equivalent; "
                                    "the interpreter cannot hold its values") from None


def numpy_name(data_type: int) -> str:
    """NumPy's name of a VarType.Type value ('float32'), without importing NumPy:
    `str(to_numpy(t))` for listings (UnsupportedDtypeError where it has none)."""
    try:
        return _NUMPY_NAMES[data_type]
    except KeyError:
        raise UnsupportedDtypeError(f"data type {type_name(data_type)} has no NumPy equivalent; "
                                    "the interpreter cannot hold its values") from None


def from_any(dtype) -> int:
    """VarType.Type value of a NumPy dtype, a name ('float32') or an int."""
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        if dtype not in VarType.Type.values():
            raise ValueError(f"unknown data type enum value {dtype}")
        return dtype
    if isinstance(dtype, str) and dtype in _NAMES:
        return _NAMES[dtype]
    import numpy as np
    try:
        return _from_numpy()[np.dtype(dtype)]
    except (TypeError, KeyError):
        raise ValueError(f"unsupported data type {dtype!r}") from None


def type_name(data_type: int) -> str:
    """Readable name of a VarType.Type value, e.g. 'FP32'."""
    try:
        return VarType.Type.Name(data_type)
    except ValueError:
        return f"<unknown type {data_type}>"


def is_float(data_type: int) -> bool:
    return data_type in FLOAT_TYPES
