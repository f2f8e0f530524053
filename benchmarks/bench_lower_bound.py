"""How close to the floor can a pure-Python `append` get? A lower bound, measured.

    python benchmarks/bench_lower_bound.py [--layers 3000] [--repeat 5] [--json results.json]

`bench_backward.py` compares `pybackward append` with the floor: a process
that parses IN and serialises and writes a message of OUT's size with the same
protobuf runtime. This script measures what *any* pure-Python pass must add to
that floor, on the same deep MLP (`static.nn.fc` + relu per layer, `mean`
loss), with everything a real pass does left out except the two things no
pass can skip:

* **read**: every op's type and the names in its input and output slots,
  into Python (a pass cannot decide what to differentiate without them);
* **make**: one grad op per forward op and one grad var per forward var,
  built the cheapest way there is from Python: each grad op's bytes joined
  from per-type templates (the forward op's attrs serialised once per type,
  names spliced in), each grad var's bytes from one template, then one
  `MergeFromString` per block, so the protobuf runtime builds the messages in
  C. No path finding, no `no_grad_set`, no accumulation of repeated grads, no
  `op_role_var`, no validation, no callbacks, no error checks, and the grad
  ops are not even right (every grad op gets every forward slot and the
  forward op's attrs), so it is a bound, not a design.

Each step runs as its own whole process (best of `--repeat`, CPU seconds):

| row | what the process does |
|---|---|
| floor | parse IN, serialise the stand-in output, write it (bench_backward's floor) |
| floor + read | ... and read every op's slots first |
| floor + read + make | ... and make the grad ops and vars into the program and write *that* |
| + import click, numpy | the dependencies `pybackward append` imports, before any of our own modules |
| pybackward append | the real thing |

It also measures memory: the peak RSS of a process that only parses OUT (what
the protobuf runtime needs to hold the output as messages) per byte of IN,
for the deep MLP and the program shapes of bench_backward.py, since
pybackward's `Program` is a view over exactly those messages.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_backward as bb  # noqa: E402  (the programs, the process wrappers, the floor)

PB2 = str(bb.ROOT / "pybackward" / "_proto" / "framework_pb2.py")

# Both scripts load the generated bindings from their file, as the floor does:
# importing anything of pybackward would count our own imports (~0.2 s).
LOAD_PB2 = r"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("framework_pb2", sys.argv[-1])   # always the last argument
pb = importlib.util.module_from_spec(spec); spec.loader.exec_module(pb)
"""

BOUND = LOAD_PB2 + r"""
import os, tempfile, time
src, dst, mode, out_model = sys.argv[1:5]
if mode == "imports":
    import click, numpy  # noqa: F401
t0 = time.perf_counter()
d = pb.ProgramDesc(); d.ParseFromString(open(src, "rb").read())
if mode in ("read", "make"):
    blocks = []
    for block in d.blocks:
        ops = [(op.type, [(s.parameter, list(s.arguments)) for s in op.inputs],
                [(s.parameter, list(s.arguments)) for s in op.outputs]) for op in block.ops]
        blocks.append(ops)
if mode == "make":
    SHORT = [bytes([n]) for n in range(128)]
    # pybackward.legacy.wire.length_delimited's twin: wire imports the op registry.
    def field(tag, payload):   # a length-delimited field: its tag byte, varint length, payload
        n = len(payload)
        if n < 128:
            return tag + SHORT[n] + payload
        head = b""
        while n > 0x7F:
            head += bytes([n & 0x7F | 0x80]); n >>= 7
        return tag + head + bytes([n]) + payload
    ARG, PARAM = {}, {}   # encoded once per name: OpDesc.Var.arguments = 2, .parameter = 1
    def arg(a):
        r = ARG.get(a)
        if r is None:
            r = ARG[a] = field(b"\x12", a.encode())
        return r
    def param(p):
        r = PARAM.get(p)
        if r is None:
            r = PARAM[p] = field(b"\x0a", p.encode())
        return r
    def slot(tag, name, args):   # OpDesc.inputs = 1 (tag 0x0a), outputs = 2 (0x12)
        return field(tag, param(name) + b"".join([arg(a) for a in args]))
    heads = {}   # op type -> (its grad op's type field, the first such op's attrs: OpDesc.attrs = 4)
    for block_idx, ops in enumerate(blocks):
        desc = d.blocks[block_idx]
        for op in desc.ops:
            if op.type not in heads:
                heads[op.type] = (field(b"\x1a", (op.type + "_grad").encode()),
                                  b"".join(field(b"\x22", a.SerializeToString()) for a in op.attrs))
        out, grads = [], set()
        for type_, ins, outs in reversed(ops):
            head, attrs = heads[type_]
            body = [head]
            for name, args in ins + outs:
                body.append(slot(b"\x0a", name, args))
            for name, args in outs:
                body.append(slot(b"\x0a", name + "@GRAD", [a + "@GRAD" for a in args]))
            for name, args in ins:
                body.append(slot(b"\x12", name + "@GRAD", [a + "@GRAD" for a in args]))
                grads.update(args)
            body.append(attrs)
            out.append(field(b"\x22", b"".join(body)))   # BlockDesc.ops = 4
        var_type = field(b"\x12", desc.vars[0].type.SerializeToString()) if len(desc.vars) else b""
        for name in sorted(grads):   # BlockDesc.vars = 3: VarDesc.name = 1, .type = 2
            out.append(field(b"\x1a", field(b"\x0a", (name + "@GRAD").encode()) + var_type))
        desc.MergeFromString(b"".join(out))
    data = d.SerializeToString()
    seconds = time.perf_counter() - t0
else:
    seconds = time.perf_counter() - t0
    o = pb.ProgramDesc(); o.ParseFromString(open(out_model, "rb").read())   # the stand-in output
    t1 = time.perf_counter()
    data = o.SerializeToString()
    seconds += time.perf_counter() - t1
fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dst))
with os.fdopen(fd, "wb") as f:
    f.write(data); f.flush(); os.fsync(f.fileno())
os.replace(tmp, dst)
print(seconds)   # in process: parse IN (+ read, make) + serialise
"""

HOLD = LOAD_PB2 + r"""
d = pb.ProgramDesc(); d.ParseFromString(open(sys.argv[1], "rb").read())
"""


def _cpu(argv: list[str], repeat: int, in_process: bool = True) -> dict:
    runs = [bb.measured(argv) for _ in range(repeat)]
    bad = [r for r in runs if r["rc"] != 0]
    if bad:
        raise RuntimeError(f"{' '.join(argv)} failed: {bad[0]['err'][-500:]}")
    r = {"wall": min(r["wall"] for r in runs), "cpu": min(r["cpu"] for r in runs), "rss": max(r["rss"] for r in runs)}
    if in_process:
        r["in_process"] = min(float(r["out"].split()[-1]) for r in runs)
    return r


def time_table(layers: int, repeat: int, work: str) -> dict:
    src, out = os.path.join(work, "in.pb"), os.path.join(work, "out.pb")
    main, _ = bb.build_fc_mlp(layers)
    bb.pybackward.save(main, src)
    rows = {"pybackward append": _cpu([sys.executable, "-m", "pybackward_cli.main", "append", "--loss", bb.LOSS,
                                       src, out], repeat, in_process=False)}
    rows["pybackward append"]["in_process"] = sum(bb.ours_in_process(src, out + ".in", repeat).values())
    for label, mode in (("floor", "floor"), ("floor + read", "read"), ("floor + read + make", "make"),
                        ("floor + import click, numpy", "imports")):
        dst = os.path.join(work, f"{mode}.pb")
        rows[label] = _cpu([sys.executable, "-c", BOUND, src, dst, mode, out, PB2], repeat)
        rows[label]["bytes_out"] = os.path.getsize(dst)
    return {"layers": layers, "bytes_in": os.path.getsize(src), "bytes_out": os.path.getsize(out), "rows": rows}


def memory_table(work: str) -> list[dict]:
    shapes = [("deep MLP, 3,000 layers", lambda: _fc_bytes(3000)),
              ("wide: one `sum` of 50,000 inputs", lambda: bb.build_wide(50_000)),
              ("many sub-blocks: 5,000 `conditional_block`s", lambda: bb.build_sub_blocks(5_000)),
              ("fan-out: one var read by 50,000 ops", lambda: bb.build_fanout(50_000))]
    src, out = os.path.join(work, "in.pb"), os.path.join(work, "out.pb")
    rows = []
    for label, build in shapes:
        with open(src, "wb") as f:
            f.write(build())
        ours = bb.measured([sys.executable, "-m", "pybackward_cli.main", "append", "--loss", bb.LOSS, src, out])
        hold_in = bb.measured([sys.executable, "-c", HOLD, src, PB2])   # the runtime's own RSS + IN
        hold_out = bb.measured([sys.executable, "-c", HOLD, out, PB2])
        rows.append({"shape": label, "bytes_in": os.path.getsize(src), "bytes_out": os.path.getsize(out),
                     "hold_in_rss": hold_in["rss"], "hold_out_rss": hold_out["rss"], "ours_rss": ours["rss"]})
    return rows


def _fc_bytes(layers: int) -> bytes:
    main, _ = bb.build_fc_mlp(layers)
    return bb.pybackward.dumps(main)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    print(bb.machine())
    with tempfile.TemporaryDirectory() as work:
        t = time_table(args.layers, args.repeat, work)
        m = memory_table(work)
    floor = t["rows"]["floor"]["cpu"]
    floor_in = t["rows"]["floor"]["in_process"]
    print(f"\nDeep MLP, {args.layers:,} layers ({bb._mb(t['bytes_in'])} -> {bb._mb(t['bytes_out'])}); "
          f"whole process, best of {args.repeat}; in process: parse IN (+ read, make) + serialise\n")
    print("| process | writes | CPU s | wall s | x floor (CPU) | in process s | x floor (in process) | peak RSS |")
    print("|---|---|---|---|---|---|---|---|")
    for label, r in t["rows"].items():
        written = bb._mb(r.get("bytes_out", t["bytes_out"]))
        inp = (f"{r['in_process']:.3f} | {r['in_process'] / floor_in:.2f}x" if "in_process" in r else "- | -")
        print(f"| {label} | {written} | {r['cpu']:.3f} | {r['wall']:.3f} | {r['cpu'] / floor:.2f}x | {inp} | "
              f"{r['rss'] / 2**20:.0f} MiB |")
    print("\nMemory: a process that only parses IN, or only OUT, with the protobuf runtime; x IN's size\n")
    print("| shape | IN -> OUT | holding IN | holding OUT | pybackward append |")
    print("|---|---|---|---|---|")
    for r in m:
        x = lambda k: f"{r[k] / 2**20:.0f} MiB ({r[k] / r['bytes_in']:.0f}x)"  # noqa: E731
        print(f"| {r['shape']} | {bb._mb(r['bytes_in'])} -> {bb._mb(r['bytes_out'])} | {x('hold_in_rss')} | "
              f"{x('hold_out_rss')} | {x('ours_rss')} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"time": t, "memory": m}, f, indent=1)


if __name__ == "__main__":
    main()
