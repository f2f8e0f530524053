"""How a `pybackward` process ends, and what it skips (issue #37: start-up and teardown).

`cli/main.py:main` ends the process once the command has finished: stdout and
stderr flushed, the atexit handlers run, then `os._exit` with the command's
exit code, skipping Python's teardown (module teardown and a last garbage
collection over the program: ~0.1-0.2 s after the 3,000-layer MLP's output was
written). It exits the usual way where that could lose something: a
non-daemon thread still running, a flush that fails (a closed pipe).
`cmd_append` keeps the cyclic garbage collector off while it loads and
differentiates (`common.PausedCollector`). Each test runs the CLI in a real
process; the probe below marks whether Python's teardown ran.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pybackward_cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
LENET = ROOT / "testdata" / "models" / "lenet"
LOSS = "mean_0.tmp_0"

#: The CLI's entry point in a process that can tell whether Python tore itself down: an
#: object whose finaliser writes TEARDOWN (module teardown), an atexit handler writing ATEXIT.
PROBE = r"""
import atexit, os, sys, threading, time
class Marker:
    def __del__(self):
        os.write(2, b"TEARDOWN\n")
marker = Marker()
atexit.register(lambda: os.write(2, b"ATEXIT\n"))
if os.environ.get("PROBE_THREAD"):        # a non-daemon thread still at work when the command ends
    def work():
        time.sleep(0.5)
        open(os.environ["PROBE_THREAD"], "w").write("done")
    threading.Thread(target=work).start()
sys.argv = ["pybackward"] + sys.argv[1:]
from pybackward_cli.main import main
main()
"""


def _env(**extra) -> dict:
    """The environment of a user's shell: stdout block-buffered on a pipe (no PYTHONUNBUFFERED)."""
    import os
    env = dict(os.environ, **extra)
    env.pop("PYTHONUNBUFFERED", None)
    return env


def _run(*args, env_extra: dict | None = None, **kw) -> subprocess.CompletedProcess:
    env = _env(**(env_extra or {}))
    return subprocess.run([sys.executable, "-c", PROBE, *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, env=env, **kw)


def test_append_skips_the_teardown_but_writes_flushes_and_runs_atexit(tmp_path):
    out = tmp_path / "out.pb"
    r = _run("append", "--loss", LOSS, "--pairs", LENET / "forward.pb", out)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == (LENET / "backward.pb").read_bytes()
    assert "ATEXIT" in r.stderr and "TEARDOWN" not in r.stderr, r.stderr
    assert r.stderr.startswith("wrote ") and len(r.stdout.splitlines()) == 10      # every pair, flushed


@pytest.mark.parametrize("case, code", [("bad input", 2), ("failed check", 1), ("help", 0)])
def test_exit_codes_are_the_commands(case, code, tmp_path):
    args = {"bad input": ["append", "--loss", "nope", LENET / "forward.pb", tmp_path / "o.pb"],
            "failed check": ["append", "--loss", LOSS, LENET / "forward.pb", "--expect", LENET / "forward.pb"],
            "help": ["--help"]}[case]
    r = _run(*args)
    assert r.returncode == code, r.stderr
    assert "TEARDOWN" not in r.stderr and "ATEXIT" in r.stderr and "Traceback" not in r.stderr
    if code:
        assert r.stderr.splitlines()[0].startswith(("error:", "pybackward:")), r.stderr


def test_a_long_output_on_a_pipe_arrives_whole():
    """stdout is a pipe (block-buffered): what `os._exit` would drop is flushed first."""
    r = _run("ops", "--json")
    assert r.returncode == 0 and "TEARDOWN" not in r.stderr, r.stderr
    expected = CliRunner().invoke(cli, ["ops", "--json"]).output
    assert len(r.stdout) > 8192 and r.stdout == expected


def test_a_running_non_daemon_thread_gets_the_usual_exit(tmp_path):
    """Python waits for a non-daemon thread before it ends; so does `main` (it exits the usual way)."""
    done = tmp_path / "thread.txt"
    r = _run("append", "--loss", LOSS, LENET / "forward.pb", tmp_path / "o.pb",
             env_extra={"PROBE_THREAD": str(done)})
    assert r.returncode == 0, r.stderr
    assert done.read_text() == "done" and "TEARDOWN" in r.stderr


def test_a_closed_stdout_ends_the_process_as_before():
    """A reader that stops at once: click meets the broken pipe at its first write and exits 1,
    quietly, as it did before `main` skipped the teardown."""
    p = subprocess.Popen([sys.executable, "-c", PROBE, "ops", "--json"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=ROOT, env=_env())
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 1 and "Traceback" not in err, err


def test_a_failed_flush_falls_back_to_the_usual_exit():
    """Output still buffered when the reader is gone: `_end_process` returns, and Python's own
    exit reports the broken pipe (exit 120) instead of a silent 0 that lost the output."""
    code = ("import os, sys, time\n" + PROBE.split("sys.argv")[0] +
            "time.sleep(0.5)\nsys.stdout.write('lost')\n"
            "from pybackward_cli.main import _end_process\n_end_process(0)\nos.write(2, b'FELL BACK\\n')\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                         env=_env())
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 120, err
    assert "FELL BACK" in err and "BrokenPipeError" in err and "TEARDOWN" in err


def test_in_process_callers_get_the_system_exit():
    code = ("import sys; from pybackward_cli.main import main\n"
            "sys.argv = ['pybackward', '--help']\n"
            "try:\n    main(skip_teardown=False)\nexcept SystemExit as e:\n    print('caught', e.code)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.stdout.splitlines()[-1] == "caught 0", r.stdout[-500:] + r.stderr


#: Records every garbage collection and whether it ran inside the load or the pass.
GC_PROBE = r"""
import gc, json, sys, traceback
gc.set_threshold(1, 10**9, 10**9)          # a young collection at every allocation the collector sees
inside = []
def seen(phase, info):
    if phase == "start":
        names = {f.name for f in traceback.extract_stack()}
        inside.append(bool(names & {"load", "append_backward", "check_input_repeats"}))
gc.callbacks.append(seen)
import pybackward
if sys.argv[1] == "library":               # the library alone: the collector runs meanwhile
    prog = pybackward.load(sys.argv[2])
    pybackward.append_backward(sys.argv[3], program=prog)
else:
    sys.argv = ["pybackward"] + sys.argv[1:]
    from pybackward_cli.main import main
    try:
        main(skip_teardown=False)
    except SystemExit:
        pass
gc.callbacks.remove(seen)
print(json.dumps([sum(inside), len(inside)]), file=sys.stderr)
"""


def test_append_collects_no_garbage_while_it_loads_and_differentiates(tmp_path):
    """`cmd_append` pauses the collector from the load to the write; the library alone, with
    the same thresholds, collects inside `append_backward` (the probe is not vacuous)."""
    def run(*args):
        r = subprocess.run([sys.executable, "-c", GC_PROBE, *map(str, args)], capture_output=True, text=True,
                           cwd=ROOT, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        return json.loads(r.stderr.strip().splitlines()[-1])
    inside, total = run("append", "--loss", LOSS, LENET / "forward.pb", tmp_path / "o.pb")
    assert inside == 0 and total > 0
    inside, _ = run("library", LENET / "forward.pb", LOSS)
    assert inside > 0
