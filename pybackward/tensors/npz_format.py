"""NumPy's `.npz` and `.npy` files, read with every size checked before the work it costs.

`np.load` trusts an archive's directory: a member listed 2 000 times is
decompressed 2 000 times, a member that is no array (`junk.txt`, a deflate
bomb) is decompressed before its name is looked at, and an array is
allocated at the size its header declares. Here, before anything is
decompressed:

* every member must be `NAME.npy`, each name once, stored or deflated (what
  `np.savez` / `np.savez_compressed` write), not encrypted;
* the members' data may not overlap in the file, so together they are at
  most the file's size compressed;
* a member may declare at most what its compressed size can hold
  (`MAX_DEFLATE_RATIO`, deflate's own limit; stored members exactly their
  size);

and then, for each member, the `.npy` header (at most 10 000 bytes, numpy's
own limit) must declare an array NumPy can hold (`tensor_format.shape_problem`)
of exactly the member's declared size, before the array is allocated and
filled in 1 MiB pieces. No Python objects are ever loaded (object dtypes are
refused). So time is linear in the bytes decompressed and memory is the
arrays the file declares, which the file's size bounds.
"""
from __future__ import annotations

import io
import struct
import zipfile
from typing import BinaryIO

import numpy as np

from ..base.errors import ArrayFileError
from .pickle_machine import describe
from .tensor_format import shape_problem

#: How much larger than its compressed size a deflated member may say it is: deflate's
#: limit is 1032:1 (a 258-byte match in 2 bits), plus room for a short member's overhead.
MAX_DEFLATE_RATIO = 1032
#: numpy's own limit on a .npy header (`max_header_size`).
MAX_HEADER_BYTES = 10_000
_CHUNK = 1 << 20
_LOCAL_HEADER = struct.Struct("<4s22xHH")


class NpyError(Exception):
    """Why one .npy array cannot be read (the caller names the file and array)."""


def read_npz_bytes(data: bytes, label: str) -> dict[str, np.ndarray]:
    """The arrays of a `.npz` archive (its bytes), name -> array, in archive order."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except Exception:      # BadZipFile, LargeZipFile, struct.error, ...: not a zip we can follow
        raise ArrayFileError(f"{label}: a damaged .npz archive (the zip cannot be read)") from None
    with archive:
        members = _members(archive, data, label)
        out = {}
        for key, info in members:
            try:
                with archive.open(info) as f:
                    out[key] = read_npy_stream(f, info.file_size)
            except NpyError as e:
                raise ArrayFileError(f"{label}: cannot read array {describe(key)}: {e}") from None
            except MemoryError:
                raise ArrayFileError(f"{label}: cannot read array {describe(key)}: not enough memory "
                                     f"for its {info.file_size} bytes") from None
            except Exception:
                raise ArrayFileError(f"{label}: cannot read array {describe(key)}: it is damaged") from None
    return out


def _members(archive: zipfile.ZipFile, data: bytes, label: str) -> list[tuple[str, zipfile.ZipInfo]]:
    """(name, member) of every array, after the checks of the module docstring."""
    seen: set[str] = set()
    spans = []
    out = []
    for info in archive.infolist():
        member = info.filename
        if not member.endswith(".npy") or info.is_dir():
            raise ArrayFileError(f"{label}: member {describe(member)} is not an array (NAME.npy): a .npz "
                                 "holds only .npy arrays")
        key = member[:-4]
        if key in seen:
            raise ArrayFileError(f"{label}: array {describe(key)} is in the archive twice")
        seen.add(key)
        if info.flag_bits & 0x1:
            raise ArrayFileError(f"{label}: array {describe(key)} is encrypted")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise ArrayFileError(f"{label}: array {describe(key)} is compressed with method "
                                 f"{info.compress_type}; numpy writes only stored or deflated members")
        limit = info.compress_size if info.compress_type == zipfile.ZIP_STORED \
            else info.compress_size * MAX_DEFLATE_RATIO + 1024
        if info.file_size > limit:
            raise ArrayFileError(f"{label}: array {describe(key)} declares {info.file_size} bytes from "
                                 f"{info.compress_size} compressed, more than the zip can hold (damaged, "
                                 "or made to take memory)")
        start = info.header_offset
        head = data[start:start + _LOCAL_HEADER.size]
        if len(head) < _LOCAL_HEADER.size or _LOCAL_HEADER.unpack(head)[0] != b"PK\x03\x04":
            raise ArrayFileError(f"{label}: a damaged .npz archive (array {describe(key)} is not where "
                                 "the zip's directory says)")
        _, name_len, extra_len = _LOCAL_HEADER.unpack(head)
        end = start + _LOCAL_HEADER.size + name_len + extra_len + info.compress_size
        if end > len(data):
            raise ArrayFileError(f"{label}: a damaged .npz archive (array {describe(key)} runs past the "
                                 "end of the file: truncated?)")
        spans.append((start, end, key))
        out.append((key, info))
    spans.sort()
    for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
        if start < end:
            raise ArrayFileError(f"{label}: arrays {describe(a)} and {describe(b)} share bytes of the file "
                                 "(a zip made to be decompressed over and over)")
    return out


class _Counted:
    """A reader that counts the bytes read through it (the .npy header's length)."""

    def __init__(self, f: BinaryIO):
        self.f, self.n = f, 0

    def read(self, n: int = -1) -> bytes:
        chunk = self.f.read(n)
        self.n += len(chunk)
        return chunk


def read_npy_stream(f: BinaryIO, size: int) -> np.ndarray:
    """One `.npy` array of `size` bytes in all from `f`: the header checked
    against `size` before the array is allocated, then read in 1 MiB pieces."""
    counted = _Counted(f)
    try:
        version = np.lib.format.read_magic(counted)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(counted, max_header_size=MAX_HEADER_BYTES)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(counted, max_header_size=MAX_HEADER_BYTES)
        else:
            raise NpyError(f".npy format version {version[0]}.{version[1]}, which is only for record arrays")
    except NpyError:
        raise
    except Exception:
        raise NpyError("it is damaged (not a .npy array)") from None
    if dtype.hasobject:
        raise NpyError("it holds Python objects, which pybackward does not load")
    problem = shape_problem(shape, dtype.itemsize)
    if problem:
        raise NpyError(f"its header declares {problem}")
    count = 1
    for d in shape:
        count *= d
    nbytes = count * dtype.itemsize
    if counted.n + nbytes != size:
        raise NpyError(f"it is damaged (its header declares {nbytes} bytes of data, the file holds "
                       f"{size - counted.n})")
    flat = np.empty(count, dtype)
    if nbytes:
        into = flat.view(np.uint8)
        pos = 0
        while pos < nbytes:
            chunk = f.read(min(_CHUNK, nbytes - pos))
            if not chunk:
                raise NpyError("it is damaged (the data ends early)")
            into[pos:pos + len(chunk)] = np.frombuffer(chunk, np.uint8)
            pos += len(chunk)
    if f.read(1):                # also makes zipfile check the member's CRC at its end
        raise NpyError("it is damaged (bytes after the array)")
    return flat.reshape(shape, order="F" if fortran else "C")
