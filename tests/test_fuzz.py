"""Fuzzing: mutated programs either work or fail with a PyBackwardError.

Hypothesis mutates the valid programs in testdata/programs/*/forward.pb -
byte-wise (flip, set, insert, delete, truncate, duplicate, splice, huge
varints) and structurally on the parsed ProgramDesc (drop a field, swap an
op's slot names or arguments, change a dim or a dtype, rename a var, point
sub_block elsewhere, change parents, op types, attrs, op order, flags, var
types, add blocks) - and runs load -> append_backward -> save/reload -> run.
Any exception other than a PyBackwardError fails the test, and so does an
input that takes longer than fuzzcore.TIMEOUT seconds (a hang).

Bounded and deterministic for CI: max_examples fixed, derandomize=True, no
example database. The mutations and the pipeline live in fuzz/fuzzcore.py,
shared with the atheris harness (fuzz/fuzz_program.py) for long local runs.

Known bugs (fuzzcore.KNOWN_BUGS, each with a strict-xfail case in
tests/bad_inputs) are counted in the summary instead of failing, so these
tests keep guarding against new kinds of crash; delete an entry when its bug
is fixed.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

pytest.register_assert_rewrite("conftest_reliability")

from conftest_reliability import record  # noqa: E402

pytest_plugins = ["conftest_reliability"]

FUZZ_DIR = Path(__file__).resolve().parent.parent / "fuzz"
sys.path.insert(0, str(FUZZ_DIR))
import fuzzcore  # noqa: E402

EXAMPLES = int(os.environ.get("PYBACKWARD_FUZZ_EXAMPLES", 200))
fuzzcore.TIMEOUT = int(os.environ.get("PYBACKWARD_FUZZ_TIMEOUT", 10))

# A complex value cast into a real var drops its imaginary part: the
# interpreter refuses that or takes the real part on purpose, so NumPy's
# warning means a silent loss somewhere (docs/reliability.md, gap 20).
pytestmark = pytest.mark.filterwarnings("error::numpy.exceptions.ComplexWarning")

SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck), print_blob=True)


class DrawChooser:
    """fuzzcore's Chooser over Hypothesis draws (so failures shrink)."""

    def __init__(self, data):
        self.data = data

    def int(self, lo, hi):
        return self.data.draw(st.integers(lo, hi))

    def bytes(self, n):
        return self.data.draw(st.binary(min_size=n, max_size=n))


def _record(kind: str, outcome: fuzzcore.Outcome) -> None:
    record(f"fuzz: {kind} examples")
    if outcome.known_bug:
        record(f"fuzz: {kind}: hit known bug '{outcome.known_bug}' (at {outcome.stage})")
    elif outcome.error:
        record(f"fuzz: {kind}: clean {outcome.error} at {outcome.stage}")
    else:
        record(f"fuzz: {kind}: loaded, appended, saved and ran")


@SETTINGS
@given(st.data())
def test_byte_mutations(data):
    ch = DrawChooser(data)
    seed = fuzzcore.choice(ch, fuzzcore.all_seeds())
    mutated, log = fuzzcore.mutate_bytes(ch, seed.data)
    note(f"seed {seed.name}, mutations {log}")
    _record("byte-level", fuzzcore.exercise(mutated, seed))


@SETTINGS
@given(st.data())
def test_structural_mutations(data):
    ch = DrawChooser(data)
    seed = fuzzcore.choice(ch, fuzzcore.all_seeds())
    mutated, log = fuzzcore.mutate_structure(ch, seed.data)
    note(f"seed {seed.name}, mutations {log}")
    _record("structural", fuzzcore.exercise(mutated, seed))


@settings(SETTINGS, max_examples=max(1, EXAMPLES // 4))
@given(st.data())
def test_text_format_mutations(data):
    ch = DrawChooser(data)
    seed = fuzzcore.choice(ch, [s for s in fuzzcore.seeds() if s.text])
    mutated, log = fuzzcore.mutate_bytes(ch, seed.text)
    note(f"seed {seed.name}.pbtxt, mutations {log}")
    _record("text-format", fuzzcore.exercise(mutated, seed, text=True))


def test_unmutated_seeds_work():
    """The fuzzers start from programs that load, append and save (and run, or
    fail to run cleanly, with the case's params and feeds)."""
    ran = 0
    for seed in fuzzcore.seeds():
        out = fuzzcore.exercise(seed.data, seed)
        assert out.stage in ("ok", "run") and out.known_bug is None, (seed.name, out)
        ran += out.stage == "ok"
    record("fuzz: seed programs", len(fuzzcore.seeds()))
    record("fuzz: seed programs that also run", ran)


def test_hostile_seeds_fail_cleanly_where_expected():
    """The issue #20 programs, unmutated: refused at the stage expected, with
    a PyBackwardError, quickly (they are seeds of the mutation tests too)."""
    import time
    for seed in fuzzcore.hostile_seeds():
        t = time.monotonic()
        out = fuzzcore.exercise(seed.data, seed)
        assert (out.stage, out.error) == fuzzcore.HOSTILE_OUTCOMES[seed.name], (seed.name, out)
        assert out.known_bug is None and time.monotonic() - t < 5, (seed.name, out)
    record("fuzz: hostile seed programs (issue #20)", len(fuzzcore.hostile_seeds()))


def test_known_bug_classifier_is_narrow():
    """An exception that is no known bug is not excused."""
    try:
        raise ZeroDivisionError("new")
    except ZeroDivisionError as e:
        assert fuzzcore.known_bug(e) is None
    try:
        {}["x"]
    except KeyError as e:
        assert fuzzcore.known_bug(e) is None


def test_atheris_harness_runs_without_atheris():
    """fuzz/fuzz_program.py's entry point works on its seed inputs (no atheris needed)."""
    import fuzz_program
    inputs = fuzz_program.seed_inputs()
    assert len(inputs) >= 3 * len(fuzzcore.seeds())
    for data in inputs[:: max(1, len(inputs) // 20)] + [b"", b"\x00", b"\x01\xff\xff", b"\x02" + bytes(40)]:
        fuzz_program.one_input(data)
    record("fuzz: atheris-harness inputs replayed", len(inputs[:: max(1, len(inputs) // 20)]) + 4)
