"""Shared fixtures: paths to the golden data, and the optional live Paddle and Graphviz.

Paddle and Graphviz are optional locally and required in CI. A test that needs
one of them says so with a marker (`@pytest.mark.paddle`,
`@pytest.mark.graphviz`) or by calling `run_paddle` / `require_paddle` /
`require_graphviz`; when the tool is missing the test skips with a reason that
starts with `MISSING_TOOL`. With CI=true such a skip is turned into a failure
(`pytest_runtest_makereport` below), so CI never passes by silently skipping
the cross-checks. Ad-hoc skips that name Paddle or Graphviz as missing
(`pytest.importorskip("paddle")`, "dot not installed", ...) are caught too.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTDATA = ROOT / "testdata"
PROGRAMS = TESTDATA / "programs"

# tests/ mirrors the package layout (tests/ops/, tests/views/, ...); a test module may use
# another's helpers (`from test_kernels_vs_paddle import _compare`) wherever it lives.
for _dir in sorted(p for p in Path(__file__).resolve().parent.iterdir()
                   if p.is_dir() and not p.name.startswith((".", "_")) and any(p.glob("test_*.py"))):
    if str(_dir) not in sys.path:
        sys.path.append(str(_dir))


def golden_cases() -> list[str]:
    return sorted(p.name for p in PROGRAMS.iterdir() if (p / "case.json").exists())


def case_json(case: str) -> dict:
    return json.loads((PROGRAMS / case / "case.json").read_text())


def all_golden_files() -> list[Path]:
    return sorted(PROGRAMS.glob("*/*.pb"))


# --------------------------------------------------------------------------
# Optional external tools: skip locally, fail in CI
# --------------------------------------------------------------------------
#: Every skip for a missing Paddle or Graphviz starts with this.
MISSING_TOOL = "[missing tool]"
PADDLE_HOWTO = ("set PYBACKWARD_PADDLE_PYTHON to a Python that has paddlepaddle==3.3.1; "
                "see README, 'Install and run the tests'")

# Skip reasons that name Paddle or Graphviz as missing without the prefix
# (pytest.importorskip("paddle"), a hand-written skipif): treated the same.
_ADHOC_TOOL_SKIP = re.compile(
    r"(could not import|no module named) '?paddle"
    r"|\b(paddle(paddle)?|graphviz|dot)('s)?( dot| program| executable| binary)?( is| was)?"
    r" (not installed|not found|unavailable|not available)",
    re.I)


def tools_required() -> bool:
    """True in CI (CI=true): a missing Paddle or Graphviz fails the tests that need it."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def is_missing_tool_skip(reason: str) -> bool:
    return reason.startswith(MISSING_TOOL) or bool(_ADHOC_TOOL_SKIP.search(reason))


def paddle_python() -> str | None:
    """A Python that can import paddle: $PYBACKWARD_PADDLE_PYTHON, or this one."""
    cand = os.environ.get("PYBACKWARD_PADDLE_PYTHON")
    if cand:
        return cand if (shutil.which(cand) or Path(cand).exists()) else None
    try:
        import importlib.util
        if importlib.util.find_spec("paddle") is not None:
            return sys.executable
    except Exception:
        pass
    return None


def require_paddle() -> str:
    """The Python to run Paddle with; skips the test (fails it in CI) when there is none."""
    py = paddle_python()
    if py is None:
        cand = os.environ.get("PYBACKWARD_PADDLE_PYTHON")
        why = (f"PYBACKWARD_PADDLE_PYTHON={cand} does not exist" if cand
               else "PaddlePaddle is not installed")
        pytest.skip(f"{MISSING_TOOL} {why} ({PADDLE_HOWTO})")
    return py


def graphviz_dot() -> str | None:
    return shutil.which("dot")


def require_graphviz() -> str:
    """Graphviz's `dot`; skips the test (fails it in CI) when it is not installed."""
    dot = graphviz_dot()
    if dot is None:
        pytest.skip(f"{MISSING_TOOL} Graphviz's dot is not installed (apt-get install graphviz)")
    return dot


def run_paddle(script: str, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run `script` (python -c) with Paddle's Python, legacy IR on. Paddle is never
    imported here: its protobuf schema clashes with pybackward's."""
    py = require_paddle()
    env = dict(os.environ, FLAGS_enable_pir_api="0")
    return subprocess.run([py, "-c", script, *args], capture_output=True, text=True, env=env, timeout=timeout)


PADDLE_EXECUTE_MANY = r"""
import json, sys
import numpy as np
import paddle
paddle.enable_static()
jobs = json.load(open(sys.argv[1]))
place = paddle.CPUPlace()
for job in jobs:
    try:
        prog = paddle.static.Program.parse_from_string(open(job["program"], "rb").read())
        scope = paddle.static.Scope()
        with paddle.static.scope_guard(scope):
            for k, v in np.load(job["params"]).items():
                scope.var(k).get_tensor().set(v, place)
            exe = paddle.static.Executor(place)
            out = exe.run(prog, feed=dict(np.load(job["feeds"])), fetch_list=job["fetch"])
        np.savez(job["out"], **dict(zip(job["fetch"], out)))
        job["ops"] = len(prog.global_block().ops)
    except Exception as e:
        job["error"] = (type(e).__name__ + ": " + str(e))[-3000:]
json.dump(jobs, open(sys.argv[2], "w"))
print("ok", len(jobs))
"""


def paddle_execute_many(jobs: list[dict], workdir: Path, timeout: int = 600) -> list[dict]:
    """Run many programs through Paddle's Executor in one Paddle process (Paddle
    takes seconds to start). Each job: program, params, feeds (paths), fetch
    (names), out (an .npz path written with the fetched values). Returns the
    jobs with `ops` (global block op count) or `error` added."""
    spec, result = workdir / "paddle_jobs.json", workdir / "paddle_results.json"
    spec.write_text(json.dumps(jobs))
    r = run_paddle(PADDLE_EXECUTE_MANY, str(spec), str(result), timeout=timeout)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stderr[-3000:]
    return json.loads(result.read_text())


def pytest_configure(config):
    config.addinivalue_line("markers", "paddle: needs a live Paddle 3.3.1 ($PYBACKWARD_PADDLE_PYTHON); "
                                       "skips without it, fails with CI=true")
    config.addinivalue_line("markers", "graphviz: needs Graphviz's dot; skips without it, fails with CI=true")
    config.addinivalue_line("markers", "slow: takes long (the larger real models, subprocess-per-case corpora, kill tests); the README's test command deselects them, CI runs them after")


def pytest_runtest_setup(item):
    if item.get_closest_marker("paddle") is not None:
        require_paddle()
    if item.get_closest_marker("graphviz") is not None:
        require_graphviz()


def _skip_reason(report) -> str:
    lr = report.longrepr
    reason = lr[2] if isinstance(lr, tuple) and len(lr) == 3 else str(lr)
    return reason.removeprefix("Skipped: ")


_TOOL_SKIPS: list[str] = []
_CI_NOTE = " -- with CI=true a missing Paddle or Graphviz fails the test (.ci/run installs both)"


def _strict(report) -> None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    if not is_missing_tool_skip(reason):
        return
    _TOOL_SKIPS.append(reason)
    if tools_required():
        report.outcome = "failed"
        report.longrepr = reason + _CI_NOTE


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    _strict(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    _strict(report)          # a module-level importorskip("paddle")
    return report


def pytest_terminal_summary(terminalreporter):
    py, dot = paddle_python(), graphviz_dot()
    tr = terminalreporter
    line = f"Paddle: {py or 'missing'}; Graphviz: {dot or 'missing'}"
    if _TOOL_SKIPS:
        verb = "failed (CI=true)" if tools_required() else "skipped"
        line += f"; {len(_TOOL_SKIPS)} tests {verb} for a missing tool"
        if not tools_required():
            line += f" ({PADDLE_HOWTO})"
    tr.write_sep("-", "pybackward external tools")
    tr.write_line(line)
