"""Interpreter speed: forward + backward of a 100-layer MLP (width 64, batch 32).

    python benchmarks/bench_interpreter.py [--layers 100] [--paddle-python PATH]
    python benchmarks/bench_interpreter.py --model inception_v3 [--repeat 20]

Prints the step time, the same step written directly in NumPy, and the
per-op dispatch overhead ((interpreter - numpy) / ops). With a Python that has
paddlepaddle it also times Paddle's Executor on the same program.

With --model NAME (a model of testdata/models) it profiles one float32 step
of that model's backward program per op type instead: the best step CPU
time, then each op type's kernel time in a step (wall, summed over the
step's calls, the best of --repeat steps), its calls and time per call - the
table to read before speeding up a kernel. The rest of the step (best step
minus kernels) is the executor's own work, roughly.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import pybackward  # noqa: E402
from bench_backward import build_mlp  # noqa: E402
import bench_backward  # noqa: E402
from pybackward.interpreter.executor import Executor, Scope  # noqa: E402

PADDLE_SCRIPT = r"""
import os, sys, time
import numpy as np
os.environ["FLAGS_enable_pir_api"] = "0"
import paddle
paddle.enable_static()
prog = paddle.static.Program.parse_from_string(open(sys.argv[1], "rb").read())
params = dict(np.load(sys.argv[2])); x = np.load(sys.argv[3])
scope = paddle.static.Scope(); place = paddle.CPUPlace()
with paddle.static.scope_guard(scope):
    for k, v in params.items():
        scope.var(k).get_tensor().set(v, place)
    exe = paddle.static.Executor(place)
    fetch = ["mean_0.tmp_0", "fc_0.w_0@GRAD"]
    exe.run(prog, feed={"x": x}, fetch_list=fetch)
    best = 1e9
    for _ in range(int(sys.argv[4])):
        t = time.perf_counter(); exe.run(prog, feed={"x": x}, fetch_list=fetch); best = min(best, time.perf_counter() - t)
print(best)
"""


def numpy_step(x, ws, bs):
    hs = [x]
    pre = []
    h = x
    for w, b in zip(ws, bs):
        z = h @ w + b
        pre.append(z)
        h = np.maximum(z, 0)
        hs.append(h)
    loss = h.mean()
    g = np.full_like(h, 1.0 / h.size)
    gws = []
    for i in range(len(ws) - 1, -1, -1):
        g = g * (pre[i] > 0)
        gws.append(hs[i].T @ g)
        g.sum(axis=0)
        g = g @ ws[i].T
    return loss, gws


def profile_model(name: str, repeat: int, top: int = 25) -> None:
    """Per-op-type kernel times of one step of testdata/models/NAME (see the module doc)."""
    import collections
    import json

    from pybackward.ops import registry
    d = Path(__file__).resolve().parent.parent / "testdata" / "models" / name
    spec = json.loads((d / "case.json").read_text())["variants"]["default"]
    prog = pybackward.load(d / spec["file"])
    params, feeds = dict(np.load(d / "params.npz")), dict(np.load(d / "feeds.npz"))
    fetch = sorted(np.load(d / "grads.npz"))
    acc: dict[str, list] = collections.defaultdict(lambda: [0.0, 0])
    saved = {}
    for t in {op.type for b in prog.blocks for op in b.ops}:
        opdef = registry.find(t)
        if opdef is None or opdef.kernel is None:
            continue

        def timed(call, _k=opdef.kernel, _a=acc[t]):
            t0 = time.perf_counter()
            try:
                return _k(call)
            finally:
                _a[0] += time.perf_counter() - t0
                _a[1] += 1
        saved[t] = opdef.kernel
        opdef.kernel = timed
    try:
        exe = Executor()

        def step():
            scope = Scope()
            for k, v in params.items():
                scope.set(k, v.copy())
            exe.run(prog, feed=feeds, fetch_list=fetch, scope=scope)
        best = float("inf")
        per_type: dict[str, list] = {}          # op type -> [best seconds in one step, calls]
        for i in range(repeat + 1):             # the first run warms up
            for a in acc.values():
                a[0], a[1] = 0.0, 0
            c = time.process_time()
            step()
            if i:
                best = min(best, time.process_time() - c)
                for t, (sec, n) in acc.items():
                    if n:
                        per_type[t] = [min(per_type.get(t, [sec])[0], sec), n]
    finally:
        for t, k in saved.items():
            registry.find(t).kernel = k
    total = sum(v[0] for v in per_type.values())
    n_ops = sum(v[1] for v in per_type.values())
    print(f"{name}: {n_ops} ops; best step {best * 1e3:.2f} ms CPU; kernels {total * 1e3:.2f} ms "
          f"(wall, each op type's best of {repeat} steps)")
    print(f"  {'op type':32s} {'ms/step':>8s} {'calls':>6s} {'us/call':>8s}")
    for t, (sec, n) in sorted(per_type.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"  {t:32s} {sec * 1e3:8.3f} {n:6d} {sec / n * 1e6:8.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=100)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--paddle-python", default=os.environ.get("PYBACKWARD_PADDLE_PYTHON"))
    ap.add_argument("--model", help="profile one step of testdata/models/MODEL per op type instead")
    args = ap.parse_args()
    if args.model:
        profile_model(args.model, args.repeat)
        return
    bench_backward.WIDTH = args.width
    prog = pybackward.loads(build_mlp(args.layers))
    pybackward.append_backward("mean_0.tmp_0", program=prog)
    n_ops = len(prog.global_block().ops)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.batch, args.width)).astype(np.float32)
    ws = [(rng.standard_normal((args.width, args.width)) / np.sqrt(args.width)).astype(np.float32)
          for _ in range(args.layers)]
    bs = [np.zeros(args.width, np.float32) for _ in range(args.layers)]
    scope = Scope()
    for i, (w, b) in enumerate(zip(ws, bs)):
        scope.set(f"fc_{i}.w_0", w)
        scope.set(f"fc_{i}.b_0", b)
    exe = Executor()
    fetch = ["mean_0.tmp_0", "fc_0.w_0@GRAD"]
    loss, g0 = exe.run(prog, feed={"x": x}, fetch_list=fetch, scope=scope)
    ref_loss, ref_gws = numpy_step(x, ws, bs)
    assert np.allclose(loss, ref_loss, rtol=1e-4) and np.allclose(g0, ref_gws[-1], rtol=1e-3, atol=1e-6)
    best_i = best_n = float("inf")
    for _ in range(args.repeat):
        t = time.perf_counter()
        exe.run(prog, feed={"x": x}, fetch_list=fetch, scope=scope)
        best_i = min(best_i, time.perf_counter() - t)
        t = time.perf_counter()
        numpy_step(x, ws, bs)
        best_n = min(best_n, time.perf_counter() - t)
    print(f"program: {args.layers} layers, width {args.width}, batch {args.batch}: {n_ops} ops (forward + backward)")
    print(f"interpreter step   {best_i * 1e3:8.2f} ms")
    print(f"plain NumPy step   {best_n * 1e3:8.2f} ms")
    print(f"dispatch overhead  {(best_i - best_n) / n_ops * 1e6:8.2f} us/op (goal: under 5)")
    if args.paddle_python:
        with tempfile.TemporaryDirectory() as d:
            pybackward.save(prog, f"{d}/p.pb")
            np.savez(f"{d}/params.npz", **{f"fc_{i}.w_0": w for i, w in enumerate(ws)},
                     **{f"fc_{i}.b_0": b for i, b in enumerate(bs)})
            np.save(f"{d}/x.npy", x)
            r = subprocess.run([args.paddle_python, "-c", PADDLE_SCRIPT, f"{d}/p.pb", f"{d}/params.npz",
                                f"{d}/x.npy", str(args.repeat)], capture_output=True, text=True,
                               env=dict(os.environ, FLAGS_enable_pir_api="0"))
            if r.returncode == 0:
                print(f"Paddle Executor    {float(r.stdout.strip().splitlines()[-1]) * 1e3:8.2f} ms")
            else:
                print("Paddle Executor    failed: " + r.stderr.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
