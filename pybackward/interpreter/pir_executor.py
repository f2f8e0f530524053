"""Run PIR programs (Paddle 3.x's `.json`) with the registry's NumPy kernels.

    from pybackward import pir
    from pybackward.interpreter.pir_executor import run
    prog = pir.load("model_bwd.json")
    out = run(prog, feeds={"x": x}, params=params)          # every fetch, the loss, every NAME@GRAD
    out = run(prog, feeds, params, fetch=["%16", "fc_0.w_0@GRAD"])

Values are fetched by the names the program gives them: parameter names,
data names, `%N` (the id a value has in the file, as `pir.Program.value`
reads it), `pd_op.fetch` / `builtin.shadow_output` names, and `NAME@GRAD`
for the gradient the backward section computes for parameter or data NAME
(`pir_grads`).

One kernel per computation, shared with the legacy interpreter: a `pd_op.*`
op runs the registry's kernel of its legacy form (`pd_op.matmul` ->
`matmul_v2`, `pd_op.mean_grad` -> `reduce_mean_grad`), its operands passed
in the legacy slots and its attributes under their legacy names, as
`pybackward.pir.opmap` (Paddle's own translator's facts) says; the operands
that carry a legacy attribute (`pd_op.full_int_array` / `pd_op.full`: the
axis of `mean`, the `p` of `dropout`) are read at run time into that
attribute. The glue PIR adds is in `pir_glue`; the regions (`pd_op.if`,
`pd_op.while` with its block arguments, `pd_op.pylayer`, `cf.yield`) are run
here. Values are SSA: a region reads outer values directly (implicit
capture); an in-place op (`pd_op.batch_norm_`, `*_`) rebinds the operand it
writes to its result, so later readers see the new value, as in Paddle.

Each program is compiled once into a plan (a closure per op with its
kernel, slots and decoded attributes); a run costs a dict lookup per
operand and the kernel. Every run starts its random numbers afresh: seed-0
random ops draw from Paddle's global generator after `paddle.seed(paddle_seed)`
when `paddle_seed` is given (a dropout then equals Paddle's), else from
NumPy's generator seeded with `seed`.
May import: every layer below it (base, ops, pir, ...).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..base import _args
from ..base.errors import (ArgumentTypeError, ExecutionError, ExecutionLimitError, PyBackwardError,
                           VarNotFoundError, where)
from ..ops import registry
from ..ops.control_flow.cond_while import MAX_WHILE_STEPS
from ..ops.paddle_data import paddle_runs_on_cpu
from ..ops.random.engine import MT19937_64
from ..ops.registry import EMPTY_VAR_NAME, Call
from ..pir import opmap
from ..pir.model import Block, Operation, Program, Value
from ..pir.reader import known_ops
from ..pir.summary import summary
from ..pir.types import DenseTensorType, VectorType
from ..pir.opmap import resolve
from .executor import capped_blas
from .pir_glue import (GLUE, GLUE_INPLACE, LEGACY_INPUTS, attr_value, cast_to, cpu_kernel_words, legacy_attrs,
                       numpy_dtype, routed)
from .pir_grads import GRAD_SUFFIX, BackwardInfo, backward_info, named_gradients

#: The ops that run regions, and the op that ends a region.
REGION_OPS = frozenset({"pd_op.if", "pd_op.while", "pd_op.pylayer"})
YIELD = "cf.yield"
#: Ops whose result is a named input of the run (fed or loaded), by the attr naming it.
INPUT_OPS = {"pd_op.data": "name", "builtin.parameter": "parameter_name", "builtin.constant": "value"}
#: Ops that read nothing and always give the same value: run once, when the program is compiled.
CONSTANT_OPS = frozenset({"pd_op.full", "pd_op.full_int_array", "pd_op.assign_value"})
#: Legacy slots PIR passes the forward input itself for (the legacy kernel reads only its dims).
_XSHAPE = "XShape"

Env = dict  # Value -> array (or list: a vector, a tensor array, a stack)
Step = Callable[[Env], None]


class PaddleGlobalRng:
    """What seed-0 random ops draw from when runs should equal Paddle's: the
    64-bit words of Paddle's global generator after `paddle.seed(seed)`
    (`std::mt19937_64` seeded through `std::seed_seq`), as `bit_generator.random_raw`;
    anything else a kernel asks of a NumPy Generator comes from one seeded with `seed`."""

    def __init__(self, seed: int) -> None:
        self._engine = MT19937_64.from_seed_seq(seed)
        self._numpy = np.random.default_rng(seed)
        self.bit_generator = self

    def random_raw(self, n: int) -> np.ndarray:
        return self._engine.raw(int(n))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._numpy, name)


class _LazyRng:
    """The run's generator, made on first use (most programs draw nothing; making
    Paddle's engine costs ~1 ms)."""

    __slots__ = ("_make", "_rng")

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make, self._rng = make, None

    def __getattr__(self, name: str) -> Any:
        if self._rng is None:
            self._rng = self._make()
        return getattr(self._rng, name)


@dataclass
class _BlockPlan:
    steps: list[tuple[Step, Operation, int]]
    yields: list[Value | None] | None          # the cf.yield operands (None: the top block)
    args: list[Value] = field(default_factory=list)


@dataclass
class _Plan:
    program: Program
    key: int
    top: _BlockPlan
    constants: dict[Value, Any]                 # results of the top-level ops that read nothing (full, ...)
    fetch: list[str]                            # default_fetch
    inputs: dict[Value, tuple[str, str]]       # data / parameter value -> (kind, name)
    info: BackwardInfo
    grads: dict[str, Value]
    loss_step: int | None                       # index of the top-level op defining the loss


class PirExecutor:
    """Runs PIR programs. `seed`: NumPy's generator for seed-0 random ops;
    `paddle_seed`: draw them from Paddle's global generator after
    `paddle.seed(paddle_seed)` instead (values equal Paddle's); `check_nan`:
    stop at the first op writing NaN or Inf; `max_while_steps`: the step
    limit of each run of a `while` (default `MAX_WHILE_STEPS`); `timeout`:
    seconds per run; `progress(done, total, op_name)` is called before each
    top-level op; `blas_threads`: NumPy's OpenBLAS is capped at this many
    threads during a run (None: left alone), as `Executor(blas_threads=...)`
    does: its spinning workers take the core the next single-threaded op needs
    (googlenet's PIR step: 97 -> 41 ms on 2 cores)."""

    def __init__(self, seed: int = 0, paddle_seed: int | None = None, check_nan: bool = False,
                 max_while_steps: int | None = None, timeout: float | None = None,
                 progress: Callable[[int, int, str], None] | None = None, blas_threads: int | None = 1) -> None:
        self.seed = _args.integer(seed, "seed", minimum=0)
        self.paddle_seed = _args.integer(paddle_seed, "paddle_seed", minimum=0, allow_none=True)
        self.check_nan = _args.flag(check_nan, "check_nan")
        self.max_while_steps = _args.integer(max_while_steps, "max_while_steps", minimum=1, allow_none=True)
        self.timeout = _args.number(timeout, "timeout", minimum=0, open_min=True, allow_none=True)
        if progress is not None and not callable(progress):
            raise ArgumentTypeError(f"progress must be a callable (done, total, op_name), "
                                    f"not {type(progress).__name__}")
        self.progress = progress
        self.blas_threads = _args.integer(blas_threads, "blas_threads", minimum=1, allow_none=True)
        self._plans: dict[int, _Plan] = {}
        self._rng: Any = None
        self._deadline: float | None = None
        self._source: str | None = None

    # ------------------------------------------------------------ public
    def run(self, program: Program, feeds: Mapping[str, Any] | None = None,
            params: Mapping[str, Any] | None = None, fetch: Sequence[str | Value] | None = None,
            ) -> dict[str, Any]:
        """Run `program`; return {name: value} for each ref in `fetch` (default:
        `default_fetch(program)`), keyed as given (a Value by its `%N`)."""
        _check_args(program, feeds, params, fetch)
        plan = self.compile(program)
        refs = list(fetch) if fetch is not None else plan.fetch
        targets = [(_key(r), self._target(plan, r)) for r in refs]
        env = self._inputs(plan, feeds or {}, params or {})
        self._start()
        try:
            with capped_blas(self.blas_threads):
                self._run_top(plan, env, len(plan.top.steps))
        finally:
            self._deadline = None
        out: dict[str, Any] = {}
        for key, v in targets:
            if v not in env:
                raise ExecutionError(f"{self._where(v)}: cannot fetch {key!r}: no op computed it "
                                     "(in a branch not taken, or a result nobody computes)")
            x = env[v]
            out[key] = x if isinstance(x, list) else np.asarray(x)
        return out

    def loss(self, program: Program, feeds: Mapping[str, Any] | None = None,
             params: Mapping[str, Any] | None = None) -> np.ndarray:
        """The loss the backward section differentiates, running only the ops up to it."""
        _check_args(program, feeds, params, None)
        plan = self.compile(program)
        if plan.info.loss is None:
            raise ExecutionError(f"{program.source or 'the program'}: has no backward section "
                                 "(no full_like seed read by a grad op): no loss to compute")
        env = self._inputs(plan, feeds or {}, params or {})
        self._start()
        try:     # the loss op and the ops before it (none: the loss is an input or a constant)
            with capped_blas(self.blas_threads):
                self._run_top(plan, env, 0 if plan.loss_step is None else plan.loss_step + 1)
        finally:
            self._deadline = None
        return np.asarray(env[plan.info.loss])

    def compile(self, program: Program) -> _Plan:
        """The program's plan, made on its first run (made again when its top-level op count
        changes; after other edits, use a new PirExecutor)."""
        key = len(program.block.ops)
        plan = self._plans.get(id(program))
        if plan is not None and plan.program is program and plan.key == key:
            return plan
        self._source = program.source
        counter = [0]
        inputs: dict[Value, tuple[str, str]] = {}
        top = self._compile_block(program.block, counter, inputs)
        info = backward_info(program)
        grads = named_gradients(program, info)
        loss_step = None
        if info.loss is not None:
            d = info.loss.defining_op
            loss_step = next((i for i, (_, op, _) in enumerate(top.steps) if op is d), None)
        constants: dict[Value, Any] = {}
        steps = []
        for item in top.steps:          # fold the ops that read nothing and draw nothing (full, full_int_array)
            op = item[1]
            if op.name in CONSTANT_OPS and not any(v is not None for v in op.operands):
                try:
                    item[0](constants)
                except Exception:       # an error is the run's to report, where the op runs
                    steps.append(item)
                    continue
                for v in constants.values():
                    if isinstance(v, np.ndarray):
                        v.flags.writeable = False
            else:
                steps.append(item)
        if len(steps) != len(top.steps):
            loss_op = info.loss.defining_op if info.loss is not None else None
            loss_step = None if loss_step is None else next(
                (i for i, (_, op, _) in enumerate(steps) if op is loss_op), None)
            top = _BlockPlan(steps, top.yields, top.args)
        plan = _Plan(program, key, top, constants, default_fetch(program, info, grads), inputs, info, grads,
                     loss_step)
        if len(self._plans) > 8:
            self._plans.clear()
        self._plans[id(program)] = plan
        return plan

    # ---------------------------------------------------------- running
    def _start(self) -> None:
        seed, paddle_seed = self.seed, self.paddle_seed
        self._rng = _LazyRng((lambda: PaddleGlobalRng(paddle_seed)) if paddle_seed is not None
                             else (lambda: np.random.default_rng(seed)))
        self._deadline = None if self.timeout is None else time.monotonic() + self.timeout

    def _run_top(self, plan: _Plan, env: Env, count: int) -> None:
        """Run the first `count` top-level ops."""
        steps = plan.top.steps[:count]
        progress, total = self.progress, len(steps)
        if progress is None and self._deadline is None:
            self._run_steps(steps, env)
            return
        for n, item in enumerate(steps):
            op, index = item[1], item[2]
            if progress is not None:
                progress(n, total, op.name)
            if self._deadline is not None and time.monotonic() > self._deadline:
                raise ExecutionLimitError(f"{self._loc(op, index)}: timed out before this op: the run took longer "
                                          f"than its time limit of {self.timeout:g} s")
            self._run_steps((item,), env)

    def _run_block(self, bp: _BlockPlan, env: Env) -> list[Any]:
        self._run_steps(bp.steps, env)
        return [None if v is None else env[v] for v in bp.yields or ()]

    def _run_steps(self, steps: Sequence[tuple[Step, Operation, int]], env: Env) -> None:
        step = op = index = None
        try:
            for step, op, index in steps:
                step(env)
        except BaseException as e:
            self._reraise(e, op, index, env)        # type: ignore[arg-type]

    def _reraise(self, e: BaseException, op: Operation, index: int, env: Env) -> None:
        """Raise `e` again as one line naming the op (once: an error from a region says its innermost op)."""
        try:
            raise e
        except PyBackwardError as e:
            if getattr(e, "pir_located", False):
                raise
            cls = ExecutionLimitError if isinstance(e, ExecutionLimitError) else ExecutionError
            err = cls(f"{self._loc(op, index)}: {e}")
            err.pir_located = True      # type: ignore[attr-defined]
            raise err from None
        except KeyError as e:
            v = e.args[0] if e.args else None
            if not isinstance(v, Value):
                raise self._failed(op, index, env, e) from None
            err = ExecutionError(f"{self._loc(op, index)}: operand {_name(v)} has no value: no op computed it "
                                 "(a result its op does not write)")
            err.pir_located = True      # type: ignore[attr-defined]
            raise err from None
        except KeyboardInterrupt as e:
            e.add_note(f"at {self._loc(op, index)}")
            raise
        except SystemExit:
            raise
        except Exception as e:   # MemoryError included: one clear line, never a traceback
            raise self._failed(op, index, env, e) from None

    def _failed(self, op: Operation, index: int, env: Env, e: BaseException) -> ExecutionError:
        shapes = []
        for v in op.operands:
            x = env.get(v) if v is not None else None
            shapes.append(f"array[{len(x)}]" if isinstance(x, list) else tuple(np.shape(x)) if x is not None else None)
        err = ExecutionError(f"{self._loc(op, index)}: kernel failed on operands {shapes}: "
                             f"{type(e).__name__}: {str(e)[:300]}")
        err.pir_located = True      # type: ignore[attr-defined]
        return err

    def _loc(self, op: Operation, index: int) -> str:
        var = _name(op.results[0]) if op.results and op.results[0].id is not None else None
        return where(self._source, op_index=index, op_type=op.name, var=var)

    def _where(self, v: Value) -> str:
        return where(self._source, var=_name(v))

    # ----------------------------------------------------------- inputs
    def _inputs(self, plan: _Plan, feeds: Mapping[str, Any], params: Mapping[str, Any]) -> Env:
        """The env holding every data and parameter value, checked against their types;
        every missing feed and parameter is named in one error."""
        self._source = plan.program.source
        env: Env = dict(plan.constants)
        missing: dict[str, list[str]] = {"data": [], "parameter": []}
        known = {name for kind, name in plan.inputs.values() if kind == "data"}
        for v, (kind, name) in plan.inputs.items():
            src = feeds if kind == "data" else params
            if name not in src:
                if name not in missing[kind]:
                    missing[kind].append(name)
                continue
            env[v] = _as_declared_input(src[name], v, kind, name, self._source)
        unknown = [k for k in feeds if k not in known]
        if unknown:
            raise ExecutionError(f"{self._source or 'the program'}: fed, but the program has no data "
                                 f"named {', '.join(repr(k) for k in unknown)}")
        if missing["data"] or missing["parameter"]:
            parts = []
            if missing["data"]:
                parts.append(f"missing feeds: {', '.join(repr(n) for n in missing['data'])} "
                             "(give them with feeds= / --feeds FILE.npz / --feed NAME=FILE.npy)")
            if missing["parameter"]:
                parts.append(f"missing parameters: {', '.join(repr(n) for n in missing['parameter'])} "
                             "(give them with params= / --params FILE: .npz, .pdparams, .pdiparams or a directory)")
            raise ExecutionError(f"{self._source or 'the program'}: {'; '.join(parts)}")
        return env

    def _target(self, plan: _Plan, ref: str | Value) -> Value:
        if isinstance(ref, Value):
            return ref
        if ref.endswith(GRAD_SUFFIX) and ref in plan.grads:
            return plan.grads[ref]
        if ref.endswith(GRAD_SUFFIX) and not ref.startswith("%"):
            base = ref[: -len(GRAD_SUFFIX)]
            known = ", ".join(sorted(plan.grads)) or "none: the program has no backward section"
            raise VarNotFoundError(f"{plan.program.source or 'the program'}: no gradient {ref!r}: the backward "
                                   f"section computes none for {base!r} (gradients: {known})")
        return plan.program.value(ref)

    # ----------------------------------------------------------- compile
    def _compile_block(self, block: Block, counter: list[int], inputs: dict) -> _BlockPlan:
        steps: list[tuple[Step, Operation, int]] = []
        yields: list[Value | None] | None = None
        for op in block.ops:
            index = counter[0]
            counter[0] += 1
            if op.name == YIELD:
                yields = list(op.operands)
                continue
            if op.name in INPUT_OPS:
                name = op.attr(INPUT_OPS[op.name], None)
                if op.results and isinstance(name, str):
                    inputs[op.results[0]] = ("data" if op.name == "pd_op.data" else "parameter", name)
                continue
            steps.append((self._compile_op(op, index, counter, inputs), op, index))
        return _BlockPlan(steps, yields, list(block.args))

    def _compile_op(self, op: Operation, index: int, counter: list[int], inputs: dict) -> Step:
        if op.name in REGION_OPS:
            return self._compile_region_op(op, index, counter, inputs)
        glue = GLUE.get(op.name)
        if glue is not None:
            return _glue_step(op, glue, GLUE_INPLACE.get(op.name, ()))
        loc = self._loc(op, index)
        if op.regions:
            raise ExecutionError(f"{loc}: no kernel for PIR op '{op.name}': it has regions, and only "
                                 "pd_op.if / while / pylayer run regions here")
        r = resolve(op.name)
        if r is None:
            why = ("Paddle 3.3.1 registers it, but the PIR op map gives it no legacy form, so there is no kernel "
                   f"to share; {cpu_kernel_words(op.name)}" if op.name in known_ops()
                   else "Paddle 3.3.1 registers no op of that name")
            raise ExecutionError(f"{loc}: no kernel for PIR op '{op.name}': {why}")
        opdef = registry.find(r.map.legacy_type)
        if (opdef is None or opdef.kernel is None) and routed(op.name) is not None:
            r = routed(op.name)             # another legacy kernel computes it (pir_glue.ROUTES)
            opdef = registry.find(r.map.legacy_type)
        if opdef is None or opdef.kernel is None:
            legacy = r.map.legacy_type
            cpu = paddle_runs_on_cpu(legacy, opdef.grad_of if opdef is not None else r.map.forward)
            why = cpu_kernel_words(op.name, cpu)
            extra = f"; {opdef.no_kernel}" if opdef is not None and opdef.no_kernel else ""
            supported = sum(1 for d in registry.all_ops().values() if d.kernel is not None)
            raise ExecutionError(f"{loc}: no kernel for PIR op '{op.name}' (legacy '{legacy}'; {supported} legacy "
                                 f"op types have kernels, `pybackward ops` lists them): {why}{extra}")
        return self._kernel_step(op, r, opdef)

    def _kernel_step(self, op: Operation, r, opdef) -> Step:
        m: opmap.OpMap = r.map
        legacy_type = m.legacy_type
        kernel = opdef.kernel
        executor = self
        ins_plan: list[tuple[str, Value, bool]] = []        # (slot, value, is a vector)
        xshape_plan: list[tuple[str, Value]] = []
        mutable: list[tuple[str, Value, bool]] = []         # (legacy attr, value, is an int array)
        for i, v in enumerate(op.operands):
            if v is None or i >= len(m.operands):
                continue
            om = m.operands[i]
            if om.is_mutable_attr:
                mutable.append((om.attr, v, om.const_op == "pd_op.full_int_array"))  # type: ignore[arg-type]
            elif om.slot == _XSHAPE:
                xshape_plan.append((om.slot, v))
            elif om.slot is not None:
                ins_plan.append((om.slot, v, isinstance(v.type, VectorType)))
        attrs = legacy_attrs(op, m, r.implied)
        outs: dict[str, list[str]] = {}
        out_plan: list[tuple[str, list[tuple[Value, np.dtype | None]], bool]] = []
        for k, res in enumerate(op.results):
            if k >= len(m.results) or m.results[k].slot is None:
                continue
            slot = m.results[k].slot
            if isinstance(res.type, VectorType):
                names = [f"%{res.id}.{j}" for j in range(len(res.type.items))]
                outs[slot] = names                                  # type: ignore[index]
                out_plan.append((slot, [(res, _declared(t)) for t in res.type.items], True))  # type: ignore[arg-type]
            else:
                outs[slot] = [EMPTY_VAR_NAME if res.is_null else f"%{res.id}"]  # type: ignore[index]
                if not res.is_null:
                    out_plan.append((slot, [(res, _declared(res.type))], False))  # type: ignore[arg-type]
        inplace = [(op.operands[a], op.results[b]) for a, b in r.inplace
                   if a < len(op.operands) and b < len(op.results) and op.operands[a] is not None]
        check_nan = self.check_nan
        fill = LEGACY_INPUTS.get(legacy_type)
        # The kernel takes operands with no value (None): dropout_grad's mask, which a test-mode
        # dropout leaves unwritten and Paddle's grad kernel then never reads (as the legacy Executor).
        lenient = bool(opdef.allow_missing_inputs)

        def step(env: Env) -> None:
            ins: dict[str, list] = {}
            for slot, v, vec in ins_plan:
                x = env.get(v) if lenient else env[v]
                if x is None and lenient:
                    x = [] if vec else None
                if vec:
                    ins.setdefault(slot, []).extend(x)
                else:
                    ins.setdefault(slot, []).append(x)
            for slot, v in xshape_plan:
                x = env[v]
                ins[slot] = [np.empty((0,) + np.shape(x), dtype=np.asarray(x).dtype)]
            a = attrs
            if mutable:
                a = dict(attrs)
                for name, v, int_array in mutable:
                    a[name] = attr_value(env[v], int_array)
            if fill is not None:
                fill(ins, a)
            res = kernel(Call(legacy_type, ins, a, outs, executor._rng, None))
            for slot, recs, vec in out_plan:
                val = res.get(slot)
                if val is None:
                    continue
                if vec:
                    env[recs[0][0]] = [cast_to(x, dt) for x, (_, dt) in zip(val, recs)]
                    continue
                rv, dt = recs[0]
                x = val[0] if isinstance(val, (list, tuple)) else val
                if x is None:
                    continue
                x = cast_to(x, dt)
                if check_nan and isinstance(x, np.ndarray) and x.dtype.kind in "fc" and not np.all(np.isfinite(x)):
                    raise ExecutionError("produced NaN or Inf (the first op to do so)")
                env[rv] = x
            for ov, rv in inplace:
                if rv in env:
                    env[ov] = env[rv]

        return step

    def _compile_region_op(self, op: Operation, index: int, counter: list[int], inputs: dict) -> Step:
        plans = [self._compile_block(b, counter, inputs) for region in op.regions for b in region.blocks]
        results = list(op.results)
        if op.name == "pd_op.if":
            if len(plans) != 2 or not op.operands or op.operands[0] is None:
                raise ExecutionError(f"{self._loc(op, index)}: an if needs a condition and two regions")
            cond, then_plan, else_plan = op.operands[0], plans[0], plans[1]
            run_block = self._run_block

            def if_step(env: Env) -> None:
                outs = run_block(then_plan if _truth(env[cond], "if") else else_plan, env)
                for rv, x in zip(results, outs):
                    if x is not None:
                        env[rv] = x

            return if_step
        if op.name == "pd_op.pylayer":
            body = plans[0] if plans else _BlockPlan([], [])
            operands = [v for v in op.operands]
            run_block = self._run_block

            def pylayer_step(env: Env) -> None:
                for a, v in zip(body.args, operands):
                    if v is not None:
                        env[a] = env[v]
                for rv, x in zip(results, run_block(body, env)):
                    if x is not None:
                        env[rv] = x

            return pylayer_step
        # pd_op.while: operand 0 is the condition, the rest the loop variables (the body's args)
        if len(plans) != 1 or not op.operands:
            raise ExecutionError(f"{self._loc(op, index)}: a while needs a condition and one region")
        body = plans[0]
        cond, inits = op.operands[0], op.operands[1:]
        if len(body.args) != len(inits) or body.yields is None or len(body.yields) != len(inits) + 1:
            raise ExecutionError(f"{self._loc(op, index)}: the while body takes {len(body.args)} arguments and "
                                 f"yields {len(body.yields or ()) } values for {len(inits)} loop variables")
        limit = self.max_while_steps or MAX_WHILE_STEPS
        executor = self

        def while_step(env: Env) -> None:
            c = env[cond]
            vals = [env[v] for v in inits]      # type: ignore[index]
            n = 0
            while _truth(c, "while"):
                n += 1
                if n > limit:
                    raise ExecutionLimitError(f"stopped after {limit} steps (the limit; max_while_steps / "
                                              "--max-steps raises it)")
                if executor._deadline is not None and time.monotonic() > executor._deadline:
                    raise ExecutionLimitError(f"timed out at step {n}: the run took longer than its time limit "
                                              f"of {executor.timeout:g} s")
                for a, x in zip(body.args, vals):
                    env[a] = x
                out = executor._run_block(body, env)
                c, vals = out[0], out[1:]
            for rv, x in zip(results, vals):
                env[rv] = x

        return while_step


# --------------------------------------------------------------------------
# The module-level entry points
# --------------------------------------------------------------------------
def run(program: Program, feeds: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None,
        fetch: Sequence[str | Value] | None = None, **options: Any) -> dict[str, Any]:
    """Run a PIR program, forward and backward; return {name: value} for each
    ref in `fetch` (default: `default_fetch(program)`). `options` are
    PirExecutor's (seed, paddle_seed, check_nan, max_while_steps, timeout, progress, blas_threads)."""
    return PirExecutor(**options).run(program, feeds, params, fetch)


def gradient_names(program: Program) -> dict[str, Value]:
    """`NAME@GRAD` -> value for every parameter and data value the backward section
    computes a gradient for (`pir_grads.named_gradients`)."""
    return named_gradients(program)


def default_fetch(program: Program, info: BackwardInfo | None = None,
                  grads: Mapping[str, Value] | None = None) -> list[str]:
    """What `run` returns when not told: the fetch and shadow_output names, the
    loss (the value the backward section differentiates, else the loss
    candidates of `pir.summary`), by its name or `%N`, and every `NAME@GRAD`."""
    info = info or backward_info(program)
    grads = grads if grads is not None else named_gradients(program, info)
    refs: list[str] = []
    for op in program.block.ops:
        attr = {"pd_op.fetch": "name", "builtin.shadow_output": "output_name"}.get(op.name)
        name = op.attr(attr, None) if attr else None
        if isinstance(name, str) and name not in refs:
            refs.append(name)
    losses = [info.loss] if info.loss is not None else [
        program.value(v.name) for v in summary(program).losses]
    for v in losses:
        n = _name(v)
        if n not in refs:
            refs.append(n)
    refs.extend(g for g in grads if g not in refs)
    return refs


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------
def _check_args(program, feeds, params, fetch) -> None:
    if not isinstance(program, Program):
        raise ArgumentTypeError(f"the PIR executor runs a pir.Program, not {type(program).__name__}")
    for what, m in (("feeds", feeds), ("params", params)):
        if m is not None and not isinstance(m, Mapping):
            raise ArgumentTypeError(f"{what} must be a mapping of names to arrays, not {type(m).__name__}")
        for k in m or ():
            if not isinstance(k, str):
                raise ArgumentTypeError(f"{what} keys must be names, not {type(k).__name__}: {k!r}")
    if fetch is not None:
        if isinstance(fetch, (str, Value)) or not isinstance(fetch, (list, tuple)):
            raise ArgumentTypeError(f"fetch must be a list of names or values, not {type(fetch).__name__}")
        for f in fetch:
            if not isinstance(f, (str, Value)):
                raise ArgumentTypeError(f"fetch entries must be names or values, not {type(f).__name__}: {f!r}")


def _key(ref: str | Value) -> str:
    return ref if isinstance(ref, str) else _name(ref)


def _name(v: Value) -> str:
    """A value's user-visible name: its data / parameter name, else `%N`."""
    op = v.defining_op
    if op is not None and op.name in INPUT_OPS:
        n = op.attr(INPUT_OPS[op.name], None)
        if isinstance(n, str):
            return n
    return f"%{v.id}" if v.id is not None else "%?"


def _declared(t) -> np.dtype | None:
    return numpy_dtype(t.dtype) if isinstance(t, DenseTensorType) else None


def _truth(c: Any, what: str) -> bool:
    a = np.asarray(c)
    if a.size != 1:
        raise ExecutionError(f"the {what} condition has {a.size} elements, not 1")
    return bool(a.reshape(-1)[0])


def _as_declared_input(value: Any, v: Value, kind: str, name: str, source: str | None) -> np.ndarray:
    """A feed or parameter as the program declares it: same-kind dtypes cast, dims checked."""
    arr = np.asarray(value)
    t = v.type
    label = f"{source + ': ' if source else ''}{'feed' if kind == 'data' else 'parameter'} '{name}'"
    if not isinstance(t, DenseTensorType):
        return arr
    dt = numpy_dtype(t.dtype)
    if dt is not None and arr.dtype != dt:
        if arr.dtype.kind != dt.kind or not np.can_cast(arr.dtype, dt, casting="same_kind"):
            raise ExecutionError(f"{label} has dtype {arr.dtype}, the program declares {dt}")
        arr = arr.astype(dt)
    dims = t.dims
    if len(dims) != arr.ndim or any(d >= 0 and d != s for d, s in zip(dims, arr.shape)):
        raise ExecutionError(f"{label} has shape {list(arr.shape)}, the program declares {list(dims)}")
    return arr


def _glue_step(op: Operation, glue, inplace_pairs) -> Step:
    operands = list(op.operands)
    results = list(op.results)
    attrs = {k: a.py() for k, a in op.attrs.items()}
    inplace = [(operands[a], results[b]) for a, b in inplace_pairs
               if a < len(operands) and b < len(results) and operands[a] is not None]

    def step(env: Env) -> None:
        out = glue([env[v] if v is not None else None for v in operands], attrs)
        for rv, x in zip(results, out):
            env[rv] = x
        for ov, rv in inplace:
            env[ov] = env[rv]

    return step
