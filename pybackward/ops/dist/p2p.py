"""Point-to-point and partial collectives, and the parameter server's fetch barrier.

The interpreter runs a world of one process (ops/dist/collective.py). In that world:

* a send or receive has no peer: p_send, p_recv, p_send_array, p_recv_array,
  send_v2, recv_v2, partial_send and partial_recv have no kernel, and the
  interpreter's one-line error says why (`OpDef.no_kernel`). Paddle 3.3.1's
  CPU kernels for them only raise too ("Do not support send for cpu kernel
  now", ...; testdata/kernels/probe_k4-io.txt), so none is owed;
* partial_allgather gathers the ranks' slices of X (rank r holds slice r of
  the flattened X, split in nranks parts) into Out of X's shape. Over one rank
  (nranks 1) its own slice is all of X: Out = X. Paddle refuses nranks 1 in
  its shape inference ("The value of nranks should be >=2") and its CPU kernel
  refuses any nranks, so it never runs this op on CPU; pybackward runs the
  world-of-one case and refuses a larger world (docs/deviations.md);
* fetch_barrier waits for the parameter servers; Paddle's op does nothing at
  all ("FetchBarrier Sync, do not need now") and leaves Out unwritten, and so
  does pybackward.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register


_NO_PEER = ("pybackward runs a world of one process, so there is no peer process to {} (a pipeline-parallel "
            "program needs its peer stage's process)")
for _t in ("p_send", "p_send_array", "send_v2", "partial_send", "p_recv", "p_recv_array", "recv_v2", "partial_recv"):
    register(paddle_opdef(_t, None, no_kernel=_NO_PEER.format("send to" if "send" in _t else "receive from"),
                          doc="point-to-point: no kernel, a world of one process has no peer"))


def _partial_allgather(c: Call):
    n = c.attr("nranks")
    if n != 1:
        raise c.unsupported("nranks", n, "pybackward runs a world of one process; gathering the slices of "
                                         "other ranks needs their processes")
    rank = c.attr("rank", 0)
    if rank != 0:
        raise ExecutionError(f"op {c.op_type}: rank {rank} is outside a world of nranks 1 (only rank 0)")
    x = c.x("X")
    if x is None:
        raise ExecutionError(f"op {c.op_type}: input 'X' has no value")
    return {"Out": np.array(x, copy=True)}


def _allgather_samples(rng):
    return [Sample({"X": [rng.standard_normal((2, 3))]}, {"nranks": 1, "rank": 0}, note="one rank: Out = X"),
            Sample({"X": [np.arange(5, dtype=np.int64)]}, {"nranks": 1, "rank": 0, "ring_id": 2},
                   note="int64, another ring")]


register(paddle_opdef("partial_allgather", _partial_allgather, samples=_allgather_samples,
                      attrs_handled=("nranks", "rank"),
                      doc="over one rank (nranks 1): its slice is all of X, Out = X; larger worlds refused"))


def _fetch_barrier(c: Call):
    return {}


register(paddle_opdef("fetch_barrier", _fetch_barrier,
                      doc="does nothing (as Paddle's op: Out stays unwritten)"))
