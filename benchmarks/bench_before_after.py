"""Two source trees of pybackward measured interleaved, in one run (issue #19's before/after).

    git archive OLD pybackward cli | tar -x -C /tmp/before && mv /tmp/before/cli /tmp/before/pybackward_cli
    (the same for NEW into /tmp/after)
    python benchmarks/bench_before_after.py /tmp/before /tmp/after [--layers 3000] [--fanout 50000] [--repeat 3]

Each tree is a directory holding `pybackward/` and `pybackward_cli/`. Every
measurement runs in a fresh process, the two trees one after the other, and
the floor in the same run, so a busy machine shifts both sides alike: compare
the ratios. Times are best of `--repeat` (the fan-out runs once).

* the deep MLP (`--layers` fc + relu layers): `pybackward append` as a whole
  process, wall and CPU seconds, against the floor (start Python, parse,
  serialise, write: bench_backward's FLOOR); load / append_backward / save in
  process against protobuf's parse + serialise;
* the builder: `--layers` fc layers with `pybackward.static`, CPU seconds;
* fan-out (one parameter read by `--fanout` scale ops): append_backward in
  process, and the whole process's peak RSS over the input's size;
* the interpreter on a small-tensor program (100 layers, width 4, batch 2):
  microseconds per op for the step, for the dispatch loop alone and for the
  kernels alone (the kernels replayed on the inputs the loop gave them).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_backward as bb  # noqa: E402

CLI = r"""
import sys
sys.path.insert(0, sys.argv[1])
sys.argv = ["pybackward"] + sys.argv[2:]
from pybackward_cli.main import main
main()
"""

BUILDER = r"""
import gc, sys, time
sys.path.insert(0, sys.argv[1])
import pybackward
sys.path.insert(0, sys.argv[2])
from bench_backward import build_fc_mlp
assert pybackward.__file__.startswith(sys.argv[1])
build_fc_mlp(30)
best = 1e9
for _ in range(int(sys.argv[4])):
    gc.collect(); t = time.process_time(); build_fc_mlp(int(sys.argv[3])); best = min(best, time.process_time() - t)
print(best)
"""

INTERP = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import pybackward
sys.path.insert(0, sys.argv[2])
import numpy as np
import bench_backward
from pybackward.interpreter.executor import Executor, Scope
bench_backward.WIDTH = 4
prog = pybackward.loads(bench_backward.build_mlp(100))
pybackward.append_backward("mean_0.tmp_0", program=prog)
n = len(prog.global_block().ops)
rng = np.random.default_rng(0)
scope = Scope()
for i in range(100):
    scope.set(f"fc_{i}.w_0", rng.standard_normal((4, 4)).astype(np.float32))
    scope.set(f"fc_{i}.b_0", np.zeros(4, np.float32))
x = rng.standard_normal((2, 4)).astype(np.float32)
exe = Executor()
run = lambda: exe.run(prog, feed={"x": x}, fetch_list=["mean_0.tmp_0"], scope=scope)
run()
def best(f, k=20):
    b = 1e9
    for _ in range(k):
        t = time.perf_counter(); f(); b = min(b, time.perf_counter() - t)
    return b
step = best(run)
plan = exe._plan(prog.global_block())
calls, kernels = [], [s.kernel for s in plan]
for s, k in zip(plan, kernels):
    s.kernel = (lambda c, k=k: (calls.append((k, c)), k(c))[1])
run()
for s, k in zip(plan, kernels):
    s.kernel = k
def replay():
    for k, c in calls:
        k(c)
kern = best(replay)
print(step / n * 1e6, (step - kern) / n * 1e6, kern / n * 1e6)
"""


def cli(root: str, src: str, out: str, repeat: int) -> dict:
    return bb.best_of([sys.executable, "-c", CLI, root, "append", "--quiet", "--loss", bb.LOSS, src, out], repeat)


def in_process(root: str, src: str, out: str, repeat: int) -> dict:
    r = bb.run_process([sys.executable, "-c", bb.IN_PROCESS, root, src, out, bb.LOSS, str(repeat)])
    if r["rc"] != 0:
        raise RuntimeError(r["err"][-800:])
    return json.loads(r["out"].strip().splitlines()[-1])


def one_line(root: str, script: str, *args: str) -> list[float]:
    r = bb.run_process([sys.executable, "-c", script, root, str(HERE), *args])
    if r["rc"] != 0:
        raise RuntimeError(r["err"][-800:])
    return [float(v) for v in r["out"].split()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--layers", type=int, default=3000)
    ap.add_argument("--fanout", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    trees = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    print(bb.machine(), flush=True)
    tmp = tempfile.mkdtemp(prefix="bench_before_after_")
    src, out, fl, fan = (os.path.join(tmp, n) for n in ("mlp.pb", "out.pb", "floor.pb", "fanout.pb"))
    main_prog, _ = bb.build_fc_mlp(args.layers)
    bb.pybackward.save(main_prog, src)
    del main_prog
    for root in trees.values():                     # warm the bytecode caches
        cli(root, src, out, 1)
    res: dict[str, dict] = {k: {} for k in trees}
    for k, root in trees.items():
        res[k]["cli"] = cli(root, src, out, args.repeat)
        res[k]["inproc"] = in_process(root, src, fl + ".ours", args.repeat)
    floor = bb.floor(src, out, fl, args.repeat)
    for k, root in trees.items():
        res[k]["builder"] = one_line(root, BUILDER, str(args.layers), str(args.repeat))[0]
        res[k]["interp"] = one_line(root, INTERP)
    Path(fan).write_bytes(bb.build_fanout(args.fanout))
    fan_size = os.path.getsize(fan)
    for k, root in trees.items():
        res[k]["fan_inproc"] = in_process(root, fan, fl + ".fan", 1)
        res[k]["fan_cli"] = cli(root, fan, out, 1)
    fan_floor = bb.floor(fan, out, fl, 1)

    size_in = os.path.getsize(src)
    print(f"\n{args.layers:,}-layer MLP ({3 * args.layers + 1:,} forward ops, {bb._mb(size_in)}); "
          f"fan-out {args.fanout:,} ({bb._mb(fan_size)}); best of {args.repeat}\n")
    print("| | before | after |")
    print("|---|---|---|")
    fw, fc = floor["wall"], floor["cpu"]
    b, a = res["before"], res["after"]

    def row(label: str, f) -> None:
        print(f"| {label} | {f(b)} | {f(a)} |")

    row("`pybackward append`, whole process, wall (CPU)",
        lambda r: f"{r['cli']['wall']:.2f} s ({r['cli']['cpu']:.2f})")
    row(f"... / the floor ({fw:.2f} s wall, {fc:.2f} CPU)",
        lambda r: f"{r['cli']['wall'] / fw:.1f}x wall, {r['cli']['cpu'] / fc:.1f}x CPU")
    row("in process: load / append_backward / save",
        lambda r: f"{r['inproc']['load']:.3f} / {r['inproc']['append']:.3f} / {r['inproc']['save']:.3f} s")
    row(f"... / protobuf parse + serialise ({floor['in_process']:.3f} s)",
        lambda r: f"{sum(r['inproc'].values()) / floor['in_process']:.1f}x")
    row(f"builder, {args.layers:,} fc layers (CPU)", lambda r: f"{r['builder']:.2f} s")
    row(f"fan-out {args.fanout:,}: append_backward in process", lambda r: f"{r['fan_inproc']['append']:.2f} s")
    row(f"fan-out {args.fanout:,}: whole process wall (floor {fan_floor['wall']:.2f} s)",
        lambda r: f"{r['fan_cli']['wall']:.2f} s")
    row("fan-out: peak RSS (x IN)",
        lambda r: f"{r['fan_cli']['rss'] / 2**20:.0f} MiB ({r['fan_cli']['rss'] / fan_size:.1f}x)")
    row("interpreter, small tensors: step per op / loop alone / kernels alone",
        lambda r: f"{r['interp'][0]:.1f} / {r['interp'][1]:.1f} / {r['interp'][2]:.1f} us")
    print(f"\nload average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
