"""Fuzzing the array-file readers: mutated Paddle pickles, .npz archives and
Paddle tensor files are read as arrays or refused with an ArrayFileError, in
bounded time and memory (fuzz/filefuzz.py; fuzz/fuzz_files.py is the atheris
harness for long runs).

Bounded and deterministic: max_examples fixed (PYBACKWARD_FUZZ_EXAMPLES,
200 by default, is split over the three kinds), derandomize=True, no example
database. Any other exception fails, and so does a read past
filefuzz.TIMEOUT seconds or past the memory the file's size bounds.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

FUZZ_DIR = Path(__file__).resolve().parent.parent.parent / "fuzz"
sys.path.insert(0, str(FUZZ_DIR))
import filefuzz  # noqa: E402

EXAMPLES = max(1, int(os.environ.get("PYBACKWARD_FUZZ_EXAMPLES", 200)) // 2)
filefuzz.TIMEOUT = int(os.environ.get("PYBACKWARD_FUZZ_TIMEOUT", 10))


class DrawChooser:
    """filefuzz's Chooser over Hypothesis draws (so failures shrink)."""

    def __init__(self, data):
        self.data = data

    def int(self, lo, hi):
        return self.data.draw(st.integers(lo, hi))

    def bytes(self, n):
        return self.data.draw(st.binary(min_size=n, max_size=n))


SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck), print_blob=True)


@pytest.mark.parametrize("kind", filefuzz.KINDS)
def test_unmutated_seeds_read(kind):
    for seed in filefuzz.seeds(kind):
        out = filefuzz.exercise(kind, seed.data, seed.program)
        assert out.error is None and out.arrays, (seed.name, out)


@pytest.mark.parametrize("kind", filefuzz.KINDS)
def test_mutated_files_are_arrays_or_one_clean_error(kind):
    @SETTINGS
    @given(st.data())
    def run(data):
        ch = DrawChooser(data)
        seed = filefuzz.choice(ch, filefuzz.seeds(kind))
        mutated, log = filefuzz.MUTATORS[kind](ch, seed.data)
        note(f"seed {seed.name}, mutations {log}")
        out = filefuzz.exercise(kind, mutated, seed.program)
        if out.error:
            assert "\n" not in out.error and len(out.error) < 1000, out.error
    run()


def test_the_harness_catches_what_it_should(monkeypatch):
    """A reader that raised something else, or took too much memory, would fail."""
    from pybackward.tensors import paddle_files

    def boom(path, program=None):
        raise KeyError("x")
    monkeypatch.setattr(paddle_files, "load_arrays", boom)
    with pytest.raises(KeyError):
        filefuzz.exercise("npz", b"")

    def greedy(path, program=None):
        return {"a": bytearray(filefuzz.MEMORY_BASE + 1)}
    monkeypatch.setattr(paddle_files, "load_arrays", greedy)
    with pytest.raises(filefuzz.TooMuchMemory):
        filefuzz.exercise("npz", b"")
