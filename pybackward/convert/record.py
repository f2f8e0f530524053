"""The PIR record: the original PIR program, kept inside the legacy program `to_legacy` writes,
so that `to_pir` can give it back (PIR -> legacy -> PIR canonically equal).

Paddle's translator (which `to_pir` redoes) cannot know what a PIR program had that
a legacy ProgramDesc has no place for: the order of parameters and data, `need_clip`,
`struct_name`, constants shared by several readers, `builtin.split`, in-place
`assign_value_`, `pd_op.if` / `pd_op.while` / the backward stacks in PIR form. So
`to_legacy` records the PIR program itself, and `to_pir` gives it back only when
it can prove the record still describes the legacy program it is reading: the
record, converted again by `to_legacy`, must be that legacy program exactly (every
block, var, op, slot and attribute). Any edit (an op added, removed or changed, a
var renamed, a backward section appended) breaks the proof and `to_pir` falls back
to Paddle's plain translation, never a wrong program.

Wire form: an unknown field of the `ProgramDesc` message (number `FIELD`,
length-delimited; `framework.proto` uses 1-5), holding `MAGIC` + the zlib-compressed
compact PIR JSON (`pir.dumps`). Protobuf parsers keep unknown fields aside and
nothing reads them: Paddle's legacy Executor and `load_inference_model` run and
load such programs unchanged, pybackward's legacy interpreter never sees them, and
the protobuf text format (`.pbtxt`) drops them (a text-format copy translates
plainly). The record changes no op and no var, so not what the program computes.

May import: base, legacy (the ProgramDesc), pir.
"""
from __future__ import annotations

import zlib

from google.protobuf import unknown_fields

from .._proto import framework_pb2 as pb
from ..base.errors import ArgumentError, ProgramFileError
from ..legacy.program import Program as LProgram
from ..pir import MAX_PIR_BYTES

#: The ProgramDesc field number the record is written under (Paddle's framework.proto
#: numbers its ProgramDesc fields 1-5; 34034 is far from them and below protobuf's
#: reserved 19000-19999).
FIELD = 34034
#: The record's first bytes: what it is and its format's version.
MAGIC = b"pybackward.pir-record.1\n"
_WIRE_LENGTH_DELIMITED = 2


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode(pir_json: bytes) -> bytes:
    """The record's payload for a PIR program's JSON bytes."""
    return MAGIC + zlib.compress(pir_json, 9)


def attach(legacy: LProgram, pir_json: bytes) -> None:
    """Write the record of a PIR program (its JSON bytes) into `legacy`'s ProgramDesc (one
    that has none yet: `to_legacy`'s fresh program). Changes no block, var or op: the
    field goes after every other one, so the bytes before it are the program's own."""
    if records(legacy):
        raise ArgumentError("the legacy program already carries a PIR record")
    legacy.desc.MergeFromString(wire_field(encode(pir_json)))


def wire_field(payload: bytes) -> bytes:
    """The wire bytes of a record field holding `payload` (tag, length, payload)."""
    return _varint(FIELD << 3 | _WIRE_LENGTH_DELIMITED) + _varint(len(payload)) + payload


def records(legacy: LProgram) -> list[bytes]:
    """The payloads of every record field in `legacy`'s ProgramDesc (normally none or one)."""
    return [bytes(f.data) for f in unknown_fields.UnknownFieldSet(legacy.desc)
            if f.field_number == FIELD and f.wire_type == _WIRE_LENGTH_DELIMITED]


def has_record(legacy: LProgram) -> bool:
    """Whether `legacy` carries a PIR record (whether or not it still fits the program)."""
    return bool(records(legacy))


class RecordError(ProgramFileError):
    """A record that cannot be read (not one of ours, corrupt, too large): ignored by `to_pir`."""


def decode(payload: bytes) -> bytes:
    """The PIR JSON bytes of a record's payload (RecordError when it is not a readable record)."""
    if not payload.startswith(MAGIC):
        raise RecordError("not a pybackward PIR record (unknown header)")
    d = zlib.decompressobj()
    try:
        data = d.decompress(payload[len(MAGIC):], MAX_PIR_BYTES + 1)
    except zlib.error as e:
        raise RecordError(f"corrupt PIR record ({e})") from None
    if len(data) > MAX_PIR_BYTES or d.unconsumed_tail:
        raise RecordError(f"PIR record past {MAX_PIR_BYTES} bytes")
    if not d.eof:
        raise RecordError("truncated PIR record")
    return data


def program_without_records(legacy: LProgram) -> bytes:
    """`legacy`'s ProgramDesc bytes with no unknown fields anywhere (deterministic), to compare
    two programs for what Paddle reads of them."""
    desc = pb.ProgramDesc()
    desc.CopyFrom(legacy.desc)
    desc.DiscardUnknownFields()
    return desc.SerializeToString(deterministic=True)
