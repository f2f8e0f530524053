"""Paddle's side of bench_pir_models.py (run with a Python that has paddlepaddle 3.3.1, PIR mode).

    python benchmarks/paddle_pir_models.py     # then one JSON request per line on stdin

A worker, so that one Paddle import serves every model and the two sides can
alternate call by call. Each request is one line of JSON, each answer one line:

* {"op": "pass", "case": C, "n": N}: N times, deserialize testdata/pir_backward/C.json
  (`core.deserialize_pir_program`, not timed), set the builder's stop_gradient flags,
  and time `paddle.static.append_backward(loss, parameter_list)` alone in CPU time
  (`time.process_time`: every thread of this process). Answers {"cpu": [...], "ops": K}
  (K: top-level ops after the call).
* {"op": "step_setup", "case": C}: deserialize C.bwd.json (Paddle's own backward
  program), put the parameters (.pdparams) in a fresh scope, and run it once (warm-up)
  fetching the manifest's `fetched` values (the loss and every gradient). Answers
  {"ok": true, "max_abs_diff": d}: d against C.values.npz, Paddle's recorded values.
* {"op": "step", "case": C, "n": N}: N more runs of that step, CPU time of each.
* {"op": "quit"}.

Value ids `%N` are the ids Paddle's writer gives (results 1, 2, ..., block arguments
-1, -2, ...), numbered here as testdata/pir_backward/gen_pir_backward.py numbers them.
"""
import json
import os
import pickle
import sys
import time
import warnings
from pathlib import Path

os.environ.pop("FLAGS_enable_pir_api", None)
warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import paddle  # noqa: E402
from paddle.base import core  # noqa: E402

DATA = Path(__file__).resolve().parent.parent / "testdata" / "pir_backward"
CASES = json.loads((DATA / "manifest.json").read_text())["cases"]
paddle.enable_static()


def number_values(program) -> dict:
    """`%N` -> value, in the writer's order (gen_pir_backward.number_values)."""
    ids: dict = {}
    nxt, narg = 1, -1

    def block(b) -> None:
        nonlocal nxt, narg
        kwargs = b.kwargs()
        for a in list(b.args()) + [kwargs[k] for k in kwargs]:
            ids[f"%{narg}"] = a
            narg -= 1
        for op in b.ops:
            for r in op.results():
                ids[f"%{nxt}"] = r
                nxt += 1
            if op.num_regions():
                for sub in op.blocks():
                    block(sub)

    block(program.global_block())
    return ids


def load(path: Path):
    prog = paddle.static.Program()
    core.deserialize_pir_program(str(path), prog, -1)
    return prog


def time_pass(case: str, n: int) -> dict:
    e = CASES[case]
    out = []
    ops = None
    for _ in range(n):
        prog = load(DATA / e["files"]["forward"])
        vals = number_values(prog)
        for s in e.get("stop_gradient") or []:
            vals[s["id"]].stop_gradient = s["value"]
        loss = vals[e["args"]["loss"]["id"]]
        plist = e["args"].get("parameter_list")
        plist = None if plist is None else [vals[r["id"]] for r in plist]
        with paddle.static.program_guard(prog):
            t0 = time.process_time()
            paddle.static.append_backward(loss, parameter_list=plist)
            out.append(time.process_time() - t0)
        ops = len(prog.global_block().ops)
    return {"cpu": out, "ops": ops}


STEPS: dict = {}


def step_setup(case: str) -> dict:
    e = CASES[case]
    prog = load(DATA / e["files"]["backward"])
    vals = number_values(prog)
    fetch = [vals[k] for k in e["fetched"]]
    with open(DATA / e["files"]["params"], "rb") as f:
        params = {k: np.asarray(v) for k, v in pickle.load(f).items()}
    with np.load(DATA / e["files"]["feeds"]) as z:
        feeds = {k: z[k] for k in z.files}
    scope = paddle.static.Scope()
    exe = paddle.static.Executor(paddle.CPUPlace())

    for k, v in params.items():     # once, as bench_pir_models does for pybackward (no optimizer runs)
        scope.var(k).get_tensor().set(v, paddle.CPUPlace())

    def run():
        with paddle.static.scope_guard(scope):
            paddle.seed(2024)
            return exe.run(prog, feed=feeds, fetch_list=fetch)

    STEPS[case] = run
    got = run()
    with np.load(DATA / e["files"]["values"]) as z:
        want = {k: z[k] for k in z.files}
    diff = max(float(np.max(np.abs(np.asarray(g, np.float64) - want[k]))) if np.size(g) else 0.0
               for k, g in zip(e["fetched"], got))
    return {"ok": True, "max_abs_diff": diff}


def time_step(case: str, n: int) -> dict:
    run = STEPS[case]
    out = []
    for _ in range(n):
        t0 = time.process_time()
        run()
        out.append(time.process_time() - t0)
    return {"cpu": out}


def main() -> None:
    # The answers go to a copy of stdout; Paddle's own prints (C++ or Python) go to stderr.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    print(json.dumps({"ready": paddle.__version__}), file=answers, flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        try:
            if req["op"] == "quit":
                break
            if req["op"] == "pass":
                res = time_pass(req["case"], req["n"])
            elif req["op"] == "step_setup":
                res = step_setup(req["case"])
            elif req["op"] == "step":
                res = time_step(req["case"], req["n"])
            else:
                res = {"error": f"unknown op {req['op']}"}
        except Exception as exc:  # one failed model must not end the run
            res = {"error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1:]}"}
        print(json.dumps(res), file=answers, flush=True)


if __name__ == "__main__":
    main()
