"""Gradient accumulation: a var written by several grad ops gets partial
versions `x@GRAD@RENAME@block{b}@{n}` summed back into `x@GRAD`.

Paddle's `_addup_repetitive_outputs_`, step for step: walking the grad ops in
order, a second write renames the first writer's output (and everything that
read it since) to version @0 and gives the new write the next version; a
reader of a multi-version var gets an accumulation op queued right before it;
vars still multi-version at the end are accumulated after the last op. The
per-var counter never resets. Accumulation is one `sum` op, or - when a var
has at most `max_inplace_add` versions - a chain of `grad_add` ops writing
`x@GRAD@ADD@i`.

An op that updates a gradient in place (reads and writes `x@GRAD`: a nested
`while_grad` passing a loop var's gradient back through its steps, the
grad of an in-place op) is
skipped by Paddle's walk, so a later writer of `x@GRAD` overwrites what it
wrote. With `inplace_kept` (pybackward's default) the in-place write counts
as a version that keeps its name - the op's input and output must stay one
var - and later writers get `@RENAME@` versions summed into it; the names
so fixed are appended to the list.

Renames are driven by an index of which ops name each grad var, so the walk
is linear in the number of grad ops (Paddle rescans op ranges).
"""
from __future__ import annotations

from collections import defaultdict
from typing import Container, Iterable

from ..ops.registry import GradOp, fresh_op
from ..legacy.names import EMPTY_VAR_NAME, GRAD_SUFFIX, renamed_version

OP_DEVICE = "op_device"


def grad_op_device(op: GradOp) -> str:
    """The device accumulation gives the `sum` of a var this op writes a version of."""
    v = op.attrs.get(OP_DEVICE)
    if v is not None:
        return v[0] if isinstance(v, tuple) else v
    for a in op.base_attrs:
        if a.name == OP_DEVICE:
            return a.s
    return ""


def accumulate_repeated_outputs(ops: list[GradOp], block_idx: int, max_inplace_add: int = 0,
                                inplace_kept: list[str] | None = None,
                                incoming: Iterable[str] = (), no_grad: Container[str] = ()) -> list[GradOp]:
    """Rename and sum the repeated grad outputs of `ops` (see the module doc).

    `incoming` (with `inplace_kept`): gradients that hold a value when the
    ops begin - in a while grad block, the gradient of a loop var carried in
    from the next step, where the body changes the var only through ops
    that read and write it - so a grad op writing one adds to it.
    Gradients in `no_grad` (the pass removes their ops) are left as Paddle
    leaves them."""
    versions: dict[str, list[str]] = {}       # var -> its pending partial versions
    first_writer: dict[str, int] = {}
    counter: dict[str, int] = defaultdict(int)
    device: dict[str, str] = {}
    pinned: set[str] = set()                  # vars an in-place write keeps the name of
    loop_pinned: set[str] = set()             # ... whose last write was a nested while_grad's
    if inplace_kept is not None:
        for name in incoming:
            if name not in no_grad:
                versions[name] = [name]
                pinned.add(name)
    refs: dict[str, list[int]] = defaultdict(list)    # grad var -> indices of ops naming it
    pending: dict[int, list[GradOp]] = {}
    pending_by_var: dict[str, list[GradOp]] = defaultdict(list)

    def accumulate(var: str, at: int) -> None:
        parts = versions[var]
        queued = pending.setdefault(at, [])
        if len(parts) > max_inplace_add:
            made = [fresh_op("sum", {"X": list(parts)}, {"Out": [var]}, {OP_DEVICE: device.get(var, "")})]
        else:
            made, out = [], parts[0]
            for i in range(1, len(parts)):
                x, out = out, (var if i == len(parts) - 1 else f"{var}@ADD@{i}")
                made.append(fresh_op("grad_add", {"X": [x], "Y": [parts[i]]}, {"Out": [out]},
                                     {OP_DEVICE: device.get(var, "")}))
        queued.extend(made)
        pending_by_var[var].extend(made)
        versions[var] = [var]

    def rename_earlier(var: str, new: str) -> None:
        # Paddle renames from the first writer on (`_rename_arg_(..., start,
        # idx)`): a reader before it - a loop-carried gradient read at the
        # top of a while grad block - keeps the plain name.
        start = first_writer[var]
        before = []
        for k in refs.pop(var, ()):
            if k < start:
                before.append(k)
                continue
            ops[k].rename_input(var, new)
            ops[k].rename_output(var, new)
            refs[new].append(k)
        if before:
            refs[var] = before
        for p in pending_by_var.get(var, ()):
            p.rename_input(var, new)
            p.rename_output(var, new)

    # Paddle's renamed_vars is a defaultdict: a var's first mention (a read
    # included) fixes where its final accumulation comes among the others.
    mentioned: dict[str, None] = {}
    for idx, op in enumerate(ops):
        # (accumulating or renaming never touches this op's own inputs)
        grad_ins = [n for args in op.inputs.values() for n in args if GRAD_SUFFIX in n]
        for name in grad_ins:
            mentioned.setdefault(name)
            if len(versions.get(name, ())) > 1:
                accumulate(name, idx)
        in_args = set(grad_ins) if len(grad_ins) > 4 else grad_ins
        op_device = None
        inplace_here: set[str] = set()
        slots = sorted(op.outputs) if len(op.outputs) > 1 else list(op.outputs)
        for si, slot in enumerate(slots):
            args = op.outputs[slot]
            for ai, name in enumerate(args):
                if GRAD_SUFFIX not in name or name == EMPTY_VAR_NAME:
                    continue
                if name in in_args:
                    if inplace_kept is None or name in no_grad:
                        continue
                    if name not in inplace_here:
                        # (a second slot of this op writing it too is a
                        # second contribution: versioned below, then added)
                        inplace_here.add(name)
                        versions[name] = [name]
                        pinned.add(name)
                        (loop_pinned.add if op.type == "while_grad" else loop_pinned.discard)(name)
                        continue
                mentioned.setdefault(name)
                seen = versions.get(name)
                if not seen:
                    versions[name] = [name]
                    first_writer[name] = idx
                    continue
                if len(seen) == 1 and name in loop_pinned and op.type == "write_to_array":
                    # A slot write into an array's gradient just updated in
                    # place by a nested while_grad keeps the other slots: it
                    # updates the array in place too, as in Paddle (a slot
                    # both may write: deviations.accumulate_array_read_grads).
                    # A later writer adds to it.
                    loop_pinned.discard(name)
                    continue
                if len(seen) == 1 and name in pinned:
                    # Written in place: that version keeps the name.
                    if name not in inplace_kept:
                        inplace_kept.append(name)
                elif len(seen) == 1:
                    # The var gets a second writer: its existing version becomes @n.
                    new0 = renamed_version(name, block_idx, counter[name])
                    counter[name] += 1
                    seen[0] = new0
                    rename_earlier(name, new0)
                    for earlier in slots[:si]:
                        op.outputs[earlier] = [new0 if a == name else a for a in op.outputs[earlier]]
                    args[:ai] = [new0 if a == name else a for a in args[:ai]]
                new = renamed_version(name, block_idx, counter[name])
                counter[name] += 1
                args[ai] = new
                seen.append(new)
                if op_device is None:
                    op_device = grad_op_device(op)
                device[name] = op_device
        for name in grad_ins:
            refs[name].append(idx)
        for args in op.outputs.values():
            for name in args:
                if GRAD_SUFFIX in name:
                    refs[name].append(idx)

    for var in mentioned:
        if len(versions.get(var, ())) > 1:
            accumulate(var, len(ops))

    if not pending:
        return ops
    out: list[GradOp] = []
    for idx, op in enumerate(ops):
        out.extend(pending.get(idx, ()))
        out.append(op)
    out.extend(pending.get(len(ops), ()))
    return out
