"""What the file fuzzers share: seeds of every kind of array file pybackward
reads (Paddle pickles, `.npz`, Paddle tensor files), a mutator that knows
each format, and the one rule: reading a mutated file gives arrays or an
`ArrayFileError`, in bounded time and memory - never another exception, a
hang or an allocation the file's size does not bound.

Used by tests/tensors/test_file_fuzz.py (Hypothesis, bounded and
deterministic) and fuzz/fuzz_files.py (atheris, for long local runs). Needs
no atheris. Choices come from a `fuzzcore.Chooser`, as the program mutators'.

The mutators, beyond fuzzcore's byte-level ones:

* **pickle**: on the opcode stream (`pickletools.genops` of a seed): a
  number argument replaced by an interesting one (2^27, 2^32 - 1, -1, ...),
  a memo id made huge, a run of nested tuples or lists inserted, a span of
  opcodes duplicated or dropped, a global swapped for another (allowed or
  not), a BUILD / REDUCE / SETITEM inserted, a shape given many or huge dims;
* **npz**: on the zip's records: a size, method, flag or offset of a local or
  central header set to an interesting value, a central entry duplicated or
  renamed, an `.npy` header's shape rewritten, the archive cut;
* **tensor**: on Paddle's tensor records: dims replaced (65 of them, 2^62,
  negative, a zero beside huge ones), the data type, the LoD level count or
  a level's size, the description's size, the data cut or grown.
"""
from __future__ import annotations

import dataclasses
import io
import os
import pickle
import pickletools
import signal
import struct
import sys
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzzcore  # noqa: E402
from fuzzcore import Chooser, choice  # noqa: E402

import pybackward  # noqa: E402
from pybackward._proto import framework_pb2 as pb  # noqa: E402
from pybackward.base import dtypes  # noqa: E402
from pybackward.tensors import paddle_files  # noqa: E402

ROOT = fuzzcore.ROOT
PADDLE_FILES = ROOT / "testdata" / "paddle_files"
KINDS = ("pickle", "npz", "tensor")
SUFFIX = {"pickle": ".pdparams", "npz": ".npz", "tensor": ".pdiparams"}
#: Seconds one file may take to read.
TIMEOUT = int(os.environ.get("PYBACKWARD_FUZZ_TIMEOUT", 20))
#: Python-allocation peak one read may reach: this much, plus MEMORY_PER_BYTE per byte of file.
MEMORY_BASE = 32 << 20
MEMORY_PER_BYTE = 200

INTERESTING = [0, 1, 2, 7, 64, 65, 255, 256, 2**16 - 1, 2**27, 2**31 - 1, 2**31, 2**32 - 1, 2**62, 2**63 - 1]


# --------------------------------------------------------------------------
# Seeds
# --------------------------------------------------------------------------
@dataclasses.dataclass
class FileSeed:
    kind: str
    name: str
    data: bytes
    program: str | None = None        # a .pdiparams is read with its program; a tensor without one
                                      # is one var's file, read from a directory of per-var files


_SEEDS: dict[str, list[FileSeed]] = {}


def seeds(kind: str) -> list[FileSeed]:
    """Files Paddle wrote (testdata/paddle_files) and files of the test programs."""
    if kind not in _SEEDS:
        out: list[FileSeed] = []
        if kind == "pickle":
            for f in ("mlp/m.pdparams", "mlp/p2.pdparams", "adam/adam.pdparams", "adam/adam.pdopt"):
                out.append(FileSeed(kind, f, (PADDLE_FILES / f).read_bytes()))
            with np.load(fuzzcore.PROGRAMS / "fit_a_line" / "params.npz") as z:
                fit = {k: z[k] for k in z.files}
            for protocol in (0, 2, 3):
                out.append(FileSeed(kind, f"fit_p{protocol}", pickle.dumps(fit, protocol=protocol)))
            big = {"w@@.0": np.arange(3, dtype=np.float32), "w@@.1": np.arange(3, dtype=np.float32),
                   "UnpackBigParamInfor@@": {"w": {"OriginShape": (2, 3), "slices": ["w@@.0", "w@@.1"]}},
                   "lin.w": np.ones((2, 2), np.float32),
                   "StructuredToParameterName@@": {"lin.w": "linear_0.w_0"}, "LR_Scheduler": {"last_lr": 0.1}}
            out.append(FileSeed(kind, "big_and_structured", pickle.dumps(big, protocol=4)))
        elif kind == "npz":
            for case in ("fit_a_line", "while_loop", "cond_block"):
                for f in ("params.npz", "feeds.npz"):
                    if (fuzzcore.PROGRAMS / case / f).exists():
                        out.append(FileSeed(kind, f"{case}/{f}", (fuzzcore.PROGRAMS / case / f).read_bytes()))
            buf = io.BytesIO()
            np.savez_compressed(buf, a=np.zeros((64, 64), np.float32), b=np.arange(5), c=np.array(1.5))
            out.append(FileSeed(kind, "compressed", buf.getvalue()))
        else:
            out.append(FileSeed(kind, "mlp/inf.pdiparams", (PADDLE_FILES / "mlp/inf.pdiparams").read_bytes(),
                                str(PADDLE_FILES / "mlp/inf.pdmodel")))
            out.append(FileSeed(kind, "dtypes.pdiparams", (PADDLE_FILES / "dtypes/dtypes.pdiparams").read_bytes(),
                                str(PADDLE_FILES / "dtypes/dtypes.pdmodel")))
            for f in sorted((PADDLE_FILES / "mlp" / "vars").iterdir())[:2]:
                out.append(FileSeed(kind, f"vars/{f.name}", f.read_bytes()))
        _SEEDS[kind] = out
    return _SEEDS[kind]


# --------------------------------------------------------------------------
# Pickles: mutations on the opcode stream
# --------------------------------------------------------------------------
def _opcodes(data: bytes) -> list[bytes] | None:
    """The pickle cut into its opcodes (None if pickletools cannot follow it)."""
    try:
        starts = [pos for _, _, pos in pickletools.genops(data)]
    except Exception:
        return None
    starts.append(len(data))
    return [data[a:b] for a, b in zip(starts, starts[1:])]


def _pk_int(n: int) -> bytes:
    if 0 <= n < 256:
        return b"K" + bytes([n])
    if -2**31 <= n < 2**31:
        return b"J" + struct.pack("<i", n)
    b = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(b)]) + b


GLOBALS = [b"cnumpy\ndtype\n", b"cnumpy\nndarray\n", b"c_codecs\nencode\n",
           b"cnumpy.core.multiarray\n_reconstruct\n", b"cnumpy._core.multiarray\n_reconstruct\n",
           b"cos\nsystem\n", b"cbuiltins\neval\n", b"cnumpy._core.numeric\n_frombuffer\n"]


def _m_number(ch: Chooser, ops: list[bytes]) -> str:
    at = [i for i, op in enumerate(ops) if op[:1] in (b"K", b"M", b"J", b"\x8a")]
    if not at:
        return "number: none"
    i = choice(ch, at)
    n = choice(ch, INTERESTING) * choice(ch, [1, -1])
    ops[i] = _pk_int(n)
    return f"number@{i}={n}"


def _m_memo(ch: Chooser, ops: list[bytes]) -> str:
    at = [i for i, op in enumerate(ops) if op[:1] in (b"q", b"r", b"h", b"j", b"\x94")]
    if not at:
        return "memo: none"
    i = choice(ch, at)
    n = choice(ch, [2**27, 2**30, 2**32 - 1, 0, 1])
    ops[i] = (b"r" if ops[i][:1] in (b"q", b"r", b"\x94") else b"j") + struct.pack("<I", n)
    return f"memo@{i}={n}"


def _m_nest(ch: Chooser, ops: list[bytes]) -> str:
    i = ch.int(0, len(ops) - 1)
    depth = choice(ch, [50, 99, 100, 101, 1000, 20_000])
    kind = ch.int(0, 2)
    ops.insert(i, [b")" + b"\x85" * depth,                                  # tuples
                   b"(" * depth + b"N" + b"l" * depth,                        # lists
                   b"(\x8c\x01k" * depth + b"N" + b"d" * depth][kind])       # dicts
    return f"nest@{i}x{depth}"


def _m_duplicate(ch: Chooser, ops: list[bytes]) -> str:
    i = ch.int(0, len(ops) - 1)
    j = min(len(ops), i + ch.int(1, 8))
    times = choice(ch, [1, 2, 100])
    ops[i:i] = ops[i:j] * times
    return f"duplicate[{i}:{j}]x{times}"


def _m_drop(ch: Chooser, ops: list[bytes]) -> str:
    i = ch.int(0, len(ops) - 1)
    del ops[i]
    return f"drop@{i}"


def _m_global(ch: Chooser, ops: list[bytes]) -> str:
    at = [i for i, op in enumerate(ops) if op[:1] in (b"c", b"\x93")]
    if not at:
        return "global: none"
    i = choice(ch, at)
    ops[i] = choice(ch, GLOBALS)
    return f"global@{i}"


def _m_insert(ch: Chooser, ops: list[bytes]) -> str:
    i = ch.int(0, len(ops) - 1)
    what = choice(ch, [b"b", b"R", b"s", b"a", b"u", b"e", b"t", b"0", b"2", b"(", b"}", b"\x8f", b"\x90"])
    ops.insert(i, what)
    return f"insert@{i}={what!r}"


def _m_dims(ch: Chooser, ops: list[bytes]) -> str:
    """A shape tuple (MARK, numbers, TUPLE / TUPLE1-3 after _reconstruct's) given other dims."""
    at = [i for i, op in enumerate(ops) if op[:1] in (b"\x85", b"\x86", b"\x87", b"t")]
    if not at:
        return "dims: none"
    i = choice(ch, at)
    n = choice(ch, [0, 1, 65, 300, 100_000])
    d = choice(ch, [0, 1, 2, 2**62, -1])
    ops[i:i + 1] = [b"0", b"(" + _pk_int(d) * n + b"t"]
    return f"dims@{i}={n}x{d}"


PICKLE_MUTATIONS = {"number": _m_number, "memo": _m_memo, "nest": _m_nest, "duplicate": _m_duplicate,
                    "drop": _m_drop, "global": _m_global, "insert": _m_insert, "dims": _m_dims}


def mutate_pickle(ch: Chooser, data: bytes) -> tuple[bytes, list[str]]:
    ops = _opcodes(data)
    if not ops or ch.int(0, 4) == 0:
        return fuzzcore.mutate_bytes(ch, data)
    log = []
    for _ in range(ch.int(1, 3)):
        if not ops:
            break
        name = choice(ch, sorted(PICKLE_MUTATIONS))
        log.append(PICKLE_MUTATIONS[name](ch, ops))
    return b"".join(ops), log


# --------------------------------------------------------------------------
# .npz: mutations on the zip's records
# --------------------------------------------------------------------------
#: (signature, field name -> (offset, struct format)) of the zip records mutated.
_LOCAL = {"flags": (6, "<H"), "method": (8, "<H"), "crc": (14, "<I"), "compress_size": (18, "<I"),
          "file_size": (22, "<I"), "name_len": (26, "<H"), "extra_len": (28, "<H")}
_CENTRAL = {"flags": (8, "<H"), "method": (10, "<H"), "crc": (16, "<I"), "compress_size": (20, "<I"),
            "file_size": (24, "<I"), "name_len": (28, "<H"), "offset": (42, "<I")}
_EOCD = {"entries_disk": (8, "<H"), "entries": (10, "<H"), "cd_size": (12, "<I"), "cd_offset": (16, "<I")}


def _records(buf: bytes, signature: bytes) -> list[int]:
    out, at = [], buf.find(signature)
    while at >= 0:
        out.append(at)
        at = buf.find(signature, at + 1)
    return out


def _m_zip_field(ch: Chooser, buf: bytearray) -> str:
    table = choice(ch, [(b"PK\x03\x04", _LOCAL), (b"PK\x01\x02", _CENTRAL), (b"PK\x05\x06", _EOCD)])
    at = _records(bytes(buf), table[0])
    if not at:
        return "field: none"
    pos = choice(ch, at)
    name = choice(ch, sorted(table[1]))
    off, fmt = table[1][name]
    limit = 2 ** (8 * struct.calcsize(fmt)) - 1
    value = min(limit, choice(ch, INTERESTING + [12, 14, 99]))
    if pos + off + struct.calcsize(fmt) <= len(buf):
        struct.pack_into(fmt, buf, pos + off, value)
    return f"{name}@{pos}={value}"


def _m_zip_duplicate_entry(ch: Chooser, buf: bytearray) -> str:
    cds = _records(bytes(buf), b"PK\x01\x02")
    end = _records(bytes(buf), b"PK\x05\x06")
    if not cds or not end:
        return "dup: none"
    pos = choice(ch, cds)
    n = struct.unpack_from("<HHH", buf, pos + 28)
    size = 46 + sum(n)
    entry = bytes(buf[pos:pos + size])
    times = choice(ch, [1, 5, 500])
    e = end[-1]
    buf[e:e] = entry * times
    e += len(entry) * times
    for off in (8, 10):
        struct.pack_into("<H", buf, e + off, min(0xFFFF, struct.unpack_from("<H", buf, e + off)[0] + times))
    struct.pack_into("<I", buf, e + 12, min(0xFFFFFFFF, struct.unpack_from("<I", buf, e + 12)[0] + len(entry) * times))
    return f"dup-entry@{pos}x{times}"


def _m_zip_rename(ch: Chooser, buf: bytearray) -> str:
    at = [m for m in _records(bytes(buf), b".npy")]
    if not at:
        return "rename: none"
    pos = choice(ch, at)
    buf[pos:pos + 4] = choice(ch, [b".txt", b".npz", b"/npy", b".np\0"])
    return f"rename@{pos}"


def _m_npy_shape(ch: Chooser, buf: bytearray) -> str:
    at = _records(bytes(buf), b"'shape': (")
    if not at:
        return "shape: none"
    pos = choice(ch, at) + len(b"'shape': (")
    end = buf.find(b")", pos)
    new = choice(ch, [b"1099511627776,", b"0, 4611686018427387904, 4611686018427387904",
                      b", ".join([b"1"] * 65), b"-1,", b"2, 2, 2, 2", b""])
    buf[pos:end] = new
    return f"shape@{pos}"


ZIP_MUTATIONS = {"field": _m_zip_field, "duplicate-entry": _m_zip_duplicate_entry, "rename": _m_zip_rename,
                 "npy-shape": _m_npy_shape}


def mutate_npz(ch: Chooser, data: bytes) -> tuple[bytes, list[str]]:
    if ch.int(0, 4) == 0:
        return fuzzcore.mutate_bytes(ch, data)
    buf = bytearray(data)
    log = [ZIP_MUTATIONS[choice(ch, sorted(ZIP_MUTATIONS))](ch, buf) for _ in range(ch.int(1, 3))]
    return bytes(buf), log


# --------------------------------------------------------------------------
# Paddle tensor files: mutations on the records
# --------------------------------------------------------------------------
@dataclasses.dataclass
class _Record:
    lod: list[bytes]
    desc: pb.VarType.TensorDesc
    data: bytes


def _tensor_records(data: bytes) -> list[_Record] | None:
    out, pos = [], 0
    try:
        while pos < len(data):
            (levels,) = struct.unpack_from("<Q", data, pos + 4)
            pos += 12
            lod = []
            for _ in range(levels):
                (size,) = struct.unpack_from("<Q", data, pos)
                lod.append(data[pos + 8:pos + 8 + size])
                pos += 8 + size
            (n,) = struct.unpack_from("<i", data, pos + 4)
            desc = pb.VarType.TensorDesc()
            desc.ParseFromString(data[pos + 8:pos + 8 + n])
            pos += 8 + n
            count = int(np.prod(desc.dims)) if desc.dims else 1
            size = count * np.dtype(dtypes.to_numpy(desc.data_type)).itemsize
            out.append(_Record(lod, desc, data[pos:pos + size]))
            pos += size
    except Exception:
        return None
    return out


def _encode(records: list[_Record], desc_size_delta: int = 0, lod_count_delta: int = 0) -> bytes:
    out = []
    for r in records:
        out.append(struct.pack("<IQ", 0, len(r.lod) + lod_count_delta))
        out += [struct.pack("<Q", len(level)) + level for level in r.lod]
        d = r.desc.SerializeToString()
        out.append(struct.pack("<Ii", 0, len(d) + desc_size_delta) + d + r.data)
    return b"".join(out)


def mutate_tensor(ch: Chooser, data: bytes) -> tuple[bytes, list[str]]:
    records = _tensor_records(data)
    if not records or ch.int(0, 4) == 0:
        return fuzzcore.mutate_bytes(ch, data)
    r = choice(ch, records)
    what = choice(ch, ["dims", "dims", "dtype", "lod", "lod-count", "desc-size", "data"])
    delta = {}
    if what == "dims":
        new = choice(ch, [[1] * 65, [2**62] * 300, [2**62, 2**62, 0], [-1, 4], [0], [2] * 2000, [],
                          [2**63 - 1], [3, 2**31], list(r.desc.dims) + [1]])
        del r.desc.dims[:]
        r.desc.dims.extend(new)
    elif what == "dtype":
        r.desc.data_type = choice(ch, [0, 1, 2, 3, 4, 5, 6, 19, 20, 21, 22, 23, 24, 7, 17])
    elif what == "lod":
        r.lod.append(struct.pack("<Q", 0) * ch.int(0, 3) + bytes(ch.int(0, 7)))
    elif what == "lod-count":
        delta["lod_count_delta"] = choice(ch, [1, 2**32, 2**63])
    elif what == "desc-size":
        delta["desc_size_delta"] = choice(ch, [-1, 1, 2**30, -2**31 + 100])
    else:
        r.data = r.data[:ch.int(0, len(r.data))] + bytes(ch.int(0, 8))
    try:
        return _encode(records, **delta), [f"{what}"]
    except (ValueError, struct.error):
        return _encode(records), [f"{what} (not encodable)"]


MUTATORS = {"pickle": mutate_pickle, "npz": mutate_npz, "tensor": mutate_tensor}


# --------------------------------------------------------------------------
# Reading a mutated file
# --------------------------------------------------------------------------
class Hang(BaseException):
    """A file took longer than TIMEOUT seconds to read."""


class TooMuchMemory(AssertionError):
    """Reading a file allocated more than its size bounds."""


def _alarm(signum, frame):
    raise Hang(f"no result after {TIMEOUT} s")


@dataclasses.dataclass
class Outcome:
    arrays: int | None        # how many arrays were read, or None
    error: str | None         # the ArrayFileError's message, when refused


_PROGRAMS: dict[str, pybackward.Program] = {}


def exercise(kind: str, data: bytes, program: str | None = None, track_memory: bool = True) -> Outcome:
    """Read `data` as a file of `kind` (through `load_arrays`, as the CLI does).
    Arrays or an ArrayFileError come back; any other exception is raised, and
    so are `Hang` past TIMEOUT seconds and `TooMuchMemory` when the peak of
    Python allocations passes MEMORY_BASE + MEMORY_PER_BYTE per byte of file."""
    prog = None
    if program:
        prog = _PROGRAMS.get(program) or _PROGRAMS.setdefault(program, pybackward.load(program))
    with tempfile.TemporaryDirectory(prefix="pybackward-filefuzz-") as d:
        path = Path(d) / f"fuzz{SUFFIX[kind]}"
        if kind == "tensor" and prog is None:       # one var's file: in a directory of per-var files
            path = Path(d) / "vars"
            path.mkdir()
            (path / "w").write_bytes(data)
        else:
            path.write_bytes(data)
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(TIMEOUT)
        if track_memory:
            tracemalloc.start()
        try:
            try:
                arrays = paddle_files.load_arrays(path, prog)
                outcome = Outcome(len(arrays), None)
            except pybackward.ArrayFileError as e:
                outcome = Outcome(None, str(e))
            if track_memory:
                peak = tracemalloc.get_traced_memory()[1]
                bound = MEMORY_BASE + MEMORY_PER_BYTE * len(data)
                if peak > bound:
                    raise TooMuchMemory(f"{peak} bytes at peak reading {len(data)} bytes (bound {bound})")
            return outcome
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
            if track_memory:
                tracemalloc.stop()
