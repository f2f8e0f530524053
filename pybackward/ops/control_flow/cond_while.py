"""Control flow: `conditional_block`, `while` and their grads, `select_input`
/ `select_output`, and tensor arrays (`write_to_array`, `read_from_array`,
`lod_array_length` - Paddle 3.3.1's name for array_length).

Grad makers follow Paddle's C++ makers (conditional_block_op.cc,
while_op.cc, select_input_op.cc, ...):

* `conditional_block` -> `conditional_block_grad`: in `Cond, Input, Out,
  Out@GRAD (every Out), Scope`, out `Input@GRAD` aligned with Input
  (`@EMPTY@` for no-grad inputs, and, as FilterNoGradInput, for inputs the
  forward op's block cannot find or of a bool / integer dtype); attrs: the
  forward op's runtime ("extra")
  attrs, `is_scalar_condition`, `sub_block` = the grad block.
* `while` -> `while_grad`: in `X, Out, StepScopes` and `Out@GRAD` = the
  gradients the grad block reads that nothing inside makes and no visible
  block declares, in the iteration order of the C++ `std::unordered_set`
  Paddle collects them in (reproduced below for libstdc++); out `X@GRAD`
  aligned with X, `@EMPTY@` where the grad block does not produce it; attrs:
  every forward attr, `sub_block`, `original_output_grad`, and
  `skip_eager_deletion_vars=[]`.

Kernels follow Paddle's executor: a sub-block runs in a child scope; the
`while` op keeps one step scope per iteration (holding that iteration's copy
of each non-parameter loop input that no body op updates in place) so
`while_grad` can run the grad block once per step, last step first, linking
the outer output gradients in and summing parameter gradients across steps.
A tensor array is a Python list (None marks a slot never written).
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from ...base import dtypes
from ..._proto import framework_pb2 as pb
from ...base.errors import ExecutionError, ExecutionLimitError, ProgramFileError, where
from ..paddle_table import paddle_opdef
from ..lod import ArrayLoDs
from ..registry import EMPTY_VAR_NAME, GRAD_SUFFIX, LOD_KEY, Call, FwdOp, GradOp, OpDef, Sample, register

_BLOCK = pb.AttrType.BLOCK
_STRINGS = pb.AttrType.STRINGS

#: Runtime ("extra") attrs of the forward ops; Paddle's SingleGradOpMaker
#: copies them onto every grad op it makes, serialised first.
_EXTRA_ATTRS = {"conditional_block": ("skip_eager_deletion_vars",),
                "while": ("skip_eager_deletion_vars",)}

#: Guard against a `while` whose condition never turns false: the default
#: limit on the steps of one run of a `while` op (`Executor(max_while_steps=)`,
#: `pybackward run --max-steps`). Each step keeps a step scope when a while_grad
#: reads them (a forward-only run keeps none), so the limit also bounds the
#: memory a runaway loop takes.
from ...base.limits import MAX_WHILE_STEPS  # noqa: E402,F401  (set there, for the CLI's help)


# --------------------------------------------------------------------------
# Paddle's lookups, reproduced
# --------------------------------------------------------------------------
def find_var_cpp(block, name: str):
    """C++ `BlockDesc::FindVarRecursive`: breadth first over the forward block,
    then the parent, of each block visited. None for `@EMPTY@` or not found."""
    if name == EMPTY_VAR_NAME or block is None:
        return None
    program = block.program
    frontier = [block]
    seen: set[int] = set()
    while frontier:
        cur = frontier.pop(0)
        if cur.idx in seen:
            continue
        v = cur.vars.get(name)
        if v is not None:
            return v
        fwd = cur.forward_block_idx
        if 0 <= fwd < len(program.blocks):
            frontier.append(program.blocks[fwd])
        if cur.parent is not None:
            frontier.append(cur.parent)
        seen.add(cur.idx)
    return None


_M64 = (1 << 64) - 1
_MUL = (0xC6A4A793 << 32) + 0x5BD1E995
_SEED = 0xC70F6907
#: libstdc++'s __prime_list (the part a small set can reach).
_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79,
           83, 89, 97, 103, 109, 113, 127, 137, 139, 149, 157, 167, 179, 193, 199, 211, 227, 241,
           257, 277, 293, 313, 337, 359, 383, 409, 439, 467, 503, 541, 577, 619, 661, 709, 761,
           823, 887, 953, 1031, 1109, 1193, 1289, 1381, 1493, 1613, 1741, 1879, 2029, 2179,
           2357, 2549, 2753, 2971, 3209, 3469, 3739, 4027, 4349, 4703, 5087, 5503, 5953, 6427,
           6949, 7517, 8123, 8783, 9497, 10273, 11113, 12011, 12983, 14033, 15173, 16411, 17749,
           19183, 20753, 22447, 24281, 26267, 28411, 30727, 33223, 35933, 38873, 42043, 45481,
           49201, 53201, 57557, 62233, 67307, 72817, 78779, 85229, 92203, 99733, 107897, 116731,
           126271, 136607, 147793, 159871, 172933, 187091, 202409, 218971, 236897, 256279,
           277261, 299951, 324503, 351061, 379787, 410857, 444487, 480881, 520241, 562841,
           608903, 658753, 712697, 771049, 834181, 902483, 976369)
_FAST_BKT = (2, 2, 2, 3, 5, 5, 7, 7, 11, 11, 11, 11, 13, 13)


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def std_hash(s: str) -> int:
    """libstdc++'s `std::hash<std::string>` (`_Hash_bytes`, 64-bit)."""
    data = s.encode()
    n = len(data)
    h = (_SEED ^ (n * _MUL)) & _M64
    aligned = n & ~7
    for p in range(0, aligned, 8):
        d = (_shift_mix((int.from_bytes(data[p:p + 8], "little") * _MUL) & _M64) * _MUL) & _M64
        h = ((h ^ d) * _MUL) & _M64
    if n & 7:
        h = ((h ^ int.from_bytes(data[aligned:], "little")) * _MUL) & _M64
    h = (_shift_mix(h) * _MUL) & _M64
    return _shift_mix(h)


def _next_bkt(n: int) -> tuple[int, int]:
    """(bucket count, next resize) as libstdc++'s _Prime_rehash_policy gives them."""
    if n < len(_FAST_BKT):
        b = _FAST_BKT[n]
        return b, b
    for p in _PRIMES[6:]:
        if p >= n:
            return p, p
    raise ExecutionError("too many names for the unordered_set model")


def unordered_set_order(names: Iterable[str]) -> list[str]:
    """The iteration order of a libstdc++ `std::unordered_set<std::string>`
    default-constructed and filled by inserting `names` in order (duplicates
    ignored), as Paddle's C++ makers copy such sets into op slots."""
    nbkt, next_resize = 1, 0
    order: list[str] = []                  # the node list, begin to end
    hashes: dict[str, int] = {}
    before: dict[int, str | None] = {}     # bucket -> node before its first (None: list head)

    def bucket(name: str) -> int:
        return hashes[name] % nbkt

    def rehash(n: int) -> None:
        nonlocal order, before, nbkt
        nbkt = n
        old, order, before = order, [], {}
        for node in old:          # libstdc++ _M_rehash_aux (unique keys)
            b = bucket(node)
            if b not in before:
                if order:
                    before[bucket(order[0])] = node
                order.insert(0, node)
                before[b] = None
            else:
                prev = before[b]
                order.insert(0 if prev is None else order.index(prev) + 1, node)
    for name in names:
        if name in hashes:
            continue
        n_elt = len(order)
        if n_elt + 1 > next_resize:
            min_bkts = max(n_elt + 1, 11 if next_resize == 0 else 0)
            if min_bkts >= nbkt:
                nb, next_resize = _next_bkt(max(min_bkts + 1, nbkt * 2))
                hashes[name] = std_hash(name)
                rehash(nb)
            else:
                next_resize = nbkt
        hashes[name] = std_hash(name)
        b = bucket(name)
        if b in before:
            prev = before[b]
            order.insert(0 if prev is None else order.index(prev) + 1, name)
        else:
            if order:
                before[bucket(order[0])] = name
            order.insert(0, name)
            before[b] = None
    return order


# --------------------------------------------------------------------------
# Grad makers
# --------------------------------------------------------------------------
def _attr_desc(fwd: FwdOp, name: str) -> pb.OpDesc.Attr | None:
    for a in fwd.attrs_desc:
        if a.name == name:
            return a
    return None


def _grad_block(fwd: FwdOp):
    """(program, grad block) of a sub-block op, checked against the forward op."""
    program = getattr(fwd, "program", None)
    if program is None or len(fwd.grad_blocks) != 1:
        raise ProgramFileError(f"op {fwd.type}: the gradient pass made no grad block for its sub_block "
                               "(its grad maker needs exactly one)")
    gblock = program.block(int(fwd.grad_blocks[0]))
    sub = fwd.attr("sub_block")
    if sub is None:
        raise ProgramFileError(f"op {fwd.type} has no 'sub_block' attr")
    if gblock.forward_block_idx != int(sub):
        raise ProgramFileError(f"op {fwd.type}: grad block {gblock.idx} has forward_block_idx "
                               f"{gblock.forward_block_idx}, not the op's sub_block {int(sub)}")
    return program, gblock


def _runtime_attrs(fwd: FwdOp) -> list[pb.OpDesc.Attr]:
    return [a for a in fwd.attrs_desc if a.name in _EXTRA_ATTRS.get(fwd.type, ())]


#: FilterNoGradInput's `not_support_backward_dtype` (conditional_block_op.cc)
_NO_GRAD_DTYPES = frozenset({pb.VarType.BOOL, pb.VarType.INT8, pb.VarType.UINT8, pb.VarType.INT16,
                             pb.VarType.INT32, pb.VarType.INT64})


def _filter_no_grad_inputs(program, gblock, names: list[str]) -> list[str]:
    """Paddle's `FilterNoGradInput` on a conditional_block's Input@GRAD: a
    gradient whose forward var the forward op's block cannot find
    (recursively), or whose var is bool or an integer, becomes `@EMPTY@`,
    whatever the no-grad set says. It matters in a nested branch: an int64
    `label` read there is declared only in the global block, so the branch
    block's no-grad set (its own stop_gradient vars) does not hold it."""
    fwd_block = program.block(program.block(gblock.forward_block_idx).parent_idx)
    out = []
    for g in names:
        v = None if g == EMPTY_VAR_NAME else fwd_block.find_var_recursive(g[: -len(GRAD_SUFFIX)])
        out.append(EMPTY_VAR_NAME if v is None or v.data_type in _NO_GRAD_DTYPES else g)
    return out


def _conditional_block_grad_maker(fwd: FwdOp) -> list[GradOp]:
    """ConditionalBlockGradMaker: Input@GRAD keeps positions (`@EMPTY@` for
    no-grad inputs and for those `FilterNoGradInput` drops)."""
    program, gblock = _grad_block(fwd)
    outs = list(fwd.output("Out"))
    ins = list(fwd.input("Input"))
    base = _runtime_attrs(fwd)
    cond_attr = _attr_desc(fwd, "is_scalar_condition")
    if cond_attr is not None:
        base.append(cond_attr)
    g = GradOp("conditional_block_grad",
               {"Cond": list(fwd.input("Cond")), "Input": ins, "Out": outs,
                "Out@GRAD": [n + GRAD_SUFFIX for n in outs], "Scope": list(fwd.output("Scope"))},
               {"Input@GRAD": _filter_no_grad_inputs(program, gblock, fwd.grads_of(ins, keep_empty=True))},
               base, {"sub_block": (gblock.idx, _BLOCK)})
    g2v = {n + GRAD_SUFFIX: n for n in outs}
    g2v.update({n + GRAD_SUFFIX: n for n in ins if n + GRAD_SUFFIX not in fwd.no_grad})
    g.grad_to_var = g2v  # what Paddle's InputGrad / OutputGrad record
    return [g]


def _while_grad_maker(fwd: FwdOp) -> list[GradOp]:
    """WhileGradOpMaker (see the module doc)."""
    program, gblock = _grad_block(fwd)
    fwd_block = program.block(gblock.forward_block_idx)
    parent = gblock.parent
    xs = list(fwd.input("X"))
    outs = list(fwd.output("Out"))
    inner_outputs = {n for op in gblock.ops for n in op.output_arg_names}
    igs: list[str] = []
    g2v: dict[str, str] = {}
    for n in xs:
        g = n + GRAD_SUFFIX
        if g in fwd.no_grad:
            igs.append(EMPTY_VAR_NAME)
            continue
        g2v[g] = n
        igs.append(g if g in inner_outputs else EMPTY_VAR_NAME)
    block_ins = set(xs) | set(outs)
    wanted: list[str] = []
    for op in gblock.ops:
        for n in op.input_arg_names:
            if n in block_ins or find_var_cpp(fwd_block, n) is not None \
                    or find_var_cpp(parent, n) is not None:
                continue
            wanted.append(n)
        block_ins.update(op.output_arg_names)
    ogs = unordered_set_order(wanted)
    g = GradOp("while_grad",
               {"X": xs, "Out": outs, "Out@GRAD": list(ogs), "StepScopes": list(fwd.output("StepScopes"))},
               {"X@GRAD": igs}, fwd.attrs_desc,
               {"sub_block": (gblock.idx, _BLOCK), "original_output_grad": (list(ogs), _STRINGS),
                "skip_eager_deletion_vars": ([], _STRINGS)})
    g.grad_to_var = g2v
    return [g]


def _select_input_grad_maker(fwd: FwdOp) -> list[GradOp]:
    """SelectInputGradMaker: select_output routes Out@GRAD to the chosen X@GRAD."""
    return [GradOp("select_output", {"Mask": list(fwd.input("Mask")),
                                     "X": [n + GRAD_SUFFIX for n in fwd.output("Out")]},
                   {"Out": fwd.grads_of(fwd.input("X"), keep_empty=True)}, fwd.attrs_desc)]


def _select_output_grad_maker(fwd: FwdOp) -> list[GradOp]:
    """SelectOutputGradMaker: select_input picks the chosen Out@GRAD."""
    return [GradOp("select_input", {"Mask": list(fwd.input("Mask")),
                                    "X": [n + GRAD_SUFFIX for n in fwd.output("Out")]},
                   {"Out": fwd.grads_of(fwd.input("X"))}, fwd.attrs_desc)]


def _write_to_array_grad_maker(fwd: FwdOp) -> list[GradOp]:
    """WriteToArrayGradMaker: read the written slot back out of the array's grad."""
    return [GradOp("read_from_array", {"I": list(fwd.input("I")),
                                       "X": [n + GRAD_SUFFIX for n in fwd.output("Out")],
                                       "X_W": list(fwd.input("X"))},
                   {"Out": fwd.grads_of(fwd.input("X"))}, fwd.attrs_desc)]


def _read_from_array_grad_maker(fwd: FwdOp) -> list[GradOp]:
    """ReadFromArrayGradMaker: write Out@GRAD into the array's grad at I."""
    return [GradOp("write_to_array", {"I": list(fwd.input("I")),
                                      "X": [n + GRAD_SUFFIX for n in fwd.output("Out")]},
                   {"Out": fwd.grads_of(fwd.input("X"))}, fwd.attrs_desc)]


# --------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------
def _env(c: Call):
    env = c.env
    if env is None or not hasattr(env, "run_block"):
        raise ExecutionError(f"op {c.op_type} runs a sub-block: it needs the interpreter (call.env)")
    return env


def _names(c: Call, slot: str) -> list[str]:
    return list((getattr(c.env, "in_names", None) or {}).get(slot, ()))


def _sub_block(c: Call, grad: bool):
    """The op's sub_block, checked: a child of the op's block; for a grad op, a
    grad block (with forward_block_idx)."""
    env = _env(c)
    program = env.program
    idx = c.attr("sub_block")
    if idx is None:
        raise ProgramFileError("the op has no 'sub_block' attr")
    idx = int(idx)
    if not 0 < idx < len(program.blocks):
        raise ProgramFileError(f"attr 'sub_block' names block {idx}, which does not exist "
                               f"(the program has {len(program.blocks)} blocks)")
    sub = program.blocks[idx]
    here = getattr(env, "block", None)
    if here is not None and sub.parent_idx != here.idx:
        raise ProgramFileError(f"attr 'sub_block' names block {idx}, whose parent is block "
                               f"{sub.parent_idx}, not the op's block {here.idx}")
    if grad and sub.forward_block_idx == -1:
        raise ProgramFileError(f"attr 'sub_block' names block {idx}, which is not a grad block: "
                               "it has no forward_block_idx")
    if not grad and sub.forward_block_idx != -1:
        raise ProgramFileError(f"attr 'sub_block' names block {idx}, a grad block (forward_block_idx "
                               f"{sub.forward_block_idx}), not a forward sub-block")
    return idx


def _scalar_true(v: Any, what: str) -> bool:
    a = np.asarray(v)
    if a.size != 1:
        raise ExecutionError(f"{what} must hold exactly one element, it has shape {list(a.shape)}")
    return bool(a.reshape(-1)[0])


def _need_run(c: Call) -> bool:
    if c.attr("is_scalar_condition", False):
        conds = c.xs("Cond")
        if len(conds) != 1 or conds[0] is None:
            raise ExecutionError("is_scalar_condition needs exactly one computed Cond")
        return _scalar_true(conds[0], "the scalar condition")
    # Paddle: run iff every Input tensor is non-empty.
    return all(v is not None and not isinstance(v, list) and np.size(v) != 0 for v in c.xs("Input"))


def _zeros_like(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, list):
        return [None if t is None else np.zeros_like(t) for t in v]
    a = np.asarray(v)
    if a.size == 0:
        return None
    return np.zeros_like(a)


def _conditional_block(c: Call):
    env = _env(c)
    idx = _sub_block(c, grad=False)
    if not _need_run(c):
        return {"Scope": [[]]}
    child = env.scope.child()
    env.run_block(idx, child)
    return {"Scope": [[child]]}


def _conditional_block_grad(c: Call):
    env = _env(c)
    idx = _sub_block(c, grad=True)
    in_names = _names(c, "Input")
    in_vals = c.xs("Input")
    out_names = c.outs.get("Input@GRAD", [])
    if len(in_names) != len(out_names):
        raise ExecutionError(f"Input has {len(in_names)} vars but Input@GRAD {len(out_names)}")
    grads: list[Any] = [None] * len(out_names)
    if _need_run(c):
        scopes = c.x("Scope")
        if not scopes:
            raise ExecutionError("the Scope var holds no scope: the forward conditional_block did not run")
        cur = scopes[0]
        env.run_block(idx, cur)
        for i, (n, g) in enumerate(zip(in_names, out_names)):
            if g == EMPTY_VAR_NAME:
                continue
            inside = cur.vars.get(n + GRAD_SUFFIX)   # FindLocalVar
            grads[i] = inside if inside is not None else _zeros_like(in_vals[i])
    else:
        for i, g in enumerate(out_names):
            if g != EMPTY_VAR_NAME:
                grads[i] = _zeros_like(in_vals[i])
    return {"Input@GRAD": grads}


def _no_copy_names(program, sub) -> set[str]:
    """WhileOp's no_copy_var_names: global parameters and vars some body op
    both reads and writes."""
    names = {v.name for v in program.blocks[0].vars.values() if v.is_parameter}
    for op in sub.ops:
        outs = set(op.output_arg_names)
        names.update(n for n in op.input_arg_names if n in outs)
    return names


def _while(c: Call):
    env = _env(c)
    idx = _sub_block(c, grad=False)
    program = env.program
    sub = program.blocks[idx]
    scope = env.scope
    cond_names = _names(c, "Condition")
    if len(cond_names) != 1:
        raise ExecutionError(f"Condition must name one var, not {cond_names}")
    cond_name = cond_names[0]
    x_names = _names(c, "X")

    def cond() -> bool:
        v = scope.get(cond_name)
        if v is None:
            raise ExecutionError(f"the condition '{cond_name}' has no value")
        return _scalar_true(v, f"the condition '{cond_name}'")

    is_test = bool(c.attr("is_test", False))
    # The step scopes (and the copies of X each keeps) are for while_grad
    # alone: kept only when an op reads this op's StepScopes, so a forward
    # run keeps one step alive at a time however many steps (or nested
    # steps) it takes.
    keep = not is_test
    reads = getattr(env, "is_read", None)
    if keep and reads is not None:
        keep = any(reads(n) for n in c.outs.get("StepScopes", ()) if n != EMPTY_VAR_NAME)
    no_copy = _no_copy_names(program, sub) if keep else set()
    steps: list[Any] = []
    n = 0
    limit = env.max_while_steps or MAX_WHILE_STEPS
    while cond():
        n += 1
        if n > limit:
            raise ExecutionLimitError(f"stopped at step {limit}: the condition '{cond_name}' is still true "
                                      f"after {limit} steps, the step limit (raise it with --max-steps / "
                                      "Executor(max_while_steps=...))")
        env.check_deadline(f"at step {n} of the loop")
        step = scope.child()
        saved = {}
        if keep:
            for name in x_names:
                if name not in no_copy:
                    v = scope.get(name)
                    if isinstance(v, np.ndarray):
                        saved[name] = v.copy()
        try:
            env.run_block(idx, step)
        except KeyboardInterrupt as e:
            e.add_note(f"in step {n} of the loop")
            raise
        step.vars.update(saved)
        if keep:
            steps.append(step)
    return {"StepScopes": [steps]}


def _array_sum(a: list, b: list) -> list:
    out = list(a)
    for i, t in enumerate(b):
        if t is None or np.size(t) == 0:
            continue
        if i >= len(out):
            out.extend([None] * (i + 1 - len(out)))
        if out[i] is None or np.size(out[i]) == 0:
            out[i] = np.array(t, copy=True)
        else:
            if np.size(out[i]) != np.size(t):
                raise ExecutionError(f"tensor array slot {i}: cannot add shape {list(np.shape(t))} "
                                     f"to shape {list(np.shape(out[i]))}")
            out[i] = out[i] + np.reshape(t, np.shape(out[i])).astype(out[i].dtype, copy=False)
    return out


def sum_arrays(arrays: Iterable[list]) -> list:
    """Paddle's add_n over tensor arrays (AddNArrayKernel): slot by slot; a
    slot never written (or empty) in one input is skipped, one written in no
    input stays unwritten, and the result is as long as the last slot any
    input wrote."""
    out: list = []
    for a in arrays:
        out = _array_sum(out, a)
    return out


def _while_grad(c: Call):
    env = _env(c)
    if c.attr("is_test", False):
        raise ExecutionError("while_grad is only callable when is_test is false")
    idx = _sub_block(c, grad=True)
    program = env.program
    gblock = program.blocks[idx]
    scope = env.scope
    steps = c.x("StepScopes") or []
    og_out = _names(c, "Out@GRAD")
    og_in = list(c.attr("original_output_grad", []) or [])
    if len(og_out) != len(og_in):
        raise ExecutionError(f"Out@GRAD names {len(og_out)} vars but original_output_grad {len(og_in)}")
    x_names = _names(c, "X")
    xg_names = list(c.outs.get("X@GRAD", []))
    if len(x_names) != len(xg_names):
        raise ExecutionError(f"X has {len(x_names)} vars but X@GRAD {len(xg_names)}")

    # A var the running block declares lives in this scope (Paddle creates a
    # block's vars in the scope it runs in before its ops run): inside an
    # outer loop's grad block that is the outer step's scope, so the
    # parameter gradients this while_grad gathers start from zero at every
    # outer step instead of landing in (and zeroing) the outer accumulator.
    block = getattr(env, "block", None)

    def declared_here(name: str) -> bool:
        return block is not None and block.has_var(name)

    def get_outer(name: str) -> Any:
        return scope.vars.get(name) if declared_here(name) else scope.get(name)

    def set_outer(name: str, value: Any) -> None:
        owner = scope if declared_here(name) else scope.owner(name)
        (owner if owner is not None else scope).set(name, value)

    for k, step in enumerate(reversed(steps)):
        first = k == 0
        for o_out, o_in in zip(og_out, og_in):
            v = get_outer(o_out)
            if v is None and first:
                v = _og_zeros(gblock, o_out, scope)
                if v is not None:
                    set_outer(o_out, v)
            if v is None:
                continue
            step.set(o_in, v)
        env.run_block(idx, step)
        for x, xg in zip(x_names, xg_names):
            if xg == EMPTY_VAR_NAME:
                continue
            inside = step.get(x + GRAD_SUFFIX)
            if inside is None:
                raise ExecutionError(f"Variable {x + GRAD_SUFFIX} is not found (step {len(steps) - 1 - k})")
            if isinstance(inside, list) and all(t is None or np.size(t) == 0 for t in inside):
                continue
            is_io = xg in og_out
            if first and not is_io and not isinstance(inside, list):
                set_outer(xg, np.zeros_like(np.asarray(inside)))
            if not is_io:
                acc = get_outer(xg)
                if isinstance(inside, list):
                    acc = _array_sum(acc if isinstance(acc, list) else [], inside)
                else:
                    acc = np.asarray(acc) + np.asarray(inside)
                set_outer(xg, acc)
            else:
                v = step.get(xg)
                if v is not None:
                    set_outer(xg, v)
    return {"X@GRAD": [None if n == EMPTY_VAR_NAME else get_outer(n) for n in xg_names]}


def _og_zeros(gblock, name: str, scope) -> Any:
    """Zeros for an output gradient nobody computed (Paddle fills it from the
    parent block's var desc; an unknown dim falls back to the forward value)."""
    var = find_var_cpp(gblock.parent, name)
    if var is None:
        return None
    if var.desc.type.type == dtypes.VarType.DENSE_TENSOR_ARRAY:
        return []           # an array gradient nobody wrote: empty (WhileGradOp shares slot by slot)
    shape = list(var.shape)
    dt = var.dtype if var.data_type is not None else np.float32
    if all(d >= 0 for d in shape):
        return np.zeros(shape, dtype=dt)
    fwd = scope.get(name[: -len(GRAD_SUFFIX)] if name.endswith(GRAD_SUFFIX) else name)
    if isinstance(fwd, np.ndarray):
        return np.zeros(fwd.shape, dtype=dt)
    raise ExecutionError(f"output gradient '{name}' was never computed and its shape {shape} "
                         f"is not fully known ({dtypes.type_name(var.data_type)})")


def _mask(c: Call, n: int) -> int:
    m = c.x("Mask")
    if m is None:
        raise ExecutionError("Mask has no value")
    a = np.asarray(m).reshape(-1)
    if a.size != 1:
        raise ExecutionError(f"Mask must hold one element, it has {a.size}")
    k = int(a[0])
    if not 0 <= k < n:
        raise ExecutionError(f"Mask value {k} is out of range for {n} branches")
    return k


def _select_input(c: Call):
    xs = c.ins.get("X") or []
    k = _mask(c, len(xs))
    v = xs[k]
    if v is None:
        raise ExecutionError(f"the selected input X[{k}] ('{_names(c, 'X')[k] if _names(c, 'X') else k}') "
                             "has no value")
    return {"Out": np.array(v, copy=True) if not isinstance(v, list) else [[*v]]}


def _select_output(c: Call):
    n = len(c.outs.get("Out", []))
    k = _mask(c, n)
    x = c.x("X")
    if x is None:
        raise ExecutionError("X has no value")
    outs: list[Any] = [None] * n
    outs[k] = list(x) if isinstance(x, list) else np.array(x, copy=True)
    return {"Out": outs}


def _offset(c: Call) -> int:
    i = c.x("I")
    if i is None:
        raise ExecutionError("I has no value")
    a = np.asarray(i).reshape(-1)
    if a.size != 1:
        raise ExecutionError(f"I must hold one element, it has {a.size}")
    k = int(a[0])
    if k < 0:
        raise ExecutionError(f"array index {k} is negative")
    return k


def _write_to_array(c: Call):
    env = c.env
    x = c.x("X")
    if x is None:
        raise ExecutionError("X has no value")
    k = _offset(c)
    name = c.outs["Out"][0]
    cur = None
    if env is not None:
        # An array the running block declares itself starts empty in the
        # block's scope (Paddle creates a block's vars there), even when an
        # enclosing scope holds one of the same name: a while grad step
        # writes its own slot of X@GRAD, which while_grad then adds up.
        block = getattr(env, "block", None)
        cur = env.scope.vars.get(name) if block is not None and block.has_var(name) \
            else env.scope.get(name)
    arr = list(cur) if isinstance(cur, list) else []
    if k >= len(arr):
        arr.extend([None] * (k + 1 - len(arr)))
    x = np.asarray(x)
    if x.size > 0:
        arr[k] = np.array(x, copy=True)
    res: dict = {"Out": [arr]}
    # Each element keeps its own LoD (Paddle's LoDTensorArray): X's at index k.
    old = env.lod_of(name) if env is not None and hasattr(env, "lod_of") else None
    x_lod = c.lod("X")
    if x_lod is not None or isinstance(old, ArrayLoDs):
        lods = ArrayLoDs(old if isinstance(old, ArrayLoDs) else ())
        lods.extend([None] * (len(arr) - len(lods)))
        del lods[len(arr):]
        if x.size > 0:
            lods[k] = x_lod
        res[LOD_KEY] = {"Out": lods}
    return res


def _read_from_array(c: Call):
    arr = c.x("X")
    arr = arr if isinstance(arr, list) else []
    k = _offset(c)
    if k < len(arr) and arr[k] is not None:
        lods = c.lod("X")
        if isinstance(lods, ArrayLoDs) and k < len(lods) and lods[k] is not None:
            return {"Out": np.array(arr[k], copy=True), LOD_KEY: {"Out": lods[k]}}
        return {"Out": np.array(arr[k], copy=True)}
    w = c.x("X_W")
    if w is not None:     # as write_to_array's grad: the slot got no gradient
        return {"Out": np.zeros_like(np.asarray(w))}
    raise ExecutionError(f"array index {k} is out of range: the array holds {len(arr)} slots"
                         + ("" if k >= len(arr) else f" and slot {k} was never written"))


def _lod_array_length(c: Call):
    arr = c.x("X")
    n = len(arr) if isinstance(arr, list) else 0
    return {"Out": np.array([n], dtype=np.int64)}


# --------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------
register(OpDef(type="conditional_block", inputs=("Cond", "Input"), outputs=("Out", "Scope"),
               kernel=_conditional_block, grad=_conditional_block_grad_maker, sub_block_path="branch",
               allow_missing_inputs=True,
               attrs_handled=("sub_block", "is_scalar_condition"), block_attrs=("sub_block",),
               doc="run sub_block in a child scope when Cond holds (scalar) / every Input is non-empty"))
# Its compile-time var-type inference syncs Input@GRAD[i] with Input[i]
# (ConditionalBlockGradInferVarType), which declares a var named @EMPTY@
# when a gradient is not wanted; the emitter reproduces that (emit.py).
register(OpDef(type="conditional_block_grad", inputs=("Cond", "Input", "Out", "Out@GRAD", "Scope"),
               outputs=("Input@GRAD",), kernel=_conditional_block_grad, grad_of="conditional_block",
               sets_lod_level=False, sync_type_slots=(("Input", "Input@GRAD"),), allow_missing_inputs=True,
               attrs_handled=("sub_block", "is_scalar_condition"), block_attrs=("sub_block",),
               doc="run the grad block in the forward scope; Input@GRAD from it (zeros if not run)"))
def _check_while(op) -> None:
    """A while whose body (or a block nested in it) never writes Condition never ends."""
    cond = op.input("Condition")
    sub = op.sub_block
    if len(cond) != 1 or sub is None:
        return
    program = op.block.program
    if not 0 < sub < len(program.blocks):
        return  # reported by validation
    todo, seen = [sub], set()
    while todo:
        b = program.blocks[todo.pop()]
        if b.idx in seen:
            continue
        seen.add(b.idx)
        for inner in b.ops:
            if cond[0] in inner.output_arg_names:
                return
            if inner.sub_block is not None and 0 < inner.sub_block < len(program.blocks):
                todo.append(inner.sub_block)
    raise ProgramFileError(f"{where(program.source, op.block.idx, op.idx, op.type, cond[0])}: the loop body "
                           f"(block {sub}) never writes its Condition, so the loop could never end")


register(OpDef(type="while", inputs=("X", "Condition"), outputs=("Out", "StepScopes"),
               structure_check=_check_while,
               kernel=_while, grad=_while_grad_maker, sub_block_path="loop", allow_missing_inputs=True,
               attrs_handled=("sub_block", "is_test"), block_attrs=("sub_block",),
               doc="run sub_block while Condition holds, one step scope per iteration"))
register(OpDef(type="while_grad", inputs=("X", "Out", "Out@GRAD", "StepScopes"), outputs=("X@GRAD",),
               kernel=_while_grad, grad_of="while", sets_lod_level=False, allow_missing_inputs=True,
               attrs_handled=("sub_block", "original_output_grad"), block_attrs=("sub_block",),
               doc="run the grad block over the step scopes in reverse, summing parameter grads"))
register(OpDef(type="select_input", inputs=("X", "Mask"), outputs=("Out",), kernel=_select_input,
               allow_missing_inputs=True,
               grad=_select_input_grad_maker, sets_lod_level=False,
               samples=lambda rng: [Sample({"X": [rng.standard_normal((2, 3)), rng.standard_normal((2, 3))],
                                            "Mask": [np.array([1], dtype=np.int32)]}, wrt=("X",))],
               doc="Out = X[Mask]"))
register(OpDef(type="select_output", inputs=("X", "Mask"), outputs=("Out",), kernel=_select_output,
               grad=_select_output_grad_maker, sets_lod_level=False, doc="Out[Mask] = X"))
register(OpDef(type="write_to_array", inputs=("X", "I"), outputs=("Out",), kernel=_write_to_array,
               grad=_write_to_array_grad_maker, lod_needs_input="X",
               doc="Out[I] = X (Out: a tensor array)"))
register(OpDef(type="read_from_array", inputs=("X", "I", "X_W"), outputs=("Out",), kernel=_read_from_array,
               allow_missing_inputs=True, lod_needs_input="X",
               grad=_read_from_array_grad_maker,
               doc="Out = X[I] (zeros like X_W past the end, as write_to_array's grad)"))
register(OpDef(type="lod_array_length", inputs=("X",), outputs=("Out",), kernel=_lod_array_length,
               grad=None, doc="Out = [len(X)] (int64; Paddle's array_length)"))


# --------------------------------------------------------------------------
# tensor_array_to_tensor: the array's tensors concatenated (or stacked)
# --------------------------------------------------------------------------
def _array_items(c: Call, slot: str) -> list[np.ndarray]:
    """The tensors of a tensor-array input. Run alone (no interpreter, as the
    registry's samples run it) an array may come stacked as one ndarray whose
    axis 0 is the slot."""
    v = c.x(slot)
    if isinstance(v, np.ndarray) and c.env is None:
        v = list(v)
    if not isinstance(v, list):
        raise ExecutionError(f"{slot} must be a tensor array")
    if not v:
        raise ExecutionError(f"{slot}: the tensor array is empty (Paddle needs at least one tensor)")
    for i, t in enumerate(v):
        if t is None:
            raise ExecutionError(f"{slot}: slot {i} of the tensor array was never written")
    return [np.asarray(t) for t in v]


def _array_to_tensor_axis(c: Call, rank: int) -> int:
    axis = int(c.attr("axis", 1))
    limit = rank + 1 if c.attr("use_stack", False) else rank
    if axis < 0:   # Paddle 3.3.1 indexes dims with it unnormalised (it crashes)
        raise c.unsupported("axis", axis, "Paddle 3.3.1's tensor_array_to_tensor reads dims[axis] "
                                          "without normalising a negative axis")
    if axis >= limit:
        raise ExecutionError(f"axis {axis} is out of range for tensors of rank {rank}")
    return axis


def _tensor_array_to_tensor(c: Call):
    xs = _array_items(c, "X")
    axis = _array_to_tensor_axis(c, xs[0].ndim)
    out = np.stack(xs, axis=axis) if c.attr("use_stack", False) else np.concatenate(xs, axis=axis)
    # Each tensor's size along axis (1 where a stack puts the new axis last).
    index = np.array([x.shape[axis] if axis < x.ndim else 1 for x in xs], dtype=np.int32)
    return {"Out": out, "OutIndex": index}


def _tensor_array_to_tensor_grad(c: Call):
    if not c.wants("X@GRAD"):
        return {}
    xs = _array_items(c, "X")
    axis = _array_to_tensor_axis(c, xs[0].ndim)
    g = np.asarray(c.x("Out@GRAD"))
    if c.attr("use_stack", False):
        parts = [np.take(g, i, axis=axis) for i in range(len(xs))]
    else:
        parts = np.split(g, np.cumsum([x.shape[axis] for x in xs])[:-1], axis=axis)
    return {"X@GRAD": [[p.astype(x.dtype, copy=False) for p, x in zip(parts, xs)]]}


def _tensor_array_to_tensor_samples(rng):
    r = rng.standard_normal
    return [Sample({"X": [[r((2, 3)), r((2, 3)), r((2, 3))]]}, {"axis": 1}, note="concat axis 1"),
            Sample({"X": [[r((2, 3)), r((2, 3))]]}, {"axis": 0}, note="concat axis 0"),
            Sample({"X": [[r((2, 3)), r((2, 3))]]}, {"axis": 0, "use_stack": True}, note="stack axis 0"),
            Sample({"X": [[r((2, 3)), r((2, 3)), r((2, 3))]]}, {"axis": 2, "use_stack": True},
                   note="stack, new last axis")]


register(paddle_opdef("tensor_array_to_tensor", _tensor_array_to_tensor,
                      {"tensor_array_to_tensor_grad": _tensor_array_to_tensor_grad},
                      samples=_tensor_array_to_tensor_samples, attrs_handled=("axis", "use_stack"),
                      doc="Out = the array's tensors concatenated (stacked, use_stack) along axis; "
                          "OutIndex = each one's size along axis (int32)"))
