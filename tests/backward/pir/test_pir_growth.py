"""Growth guard for the PIR pass: 4x the layers may cost at most 5x the time
(the limit tests/test_growth.py sets for the legacy pass; CPU time, best of
several interleaved runs, re-measured before a ratio counts)."""
from __future__ import annotations

import sys

from conftest import ROOT
from test_growth import _assert_growth

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_pir_load import build  # noqa: E402

from pybackward import pir  # noqa: E402
from pybackward.backward.pir.api import append_backward  # noqa: E402


def _append(layers: int):
    data = pir.dumps(build(layers * 5 + 5))

    def run():
        prog = pir.loads(data)
        loss = next(op for op in reversed(prog.ops) if op.name == "pd_op.mean").results[0]
        append_backward(loss, program=prog)
        pir.dumps(prog)
    return run


def test_pir_append_load_and_write_grow_linearly():
    _assert_growth("PIR load + append_backward + write", _append(150), _append(600), repeat=3, limit=5.0)
