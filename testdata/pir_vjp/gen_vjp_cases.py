#!/usr/bin/env python
"""Generate `testdata/pir_vjp/cases/`: each recorded PIR VJP rule, in each recorded
variant, run through Paddle 3.3.1's PIR gradient pass on its one-op program.

`pybackward/data/pir_vjp_rules.json` (written by `gen_vjp_rules.py` beside this
file) says what each op's VJP rule appends. This script checks the whole pass
around a rule: for every op with a recorded rule (dense first, then inplace,
then grad ops) and every variant recorded for it (the default, each `stop:*`
in `variants_checked` / `variants`, each `absent:*`), it

1. builds the op's one-op program with `gen_vjp_rules.py`'s own builders
   (imported, not copied: `Prober.build`), the optional operand left out for
   `absent:NAME`;
2. sets `stop_gradient` on the stopped inputs (`stop:inI`: every element of
   operand I; `stop:inI.K`: element K of the `builtin.combine` feeding it;
   `stop:all`: every input with grad semantics) and writes the program as
   Paddle serializes it (the forward program);
3. calls `paddle.autograd.ir_backward.calc_gradient(targets, inputs)`: the
   targets are the op's results (a vector result's `builtin.split` elements),
   floating / complex ones only when it has some; the inputs are the op's
   operands with grad semantics (a vector operand's elements), stopped ones
   included (Paddle returns None for them); then writes the program again
   (the backward program), or records Paddle's error.

Output (compact, deterministic): `cases/<op>.jsonl`, one program per line as
Paddle wrote it (identical programs of one op stored once), and
`cases/manifest.json`: per case its op, kind, variant, file, the forward and
backward program's line (backward null where Paddle refused), the targets and
inputs as value ids `%N` of the forward program, the stopped inputs' ids and
Paddle's error. `tests/backward/pir/test_vjp_cases.py` runs pybackward's pass
on each forward program with the same arguments and compares with the
backward program.

Run (a few minutes on 2 cores):

    /work/main/.paddle-venv/bin/python testdata/pir_vjp/gen_vjp_cases.py [--ops a,b] [--jobs 2]

It re-executes itself with PYTHONHASHSEED=0 and PIR on (prim off, default
flags). The output is the same bytes run after run but for one case:
`im2sequence` `absent:y`, whose result dims Paddle's InferMeta reads from the
absent operand (uninitialized memory: `[2, 65553]`, `[2, 65838]`, ...); the
check is unaffected (pybackward takes the gradient types from the forward file). `--ops` regenerates only those ops (their files and manifest entries).
Each op runs in a child forked from this process, so a Paddle crash costs that
op only (recorded as its cases' error).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RULES = ROOT / "pybackward" / "data" / "pir_vjp_rules.json"
OUT = HERE / "cases"
MANIFEST = OUT / "manifest.json"
GENERATED_BY = "testdata/pir_vjp/gen_vjp_cases.py"
KIND_ORDER = ("dense", "inplace", "grad", "sparse", "control")
FLOATING = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")


def _rules_module():
    """gen_vjp_rules.py, imported (its builders are reused, not copied)."""
    spec = importlib.util.spec_from_file_location("gen_vjp_rules", HERE / "gen_vjp_rules.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


G = _rules_module()


def variants_of(entry: dict) -> list[str]:
    """The variants recorded for a rule: default, stop:* and absent:* (attr:* are not cases)."""
    keys = list(entry.get("variants_checked", ())) + [k for k in entry.get("variants", {})]
    keys = [k for k in keys if k.startswith(("stop:", "absent:"))]
    return ["default"] + sorted(dict.fromkeys(keys), key=lambda k: (not k.startswith("stop:"), k))


def ordered_ops(rules: dict) -> list[str]:
    return sorted(rules, key=lambda n: (KIND_ORDER.index(rules[n]["kind"]), n))


# --------------------------------------------------------------------------
# Child side: one op, every variant (runs in a process forked after importing Paddle)
# --------------------------------------------------------------------------
def _results_of(op_json: dict) -> list[int | None]:
    o = op_json.get("O", [])
    items = [o] if isinstance(o, dict) else o
    return [r.get("%") if isinstance(r, dict) else None for r in items]


def _value_ids(main, text: str) -> list[tuple[object, int]]:
    """(value, its id in the file) for every result of a top-level op."""
    data = json.loads(text)
    ops = data["program"]["regions"][0]["blocks"][0]["ops"]
    block_ops = list(main.global_block().ops)
    if len(ops) != len(block_ops):
        raise RuntimeError(f"the file has {len(ops)} top-level ops, the program {len(block_ops)}")
    out = []
    for op, oj in zip(block_ops, ops):
        ids = _results_of(oj)
        for r, i in zip(op.results(), ids):
            if i is not None:
                out.append((r, i))
    return out


def _id_of(value, table) -> str:
    for v, i in table:
        if v.is_same(value):
            return f"%{i}"
    raise LookupError("a value not in the forward file")


def _serialize(core, main, path: pathlib.Path) -> str:
    core.serialize_pir_program(main, str(path), True, False, True)
    text = path.read_text(encoding="utf-8").strip()
    if "\n" in text:
        raise RuntimeError("Paddle wrote a program over several lines")
    return text


def _is_floating(v) -> bool:
    try:
        return str(v.dtype).split(".")[-1] in FLOATING
    except Exception:  # noqa: BLE001  (arrays and the like have no plain dtype)
        return False


def _targets(core, op) -> list:
    """The op's results to differentiate: a vector result through its builtin.split."""
    outs = []
    for r in op.results():
        if not r.initialized():
            continue
        if G._type_json(r)["#"] == "0.t_vec":
            split = next((u for u in r.all_used_ops() if u.name() == "builtin.split"), None)
            outs.extend(split.results() if split is not None else core.pir.ops.builtin_split(r))
        else:
            outs.append(r)
    floating = [v for v in outs if _is_floating(v)]
    return floating or outs


def _inputs(op) -> list[tuple[str, object]]:
    """(token, value) of the operands with grad semantics; a combine's elements opened."""
    out = []
    for i, (v, sem) in enumerate(zip(op.operands_source(), op.get_input_grad_semantics())):
        if not sem or not v.initialized():
            continue
        if G._is_combined(v):
            out.extend((f"in{i}.{k}", e) for k, e in enumerate(v.get_defining_op().operands_source()))
        else:
            out.append((f"in{i}", v))
    return out


def _stopped(token: str, variant: str) -> bool:
    if not variant.startswith("stop:"):
        return False
    s = variant[5:]
    return s == "all" or token == s or token.split(".")[0] == s


def run_case(paddle, core, prober, variant: str, tmp: pathlib.Path) -> tuple[dict, list[str]]:
    """One case: (manifest entry without file fields, [forward text, backward text?])."""
    from paddle.autograd import ir_backward
    absent = (variant[7:],) if variant.startswith("absent:") else ()
    entry: dict = {"variant": variant}
    try:
        main, startup, op = prober.build(absent)
    except Exception as e:  # noqa: BLE001
        entry["error"] = "build: " + G._first_line(e)
        return entry, []
    with paddle.static.program_guard(main, startup):
        targets = _targets(core, op)
    inputs = _inputs(op)
    stopped = []
    for token, v in inputs:
        if _stopped(token, variant):
            v.stop_gradient = True
            stopped.append(v)
    fwd = _serialize(core, main, tmp / "f.json")
    table = _value_ids(main, fwd)
    entry["outputs"] = [_id_of(v, table) for v in targets]
    entry["inputs"] = [_id_of(v, table) for _, v in inputs]
    entry["input_tokens"] = [t for t, _ in inputs]
    entry["stop"] = [_id_of(v, table) for v in stopped]
    try:
        with paddle.static.program_guard(main, startup):
            ir_backward.calc_gradient(targets, [v for _, v in inputs], None, None)
    except Exception as e:  # noqa: BLE001
        entry["error"] = G._first_line(e)
        return entry, [fwd]
    entry["error"] = None
    return entry, [fwd, _serialize(core, main, tmp / "b.json")]


def run_op(paddle, core, name: str, entry: dict, sigs: dict, out: pathlib.Path) -> None:
    """Every variant of one op; writes {"cases": [...], "programs": [...]} to `out`."""
    prober = G.Prober(paddle, core, G.job_for(name, sigs))
    programs: list[str] = []
    index: dict[str, int] = {}
    cases = []
    with tempfile.TemporaryDirectory() as d:
        for variant in variants_of(entry):
            case, texts = run_case(paddle, core, prober, variant, pathlib.Path(d))
            lines = []
            for t in texts:
                if t not in index:
                    index[t] = len(programs)
                    programs.append(t)
                lines.append(index[t])
            case["forward"] = lines[0] if lines else None
            case["backward"] = lines[1] if len(lines) > 1 else None
            cases.append(case)
    out.write_text(json.dumps({"cases": cases, "programs": programs}))


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------
def file_name(op: str) -> str:
    return op.replace("pd_op.", "").replace(".", "_") + ".jsonl"


def run_all(names: list[str], rules: dict, jobs: int) -> dict[str, dict]:
    import warnings
    warnings.filterwarnings("ignore")
    import paddle
    from paddle.base import core
    paddle.enable_static()
    sigs = G.signatures()
    done: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        pending = list(names)
        running: dict[int, tuple[str, pathlib.Path]] = {}
        while pending or running:
            while pending and len(running) < jobs:
                name = pending.pop(0)
                out = tmp / f"{len(done) + len(running)}.json"
                pid = os.fork()
                if pid == 0:
                    try:
                        run_op(paddle, core, name, rules[name], sigs, out)
                    except Exception as e:  # noqa: BLE001  (a bug of this script: say so)
                        out.write_text(json.dumps({"fail": "generator: " + G._first_line(e)}))
                    os._exit(0)
                running[pid] = (name, out)
            pid, status = os.wait()
            if pid not in running:
                continue
            name, out = running.pop(pid)
            if status == 0 and out.exists():
                done[name] = json.loads(out.read_text())
            else:
                done[name] = {"fail": G._died(status, {})}
            if len(done) % 50 == 0:
                print(f"  {len(done)}/{len(names)} ops", file=sys.stderr)
    return done


def write(names: list[str], rules: dict, done: dict[str, dict], old: dict | None) -> dict:
    OUT.mkdir(exist_ok=True)
    if old is None:  # a whole run: no file of an op that is gone stays behind
        for f in OUT.glob("*.jsonl"):
            f.unlink()
    cases = [c for c in (old or {}).get("cases", []) if c["op"] not in set(names)]
    for name in names:
        got = done[name]
        fname = file_name(name)
        if "fail" in got:
            for v in variants_of(rules[name]):
                cases.append({"op": name, "kind": rules[name]["kind"], "variant": v, "file": None,
                              "forward": None, "backward": None, "error": "crash: " + got["fail"]})
            (OUT / fname).unlink(missing_ok=True)
            continue
        (OUT / fname).write_text("".join(t + "\n" for t in got["programs"]), encoding="utf-8")
        for c in got["cases"]:
            cases.append({"op": name, "kind": rules[name]["kind"], **c,
                          "file": fname if c["forward"] is not None else None})
    order = {n: i for i, n in enumerate(ordered_ops(rules))}
    cases.sort(key=lambda c: (order.get(c["op"], len(order)), variants_of(rules[c["op"]]).index(c["variant"])))
    keys = ("op", "kind", "variant", "file", "forward", "backward", "outputs", "inputs", "input_tokens", "stop",
            "error")
    cases = [{k: c.get(k) for k in keys} for c in cases]
    counts = {"cases": len(cases), "ops": len({c["op"] for c in cases}),
              "refused": sum(c["error"] is not None for c in cases),
              "by_kind": {k: sum(c["kind"] == k for c in cases) for k in KIND_ORDER
                          if any(c["kind"] == k for c in cases)}}
    manifest = {"_generated_by": GENERATED_BY,
                "_what": "per case: forward / backward = line of `file` (Paddle's program before / after "
                         "ir_backward.calc_gradient(outputs, inputs)); ids are value ids of the forward "
                         "program; stop = inputs set stop_gradient (also in the forward file); error = "
                         "Paddle's refusal (no backward)",
                "paddle": rules_meta()["paddle"], "counts": counts, "cases": cases}
    text = "{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in manifest.items() if k != "cases")
    text += ',\n "cases": [\n' + ",\n".join("  " + json.dumps(c) for c in cases) + "\n ]\n}\n"
    MANIFEST.write_text(text, encoding="utf-8")
    return counts


def rules_meta() -> dict:
    return json.loads(RULES.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", help="comma-separated op names (default: every op with a recorded rule)")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    if os.environ.get("PYTHONHASHSEED") != "0" or os.environ.get("FLAGS_enable_pir_api", "1") in ("0", "false"):
        env = dict(os.environ, PYTHONHASHSEED="0", GLOG_minloglevel="3")
        env.pop("FLAGS_enable_pir_api", None)
        os.execve(sys.executable, [sys.executable, str(pathlib.Path(__file__).resolve()), *sys.argv[1:]], env)
    rules = rules_meta()["rules"]
    names = ordered_ops(rules)
    old = None
    if args.ops:
        wanted = [n if "." in n else f"pd_op.{n}" for n in args.ops.split(",")]
        unknown = [n for n in wanted if n not in rules]
        if unknown:
            sys.exit(f"no recorded rule for: {', '.join(unknown)}")
        names = [n for n in names if n in wanted]
        old = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else None
    done = run_all(names, rules, args.jobs)
    counts = write(names, rules, done, old)
    print(f"wrote {MANIFEST}: {counts}", file=sys.stderr)


if __name__ == "__main__":
    main()
