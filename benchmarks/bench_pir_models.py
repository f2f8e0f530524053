"""The PIR pass and the PIR interpreter on the real models, beside Paddle 3.3.1's (issue #37 item 5).

    python benchmarks/bench_pir_models.py [--paddle PY] [--models lenet,gan] [--rounds 3] [--calls 3]
                                          [--steps 7] [--no-pass] [--no-step] [--json OUT]

The 35 model cases of testdata/pir_backward/ (the 34 models of testdata/models/ rebuilt
by Paddle in PIR mode, and gan's second variant):

* **pass**: `pybackward.backward.pir.append_backward` on the loaded forward program
  (`<c>.json`, loaded fresh for each call, not timed) against Paddle's
  `paddle.static.append_backward` on the same file deserialized (the manifest's
  loss and parameter_list), CPU time of the calling process; `--rounds` rounds of
  `--calls` calls per side, the two sides alternating round by round. Median and
  best of all calls. Our output is checked canonically equal to Paddle's
  `<c>.bwd.json` once per model.
* **step**: one float32 forward + backward step of Paddle's backward program
  (`<c>.bwd.json`), fetching the loss and every gradient (the manifest's `fetched`),
  `pir_executor.PirExecutor(paddle_seed=2024)` against Paddle's PIR `Executor` on
  CPU: one warm-up run each (checked against `<c>.values.npz`), then `--steps` runs
  per side alternating one by one, CPU time (process time: every thread), best.

Paddle runs in one worker subprocess (`paddle_pir_models.py`, from `--paddle` or
$PYBACKWARD_PADDLE_PYTHON or /work/main/.paddle-venv/bin/python); without it only
pybackward's side is timed. Prints a Markdown table (ms) and the load average at
the start and the end.
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from pybackward import pir  # noqa: E402
from pybackward.backward.pir.api import append_backward  # noqa: E402
from pybackward.base.errors import PaddleDeviationWarning, PyBackwardError  # noqa: E402
from pybackward.interpreter.pir_executor import PirExecutor  # noqa: E402
from pybackward.pir import codec  # noqa: E402
from pybackward.pir.canonical import equal  # noqa: E402
from pybackward.tensors.paddle_files import read_npz, read_pickle  # noqa: E402

DATA = ROOT / "testdata" / "pir_backward"
CASES = json.loads((DATA / "manifest.json").read_text())["cases"]
MODELS = [n for n, e in CASES.items() if e["group"] == "model"]
DEFAULT_PADDLE = ROOT / ".paddle-venv" / "bin" / "python"


class Paddle:
    """The worker subprocess: one JSON request, one JSON answer."""

    def __init__(self, python: str) -> None:
        self.log = tempfile.TemporaryFile("w+")     # Paddle's own output, for the error of a worker that died
        self.proc = subprocess.Popen([python, str(HERE / "paddle_pir_models.py")], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1)
        self.version = self._read()["ready"]

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.log.seek(0)
            tail = self.log.read().strip().splitlines()[-3:]
            raise RuntimeError(f"the Paddle worker ended (exit {self.proc.wait()}): {' | '.join(tail)}")
        return json.loads(line)

    def ask(self, **req) -> dict:
        self.proc.stdin.write(json.dumps(req) + "\n")
        return self._read()

    def close(self) -> None:
        try:
            self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except Exception:
            self.proc.kill()


def find_paddle(arg: str | None) -> str | None:
    """The Python with Paddle: --paddle, $PYBACKWARD_PADDLE_PYTHON, the repo's .paddle-venv; None if absent."""
    for cand in (arg, os.environ.get("PYBACKWARD_PADDLE_PYTHON"), str(DEFAULT_PADDLE)):
        if cand and Path(cand).exists():
            return cand
    return None


def _ref(prog: pir.Program, ref):
    return prog.value(ref["id"] if ref.get("id") else ref["name"])


def our_pass(case: str, n: int, check: bool = False) -> list[float]:
    """n calls of the PIR pass, CPU seconds each (the load before each is not timed)."""
    e = CASES[case]
    data = (DATA / e["files"]["forward"]).read_bytes()
    out = []
    for i in range(n):
        prog = pir.loads(data)
        loss = _ref(prog, e["args"]["loss"])
        plist = e["args"].get("parameter_list")
        plist = None if plist is None else [_ref(prog, r) for r in plist]
        gc.collect()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PaddleDeviationWarning)
            t0 = time.process_time()
            append_backward(loss, plist, program=prog)
            out.append(time.process_time() - t0)
        if check and i == 0:
            want = pir.load(DATA / e["files"]["backward"])
            if not equal(codec.loads(codec.dumps(prog)), want):
                raise SystemExit(f"{case}: pybackward's pass differs from Paddle's {e['files']['backward']}")
    return out


class OurStep:
    """One step of `<c>.bwd.json` in the PIR interpreter (warm-up run checked against Paddle's values)."""

    def __init__(self, case: str) -> None:
        e = CASES[case]
        self.prog = pir.load(DATA / e["files"]["backward"])
        self.params = read_pickle(DATA / e["files"]["params"])
        self.feeds = read_npz(DATA / e["files"]["feeds"])
        self.fetch = list(e["fetched"])
        self.exe = PirExecutor(paddle_seed=2024)
        got = self.run()
        want = read_npz(DATA / e["files"]["values"])
        self.max_abs_diff = self.max_rel_diff = 0.0      # against Paddle's values; rel: to the value's max
        for k in self.fetch:
            if np.size(want[k]):
                d = float(np.max(np.abs(np.asarray(got[k], np.float64) - want[k])))
                self.max_abs_diff = max(self.max_abs_diff, d)
                self.max_rel_diff = max(self.max_rel_diff, d / max(float(np.max(np.abs(want[k]))), 1e-30))

    def run(self) -> dict:
        return self.exe.run(self.prog, self.feeds, self.params, fetch=self.fetch)

    def time(self, n: int) -> list[float]:
        out = []
        for _ in range(n):
            t0 = time.process_time()
            self.run()
            out.append(time.process_time() - t0)
        return out


def measure_model(m: str, paddle: Paddle | None, args) -> dict:
    """One model's row: the pass (rounds alternating) and the step (runs alternating)."""
    e = CASES[m]
    row = {"fwd_ops": e["op_counts"]["forward"], "bwd_ops": e["op_counts"]["backward"]}
    if not args.no_pass:
        ours, theirs = [], []
        our_pass(m, 1, check=True)                       # warm-up (and the equality check)
        if paddle:
            paddle.ask(op="pass", case=m, n=1)
        for _ in range(args.rounds):
            ours += our_pass(m, args.calls)
            if paddle:
                r = paddle.ask(op="pass", case=m, n=args.calls)
                if "error" in r:
                    raise SystemExit(f"{m}: Paddle's pass failed: {r['error']}")
                theirs += r["cpu"]
        row["pass_ours"] = ours
        row["pass_paddle"] = theirs
    if not args.no_step and e["files"].get("values") and e["files"].get("feeds"):
        try:
            step = OurStep(m)
            row["step_diff_ours"] = step.max_abs_diff
            row["step_rel_ours"] = step.max_rel_diff
        except PyBackwardError as exc:
            step = None
            msg = str(exc)
            row["step_error"] = (msg[msg.index("no kernel"):].split(":")[0] if "no kernel" in msg
                                 else msg.split(": ")[-1][:80])
        if paddle:
            r = paddle.ask(op="step_setup", case=m)
            if "error" in r:
                row["step_error_paddle"] = r["error"]
            else:
                row["step_diff_paddle"] = r["max_abs_diff"]
        ours, theirs = [], []
        for _ in range(args.steps):
            if step is not None:
                ours += step.time(1)
            if paddle and "step_error_paddle" not in row:
                theirs += paddle.ask(op="step", case=m, n=1)["cpu"]
        row["step_ours"], row["step_paddle"] = ours, theirs
    return row


def load() -> str:
    return f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paddle", default=None, help="a Python with paddlepaddle 3.3.1")
    ap.add_argument("--models", default=None, help="comma-separated case names (default: the 35 model cases)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--no-pass", action="store_true")
    ap.add_argument("--no-step", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    models = args.models.split(",") if args.models else MODELS
    unknown = [m for m in models if m not in CASES]
    if unknown:
        raise SystemExit(f"no such case: {unknown}")
    py = find_paddle(args.paddle)
    paddle = Paddle(py) if py else None
    if paddle is None:
        print("Paddle not found (--paddle / $PYBACKWARD_PADDLE_PYTHON / .paddle-venv): pybackward's side only",
              file=sys.stderr)
    start_load = load()
    rows: dict[str, dict] = {}
    try:
        for m in models:
            for attempt in (1, 2):
                try:
                    rows[m] = measure_model(m, paddle, args)
                    break
                except RuntimeError as exc:      # the Paddle worker died (it did once, 22 models in): again
                    print(f"  {m}: {exc}; restarting the Paddle worker", file=sys.stderr)
                    paddle.close()
                    paddle = Paddle(py)
                    if attempt == 2:
                        rows[m] = {"fwd_ops": CASES[m]["op_counts"]["forward"],
                                   "bwd_ops": CASES[m]["op_counts"]["backward"], "paddle_error": str(exc)}
            print(f"  {m}: done (load {load()})", file=sys.stderr)
            if args.json:     # after every model: a long run that fails keeps what it measured
                Path(args.json).write_text(json.dumps({"paddle": paddle.version if paddle else None,
                                                       "load": [start_load, load()], "rows": rows}, indent=1))
    finally:
        if paddle:
            paddle.close()
    end_load = load()
    ms = lambda xs: f"{1000 * xs:.1f}"   # noqa: E731
    print(f"Paddle {paddle.version if paddle else '-'}; load average {start_load} at the start, {end_load} at the end")
    print("| model | fwd ops | bwd ops | pass ours ms (median / best) | pass Paddle ms (median / best) | "
          "pass ours / Paddle | step ours ms | step Paddle ms | step ours / Paddle |")
    print("|---|---|---|---|---|---|---|---|---|")
    tot = {"po": 0.0, "pp": 0.0, "so": 0.0, "sp": 0.0}
    for m, r in rows.items():
        cells = [f"`{m}`", str(r["fwd_ops"]), str(r["bwd_ops"])]
        if r.get("pass_ours"):
            po, pp = statistics.median(r["pass_ours"]), statistics.median(r["pass_paddle"]) if r["pass_paddle"] else None
            tot["po"] += po
            cells.append(f"{ms(po)} / {ms(min(r['pass_ours']))}")
            if pp is not None:
                tot["pp"] += pp
                cells += [f"{ms(pp)} / {ms(min(r['pass_paddle']))}", f"{po / pp:.2f}x"]
            else:
                cells += ["-", "-"]
        else:
            cells += ["-", "-", "-"]
        so = min(r["step_ours"]) if r.get("step_ours") else None
        sp = min(r["step_paddle"]) if r.get("step_paddle") else None
        cells.append(ms(so) if so is not None else f"- ({r['step_error']})" if "step_error" in r else "-")
        cells.append(ms(sp) if sp is not None else f"- ({r['step_error_paddle']})" if "step_error_paddle" in r
                     else "-")
        cells.append(f"{so / sp:.2f}x" if so is not None and sp is not None else "-")
        if so is not None and sp is not None:
            tot["so"] += so
            tot["sp"] += sp
        print("| " + " | ".join(cells) + " |")
    print(f"all models: pass ours {tot['po']:.3f} s, Paddle {tot['pp']:.3f} s; "
          f"step (models both ran) ours {tot['so']:.3f} s, Paddle {tot['sp']:.3f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"paddle": paddle.version if paddle else None, "load": [start_load, end_load],
                                               "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
