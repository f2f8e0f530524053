"""The pickle reader (`safe_pickle` on `pickle_machine`): what it reads, it reads
as Python's unpickler does; what it bounds (depth, memo ids, dict keys, what
shared data can make, messages), it bounds as the opcodes are read; and any
damage is an ArrayFileError, never another exception."""
from __future__ import annotations

import math
import pickle
import random
import struct
import time

import numpy as np
import pytest

import pybackward
from pybackward.tensors import pickle_machine, safe_pickle
from conftest import TESTDATA

PF = TESTDATA / "paddle_files"
P4 = b"\x80\x04"


def loads(data: bytes):
    return safe_pickle.loads(data, "x.pdparams")


def refused(data: bytes, match: str) -> str:
    with pytest.raises(safe_pickle.RefusedPickleError, match=match) as e:
        loads(data)
    return str(e.value)


# -- what it reads, it reads as pickle.loads does ---------------------------
def _random_value(r: random.Random, depth: int = 0):
    k = r.randrange(12 if depth < 4 else 7)
    if k == 0:
        return r.choice([None, True, False])
    if k == 1:
        return r.choice([0, 1, -1, 255, 256, 65535, 65536, 2**31 - 1, -2**31, 2**31, 2**63, -2**100,
                         r.randrange(-10**6, 10**6)])
    if k == 2:
        return r.choice([0.0, -1.5, 1e300, float("inf"), float("nan")])
    if k == 3:
        return "".join(r.choice("ab\u00e9\u4e2d\n'\"\\") for _ in range(r.randrange(0, 300)))
    if k == 4:
        return bytes(r.randrange(256) for _ in range(r.randrange(1, 300)))
    if k == 5:
        code = r.choice(["f4", "f8", "i8", "u1", "b1", "c8", "f2", ">f4", "<i2"])
        shape = r.choice([(), (0,), (3,), (2, 3), (1, 0, 2)])
        arr = (np.arange(int(np.prod(shape))) % 2).astype(code).reshape(shape)
        return np.asfortranarray(arr) if r.random() < 0.2 else arr
    if k == 6:
        return r.choice(["", "x"])
    if k == 7:
        return [_random_value(r, depth + 1) for _ in range(r.randrange(0, 4))]
    if k == 8:
        return tuple(_random_value(r, depth + 1) for _ in range(r.randrange(0, 5)))
    if k == 9:
        return {r.choice(["a", "b", "c", b"k", 1, 2.5, None, True]): _random_value(r, depth + 1)
                for _ in range(r.randrange(0, 4))}
    if k == 10:
        return {r.choice(["a", 1, b"z", 2.0]) for _ in range(r.randrange(0, 3))}
    return frozenset(r.choice(["a", 1]) for _ in range(r.randrange(0, 3)))


def _plain(value, ours: bool):
    """A comparable form: arrays by dtype, shape and bytes; NaN equal to itself."""
    if ours and safe_pickle.is_array(value):
        value = safe_pickle.array_of(value, "x", "k")
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.newbyteorder("=").str, value.shape,
                value.astype(value.dtype.newbyteorder("="), order="C").tobytes())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_plain(v, ours) for v in value])
    if isinstance(value, dict):
        return ("dict", [(k, _plain(v, ours)) for k, v in value.items()])
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return (type(value).__name__, value)


def test_reads_what_pickle_reads_in_every_protocol():
    """2 000 random values of every kind the opcodes build (arrays as numpy pickles
    them), pickled with protocols 0-5: the same values as pickle.loads gives, or a
    refusal of a global pickle would import (sets before protocol 4 are
    `builtins.set(...)`, empty bytes `builtins.bytes()`, arrays under protocol 5
    `numpy._frombuffer`)."""
    r = random.Random(36)
    compared = 0
    for _ in range(2000):
        value = _random_value(r)
        for protocol in range(6):
            data = pickle.dumps(value, protocol=protocol)
            want = pickle.loads(data)
            try:
                got = loads(data)
            except safe_pickle.RefusedPickleError as e:
                assert "the global" in str(e) and any(g in str(e) for g in (
                    "builtins.", "__builtin__.", "copyreg.", "_frombuffer")), str(e)
                continue
            assert _plain(got, True) == _plain(want, False), (protocol, value)
            compared += 1
    assert compared > 8000


@pytest.mark.parametrize("path", ["mlp/m.pdparams", "mlp/p2.pdparams", "adam/adam.pdparams", "adam/adam.pdopt"])
def test_every_prefix_and_flipped_byte_of_a_paddle_file_is_an_array_file_error(path):
    """Truncated anywhere, or one byte changed anywhere: a value or an ArrayFileError."""
    data = (PF / path).read_bytes()
    for cut in range(len(data)):
        with pytest.raises(pybackward.ArrayFileError):
            loads(data[:cut])
    r = random.Random(7)
    for at in range(len(data)):
        damaged = bytearray(data)
        damaged[at] = r.choice([0, 1, 0x7F, 0x80, 0xFF, damaged[at] ^ 0x40])
        try:
            loads(bytes(damaged))
        except pybackward.ArrayFileError:
            pass


# -- depth, cycles, changes after nesting -------------------------------------
def _get(i: int) -> bytes:
    return b"j" + struct.pack("<I", i)


@pytest.mark.parametrize("empty,fill", [
    (b"]", lambda outer, inner: _get(outer) + _get(inner) + b"a0"),
    (b"}", lambda outer, inner: _get(outer) + b"\x8c\x01k" + _get(inner) + b"s0"),
], ids=["list", "dict"])
def test_containers_nest_at_most_max_depth(empty, fill):
    """Nested lists (dicts) of `depth` levels: all made and memoized, then each put
    into the one above it, innermost first (so none changes after it is nested)."""
    def nested(depth: int) -> bytes:
        out = P4 + (empty + b"\x94" + b"0") * depth
        for i in range(depth - 1, 0, -1):
            out += fill(i - 1, i)
        return out + _get(0) + b"."
    limit = pickle_machine.MAX_DEPTH
    assert _plain(loads(nested(5)), True) == _plain(pickle.loads(nested(5)), False)
    loads(nested(limit))
    refused(nested(limit + 1), f"nested more than {limit} deep")


def test_tuples_nest_at_most_max_depth_and_a_million_deep_costs_what_it_reads():
    limit = pickle_machine.MAX_DEPTH
    assert loads(P4 + b")" + b"\x85" * (limit - 1) + b".")
    refused(P4 + b")" + b"\x85" * limit + b".", "nested more than")
    t = time.process_time()
    refused(P4 + b"}" + b")" + b"\x85" * 10**6 + b"\x8c\x01vs.", "nested more than")
    assert time.process_time() - t < 1.0


def test_a_container_cannot_change_once_it_is_inside_another():
    """So no structure holds itself, and depth recorded at nesting stays true."""
    refused(P4 + b"]\x94h\x00a.", "holds itself")
    inner_then_outer = P4 + b"]\x94" + b"]\x94" + b"h\x00a" + b"0" + b"h\x00N" + b"a."
    refused(inner_then_outer, "changed after it was put inside another")
    refused(P4 + b"}\x94" + b"h\x00\x85" + b"0" + b"h\x00\x8c\x01kNs.", "changed after")
    # A pickler's own batches (SETITEMS / APPENDS again on a container nothing holds yet) are fine.
    assert loads(pickle.dumps({str(i): i for i in range(2500)}, protocol=2))["2499"] == 2499
    assert loads(pickle.dumps([[i] for i in range(2500)], protocol=4))[-1] == [2499]


# -- memo, keys, budget ---------------------------------------------------------
@pytest.mark.parametrize("memo_id", [0, 255, 2**27, 2**30, 2**32 - 1])
def test_any_memo_id_costs_one_entry(memo_id):
    data = P4 + b"\x8c\x01a" + b"r" + struct.pack("<I", memo_id) + b"0" + b"j" + struct.pack("<I", memo_id) + b"."
    assert loads(data) == "a"
    with pytest.raises(pybackward.ArrayFileError, match="used before it is set"):
        loads(P4 + b"j" + struct.pack("<I", memo_id) + b".")


def test_dict_keys_are_names_or_a_few_numbers():
    limit = pickle_machine.MAX_FIXED_HASH_KEYS
    assert len(loads(pickle.dumps({i: None for i in range(limit)}, protocol=4))) == limit
    refused(pickle.dumps({i: None for i in range(limit + 1)}, protocol=4), "more than 1000 dict keys")
    refused(pickle.dumps({i * (2**61 - 1): None for i in range(1, 20_001)}, protocol=4), "more than 1000")
    assert len(loads(pickle.dumps({f"k{i}": i for i in range(20_000)}, protocol=4))) == 20_000
    refused(pickle.dumps({(1, 2): 3}, protocol=4), r"a dict key or set item that is \(1, 2\)")
    refused(pickle.dumps({frozenset([1]): 3}, protocol=4), "a frozenset of 1 item")


def test_shared_data_cannot_make_more_than_twice_the_file():
    """One 64 KB buffer named by 100 arrays (a DAG): 6.4 MB of arrays from 64 KB.
    And 100 000 empty sets: 216 bytes each from one byte of file."""
    raw = bytes(64 << 10)
    head = P4 + b"B" + struct.pack("<I", len(raw)) + raw + b"\x94" + b"0"
    one = head + b"}\x8c\x01a" + _array_of_memo(0, len(raw)) + b"s."
    assert safe_pickle.array_of(loads(one)["a"], "x", "a").nbytes == len(raw)
    many = head + b"}(" + b"".join(b"\x8c\x03a%02d" % i + _array_of_memo(0, len(raw)) for i in range(100)) + b"u."
    refused(many, "more memory than twice the file")
    refused(P4 + b"\x8f" * 100_000 + b".", "more memory than twice the file")


def _su(text: str) -> bytes:
    return b"\x8c" + bytes([len(text)]) + text.encode()


def _array_of_memo(memo: int, size: int) -> bytes:
    """Opcodes making a uint8 array of `size` whose data is memo entry `memo`."""
    return (_su("numpy._core.multiarray") + _su("_reconstruct") + b"\x93" + _su("numpy") + _su("ndarray") + b"\x93"
            b"K\x00\x85C\x01b\x87R(K\x01J" + struct.pack("<i", size) + b"\x85" + _su("numpy") + _su("dtype") +
            b"\x93" + _su("u1") + b"\x89\x88\x87R(K\x03" + _su("|") +
            b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89j" + struct.pack("<I", memo) + b"tb")


# -- refusals, and their messages ------------------------------------------------
def test_messages_never_print_the_files_data_unbounded():
    huge = "x" * 10**6
    msg = refused(P4 + b"cnumpy\ndtype\nX" + struct.pack("<I", len(huge)) + huge.encode() + b"\x85R.", "numpy.dtype")
    assert len(msg) < 300 and "(1000000 long)" in msg
    msg = refused(P4 + b"cnumpy\ndtype\n\x8b" + struct.pack("<i", 10**5) + b"\x01" * 10**5 + b"\x85R.",
                  "numpy.dtype")
    assert "an int of" in msg and len(msg) < 300
    msg = refused(P4 + b"c" + b"m" * 10**5 + b"\nname\n.", "the global")
    assert len(msg) < 400
    for value in (huge, huge.encode(), 10**5000, list(range(10**5)), {i: i for i in range(100)},
                  tuple(range(10)), (1, "a", None), 1.5):
        assert len(pickle_machine.describe(value)) < 200


@pytest.mark.parametrize("opcodes,why", [
    (b"cos\nsystem\n", "the global os.system"),
    (b"\x8c\x02os\x8c\x06system\x93", "the global os.system"),
    (b"ios\nsystem\n", "the global os.system"),
    (b"inumpy\ndtype\n", "with INST"),
    (b"cnumpy\ndtype\n)\x81", "NEWOBJ"),
    (b"cnumpy\ndtype\n))\x92", "NEWOBJ_EX"),
    (b"(cnumpy\ndtype\no", "OBJ"),
    (b"\x8c\x01aQ", "persistent id"),
    (b"P1\n", "persistent id"),
    (b"\x82\x01", "extension code"),
    (b"\x97", "out-of-band buffer"),
    (b"cnumpy\nndarray\n)R", "it calls numpy.ndarray"),
    (b"cnumpy\ndtype\n\x8c\x01O\x85R", r"numpy.dtype\('O'\)"),
    (b"c_codecs\nencode\n\x8c\x01a\x8c\x05utf-8\x86R", "only str to latin-1"),
])
def test_what_is_refused(opcodes, why):
    refused(P4 + opcodes + b".", why)


def test_a_pickle_of_1_mb_costs_about_a_second_whatever_its_opcodes():
    """Linear time: each opcode constant work plus its bytes (the worst streams here)."""
    n = 10**6
    for data in (P4 + b"]\x94" * (n // 2) + b"N.", P4 + b"}" * n + b".", P4 + b"(" * n + b"N.",
                 P4 + b"N\x85" * (n // 2) + b".", P4 + b"N" + b"r\xff\xff\xff\xff" * (n // 5) + b"."):
        t = time.process_time()
        loads(data)
        assert time.process_time() - t < 4.0
