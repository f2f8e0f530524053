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


# ==========================================================================
# Issue #36, "Hostile files, round 3": the file readers. Each case: one line
# on stderr and exit 2 (or the right result), in bounded time and memory
# (CPU < 5 s, peak RSS < 300 MB), nothing written, the inputs untouched. The
# big files are generated here; small ones are corpus cases (tests/bad_inputs,
# make_corpus.py `files_cases`).
# ==========================================================================
import io  # noqa: E402
import resource  # noqa: E402
import struct  # noqa: E402
import zipfile  # noqa: E402
import zlib  # noqa: E402

from pybackward.tensors import paddle_files as pf  # noqa: E402
from pybackward.tensors import safe_pickle  # noqa: E402

FIT_FEEDS = FIT_DIR / "feeds.npz"
FIT_PARAMS = FIT_DIR / "params.npz"
CPU_LIMIT_S = 5.0
RSS_LIMIT_MB = 300
#: The child's address space: a reader that asks for the machine (the bugs) gets a
#: MemoryError, and the test fails, instead of the machine swapping.
AS_LIMIT = 3 << 30


#: Runs the CLI as `python -m pybackward_cli.main` does, and at exit writes the
#: process's own peak RSS (VmHWM, in kB) to the file descriptor given first: wait4's
#: ru_maxrss would start from the RSS of the pytest process that forked it.
_PEAK_REPORTING_MAIN = """
import atexit, os, runpy, sys
fd = int(sys.argv.pop(1))
def report():
    try:
        with open('/proc/self/status') as f:
            peak = next((ln.split()[1] for ln in f if ln.startswith('VmHWM:')), '')
    except OSError:
        peak = ''
    os.write(fd, peak.encode())
atexit.register(report)
runpy.run_module('pybackward_cli.main', run_name='__main__', alter_sys=True)
"""


def measured(*args, timeout: float = 60) -> tuple[subprocess.CompletedProcess, float, float]:
    """The CLI in a process of its own: (result, CPU seconds from wait4's accounting of
    that one child, its own peak RSS in MB). Killed (rc -9) after `timeout` seconds;
    its address space is limited to AS_LIMIT."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))
    peak_r, peak_w = os.pipe()
    p = subprocess.Popen([sys.executable, "-c", _PEAK_REPORTING_MAIN, str(peak_w), *map(str, args)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limit, pass_fds=(peak_w,))
    os.close(peak_w)
    got: dict[str, bytes] = {}
    readers = [threading.Thread(target=lambda k, f: got.__setitem__(k, f.read()), args=(k, f))
               for k, f in (("out", p.stdout), ("err", p.stderr), ("peak", os.fdopen(peak_r, "rb")))]
    for t in readers:
        t.start()
    timer = threading.Timer(timeout, p.kill)
    timer.start()
    try:
        _, status, usage = os.wait4(p.pid, 0)
    finally:
        timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    for t in readers:
        t.join()
    p.stdout.close()
    p.stderr.close()
    result = subprocess.CompletedProcess(args, p.returncode, got["out"].decode(errors="replace"),
                                         got["err"].decode(errors="replace"))
    peak_mb = int(got["peak"]) / 1024 if got["peak"] else usage.ru_maxrss / 1024
    return result, usage.ru_utime + usage.ru_stime, peak_mb


def bounded(*args, code: int = 2, timeout: float = 60) -> str:
    """Run the CLI; it ends with `code` within the CPU and memory bounds. Its stderr line
    (exactly one, when code != 0), or its stdout."""
    r, cpu, rss = measured(*args, timeout=timeout)
    assert r.returncode != -signal.SIGKILL, f"hung: killed after {timeout} s"
    assert r.returncode >= 0, f"killed by signal {-r.returncode}: {r.stderr[-2000:]}"
    line = one_error_line(r, code) if code else r.stdout
    if code == 0:
        assert r.returncode == 0, r.stderr[-2000:]
    assert rss < RSS_LIMIT_MB, f"{rss:.0f} MB peak RSS"
    assert cpu < CPU_LIMIT_S, f"{cpu:.1f} s of CPU"
    return line


def untouched(d: Path):
    """A context that checks no file under `d` changed (bytes, mtime), appeared or went
    (a directory's own mtime may change: a failed write may have made and removed a
    temporary file in it)."""
    def state() -> dict:
        return {p: (None, 0) if p.is_dir() and not p.is_symlink() else
                (p.read_bytes() if p.is_file() else None, p.lstat().st_mtime_ns) for p in sorted(d.rglob("*"))}

    class _Check:
        def __enter__(self):
            self.before = state()

        def __exit__(self, *exc):
            if exc[0] is None:
                after = state()
                assert after == self.before, sorted(set(after) ^ set(self.before)) or "a file changed"
    return _Check()


# -- generators ---------------------------------------------------------------
def pk_text(s: str) -> bytes:
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def fit_params_pickle(put: bytes = b"") -> bytes:
    """fit_a_line's parameters as a protocol-2 .pdparams, with `put` right after the dict."""
    with np.load(FIT_PARAMS) as z:
        plain = {k: z[k] for k in z.files}
    data = __import__("pickle").dumps(plain, protocol=2)
    assert data[:3] == b"\x80\x02}"
    return data[:3] + put + data[3:]


def nested_key_pickle(depth: int) -> bytes:
    """{((((...)))): 'v'}: a tuple nested `depth` deep as a dict key (a byte a level)."""
    return b"\x80\x04}" + b")" + b"\x85" * depth + b"\x8c\x01vs."


def dag_pickle(levels: int = 40) -> bytes:
    """numpy.dtype(t40), where t(i+1) = (ti, ti): 2^40 leaves in ~300 bytes."""
    body = b"\x80\x04cnumpy\ndtype\nN\x85q\x000"
    for i in range(levels):
        body += b"h" + bytes([i]) + b"h" + bytes([i]) + b"\x86q" + bytes([i + 1]) + b"0"
    return body + b"h" + bytes([levels]) + b"\x85R."


def array_pickle(dims: bytes) -> bytes:
    """{'w': array} whose shape's opcodes are `dims` (no data)."""
    return (b"\x80\x04}\x8c\x01wcnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85C\x01b\x87R"
            b"(K\x01(" + dims + b"tcnumpy\ndtype\n\x8c\x02f4\x89\x88\x87R(K\x03\x8c\x01<NNN"
            b"J\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89C\x00tbs.")


def colliding_keys_pickle(n: int) -> bytes:
    """{k*(2^61-1): None for k in 1..n}: int keys whose hashes are all 0."""
    m = 2**61 - 1
    keys = b"".join(b"\x8a" + bytes([((i * m).bit_length() + 8) // 8]) +
                    (i * m).to_bytes(((i * m).bit_length() + 8) // 8, "little", signed=True) + b"N"
                    for i in range(1, n + 1))
    return b"\x80\x04}(" + keys + b"u."


def tensor_record(dims, data: bytes = b"") -> bytes:
    desc = pb.VarType.TensorDesc(data_type=pb.VarType.FP32, dims=dims).SerializeToString()
    return struct.pack("<IQIi", 0, 0, 0, len(desc)) + desc + data


def zip_listing_one_member(times: int, size: int, declared: int | None = None) -> bytes:
    """A .npz whose directory lists one deflated w.npy of `size` zero bytes of data
    `times` times (the data deflated in 1 MiB pieces: never `size` bytes in memory);
    `declared`: the member's size as its headers give it, if not the true one."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": (size // 4,)})
    head = buf.getvalue()
    comp, zeros = zlib.compressobj(9, zlib.DEFLATED, -15), bytes(1 << 20)
    pieces, crc = [comp.compress(head)], zlib.crc32(head)
    for _ in range(size >> 20):
        pieces.append(comp.compress(zeros))
        crc = zlib.crc32(zeros, crc)
    data = b"".join(pieces) + comp.flush()
    usize = declared or len(head) + size
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc, len(data), usize, 5, 0) + b"w.npy"
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, crc, len(data), usize,
                          5, 0, 0, 0, 0, 0, 0) + b"w.npy"
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, times, times, len(central) * times,
                      len(local) + len(data), 0)
    return local + data + central * times + end


def npz_with_bomb(name: str, size: int) -> bytes:
    """fit_a_line's params, and a deflate bomb of `size` zeros under `name`."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf, np.load(FIT_PARAMS) as z:
        for k in z.files:
            one = io.BytesIO()
            np.save(one, z[k])
            zf.writestr(k + ".npy", one.getvalue())
    with zipfile.ZipFile(buf, "a", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        with zf.open(name, "w", force_zip64=True) as f:
            zeros = bytes(1 << 20)
            for _ in range(size >> 20):
                f.write(zeros)
    return buf.getvalue()


# -- pickles: crashes and machine-sized allocations from small files ----------
def test_a_key_nested_a_million_deep_is_refused_not_a_crash(tmp_path):
    """1 MB: {((((...)))): 'v'} 10^6 deep. Python's unpickler hashed it recursively:
    SIGSEGV, for `convert` and for `append --run` reading m.pdparams beside m.pdmodel."""
    m = tmp_path / "m.pdparams"
    m.write_bytes(nested_key_pickle(10**6))
    (tmp_path / "m.pdmodel").write_bytes(FIT.read_bytes())
    with untouched(tmp_path):
        line = bounded("convert", m, tmp_path / "out.npz")
        assert str(m) in line and "nested more than 100 deep" in line, line
        line = bounded("append", "--loss", LOSS, "--run", "--feeds", FIT_FEEDS, tmp_path / "m.pdmodel",
                       tmp_path / "out.pb")
        assert str(m) in line and "nested more than 100 deep" in line, line


@pytest.mark.parametrize("memo_id", [2**27, 2**30, 2**32 - 1])
def test_a_huge_memo_id_costs_one_entry(tmp_path, memo_id):
    """An 11-byte LONG_BINPUT 2^27 took 2 GiB (2^30: 16 GiB): the memo was sized by
    the id. Now an id costs one entry, and the file's values are read right."""
    p = tmp_path / "p.pdparams"
    p.write_bytes(fit_params_pickle(put=b"r" + struct.pack("<I", memo_id)))
    with untouched(tmp_path):
        out = bounded("run", FIT, "--fetch", LOSS, "--params", p, "--feeds", FIT_FEEDS, code=0)
    want = sh("run", FIT, "--fetch", LOSS, "--params", FIT_PARAMS, "--feeds", FIT_FEEDS).stdout
    assert out == want and LOSS in out


def test_a_dag_in_a_refusal_is_not_printed(tmp_path):
    """348 bytes handing numpy.dtype a DAG of 2^40 leaves: the refusal repr()'d it
    (2.3 GB, 80 s, then the machine). Messages describe values without walking them."""
    p = tmp_path / "dag.pdparams"
    p.write_bytes(dag_pickle(40))
    with untouched(tmp_path):
        line = bounded("convert", p, tmp_path / "out.npz", timeout=30)
    assert "numpy.dtype(a tuple of 2 items)" in line and len(line) < 400, line


@pytest.mark.parametrize("what,data,fragment", [
    ("100k dims", array_pickle(b"K\x02" * 100_000), "100000 dims (NumPy holds at most 64)"),
    ("20k dims of 2^62", array_pickle((b"\x8a\x08" + struct.pack("<q", 2**62)) * 20_000), "20000 dims"),
    ("20k colliding int keys", colliding_keys_pickle(20_000), "more than 1000 dict keys"),
], ids=["100k_dims", "20k_dims_of_2_62", "20k_colliding_keys"])
def test_dims_and_keys_cost_what_reading_them_costs(tmp_path, what, data, fragment):
    """100 000 dims, or hash-colliding int keys, made the reader quadratic (50 s for
    200 KB), and the element count was multiplied out before any bound, its message
    failing at 4 300 digits. Dims and key kinds are checked as the opcodes are read."""
    p = tmp_path / "p.pdparams"
    p.write_bytes(data)
    with untouched(tmp_path):
        line = bounded("convert", p, tmp_path / "out.npz")
    assert str(p) in line and fragment in line and len(line) < 400, line


def test_build_never_changes_the_reader(tmp_path):
    """A pickle's BUILD could set attributes of the reader's own module functions
    (`__defaults__` of the one standing for numpy.dtype): nothing ran, but data
    changed the reader. BUILD now fills only the array and dtype stand-ins."""
    def snapshot():
        return [(v, getattr(v, "__defaults__", None), getattr(v, "__kwdefaults__", None),
                 dict(getattr(v, "__dict__", None) or {})) for v in safe_pickle.ALLOWED_GLOBALS.values()]
    before = snapshot()
    p = tmp_path / "build.pdparams"
    for target in (b"cnumpy\ndtype\n", b"cnumpy\nndarray\n", b"c_codecs\nencode\n",
                   b"cnumpy.core.multiarray\n_reconstruct\n", b"}", b"]"):
        for state in (b"N}" + pk_text("__defaults__") + pk_text("x") + b"\x85s\x86",     # (None, {slots})
                      b"}" + pk_text("__kwdefaults__") + b"}s"):                        # {__dict__}
            p.write_bytes(b"\x80\x04}" + pk_text("a") + target + state + b"bs.")
            with pytest.raises(safe_pickle.RefusedPickleError, match="BUILD fills only numpy arrays and dtypes"):
                pf.load_arrays(p)
    assert snapshot() == before
    assert sorted(pf.load_arrays(FIT_DIR / "params.npz")) == ["fc_0.b_0", "fc_0.w_0"]


# -- .npz: names, duplicates and declared sizes before decompressing ----------
def test_an_npz_listing_one_member_2000_times_is_refused_at_once(tmp_path):
    """~460 KB whose zip directory lists one 256 MB member 2 000 times: np.load
    decompressed it 2 000 times (past 60 s). Duplicates are refused before any work."""
    p = tmp_path / "dup.npz"
    p.write_bytes(zip_listing_one_member(2000, 256 << 20))
    with untouched(tmp_path):
        line = bounded("run", FIT, "--fetch", LOSS, "--params", p, "--feeds", FIT_FEEDS, timeout=60)
    assert str(p) in line and "array 'w' is in the archive twice" in line, line


@pytest.mark.slow
@pytest.mark.parametrize("beside", [False, True], ids=["named", "params_npz_beside_IN"])
def test_a_deflate_bomb_under_a_name_nobody_reads_is_never_decompressed(tmp_path, beside):
    """1 MB: fit_a_line's params and 1 GiB of zeros deflated as `junk.txt`. np.load
    inflated it (1 GiB) before its name was checked, for --params and for params.npz
    beside IN (the documented default: read without being named). Names first."""
    p = tmp_path / "params.npz"
    p.write_bytes(npz_with_bomb("junk.txt", 1 << 30))
    prog = tmp_path / "m.pb"
    prog.write_bytes(FIT.read_bytes())
    args = ["run", prog, "--fetch", LOSS, "--feeds", FIT_FEEDS] + ([] if beside else ["--params", p])
    with untouched(tmp_path):
        line = bounded(*args)
    assert str(p) in line and "'junk.txt' is not an array" in line, line


def test_an_npz_member_may_not_declare_more_than_deflate_can_hold(tmp_path):
    """A deflated member's declared size is checked against its compressed size
    (deflate's 1032:1) before it is inflated; a real bomb under a real name is the
    array it declares, read in pieces."""
    p = tmp_path / "w.npz"
    p.write_bytes(zip_listing_one_member(1, 64 << 20))
    assert pf.load_arrays(p)["w"].shape == (16 << 20,)       # 64 MB of zeros in 64 KB of file: read
    p.write_bytes(zip_listing_one_member(1, 64 << 20, declared=2**31))
    with pytest.raises(pybackward.ArrayFileError, match=r"declares 2147483648 bytes from \d+ compressed, "
                                                        "more than the zip can hold"):
        pf.load_arrays(p)


# -- Paddle tensor files: dims checked, linear time ---------------------------
@pytest.mark.parametrize("dims,fragment", [
    ([2] * 200_000, "200000 dims (NumPy holds at most 64)"),
    ([2**62] * 300, "300 dims"),
    ([1] * 65, "65 dims"),
    ([2**62, 2**62, 0], "more than 2^63 bytes"),
], ids=["200k_dims", "300_dims_of_2_62", "65_dims", "2_62_2_62_0"])
def test_tensor_file_dims_are_checked_before_they_are_multiplied(tmp_path, dims, fragment):
    """Tracebacks (65 dims; [2^62, 2^62, 0]; 300 dims of 2^62, whose message failed at
    4 300 digits), and quadratic time for 200k dims."""
    d = tmp_path / "vars"
    d.mkdir()
    (d / "w").write_bytes(tensor_record(dims, bytes(4) if dims == [1] * 65 else b""))
    with untouched(tmp_path):
        line = bounded("convert", f"{d}/", tmp_path / "out.npz")
    assert f"{d / 'w'}: tensor 'w': " in line and fragment in line and len(line) < 400, line


# -- --ops rules files ----------------------------------------------------------
@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_ops_dev_zero_is_refused_without_reading(tmp_path):
    """`--ops /dev/zero` read until memory ran out."""
    line = bounded("append", "--ops", "/dev/zero", "--loss", LOSS, FIT, tmp_path / "out.pb", timeout=30)
    assert "/dev/zero: is a character device, not a regular file" in line, line
    assert not (tmp_path / "out.pb").exists()


def test_ops_fifo_is_refused_without_blocking(fifo, tmp_path):
    """`--ops FIFO` blocked for ever."""
    line = bounded("append", "--ops", fifo, "--loss", LOSS, FIT, tmp_path / "out.pb", timeout=30)
    assert f"{fifo}: is a FIFO (named pipe), not a regular file" in line, line


def test_ops_signature_does_not_backtrack(tmp_path):
    """A 120 KB signature line backtracked for 47 s (and more: the pattern was quadratic)."""
    rules = tmp_path / "rules.yaml"
    rules.write_text("- backward_op : g\n  forward : f() -> x" + " " * 120_000 + "y\n"
                     "  args : (Tensor X)\n  output : Tensor(X@GRAD)\n")
    with untouched(tmp_path):
        line = bounded("append", "--ops", rules, "--loss", LOSS, FIT, tmp_path / "out.pb", timeout=60)
    assert f"{rules}:1: forward signature 'f() -> x" in line and "declares no output" in line, line
    assert len(line) < 400, line


@pytest.mark.parametrize("text,fragment", [
    ('[{"backward_op": ["g"], "forward": "f (Tensor X) -> Tensor(Out)", "args": "(Tensor Out@GRAD)",'
     ' "output": "Tensor(X@GRAD)"}]', "entry 1: 'backward_op' is a list"),
    ('[{"op": null, "signature": "f (Tensor X) -> Tensor(Out)"}]', "'op' is null"),
    ("[" * 200_000 + "]" * 200_000, "nested too deep"),
    ('[{"backward_op": "g", "forward": 1' + "0" * 5000 + "}]", "not valid JSON"),
], ids=["list_value", "null_value", "nested_200k", "5000_digit_number"])
def test_json_rules_with_values_that_are_not_text(tmp_path, text, fragment):
    """JSON rules with non-string values or 200k nesting ended in tracebacks."""
    rules = tmp_path / "rules.json"
    rules.write_text(text)
    with untouched(tmp_path):
        line = bounded("append", "--ops", rules, "--loss", LOSS, FIT, tmp_path / "out.pb")
    assert str(rules) in line and fragment in line, line


def test_a_rule_with_20000_slots_is_read_in_linear_time(tmp_path):
    """Slot names were matched by scanning every slot for every argument (quadratic)."""
    from pybackward.ops import custom
    n = 20_000
    rules = tmp_path / "rules.yaml"
    rules.write_text("- backward_op : g\n  forward : f (" + ", ".join(f"Tensor X{i}" for i in range(n)) + ") -> "
                     + ", ".join(f"Tensor(O{i})" for i in range(n)) + "\n  args : ("
                     + ", ".join(f"Tensor o{i}_grad" for i in range(n)) + ")\n  output : "
                     + ", ".join(f"Tensor X{i}@GRAD" for i in range(n)) + "\n")
    t = time.process_time()
    (opdef,) = custom.load_rules(rules)
    assert time.process_time() - t < 2.0
    assert opdef.grad.inputs[-1] == f"O{n - 1}@GRAD" and len(opdef.grad.outputs) == n


# -- lost data: directory writes all or nothing, names the reader reads ---------
MLP_VARS = PROGRAMS.parent / "paddle_files" / "mlp" / "vars"


def test_convert_into_a_directory_is_all_or_nothing(tmp_path):
    """`convert new.npz d/` failed on its third array after replacing the first two
    in d/: d/ then mixed two checkpoints. Everything is checked before anything is
    written; a failure while writing leaves d/ as it was."""
    d = tmp_path / "d"
    d.mkdir()
    for f in MLP_VARS.iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    new = tmp_path / "new.npz"
    np.savez(new, **{"fc_0.b_0": np.ones(8, np.float32), "fc_0.w_0": np.ones((4, 8), np.float32),
                     "z": np.array(["not a number"])})
    with untouched(tmp_path):
        line = bounded("convert", new, f"{d}/")
        assert "'z' is not a numeric array" in line, line


def test_a_write_that_fails_midway_leaves_the_directory_as_it_was(tmp_path, monkeypatch):
    """A fault after two of three files are written (a full disk): none replaced,
    no temporary file left, no directory made for them stays."""
    from pybackward.tensors import paddle_files
    d = tmp_path / "d"
    d.mkdir()
    (d / "a").write_bytes(b"old a")
    (d / "keep").write_bytes(b"someone else's")
    real = paddle_files.encode_tensor
    calls = []

    def failing(arr, lod=()):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(arr, lod)
    monkeypatch.setattr(paddle_files, "encode_tensor", failing)
    with untouched(tmp_path):
        with pytest.raises(pybackward.OutputError, match="No space left on device"):
            pf.save_arrays(f"{d}/", {"a": np.ones(2, np.float32), "sub/b": np.ones(2, np.float32),
                                     "c": np.ones(2, np.float32)})
    assert sorted(p.name for p in d.iterdir()) == ["a", "keep"]
    monkeypatch.setattr(paddle_files, "encode_tensor", real)
    pf.save_arrays(f"{d}/", {"a": np.ones(2, np.float32), "sub/b": np.zeros(2, np.float32)})
    assert sorted(p.relative_to(d).as_posix() for p in d.rglob("*")) == ["a", "keep", "sub", "sub/b"]
    assert (d / "keep").read_bytes() == b"someone else's"
    assert pf.decode_tensor((d / "sub" / "b").read_bytes())[0].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("key", [".hidden", "sub/.x", "model.pb", "w.PDPARAMS", "__model__", "sub/__params__"])
def test_the_directory_writer_refuses_names_its_reader_skips(tmp_path, key):
    """`.hidden`, `model.pb`, `__model__`... were written, and reading the directory
    back skipped them: the array was lost on the round trip."""
    with pytest.raises(pybackward.ArrayFileError, match="reading the directory skips"):
        pf.save_arrays(f"{tmp_path}/d/", {"w": np.ones(1, np.float32), key: np.ones(1, np.float32)})
    assert not (tmp_path / "d").exists()
    assert pf.skipped_name(key)


# -- what a program file can do: --params DIR/ stays inside DIR -----------------
def _fit_with_var_named(name: str) -> bytes:
    prog = pybackward.load(FIT)
    desc = pb.ProgramDesc()
    desc.ParseFromString(pybackward.dumps(prog))
    for v in desc.blocks[0].vars:
        if v.name == "fc_0.w_0":
            v.name = name
    for op in desc.blocks[0].ops:
        for slot in list(op.inputs) + list(op.outputs):
            slot.arguments[:] = [name if a == "fc_0.w_0" else a for a in slot.arguments]
    return desc.SerializeToString()


def test_params_dir_never_follows_a_symlink_out_of_it(tmp_path):
    """A program naming `link/fc_0.w_0`, with `link` a symlink in DIR to elsewhere:
    `--params DIR/` read any file the user can. Now: one line, exit 2."""
    outside = tmp_path / "outside"
    outside.mkdir()
    with np.load(FIT_PARAMS) as z:
        (outside / "fc_0.w_0").write_bytes(pf.encode_tensor(z["fc_0.w_0"]))
        d = tmp_path / "d"
        d.mkdir()
        (d / "fc_0.b_0").write_bytes(pf.encode_tensor(z["fc_0.b_0"]))
    (d / "link").symlink_to(outside)
    prog = tmp_path / "m.pb"
    prog.write_bytes(_fit_with_var_named("link/fc_0.w_0"))
    with untouched(tmp_path):
        line = bounded("run", prog, "--fetch", LOSS, "--params", f"{d}/", "--feeds", FIT_FEEDS)
    assert f"{d}/link/fc_0.w_0: leads out of {d}/" in line, line
    # Without a program: a file symlinked out of the directory is not read either, nor written through.
    (d / "link").unlink()
    (d / "fc_0.w_0").symlink_to(outside / "fc_0.w_0")
    with untouched(tmp_path):
        line = bounded("convert", f"{d}/", tmp_path / "out.npz")
        assert f"{d}/fc_0.w_0: leads out of {d}/" in line, line
        line = bounded("convert", FIT_PARAMS, f"{d}/")
        assert f"{d}/fc_0.w_0: leads out of {d}/" in line, line


# ==========================================================================
# Issue #36, second half: outputs that are inputs, names with control
# characters, quadratic views, a FIFO under `run --files`, suggestions on long
# names, the text reader. Each: one line and exit 2 (or the right result), CPU
# under 5 s and peak RSS under 300 MB, nothing written, the inputs untouched.
# Small cases are corpus cases (make_corpus.py `outputs_cases`); these need
# links, FIFOs, directories or big generated files.
# ==========================================================================
FILE_OPS = Path(__file__).resolve().parent.parent / "testdata" / "file_ops"


# -- outputs that are inputs: one refusal for every command that writes ------
def test_out_dir_never_writes_one_input_over_another(tmp_path, monkeypatch):
    """`append --out-dir x x/f.pb f.pb`: f.pb's result went to x/f.pb, replacing that input
    (exit 0), or replaced it before it was read. Now the whole batch is refused first."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "f.pb").write_bytes(FIT.read_bytes())
    (tmp_path / "f.pb").write_bytes(FIT_BACKWARD)        # another program: its result would land on x/f.pb
    with untouched(tmp_path):
        r = sh("append", "--loss", LOSS, "--force", "--out-dir", "x", "x/f.pb", "f.pb")
        line = one_error_line(r)
    assert line.startswith("error: x/f.pb: would overwrite the input x/f.pb"), line


@pytest.mark.parametrize("link", ["symlink", "hardlink", "same"])
def test_an_output_that_is_the_input_is_refused(tmp_path, link):
    """OUT a symlink or a hard link to IN (or IN itself) replaced the input without --in-place,
    for every command that writes."""
    src = tmp_path / "m.pb"
    src.write_bytes(FIT.read_bytes())
    params = tmp_path / "p.npz"
    params.write_bytes(FIT_PARAMS.read_bytes())

    def alias(target: Path, name: str) -> Path:
        if link == "same":
            return target
        p = tmp_path / name
        if link == "symlink":
            p.symlink_to(target.name)
        else:
            os.link(target, p)
        return p
    out, pout, dout = alias(src, "out.pb"), alias(params, "out.npz"), alias(src, "m.dot")
    with untouched(tmp_path):
        for args, refused in (
                (["append", "--loss", LOSS, src, out], out),
                (["gradients", "--target", LOSS, "--input", "fc_0.w_0", src, out], out),
                (["run", src, "--fetch", LOSS, "--params", params, "--feeds", FIT_FEEDS, "--out", pout], pout),
                (["dot", src, "-o", dout if link != "same" else src], dout if link != "same" else src)):
            line = one_error_line(invoke(*args))
            assert f"error: {refused}: would overwrite the input" in line, (args[0], line)


def test_run_out_dir_never_writes_over_the_params_dir(tmp_path):
    """`run --params d/ --out d/`: the fetched values replaced the per-var files read."""
    d = tmp_path / "d"
    pf.save_arrays(f"{d}/", dict(np.load(FIT_PARAMS)))
    with untouched(tmp_path):
        line = one_error_line(invoke("run", FIT, "--fetch", "fc_0.w_0", "--params", f"{d}/", "--feeds",
                                     FIT_FEEDS, "--out", f"{d}/"))
    assert f"{d}/fc_0.w_0: would overwrite the input {d}/" in line, line
    # A new file in another directory is fine.
    r = invoke("run", FIT, "--fetch", "fc_0.w_0", "--params", f"{d}/", "--feeds", FIT_FEEDS,
               "--out", tmp_path / "o.npz")
    assert r.exit_code == 0, r.output


def test_the_refusal_is_one_helper():
    """Every command that writes calls cli/common.py's refusal (not a check of its own)."""
    cli_dir = Path(__file__).resolve().parent.parent / "cli"
    for name in ("cmd_append.py", "cmd_run.py", "cmd_dot.py"):
        assert "refuse_outputs_over_inputs(" in (cli_dir / name).read_text(), name
    assert "would overwrite the input" not in (cli_dir / "cmd_append.py").read_text()


# -- names with control characters --------------------------------------------
FORGED = "fc_0.w_0\x1b[2K\x1b[1A\rwrote out.pb\n\u202e\x07"


@pytest.fixture
def forged(tmp_path) -> Path:
    """fit_a_line with its weight named FORGED: ESC sequences that erase the line and move
    the cursor, a CR and a newline to forge "wrote out.pb", a bidi override, a bell."""
    p = tmp_path / "forged.pb"
    p.write_bytes(_fit_with_var_named(FORGED))
    return p


def _clean(text: str) -> None:
    bad = sorted({c for c in text if (ord(c) < 32 and c != "\n") or 0x7f <= ord(c) < 0xa0 or c == "\u202e"})
    assert not bad, f"control characters reach the terminal: {bad!r}"
    assert not any(ln.startswith("wrote out.pb") for ln in text.splitlines()), "a forged line"


@pytest.mark.parametrize("args", [
    ["show", "{p}"], ["show", "--summary", "{p}"], ["show", "--format", "paddle", "{p}"],
    ["show", "--flat", "--all-attrs", "{p}"], ["diff", FIT, "{p}"],
    ["append", "--loss", LOSS, "--pairs", "{p}", "{out}"],
    ["run", "{p}", "--fetch", FORGED, "--params", "{params}", "--feeds", FIT_FEEDS],
    ["run", "{p}", "--fetch", FORGED[:-1] + "?", "--params", "{params}", "--feeds", FIT_FEEDS],
    ["append", "--loss", FORGED, "{p}", "{out}"],
    ["dot", "{p}"]], ids=lambda a: "_".join(str(x).strip("-{}") for x in a[:2]))
def test_control_characters_in_names_never_reach_the_terminal(forged, tmp_path, args):
    with np.load(FIT_PARAMS) as z:
        arrays = {k: z[k] for k in z.files}
    arrays[FORGED] = arrays.pop("fc_0.w_0")
    np.savez(tmp_path / "params.npz", **arrays)
    subs = {"{p}": str(forged), "{out}": str(tmp_path / "o.pb"), "{params}": str(tmp_path / "params.npz")}
    r = sh(*[subs.get(str(a), a) for a in args])
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    _clean(r.stdout)
    _clean(r.stderr)
    assert "\\x1b[2K" in r.stdout + r.stderr or args[0] == "dot", (r.stdout[-500:], r.stderr[-500:])


def test_pictures_of_such_names_are_valid_svg_and_html(forged, tmp_path):
    """Graphviz wrote an SVG no XML parser (no browser) opens; the HTML view carried the
    characters too."""
    import xml.dom.minidom
    from pybackward.views import dot as dot_view, graph as graph_view, html as html_view
    g = graph_view.build_graph(pybackward.load(forged))
    text = dot_view.graph_to_dot(g)
    page = html_view.graph_to_html(g)
    for what in (text, page):
        assert not any(ord(c) < 32 and c != "\n" for c in what), "a control character in the picture"
        assert "\\x1b[2K" in what.replace("\\\\", "\\")
    if dot_view.dot_program() is None:
        pytest.skip("Graphviz's dot is not installed")
    svg = tmp_path / "g.svg"
    dot_view.render(text, svg)
    xml.dom.minidom.parse(str(svg))


def test_printable_keeps_ordinary_names_and_escapes_the_rest():
    from pybackward.base.names import printable
    for name in ("fc_0.w_0", "层_0.w", "x@GRAD@RENAME@block0@0", "a b", "é"):
        assert printable(name) == name
    assert printable("a\x1b[2Kb\rc\nd\u202ee\x9b\ud800") == "a\\x1b[2Kb\\x0dc\\x0ad\\u202ee\\x9b\\ud800"


# -- views that were quadratic ---------------------------------------------------
def _one_var_program(n: int, change_at: int | None = None) -> bytes:
    """n ops reading and writing one var, relu and tanh in turn: every op one of two signatures."""
    d = pb.ProgramDesc()
    b0 = d.blocks.add(idx=0, parent_idx=-1)
    v = b0.vars.add(name="x")
    v.type.type = pb.VarType.DENSE_TENSOR
    v.type.dense_tensor.tensor.data_type = pb.VarType.FP32
    v.type.dense_tensor.tensor.dims.extend([2, 3])
    for k in range(n):
        op = b0.ops.add(type="sigmoid" if k == change_at else ("relu", "tanh")[k % 2])
        op.inputs.add(parameter="X", arguments=["x"])
        op.outputs.add(parameter="Out", arguments=["x"])
    return d.SerializeToString()


def test_diff_of_16000_ops_sharing_signatures_is_not_quadratic(tmp_path):
    """28 s before (difflib's LCS with every item repeated); now n log n."""
    a, b = tmp_path / "a.pb", tmp_path / "b.pb"
    a.write_bytes(_one_var_program(16000))
    b.write_bytes(_one_var_program(16000, change_at=8000))
    r, cpu, rss = measured("diff", a, b)
    assert r.returncode == 1, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "programs differ: 1 op added, 1 op removed", r.stdout[-500:]
    assert "[8000]" in r.stdout
    assert cpu < CPU_LIMIT_S and rss < RSS_LIMIT_MB, (cpu, rss)
    # `--expect GOLDEN` compares through the same alignment (check_golden).
    from pybackward.views.diff import check_golden
    start = time.process_time()
    res = check_golden(pybackward.load(b), a)
    assert not res.equal and time.process_time() - start < CPU_LIMIT_S


def test_opcodes_are_a_valid_alignment_and_difflibs_when_small():
    import difflib
    import random
    from pybackward.views import diff as diff_view
    rng = random.Random(36)
    for trial in range(60):
        n = rng.choice([5, 50, 700, 3000])
        k = rng.choice([1, 2, 3, 40, n])
        a = [rng.randrange(k) for _ in range(n)]
        b = [x for x in a if rng.random() > 0.05] + [rng.randrange(k + 1) for _ in range(rng.randrange(20))]
        rng.shuffle(b) if trial % 7 == 0 else None
        ops = diff_view.opcodes(a, b)
        i = j = 0
        for tag, i1, i2, j1, j2 in ops:
            assert (i1, j1) == (i, j) and tag in ("equal", "replace", "delete", "insert")
            if tag == "equal":
                assert a[i1:i2] == b[j1:j2]
            i, j = i2, j2
        assert (i, j) == (len(a), len(b))
        if len(a) * len(b) <= diff_view.LCS_PAIRS:
            assert ops == difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    # One change in 16 000 items of two kinds: everything else matched.
    a = [k % 2 for k in range(16000)]
    b = a[:8000] + [2] + a[8001:]
    ops = diff_view.opcodes(a, b)
    assert sum(i2 - i1 for tag, i1, i2, _, _ in ops if tag == "equal") == 15999


def _sibling_blocks(n: int) -> bytes:
    """Block 0 running n conditional_blocks, each with a sub-block of one scale op."""
    d = pb.ProgramDesc()
    b0 = d.blocks.add(idx=0, parent_idx=-1)

    def var(name, vtype=pb.VarType.DENSE_TENSOR, dtype=pb.VarType.FP32, dims=(2, 3)):
        v = b0.vars.add(name=name)
        v.type.type = vtype
        if vtype == pb.VarType.DENSE_TENSOR:
            v.type.dense_tensor.tensor.data_type = dtype
            v.type.dense_tensor.tensor.dims.extend(dims)
    var("c", dtype=pb.VarType.BOOL, dims=(1,))
    var("x")
    for k in range(1, n + 1):
        blk = d.blocks.add(idx=k, parent_idx=0)
        var(f"o{k}")
        var(f"scope{k}", vtype=pb.VarType.STEP_SCOPES)
        op = b0.ops.add(type="conditional_block")
        op.inputs.add(parameter="Cond", arguments=["c"])
        op.inputs.add(parameter="Input", arguments=["x"])
        op.outputs.add(parameter="Out", arguments=[f"o{k}"])
        op.outputs.add(parameter="Scope", arguments=[f"scope{k}"])
        op.attrs.add(name="is_scalar_condition", type=pb.AttrType.BOOLEAN, b=True)
        op.attrs.add(name="sub_block", type=pb.AttrType.BLOCK, block_idx=k)
        sc = blk.ops.add(type="scale")
        sc.inputs.add(parameter="X", arguments=["x"])
        sc.outputs.add(parameter="Out", arguments=[f"o{k}"])
        sc.attrs.add(name="scale", type=pb.AttrType.FLOAT, f=float(k))
    return d.SerializeToString()


@pytest.mark.parametrize("flags", [["--around", "x", "--depth", "2"], ["--expand", "--no-collapse"]],
                         ids=["around", "expand"])
def test_dot_of_4000_blocks_is_linear(tmp_path, flags):
    """--around / --expand were O(blocks x ops): 2 000 blocks took 5.6 s, 4 000 ~22 s."""
    p = tmp_path / "s.pb"
    p.write_bytes(_sibling_blocks(4000))
    out = tmp_path / "s.dot"
    bounded("dot", p, *flags, "--max-nodes", "100000", "-o", out, code=0)
    assert out.read_text().count("cluster_b") >= 4000


# -- run --files: a FIFO inside DIR ------------------------------------------------
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_inside_files_dir_is_refused_without_blocking(tmp_path):
    """A FIFO at a path the program's load op reads blocked for ever, --timeout included."""
    import shutil
    shutil.copytree(FILE_OPS / "in", tmp_path / "in")
    (tmp_path / "in" / "w.t").unlink()
    os.mkfifo(tmp_path / "in" / "w.t")
    with untouched(tmp_path):
        line = bounded("run", FILE_OPS / "load.pb", "--fetch", "z", "--files", tmp_path, "--timeout", "60",
                       timeout=30)
    assert "op load: cannot read 'in/w.t': is a FIFO (named pipe), not a regular file" in line, line


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_save_op_never_writes_through_a_fifo(tmp_path):
    """A FIFO where a save op writes: opened for writing, it blocked until a reader came."""
    from pybackward.interpreter.executor import Executor, Scope
    (tmp_path / "out").mkdir()
    os.mkfifo(tmp_path / "out" / "y.t")
    values = dict(np.load(FILE_OPS / "values.npz"))
    with pytest.raises(pybackward.ExecutionError, match=r"op save: cannot write 'out/y\.t': is a FIFO"):
        Executor(files=tmp_path).run(pybackward.load(FILE_OPS / "save.pb"), feed={"x": values["x"]},
                                     scope=Scope())


# -- suggestions for an unknown name ----------------------------------------------
def _long_names(n: int = 300, length: int = 3000) -> list[str]:
    """n names of `length` characters, each a tenth different from one base name, over 1500
    characters (so that difflib's autojunk, which drops characters above 1%, drops none)."""
    import random
    rng = random.Random(8)
    alphabet = [chr(0x4E00 + i) for i in range(1500)]
    base = [rng.choice(alphabet) for _ in range(length)]
    names = []
    for _ in range(n):
        s = list(base)
        for _ in range(length // 10):
            s[rng.randrange(length)] = rng.choice(alphabet)
        names.append("".join(s))
    return names


def _long_names_program(names: list[str]) -> bytes:
    d = pb.ProgramDesc()
    b0 = d.blocks.add(idx=0, parent_idx=-1)
    n = len(names)
    for k in range(n + 1):
        v = b0.vars.add(name="x" if k == n else names[k])
        v.type.type = pb.VarType.DENSE_TENSOR
        v.type.dense_tensor.tensor.data_type = pb.VarType.FP32
        v.type.dense_tensor.tensor.dims.extend([2, 3])
        if k < n:
            op = b0.ops.add(type="relu")
            op.inputs.add(parameter="X", arguments=["x"])
            op.outputs.add(parameter="Out", arguments=[v.name])
    return d.SerializeToString()


def test_suggestions_for_an_unknown_long_name_are_bounded(tmp_path):
    """`run --fetch` of an unknown 3000-character name among 300 such names: seconds in
    difflib's ratio (8 s on the issue's file, ~7 s here); now bounded whatever the lengths."""
    names = _long_names()
    p = tmp_path / "long.pb"
    p.write_bytes(_long_names_program(names))
    np.save(tmp_path / "x.npy", np.ones((2, 3), np.float32))
    name = names[0][:-5] + "zzzzz"
    with untouched(tmp_path):
        line = bounded("run", p, "--fetch", name, "--feed", f"x={tmp_path / 'x.npy'}")
    assert "cannot fetch" in line and "did you mean" not in line, line[:300]


def test_close_names_are_difflibs_within_the_bounds():
    import difflib
    import random
    from pybackward.base import names as nm
    rng = random.Random(5)
    words = ["".join(rng.choice("abcde_.0") for _ in range(rng.randrange(1, 30))) for _ in range(400)]
    for w in words[:60]:
        q = w[:-1] + "z"
        assert nm.close_names(q, words) == difflib.get_close_matches(q, words, n=3)
    assert nm.close_names("a" * (nm.MAX_SUGGESTED_LEN + 1), ["a" * (nm.MAX_SUGGESTED_LEN + 1)]) == []


# -- the text reader ------------------------------------------------------------------
@pytest.mark.parametrize("escape", ["\\001", '\\"'])
def test_a_pbtxt_of_8_mb_of_escapes_is_refused_in_bounded_memory(tmp_path, escape):
    """One string literal of 8 MB of escapes: protobuf's backtracking pattern took 570-970 MB
    (and the message quoted the whole line)."""
    p = tmp_path / "esc.pbtxt"
    p.write_text('blocks { idx: 0 parent_idx: -1 vars { name: "' + escape * ((8 << 20) // len(escape))
                 + '" type { type: DENSE_TENSOR } } }\n')
    with untouched(tmp_path):
        line = bounded("show", p)
    assert f"{p}: line 1 is" in line and "at most 1048576 bytes" in line and len(line) < 400, line[:400]


def test_a_long_text_line_within_the_limit_still_reads(tmp_path):
    from pybackward.legacy import wire
    name = "n" * (wire.MAX_TEXT_LINE - 100)
    text = f'blocks {{\n idx: 0\n parent_idx: -1\n vars {{\n name: "{name}"\n type {{ type: DENSE_TENSOR dense_tensor {{ tensor {{ data_type: FP32 }} }} }}\n }}\n}}\n'
    prog = pybackward.loads(text.encode(), text=True)
    assert name in prog.global_block().vars


# -- names with control characters: stats, check, PIR show, append's checkpoints ---------
ERASE = "\x1b[2K\rwrote out.pb"
PIR_DIR = Path(__file__).resolve().parent.parent / "testdata" / "pir"


def _renamed(data: bytes, old: str, new: str) -> bytes:
    """A legacy program (bytes) with var `old` renamed `new` in every block."""
    desc = pb.ProgramDesc()
    desc.ParseFromString(data)
    for b in desc.blocks:
        for v in b.vars:
            if v.name == old:
                v.name = new
        for op in b.ops:
            for slot in list(op.inputs) + list(op.outputs):
                slot.arguments[:] = [new if a == old else a for a in slot.arguments]
    return desc.SerializeToString()


def _pir_renamed(tmp_path: Path, case: str, old: str, new: str) -> Path:
    """testdata/pir/<case>.json with the string `old` (a parameter_name, a data name) made `new`."""
    import json
    text = (PIR_DIR / f"{case}.json").read_text()
    assert text.count(json.dumps(old)) == 1, (case, old)
    p = tmp_path / f"{case}.json"
    p.write_text(text.replace(json.dumps(old), json.dumps(new)))
    return p


def _terminal(*args) -> str:
    """What the CLI writes (stdout and stderr) with colour on, so click strips no ESC sequence
    (into a pipe it drops CSI sequences itself, and a test there could not fail); checked
    clean of control characters, with the name shown escaped."""
    r = CliRunner().invoke(cli, [str(a) for a in args], color=True)
    assert r.exit_code in (0, 1) and (r.exception is None or isinstance(r.exception, SystemExit)), \
        (r.exit_code, r.exception, r.output[-2000:])
    _clean(r.output)
    assert "\\x1b[2K\\x0dwrote out.pb" in r.output, r.output[-2000:]
    return r.output


def test_stats_escapes_names(tmp_path):
    """`stats`: the vars at the peak, `--checkpoints` (the line naming them, and each report
    indented line by line: a CR in a name started a line of its own) and `--saved`."""
    fwd = pybackward.dumps(pybackward.load(FIT))
    x = tmp_path / "x.pb"
    x.write_bytes(_renamed(fwd, "x", "x" + ERASE))
    _terminal("stats", x)
    sq = tmp_path / "sq.pb"
    sq.write_bytes(_renamed(fwd, "square_error_cost_0.tmp_0", "s" + ERASE))
    out = _terminal("stats", sq, "--loss", LOSS, "--checkpoints", "auto")
    assert "with checkpoints s\\x1b[2K\\x0dwrote out.pb:" in out, out
    out = _terminal("stats", sq, "--loss", LOSS, "--checkpoints", "s" + ERASE)
    # The columns line up on the names as shown.
    rows = [ln for ln in out.splitlines() if ln.startswith("    s") or ln.startswith("    x ")]
    assert rows and len({ln.index(" B ") for ln in rows}) == 1, rows
    bwd = tmp_path / "bwd.pb"
    bwd.write_bytes(_renamed(FIT_BACKWARD, "square_error_cost_0.tmp_1", "s" + ERASE))
    _terminal("stats", bwd, "--saved")


def test_stats_of_a_pir_program_escapes_names(tmp_path):
    _terminal("stats", _pir_renamed(tmp_path, "mlp", "y", "y" + ERASE), "--top", "20")


def test_check_escapes_names_in_its_table(tmp_path):
    p = tmp_path / "w.pb"
    p.write_bytes(_renamed(pybackward.dumps(pybackward.load(FIT)), "fc_0.w_0", "w" + ERASE))
    with np.load(FIT_PARAMS) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["w" + ERASE] = arrays.pop("fc_0.w_0")
    np.savez(tmp_path / "params.npz", **arrays)
    out = _terminal("check", p, "--loss", LOSS, "--params", tmp_path / "params.npz", "--feeds", FIT_FEEDS)
    lines = out.splitlines()
    head = next(ln for ln in lines if ln.startswith("var "))
    row = next(ln for ln in lines if ln.startswith("w\\x1b"))
    assert row.index("[13, 1]") == head.index("shape"), (head, row)


def test_pir_show_escapes_names_and_keeps_the_rest(tmp_path):
    """PIR `show` (Paddle's print): the parameter's name escaped, every other line as Paddle printed it."""
    p = _pir_renamed(tmp_path, "mlp", "fc_0.w_0", "w" + ERASE)
    out = _terminal("show", p)
    golden = (PIR_DIR / "mlp.txt").read_text()
    assert out.replace('"w\\x1b[2K\\x0dwrote out.pb"', '"fc_0.w_0"') == golden
    assert _terminal("show", _pir_renamed(tmp_path, "mlp_bwd", "fc_2.w_0", "w" + ERASE))


def test_pir_text_escapes_op_names_attribute_names_and_keys():
    from pybackward import pir
    prog = pir.load(PIR_DIR / "mlp.json")
    op = next(o for o in prog.block.ops if o.attrs and not o.regions)
    op.name = "pd_op.x" + ERASE
    op.attrs["a" + ERASE] = next(iter(op.attrs.values()))
    text = pir.to_text(prog)
    _clean(text)
    assert '"pd_op.x\\x1b[2K\\x0dwrote out.pb"' in text and "a\\x1b[2K\\x0dwrote out.pb:" in text


@pytest.mark.parametrize("where", ["out", "out-dir"])
def test_append_lists_the_checkpoints_it_chose_escaped(tmp_path, where):
    """`append --checkpoints auto` says which it chose; with --out-dir (no progress line) the
    names went out raw."""
    sq = tmp_path / "sq.pb"
    sq.write_bytes(_renamed(pybackward.dumps(pybackward.load(FIT)), "square_error_cost_0.tmp_0", "s" + ERASE))
    target = ["--out-dir", tmp_path / "od"] if where == "out-dir" else [tmp_path / "o.pb"]
    out = _terminal("append", "--loss", LOSS, "--checkpoints", "auto", sq, *target)
    assert "checkpoints (1): s\\x1b[2K\\x0dwrote out.pb" in out, out
