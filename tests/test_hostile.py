"""Issue #20, "Hostile inputs found by probing": one regression test (or a
few) per item; each fails on the code before the fix.

The error contract they hold: one line on stderr naming the file / op / var,
exit code 2 (130 for Ctrl-C), no traceback, no partial or stray output file;
the Python API raises a `pybackward.PyBackwardError` subclass.
"""
from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import pybackward
from conftest import PROGRAMS
from pybackward._proto import framework_pb2 as pb
from pybackward_cli.main import cli

FIT_DIR = PROGRAMS / "fit_a_line"
FIT = FIT_DIR / "forward.pb"
FIT_BACKWARD = (FIT_DIR / "backward.pb").read_bytes()
LOSS = "mean_0.tmp_0"
WHILE_DIR = PROGRAMS / "while_loop"
CORPUS = Path(__file__).resolve().parent / "bad_inputs"


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "pybackward_cli.main", *map(str, args)]


def sh(*args, timeout: float = 60) -> subprocess.CompletedProcess:
    """The CLI in a real process (exit codes, signals, stderr as a user sees them)."""
    try:
        return subprocess.run(_cmd(*args), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung: no result after {timeout} s")


def invoke(*args) -> "click.testing.Result":  # noqa: F821
    """The CLI in this process (fast); exit codes as `main()` gives them."""
    return CliRunner().invoke(cli, [str(a) for a in args])


def one_error_line(r, code: int = 2) -> str:
    """The run failed cleanly: exit `code`, no traceback, exactly one stderr line."""
    rc = r.returncode if isinstance(r, subprocess.CompletedProcess) else r.exit_code
    err = r.stderr
    if not isinstance(r, subprocess.CompletedProcess) and r.exception is not None:
        assert isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in err, err[-3000:]
    assert rc == code, (rc, r.stdout[-500:], err[-2000:])
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def listing(d: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes() if p.is_file() else b"", p.stat().st_mtime_ns)
            for p in sorted(d.iterdir())}


# --------------------------------------------------------------------------
# 1. --in-place never touches a file pybackward did not create (IN~)
# --------------------------------------------------------------------------
def test_in_place_leaves_the_users_tilde_file_alone(tmp_path):
    src, mine = tmp_path / "m.pb", tmp_path / "m.pb~"
    src.write_bytes(FIT.read_bytes())
    mine.write_bytes(b"the user's own notes, not a backup")
    os.utime(mine, ns=(10**18, 10**18))
    before = mine.stat().st_mtime_ns
    r = sh("append", "--loss", LOSS, "--in-place", src)
    assert r.returncode == 0, r.stderr
    assert src.read_bytes() == FIT_BACKWARD
    assert mine.read_bytes() == b"the user's own notes, not a backup"
    assert mine.stat().st_mtime_ns == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pb", "m.pb~"]


def test_in_place_keeps_the_inputs_mode(tmp_path):
    src = tmp_path / "m.pb"
    src.write_bytes(FIT.read_bytes())
    src.chmod(0o640)
    assert invoke("append", "--loss", LOSS, "--in-place", src).exit_code == 0
    assert stat.S_IMODE(src.stat().st_mode) == 0o640


# --------------------------------------------------------------------------
# 2. Concurrent --in-place runs on one file
# --------------------------------------------------------------------------
def test_concurrent_in_place_runs_never_crash(tmp_path):
    """8 parallel runs: each succeeds or refuses a file another run already
    differentiated (one line, exit 2); none ends in a traceback; the file ends
    as the complete program with one backward section; nothing else is left."""
    src = tmp_path / "m.pb"
    src.write_bytes(FIT.read_bytes())
    procs = [subprocess.Popen(_cmd("append", "--loss", LOSS, "--in-place", src), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(8)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    for rc, err in results:
        assert "Traceback" not in err, err
        if rc != 0:
            assert rc == 2 and len(err.strip().splitlines()) == 1 and "already has a backward section" in err, err
    assert any(rc == 0 for rc, _ in results)
    assert src.read_bytes() == FIT_BACKWARD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pb"]


# --------------------------------------------------------------------------
# 3. Inputs that are not regular files: refused at once, never read
# --------------------------------------------------------------------------
@pytest.fixture
def fifo(tmp_path):
    """A FIFO no one writes to. Should a reader block on it (the bug), a
    watchdog opens it for writing after 10 s, so the test fails, not hangs."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("needs FIFOs")
    f = tmp_path / "pipe.pb"
    os.mkfifo(f)
    done = threading.Event()

    def unblock():
        if not done.wait(10):
            fd = os.open(f, os.O_WRONLY | os.O_NONBLOCK) if _has_reader(f) else None
            if fd is not None:
                os.close(fd)
    t = threading.Thread(target=unblock, daemon=True)
    t.start()
    yield f
    done.set()
    t.join()


def _has_reader(f: Path) -> bool:
    try:
        os.close(os.open(f, os.O_WRONLY | os.O_NONBLOCK))
        return True
    except OSError:         # ENXIO: no reader
        return False


@pytest.mark.parametrize("args", [
    ["show", "{dev}"], ["diff", "{fit}", "{dev}"], ["convert", "{dev}", "{out}"], ["dot", "{dev}"],
    ["append", "--loss", LOSS, "{dev}", "{out}"], ["stats", "{dev}"], ["ops", "--missing", "{dev}"],
    ["check", "{dev}", "--loss", LOSS], ["run", "{fit}", "--fetch", LOSS, "--startup", "{dev}"],
    ["append", "--loss", LOSS, "{fit}", "--expect", "{dev}"],
], ids=lambda a: a[0] + ("_startup" if "--startup" in a else "_expect" if "--expect" in a else ""))
def test_a_fifo_input_is_refused_without_blocking(args, fifo, tmp_path):
    out = tmp_path / "out.pb"
    argv = [a.replace("{dev}", str(fifo)).replace("{fit}", str(FIT)).replace("{out}", str(out)) for a in args]
    t = time.monotonic()
    line = one_error_line(invoke(*argv))
    assert time.monotonic() - t < 5
    assert str(fifo) in line and "is a FIFO (named pipe), not a regular file" in line, line
    assert not out.exists()


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
@pytest.mark.parametrize("args", [["show", "/dev/zero"], ["convert", "/dev/zero", "{out}"]], ids=lambda a: a[0])
def test_dev_zero_is_refused_without_reading(args, tmp_path):
    """Before: the size (0) was checked, then the device read until MemoryError."""
    out = tmp_path / "out.pb"
    r = sh(*[str(out) if a == "{out}" else a for a in args], timeout=30)
    line = one_error_line(r)
    assert "/dev/zero: is a character device, not a regular file" in line, line
    assert not out.exists()


def test_load_refuses_a_fifo_and_a_device(fifo):
    with pytest.raises(pybackward.ProgramFileError, match="FIFO"):
        pybackward.load(fifo)
    if os.path.exists("/dev/zero"):
        with pytest.raises(pybackward.ProgramFileError, match="character device"):
            pybackward.load("/dev/zero")


@pytest.mark.parametrize("opt", ["--params", "--feeds", "--feed"])
def test_array_files_that_are_fifos_are_refused(opt, fifo):
    value = f"x={fifo}" if opt == "--feed" else str(fifo)
    line = one_error_line(sh("run", FIT, "--fetch", LOSS, opt, value, timeout=20))
    assert str(fifo) in line and "not a regular file" in line


# --------------------------------------------------------------------------
# 4. Runaway loops: --max-steps, --timeout, Ctrl-C
# --------------------------------------------------------------------------
WHILE_STEP_0 = CORPUS / "while_step_0.pb"     # a while whose counter steps by 0
WHILE_RUN = ["--fetch", LOSS, "--params", WHILE_DIR / "params.npz", "--feeds", WHILE_DIR / "feeds.npz"]


def _while_arrays():
    return dict(np.load(WHILE_DIR / "params.npz")), dict(np.load(WHILE_DIR / "feeds.npz"))


def test_max_steps_stops_a_runaway_while():
    line = one_error_line(invoke("run", WHILE_STEP_0, *WHILE_RUN, "--max-steps", "50"))
    assert f"{WHILE_STEP_0}: block 0, op 4 (while)" in line and "stopped at step 50" in line, line


def test_the_default_step_limit_is_finite_and_small():
    from pybackward.ops.control_flow.cond_while import MAX_WHILE_STEPS
    assert MAX_WHILE_STEPS <= 10_000
    params, feeds = _while_arrays()
    scope = pybackward.Scope()
    for k, v in params.items():
        scope.set(k, v)
    t = time.monotonic()
    with pytest.raises(pybackward.ExecutionLimitError, match=f"stopped at step {MAX_WHILE_STEPS}"):
        pybackward.Executor().run(pybackward.load(WHILE_STEP_0), feed=feeds, fetch_list=[LOSS], scope=scope)
    assert time.monotonic() - t < 10


def test_max_while_steps_from_python():
    params, feeds = _while_arrays()
    prog = pybackward.load(WHILE_STEP_0)
    scope = pybackward.Scope()
    for k, v in params.items():
        scope.set(k, v)
    with pytest.raises(pybackward.ExecutionLimitError, match="op 4 \\(while\\): stopped at step 7"):
        pybackward.Executor(max_while_steps=7).run(prog, feed=feeds, fetch_list=[LOSS], scope=scope)
    # A loop that ends within the limit is unaffected.
    good = pybackward.load(WHILE_DIR / "forward.pb")
    scope = pybackward.Scope()
    for k, v in params.items():
        scope.set(k, v)
    pybackward.Executor(max_while_steps=50).run(good, feed=feeds, fetch_list=[LOSS], scope=scope)
    for bad in (0, -1, 2.5, True, "10"):
        with pytest.raises(pybackward.ArgumentError):
            pybackward.Executor(max_while_steps=bad)


def test_timeout_names_the_op_and_the_step():
    t = time.monotonic()
    line = one_error_line(invoke("run", WHILE_STEP_0, *WHILE_RUN, "--max-steps", "100000000",
                                 "--timeout", "0.3"))
    assert time.monotonic() - t < 10
    assert f"{WHILE_STEP_0}: block 0, op 4 (while): timed out at step " in line, line
    assert "0.3 s" in line


def test_timeout_from_python_between_ops(monkeypatch):
    """Without loops the limit is checked between the ops of block 0."""
    import pybackward.interpreter.executor as interp
    clock = iter(range(0, 10**6, 5))          # every reading of the clock is 5 s later
    monkeypatch.setattr(interp.time, "monotonic", lambda: next(clock))
    prog = pybackward.load(FIT)
    with pytest.raises(pybackward.ExecutionLimitError, match=r"block 0, op 0 \(mul\): timed out before this op"):
        pybackward.Executor(timeout=1).run(prog, feed={"x": np.ones((2, 13), "float32")}, fetch_list=[])
    for bad in (0, -1, float("nan"), float("inf"), "1"):
        with pytest.raises(pybackward.ArgumentError):
            pybackward.Executor(timeout=bad)


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or sys.platform == "win32", reason="needs POSIX signals")
def test_ctrl_c_is_one_line_and_exit_130():
    # The CLI's own entry point; "ready" is printed once the imports are done,
    # so the SIGINT lands in the run, not in Python's start-up.
    script = ("import sys; import pybackward_cli.main as m; sys.stderr.write('ready\\n'); sys.stderr.flush(); "
              "sys.argv = ['pybackward'] + sys.argv[1:]; m.main()")
    args = ["run", str(WHILE_STEP_0), *map(str, WHILE_RUN), "--max-steps", "100000000"]
    p = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert p.stderr.readline() == "ready\n"
        time.sleep(1.5)         # load and start the loop (it would run for hours)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 130, (p.returncode, err)
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pybackward: interrupted"), lines
    # names the op; the step too when the signal lands inside one (not between steps)
    assert "block 0, op 4 (while)" in lines[0], lines


# --------------------------------------------------------------------------
# 5. Numeric options: ranges, NaN and infinities refused
# --------------------------------------------------------------------------
FIT_CHECK = ["check", FIT, "--loss", LOSS, "--params", FIT_DIR / "params.npz", "--feeds", FIT_DIR / "feeds.npz"]


@pytest.mark.parametrize("args", [
    [*FIT_CHECK, "--eps", "0"], [*FIT_CHECK, "--eps", "-1e-6"], [*FIT_CHECK, "--eps", "nan"],
    [*FIT_CHECK, "--eps", "inf"], [*FIT_CHECK, "--rtol", "nan"], [*FIT_CHECK, "--atol", "-1"],
    [*FIT_CHECK, "--rtol", "inf"], [*FIT_CHECK, "--max-elements", "-1"], [*FIT_CHECK, "--directions", "0"],
    ["run", FIT, "--fetch", LOSS, "--max-steps", "0"], ["run", FIT, "--fetch", LOSS, "--timeout", "0"],
    ["run", FIT, "--fetch", LOSS, "--timeout", "nan"], ["run", FIT, "--fetch", LOSS, "--timeout", "-5"],
    ["stats", FIT, "--batch", "0"], ["stats", FIT, "--top", "-1"],
    ["append", "--loss", LOSS, "--checkpoints", "auto", "--batch", "0", FIT, "{out}"],
    ["show", "--block", "-1", FIT], ["dot", "--block", "-2", FIT], ["diff", "-U", "-1", FIT, FIT],
    ["append", "--loss", LOSS, "--checkpoints", "auto", "--memory-budget", "nan", FIT, "{out}"],
    ["append", "--loss", LOSS, "--checkpoints", "auto", "--memory-budget", "0", FIT, "{out}"],
], ids=lambda a: "_".join(str(x).lstrip("-") for x in a if not isinstance(x, Path))[:60])
def test_bad_numeric_options_are_one_line(args, tmp_path):
    out = tmp_path / "out.pb"
    argv = [str(out) if a == "{out}" else a for a in args]
    line = one_error_line(invoke(*argv))
    assert line.startswith("error: ")
    assert not out.exists()


def test_check_gradients_validates_its_numbers():
    prog = pybackward.load(FIT)
    for kw in ({"eps": 0}, {"eps": float("nan")}, {"rtol": -1}, {"atol": float("inf")}, {"max_elements": -1},
               {"directions": 0}, {"eps": "1e-6"}, {"wrt": "fc_0.w_0"}, {"feed": [1, 2]}):
        with pytest.raises(pybackward.ArgumentError):
            pybackward.check_gradients(prog, LOSS, **kw)


# --------------------------------------------------------------------------
# 6. One var listed thousands of times in one input slot
# --------------------------------------------------------------------------
def _repeated(n: int) -> bytes:
    d = pb.ProgramDesc()
    d.ParseFromString(FIT.read_bytes())
    op = d.blocks[0].ops[3]                     # square(X=s0) -> sum(X=[s0] * n)
    op.type = "sum"
    op.inputs[0].arguments[:] = ["square_error_cost_0.tmp_0"] * n
    return d.SerializeToString()


def test_many_repeats_of_one_var_are_refused_before_the_pass():
    from pybackward.backward.guards import MAX_REPEATS_IN_SLOT
    prog = pybackward.loads(_repeated(50_000), source="rep.pb")
    before = pybackward.dumps(prog)
    t = time.monotonic()
    with pytest.raises(pybackward.ArgumentError) as e:
        pybackward.append_backward(LOSS, program=prog)
    assert time.monotonic() - t < 2            # before: 29 s and 380 MB
    msg = str(e.value)
    assert "rep.pb: block 0, op 3 (sum), var 'square_error_cost_0.tmp_0'" in msg
    assert "listed 50000 times in input 'X'" in msg and str(MAX_REPEATS_IN_SLOT) in msg
    assert pybackward.dumps(prog) == before
    with pytest.raises(pybackward.ArgumentError, match="50000 times"):
        pybackward.gradients([LOSS], ["fc_0.w_0"], program=prog)


def test_repeats_within_the_limit_still_work():
    from pybackward.backward.guards import MAX_REPEATS_IN_SLOT
    prog = pybackward.loads(_repeated(MAX_REPEATS_IN_SLOT))
    pairs = pybackward.append_backward(LOSS, program=prog)
    assert [p.name for p, _ in pairs] == ["fc_0.b_0", "fc_0.w_0"]


def test_repeats_do_not_make_memory_grow_with_the_count():
    """Peak Python memory of load + the refused append for 50 000 repeats is
    a small multiple of the file (before: ~2 KB per repeat in Python objects,
    ~7 KB per repeat of RSS)."""
    import tracemalloc
    data = _repeated(50_000)
    tracemalloc.start()
    try:
        prog = pybackward.loads(data)
        with pytest.raises(pybackward.ArgumentError):
            pybackward.append_backward(LOSS, program=prog)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * len(data), (peak, len(data))


# --------------------------------------------------------------------------
# 7. Appending to a program that already has a backward section
# --------------------------------------------------------------------------
def test_cli_refuses_a_file_with_a_backward_section(tmp_path):
    out = tmp_path / "out.pb"
    back = FIT_DIR / "backward.pb"
    line = one_error_line(invoke("append", "--loss", LOSS, back, out))
    assert str(back) in line and "already has a backward section" in line and "--force" in line
    assert "block 0, op 5 (fill_constant) has op_role 257 (backward)" in line, line
    assert not out.exists()
    line = one_error_line(invoke("gradients", "--target", LOSS, "--input", "fc_0.w_0", back, out))
    assert "already has a backward section" in line and not out.exists()
    line = one_error_line(invoke("check", back, "--loss", LOSS))
    assert "already has a backward section" in line


def test_a_grad_var_alone_counts_as_a_backward_section(tmp_path):
    d = pb.ProgramDesc()
    d.ParseFromString(FIT.read_bytes())
    v = d.blocks[0].vars.add()
    v.CopyFrom(d.blocks[0].vars[0])
    v.name = "fc_0.b_0@GRAD"
    f = tmp_path / "in.pb"
    f.write_bytes(d.SerializeToString())
    line = one_error_line(invoke("append", "--loss", LOSS, f, tmp_path / "out.pb"))
    assert "var 'fc_0.b_0@GRAD' is a gradient" in line


def test_force_appends_and_verify_catches_the_wrong_declarations(tmp_path):
    out, out2 = tmp_path / "out.pb", tmp_path / "out2.pb"
    r = invoke("append", "--loss", LOSS, "--force", FIT_DIR / "backward.pb", out)
    assert r.exit_code == 0, r.stderr
    from pybackward.backward.verify import verify_backward
    problems = verify_backward(pybackward.load(out))
    assert any("var 'fc_0.w_0@GRAD_0': gradient is float32[] but 'fc_0.w_0' is float32[13, 1]" in p
               for p in problems), problems
    r = invoke("append", "--loss", LOSS, "--force", "--verify", FIT_DIR / "backward.pb", out2)
    assert r.exit_code == 1 and "fc_0." in r.stderr and not out2.exists()


def test_the_library_still_appends_twice_in_one_process_as_paddle_does():
    from pybackward.backward.verify import verify_backward
    for case in ("append_twice", "two_gradients_calls"):
        for f in sorted((PROGRAMS / case).glob("*.pb")):
            assert verify_backward(pybackward.load(f)) == [], f


def test_verify_maps_renamed_grads_to_their_forward_var():
    from pybackward.backward.verify import forward_name
    assert forward_name("x@GRAD_0") == "x"
    assert forward_name("x@GRAD@RENAME@block0@1") == "x"
    assert forward_name("z@GRAD_slice_0@GRAD") == "z@GRAD_slice_0"
    assert forward_name("x") == "x"


# --------------------------------------------------------------------------
# 8. Library API misuse: PyBackwardError subclasses with a clear message
# --------------------------------------------------------------------------
def _calls():
    prog = pybackward.load(FIT)
    return [
        ("load(None)", lambda: pybackward.load(None)),
        ("load(123)", lambda: pybackward.load(123)),
        ("load(text=1)", lambda: pybackward.load(FIT, text=1)),
        ("loads(str)", lambda: pybackward.loads("blocks { idx: 0 }")),
        ("loads(None)", lambda: pybackward.loads(None)),
        ("loads(source=1)", lambda: pybackward.loads(FIT.read_bytes(), source=1)),
        ("save(None)", lambda: pybackward.save(None, "x.pb")),
        ("save(path=1)", lambda: pybackward.save(prog, 1)),
        ("dumps(None)", lambda: pybackward.dumps(None)),
        ("append_backward(checkpoints=123)", lambda: pybackward.append_backward(LOSS, program=prog, checkpoints=123)),
        ("append_backward(checkpoints={})", lambda: pybackward.append_backward(LOSS, program=prog,
                                                                              checkpoints={"a"})),
        ("append_backward(loss=1)", lambda: pybackward.append_backward(1, program=prog)),
        ("append_backward(program=1)", lambda: pybackward.append_backward(LOSS, program=1)),
        ("append_backward(aggregation=1)", lambda: pybackward.append_backward(LOSS, program=prog, aggregation=1)),
        ("append_backward(stop_edges='yes')", lambda: pybackward.append_backward(LOSS, program=prog,
                                                                                 stop_edges="yes")),
        ("append_backward(no_grad_set=5)", lambda: pybackward.append_backward(LOSS, program=prog, no_grad_set=5)),
        ("gradients(targets=1)", lambda: pybackward.gradients(1, ["x"], program=prog)),
        ("gradients(unconnected=1)", lambda: pybackward.gradients([LOSS], ["fc_0.w_0"], program=prog,
                                                                  unconnected=1)),
        ("calc_gradient(inputs=[1])", lambda: pybackward.calc_gradient([LOSS], [1], program=prog)),
        ("check_gradients(None)", lambda: pybackward.check_gradients(None, LOSS)),
        ("check_gradients(loss=1)", lambda: pybackward.check_gradients(prog, 1)),
        ("Executor(seed='a')", lambda: pybackward.Executor(seed="a")),
        ("Executor().run(None)", lambda: pybackward.Executor().run(None)),
        ("Executor().run(feed=[1])", lambda: pybackward.Executor().run(prog, feed=[1])),
        ("Executor().run(fetch_list='x')", lambda: pybackward.Executor().run(prog, fetch_list=LOSS)),
        ("Executor().run(scope={})", lambda: pybackward.Executor().run(prog, scope={})),
        ("memory(None)", lambda: pybackward.memory(None)),
        ("memory(batch_size=0)", lambda: pybackward.memory(prog, batch_size=0)),
        ("memory(batch_size='2')", lambda: pybackward.memory(prog, batch_size="2")),
        ("text.program_to_text(None)", lambda: pybackward.legacy.text.program_to_text(None)),
        ("grad_op_descs('mul')", lambda: pybackward.grad_op_descs("mul")),
        ("grad_op_descs(no_grad_set=[1])", lambda: pybackward.grad_op_descs(prog.global_block().ops[0], [1])),
        ("register_ops(None)", lambda: pybackward.register_ops(None)),
        ("load_arrays(None)", lambda: pybackward.load_arrays(None)),
        ("save_arrays(None)", lambda: pybackward.save_arrays(None, {})),
        ("save_arrays(arrays=1)", lambda: pybackward.save_arrays("x.npz", 1)),
        ("summary(None)", lambda: pybackward.summary(None)),
    ]


@pytest.mark.parametrize("i", range(len(_calls())), ids=[c[0] for c in _calls()])
def test_api_misuse_raises_a_pybackward_error(i):
    name, call = _calls()[i]
    with pytest.raises(pybackward.PyBackwardError) as e:
        call()
    assert str(e.value), name


def test_type_errors_are_still_type_errors():
    """Code that caught the TypeError Python raised before keeps working."""
    for call in (lambda: pybackward.load(None), lambda: pybackward.loads("text")):
        with pytest.raises(TypeError):
            call()
        with pytest.raises(pybackward.ArgumentTypeError):
            call()


def test_public_functions_are_all_covered():
    """Every public function and class exported by pybackward is in _calls()
    or is a plain data class; a new export needs an argument check here."""
    covered = {"load", "loads", "save", "dumps", "append_backward", "gradients", "calc_gradient",
               "check_gradients", "Executor", "memory", "text", "grad_op_descs", "register_ops",
               "load_arrays", "save_arrays", "summary"}
    exported = {n for n in dir(pybackward) if not n.startswith("_") and callable(getattr(pybackward, n))
                and not (isinstance(getattr(pybackward, n), type)
                         and issubclass(getattr(pybackward, n), (Exception, Warning)))}
    views = {"Program", "Block", "Operator", "Variable", "Scope"}
    assert exported - covered - views == set(), exported - covered - views


# --------------------------------------------------------------------------
# 9. Output paths
# --------------------------------------------------------------------------
def test_output_named_like_a_directory_is_refused(tmp_path):
    line = one_error_line(invoke("append", "--loss", LOSS, FIT, f"{tmp_path}/newdir/"))
    assert f"{tmp_path}/newdir/: names a directory" in line
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(pybackward.OutputError, match="names a directory"):
        pybackward.save(pybackward.load(FIT), f"{tmp_path}/newdir/")
    (tmp_path / "d").mkdir()
    line = one_error_line(invoke("convert", FIT, tmp_path / "d"))
    assert "is a directory" in line


def test_output_in_a_missing_directory_is_one_clear_line(tmp_path):
    line = one_error_line(invoke("run", FIT, "--fetch", LOSS, "--params", FIT_DIR / "params.npz",
                                 "--feeds", FIT_DIR / "feeds.npz", "--out", tmp_path / "no" / "r.npz"))
    assert "does not exist" in line


@pytest.mark.parametrize("length", [242, 250, 255])
def test_any_valid_output_name_works(length, tmp_path):
    name = "o" * (length - 3) + ".pb"
    assert len(name) == length
    r = invoke("append", "--loss", LOSS, FIT, tmp_path / name)
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / name).read_bytes() == FIT_BACKWARD
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_a_fifo_output_is_written_through_not_replaced(fifo):
    """`pybackward append IN /dev/null` used to replace /dev/null with a
    regular file (as root); a FIFO shows the same without touching /dev."""
    got = []

    def reader():
        with open(fifo, "rb") as f:
            got.append(f.read())
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        r = invoke("append", "--loss", LOSS, FIT, fifo)
        assert r.exit_code == 0, r.stderr
    finally:
        t.join(5)               # the reader may still be closing the FIFO: give it time first
        if t.is_alive():        # the bug: nothing was written to the FIFO; unblock the reader
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            t.join(5)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode), "the FIFO was replaced by a regular file"
    assert got == [FIT_BACKWARD]


def test_a_symlinked_output_keeps_its_link(tmp_path):
    target = tmp_path / "real.pb"
    target.write_bytes(b"old")
    link = tmp_path / "link.pb"
    link.symlink_to(target)
    assert invoke("append", "--loss", LOSS, FIT, link).exit_code == 0
    assert link.is_symlink() and target.read_bytes() == FIT_BACKWARD


def test_the_temp_file_name_is_short(tmp_path, monkeypatch):
    import pybackward.base.files as pfiles
    seen = []
    real = pfiles.tempfile.mkstemp

    def spy(*a, **k):
        fd, name = real(*a, **k)
        seen.append(os.path.basename(name))
        return fd, name
    monkeypatch.setattr(pfiles.tempfile, "mkstemp", spy)
    pybackward.save(pybackward.load(FIT), tmp_path / ("x" * 250 + ".pb"))
    assert seen and all(len(n) <= 32 for n in seen), seen


# --------------------------------------------------------------------------
# 10. Losses and parameters that cannot have gradients
# --------------------------------------------------------------------------
def _edited(edit) -> pybackward.Program:
    d = pb.ProgramDesc()
    d.ParseFromString(FIT.read_bytes())
    edit({v.name: v for v in d.blocks[0].vars})
    return pybackward.loads(d.SerializeToString(), source="edited.pb")


@pytest.mark.parametrize("dtype", ["COMPLEX64", "COMPLEX128"])
def test_a_complex_loss_is_refused(dtype):
    def edit(vs):
        vs[LOSS].type.dense_tensor.tensor.data_type = getattr(pb.VarType, dtype)
    prog = _edited(edit)
    with pytest.raises(pybackward.ArgumentError, match=f"var '{LOSS}': the loss must be a real floating-point "
                                                       f"tensor, not {dtype}"):
        pybackward.append_backward(LOSS, program=prog)


def test_a_tensor_array_loss_is_refused():
    def edit(vs):
        v = vs[LOSS]
        v.type.type = pb.VarType.DENSE_TENSOR_ARRAY
        v.type.tensor_array.tensor.CopyFrom(v.type.dense_tensor.tensor)
        v.type.ClearField("dense_tensor")
    prog = _edited(edit)
    with pytest.raises(pybackward.ArgumentError, match="not a DENSE_TENSOR_ARRAY"):
        pybackward.append_backward(LOSS, program=prog)


def _int_bias(vs):
    vs["fc_0.b_0"].type.dense_tensor.tensor.data_type = pb.VarType.INT32


def test_an_int_parameter_named_explicitly_is_an_error():
    prog = _edited(_int_bias)
    before = pybackward.dumps(prog)
    with pytest.raises(pybackward.ArgumentError, match="var 'fc_0.b_0': parameter_list names a INT32 parameter"):
        pybackward.append_backward(LOSS, program=prog, parameter_list=["fc_0.b_0", "fc_0.w_0"])
    assert pybackward.dumps(prog) == before


def test_an_int_parameter_by_default_is_skipped_with_a_warning():
    prog = _edited(_int_bias)
    with pytest.warns(pybackward.PyBackwardWarning, match="'fc_0.b_0' \\(INT32\\).*cannot have gradients"):
        pairs = pybackward.append_backward(LOSS, program=prog)
    assert [(p.name, g.name) for p, g in pairs] == [("fc_0.w_0", "fc_0.w_0@GRAD")]
    assert not prog.global_block().has_var("fc_0.b_0@GRAD")


def test_cli_prints_the_int_parameter_warning_on_one_line(tmp_path):
    prog = _edited(_int_bias)
    src = tmp_path / "in.pb"
    pybackward.save(prog, src)
    r = invoke("append", "--loss", LOSS, src, tmp_path / "out.pb")
    assert r.exit_code == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert len(lines) == 1 and "'fc_0.b_0' (INT32)" in lines[0], r.stderr


def test_no_golden_program_has_a_non_float_parameter():
    """So skipping them changes no golden output (they stay byte-identical)."""
    from pybackward.backward.guards import non_float_params
    for f in sorted(PROGRAMS.glob("*/forward.pb")):
        prog = pybackward.load(f)
        assert non_float_params(prog, [v.name for v in prog.global_block().all_parameters()]) == [], f
