"""Point-to-point ops are refused in a world of one process; partial_allgather over one rank is the
identity; fetch_barrier does nothing (ops/dist/p2p.py). Paddle's own behaviour on CPU is recorded in
testdata/kernels/probe_k4-io.txt / io_ops.ref.json (testdata/kernels/probe_k4-io.py)."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

import pybackward
from pybackward.base.errors import ExecutionError
from pybackward.interpreter.executor import Executor, Scope
from pybackward.ops import opcheck
from conftest import TESTDATA

PROBE = (TESTDATA / "kernels" / "probe_k4-io.txt").read_text()
REF = json.loads((TESTDATA / "kernels" / "io_ops.ref.json").read_text())

SENDS = {"p_send": "x", "p_send_array": "x", "send_v2": "X", "partial_send": "X"}
RECVS = {"p_recv": "out", "p_recv_array": "out", "recv_v2": "Out", "partial_recv": "Out"}


@pytest.mark.parametrize("op", sorted(SENDS) + sorted(RECVS))
def test_paddle_cannot_run_point_to_point_ops_on_cpu(op):
    line = re.search(rf"^{op}: (.*)$", PROBE, re.M).group(1)
    assert "RUNS" not in line
    assert "for cpu kernel now" in line or "DataType should be indicated" in line, line


def _program(op, ins, outs, attrs):
    prog = pybackward.Program()
    b = prog.global_block()
    for n in [*ins.values(), *outs.values()]:
        b.create_var(n, shape=(2, 3), dtype="float32")
    b.append_op(op, {s: [n] for s, n in ins.items()}, {s: [n] for s, n in outs.items()}, attrs)
    return pybackward.loads(prog.to_bytes())


@pytest.mark.parametrize("op", sorted(SENDS) + sorted(RECVS))
def test_point_to_point_ops_are_refused_in_one_line_saying_why(op):
    """No kernel (none is owed: Paddle cannot run them on CPU either), and the
    error says so, and why: a world of one process has no peer."""
    ins = {SENDS[op]: "x"} if op in SENDS else {}
    outs = {RECVS[op]: "o"} if op in RECVS else ({"out": "o"} if op == "p_send_array" else {})
    verb = "send to" if op in SENDS else "receive from"
    with pytest.raises(ExecutionError) as e:
        Executor().run(_program(op, ins, outs, {"peer": 1, "ring_id": 2}),
                       feed={"x": np.ones((2, 3), np.float32)} if ins else None, scope=Scope())
    msg = str(e.value)
    assert "\n" not in msg
    assert re.search(rf"op 0 \({op}\): no kernel for op type '{op}' .*; Paddle 3.3.1 has no CPU kernel for this "
                     rf"op either; pybackward runs a world of one process, so there is no peer process to {verb}",
                     msg), msg


def test_partial_allgather_over_one_rank_is_the_identity():
    x = np.arange(6.0).reshape(2, 3)
    got = opcheck.run_kernel("partial_allgather", {"X": [x]}, {"nranks": 1, "rank": 0}, {"Out": ["o"]})["Out"][0]
    assert np.array_equal(got, x) and got is not x


def test_partial_allgather_needs_peers_beyond_one_rank_as_paddle_on_cpu():
    assert "Do not support partial_allgather for cpu kernel now" in REF["partial_allgather"]["error"] or \
        "nranks should be >=2" in REF["partial_allgather"]["error"]
    with pytest.raises(ExecutionError, match=r"attr nranks=2 is not supported \(pybackward runs a world of one"):
        opcheck.run_kernel("partial_allgather", {"X": [np.ones(4)]}, {"nranks": 2, "rank": 1}, {"Out": ["o"]})
    with pytest.raises(ExecutionError, match="rank 1 is outside a world of nranks 1"):
        opcheck.run_kernel("partial_allgather", {"X": [np.ones(4)]}, {"nranks": 1, "rank": 1}, {"Out": ["o"]})


def test_fetch_barrier_does_nothing_as_paddle():
    assert re.search(r"^fetch_barrier: RUNS", PROBE, re.M)
    prog = _program("fetch_barrier", {"X": "x"}, {"Out": "o"}, {"trainer_id": 0, "endpoints": ["127.0.0.1:6170"]})
    scope = Scope()
    Executor().run(prog, feed={"x": np.ones((2, 3), np.float32)}, scope=scope)
    with pytest.raises(ExecutionError, match="cannot fetch: no op computed it"):
        Executor().run(prog, feed={"x": np.ones((2, 3), np.float32)}, fetch_list=["o"], scope=Scope())
