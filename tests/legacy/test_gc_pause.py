"""The loader and the pass pause the cyclic collector and move what they built
to the oldest generation unwalked (`base._gc.paused_gc`); a process that loads
and drops programs in a loop still gets their cyclic garbage collected."""
from __future__ import annotations

import gc

import pytest

import pybackward
from pybackward.base import _gc

from conftest import ROOT

LENET = ROOT / "testdata" / "models" / "lenet"


def _forward_program() -> str:
    return str(LENET / "forward.pb")


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_a_loaded_programs_views_are_in_the_oldest_generation(collector_on):
    prog = pybackward.load(_forward_program())
    ops = {id(op) for op in prog.global_block().ops}
    young = {id(o) for g in (0, 1) for o in gc.get_objects(generation=g)}
    assert ops.isdisjoint(young)
    old = {id(o) for o in gc.get_objects(generation=2)}
    assert ops <= old


def _loop(n: int) -> list[int]:
    """Objects left above the start after each of n load + append + drop rounds."""
    path = _forward_program()
    gc.collect()
    base = len(gc.get_objects())
    sizes = []
    for _ in range(n):
        prog = pybackward.load(path)
        pybackward.append_backward(prog.global_block().ops[-1].output_arg_names[0], program=prog)
        del prog
        sizes.append(len(gc.get_objects()) - base)
    return sizes


def test_programs_loaded_and_dropped_in_a_loop_get_full_collections(monkeypatch, collector_on):
    """Promoted objects escape CPython's own trigger of a full collection:
    `_promote` runs one once the blocks have promoted enough."""
    real = _gc._full_collection
    calls = []
    monkeypatch.setattr(_gc, "_full_collection", lambda: calls.append(1) or real())
    monkeypatch.setattr(_gc, "MIN_GROWTH", 2000)
    monkeypatch.setattr(_gc, "_grown", 0)
    monkeypatch.setattr(_gc, "_heap_after_full", 0)
    _loop(20)
    assert calls
    monkeypatch.setattr(_gc, "MIN_GROWTH", 10**12)
    monkeypatch.setattr(_gc, "_heap_after_full", 0)
    calls.clear()
    _loop(20)
    assert not calls


def test_promote_collects_once_the_blocks_have_grown_the_heap(monkeypatch, collector_on):
    calls = []
    monkeypatch.setattr(_gc, "_full_collection", lambda: calls.append(1))
    monkeypatch.setattr(_gc, "_heap_after_full", 0)
    monkeypatch.setattr(_gc, "MIN_GROWTH", 1000)
    monkeypatch.setattr(_gc, "_grown", 0)
    _gc._promote(gc.get_count()[0])              # nothing built
    assert calls == []
    monkeypatch.setattr(_gc, "_grown", 1001)
    _gc._promote(gc.get_count()[0])
    assert len(calls) == 1 and _gc._grown == 0
