"""Atomicity under faults: the output path holds the old file or the complete
new one - never a partial program - whatever kills or fails `append` midway.

* `pybackward append` on a large generated program (6001 ops, 2.2 MB) is
  SIGKILLed at random moments, many times; after each kill the output path
  is checked. Random kills mostly land in the load and the pass, so every
  step of the write protocol is also hit on purpose: the CLI runs with that
  step made fatal (killed when half of the temporary file - or of the
  `--in-place` temporary file - is written, via RLIMIT_FSIZE; SIGKILL before
  fsync, before and after the rename).
* `--in-place`: IN is the old bytes or the complete new program, and no other
  file (no backup `IN~`) is ever created.
* `pybackward.save` with an OSError injected at each step keeps the old file
  and leaves no temporary file.
* `append_backward` is all or nothing: a failure injected after k grad ops
  (a raising callback, for every k on several golden programs) leaves the
  program's bytes exactly as they were, and the program still usable.
"""
from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.register_assert_rewrite("conftest_reliability")

import pybackward  # noqa: E402
from conftest import PROGRAMS, case_json  # noqa: E402
from conftest_reliability import record  # noqa: E402
from randprog import large_program  # noqa: E402

pytest_plugins = ["conftest_reliability"]

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")

#: Layers of the large program (3 ops each): ~1.2 s for `append` on this machine.
LAYERS = int(os.environ.get("PYBACKWARD_FAULT_LAYERS", 2000))
#: Random SIGKILLs per mode.
KILLS = int(os.environ.get("PYBACKWARD_FAULT_KILLS", 12))
OLD = (PROGRAMS / "fit_a_line" / "backward.pb").read_bytes()   # "the old file" at OUT


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "pybackward_cli.main", *args]


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """The large program, the output `append` writes for it, and how long that takes."""
    d = tmp_path_factory.mktemp("large")
    src = d / "in.pb"
    pybackward.save(large_program(LAYERS).program, src)
    out = d / "out.pb"
    t = time.monotonic()
    r = subprocess.run(_cmd("append", "--loss", "loss", str(src), str(out)), capture_output=True, text=True)
    duration = time.monotonic() - t
    assert r.returncode == 0, r.stderr
    return {"forward": src.read_bytes(), "new": out.read_bytes(), "duration": duration}


def _leftovers(d: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name not in keep)


def _check_out(out: Path, before: bytes | None, new: bytes) -> str:
    """OUT holds the old file, the complete new one, or (if there was none) nothing."""
    if not out.exists():
        assert before is None, "the old OUT vanished"
        return "absent"
    data = out.read_bytes()
    if data == new:
        return "new"
    assert data == before, f"OUT holds a partial or foreign program ({len(data)} bytes)"
    return "old"


def _check_in_place(src: Path, old: bytes, new: bytes) -> str:
    """IN is the old bytes or the complete new program; no backup IN~ was made."""
    data = src.read_bytes()
    assert data in (old, new), f"IN holds a partial program ({len(data)} bytes)"
    assert not src.with_name(src.name + "~").exists(), "--in-place made a backup IN~"
    return "new" if data == new else "old"


# --------------------------------------------------------------------------
# SIGKILL at random moments
# --------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["out", "in_place"])
def test_sigkill_at_random_moments(mode, large, tmp_path):
    rng = random.Random(20240 + (mode == "in_place"))
    states: dict[str, int] = {}
    for i in range(KILLS):
        d = tmp_path / f"kill{i}"
        d.mkdir()
        src, out = d / "in.pb", d / "out.pb"
        src.write_bytes(large["forward"])
        before = None
        if mode == "out" and i % 2 == 0:
            out.write_bytes(OLD)
            before = OLD
        args = ("append", "--loss", "loss", "--in-place", str(src)) if mode == "in_place" else \
            ("append", "--loss", "loss", str(src), str(out))
        proc = subprocess.Popen(_cmd(*args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.05, large["duration"] * 1.15))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if mode == "in_place":
            state = _check_in_place(src, large["forward"], large["new"])
        else:
            state = _check_out(out, before, large["new"])
            assert src.read_bytes() == large["forward"]
        tmp = [n for n in _leftovers(d, {"in.pb", "out.pb"}) if n.endswith(".tmp")]
        state += " (temp file left)" if tmp else ""
        states[state] = states.get(state, 0) + 1
    record(f"faults: random SIGKILLs of append ({mode})", KILLS)
    for s, n in sorted(states.items()):
        record(f"faults: after a random SIGKILL ({mode}), output {s}", n)


# --------------------------------------------------------------------------
# SIGKILL at each step of the write protocol
# --------------------------------------------------------------------------
#: Runs the CLI with one step of the write protocol made fatal. Partial writes
#: use RLIMIT_FSIZE with SIGXFSZ at its default action (Python ignores it), so
#: the process dies the moment any file it writes reaches `limit` bytes,
#: however the write is done; the other points patch the calls an atomic
#: write must make (fsync, rename) to SIGKILL the process.
FAULT_RUNNER = r'''
import os, resource, signal, sys
point, limit, args = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def die():
    os.kill(os.getpid(), signal.SIGKILL)

if point == "temp_half_written":
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
elif point == "before_fsync":
    os.fsync = lambda fd: die()
elif point == "before_rename":
    os.replace = lambda a, b: die()
    os.rename = lambda a, b: die()
elif point == "after_rename":
    _replace, _rename = os.replace, os.rename
    def replace(a, b):
        _replace(a, b)
        die()
    def rename(a, b):
        _rename(a, b)
        die()
    os.replace, os.rename = replace, rename
else:
    raise SystemExit(f"unknown fault point {point}")
from pybackward_cli.main import cli
cli(args, prog_name="pybackward")
'''
KILLED = (-signal.SIGKILL, -signal.SIGXFSZ)

OUT_POINTS = {"temp_half_written": "old", "before_fsync": "old", "before_rename": "old", "after_rename": "new"}
# --in-place writes the new IN as any OUT is written (a temp file renamed over IN); it
# makes no backup (issue #20: the fixed name IN~ overwrote and then deleted a user's file).
IN_PLACE_POINTS = {"temp_half_written": "old", "before_fsync": "old", "before_rename": "old",
                   "after_rename": "new"}


def _small_program(tmp: Path) -> tuple[bytes, bytes]:
    src = tmp / "big_in.pb"
    pybackward.save(large_program(300).program, src)
    prog = pybackward.load(src)
    pybackward.append_backward("loss", program=prog)
    return src.read_bytes(), pybackward.dumps(prog)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return _small_program(tmp_path_factory.mktemp("small"))


def _run_fault(point: str, limit: int, *args: str) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-c", FAULT_RUNNER, point, str(limit), *args], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode in KILLED, (f"fault point {point} was not reached (exit {r.returncode}): did the "
                                    f"write protocol change? Update FAULT_RUNNER", r.stderr[-2000:])
    return r


@pytest.mark.parametrize("had_old", [True, False], ids=["old_out", "no_out"])
@pytest.mark.parametrize("point", list(OUT_POINTS))
def test_sigkill_at_each_write_step(point, had_old, small, tmp_path):
    forward, new = small
    src, out = tmp_path / "in.pb", tmp_path / "out.pb"
    src.write_bytes(forward)
    if had_old:
        out.write_bytes(OLD)
    _run_fault(point, len(new) // 2, "append", "--loss", "loss", str(src), str(out))
    want = OUT_POINTS[point]
    if want == "old" and not had_old:
        want = "absent"
    assert _check_out(out, OLD if had_old else None, new) == want
    assert src.read_bytes() == forward
    record("faults: fatal fault injected at a write step")


@pytest.mark.parametrize("point", list(IN_PLACE_POINTS))
def test_sigkill_in_place_at_each_step(point, small, tmp_path):
    forward, new = small
    src = tmp_path / "in.pb"
    src.write_bytes(forward)
    _run_fault(point, len(new) // 2, "append", "--loss", "loss", "--in-place", str(src))
    record("faults: fatal fault injected at an --in-place step")
    assert _check_in_place(src, forward, new) == IN_PLACE_POINTS[point]
    assert [n for n in _leftovers(tmp_path, {"in.pb"}) if not n.endswith(".tmp")] == []


# --------------------------------------------------------------------------
# Exceptions in save
# --------------------------------------------------------------------------
def _disk_full(*a, **k):
    raise OSError(errno.ENOSPC, "No space left on device")


class _FailingFile:
    def __init__(self, f):
        self._f = f

    def write(self, data):
        self._f.write(bytes(data[:100]))
        _disk_full()

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self._f.__exit__(*exc)


def _inject(monkeypatch, point: str) -> None:
    import pybackward.base.files as pfiles
    if point == "write":
        real = os.fdopen
        monkeypatch.setattr(pfiles.os, "fdopen", lambda *a, **k: _FailingFile(real(*a, **k)))
    elif point == "fsync":
        monkeypatch.setattr(pfiles.os, "fsync", _disk_full)
    elif point == "rename":
        monkeypatch.setattr(pfiles.os, "replace", _disk_full)
    elif point == "mkstemp":
        monkeypatch.setattr(pfiles.tempfile, "mkstemp", _disk_full)
    elif point == "interrupt":
        def interrupted(*a, **k):
            raise KeyboardInterrupt
        monkeypatch.setattr(pfiles.os, "fsync", interrupted)


@pytest.mark.parametrize("had_old", [True, False], ids=["old_out", "no_out"])
@pytest.mark.parametrize("point", ["mkstemp", "write", "fsync", "rename", "interrupt"])
def test_save_fault_keeps_the_old_file(point, had_old, tmp_path, monkeypatch):
    prog = pybackward.load(PROGRAMS / "fit_a_line" / "forward.pb")
    out = tmp_path / "out.pb"
    if had_old:
        out.write_bytes(OLD)
    _inject(monkeypatch, point)
    with pytest.raises(BaseException):
        pybackward.save(prog, out)
    monkeypatch.undo()
    assert _leftovers(tmp_path, {"out.pb"}) == [], "a temporary file was left behind"
    if had_old:
        assert out.read_bytes() == OLD
    else:
        assert not out.exists()
    record("faults: exceptions injected in save")


@pytest.mark.parametrize("point", ["mkstemp", "write", "fsync", "rename"])
def test_save_fault_is_a_pybackward_error(point, tmp_path, monkeypatch):
    prog = pybackward.load(PROGRAMS / "fit_a_line" / "forward.pb")
    _inject(monkeypatch, point)
    with pytest.raises(pybackward.PyBackwardError, match="out.pb"):
        pybackward.save(prog, tmp_path / "out.pb")


# --------------------------------------------------------------------------
# append_backward is all or nothing
# --------------------------------------------------------------------------
ALL_OR_NOTHING_CASES = ["fit_a_line", "mlp_softmax_ce", "shared_weights", "cond_block", "while_loop",
                        "concat_split_slice_gather", "stop_gradient_mid"]


class _Injected(Exception):
    pass


@pytest.mark.parametrize("case", ALL_OR_NOTHING_CASES)
def test_append_backward_is_all_or_nothing(case):
    """A failure after the k-th grad op, for every k: bytes unchanged, program usable."""
    loss = case_json(case)["loss"]
    clean = pybackward.load(PROGRAMS / case / "forward.pb")
    seen = []
    pybackward.append_backward(loss, program=clean, callbacks=[lambda block, context: seen.append(1)])
    expected = pybackward.dumps(clean)
    prog = pybackward.load(PROGRAMS / case / "forward.pb")
    before = pybackward.dumps(prog)
    for k in range(len(seen)):
        calls = []

        def fail_at_k(block, context, k=k, calls=calls):
            calls.append(1)
            if len(calls) > k:
                raise _Injected(f"after grad op {k}")
        with pytest.raises(pybackward.PyBackwardError, match="fail_at_k"):
            pybackward.append_backward(loss, program=prog, callbacks=[fail_at_k])
        assert pybackward.dumps(prog) == before, f"failure after grad op {k} changed the program"
        assert prog.appending_grad_times == 0
    pybackward.append_backward(loss, program=prog)
    assert pybackward.dumps(prog) == expected
    record("faults: failures injected into append_backward", len(seen))


def test_variables_stay_usable_after_a_failed_append():
    prog = pybackward.load(PROGRAMS / "fit_a_line" / "forward.pb")
    loss = prog.var("mean_0.tmp_0")

    def bad(block, context):
        raise ValueError("boom")
    with pytest.raises(pybackward.PyBackwardError):
        pybackward.append_backward(loss, callbacks=[bad])
    pairs = pybackward.append_backward(loss)
    assert [g is not None for _, g in pairs] == [True, True]
    assert pybackward.dumps(prog) == (PROGRAMS / "fit_a_line" / "backward.pb").read_bytes()
