"""Paddle's binary format of one tensor, as its `save` and `save_combine`
ops write it (a combined file is these records one after another).

Little-endian, checked against files Paddle 3.3.1 wrote::

    uint32  version (0)
    uint64  LoD level count, then per level: uint64 byte size, that many
            bytes of uint64 offsets
    uint32  tensor version (0)
    int32   byte size of a VarType.TensorDesc protobuf (data_type, dims)
    bytes   the TensorDesc
    bytes   the data, C order

Every size is checked against the bytes left before it is used, and the
dims (at most `MAX_DIMS`, each a size NumPy can hold, `shape_problem`)
before they are multiplied out, so a damaged or hostile file fails with an
`ArrayFileError` naming the tensor in time linear in the file, never with a
huge allocation or a huge number.
"""
from __future__ import annotations

import struct
from typing import Iterable, Sequence

import numpy as np

from ..base import dtypes
from .._proto import framework_pb2 as pb
from ..base.errors import ArrayFileError, PyBackwardError

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I32 = struct.Struct("<i")

#: NumPy's limit on an array's dims (NPY_MAXDIMS; Paddle's tensors have at most 9).
MAX_DIMS = 64
_MAX_BYTES = 2**63 - 1                  # NumPy's limit on an array's size in bytes


def dims_text(dims: Sequence[int]) -> str:
    """Dims for a message, bounded: at most 8 sizes shown, each at most 20 digits."""
    def one(d: int) -> str:
        return str(d) if -2**64 < d < 2**64 else f"~2^{d.bit_length()}"
    shown = [one(d) for d in dims[:8]]
    if len(dims) > 8:
        shown[-1:] = ["...", one(dims[-1])]
        return f"[{', '.join(shown)}] ({len(dims)} dims)"
    return f"[{', '.join(shown)}]"


def shape_problem(dims: Sequence[int], itemsize: int) -> str | None:
    """Why NumPy cannot hold an array of `dims` with items of `itemsize` bytes,
    or None when it can: at most `MAX_DIMS` dims, none negative, and the
    nonzero sizes times the item size under 2^63 bytes (NumPy's own limit,
    which it applies even when another dim is 0). Checked before anything is
    multiplied out, in time linear in the number of dims, so neither 200 000
    dims nor sizes of 2^62 cost more than reading them."""
    if len(dims) > MAX_DIMS:
        return f"{len(dims)} dims (NumPy holds at most {MAX_DIMS})"
    total = max(itemsize, 1)
    for d in dims:
        if d < 0:
            return f"negative dims {dims_text(dims)}"
        if d:
            total *= d
            if total > _MAX_BYTES:
                return f"dims {dims_text(dims)}, more than 2^63 bytes (what NumPy can hold)"
    return None


def encode_tensor(array, lod: Iterable[Iterable[int]] = ()) -> bytes:
    """One tensor in Paddle's format (what its `save` / `save_combine` ops write)."""
    arr = np.asarray(array)
    try:
        data_type = dtypes.from_any(arr.dtype)
    except ValueError:
        raise ArrayFileError(f"arrays of dtype {arr.dtype} have no Paddle data type") from None
    out = [_U32.pack(0)]
    levels = [list(level) for level in lod]
    out.append(_U64.pack(len(levels)))
    for level in levels:
        out.append(_U64.pack(8 * len(level)))
        out.append(struct.pack(f"<{len(level)}Q", *level))
    desc = pb.VarType.TensorDesc(data_type=data_type, dims=list(arr.shape)).SerializeToString()
    out += [_U32.pack(0), _I32.pack(len(desc)), desc]
    out.append(arr.astype(arr.dtype.newbyteorder("<"), order="C").tobytes())  # 0-D stays 0-D
    return b"".join(out)


def decode_tensor(data: bytes | memoryview, offset: int = 0, label: str = "<bytes>",
                  name: str | None = None) -> tuple[np.ndarray, list[list[int]], int]:
    """One tensor in Paddle's format at `offset`: (array, LoD levels, offset after it)."""
    view = memoryview(data)
    what = f"{label}: tensor '{name}'" if name else f"{label}: tensor at byte {offset}"
    end = len(view)

    def need(n: int, pos: int, part: str) -> None:
        if n < 0 or pos + n > end:
            raise ArrayFileError(f"{what}: the file ends inside the {part} (truncated, or not Paddle's "
                                 "tensor format)")

    need(4, offset, "header")
    (version,) = _U32.unpack_from(view, offset)
    if version != 0:
        raise ArrayFileError(f"{what}: version {version}, not 0: not Paddle's tensor format")
    pos = offset + 4
    need(8, pos, "LoD header")
    (levels,) = _U64.unpack_from(view, pos)
    pos += 8
    lod: list[list[int]] = []
    for _ in range(levels):
        need(8, pos, "LoD")
        (size,) = _U64.unpack_from(view, pos)
        pos += 8
        need(size, pos, "LoD")
        if size % 8:
            raise ArrayFileError(f"{what}: a LoD level of {size} bytes, not whole offsets")
        lod.append(list(struct.unpack_from(f"<{size // 8}Q", view, pos)))
        pos += size
    need(8, pos, "tensor header")
    (tversion,) = _U32.unpack_from(view, pos)
    if tversion != 0:
        raise ArrayFileError(f"{what}: tensor version {tversion}, not 0: not Paddle's tensor format")
    (desc_size,) = _I32.unpack_from(view, pos + 4)
    pos += 8
    need(desc_size, pos, "tensor description")
    desc = pb.VarType.TensorDesc()
    try:
        desc.ParseFromString(bytes(view[pos:pos + desc_size]))
        if not desc.HasField("data_type"):
            raise ValueError("no data_type")
    except Exception:
        raise ArrayFileError(f"{what}: a damaged tensor description (not Paddle's tensor format)") from None
    pos += desc_size
    try:
        dtype = dtypes.to_numpy(desc.data_type)
    except PyBackwardError:
        raise ArrayFileError(f"{what}: data type {dtypes.type_name(desc.data_type)} has no NumPy "
                             "equivalent") from None
    if len(desc.dims) > MAX_DIMS:
        raise ArrayFileError(f"{what}: {len(desc.dims)} dims (NumPy holds at most {MAX_DIMS})")
    dims = list(desc.dims)
    problem = shape_problem(dims, dtype.itemsize)
    if problem:
        raise ArrayFileError(f"{what}: {problem}")
    count = 1
    for d in dims:
        count *= d
    nbytes = count * dtype.itemsize
    need(nbytes, pos, f"data ({dims_text(dims)} {dtype}: {nbytes} bytes)")
    arr = np.frombuffer(view[pos:pos + nbytes], dtype=dtype.newbyteorder("<")).reshape(dims)
    return arr.astype(dtype, copy=True), lod, pos + nbytes


def decode_tensors(data: bytes, label: str = "<bytes>") -> list[tuple[np.ndarray, list[list[int]]]]:
    """Every tensor of a combined file, in file order (each with its LoD)."""
    out = []
    pos = 0
    while pos < len(data):
        arr, lod, pos = decode_tensor(data, pos, label)
        out.append((arr, lod))
    return out
