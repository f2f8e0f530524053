"""Derive pybackward's table of Paddle's op types and grad rules from the records.

`testdata/grad_makers/gen_grad_makers.py` (run with a live Paddle) records,
for every op type Paddle 3.3.1 knows, its signature and what its grad-op
maker emits on a one-op program. This script (no Paddle needed) reads those
records and writes `pybackward/data/paddle_ops.json`: per op type its slots,
default attrs, extra attrs, grad kind, and - where the maker's output is a
plain function of the forward op - the grad ops as templates:

    {"type": "matmul_v2_grad",
     "inputs":  {"X": "I:X", "Y": "I:Y", "Out@GRAD": "OG:Out"},
     "outputs": {"X@GRAD": "IG:X", "Y@GRAD": "IG:Y"},
     "empty": ["X@GRAD"],                # grads in the no-grad set stay as @EMPTY@
     "set": [[name, AttrType, value]],   # attrs the maker sets or changes
     "drop": [name, ...],                # forward attrs the grad op does not carry
     "lod": false}                       # its shape inference writes no legacy_lod_level
                                         # (testdata/grad_makers/probe_lod.py; absent: unknown)

A maker that does not carry the forward op's op_callstack / op_namescope
(testdata/grad_makers/probe_callstack.py, callstack.json) gets them in "set"
with the values `check_attrs()` gives: [] and "".
Each op type also says whether Paddle 3.3.1 has a CPU kernel for it ("cpu")
and for its grad ("grad_cpu"), from testdata/kernels/cpu_kernels.json
(gen_cpu_kernels.py; a registered kernel that cannot run does not count):
the kernels pybackward owes.

Sources: `I:S` / `O:S` the forward op's input / output slot S, `OG:S` the
gradients of output slot S, `IG:S` the gradients of input slot S (dropped,
or kept as @EMPTY@, when in the no-grad set). A slot that matches no source
is recorded as such: the op then needs a hand-written maker in its family
module (tests/ops/test_grad_makers.py says which). The templates are facts about
Paddle's ops (like backward.yaml), and every recorded variant - dispensable
inputs absent, each input in the no-grad set - is checked against them by the
tests, not just the variant they were read from.

    python tools/derive_grad_rules.py
"""
from __future__ import annotations

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from pybackward._proto import framework_pb2 as pb  # noqa: E402
from pybackward.base.attrs import decode  # noqa: E402

REC = ROOT / "testdata" / "grad_makers"
OUT = ROOT / "pybackward" / "data" / "paddle_ops.json"
#: Which op types Paddle 3.3.1 runs on CPU (testdata/kernels/gen_cpu_kernels.py).
CPU = ROOT / "testdata" / "kernels" / "cpu_kernels.json"
PASS_ATTRS = {"op_role", "op_device"}  # set by the pass itself
#: What check_attrs() gives an attr a maker did not carry (callstack.json).
FRESH = {"op_callstack": (pb.AttrType.STRINGS, []), "op_namescope": (pb.AttrType.STRING, "")}


def slots(msgs) -> dict[str, list[str]]:
    return {v.parameter: list(v.arguments) for v in msgs}


def _source(args: list[str], fins: dict, fouts: dict) -> str | None:
    if not args:
        return None
    for prefix, table, suffix in (("I", fins, ""), ("O", fouts, ""), ("OG", fouts, "@GRAD"),
                                  ("IG", fins, "@GRAD")):
        for s, fargs in table.items():
            if fargs and [a + suffix for a in fargs] == args:
                return f"{prefix}:{s}"
    return None


def _value(a: pb.OpDesc.Attr):
    v = decode(a)
    return v if not isinstance(v, bytes) else v.decode()


def template(g: pb.OpDesc, f: pb.OpDesc) -> dict | None:
    fins, fouts = slots(f.inputs), slots(f.outputs)
    t: dict = {"type": g.type, "inputs": {}, "outputs": {}}
    for key, msgs in (("inputs", g.inputs), ("outputs", g.outputs)):
        for v in msgs:
            src = _source(list(v.arguments), fins, fouts)
            if src is None and v.arguments:
                return None
            t[key][v.parameter] = src or ""
    fattrs = {a.name: a for a in f.attrs}
    gattrs = {a.name: a for a in g.attrs}
    t["set"] = [[n, a.type, _value(a)] for n, a in gattrs.items()
                if n not in PASS_ATTRS and (n not in fattrs or fattrs[n].SerializeToString()
                                            != a.SerializeToString())]
    t["drop"] = [n for n in fattrs if n not in gattrs and n not in PASS_ATTRS]
    return t


def main() -> None:
    ops = json.loads((REC / "ops.json").read_text())
    cases = json.loads((REC / "cases.json").read_text())
    fwd = pb.ProgramDesc()
    fwd.ParseFromString((REC / "forward.pb").read_bytes())
    exp = pb.ProgramDesc()
    exp.ParseFromString((REC / "expected.pb").read_bytes())
    fops = fwd.blocks[0].ops
    lod = json.loads((REC / "lod.json").read_text())
    fresh = json.loads((REC / "callstack.json").read_text())
    cpu = json.loads(CPU.read_text())["ops"]
    by_op: dict[str, dict[str, dict]] = {}
    for c in cases:
        by_op.setdefault(c["op"], {})[c["variant"]] = c
    table = {}
    unmatched = []
    for t, e in sorted(ops.items()):
        entry = {"inputs": [[s["name"], _flags(s)] for s in e["inputs"]],
                 "outputs": [[s["name"], _flags(s)] for s in e["outputs"]],
                 "defaults": [d for d in e["defaults"] if d[0] not in e["placeholders"]],
                 "extras": e["extras"], "grad": e["grad"],
                 "cpu": bool(cpu.get(t, {}).get("cpu")) and "cannot_run" not in cpu.get(t, {}),
                 "grad_cpu": bool(cpu.get(t, {}).get("grad_cpu")) and "cannot_run" not in cpu.get(t, {})}
        if e["grad"] == "maker":
            variants = by_op.get(t, {})
            full = variants.get("full")
            if full is None or full["error"]:
                full = variants.get("no_dispensable")
            rules = None
            if full is not None and not full["error"]:
                f = fops[full["forward_op"]]
                gops = exp.blocks[full["block"]].ops
                rules = [template(g, f) for g in gops]
                if any(r is None for r in rules):
                    rules = None
                else:
                    _mark_empty(rules, variants, exp)
                    for r in rules:
                        if r["type"] in lod:
                            r["lod"] = lod[r["type"]]
                        for name in fresh.get(t, {}).get(r["type"], ()):
                            if name in r["drop"]:       # the grad op type has no such attr
                                continue
                            r["set"] = [a for a in r["set"] if a[0] != name] + [[name, *FRESH[name]]]
            if rules is None:
                unmatched.append(t)
            entry["rule"] = rules
        table[t] = entry
    OUT.write_text(json.dumps(table, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"{OUT}: {len(table)} op types; no template for {len(unmatched)}: {' '.join(unmatched)}",
          file=sys.stderr)


def _flags(s: dict) -> str:
    """'d' duplicable, '?' dispensable, 'i' intermediate, 'x' extra."""
    return "".join(c for c, k in (("d", "duplicable"), ("?", "dispensable"),
                                  ("i", "intermediate"), ("x", "extra")) if s[k])


def _mark_empty(rules: list[dict], variants: dict, exp: pb.ProgramDesc) -> None:
    """Grad output slots that keep @EMPTY@ for a no-grad var (seen in the no_grad variants)."""
    for name, c in variants.items():
        if not name.startswith("no_grad:") or c["error"]:
            continue
        for r, g in zip(rules, exp.blocks[c["block"]].ops):
            for v in g.outputs:
                if "@EMPTY@" in v.arguments and v.parameter in r["outputs"]:
                    r.setdefault("empty", [])
                    if v.parameter not in r["empty"]:
                        r["empty"].append(v.parameter)


if __name__ == "__main__":
    main()
