"""`append_backward`, `gradients` and `calc_gradient`, as Paddle 3.3.1's legacy
static graph defines them, on pybackward's program views.

Variables or names: every var argument (loss, targets, inputs, parameters,
no-grad entries, target gradients) may be a `Variable` or a name. Names need
the program: pass `program=` (or give at least one Variable to take it from).

    pybackward.append_backward(prog.var("mean_0.tmp_0"))
    pybackward.append_backward("mean_0.tmp_0", program=prog)

A call is all or nothing: if it raises (a bad argument, an op without a
gradient rule, a callback that fails), the program is left exactly as it was.

Parameters and `stop_gradient`: when Paddle reads a program from a file it
re-creates every parameter as a trainable `Parameter`, which clears its
`stop_gradient` flag (batch_norm's moving mean and variance included) before
its pass runs, and writes the cleared flag back out. pybackward only ever sees
files, so by default it does the same and its output matches Paddle's byte for
byte. Pass `keep_param_stop_gradient=True` to honour the flags in the file
instead (a frozen parameter then gets no gradient).
"""
from __future__ import annotations

import warnings
from typing import Any, Iterable, Sequence

from ..base import dtypes
from ..base.errors import ArgumentError, ArgumentTypeError, PyBackwardWarning, VarNotFoundError, where
from ..legacy.program import OP_DEVICE_ATTR, OP_ROLE_ATTR, Block, Program, Variable
from . import guards
from .deviations import (add_seeds_of_nested_targets, refuse_wrong_programs, report_carried_loop_vars,
                         report_dead_writes, user_stacklevel)
from .grad_ops import PassState, append_backward_ops
from ..legacy.names import grad_name, is_grad_name, strip_grad_suffix
from ..analysis.path import find_op_path, stop_gradient_names, unused_outputs
from .steps import (AGGREGATIONS, all_or_nothing, append_plain, as_paddle_parses, fill_op, finish,
                    loss_op as loss_op_of, no_grad_for_non_floats, unique_name)

#: A var argument: one Variable or name, or a list of them.
VarsLike = Variable | str | Sequence[Variable | str]


def _is_pir(program: Any, *refs: Any) -> bool:
    """Whether the call is about a PIR program: `program` is one, or a value given is a PIR value.
    (No PIR object exists before the PIR model is imported: a legacy call never imports it.)"""
    import sys
    model = sys.modules.get("pybackward.pir.model")
    if model is None:
        return False
    PirProgram, PirValue = model.Program, model.Value
    if isinstance(program, PirProgram):
        return True
    for r in refs:
        for x in (r if isinstance(r, (list, tuple, set)) else [r]):
            if isinstance(x, PirValue):
                return True
    return False


def _pir_only(what: str, **given: Any) -> None:
    """Refuse the legacy-only options on a PIR program (one line naming them)."""
    bad = sorted(k for k, v in given.items() if v)
    if bad:
        raise ArgumentError(f"{what} on a PIR program: {', '.join(bad)} apply to legacy programs only")




# --------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------
def _program_of(program: Program | None, *candidates: Any) -> Program:
    if program is not None:
        if not isinstance(program, Program):
            raise ArgumentTypeError(f"program= must be a pybackward Program, not {type(program).__name__}")
        return program
    for c in candidates:
        for v in (c if isinstance(c, (list, tuple, set, frozenset)) else [c]):
            if isinstance(v, Variable):
                return v.block.program
    raise ArgumentError("vars were given by name: pass program= as well")


def _find_any_block(program: Program, name: str) -> Variable:
    for b in program.blocks:
        v = b.vars.get(name)
        if v is not None:
            return v
    return program.global_block().var(name)  # raises, with suggestions


def _as_var(program: Program, v: Any, what: str) -> Variable:
    if isinstance(v, Variable):
        if v.block.program is not program:
            raise ArgumentError(f"{what} '{v.name}' belongs to another program")
        return v
    if isinstance(v, str):
        try:
            return program.global_block().var(v)
        except VarNotFoundError as e:
            raise VarNotFoundError(f"{what}: {e}") from None
    raise ArgumentTypeError(f"{what} must be a Variable or a name, not {type(v).__name__}: {v!r}")


def _flags(**flags: Any) -> None:
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise ArgumentTypeError(f"{name} must be True or False, not {type(value).__name__}: {value!r}")


def _as_list(x: Any) -> list:
    if x is None:
        return []
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def _no_grad_names(program: Program, no_grad_set: Any) -> set[str]:
    if no_grad_set is None:
        return set()
    if not isinstance(no_grad_set, (set, frozenset, list, tuple)):
        raise ArgumentTypeError(f"no_grad_set must be a set, list or tuple, not {type(no_grad_set).__name__}")
    names = set()
    for v in no_grad_set:
        if isinstance(v, Variable):
            names.add(v.name)
        elif isinstance(v, str):
            _find_any_block(program, v)  # a name no block declares is a mistake worth saying
            names.add(v)
        else:
            raise ArgumentTypeError("no_grad_set members must be Variables or names, "
                                f"not {type(v).__name__}: {v!r}")
    return names


def _callbacks(callbacks: Any) -> list | None:
    if callbacks is None:
        return None
    if not isinstance(callbacks, (list, tuple)):
        raise ArgumentTypeError(f"callbacks must be a list or tuple of callables, not {type(callbacks).__name__}")
    for cb in callbacks:
        if not callable(cb):
            raise ArgumentTypeError(f"callback {cb!r} is not callable")
    return [_named_callback(cb) for cb in callbacks]


def _named_callback(cb):
    """Wrap a callback so a failure inside it names the callback."""
    def call(block, context):
        try:
            cb(block=block, context=context)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:
            op = context.get("__current_op_desc__")
            raise ArgumentError(f"callback {getattr(cb, '__qualname__', cb)!s} failed on grad op "
                                f"'{op.type() if op else '?'}': {type(e).__name__}: {e}") from e
    return call


# --------------------------------------------------------------------------
# append_backward
# --------------------------------------------------------------------------
def append_backward(loss: Variable | str, parameter_list: Sequence[Variable | str] | None = None,
                    no_grad_set: Iterable[Variable | str] | None = None,
                    callbacks: Sequence[Any] | None = None, checkpoints: Any = None,
                    *, program: Program | None = None, aggregation: str = "sum",
                    keep_param_stop_gradient: bool = False, stop_edges: bool = False,
                    paddle_exact: bool = False
                    ) -> list[tuple[Variable, Variable]] | tuple[list[tuple[Variable, Variable]], list[str]]:
    """Append the backward section of `loss` to its program.

    Where Paddle's program would compute a wrong gradient (docs/deviations.md)
    the output departs from it with a `PaddleDeviationWarning`, or the
    program is refused where no right answer exists; `paddle_exact=True`
    writes Paddle's program, bugs included.

    Returns `[(param, grad), ...]` for the parameters that got a gradient, in
    `parameter_list` order (default: the global block's parameters in file
    order). With `checkpoints` (a non-empty list) it returns
    `(params_grads, checkpoint_names)` (recompute). `aggregation` is "sum"
    (Paddle's default: one `sum` op) or "pairwise" (a `grad_add` chain).
    """
    if _is_pir(program, loss, parameter_list):
        from .pir import api as pir_api
        _pir_only("append_backward", keep_param_stop_gradient=keep_param_stop_gradient, stop_edges=stop_edges,
                  aggregation=aggregation != "sum")
        return pir_api.append_backward(loss, parameter_list, no_grad_set, callbacks, checkpoints=checkpoints,
                                       program=program, paddle_exact=paddle_exact)
    program = _program_of(program, loss)
    loss = _as_var(program, loss, "loss")
    _flags(keep_param_stop_gradient=keep_param_stop_gradient, stop_edges=stop_edges, paddle_exact=paddle_exact)
    if not isinstance(aggregation, str):
        raise ArgumentTypeError(f"aggregation must be a str, not {type(aggregation).__name__}")
    cbs = _callbacks(callbacks)
    if parameter_list is not None:
        if not isinstance(parameter_list, (list, tuple, set)):
            raise ArgumentTypeError("parameter_list must be a list, tuple or set, "
                                f"not {type(parameter_list).__name__}")
        params = [p.name if isinstance(p, Variable) else _as_var(program, p, "parameter_list").name
                  if isinstance(p, str) else _bad_param(i, p) for i, p in enumerate(parameter_list)]
    else:
        params = [v.name for v in program.global_block().all_parameters()]
    user_no_grad = _no_grad_names(program, no_grad_set)
    if aggregation not in AGGREGATIONS:
        raise ArgumentError(f"aggregation must be one of {sorted(AGGREGATIONS)}, not {aggregation!r}")
    guards.check_loss(loss)
    loss_op = loss_op_of(loss)
    guards.check_input_repeats(program)
    params = _skip_non_float_params(program, params, parameter_list is not None, user_no_grad)
    # recompute (and the checkpoint chooser, the liveness model and logging it imports: ~20 ms of
    # start-up) is imported only when checkpoints are given: None is never a recompute.
    recompute = _recompute() if checkpoints is not None else None
    if recompute is not None and recompute.wants_recompute(checkpoints):
        if not paddle_exact:
            refuse_wrong_programs(program)
        return recompute.append_backward_with_checkpoints(
            program, loss, loss_op, params, user_no_grad, checkpoints,
            keep_param_stop_gradient=keep_param_stop_gradient, aggregation=aggregation,
            build=append_for_choice)
    return append_plain(program, loss, loss_op, params, user_no_grad, cbs, aggregation,
                        keep_param_stop_gradient, stop_edges, paddle_exact)


def append_for_choice(program: Program, loss: str, checkpoints: Sequence[str], no_grad: Iterable[str]) -> int:
    """Append the backward section a checkpoint choice gives (none: the plain
    one) to `program`, a copy of the forward program; returns the number of
    forward ops recomputed. The builder `checkpoint_choice.choose` judges
    each candidate choice with (it sits below the pass, which hands it this)."""
    if not checkpoints:
        append_backward(loss, program=program, no_grad_set=set(no_grad) or None)
        return 0
    recomputed = [0]

    def count(done):
        recomputed[0] = len(done.recomputed)
    var = program.global_block().var(loss)
    params = [v.name for v in program.global_block().all_parameters()]
    _recompute().append_backward_with_checkpoints(program, var, loss_op_of(var), params, set(no_grad),
                                                  list(checkpoints), scratch=False, on_done=count)
    return recomputed[0]


def _recompute():
    """The recompute module, imported on first use (start-up: `append` without checkpoints never needs it)."""
    from . import recompute
    return recompute


def _skip_non_float_params(program: Program, params: list[str], explicit: bool,
                           user_no_grad: set[str]) -> list[str]:
    """Integer and bool parameters cannot have gradients: an error when the
    caller listed them, else they are left out (no-grad), with a warning
    naming those some op reads."""
    bad = guards.non_float_params(program, params)
    if not bad:
        return params
    if explicit:
        v = bad[0]
        raise ArgumentError(f"{where(program.source, v.block.idx, var=v.name)}: parameter_list names a "
                            f"{dtypes.type_name(v.data_type)} parameter; integer and bool parameters "
                            "cannot have gradients")
    names = {v.name for v in bad}
    user_no_grad |= names
    read = {n for b in program.blocks for op in b.ops for n in op.input_arg_names if n in names}
    if read:
        listed = ", ".join(f"'{v.name}' ({dtypes.type_name(v.data_type)})" for v in bad if v.name in read)
        warnings.warn(PyBackwardWarning(f"{program.source or '<program>'}: no gradient for the parameters "
                                        f"{listed}: integer and bool parameters cannot have gradients"),
                      stacklevel=user_stacklevel())
    return [p for p in params if p not in names]


def _bad_param(i: int, p: Any):
    raise ArgumentTypeError(f"parameter_list[{i}] must be a Variable or a name, not {type(p).__name__}: {p!r}")


# --------------------------------------------------------------------------
# gradients / calc_gradient
# --------------------------------------------------------------------------
def calc_gradient(targets: VarsLike, inputs: VarsLike, target_gradients: VarsLike | None = None,
                  no_grad_set: Iterable[Variable | str] | None = None, *,
                  program: Program | None = None, keep_param_stop_gradient: bool = False,
                  paddle_exact: bool = False) -> Variable | None | list[Variable | None]:
    """Gradients of `targets` w.r.t. `inputs`: one var (or None) for a single
    input, else a list (Paddle's calc_gradient)."""
    if _is_pir(program, targets, inputs, target_gradients):
        from .pir import api as pir_api
        _pir_only("calc_gradient", keep_param_stop_gradient=keep_param_stop_gradient)
        grads = pir_api.calc_gradient(targets, inputs, target_gradients, no_grad_set, program=program,
                                      paddle_exact=paddle_exact)
        return grads[0] if len(grads) == 1 else grads
    _flags(keep_param_stop_gradient=keep_param_stop_gradient, paddle_exact=paddle_exact)
    grads = _calc_gradient(targets, inputs, target_gradients, no_grad_set, program,
                           keep_param_stop_gradient, paddle_exact=paddle_exact)
    return grads[0] if len(grads) == 1 else grads


UNCONNECTED = ("none", "zero", "error")


def gradients(targets: VarsLike, inputs: VarsLike, target_gradients: VarsLike | None = None,
              no_grad_set: Iterable[Variable | str] | None = None, *,
              program: Program | None = None, keep_param_stop_gradient: bool = False,
              unconnected: str = "none", stop_edges: bool = False,
              paddle_exact: bool = False) -> list[Variable | None]:
    """Append the grad ops of `targets` w.r.t. `inputs`; returns one grad var per input.

    Where Paddle's program would compute a wrong gradient (docs/deviations.md)
    the output departs from it, with a `PaddleDeviationWarning`;
    `paddle_exact=True` writes Paddle's program, bugs included.

    `unconnected` says what an input the targets do not depend on gets:
    "none" (Paddle: None), "zero" (a zero tensor of the input's own shape and
    dtype, made by a fill_any_like op), or "error" (an ArgumentError naming
    those inputs). `stop_edges=True` lets gradients flow only through the
    inputs an op declares differentiable and only into floating-point vars,
    so integer ids and indices never need a manual stop_gradient.
    """
    if _is_pir(program, targets, inputs, target_gradients):
        from .pir import api as pir_api
        _pir_only("gradients", keep_param_stop_gradient=keep_param_stop_gradient, stop_edges=stop_edges,
                  unconnected=unconnected != "none")
        return pir_api.gradients(targets, inputs, target_gradients, no_grad_set, program=program,
                                 paddle_exact=paddle_exact)
    for what, v in (("targets", targets), ("inputs", inputs)):
        if not isinstance(v, (Variable, str, list, tuple)):
            raise ArgumentTypeError(f"{what} must be a Variable, a name, or a list of them, not {type(v).__name__}")
    if target_gradients is not None and not isinstance(target_gradients, (Variable, str, list, tuple)):
        raise ArgumentTypeError("target_gradients must be a Variable, a name, a list of them, or None, "
                            f"not {type(target_gradients).__name__}")
    _flags(keep_param_stop_gradient=keep_param_stop_gradient, stop_edges=stop_edges, paddle_exact=paddle_exact)
    if not isinstance(unconnected, str) or unconnected not in UNCONNECTED:
        raise ArgumentError(f"unconnected must be one of {list(UNCONNECTED)}, not {unconnected!r}")
    # inputs=[] is Paddle's too: the backward section is appended and [] returned
    # (test_backward.py::TestBackwardUninitializedVariable calls gradients(loss, [])).
    return _calc_gradient(targets, inputs, target_gradients, no_grad_set, program,
                          keep_param_stop_gradient, unconnected, stop_edges, paddle_exact)


def _calc_gradient(targets, inputs, target_gradients, no_grad_set, program,
                   keep_param_stop_gradient: bool = False, unconnected: str = "none",
                   stop_edges: bool = False, paddle_exact: bool = False) -> list[Variable | None]:
    program = _program_of(program, targets, inputs, target_gradients)
    targets = [_as_var(program, t, "targets") for t in _as_list(targets)]
    inputs = [_as_var(program, x, "inputs") for x in _as_list(inputs)]
    tgrads = [None if g is None else _as_var(program, g, "target_gradients") for g in _as_list(target_gradients)]
    if not targets:
        raise ArgumentError("targets is empty")
    if not tgrads:
        tgrads = [None] * len(targets)
    if len(tgrads) != len(targets):
        raise ArgumentError(f"Should have the same number of target_gradients as targets "
                            f"({len(tgrads)} given for {len(targets)} targets)")
    user_no_grad = _no_grad_names(program, no_grad_set)
    guards.check_input_repeats(program)
    block = targets[0].block
    for t, g in zip(targets, tgrads):
        if g is not None:
            if t.block.idx != block.idx:
                raise ArgumentError("all targets must be in the same block")
            if t.shape != g.shape:
                raise ArgumentError(f"The shapes of target and grad are different: {t.name} "
                                    f"{list(t.shape)} vs {g.name} {list(g.shape)}")
    with all_or_nothing(program):
        as_paddle_parses(program, keep_param_stop_gradient)
        program.appending_grad_times += 1
        no_grad = stop_gradient_names(program)
        no_grad[0].update(grad_name(n) for n in user_no_grad)
        start = len(block.ops)
        input_grad_names: set[str] | None = set()
        target_grad_map: dict[str, str] = {}
        rename_map: dict[str, str] = {}
        skip: list[str] = []
        seeds: dict[str, int] = {}
        for t, g in zip(targets, tgrads):
            gname = grad_name(t.name)
            if g is None:
                seeds[gname] = len(block.ops)
                block.append_op_desc(fill_op("fill_any_like", gname, {
                    "value": 1.0, "dtype": t.data_type, OP_ROLE_ATTR: 1, OP_DEVICE_ATTR: ""},
                    inputs={"X": [t.name]}))
                input_grad_names.add(gname)
                skip.append(gname)
            else:
                target_grad_map[gname] = g.name
                input_grad_names.add(g.name)
                rename_map[gname] = g.name
        if program.appending_grad_times == 1:
            input_grad_names, rename_map = None, {}
        state = PassState(program, no_grad, {}, {}, paddle_exact=paddle_exact)
        if stop_edges:
            no_grad_for_non_floats(program, no_grad)
        block_no_grad = {strip_grad_suffix(n) for n in no_grad[0]}
        if not paddle_exact:
            refuse_wrong_programs(program)
        redefined = None if paddle_exact else []
        loops: dict[int, list[str]] | None = None if paddle_exact else {}
        path = find_op_path(block, targets, inputs, block_no_grad, state.sub_paths, stop_edges=stop_edges,
                            redefinitions=redefined, loops=loops)
        report_dead_writes(block, redefined)
        report_carried_loop_vars(program, loops, state.loop_seeds)
        block_no_grad |= unused_outputs(block, path, targets, block_no_grad)
        no_grad[0].update(grad_name(n) for n in block_no_grad)
        append_backward_ops(block, path, targets, block, state, input_grad_names, rename_map)
        grad_info = finish(program, block, start, state, target_grad_map, skip)
        if not paddle_exact:
            shift = state.forward_copies.get(block.idx, 0)    # forward ops put in before the fills
            add_seeds_of_nested_targets(block, {g: at + shift for g, at in seeds.items()})
        out: list[Variable | None] = []
        for x in inputs:
            info = grad_info.get(x.name)
            out.append(None if info is None else info[1].vars[info[0]])
        missing = [x for x, g in zip(inputs, out) if g is None]
        if missing and unconnected == "error":
            raise ArgumentError("the targets do not depend on " + ", ".join(f"'{x.name}'" for x in missing)
                                + " (or only through stop_gradient / no-grad vars)")
        if missing and unconnected == "zero":
            out = [g if g is not None else _zeros_like(program, block, x) for x, g in zip(inputs, out)]
        return out


def _zeros_like(program: Program, block: Block, x: Variable) -> Variable:
    """A zero gradient with x's own shape and dtype, computed from x at run time."""
    name = grad_name(x.name)
    if block.has_var_recursive(name):
        name = unique_name(program, name)
    block.append_op_desc(fill_op("fill_any_like", name, {
        "value": 0.0, "dtype": -1, OP_ROLE_ATTR: 1, OP_DEVICE_ATTR: ""}, inputs={"X": [x.name]}))
    return block.create_var_like(name, x, stop_gradient=False)


__all__ = ["append_backward", "gradients", "calc_gradient", "is_grad_name"]
