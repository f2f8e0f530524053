"""What the fuzzers share: seed programs, byte-level and structural mutations,
and the load -> append -> run pipeline with its one rule: every failure is a
`pybackward.PyBackwardError`.

Used by tests/test_fuzz.py (Hypothesis, bounded, deterministic) and by
fuzz/fuzz_program.py (atheris, for long local runs). Needs no atheris.

Mutations draw their choices from a `Chooser`, so Hypothesis (`data.draw`)
and atheris (`FuzzedDataProvider`) drive the same code.
"""
from __future__ import annotations

import dataclasses
import json
import signal
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "testdata" / "programs"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pybackward  # noqa: E402
from pybackward._proto import framework_pb2 as pb  # noqa: E402

#: Seconds one input may take (load + append + run) before it counts as a hang.
TIMEOUT = int(__import__("os").environ.get("PYBACKWARD_FUZZ_TIMEOUT", 20))


class Chooser(Protocol):
    def int(self, lo: int, hi: int) -> int: ...          # inclusive
    def bytes(self, n: int) -> bytes: ...


def choice(ch: Chooser, seq):
    return seq[ch.int(0, len(seq) - 1)]


# --------------------------------------------------------------------------
# Seeds
# --------------------------------------------------------------------------
@dataclasses.dataclass
class Seed:
    name: str
    data: bytes
    text: bytes
    loss: str
    params: dict[str, np.ndarray]
    feeds: dict[str, np.ndarray]


_SEEDS: list[Seed] | None = None


def seeds() -> list[Seed]:
    """Every testdata/programs/*/forward.pb with its loss, params and feeds."""
    global _SEEDS
    if _SEEDS is None:
        out = []
        for d in sorted(PROGRAMS.iterdir()):
            f = d / "forward.pb"
            if not f.exists() or not (d / "case.json").exists():
                continue
            loss = json.loads((d / "case.json").read_text()).get("loss")
            params = dict(np.load(d / "params.npz")) if (d / "params.npz").exists() else {}
            feeds = dict(np.load(d / "feeds.npz")) if (d / "feeds.npz").exists() else {}
            text = (d / "forward.pbtxt").read_bytes() if (d / "forward.pbtxt").exists() else b""
            out.append(Seed(d.name, f.read_bytes(), text, loss, params, feeds))
        _SEEDS = out
    return _SEEDS


_HOSTILE: list[Seed] | None = None


def hostile_seeds() -> list[Seed]:
    """Programs from issue #20 (hostile inputs found by probing), as seeds:
    each is refused cleanly or handled as is (`HOSTILE_OUTCOMES`), and their
    mutants must fail as cleanly as any other."""
    global _HOSTILE
    if _HOSTILE is None:
        fit = PROGRAMS / "fit_a_line"
        params, feeds = dict(np.load(fit / "params.npz")), dict(np.load(fit / "feeds.npz"))
        loss = "mean_0.tmp_0"

        def edited(edit, source: Path = fit / "forward.pb") -> bytes:
            d = pb.ProgramDesc()
            d.ParseFromString(source.read_bytes())
            edit(d, {v.name: v for v in d.blocks[0].vars})
            return d.SerializeToString()

        def repeated(d, vs):                 # sum(X=[s0] * 1001): past MAX_REPEATS_IN_SLOT
            op = d.blocks[0].ops[3]
            op.type = "sum"
            op.inputs[0].arguments[:] = ["square_error_cost_0.tmp_0"] * 1001

        def complex_loss(d, vs):
            vs[loss].type.dense_tensor.tensor.data_type = pb.VarType.COMPLEX64

        def array_loss(d, vs):
            v = vs[loss]
            v.type.type = pb.VarType.DENSE_TENSOR_ARRAY
            v.type.tensor_array.tensor.CopyFrom(v.type.dense_tensor.tensor)
            v.type.ClearField("dense_tensor")

        def int_bias(d, vs):
            vs["fc_0.b_0"].type.dense_tensor.tensor.data_type = pb.VarType.INT32

        def step0(d, vs):                    # a while whose counter steps by 0
            for op in d.blocks[1].ops:
                if op.type == "increment":
                    for a in op.attrs:
                        if a.name == "step":
                            a.f = 0.0
        wl = PROGRAMS / "while_loop"
        _HOSTILE = [
            Seed("hostile_repeated_1001", edited(repeated), b"", loss, params, feeds),
            Seed("hostile_complex_loss", edited(complex_loss), b"", loss, params, feeds),
            Seed("hostile_array_loss", edited(array_loss), b"", loss, params, feeds),
            Seed("hostile_int_bias", edited(int_bias), b"", loss, params, feeds),
            Seed("hostile_backward_again", (fit / "backward.pb").read_bytes(), b"", loss, params, feeds),
            Seed("hostile_while_never_ends", edited(step0, wl / "forward.pb"), b"",
                 json.loads((wl / "case.json").read_text())["loss"],
                 dict(np.load(wl / "params.npz")), dict(np.load(wl / "feeds.npz"))),
        ]
    return _HOSTILE


#: Where each hostile seed, unmutated, stops (stage, error class; "ok": it works).
HOSTILE_OUTCOMES = {
    "hostile_repeated_1001": ("append", "ArgumentError"),
    "hostile_complex_loss": ("append", "ArgumentError"),
    "hostile_array_loss": ("append", "ArgumentError"),
    "hostile_int_bias": ("ok", None),               # skipped with a warning; the rest runs
    "hostile_backward_again": ("ok", None),         # the library appends twice, as Paddle does
    "hostile_while_never_ends": ("run", "ExecutionLimitError"),
}


def all_seeds() -> list[Seed]:
    """The seeds mutations start from: the golden programs and the hostile ones."""
    return seeds() + hostile_seeds()


#: The step limit for `while` ops under fuzzing (a runaway loop is a clean
#: ExecutionLimitError quickly, not a hang).
MAX_WHILE_STEPS = 1000


# --------------------------------------------------------------------------
# Byte-level mutations
# --------------------------------------------------------------------------
BYTE_MUTATIONS = ("flip", "set", "insert", "delete", "truncate", "duplicate", "splice", "varint")


def mutate_bytes(ch: Chooser, data: bytes, rounds: int | None = None) -> tuple[bytes, list[str]]:
    buf = bytearray(data)
    log = []
    for _ in range(ch.int(1, 4) if rounds is None else rounds):
        kind = choice(ch, BYTE_MUTATIONS)
        n = len(buf)
        pos = ch.int(0, max(0, n - 1))
        if kind == "flip" and n:
            buf[pos] ^= 1 << ch.int(0, 7)
        elif kind == "set" and n:
            buf[pos] = ch.int(0, 255)
        elif kind == "insert":
            buf[pos:pos] = ch.bytes(ch.int(1, 8))
        elif kind == "delete" and n:
            del buf[pos:pos + ch.int(1, 16)]
        elif kind == "truncate":
            del buf[pos:]
        elif kind == "duplicate" and n:
            k = ch.int(1, 64)
            buf[pos:pos] = buf[pos:pos + k]
        elif kind == "splice" and n:
            other = choice(ch, seeds()).data
            a = ch.int(0, max(0, len(other) - 1))
            buf[pos:pos + ch.int(0, 64)] = other[a:a + ch.int(1, 64)]
        elif kind == "varint" and n:
            # A huge varint (a length, a count, an enum) where a byte was.
            buf[pos:pos + 1] = bytes([0xFF] * ch.int(1, 9) + [ch.int(0, 127)])
        log.append(f"{kind}@{pos}")
    return bytes(buf), log


# --------------------------------------------------------------------------
# Structural mutations (on the parsed ProgramDesc)
# --------------------------------------------------------------------------
def _messages(desc: pb.ProgramDesc) -> list[Any]:
    out: list[Any] = [desc]
    for b in desc.blocks:
        out.append(b)
        for v in b.vars:
            out += [v, v.type]
            for f in ("dense_tensor", "tensor_array"):
                if v.type.HasField(f):
                    out += [getattr(v.type, f), getattr(v.type, f).tensor]
        for op in b.ops:
            out.append(op)
            out += list(op.inputs) + list(op.outputs) + list(op.attrs)
    return out


def _all_ops(desc):
    return [(b, i, op) for b in desc.blocks for i, op in enumerate(b.ops)]


def _all_vars(desc):
    return [(b, v) for b in desc.blocks for v in b.vars]


def _var_names(desc) -> list[str]:
    return sorted({v.name for _, v in _all_vars(desc)}) or ["x"]


def _tensor(v):
    for f in ("dense_tensor", "tensor_array"):
        if v.type.HasField(f):
            return getattr(v.type, f).tensor
    return None


INTERESTING_INTS = [-2**31, -2**31 + 1, -7, -2, -1, 0, 1, 2, 3, 7, 64, 2**31 - 1]
INTERESTING_LONGS = INTERESTING_INTS + [2**40, 2**62, -2**63]
INTERESTING_FLOATS = [0.0, -0.0, 1.0, -1.0, 1e-30, 1e30, float("inf"), float("-inf"), float("nan")]


def _op_types() -> list[str]:
    from pybackward.ops import registry
    return sorted(registry.all_ops()) + ["frobnicate", ""]


def m_drop_field(ch, desc):
    msgs = [m for m in _messages(desc) if m.ListFields()]
    m = choice(ch, msgs)
    field = choice(ch, [f.name for f, _ in m.ListFields()])
    m.ClearField(field)
    return f"drop {type(m).__name__}.{field}"


def m_swap_slots(ch, desc):
    ops = [op for _, _, op in _all_ops(desc) if len(op.inputs) + len(op.outputs) >= 2]
    if not ops:
        return "noop"
    op = choice(ch, ops)
    slots = list(op.inputs) + list(op.outputs)
    a, b = choice(ch, slots), choice(ch, slots)
    a.parameter, b.parameter = b.parameter, a.parameter
    return f"swap slots {a.parameter}/{b.parameter} of {op.type}"


def m_swap_args(ch, desc):
    ops = [op for _, _, op in _all_ops(desc) if any(s.arguments for s in list(op.inputs) + list(op.outputs))]
    if not ops:
        return "noop"
    op = choice(ch, ops)
    slot = choice(ch, [s for s in list(op.inputs) + list(op.outputs) if s.arguments])
    i = ch.int(0, len(slot.arguments) - 1)
    slot.arguments[i] = choice(ch, _var_names(desc) + ["@EMPTY@", "ghost", slot.arguments[i] + "@GRAD"])
    return f"arg {slot.parameter}[{i}] of {op.type} -> {slot.arguments[i]}"


def m_change_dim(ch, desc):
    ts = [(v, t) for _, v in _all_vars(desc) if (t := _tensor(v)) is not None]
    if not ts:
        return "noop"
    v, t = choice(ch, ts)
    k = ch.int(0, 2)
    if k == 0 and t.dims:
        t.dims[ch.int(0, len(t.dims) - 1)] = choice(ch, INTERESTING_LONGS)
    elif k == 1:
        t.dims.append(choice(ch, [1, 2, 3, -1]))
    elif t.dims:
        del t.dims[-1]
    return f"dims of {v.name} -> {list(t.dims)}"


def m_change_dtype(ch, desc):
    ts = [(v, t) for _, v in _all_vars(desc) if (t := _tensor(v)) is not None]
    if not ts:
        return "noop"
    v, t = choice(ch, ts)
    t.data_type = choice(ch, [pb.VarType.BOOL, pb.VarType.INT32, pb.VarType.INT64, pb.VarType.FP16,
                              pb.VarType.FP32, pb.VarType.FP64, pb.VarType.BF16, pb.VarType.COMPLEX64,
                              pb.VarType.UINT8, pb.VarType.FP8_E4M3FN])
    return f"dtype of {v.name} -> {t.data_type}"


def m_rename_var(ch, desc):
    vs = _all_vars(desc)
    if not vs:
        return "noop"
    b, v = choice(ch, vs)
    old = v.name
    new = choice(ch, _var_names(desc) + [old + "_renamed", old + "@GRAD", "@EMPTY@", ""])
    everywhere = ch.int(0, 1)
    v.name = new
    if everywhere:
        for _, _, op in _all_ops(desc):
            for s in list(op.inputs) + list(op.outputs):
                for i, a in enumerate(s.arguments):
                    if a == old:
                        s.arguments[i] = new
    return f"rename {old} -> {new}{' everywhere' if everywhere else ''}"


def m_point_sub_block(ch, desc):
    attrs = [a for _, _, op in _all_ops(desc) for a in op.attrs
             if a.type in (pb.AttrType.BLOCK, pb.AttrType.BLOCKS)]
    n = len(desc.blocks)
    if not attrs:
        op = choice(ch, [op for _, _, op in _all_ops(desc)] or [None])
        if op is None:
            return "noop"
        a = op.attrs.add(name="sub_block", type=pb.AttrType.BLOCK, block_idx=ch.int(-1, n))
        return f"add sub_block {a.block_idx} to {op.type}"
    a = choice(ch, attrs)
    if a.type == pb.AttrType.BLOCK:
        a.block_idx = ch.int(-2, n + 1)
        return f"sub_block -> {a.block_idx}"
    if a.blocks_idx:
        a.blocks_idx[0] = ch.int(-2, n + 1)
    return "blocks_idx changed"


def m_change_parent(ch, desc):
    if not desc.blocks:
        return "noop"
    b = choice(ch, list(desc.blocks))
    k = ch.int(0, 2)
    n = len(desc.blocks)
    if k == 0:
        b.parent_idx = ch.int(-2, n)
    elif k == 1:
        b.forward_block_idx = ch.int(-2, n)
    else:
        b.idx = ch.int(-1, n)
    return f"block {b.idx} parent/forward/idx changed"


def m_change_op_type(ch, desc):
    ops = _all_ops(desc)
    if not ops:
        return "noop"
    _, _, op = choice(ch, ops)
    old = op.type
    op.type = choice(ch, _op_types())
    return f"op {old} -> {op.type}"


def m_change_attr(ch, desc):
    attrs = [(op, a) for _, _, op in _all_ops(desc) for a in op.attrs
             if a.name not in ("op_callstack", "op_namescope")]
    if not attrs:
        return "noop"
    op, a = choice(ch, attrs)
    t = a.type
    if t == pb.AttrType.INT:
        a.i = choice(ch, INTERESTING_INTS)
    elif t == pb.AttrType.LONG:
        a.l = choice(ch, INTERESTING_LONGS)
    elif t == pb.AttrType.FLOAT:
        a.f = choice(ch, INTERESTING_FLOATS)
    elif t == pb.AttrType.FLOAT64:
        a.float64 = choice(ch, INTERESTING_FLOATS)
    elif t == pb.AttrType.BOOLEAN:
        a.b = not a.b
    elif t == pb.AttrType.STRING:
        a.s = choice(ch, ["", "NCHW", "NHWC", "x" * 100, "\u00e9"])
    elif t == pb.AttrType.INTS:
        del a.ints[:]
        a.ints.extend(choice(ch, INTERESTING_INTS) for _ in range(ch.int(0, 4)))
    elif t == pb.AttrType.LONGS:
        del a.longs[:]
        a.longs.extend(choice(ch, INTERESTING_LONGS) for _ in range(ch.int(0, 4)))
    elif t == pb.AttrType.FLOATS:
        del a.floats[:]
        a.floats.extend(choice(ch, INTERESTING_FLOATS) for _ in range(ch.int(0, 3)))
    else:
        # Give the attr another type: the kernel must not trust the name.
        a.type = choice(ch, [pb.AttrType.INT, pb.AttrType.STRING, pb.AttrType.FLOATS, pb.AttrType.BOOLEAN])
    return f"attr {a.name} of {op.type} changed"


def m_ops_order(ch, desc):
    if not desc.blocks:
        return "noop"
    b = choice(ch, list(desc.blocks))
    n = len(b.ops)
    if n == 0:
        return "noop"
    k = ch.int(0, 2)
    i = ch.int(0, n - 1)
    if k == 0:
        del b.ops[i]
        return f"delete op {i} of block {b.idx}"
    if k == 1:
        b.ops.add().CopyFrom(b.ops[i])
        return f"duplicate op {i} of block {b.idx}"
    j = ch.int(0, n - 1)
    a, c = pb.OpDesc(), pb.OpDesc()
    a.CopyFrom(b.ops[i])
    c.CopyFrom(b.ops[j])
    b.ops[i].CopyFrom(c)
    b.ops[j].CopyFrom(a)
    return f"swap ops {i},{j} of block {b.idx}"


def m_flags(ch, desc):
    vs = _all_vars(desc)
    if not vs:
        return "noop"
    _, v = choice(ch, vs)
    f = choice(ch, ["stop_gradient", "persistable", "is_parameter", "need_check_feed"])
    setattr(v, f, not getattr(v, f))
    return f"{f} of {v.name} flipped"


def m_var_type(ch, desc):
    vs = _all_vars(desc)
    if not vs:
        return "noop"
    _, v = choice(ch, vs)
    v.type.type = choice(ch, [pb.VarType.DENSE_TENSOR, pb.VarType.SELECTED_ROWS, pb.VarType.DENSE_TENSOR_ARRAY,
                              pb.VarType.STEP_SCOPES, pb.VarType.FEED_MINIBATCH, pb.VarType.RAW,
                              pb.VarType.READER])
    return f"var type of {v.name} -> {v.type.type}"


def m_add_block(ch, desc):
    n = len(desc.blocks)
    b = desc.blocks.add(idx=n, parent_idx=ch.int(-1, n))
    if desc.blocks[0].ops and ch.int(0, 1):
        b.ops.add().CopyFrom(desc.blocks[0].ops[ch.int(0, len(desc.blocks[0].ops) - 1)])
    return f"add block {n}"


STRUCTURAL: dict[str, Callable] = {
    "drop_field": m_drop_field, "swap_slots": m_swap_slots, "swap_args": m_swap_args,
    "change_dim": m_change_dim, "change_dtype": m_change_dtype, "rename_var": m_rename_var,
    "point_sub_block": m_point_sub_block, "change_parent": m_change_parent,
    "change_op_type": m_change_op_type, "change_attr": m_change_attr, "ops_order": m_ops_order,
    "flags": m_flags, "var_type": m_var_type, "add_block": m_add_block,
}


def mutate_structure(ch: Chooser, data: bytes, rounds: int | None = None) -> tuple[bytes, list[str]]:
    desc = pb.ProgramDesc()
    desc.ParseFromString(data)
    log = []
    for _ in range(ch.int(1, 3) if rounds is None else rounds):
        name = choice(ch, list(STRUCTURAL))
        log.append(STRUCTURAL[name](ch, desc))
    return desc.SerializePartialToString(), log


# --------------------------------------------------------------------------
# The pipeline
# --------------------------------------------------------------------------
class InvalidOutput(AssertionError):
    """append_backward succeeded, but the program it wrote does not load."""


class Hang(BaseException):
    """An input took longer than TIMEOUT seconds."""


def _alarm(signum, frame):
    raise Hang(f"no result after {TIMEOUT} s")


#: Known bugs the fuzzers keep finding, each with its strict-xfail test. An
#: exception matching one is counted, not failed, so the fuzz tests stay a
#: guard against *new* crash kinds. Remove an entry when its bug is fixed.
KNOWN_BUGS: dict[str, str] = {
    "kernel-error-escapes": "interpreter: a kernel's AttributeError/MemoryError is not turned into "
                            "ExecutionError (bad_inputs: grad_op_input_empty, op_missing_input_slot, "
                            "absurd_fill_constant)",
    "error-formatter": "interpreter: np.shape on ragged list inputs raises inside the kernel-error "
                       "handler (bad_inputs: kernel_error_ragged_inputs)",
    "recursion": "RecursionError on deeply nested sub-blocks (bad_inputs: deep_subblocks_*)",
    "dtype-without-numpy": "Variable.dtype raises KeyError for BF16/FP8/SIZE_T "
                           "(bad_inputs: feed_dtype_without_numpy)",
    "sub-block-attr-type": "a sub_block attr that is not a BLOCK: control_flow._grad_block int('') "
                           "(bad_inputs: sub_block_attr_not_block)",
    "required-fields": "required fields unchecked at load: an attr without its type reaches "
                       "attrs.encode (bad_inputs: attr_without_type)",
    "attr-wrong-type": "pybackward trusts the AttrType of op_role_var/op_device (bad_inputs: "
                       "attr_of_wrong_type)",
    "non-utf8-names": "names that are not UTF-8 come back from upb as bytes and meet str inside the "
                      "pass (bad_inputs: non_utf8_attr_name)",
    "invalid-output": "append accepted ops with a sub_block attr they do not run, or control-flow "
                      "ops with swapped slots, and wrote a program its loader rejects (fixed: refused "
                      "at load / by guards.check_declared; bad_inputs: sub_block_on_plain_op, "
                      "cond_slots_swapped)",
}


def _frames(exc: BaseException) -> list[str]:
    return [f"{Path(f.filename).parent.name}/{Path(f.filename).name}:{f.name}"
            for f in traceback.extract_tb(exc.__traceback__)]


def known_bug(exc: BaseException) -> str | None:
    """The KNOWN_BUGS key an unexpected exception matches, or None."""
    files = _frames(exc)
    last = files[-1] if files else ""
    in_run_block = any(f.endswith("interpreter.py:_run_block") for f in files)
    if isinstance(exc, Hang):
        return None
    if isinstance(exc, RecursionError):
        return "recursion"
    if isinstance(exc, InvalidOutput):
        return "invalid-output"
    if in_run_block and isinstance(exc, (AttributeError, MemoryError)) and any(
            f.startswith("ops/") for f in files):
        return "kernel-error-escapes"
    if in_run_block and isinstance(exc, ValueError) and exc.__context__ is not None \
            and "inhomogeneous" in str(exc):
        return "error-formatter"
    if isinstance(exc, KeyError) and last.endswith("dtypes.py:to_numpy"):
        return "dtype-without-numpy"
    if isinstance(exc, ValueError) and last.endswith("control_flow.py:_grad_block"):
        return "sub-block-attr-type"
    if isinstance(exc, TypeError) and last.endswith("attrs.py:encode"):
        return "required-fields"
    if isinstance(exc, TypeError) and last.endswith("api.py:_params_and_grads"):
        return "attr-wrong-type"
    if isinstance(exc, TypeError) and "bytes" in str(exc):
        return "non-utf8-names"
    return None


@dataclasses.dataclass
class Outcome:
    stage: str          # "load", "append", "save", "run", "ok"
    error: str | None   # the PyBackwardError class, when the stage rejected the input
    known_bug: str | None = None


def exercise(data: bytes, seed: Seed, text: bool = False, run: bool = True) -> Outcome:
    """load -> append_backward -> dumps -> run; only PyBackwardError may come out.

    Raises the first other exception (a bug) unless it matches KNOWN_BUGS, and
    `Hang` past TIMEOUT seconds.
    """
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIMEOUT)
    stage = "load"
    try:
        try:
            prog = pybackward.loads(data, source="fuzz.pb", text=text)
            stage = "append"
            loss = seed.loss
            if not any(loss in b.vars for b in prog.blocks):
                floats = [n for n, v in prog.global_block().vars.items() if v.dtype is not None
                          and v.dtype.kind == "f"]
                loss = floats[-1] if floats else loss
            with warnings.catch_warnings():     # int parameters skipped: expected, not a failure
                warnings.simplefilter("ignore", pybackward.PyBackwardWarning)
                pairs = pybackward.append_backward(loss, program=prog)
            stage = "save"
            out = pybackward.dumps(prog)
            try:
                pybackward.loads(out)
            except pybackward.PyBackwardError as e:
                raise InvalidOutput(f"append_backward wrote a program its own loader rejects: {e}") from None
            if not run:
                return Outcome("ok", None)
            stage = "run"
            from pybackward.interpreter.executor import Executor, Scope
            scope = Scope()
            for k, v in seed.params.items():
                scope.set(k, v)
            fetch = [loss] + [g.name for _, g in pairs if g is not None]
            Executor(max_while_steps=MAX_WHILE_STEPS).run(prog, feed=seed.feeds, fetch_list=fetch, scope=scope)
            return Outcome("ok", None)
        except pybackward.PyBackwardError as e:
            return Outcome(stage, type(e).__name__)
        except (Exception, Hang) as e:
            bug = known_bug(e)
            if bug is None:
                raise
            return Outcome(stage, type(e).__name__, bug)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


class RandomChooser:
    """A Chooser over a numpy Generator (for quick local loops)."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def int(self, lo, hi):
        return int(self.rng.integers(lo, hi + 1))

    def bytes(self, n):
        return self.rng.bytes(n)
