"""Where Paddle's backward program would compute a wrong gradient, the
corrections pybackward applies by default (docs/deviations.md).

Each correction is a step named for the pattern it fixes; it changes the
program only where the pattern occurs, so everywhere Paddle is right the
output stays Paddle's op for op. Each one reports what it changed with a
`PaddleDeviationWarning` (the CLI prints it as one line and lists it under
"deviations" in --json). `paddle_exact=True` skips them all.
"""
from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterable
from itertools import chain

from ..base import dtypes
from .._proto import framework_pb2 as pb
from ..base.errors import PaddleDeviationWarning, ProgramFileError, where
from ..ops.registry import GradOp, fresh_op
from ..legacy.program import OP_DEVICE_ATTR, OP_ROLE_ATTR, OP_ROLE_FORWARD, Block, Operator, Program
from .emit import fill_op_desc
from ..legacy.names import EMPTY_VAR_NAME, GRAD_SUFFIX, strip_grad_suffix


#: The library's directory: frames in it are not the user's.
_LIBRARY = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_stacklevel() -> int:
    """The `stacklevel` for a `warnings.warn` in the function that calls this:
    the first frame outside pybackward, so a warning names the user's line
    (their `gradients(...)` call), however deep in the pass it is raised."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_LIBRARY):
        frame = frame.f_back
        level += 1
    return level


def deviate(pattern: str, detail: str) -> None:
    """Say that the output departs from Paddle's: one line naming the pattern and the vars."""
    warnings.warn(PaddleDeviationWarning(f"{pattern}: {detail} (Paddle's program: paddle_exact=True / "
                                         f"--paddle-exact; see docs/deviations.md)"), stacklevel=user_stacklevel())


def _free_rename(block: Block, name: str, first: int = 0) -> int:
    k = first
    while block.has_var_recursive(f"{name}@RENAME@block{block.idx}@{k}"):
        k += 1
    return k


def add_seeds_of_nested_targets(block: Block, seeds: dict[str, int]) -> list[str]:
    """`gradients([y1, y2], ..., target_gradients=[None, g2])` with y1 feeding y2:
    Paddle fills y1@GRAD with ones, then y2's grad ops write y1@GRAD again and
    the ones are lost (d sum(y1) drops out). Here the fill and the later
    writer get `@RENAME@` versions and a `sum` after the writer adds them.

    `seeds` maps each target's grad name to the index of its fill op."""
    fixed = []
    for gname, at in seeds.items():
        ops = block.ops
        writers = [i for i in range(at + 1, len(ops)) if gname in ops[i].output_arg_names]
        if not writers:
            continue
        last = writers[-1]
        if any(gname in ops[i].input_arg_names for i in range(at + 1, last + 1)
               if i not in writers):
            continue  # read before its last write: not this pattern
        k = _free_rename(block, gname)
        seed = f"{gname}@RENAME@block{block.idx}@{k}"
        k = _free_rename(block, gname, k + 1)
        partial = f"{gname}@RENAME@block{block.idx}@{k}"
        like = block.var(gname)
        block.create_var_like(seed, like, stop_gradient=False)
        block.create_var_like(partial, like, stop_gradient=False)
        ops[at].rename_output(gname, seed)
        for i in writers:
            ops[i].rename_output(gname, partial)
            for j in writers:  # a later writer that accumulates in place reads the partial
                if j > i:
                    ops[j].rename_input(gname, partial)
        desc = pb.OpDesc()
        fill_op_desc(desc, fresh_op("sum", {"X": [seed, partial]}, {"Out": [gname]},
                                    {OP_DEVICE_ATTR: ops[last].attr(OP_DEVICE_ATTR, "")}))
        block.insert_op_desc(last + 1, desc)
        fixed.append(gname)
    if fixed:
        deviate("nested targets", "the gradient of target(s) " + ", ".join(
            repr(n[: -len('@GRAD')]) for n in fixed) + " also flows in from another target; Paddle's "
            "program overwrites the target's own seed, pybackward adds both")
    return fixed




# --------------------------------------------------------------------------
# Programs whose gradients Paddle gets silently wrong and that have no right
# answer without changing the forward program: refused, naming the rule.
# --------------------------------------------------------------------------
def refuse_forward_vars_in_grad_namespace(program: Program) -> None:
    """A forward op writing `x@GRAD` for a var `x` of the program: the pass
    would add its own gradient into that var (Paddle: every gradient 4x)."""
    for b in program.blocks:
        # A block none of whose ops writes a name with @GRAD in it (every forward program's):
        # nothing to look at, found in C ("\n" is not in GRAD_SUFFIX: no match spans two names).
        if GRAD_SUFFIX not in "\n".join(chain.from_iterable(op.output_arg_names for op in b.ops)):
            continue
        for i, op in enumerate(b.ops):
            # (names first: the role is an attr scan, and few ops write @GRAD names)
            if not any(GRAD_SUFFIX in n for n in op.output_arg_names) or op.attr(OP_ROLE_ATTR, 0) & 1:
                continue
            for n in op.output_arg_names:
                if GRAD_SUFFIX in n and b.find_var_recursive(strip_grad_suffix(n)) is not None \
                        and strip_grad_suffix(n) != n:
                    raise ProgramFileError(
                        f"{where(program.source, b.idx, i, op.type, n)}: a forward op writes a var named as "
                        f"the gradient of '{strip_grad_suffix(n)}'; the backward pass would add its own "
                        f"gradient into it (rule: forward vars stay out of the @GRAD namespace; rename it, "
                        f"or --paddle-exact for Paddle's program)")


def refuse_retyped_outer_vars(program: Program) -> None:
    """A sub-block declaring an outer float var's name with another dtype: the
    ops inside read the shadow, and the outer var's gradient silently stays
    zero in Paddle."""
    for b in program.blocks[1:]:
        parent = b.parent
        if parent is None:
            continue
        for name, v in b.vars.items():
            outer = parent.find_var_recursive(name)
            if outer is None or outer.data_type is None or v.data_type is None:
                continue
            if outer.data_type != v.data_type and dtypes.is_float(outer.data_type):
                raise ProgramFileError(
                    f"{where(program.source, b.idx, var=name)}: re-declares block {outer.block.idx}'s "
                    f"{dtypes.type_name(outer.data_type)} var as {dtypes.type_name(v.data_type)}; its gradient "
                    f"would silently be lost (rule: a sub-block var keeps the dtype of the outer var of the "
                    f"same name; or --paddle-exact for Paddle's program)")


def refuse_wrong_programs(program: Program) -> None:
    """Every refusal rule above, before the pass changes anything."""
    refuse_forward_vars_in_grad_namespace(program)
    refuse_retyped_outer_vars(program)


def report_dead_writes(block: Block, redefined: list[tuple[str, int, int]] | None) -> None:
    """Say which writers the path left out because a later op overwrote their value unread."""
    if redefined:
        deviate("var written twice", "; ".join(
            f"'{n}' from op {a} ({block.ops[a].type}) is overwritten by op {b} ({block.ops[b].type}) "
            f"before anything reads it, so op {a} gets no grad op" for n, a, b in redefined)
            + " (Paddle's program differentiates both writes)")


def report_carried_loop_vars(program: Program, loops: dict[int, list[str]] | None,
                             loop_seeds: dict[int, list[str]]) -> None:
    """Say which while bodies' paths gained the writers of loop vars whose
    gradients are carried from one step into the step before
    (`analysis.path.find_op_path`'s `loops`), and list those gradients in
    `loop_seeds` (body idx -> grads): where nothing after the loop makes
    one (the loss does not read the var's last value), a `fill_any_like`
    zero-fills it (Paddle's while_grad cannot fill a gradient of unknown
    shape)."""
    for b, names in (loops or {}).items():
        seeds = loop_seeds.setdefault(b, [])
        seeds.extend(n + GRAD_SUFFIX for n in names if n + GRAD_SUFFIX not in seeds)
    if loops:
        deviate("loop var carried through a nested loop", "; ".join(
            f"block {b}'s while body: " + ", ".join(repr(n) for n in names)
            for b, names in sorted(loops.items()))
            + "; Paddle's path leaves the ops (a nested while's grad block) that carry the gradient from "
              "one step into the step before out, so it is lost; pybackward keeps them")


def carried_in_place(body: Block, owner) -> list[str]:
    """The gradients of the loop vars that the while body `body` changes only
    through ops that read and write them (a nested while, a branch reading
    the var, an in-place op): in the grad block they hold the gradient carried in from
    the next step, which the grads of the ops after those writes add to
    (Paddle's accumulation lets the first of them overwrite it)."""
    writers: dict[str, list] = {}
    for op in body.ops:
        for n in op.output_arg_names:
            if not body.has_var(n):
                writers.setdefault(n, []).append(op)
    outs = set(owner.output("Out"))
    return [n + GRAD_SUFFIX for n, ops in writers.items()
            if n in outs and all(n in op.input_arg_names for op in ops)]


def report_grads_written_in_place(block: Block, names: list[str]) -> None:
    """Say which gradients of `block` an in-place grad op wrote before other
    grad ops added to them (`accumulate.accumulate_repeated_outputs`)."""
    deviate("gradient updated in place, then written again", f"block {block.idx}: " + ", ".join(
        repr(n) for n in names) + "; Paddle's accumulation skips a grad op's in-place write (a nested "
        "while_grad's, a branch's or an in-place op's) and the next grad op overwrites it, pybackward adds "
        "the two")


# --------------------------------------------------------------------------
# A while body that reassigns a loop var and then reads the new value
# --------------------------------------------------------------------------
def loop_value_name(name: str, body_idx: int, op_index: int) -> str:
    """The value `name` holds after op `op_index` of while body `body_idx`,
    recomputed in the grad block (the step scope keeps only the value the
    var had when the step began)."""
    return f"{name}@AFTER@block{body_idx}@op{op_index}"


def _refuse_loop_var(body: Block, op_index: int, name: str, why: str) -> None:
    raise ProgramFileError(
        f"{where(body.program.source, body.idx, op_index, body.ops[op_index].type, name)}: the while body "
        f"reassigns the loop var and reads the new value, and {why} (rule: a loop var is read after it is "
        f"reassigned only when the reassigning op has one output and no sub-block, reads values the step "
        f"scope still holds, and the value the var had when the step began is read too; or --paddle-exact "
        f"for Paddle's program)")


def _writes_a_slot(body: Block, op: Operator, name: str) -> bool:
    """`op` is a `write_to_array` into the tensor array `name`: it changes one
    slot and keeps the others, so it does not reassign the var. Paddle's
    while copies no tensor array into the step scope (only dense tensors), the
    array's gradient is one array of slot gradients, and a later read of the
    array reads a slot by its index: no value goes stale and no gradient is
    lost by naming every version of the array alike."""
    if op.type != "write_to_array" or op.output("Out") != [name]:
        return False
    v = body.find_var_recursive(name)
    return v is not None and v.desc.type.type == pb.VarType.DENSE_TENSOR_ARRAY


def split_loop_var_versions(body: Block, owner, target: Block, descs: list, origins: list[int],
                            grad_to_var: dict[str, str]) -> tuple[list, list[str]]:
    """A `while` body that reassigns a loop var `h` and then reads it again
    (`h = tanh(h @ w); y = y * h`): Paddle's grad block names the gradients
    of both values `h@GRAD` (so the one carried in from the next step is
    lost) and its grad ops read the value `h` had when the step began (all
    the step scope keeps). Here the grad ops of the ops after the write get
    the new value, recomputed at the top of the grad block into
    `h@AFTER@block{b}@op{k}`, and its own gradient, which starts from the
    incoming `h@GRAD` and gathers what the later readers add.

    `descs` are the body's grad ops (before accumulation), `origins` the
    body op index each one came from (the recomputing ops put in front get
    theirs there too). Returns the new grad op list and the
    loop-carried gradients the grad block now reads (`h@GRAD`), which
    `zero_seeds_of_loop_grads` fills with zeros where nothing outside makes
    them: Paddle's while_grad cannot zero-fill a gradient of unknown shape."""
    ops = body.ops
    xs = set(owner.input("X"))
    writers: dict[str, list[int]] = {}
    inplace: dict[str, int] = {}
    for k, op in enumerate(ops):
        if op.sub_block is not None:
            continue   # a write that may not happen (a branch): as in Paddle
        ins = set(op.input_arg_names)
        for n in op.output_arg_names:
            if body.has_var(n) or _writes_a_slot(body, op, n):
                continue
            if n in ins:
                inplace.setdefault(n, k)
            else:
                writers.setdefault(n, []).append(k)
    patterns: dict[str, list[int]] = {}
    for n, ks in writers.items():
        g = n + GRAD_SUFFIX
        if any(j > ks[0] and (n in d.input_args() or g in d.input_args() or g in d.output_args())
               for d, j in zip(descs, origins)):
            patterns[n] = ks
    if not patterns:
        return descs, []
    for n, ks in patterns.items():
        g = n + GRAD_SUFFIX
        if n not in xs:
            _refuse_loop_var(body, ks[0], n, "the value it had when the step began is never read")
        if n in inplace:
            _refuse_loop_var(body, inplace[n], n, "an op also updates it in place")
        for k in ks:
            op = ops[k]
            if len(op.output_arg_names) != 1:
                _refuse_loop_var(body, k, n, "the op that reassigns it has more than one output")
            for u in op.input_arg_names:
                if u in patterns:
                    continue
                local_writers = [i for i, o in enumerate(ops) if u in o.output_arg_names]
                if body.has_var(u):
                    if len(local_writers) > 1 or any(i > k for i in local_writers):
                        _refuse_loop_var(body, k, n, f"its input '{u}' is written more than once in the step")
                elif local_writers:
                    _refuse_loop_var(body, k, n, f"its input '{u}' is also reassigned in the body")
        for j in {j for d, j in zip(descs, origins) if n in d.input_args()}:
            if j > ks[0] and ops[j].sub_block is not None:
                _refuse_loop_var(body, j, n, "an op with a sub-block reads the new value")
        if not any(g in d.output_args() for d, j in zip(descs, origins) if j <= ks[0]):
            _refuse_loop_var(body, ks[0], n, "nothing on the gradient path reads the value it had when "
                                             "the step began")

    def version(n: str, j: int, after: bool) -> int:
        ks = patterns[n]
        return sum(1 for k in ks if k < j or (after and k == j))

    def value(n: str, v: int) -> str:
        return n if v == 0 else loop_value_name(n, body.idx, patterns[n][v - 1])

    for d, j in zip(descs, origins):
        for n in patterns:
            g = n + GRAD_SUFFIX
            a, b = version(n, j, False), version(n, j, True)
            if b:
                d.rename_input(n, value(n, b))
                d.rename_input(g, value(n, b) + GRAD_SUFFIX)
            if a:
                d.rename_output(g, value(n, a) + GRAD_SUFFIX)
    front, front_origins = [], []
    for k in sorted(k for ks in patterns.values() for k in ks):
        front_origins.append(k)
        op = ops[k]
        (n,) = op.output_arg_names
        ins = {s: [value(u, version(u, k, False)) if u in patterns else u for u in args]
               for s, args in op.inputs.items()}
        new = value(n, version(n, k, True))
        outs = {s: [new if a == n else a for a in args] for s, args in op.outputs.items()}
        front.append(GradOp(op.type, ins, outs, op.desc.attrs))
        target.create_var_like(new, body.var(n), stop_gradient=False)
        grad_to_var[new + GRAD_SUFFIX] = new
    for n, ks in patterns.items():
        last = value(n, len(ks))
        front.append(fresh_op("assign", {"X": [n + GRAD_SUFFIX]}, {"Out": [last + GRAD_SUFFIX]}))
        front_origins.append(-1)
    origins[:0] = front_origins
    deviate("stale loop var", "; ".join(
        f"block {body.idx}'s while body reads '{n}' after op {ks[0]} ({ops[ks[0]].type}) reassigns it"
        for n, ks in patterns.items())
        + "; Paddle's grad ops read the value it had when the step began and drop the gradient carried "
          "in from the next step, pybackward recomputes the new value in the grad block and adds both")
    return front + descs, [n + GRAD_SUFFIX for n in patterns]


def zero_seeds_of_loop_grads(seeds: list[str], later: list) -> list:
    """`fill_any_like` zeros for the loop-carried gradients in `seeds` that no
    grad op in `later` (the grad ops of the ops after the loop) writes."""
    made = {n for g in later for n in g.output_args()}
    return [fresh_op("fill_any_like", {"X": [strip_grad_suffix(g)]}, {"Out": [g]},
                     {"value": 0.0, "dtype": -1, OP_DEVICE_ATTR: ""}) for g in seeds if g not in made]


# --------------------------------------------------------------------------
# A branch that reads and reassigns a var: when it is not taken the var
# keeps its value, so its gradient must pass through
# --------------------------------------------------------------------------
def branch_grad_name(name: str, block_idx: int, op_index: int) -> str:
    """Where the grad of a `conditional_block` puts the gradient of a var it
    reads and reassigns (`pass_gradients_through_untaken_branches`)."""
    return f"{name}@GRAD@BRANCH@block{block_idx}@op{op_index}"


def _no_gradient_arrives(block: Block, at: int, name: str, targets: Iterable[str]) -> bool:
    """No gradient of `name` can reach the grad op of op `at` of `block`:
    `name` is no target, no op after op `at` reads or writes it (sub-blocks
    included), and, up to the global block, every block on the way is a
    `conditional_block`'s branch after whose op nothing touches it either (a
    `while` body may carry the gradient in from the next step: not here).
    A branch that reads and reassigns such a var (batch_norm's running
    mean, which Paddle differentiates through neither output) then needs no
    pass-through: its gradient is zero whether the branch is taken or not,
    as Paddle's program gives it."""
    if name in targets:
        return False
    b, k = block, at
    while True:
        todo = list(b.ops[k + 1:])
        while todo:
            op = todo.pop()
            if name in op.input_arg_names or name in op.output_arg_names:
                return False
            if op.sub_block is not None:
                todo.extend(b.program.block(op.sub_block).ops)
        parent = b.parent
        if parent is None:
            return True
        owners = [i for i, op in enumerate(parent.ops) if op.sub_block == b.idx]
        if len(owners) != 1 or parent.ops[owners[0]].type != "conditional_block":
            return False
        b, k = parent, owners[0]


def pass_gradients_through_untaken_branches(block: Block, descs: list, origins: list[int], owner=None,
                                            targets: Iterable[str] = ()) -> list:
    """`if c: h = f(h)` (a `conditional_block` with `h` both in its Input and
    its Out, as a branch inside a loop makes): when the branch is not taken
    `h` keeps its value, so its gradient passes through unchanged. The
    branch's grad ops write `h@GRAD` themselves (it is declared outside the
    grad block) when it was taken, but Paddle's conditional_block_grad also
    names `h@GRAD` among its outputs, and when the branch was not taken
    writes zeros into it: the gradient from everything after the branch is
    lost (with an if/else, the untaken half zeroes what the taken half then
    reads). Here that output is `h@GRAD@BRANCH@block{b}@op{j}`, which
    nothing reads, and an in-place `scale(h@GRAD, 1) -> h@GRAD` after the
    grad op says that `h@GRAD` is updated here (a while_grad's maker lists
    only the gradients its grad block's own ops write). Refused when the
    branch's grad ops do not write `h@GRAD` (a taken branch would then pass
    the gradient of the value it replaced).

    `if c: h = f(t)` (the branch assigns `h` without reading it) in a `while`
    body (`owner`), `h` a loop var or written before the branch, where an op
    after the branch reads `h` again: the gradient of the value before the
    branch and that of the value after it are both named `h@GRAD`, and
    Paddle's accumulation adds them (in a loop it keeps the first), though
    a taken branch replaced the value. Here the grad op lists `h` among its
    inputs too (its gradient going to the unread `@BRANCH` var), the
    branch's grad block ends with a `fill_any_like` zeroing `h@GRAD` (the
    value before a taken branch gets no gradient through it), and the same
    in-place `scale` follows, so the gradients of the ops before the branch
    add to what is left. Where nothing after the branch reads `h` (an
    if/else that only reassigns a loop var) the program stays Paddle's.
    Outside loops this case is left as Paddle's (known limit,
    docs/deviations.md).

    A var no gradient can reach (`_no_gradient_arrives`: nothing after the
    branch reads it, `targets` are the pass's target names) is left as in
    Paddle: neither refused nor passed through.

    Returns the new grad ops; `origins` is updated to match."""
    if not any(d.type == "conditional_block_grad" for d in descs):
        return descs
    program = block.program
    fixed: list[str] = []
    out: list = []
    new_origins: list[int] = []
    read_after: dict[str, int] = {}      # var -> the last op reading it
    first_write: dict[str, int] = {}
    for k, op in enumerate(block.ops):
        for n in op.input_arg_names:
            read_after[n] = k
        for n in op.output_arg_names:
            first_write.setdefault(n, k)
    loop_vars = set(owner.input("X")) if owner is not None else set()
    written_grads = {g for d in descs for g in d.output_args()}
    for d, j in zip(descs, origins):
        out.append(d)
        new_origins.append(j)
        if d.type != "conditional_block_grad":
            continue
        block_attr = d.attrs.get("sub_block")
        for n in d.inputs.get("Out", []):
            g = n + GRAD_SUFFIX
            if owner is None or j < 0 or block_attr is None or n in d.inputs.get("Input", []) \
                    or read_after.get(n, -1) <= j or g not in d.inputs.get("Out@GRAD", []) \
                    or g not in written_grads:
                continue
            if not ((n in loop_vars and not block.has_var(n)) or first_write.get(n, j) < j):
                continue            # no value before the branch
            v = block.find_var_recursive(n)
            if v is None or v.desc.type.type != pb.VarType.DENSE_TENSOR or v.data_type is None \
                    or not dtypes.is_float(v.data_type):
                continue
            d.inputs["Input"].append(n)
            d.outputs["Input@GRAD"].append(g)      # renamed to @BRANCH below
            gblock = program.block(int(block_attr[0]))
            desc = pb.OpDesc()
            fill_op_desc(desc, fresh_op("fill_any_like", {"X": [n]}, {"Out": [g]},
                                        {"value": 0.0, "dtype": -1, OP_DEVICE_ATTR: ""}))
            gblock.append_op_desc(desc)
        ins, outs = d.inputs.get("Input", []), set(d.inputs.get("Out", []))
        ograds = set(d.inputs.get("Out@GRAD", []))
        igrads = d.outputs.get("Input@GRAD", [])
        for i, n in enumerate(ins):
            if i >= len(igrads) or n not in outs or igrads[i] == EMPTY_VAR_NAME or igrads[i] not in ograds:
                continue
            if owner is None and j >= 0 and _no_gradient_arrives(block, j, n, targets):
                continue
            block_attr = d.attrs.get("sub_block")
            written = block_attr is not None and any(
                igrads[i] in op.output_arg_names for op in program.block(int(block_attr[0])).ops)
            if not written:
                raise ProgramFileError(
                    f"{where(program.source, block.idx, j if j >= 0 else None, 'conditional_block', n)}: "
                    f"the branch reads and reassigns the var, but its gradient does not flow through the "
                    f"branch; the gradient of the value it replaces would pass through when it is taken "
                    f"(rule: a branch that reassigns a var it reads differentiates that read; or "
                    f"--paddle-exact for Paddle's program)")
            g = igrads[i]
            igrads[i] = branch_grad_name(n, block.idx, j)
            out.append(fresh_op("scale", {"X": [g]}, {"Out": [g]},
                                {"scale": 1.0, "bias": 0.0, "bias_after_scale": True, OP_DEVICE_ATTR: ""}))
            new_origins.append(j)
            fixed.append(f"'{n}' (block {block.idx}, op {j})")
    if not fixed:
        return descs
    origins[:] = new_origins
    deviate("branch reassigning a var", ", ".join(fixed) + ": when the branch is not taken the var keeps "
            "its value; Paddle's conditional_block_grad zeroes its gradient then (or adds the gradients of "
            "the values before and after the branch), pybackward passes it through, and zeroes it when the "
            "branch is taken")
    return out


# --------------------------------------------------------------------------
# Grad ops reading a value a later write (in place, or in a loop's step)
# has replaced: copies taken in the forward
# --------------------------------------------------------------------------
def value_before_name(name: str, block_idx: int, op_index: int) -> str:
    """The copy of `name` taken right before op `op_index` of block
    `block_idx` (in a while body: in every step; `keep_read_values`)."""
    return f"{name}@BEFORE@block{block_idx}@op{op_index}"


def _grad_block_reads(program: Program, idx: int, name: str) -> list[Operator]:
    """The ops of grad block `idx`, and of the grad blocks inside it, that read `name`."""
    out, todo = [], [idx]
    while todo:
        for op in program.block(todo.pop()).ops:
            if name in op.input_arg_names:
                out.append(op)
            if op.sub_block is not None:
                todo.append(op.sub_block)
    return out


def _branch_reads_only_before_writing(program: Program, op: Operator, name: str) -> bool:
    """Every read of `name` in a conditional_block's branch (and the branches
    inside it) comes before the branch writes it, and only `assign`s write
    it (their grads read no forward value): the branch's grads need only the
    value `name` had when the op began."""
    todo = [op.sub_block]
    while todo:
        written = False
        for inner in program.block(todo.pop()).ops:
            if inner.sub_block is not None:
                if inner.type != "conditional_block":
                    return False
                todo.append(inner.sub_block)
            if name in inner.input_arg_names and written:
                return False
            if name in inner.output_arg_names:
                if inner.type != "assign":
                    return False
                written = True
    return True


def value_after_name(name: str, block_idx: int, op_index: int) -> str:
    """The copy of `name` taken right after op `op_index` of block
    `block_idx` (`keep_read_values`)."""
    return f"{name}@OUT@block{block_idx}@op{op_index}"


#: Grad-side ops that read a forward var only for its shape and dtype.
_SHAPE_ONLY = frozenset({"fill_any_like", "fill_zeros_like"})


def _slot_time(fwd: Operator, slot: str, name: str) -> str | None:
    """Whether a grad op's input slot `slot` holding `name` means the value
    `name` had before its forward op ran ("before": a forward input slot)
    or after ("after": a forward output slot); None for a gradient."""
    if slot.endswith(GRAD_SUFFIX):
        return None
    if name in fwd.input(slot):
        return "before"
    if name in fwd.output(slot):
        return "after"
    return "before" if name in fwd.input_arg_names else "after"


def keep_read_values(block: Block, owner, descs: list, origins: list[int]
                     ) -> list[tuple[int, str, str, str]]:
    """Grad ops that would read a var after an op overwrote the value they
    need: each reads a copy taken in the forward, right before (or after) its
    forward op instead. Two cases:

    * An op that reads and writes a var `h` in place (`square(X=h, Out=h)`,
      `elementwise_mul(X=h, Y=g, Out=h)`): the grad ops of it and of the ops
      before it that read `h` get the value `h` holds after the last write,
      in Paddle as in the interpreter. Here a grad op reading `h` reads the
      copy `h@BEFORE@block{b}@op{j}` (a forward input slot of its op j) or
      `h@OUT@block{b}@op{j}` (an output slot), where a later op writes `h`.
    * A `while` body where some op reads and writes a loop var `h` (a branch
      or a nested `while` assigning it, or an in-place op): Paddle's while
      then keeps no copy of `h` in the step scope (its no_copy_var_names),
      so every grad op reading `h` gets the value of the last step. Here
      every such read reads a copy taken in each step. A nested while_grad
      reads the values its own step scopes hold and needs none; a branch's
      grad block reads a copy of the value before the branch, and is refused
      where the branch reads `h` after assigning it or writes it other than
      by `assign` (no one copy is the value its grad ops need).

    A conditional_block_grad whose grad block reads a copy also lists it in
    its Input (with `@EMPTY@` for its gradient), which keeps Paddle's
    executor from freeing it after the forward step.

    Renames the reads in `descs` (and in the grad blocks of their
    conditional_block_grads); returns the copies (position, var, copy,
    kind) for `insert_value_copies`, which puts them in the forward block
    once the pass no longer needs its op indices."""
    program = block.program
    ops = block.ops
    params = {v.name for v in program.blocks[0].vars.values() if v.is_parameter}
    both: dict[str, int] = {}
    writers: dict[str, list[int]] = {}
    for k, op in enumerate(ops):
        outs = set(op.output_arg_names)
        for n in outs:
            writers.setdefault(n, []).append(k)
        if not outs.isdisjoint(op.input_arg_names):
            for n in op.input_arg_names:
                if n in outs:
                    both.setdefault(n, k)
    xs = set(owner.input("X")) if owner is not None else set()
    loop_vars, candidates = set(), []
    for n in dict.fromkeys([*both, *(x for x in xs if x in writers and not block.has_var(x))]):
        v = block.find_var_recursive(n)
        if n in params or v is None or v.desc.type.type != pb.VarType.DENSE_TENSOR or v.data_type is None \
                or not dtypes.is_float(v.data_type):
            continue
        candidates.append(n)
        if n in xs and not block.has_var(n):
            loop_vars.add(n)
    kept: dict[tuple[int, str], tuple[str, str]] = {}

    def copy_of(n: str, j: int, when: str) -> str | None:
        if n in loop_vars and n not in both:
            # the step scope keeps the value the var had when the step began
            earlier = [w for w in writers[n] if (w < j if when == "before" else w <= j)]
            if not earlier:
                return None
        elif n not in loop_vars and not [w for w in writers.get(n, ()) if (w >= j if when == "before" else w > j)]:
            return None          # no later write: the var still holds the value
        pos, name = (j, value_before_name(n, block.idx, j)) if when == "before" else \
            (j + 1, value_after_name(n, block.idx, j))
        kept.setdefault((pos, n), (name, "loop" if n in loop_vars else "in place"))
        return kept[(pos, n)][0]

    for n in candidates:
        for d, j in zip(descs, origins):
            if j < 0:
                continue
            block_attr = d.attrs.get("sub_block")
            if block_attr is not None:
                if d.type == "while_grad":
                    continue      # its grad block reads the nested loop's own step scopes
                readers = _grad_block_reads(program, int(block_attr[0]), n)
                if not readers:
                    continue
                if n in ops[j].output_arg_names and not _branch_reads_only_before_writing(program, ops[j], n):
                    _refuse_unkept(block, j, n, both[n])
                copy = copy_of(n, j, "before")
                if copy is None:
                    continue
                for op in readers:
                    op.rename_input(n, copy)
                if copy not in d.inputs["Input"]:
                    # An input of an op of the while's grad block: Paddle's
                    # executor then keeps it in the step scope (it frees a
                    # body var no such op reads, even if a branch's grad
                    # block inside reads it).
                    d.inputs["Input"].append(copy)
                    d.outputs["Input@GRAD"].append(EMPTY_VAR_NAME)
                continue
            if d.type in _SHAPE_ONLY:
                continue
            for slot, args in d.inputs.items():
                if n not in args:
                    continue
                when = _slot_time(ops[j], slot, n)
                copy = None if when is None else copy_of(n, j, when)
                if copy is not None:
                    d.inputs[slot] = [copy if a == n else a for a in args]
    return [(pos, n, name, kind) for (pos, n), (name, kind) in kept.items()]


def _refuse_unkept(block: Block, reader: int, name: str, both: int) -> None:
    ops = block.ops
    raise ProgramFileError(
        f"{where(block.program.source, block.idx, reader, ops[reader].type, name)}: the branch reads the var "
        f"after assigning it (or writes it other than by assign), and op {both} ({ops[both].type}) both reads "
        f"and writes it, so no one copy holds the values its gradient reads (rule: a branch that reassigns a "
        f"var updated in place reads it only before assigning it; or --paddle-exact for Paddle's program)")


def insert_value_copies(block: Block, kept: list[tuple[int, str, str, str]]) -> int:
    """Put `keep_read_values`' copies into the forward block, each at its
    position, and say so; returns how many ops went in."""
    if not kept:
        return 0
    for pos, n, copy, _ in sorted(kept, key=lambda t: (-t[0], t[1])):
        block.create_var_like(copy, block.find_var_recursive(n), stop_gradient=True)
        desc = pb.OpDesc()
        fill_op_desc(desc, fresh_op("assign", {"X": [n]}, {"Out": [copy]}, {OP_DEVICE_ATTR: ""}),
                     role=OP_ROLE_FORWARD)
        block.insert_op_desc(pos, desc)
    for kind, pattern, why in (
            ("loop", "loop var not kept per step",
             "read and written by one op of the while body, so Paddle's while keeps no copy per step and "
             "the grad ops read the value of the last step"),
            ("in place", "var overwritten in place",
             "updated in place by an op, and grad ops read the value after a later write (Paddle's too)")):
        mine = sorted((p, n, c) for p, n, c, k in kept if k == kind)
        if mine:
            deviate(pattern, f"block {block.idx}: " + ", ".join(sorted({f"'{n}'" for _, n, _ in mine}))
                    + f": {why}; pybackward copies the value where the grad ops need it ("
                    + ", ".join(f"'{c}'" for _, _, c in mine) + ")")
    return len(kept)


#: Grad op types that read and write one gradient var safely: `sum` (Paddle's
#: add_n supports Out == X[0]), `scale` and `select_input` (element by
#: element, or a whole copy), and the sub-block grads, whose slots pair by name.
_SAFE_IN_PLACE = frozenset({"sum", "grad_add", "scale", "select_input", "while_grad", "conditional_block_grad",
                            "increment", "write_to_array", "read_from_array"})


def copy_grads_read_in_place(block: Block, descs: list) -> list:
    """A grad op that reads and writes one gradient var (the grad of an
    in-place op: `elementwise_mul_grad` with Out@GRAD and X@GRAD both
    `h@GRAD`): the interpreter computes it as a function, but Paddle's
    kernels write X@GRAD into the buffer they still read Out@GRAD from. Here
    it reads a copy, `h@GRAD@IN@block{b}@{k}`, that an `assign` right before
    takes (after accumulation: the op still updates `h@GRAD` in place as far
    as the pass is concerned)."""
    out: list = []
    k = 0
    for d in descs:
        if d.type not in _SAFE_IN_PLACE:
            # (slots read in comprehensions, and most ops - no output among
            # their inputs - ruled out by one disjointness test in C)
            ins = {n for args in d.inputs.values() for n in args}
            outs = [n for args in d.outputs.values() for n in args]
            if ins.isdisjoint(outs):
                out.append(d)
                continue
            outs = [n for n in outs if n in ins and GRAD_SUFFIX in n]
            for n in dict.fromkeys(outs):
                copy = f"{n}@IN@block{block.idx}@{k}"
                k += 1
                out.append(fresh_op("assign", {"X": [n]}, {"Out": [copy]}))
                d.rename_input(n, copy)
        out.append(d)
    return out if k else descs


def refuse_aliased_outputs(block: Block, op: Operator, index: int | None) -> None:
    """An op on the gradient path that names one var twice among its outputs
    (`split(h) -> Out=[p, p]`): the var holds only the last of the values,
    but the grad op hands the gradient back to every position. Refused."""
    outs = op.output_arg_names
    if len(outs) < 2 or len(set(outs)) == len(outs):
        return
    seen: set[str] = set()
    for n in op.output_arg_names:
        if n == EMPTY_VAR_NAME:
            continue
        if n in seen:
            raise ProgramFileError(
                f"{where(block.program.source, block.idx, index, op.type, n)}: the op writes the var twice "
                f"among its outputs, so it holds only the last value while the gradient goes back to every "
                f"position (rule: an op on the gradient path writes each output var once; or --paddle-exact "
                f"for Paddle's program)")
        seen.add(n)


# --------------------------------------------------------------------------
# A tensor-array slot read inside a while loop and read again later
# --------------------------------------------------------------------------
def _reads_below_bound(body: Block, owner, read_idx: int, index: str) -> str | None:
    """The loop bound N if every step starts with `index < N`, and `index`
    is unchanged from the step's start to op `read_idx`: the slot read there
    is then always below N.

    Every step starts with `index < N` when the body's last write of the
    condition is `less_than(index, N)` (the RNN form) or an `assign` of such
    a `less_than`'s result (`while_loop`'s form), that `less_than` comes
    after every write of `index` in the body, N is not written in the body,
    and the condition before the loop is the same comparison."""
    cond = owner.input("Condition")
    ops = body.ops
    if len(cond) != 1 or any(index in op.output_arg_names for op in ops[:read_idx]):
        return None
    writes = [k for k, op in enumerate(ops) if cond[0] in op.output_arg_names]
    if not writes:
        return None
    last = writes[-1]
    if ops[last].type == "assign":
        compared = ops[last].input("X")
        bound, at = _compared_bound(ops, last, compared, index), _last_writer(ops, last, compared)
    else:
        bound, at = _compared_bound(ops, last + 1, cond, index), last
    # (compared before the body changes `index`, the next step can start at N)
    if bound is None or any(bound in o.output_arg_names for o in ops) \
            or any(index in o.output_arg_names for o in ops[at:]):
        return None
    return bound if _compared_before_loop(owner, index, bound) else None


def _compared_before_loop(owner, index: str, bound: str) -> bool:
    """The while's condition before the loop is `less_than(index, bound)`,
    neither var changed between the comparison and the loop."""
    outer, at, cond = owner.block.ops, owner.idx, owner.input("Condition")
    k = _last_writer(outer, at, cond)
    return k >= 0 and _compared_bound(outer, k + 1, cond, index) == bound \
        and not any(index in o.output_arg_names or bound in o.output_arg_names for o in outer[k:at])


def _last_writer(ops: list, end: int, names: list[str]) -> int:
    """The index of the last op before `end` writing the single var in
    `names` (-1 if none or not a single var)."""
    if len(names) != 1:
        return -1
    ks = [k for k, op in enumerate(ops[:end]) if names[0] in op.output_arg_names]
    return ks[-1] if ks else -1


def _compared_bound(ops: list, end: int, names: list[str], index: str) -> str | None:
    """N if the last op before `end` writing the var in `names` is
    `less_than(X=index, Y=N)`."""
    k = _last_writer(ops, end, names)
    if k < 0:
        return None
    op = ops[k]
    if op.type != "less_than" or op.input("X") != [index] or len(op.input("Y")) != 1:
        return None
    return op.input("Y")[0]


def _ops_run(block: Block, ops: list) -> list[Operator]:
    """`ops` of `block` and the ops of their sub-blocks, nested: every op that
    can run while they do."""
    out, todo = [], list(ops)
    while todo:
        op = todo.pop(0)
        out.append(op)
        if op.sub_block is not None:
            todo.extend(block.program.block(op.sub_block).ops)
    return out


def _int_writers(ops: list, name: str) -> list[Operator] | None:
    """The ops among `ops` writing `name`, if each is a `fill_constant` of an
    integer with a value known statically, an `increment` by a step >= 0, or
    an op with a sub-block (whose own writes are among `ops`; not returned);
    None otherwise."""
    found = []
    for op in ops:
        if name not in op.output_arg_names or op.sub_block is not None:
            continue
        if op.type == "increment" and float(op.attr("step") or 0.0) >= 0:
            found.append(op)
        elif _constant(op) is not None:
            found.append(op)
        else:
            return None
    return found


def _constant(op: Operator) -> int | None:
    """The integer a `fill_constant` with no tensor inputs writes."""
    if op.type != "fill_constant" or any(op.input(s) for s in op.input_names) \
            or op.attr("dtype") not in (pb.VarType.INT32, pb.VarType.INT64):
        return None
    s = op.attr("str_value") or ""
    try:
        v = float(s) if s else float(op.attr("value") or 0.0)
    except ValueError:
        return None
    return int(v) if v == v and abs(v) != float("inf") else None


def _at_least(block: Block, at: int, name: str) -> int | None:
    """A lower bound of the integer `name` when op `at` of the global block
    reads it: a `fill_constant` of it runs there before op `at`, and every
    op that runs before (sub-blocks included) only sets it to a constant or
    increments it (`_int_writers`). The grad ops of the pass (the grad of
    an `increment` is a decrement) all run after."""
    if block.idx != 0:
        return None
    writers = _int_writers(_ops_run(block, block.ops[:at]), name)
    if not writers or not any(_constant(op) is not None and op.output("Out") == [name] for op in block.ops[:at]):
        return None
    return min(c for c in (_constant(op) for op in writers) if c is not None)


def _always_below(body: Block, owner, index: str, bound: str | None) -> int | None:
    """The value of the loop bound N (of a while in the global block) when
    every op that runs before the loop ends writes it only as one integer
    constant, and the loop is entered only when `index < N` too."""
    parent = owner.block
    if bound is None or parent.idx != 0 or not _compared_before_loop(owner, index, bound):
        return None
    writers = _int_writers(_ops_run(parent, parent.ops[:owner.idx + 1]), bound)
    if not writers or any(_constant(op) is None for op in writers):
        return None
    values = {_constant(op) for op in writers}
    return values.pop() if len(values) == 1 else None


def _at_or_past(parent: Block, at: int, read: Operator, limit: int | None) -> bool:
    """The read `read` reads a slot >= `limit` (the constant loop bound the
    in-loop reads stay below); only ops before op `at` of the global block
    `parent` (and their sub-blocks) can have run when it does."""
    if limit is None or len(read.input("I")) != 1:
        return False
    low = _at_least(parent, at, read.input("I")[0])
    return low is not None and low >= limit


def accumulate_array_read_grads(body: Block, owner, descs: list, origins: list[int]) -> list:
    """A tensor-array slot read inside a `while` body and read again (after the
    loop, in another step, or by a nested loop or branch later in the step,
    whose grad op updates the array's gradient in place first): Paddle's
    grad of the in-loop `read_from_array` is a `write_to_array` into the
    array's gradient that overwrites what the other reads put in that slot.
    Here it writes into an array of its own, which a `sum` (slot by slot,
    Paddle's add_n over arrays) adds into the array's gradient.

    Left as Paddle's where the slots cannot meet: the body reads `arr[i]`
    before changing `i`, loops while `i < N`, and the reads after the loop
    read `arr[N]` (the RNN pattern), or N is an integer constant and every
    other read's index is provably at least N (`_at_or_past`)."""
    ops = body.ops
    parent = owner.block
    at = owner.idx
    fixed: list[tuple[int, str]] = []
    out = list(descs)
    for r, op in enumerate(ops):
        if op.type != "read_from_array" or body.has_var(op.input("X")[0]):
            continue
        (arr,), (index,), (value,) = op.input("X"), op.input("I"), op.output("Out")
        later = [o for o in parent.ops[at + 1:] if o.type == "read_from_array" and o.input("X") == [arr]]
        bound = _reads_below_bound(body, owner, r, index)
        limit = _always_below(body, owner, index, bound)
        # reads in a sub-block after the read (a nested while): their grad
        # op updates the array's gradient in place before this read's grad
        # writes its slot
        nested = [o for o in _ops_run(body, [x for x in ops[r + 1:] if x.sub_block is not None])
                  if o.type == "read_from_array" and o.input("X") == [arr]]
        meets = not any(index in o.output_arg_names for o in ops) or \
            any(bound is None or (o.input("I") != [bound] and not _at_or_past(parent, o.idx, o, limit))
                for o in later) or \
            any(not _at_or_past(parent, at + 1, o, limit) for o in nested)
        if not meets:
            continue
        g, ag = value + GRAD_SUFFIX, arr + GRAD_SUFFIX
        for pos, (d, j) in enumerate(zip(out, origins)):
            if j == r and d.type == "write_to_array" and list(d.output_args()) == [ag] \
                    and d.inputs.get("X") == [g]:
                own = f"{ag}@SLOT@block{body.idx}@op{r}"
                d.outputs["Out"] = [own]
                out.insert(pos + 1, fresh_op("sum", {"X": [ag, own]}, {"Out": [ag]}))
                origins.insert(pos + 1, j)
                fixed.append((r, arr))
                break
    if fixed:
        deviate("tensor array read again", "; ".join(
            f"block {body.idx}'s while body reads a slot of '{a}' (op {r}) that is read again later"
            for r, a in fixed) + "; Paddle's grad of the in-loop read overwrites the slot's gradient, "
            "pybackward adds to it")
    return out
