"""A pytest plugin for the reliability tests: counts what they exercised and
prints it in the terminal summary (whatever -r flags are given).

Loaded by `pytest_plugins = ["conftest_reliability"]` in test_bad_inputs.py,
tests/legacy/test_atomicity.py, test_fuzz.py and test_random_programs.py; tests add to the
counters with `record("fuzz: byte-level examples", 1)`.
"""
from __future__ import annotations

import collections
from pathlib import Path

#: counter name -> count, filled in by the tests (see `record`).
COUNTS: "collections.Counter[str]" = collections.Counter()
#: module -> outcome -> number of tests.
OUTCOMES: dict[str, "collections.Counter[str]"] = collections.defaultdict(collections.Counter)

MODULES = {
    "test_bad_inputs.py": "bad-input corpus",
    "tests/legacy/test_atomicity.py": "atomicity under faults",
    "test_fuzz.py": "fuzzing",
    "test_random_programs.py": "random programs",
}


def record(key: str, n: int = 1) -> None:
    COUNTS[key] += n


def pytest_runtest_logreport(report):
    name = Path(report.nodeid.split("::")[0]).name
    if name not in MODULES:
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        if hasattr(report, "wasxfail"):
            outcome = "xfailed (strict, known bug)" if report.skipped else "XPASSED"
        else:
            outcome = report.outcome
        OUTCOMES[name][outcome] += 1


def pytest_terminal_summary(terminalreporter):
    if not OUTCOMES and not COUNTS:
        return
    tr = terminalreporter
    tr.write_sep("=", "pybackward reliability")
    for mod, label in MODULES.items():
        if mod in OUTCOMES:
            parts = ", ".join(f"{n} {k}" for k, n in sorted(OUTCOMES[mod].items()))
            tr.write_line(f"{label:<24} tests: {parts}")
    for key in sorted(COUNTS):
        tr.write_line(f"  {key}: {COUNTS[key]}")
