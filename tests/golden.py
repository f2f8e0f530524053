"""Replaying the Paddle calls recorded in testdata/programs/*/case.json."""
from __future__ import annotations

from typing import Any

import pybackward
from pybackward.base import attrs as _attrs
from conftest import PROGRAMS, case_json


#: Golden cases whose recorded Paddle program computes wrong gradients
#: (docs/deviations.md). pybackward's default departs from Paddle's program
#: there, so replaying the recorded calls asks for Paddle's: paddle_exact=True.
PADDLE_WRONG_CASES = {"while_stale_read", "while_array_reread"}


def variants() -> list[tuple[str, str]]:
    out = []
    for case_dir in sorted(PROGRAMS.iterdir()):
        if (case_dir / "case.json").exists():
            for v in case_json(case_dir.name)["variants"]:
                out.append((case_dir.name, v))
    return out


def _vars(prog, names, kind):
    if names is None:
        return None
    return [prog.var(n) if kind == "var" else n for n in names]


def replay(case: str, variant: str, record_callbacks: bool = True):
    """Run the variant's calls on a fresh load of forward.pb; return (program, results, callbacks)."""
    spec = case_json(case)["variants"][variant]
    calls = spec.get("calls") or [spec]
    prog = pybackward.load(PROGRAMS / case / "forward.pb")
    results, cb_logs = [], []
    recompute = False
    exact = case in PADDLE_WRONG_CASES
    for call in calls:
        if call["api"] == "append_backward":
            log: list[Any] = []

            def cb(block, context, log=log):
                log.append([context["__current_op_desc__"].type(),
                            sorted(k for k in context if k != "__current_op_desc__")])
            ng = call.get("no_grad_set")
            ck = call.get("checkpoints")
            res = pybackward.append_backward(
                call["targets"][0], program=prog,
                parameter_list=_vars(prog, call.get("parameter_list"), call.get("parameter_list_kind")),
                no_grad_set=set(_vars(prog, ng, call.get("no_grad_set_kind"))) if ng else None,
                callbacks=[cb] if record_callbacks else None,
                checkpoints=_vars(prog, ck, "var"), paddle_exact=exact)
            if ck is not None:
                res, names = res
                assert names == call["checkpoint_names"], \
                    f"checkpoint names {names}, Paddle returned {call['checkpoint_names']}"
                recompute = True
            results.append([[p.name, g.name if g is not None else None] for p, g in res])
            cb_logs.append(log)
        else:
            res = pybackward.gradients(call["targets"], call["inputs"], call.get("target_gradients"),
                                       call.get("no_grad_set"), program=prog, paddle_exact=exact)
            results.append([g.name if g is not None else None for g in res])
            cb_logs.append(None)
    if recompute:
        paddle_seed_callstacks(prog, PROGRAMS / case / spec["file"])
    return prog, results, cb_logs, calls


def paddle_seed_callstacks(prog, gold_file) -> None:
    """Give our `seed` ops the op_callstack Paddle recorded on its own.

    Recompute inserts a `seed` op before each dropout. Paddle creates it with
    a Python Operator, which stores the Python call stack of whoever called
    append_backward (the generator's frames, Paddle's own) in op_callstack;
    pybackward has no such stack and writes []. Copying Paddle's value here
    lets every other byte of those ops - and of the whole program - be
    compared. Every other op must match as is.
    """
    gold = pybackward.load(gold_file)
    for b, gb in zip(prog.blocks, gold.blocks):
        for op, gop in zip(b.ops, gb.ops):
            if op.type == "seed" and gop.type == "seed" and op.attr("op_callstack") == []:
                op.set_attr("op_callstack", gop.attr("op_callstack"))


def op_signature(op, ignore: frozenset[str] = frozenset()) -> tuple:
    return (op.type, op.inputs, op.outputs,
            {a.name: (a.type, _attrs.decode(a)) for a in op.desc.attrs if a.name not in ignore})


def diff_programs(ours, gold, ignore: frozenset[str] = frozenset()) -> list[str]:
    """Readable differences, op by op and var by var, block by block."""
    out = []
    if len(ours.blocks) != len(gold.blocks):
        out.append(f"{len(ours.blocks)} blocks, Paddle has {len(gold.blocks)}")
    for b, g in zip(ours.blocks, gold.blocks):
        if (b.parent_idx, b.forward_block_idx) != (g.parent_idx, g.forward_block_idx):
            out.append(f"block {b.idx}: parent/forward {b.parent_idx}/{b.forward_block_idx}, "
                       f"Paddle {g.parent_idx}/{g.forward_block_idx}")
        if len(b.ops) != len(g.ops):
            out.append(f"block {b.idx}: {len(b.ops)} ops, Paddle has {len(g.ops)}: "
                       f"ours {[o.type for o in b.ops]} Paddle {[o.type for o in g.ops]}")
        for i, (o, p) in enumerate(zip(b.ops, g.ops)):
            so, sp = op_signature(o, ignore), op_signature(p, ignore)
            if so != sp:
                detail = [f"{k}: ours {x!r} Paddle {y!r}" for k, x, y in
                          (("type", so[0], sp[0]), ("inputs", so[1], sp[1]), ("outputs", so[2], sp[2])) if x != y]
                keys = set(so[3]) | set(sp[3])
                detail += [f"attr {k}: ours {so[3].get(k)} Paddle {sp[3].get(k)}"
                           for k in sorted(keys) if so[3].get(k) != sp[3].get(k)]
                if list(so[3]) != list(sp[3]) and not detail:
                    detail.append(f"attr order: ours {list(so[3])} Paddle {list(sp[3])}")
                out.append(f"block {b.idx} op {i} ({p.type}): " + "; ".join(detail))
        names_b, names_g = list(b.vars), list(g.vars)
        if names_b != names_g:
            out.append(f"block {b.idx} vars: only ours {sorted(set(names_b) - set(names_g))}, only Paddle "
                       f"{sorted(set(names_g) - set(names_b))}, order same: {sorted(names_b) == sorted(names_g)}")
        for n in names_b:
            if n in g.vars and b.vars[n].desc != g.vars[n].desc:
                out.append(f"block {b.idx} var {n}: ours {b.vars[n].desc} Paddle {g.vars[n].desc}".replace("\n", " "))
    return out


def dedupe_attrs(prog) -> None:
    """Keep the first of each repeated attr name on every op, as Paddle's parser
    does (Paddle 3.3.1 writes some reshape2 attrs twice; its re-parse drops the copy)."""
    for b in prog.desc.blocks:
        for op in b.ops:
            seen, keep = set(), []
            for a in op.attrs:
                if a.name not in seen:
                    seen.add(a.name)
                    keep.append(a)
            if len(keep) != len(op.attrs):
                kept = [type(a)() for a in keep]
                for k, a in zip(kept, keep):
                    k.CopyFrom(a)
                del op.attrs[:]
                op.attrs.extend(kept)
