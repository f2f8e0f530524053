"""Where Paddle's backward program would compute a wrong gradient, the
corrections pybackward applies by default (docs/deviations.md).

Each correction is a step named for the pattern it fixes; it changes the
program only where the pattern occurs, so everywhere Paddle is right the
output stays Paddle's op for op. Each one reports what it changed with a
`PaddleDeviationWarning` (the CLI prints it as one line and lists it under
"deviations" in --json). `paddle_exact=True` skips them all.
"""
from __future__ import annotations

import warnings

from ..base import dtypes
from .._proto import framework_pb2 as pb
from ..base.errors import PaddleDeviationWarning, ProgramFileError, where
from ..ops.registry import GradOp, fresh_op
from ..legacy.program import OP_DEVICE_ATTR, OP_ROLE_ATTR, Block, Program
from .emit import fill_op_desc
from ..legacy.names import GRAD_SUFFIX, strip_grad_suffix


def deviate(pattern: str, detail: str) -> None:
    """Say that the output departs from Paddle's: one line naming the pattern and the vars."""
    warnings.warn(PaddleDeviationWarning(f"{pattern}: {detail} (Paddle's program: paddle_exact=True / "
                                         f"--paddle-exact; see docs/deviations.md)"), stacklevel=3)


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
    body op index each one came from. Returns the new grad op list and the
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
            if body.has_var(n):
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
    front = []
    for k in sorted(k for ks in patterns.values() for k in ks):
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
# A tensor-array slot read inside a while loop and read again later
# --------------------------------------------------------------------------
def _reads_below_bound(body: Block, owner, read_idx: int, index: str) -> str | None:
    """The loop bound N if the body's condition is `less_than(index, N)` and
    `index` is unchanged from the step's start to op `read_idx`: the slot read
    there is then always below N."""
    cond = owner.input("Condition")
    ops = body.ops
    if len(cond) != 1 or any(index in op.output_arg_names for op in ops[:read_idx]):
        return None
    for op in ops:
        if op.type == "less_than" and op.output("Out") == cond and op.input("X") == [index]:
            (bound,) = op.input("Y") or [None]
            if bound is not None and not any(bound in o.output_arg_names for o in ops):
                return bound
    return None


def accumulate_array_read_grads(body: Block, owner, descs: list, origins: list[int]) -> list:
    """A tensor-array slot read inside a `while` body and read again (after the
    loop, or in another step): Paddle's grad of the in-loop `read_from_array`
    is a `write_to_array` into the array's gradient that overwrites what the
    other reads put in that slot. Here it writes into an array of its own,
    which a `sum` (slot by slot, Paddle's add_n over arrays) adds into the
    array's gradient.

    Left as Paddle's where the slots cannot meet: the body reads `arr[i]`
    before changing `i`, loops while `i < N`, and the reads after the loop
    read `arr[N]` (the RNN pattern)."""
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
        meets = not any(index in o.output_arg_names for o in ops) or \
            any(bound is None or o.input("I") != [bound] for o in later)
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
