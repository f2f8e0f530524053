"""Measure the size limits reported in docs/reliability.md.

    python fuzz/measure_limits.py                 # the table for the default sizes
    python fuzz/measure_limits.py 1000 100000     # layers to measure (3 ops each)

Each size runs in a fresh process: build an MLP-like chain (tests/randprog.py
`large_program`), save it, then time `load`, `append_backward` and `save`,
and measure the peak Python allocations (tracemalloc) of load and of the pass
separately, and the process's peak RSS. Also: the sub-block nesting depth at
which load slows down and append/run hit Python's recursion limit.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ONE_SIZE = r'''
import json, os, resource, sys, tempfile, time, tracemalloc
sys.path.insert(0, os.path.join(sys.argv[2], "tests"))
import pybackward
from randprog import large_program
layers = int(sys.argv[1])
d = tempfile.mkdtemp()
src, out = os.path.join(d, "in.pb"), os.path.join(d, "out.pb")
# Build the file in a child process, so this one's peak RSS is load/append/save only.
import subprocess
subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[3]); import pybackward; "
                "from randprog import large_program; pybackward.save(large_program(int(sys.argv[1])).program, sys.argv[2])",
                str(layers), src, os.path.join(sys.argv[2], "tests")], check=True)
r = {"layers": layers, "ops": 3 * layers + 1, "bytes_in": os.path.getsize(src)}
rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
r["rss0_mb"] = rss()
t = time.perf_counter(); prog = pybackward.load(src); r["load_s"] = time.perf_counter() - t
r["rss_load_mb"] = rss()
r["vars"] = len(prog.global_block().vars)
t = time.perf_counter(); pybackward.append_backward("loss", program=prog); r["append_s"] = time.perf_counter() - t
r["rss_append_mb"] = rss()
r["ops_out"] = len(prog.global_block().ops)
t = time.perf_counter(); pybackward.save(prog, out); r["save_s"] = time.perf_counter() - t
r["bytes_out"] = os.path.getsize(out)
r["rss_mb"] = rss()
del prog
tracemalloc.start()
prog = pybackward.load(src)
r["load_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
tracemalloc.reset_peak()
base = tracemalloc.get_traced_memory()[0]
pybackward.append_backward("loss", program=prog)
r["append_peak_mb"] = (tracemalloc.get_traced_memory()[1] - base) / 2**20
tracemalloc.stop()
print(json.dumps(r))
'''

NESTING = r'''
import json, os, sys, time, importlib.util
sys.path.insert(0, sys.argv[2])
spec = importlib.util.spec_from_file_location("mc", os.path.join(sys.argv[2], "tests", "bad_inputs", "make_corpus.py"))
mc = importlib.util.module_from_spec(spec); spec.loader.exec_module(mc)
import numpy as np, pybackward
from pybackward.interpreter.executor import Executor
depth = int(sys.argv[1])
data = mc.nested_conditional_blocks(depth)
r = {"depth": depth, "bytes": len(data)}
t = time.perf_counter(); prog = pybackward.loads(data); r["load_s"] = time.perf_counter() - t
for what, fn in (("append", lambda p: pybackward.append_backward("loss", program=p)),
                 ("run", lambda p: Executor().run(p, feed={"x": np.ones((2, 3), np.float32)}, fetch_list=["loss"]))):
    p = pybackward.loads(data)
    t = time.perf_counter()
    try:
        fn(p); r[what] = f"ok {time.perf_counter() - t:.2f} s"
    except RecursionError:
        r[what] = "RecursionError"
    except pybackward.PyBackwardError as e:
        r[what] = f"error: {e}"[:80]
print(json.dumps(r))
'''


SIBLINGS = r'''
import json, os, sys, time
sys.path.insert(0, sys.argv[2])
import numpy as np, pybackward
from pybackward._proto import framework_pb2 as pb
from pybackward.interpreter.executor import Executor
n = int(sys.argv[1])
d = pb.ProgramDesc()
b0 = d.blocks.add(idx=0, parent_idx=-1)
def var(b, name, shape=(), dtype=pb.VarType.FP32, vtype=pb.VarType.DENSE_TENSOR):
    v = b.vars.add(name=name, stop_gradient=False)
    v.type.type = vtype
    if vtype == pb.VarType.DENSE_TENSOR:
        v.type.dense_tensor.tensor.data_type = dtype
        v.type.dense_tensor.tensor.dims.extend(shape)
var(b0, "c", (1,), pb.VarType.BOOL); var(b0, "x", (2, 3)); var(b0, "loss")
fill = b0.ops.add(type="fill_constant")
fill.outputs.add(parameter="Out", arguments=["c"])
fill.attrs.add(name="dtype", type=pb.AttrType.INT, i=pb.VarType.BOOL)
fill.attrs.add(name="shape", type=pb.AttrType.LONGS, longs=[1])
fill.attrs.add(name="value", type=pb.AttrType.FLOAT, f=1.0)
outs = []
for k in range(1, n + 1):
    blk = d.blocks.add(idx=k, parent_idx=0)
    var(b0, f"o{k}", (2, 3)); var(b0, f"scope{k}", vtype=pb.VarType.STEP_SCOPES)
    op = b0.ops.add(type="conditional_block")
    op.inputs.add(parameter="Cond", arguments=["c"]); op.inputs.add(parameter="Input", arguments=["x"])
    op.outputs.add(parameter="Out", arguments=[f"o{k}"]); op.outputs.add(parameter="Scope", arguments=[f"scope{k}"])
    op.attrs.add(name="is_scalar_condition", type=pb.AttrType.BOOLEAN, b=True)
    op.attrs.add(name="sub_block", type=pb.AttrType.BLOCK, block_idx=k)
    sc = blk.ops.add(type="scale")
    sc.inputs.add(parameter="X", arguments=["x"]); sc.outputs.add(parameter="Out", arguments=[f"o{k}"])
    sc.attrs.add(name="scale", type=pb.AttrType.FLOAT, f=float(k))
    outs.append(f"o{k}")
s = b0.ops.add(type="sum"); s.inputs.add(parameter="X", arguments=outs); var(b0, "total", (2, 3))
s.outputs.add(parameter="Out", arguments=["total"])
m = b0.ops.add(type="reduce_mean"); m.inputs.add(parameter="X", arguments=["total"])
m.outputs.add(parameter="Out", arguments=["loss"]); m.attrs.add(name="reduce_all", type=pb.AttrType.BOOLEAN, b=True)
data = d.SerializeToString()
r = {"blocks": n + 1, "bytes": len(data)}
t = time.perf_counter(); prog = pybackward.loads(data); r["load_s"] = time.perf_counter() - t
t = time.perf_counter(); pybackward.append_backward("loss", program=prog); r["append_s"] = time.perf_counter() - t
r["blocks_out"] = prog.num_blocks
t = time.perf_counter(); out = pybackward.dumps(prog); pybackward.loads(out); r["save_reload_s"] = time.perf_counter() - t
t = time.perf_counter()
Executor().run(prog, feed={"x": np.ones((2, 3), np.float32)}, fetch_list=["loss", "x@GRAD"])
r["run_s"] = time.perf_counter() - t
print(json.dumps(r))
'''


def run(script: str, arg: int) -> dict:
    p = subprocess.run([sys.executable, "-c", script, str(arg), str(ROOT)], capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> None:
    sizes = [int(a) for a in argv[1:]] or [1000, 10000, 33333, 100000]
    print("| layers | ops in | ops out | vars | file in | file out | load | append | save | "
          "load: Python peak | append: Python peak | peak RSS: start / load / append / save |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        r = run(ONE_SIZE, n)
        if "error" in r:
            print(f"| {n} | error: {r['error']} |")
            continue
        print(f"| {n} | {r['ops']} | {r['ops_out']} | {r['vars']} | {r['bytes_in'] / 1e6:.1f} MB | "
              f"{r['bytes_out'] / 1e6:.1f} MB | {r['load_s']:.2f} s | {r['append_s']:.2f} s | "
              f"{r['save_s']:.2f} s | {r['load_peak_mb']:.0f} MiB ({r['load_peak_mb'] * 2**20 / r['ops']:.0f} B/op) | "
              f"{r['append_peak_mb']:.0f} MiB ({r['append_peak_mb'] * 2**20 / r['ops']:.0f} B/op) | "
              f"{r['rss0_mb']:.0f} / {r['rss_load_mb']:.0f} / {r['rss_append_mb']:.0f} / {r['rss_mb']:.0f} MiB |",
              flush=True)
    print()
    print("| sibling sub-blocks | file | load | append | blocks out | save + reload | run (fwd + bwd) |")
    print("|---|---|---|---|---|---|---|")
    for n in (100, 1000, 5000):
        r = run(SIBLINGS, n)
        if "error" in r:
            print(f"| {n} | error: {r['error']} |")
            continue
        print(f"| {n} | {r['bytes'] / 1e3:.0f} kB | {r['load_s']:.2f} s | {r['append_s']:.2f} s | {r['blocks_out']} | "
              f"{r['save_reload_s']:.2f} s | {r['run_s']:.2f} s |", flush=True)
    print()
    print("| nesting depth | file | load | append | run |")
    print("|---|---|---|---|---|")
    for depth in (100, 300, 350, 500, 1000, 2000):
        r = run(NESTING, depth)
        if "error" in r:
            print(f"| {depth} | error: {r['error']} |")
            continue
        print(f"| {depth} | {r['bytes'] / 1e3:.0f} kB | {r['load_s']:.2f} s | {r['append']} | {r['run']} |", flush=True)


if __name__ == "__main__":
    main(sys.argv)
