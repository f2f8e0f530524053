"""The real-model corpus (testdata/models): pybackward against Paddle 3.3.1, per model.

    python benchmarks/models.py [--models lenet,gan] [--repeat 3] [--paddle-python PATH] [--checkpoints]

For the default variant of every model it prints one markdown table row:

* forward ops / backward ops (block 0 and sub-blocks; backward = ops added);
* append: `pybackward.append_backward` on a loaded forward.pb (load not
  counted) vs Paddle's `append_backward` on `Program.parse_from_string`
  (parse not counted); CPU time of the calling process, median of
  --repeat, ms (on a shared machine wall time measures the other jobs);
* step: one forward + backward run of the backward program in float32 with
  params.npz / feeds.npz, fetching the loss and every gradient: the NumPy
  interpreter (`Executor()`: NumPy's OpenBLAS capped at one thread during
  the run) vs Paddle's Executor on CPU (after one warm-up run); ms, wall
  and CPU (process time: on a shared machine the wall time swings with
  other jobs' load, the CPU time far less), and ours / Paddle in CPU time.
  The two are interleaved: per model, ours then Paddle's, --rounds times,
  each a best of --repeat, and each side's best kept. "-" where an op has
  no NumPy kernel yet;
* activation peak: pybackward.memory's static estimate for the plain
  backward program, and the peak the interpreter measures when each value is
  dropped as soon as it is dead (memory.measure), KiB; with --checkpoints
  also the estimated peak with the checkpoints memory.choose_checkpoints
  picks (no budget: the lowest peak), and how many.

Paddle runs in one subprocess (its protobuf schema clashes with ours); give
its Python with --paddle-python or $PYBACKWARD_PADDLE_PYTHON.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pybackward  # noqa: E402
import pybackward.memory as pm  # noqa: E402
from pybackward.interpreter.executor import Executor, Scope  # noqa: E402
from pybackward.ops import registry  # noqa: E402

MODELS = ROOT / "testdata" / "models"

PADDLE_SCRIPT = r"""
import gc, json, os, statistics, sys, time
os.environ["FLAGS_enable_pir_api"] = "0"
import warnings; warnings.filterwarnings("ignore")
import numpy as np
import paddle
paddle.enable_static()
jobs, repeat = json.load(open(sys.argv[1])), int(sys.argv[3])
place = paddle.CPUPlace()
out = {}
for j in jobs:
    fwd = open(j["forward"], "rb").read()
    times = []
    for _ in range(repeat):
        prog = paddle.static.Program.parse_from_string(fwd)
        loss = prog.global_block().var(j["loss"])
        t = time.process_time()
        paddle.static.append_backward(loss, parameter_list=j["parameter_list"])
        times.append(time.process_time() - t)
    out[j["name"]] = {"append": statistics.median(times)}
json.dump(out, open(sys.argv[2], "w"))
print("ready", flush=True)
# The step server: each line on stdin names a model; the reply is the best
# of `repeat` steps (wall, CPU) of it, after one warm-up run the first time.
by_name, ready = {j["name"]: j for j in jobs}, {}
for line in sys.stdin:
    name = line.strip()
    j, r = by_name[name], {}
    try:
        if name not in ready:
            ready.clear()       # one model's program and scope alive at a time, as ours
            gc.collect()
            prog = paddle.static.Program.parse_from_string(open(j["backward"], "rb").read())
            feeds = dict(np.load(j["feeds"]))
            scope = paddle.static.Scope()
            with paddle.static.scope_guard(scope):
                for k, v in np.load(j["params"]).items():
                    scope.var(k).get_tensor().set(v, place)
                exe = paddle.static.Executor(place)
                exe.run(prog, feed=feeds, fetch_list=j["fetch"])
            ready[name] = (prog, feeds, scope, exe)
        prog, feeds, scope, exe = ready[name]
        with paddle.static.scope_guard(scope):
            best = best_cpu = 1e9
            for _ in range(repeat):
                t, c = time.perf_counter(), time.process_time()
                exe.run(prog, feed=feeds, fetch_list=j["fetch"])
                best = min(best, time.perf_counter() - t)
                best_cpu = min(best_cpu, time.process_time() - c)
        r["step"], r["step_cpu"] = best, best_cpu
    except Exception as e:
        r["step_error"] = str(e)[:300]
    print(json.dumps(r), flush=True)
"""


def model_names() -> list[str]:
    return sorted(d.name for d in MODELS.iterdir() if (d / "case.json").exists())


def paddle_job(name: str) -> dict:
    """What the Paddle subprocess needs to time one model."""
    d = MODELS / name
    spec = json.loads((d / "case.json").read_text())["variants"]["default"]
    return {"name": name, "forward": str(d / "forward.pb"), "backward": str(d / spec["file"]),
            "loss": spec["loss"], "parameter_list": spec["parameter_list"],
            "params": str(d / "params.npz"), "feeds": str(d / "feeds.npz"),
            "fetch": sorted(np.load(d / "grads.npz"))}


def ours(name: str, repeat: int, checkpoints: bool) -> dict:
    d = MODELS / name
    case = json.loads((d / "case.json").read_text())
    spec = case["variants"]["default"]
    data = (d / "forward.pb").read_bytes()
    row = {"name": name, "forward_ops": spec["forward_ops"], "backward_ops": spec["backward_ops"],
           "mode": case["mode"], "params": case["parameter_count"]}

    def append():
        prog = pybackward.loads(data)
        t = time.process_time()
        pybackward.append_backward(spec["loss"], program=prog, parameter_list=spec["parameter_list"])
        row.setdefault("_t", []).append(time.process_time() - t)
        return prog
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(repeat):
            prog = append()
    row["append"] = statistics.median(row.pop("_t"))
    row["identical"] = pybackward.dumps(prog) == (d / spec["file"]).read_bytes()
    batch = case["batch"]
    row["peak_estimate"] = pm.memory(prog, batch_size=batch).peak_bytes
    missing = sorted({op.type for b in prog.blocks for op in b.ops
                      if registry.find(op.type) is None or registry.find(op.type).kernel is None})
    row["missing"] = missing
    params, feeds = dict(np.load(d / "params.npz")), dict(np.load(d / "feeds.npz"))
    fetch = sorted(np.load(d / "grads.npz"))
    if not missing:
        exe = Executor()

        def step():
            scope = Scope()
            for k, v in params.items():
                scope.set(k, v.copy())
            exe.run(prog, feed=feeds, fetch_list=fetch, scope=scope)
        step()
        row["_step"] = step
        if len(prog.blocks) == 1:
            row["peak_measured"] = pm.measure(prog, feed=feeds, params=params, fetch=fetch,
                                              batch_size=batch).peak_bytes
    if checkpoints and len(prog.blocks) == 1:
        fwd = pybackward.loads(data)
        choice = pm.choose_checkpoints(fwd, spec["loss"], batch_size=batch)
        row["peak_checkpoints"] = choice.peak_after
        row["checkpoints"] = len(choice.checkpoints)
    return row


def best_step(repeat: int, fn) -> tuple[float, float]:
    """The best wall and the best CPU (process) time of `repeat` runs of fn."""
    best = best_cpu = float("inf")
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        best = min(best, time.perf_counter() - t)
        best_cpu = min(best_cpu, time.process_time() - c)
    return best, best_cpu


class Paddle:
    """Paddle in one subprocess (its protobuf schema clashes with ours): it
    times every model's append_backward when started, then serves step
    timings one model at a time, so ours and Paddle's steps can interleave."""

    def __init__(self, names: list[str], python: str, repeat: int) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        jobs, out = Path(self._tmp.name) / "jobs.json", Path(self._tmp.name) / "out.json"
        jobs.write_text(json.dumps([paddle_job(n) for n in names]))
        env = dict(os.environ, FLAGS_enable_pir_api="0", GLOG_v="0")
        self._err = open(Path(self._tmp.name) / "stderr", "w+")
        self._proc = subprocess.Popen([python, "-c", PADDLE_SCRIPT, str(jobs), str(out), str(repeat)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                      text=True, env=env)
        if self._proc.stdout.readline().strip() != "ready":
            self._fail()
        self.results: dict[str, dict] = json.loads(out.read_text())

    def _fail(self) -> None:
        self._proc.kill()
        self._err.seek(0)
        sys.exit(f"Paddle failed: {self._err.read()[-2000:]}")

    def step(self, name: str) -> dict:
        """{'step', 'step_cpu'} (best of repeat, s) or {'step_error'} for one model."""
        self._proc.stdin.write(name + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            self._fail()
        return json.loads(line)

    def close(self) -> None:
        self._proc.stdin.close()
        self._proc.wait(timeout=60)
        self._err.close()
        self._tmp.cleanup()


def interleaved_steps(row: dict, paddle: "Paddle | None", repeat: int, rounds: int) -> None:
    """One model's step, ours and Paddle's taken in turn `rounds` times (each
    a best of `repeat`), keeping each side's best: the load other jobs put on
    a shared machine changes by the second, and alternating exposes both
    sides to the same load. Only this model's program is alive on either
    side meanwhile (a heap holding every model's slows the garbage collector
    of whichever side holds it)."""
    step = row.pop("_step", None)
    p = paddle.results.setdefault(row["name"], {}) if paddle else {}
    for _ in range(rounds):
        if step is not None:
            wall, cpu = best_step(repeat, step)
            row["step"] = min(row.get("step", wall), wall)
            row["step_cpu"] = min(row.get("step_cpu", cpu), cpu)
        if paddle is not None:
            got = paddle.step(row["name"])
            if "step_error" in got:
                p["step_error"] = got["step_error"]
                break
            for k in ("step", "step_cpu"):
                p[k] = min(p.get(k, got[k]), got[k])


def ms(t: float | None) -> str:
    return "-" if t is None else (f"{t * 1e3:.1f}" if t < 10 else f"{t:.1f} s")


def ratio(ours: float | None, theirs: float | None) -> str:
    """ours / Paddle's step, bold above the 2x target (issue #37 item 4)."""
    if not ours or not theirs:
        return "-"
    x = ours / theirs
    return f"**{x:.1f}x**" if x > 2 else f"{x:.1f}x"


def kib(b: int | None) -> str:
    return "-" if b is None else f"{b / 1024:,.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="", help="comma-separated names (default: all)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5,
                    help="step: ours and Paddle's timed in turn this many times (best of --repeat each)")
    ap.add_argument("--paddle-python", default=os.environ.get("PYBACKWARD_PADDLE_PYTHON"))
    ap.add_argument("--checkpoints", action="store_true", help="also the peak with auto checkpoints (slow)")
    args = ap.parse_args()
    names = [n for n in args.models.split(",") if n] or model_names()
    pd = Paddle(names, args.paddle_python, args.repeat) if args.paddle_python else None
    rows = []
    try:
        for n in names:
            rows.append(ours(n, args.repeat, args.checkpoints))
            interleaved_steps(rows[-1], pd, args.repeat, args.rounds)
            gc.collect()
            print(f"  {n}: done", file=sys.stderr, flush=True)
    finally:
        if pd is not None:
            pd.close()
    theirs = pd.results if pd is not None else {}
    head = ["model", "mode", "fwd ops", "bwd ops", "identical", "append ours ms", "append Paddle ms",
            "step ours ms", "step Paddle ms", "step CPU ours / Paddle ms", "step ours / Paddle (CPU)",
            "peak est. KiB", "peak measured KiB"]
    if args.checkpoints:
        head += ["peak w/ auto ckpt KiB (k)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        p = theirs.get(r["name"], {})
        cells = [f"`{r['name']}`", r["mode"], str(r["forward_ops"]), str(r["backward_ops"]),
                 "yes" if r["identical"] else "**no**", ms(r["append"]), ms(p.get("append")),
                 ms(r.get("step")) if not r["missing"] else "- (" + ", ".join(r["missing"]) + ")",
                 ms(p.get("step")), f"{ms(r.get('step_cpu'))} / {ms(p.get('step_cpu'))}",
                 ratio(r.get("step_cpu"), p.get("step_cpu")),
                 kib(r["peak_estimate"]), kib(r.get("peak_measured"))]
        if args.checkpoints:
            cells.append(f"{kib(r['peak_checkpoints'])} ({r['checkpoints']})" if "peak_checkpoints" in r
                         else "- (while)")
        print("| " + " | ".join(cells) + " |")
    tot = {k: sum(r.get(k) or 0 for r in rows) for k in ("append", "step")}
    ptot = {k: sum(theirs.get(r["name"], {}).get(k) or 0 for r in rows) for k in ("append", "step")}
    print(f"\nappend, all models: ours {tot['append']:.2f} s, Paddle {ptot['append']:.2f} s")


if __name__ == "__main__":
    main()
