"""benchmarks/bench_lower_bound.py measures what it says it measures.

The script's figures close issue #19's floor targets as out of reach for
pure Python, so its bound must do the work it claims: read every op's slots,
and write one grad op per forward op and one grad var per var read, into a
program the protobuf runtime parses. A bound that quietly did less would be
a lower bound on nothing.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import pybackward
from pybackward._proto import framework_pb2 as pb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_lower_bound as lb  # noqa: E402


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    work = tmp_path_factory.mktemp("bound")
    main, _ = lb.bb.build_fc_mlp(4)
    src, out = work / "in.pb", work / "out.pb"
    pybackward.save(main, src)
    prog = pybackward.load(src)
    pybackward.append_backward(lb.bb.LOSS, program=prog)
    pybackward.save(prog, out)
    return work, src, out


def _bound(work: Path, src: Path, out: Path, mode: str) -> tuple[pb.ProgramDesc, float]:
    dst = work / f"{mode}.pb"
    r = subprocess.run([sys.executable, "-c", lb.BOUND, str(src), str(dst), mode, str(out), lb.PB2],
                       capture_output=True, text=True, check=True)
    d = pb.ProgramDesc()
    d.ParseFromString(dst.read_bytes())
    return d, float(r.stdout.split()[-1])


def test_make_writes_one_grad_op_per_forward_op_and_the_grad_vars(programs):
    work, src, out = programs
    fwd = pb.ProgramDesc()
    fwd.ParseFromString(src.read_bytes())
    d, seconds = _bound(work, src, out, "make")
    assert seconds > 0
    n = len(fwd.blocks[0].ops)
    ops = d.blocks[0].ops
    assert len(ops) == 2 * n
    first = {}   # the attrs the bound serialises once per type: the first such op's
    for op in fwd.blocks[0].ops:
        first.setdefault(op.type, list(op.attrs))
    # the grad ops, in reverse order of their forward ops
    for fwd_op, grad_op in zip(reversed(fwd.blocks[0].ops), ops[n:]):
        assert grad_op.type == fwd_op.type + "_grad"
        assert list(grad_op.attrs) == first[fwd_op.type]
        assert [s.parameter for s in grad_op.outputs] == [s.parameter + "@GRAD" for s in fwd_op.inputs]
    read = {a for op in fwd.blocks[0].ops for s in op.inputs for a in s.arguments}
    names = {v.name for v in d.blocks[0].vars}
    assert {a + "@GRAD" for a in read} <= names


@pytest.mark.parametrize("mode", ["floor", "read", "imports"])
def test_the_other_rows_write_the_stand_in_output(programs, mode):
    work, src, out = programs
    d, _ = _bound(work, src, out, mode)
    assert d.SerializeToString() == out.read_bytes()
