"""A NumPy interpreter for programs: forward ops, grad ops, sub-blocks.

    exe = Executor()
    scope = Scope()
    exe.run(startup, scope=scope)                       # initialise parameters
    loss, gw = exe.run(main, feed={"x": x}, fetch_list=["mean_0.tmp_0", "fc_0.w_0@GRAD"], scope=scope)

Every kernel comes from the op registry; the interpreter knows no op type.
Each block is compiled once into a plan (kernel, argument names, decoded
attrs, declared output dtypes), so running an op costs a few dict lookups
and the kernel. Values keep the dtype their var declares (float32 stays
float32, int64 ids stay int64). Persistable vars live in the scope across
runs; everything else lives in a per-run child scope.
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import glob
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from ..base import _args
from ..base import attrs as _attrs
from ..base import dtypes
from ..base.errors import ArgumentTypeError, ExecutionError, ExecutionLimitError, PyBackwardError, where
from ..base.files import check_regular_input, read_input_file, write_atomic
from ..backward.emit import find_var_desc
from ..ops import registry
from ..ops.paddle_data import paddle_runs_on_cpu
from ..ops.registry import EMPTY_VAR_NAME, LOD_KEY, Call
from ..ops import lod as _lod
from ..legacy.program import Block, Program, Variable
from ..tensors.tensor_format import decode_tensors, encode_tensor

_LIST_VAR_TYPES = (dtypes.VarType.FEED_MINIBATCH, dtypes.VarType.FETCH_LIST)


class Scope:
    """Var name -> value, with a parent chain (Paddle's Scope)."""

    def __init__(self, parent: "Scope | None" = None) -> None:
        self.parent = parent
        self.vars: dict[str, Any] = {}

    def find(self, name: str) -> Any:
        s: Scope | None = self
        while s is not None:
            v = s.vars.get(name, _MISSING)
            if v is not _MISSING:
                return v
            s = s.parent
        return _MISSING

    def has(self, name: str) -> bool:
        return self.find(name) is not _MISSING

    def get(self, name: str, default: Any = None) -> Any:
        v = self.find(name)
        return default if v is _MISSING else v

    def set(self, name: str, value: Any) -> None:
        self.vars[name] = value

    def owner(self, name: str) -> "Scope | None":
        s: Scope | None = self
        while s is not None:
            if name in s.vars:
                return s
            s = s.parent
        return None

    def child(self) -> "Scope":
        return Scope(self)

    def __contains__(self, name: str) -> bool:
        return self.has(name)

    def __getitem__(self, name: str) -> Any:
        v = self.find(name)
        if v is _MISSING:
            raise KeyError(name)
        return v

    def __setitem__(self, name: str, value: Any) -> None:
        self.vars[name] = value


_MISSING = object()


# -- time limit ---------------------------------------------------------------
class _Interrupted(BaseException):
    """Raised in the running thread when its run passes its time limit
    inside an op (a BaseException, so no kernel's `except Exception` eats it)."""


#: Seconds past the time limit at which the watchdog interrupts an op: the
#: checks between the ops of block 0 and at each `while` step get the first
#: chance (their messages name the op or the step), the watchdog ends what
#: they cannot reach (one long op). A run stops within its limit plus this,
#: plus the NumPy call under way.
WATCHDOG_GRACE = 0.25

#: CPython's PyThreadState_SetAsyncExc (None elsewhere: only the checks between ops remain).
_set_async_exc = getattr(getattr(ctypes, "pythonapi", None), "PyThreadState_SetAsyncExc", None)


class _Watchdog:
    """Interrupts a run that passes its time limit, even inside one long op.

    The executor checks the deadline before each op of every block and at
    each step of a `while`; an op that runs long by itself (a Python loop in
    a kernel) would still be waited for. A timer thread raises _Interrupted
    in the running thread when the time is up, at the thread's next bytecode
    (a single NumPy call still runs to its end), and again every `again`
    seconds until the executor disarms it: an exception raised where Python
    discards it (a weakref callback, a `__del__`) is not the end of it.
    `disarm` stops the timer and clears an exception not yet delivered, so
    nothing is raised after it returns.
    """

    def __init__(self, seconds: float, again: float = 0.1) -> None:
        self._lock = threading.Lock()
        self._armed, self._fired = True, False
        self._tid = threading.get_ident()
        self._again = again
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(seconds,), daemon=True,
                                        name="pybackward-timeout")
        self._thread.start()

    def _watch(self, seconds: float) -> None:
        wait = seconds
        while not self._stop.wait(wait):
            with self._lock:
                if not self._armed or _set_async_exc is None:
                    return
                self._fired = True
                _set_async_exc(ctypes.c_ulong(self._tid), ctypes.py_object(_Interrupted))
            wait = self._again

    def disarm(self) -> None:
        with self._lock:
            self._armed = False
            if self._fired:
                _set_async_exc(ctypes.c_ulong(self._tid), None)
        self._stop.set()


# -- BLAS threads -----------------------------------------------------------
# NumPy's OpenBLAS starts one thread per core and, after each GEMM, keeps its
# workers spinning for a while. The interpreter interleaves many small GEMMs
# with single-threaded NumPy work, so the spinning workers take the cores
# the next ops need: on the 2-core benchmark machine googlenet's step took
# 213 ms with 2 BLAS threads and 59 ms with one (benchmarks/README.md). A
# run therefore caps OpenBLAS at `Executor(blas_threads=...)` threads (1 by
# default) and restores the caller's setting afterwards; a NumPy built on
# another BLAS is left alone.
_BLAS_SET = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
             "openblas_set_num_threads64_", "openblas_set_num_threads")
_BLAS_GET = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
             "openblas_get_num_threads64_", "openblas_get_num_threads")
_blas_lock = threading.Lock()
_blas_state: dict[str, Any] = {"api": None, "depth": 0, "saved": None}


def _find_blas() -> list[tuple[Any, Any]]:
    """(get, set) of each OpenBLAS loaded in the process (NumPy's, and any
    other a library brought), through ctypes; empty if there is none."""
    paths: list[str] = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            paths = sorted({ln.split()[-1] for ln in f if "openblas" in ln.lower() and "/" in ln})
    except OSError:
        pass
    if not paths:
        base = os.path.dirname(os.path.dirname(np.__file__))
        for pat in ("numpy.libs/*openblas*", "numpy/.dylibs/*openblas*", "numpy.libs/*openblas*.dll"):
            paths += glob.glob(os.path.join(base, pat))
    found = []
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        get = next((getattr(lib, n) for n in _BLAS_GET if hasattr(lib, n)), None)
        set_ = next((getattr(lib, n) for n in _BLAS_SET if hasattr(lib, n)), None)
        if get is not None and set_ is not None:
            get.restype, get.argtypes = ctypes.c_int, []
            set_.restype, set_.argtypes = None, [ctypes.c_int]
            found.append((get, set_))
    return found


def _blas_api() -> list[tuple[Any, Any]]:
    if _blas_state["api"] is None:
        _blas_state["api"] = _find_blas()
    return _blas_state["api"]


def _blas_enter(threads: int | None) -> bool:
    """Cap the process's OpenBLAS threads at `threads` for a run (the
    outermost run sets, the last one out restores); True if capped."""
    if threads is None:
        return False
    with _blas_lock:
        st = _blas_state
        api = _blas_api()
        if not api:
            return False
        if st["depth"] == 0:
            st["saved"] = [get() for get, _ in api]
            for (_, set_), was in zip(api, st["saved"]):
                if was != threads:
                    set_(threads)
        st["depth"] += 1
        return True


def _blas_exit() -> None:
    with _blas_lock:
        st = _blas_state
        st["depth"] -= 1
        if st["depth"] == 0 and st["saved"] is not None:
            for (get, set_), was in zip(st["api"], st["saved"]):
                if get() != was:
                    set_(was)
            st["saved"] = None


@contextlib.contextmanager
def capped_blas(threads: int | None = 1) -> Iterator[bool]:
    """Cap NumPy's OpenBLAS at `threads` threads inside the block (None: leave it alone)
    and restore the caller's setting after it, as every `Executor.run` does (see above);
    yields whether it capped. The PIR interpreter's runs use it too."""
    capped = _blas_enter(threads)
    try:
        yield capped
    finally:
        if capped:
            _blas_exit()


def blas_threads() -> int | None:
    """The number of threads NumPy's OpenBLAS uses now (None: no OpenBLAS found)."""
    with _blas_lock:
        api = _blas_api()
    return api[0][0]() if api else None


@dataclasses.dataclass
class _Step:
    index: int
    op_type: str
    kernel: Any
    ins: tuple[tuple[str, tuple[str, ...]], ...]        # @EMPTY@ already dropped
    outs: dict[str, list[str]]
    #: (slot, ((name, declared dtype or None, persistable), ...)) per output slot
    out_items: tuple[tuple[str, tuple[tuple[str, Any, bool], ...]], ...]
    attrs: dict[str, Any]
    #: Slot -> argument names, for kernels that read vars by name (call.env.in_names).
    in_names: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    #: The kernel takes inputs that may have no value (None is passed):
    #: control-flow ops, whose inputs Paddle leaves uninitialised at times.
    lenient: bool = False
    #: Args that are tensor arrays (a missing one reads as an empty array).
    arrays: frozenset[str] = frozenset()
    #: Outputs declared in this very block: they live in the block's own scope.
    local_outs: frozenset[str] = frozenset()
    #: Outputs declared in an ancestor block: how many scopes up they live
    #: when no scope holds them yet (Paddle creates every var of a block in
    #: that block's scope before running it).
    outer_depth: dict[str, int] = dataclasses.field(default_factory=dict)
    #: output -> the input whose LoD it takes when the kernel says
    #: nothing about it (Paddle's ShareLoD; see docs/lod.md).
    lod_share: dict[str, str] = dataclasses.field(default_factory=dict)


class OpEnv:
    """What control-flow kernels see of the interpreter (`call.env`)."""

    def __init__(self, executor: "Executor", program: Program, scope: Scope,
                 block: Block | None = None):
        self.executor = executor
        self.program = program
        self.scope = scope
        #: The block being run and the current op's input names (slot -> names).
        self.block = block
        self.in_names: dict[str, list[str]] = {}

    def run_block(self, block_idx: int, scope: Scope) -> None:
        self.executor._run_block(self.program.block(block_idx), scope)

    def lod_of(self, name: str) -> Any:
        """The LoD the run holds for a var (a tensor array's: `ArrayLoDs`), or None."""
        return self.executor._lods.get(name)

    def is_read(self, name: str) -> bool:
        """Whether some op of the program (any block) reads var `name`: a
        `while` keeps its step scopes only when a `while_grad` reads them."""
        return name in self.executor._read_names(self.program)

    @property
    def max_while_steps(self) -> int | None:
        """The executor's step limit per `while` op (None: the op family's default)."""
        return self.executor.max_while_steps

    def check_deadline(self, doing: str) -> None:
        """Raise ExecutionLimitError if the run is past its time limit."""
        self.executor.check_deadline(doing)

    # -- files, for the save / load ops (only under Executor(files=DIR)) ----
    def file_path(self, op_type: str, path: str) -> Path:
        """The file an op's `file_path` names, inside the executor's `files`
        directory; refused if the executor has none or the path leaves it."""
        root = self.executor.files
        if root is None:
            raise ExecutionError(f"op {op_type} reads or writes the file {path!r}: a program touches files only "
                                 "when allowed to (Executor(files=DIR), `run --files DIR`), and then only "
                                 "under DIR")
        target = (root / path).resolve() if not Path(path).is_absolute() else Path(path).resolve()
        if target != root and root not in target.parents:
            raise ExecutionError(f"op {op_type}: the file {path!r} is outside the directory the run may use "
                                 f"({root})")
        return target

    def read_bytes(self, op_type: str, path: str) -> bytes:
        """The bytes of the file an op's `file_path` names (inside the `files`
        directory), read as every other input is (`base.files.read_input_file`):
        a regular file only - a FIFO or a device in DIR is refused without
        blocking on it or reading it, so `--timeout` is never needed to stop it."""
        target = self.file_path(op_type, path)
        try:
            os.stat(target)
        except OSError as e:
            raise ExecutionError(f"op {op_type}: cannot read {path!r}: {e.strerror or e}") from None
        try:
            return read_input_file(target, ExecutionError)
        except ExecutionError as e:
            reason = str(e).removeprefix(f"{target}: ").removeprefix("cannot read: ")
            raise ExecutionError(f"op {op_type}: cannot read {path!r}: {reason}") from None

    def read_tensors(self, op_type: str, path: str) -> list[tuple[np.ndarray, list[list[int]]]]:
        """The tensors of a file in Paddle's format (`save` / `save_combine`), in order."""
        data = self.read_bytes(op_type, path)
        return decode_tensors(data, label=str(self.file_path(op_type, path)))

    def write_tensors(self, op_type: str, path: str, tensors: Sequence[tuple[np.ndarray, Any]],
                      overwrite: bool = True) -> None:
        """Write tensors in Paddle's format, one after another, atomically."""
        target = self.file_path(op_type, path)
        if target.exists() and not overwrite:
            raise ExecutionError(f"op {op_type}: {path!r} exists and the op's overwrite attr is false")
        if os.path.lexists(target):
            # The regular-file rule of inputs holds for outputs here too: writing through a FIFO
            # would block until a reader comes, a device would take the values.
            try:
                check_regular_input(target, ExecutionError)
            except ExecutionError as e:
                reason = str(e).removeprefix(f"{target}: ")
                raise ExecutionError(f"op {op_type}: cannot write {path!r}: {reason}") from None
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, b"".join(encode_tensor(a, lod or ()) for a, lod in tensors))


class Executor:
    """Runs programs with NumPy kernels from the op registry.

    `max_while_steps` bounds the steps of each run of a `while` op (None: the
    default, `ops.control_flow.MAX_WHILE_STEPS`); `timeout` bounds each `run`
    in seconds (None: no limit), checked between the ops of block 0 and at
    each step of a `while`, and enforced inside a long op by a watchdog
    thread WATCHDOG_GRACE seconds later. Either limit ends the run with an
    ExecutionLimitError naming the op and the step reached.
    `progress`, if given, is called as `progress(done, total, op_type)` before
    each op of block 0 (the CLI draws its progress line with it). `files`
    is the directory the program's save / load ops may read and write (their
    relative `file_path`s are taken from it); without it they are refused,
    so running a program never touches a file it names. `blas_threads`
    caps NumPy's OpenBLAS threads during a run (1 by default: many small
    GEMMs between single-threaded NumPy ops run fastest on one thread;
    None leaves the caller's setting); the caller's setting is restored
    when the run ends.
    """

    def __init__(self, seed: int = 0, check_nan: bool = False, max_while_steps: int | None = None,
                 timeout: float | None = None,
                 progress: Callable[[int, int, str], None] | None = None,
                 files: str | os.PathLike | None = None, blas_threads: int | None = 1) -> None:
        self.rng = np.random.default_rng(_args.integer(seed, "seed", minimum=0, allow_none=True))
        self.check_nan = _args.flag(check_nan, "check_nan")
        self.max_while_steps = _args.integer(max_while_steps, "max_while_steps", minimum=1, allow_none=True)
        self.timeout = _args.number(timeout, "timeout", minimum=0, open_min=True, allow_none=True)
        if progress is not None and not callable(progress):
            raise ArgumentTypeError(f"progress must be a callable (done, total, op_type), "
                                    f"not {type(progress).__name__}")
        self.progress = progress
        #: The directory the program's save / load ops may use (None: no file access).
        self.files = None if files is None else Path(_args.path(files, "files")).resolve()
        self.blas_threads = _args.integer(blas_threads, "blas_threads", minimum=1, allow_none=True)
        self._deadline: float | None = None
        self._watchdog: _Watchdog | None = None
        self._plans: dict[tuple, Any] = {}
        #: Var name -> LoD (Paddle's offset lists) for the vars of the last run that have one.
        self._lods: dict[str, list[list[int]]] = {}
        #: Peak bytes held by the run's scopes, when `track_memory` is on.
        self.track_memory = False
        self.peak_bytes = 0

    # -- public ------------------------------------------------------------
    def run(self, program: Program, feed: Mapping[str, Any] | None = None,
            fetch_list: Sequence[str | Variable] | None = None, scope: Scope | None = None,
            return_numpy: bool = True) -> list[np.ndarray]:
        """Run block 0 of `program`; return the fetched values in order."""
        _check_run_args(program, feed, fetch_list, scope)
        scope = Scope() if scope is None else scope
        local = scope.child()
        block = program.global_block()
        self._lods = {}
        self._place_feeds(program, block, feed or {}, scope, local)
        self.peak_bytes = 0
        if self.timeout is not None:
            # the op families this program needs are imported before the clock starts
            from .. import ops
            ops.load_families({op.type for b in program.blocks for op in b.ops})
        self._deadline = None if self.timeout is None else time.monotonic() + self.timeout
        capped = _blas_enter(self.blas_threads)
        try:
            try:
                if self.timeout is not None:
                    self._watchdog = _Watchdog(self.timeout + WATCHDOG_GRACE)
                self._run_block(block, local, root=scope)
            finally:
                self._disarm()
        except _Interrupted:
            self._disarm()
            raise ExecutionLimitError(f"{where(program.source, 0)}: timed out: the run took longer than its "
                                      f"time limit of {self.timeout:g} s (--timeout / Executor(timeout=...))"
                                      ) from None
        finally:
            self._deadline = None
            if capped:
                _blas_exit()
        out = []
        for f in fetch_list or ():
            name = f.name if isinstance(f, Variable) else f
            v = local.find(name)
            if v is _MISSING:
                raise ExecutionError(f"{where(program.source, 0, var=name)}: cannot fetch: "
                                     "no op computed it and it was not fed")
            out.append(np.asarray(v) if return_numpy and not isinstance(v, list) else v)
        return out

    def _disarm(self) -> None:
        """Stop the run's watchdog (no _Interrupted is raised after this returns)."""
        dog, self._watchdog = self._watchdog, None
        if dog is not None:
            dog.disarm()

    def reseed(self, seed: int | None) -> None:
        """Draw the random numbers of later runs afresh from `seed`, as a new
        `Executor(seed=seed)` would (keeping the compiled plans): runs that
        each start from the same seed draw the same masks and noise, which
        finite differences need (`check_gradients`)."""
        self.rng = np.random.default_rng(_args.integer(seed, "seed", minimum=0, allow_none=True))

    def lod(self, name: str) -> list[list[int]] | None:
        """The LoD (offset lists, outer level first) the last run gave var `name`, or None."""
        lod = self._lods.get(name)
        return None if lod is None else [list(level) for level in lod]

    def check_deadline(self, doing: str) -> None:
        """Raise ExecutionLimitError if this run is past its `timeout`."""
        if self._deadline is not None and time.monotonic() > self._deadline:
            raise ExecutionLimitError(f"timed out {doing}: the run took longer than its time limit of "
                                      f"{self.timeout:g} s (--timeout / Executor(timeout=...))")

    # -- feeds -------------------------------------------------------------
    def _place_feeds(self, program: Program, block: Block, feed: Mapping[str, Any],
                     scope: Scope, local: Scope) -> None:
        feed, lods = _lod.split_feeds(block, feed, where(program.source, 0))
        for name, value in feed.items():
            var = block.find_var_recursive(name)
            if var is None:
                raise ExecutionError(f"{where(program.source, 0, var=name)}: fed, but the program "
                                     "declares no such variable")
            arr = np.asarray(value)
            try:
                var.dtype
            except PyBackwardError as e:
                raise ExecutionError(f"{where(program.source, 0, var=name)}: {e}") from None
            if var.dtype is not None and arr.dtype != var.dtype:
                if not np.can_cast(arr.dtype, var.dtype, casting="same_kind") or \
                        (arr.dtype.kind != var.dtype.kind):
                    raise ExecutionError(f"{where(program.source, 0, var=name)}: feed has dtype "
                                         f"{arr.dtype}, the variable is {var.dtype}")
                arr = arr.astype(var.dtype)
            shape = var.shape
            if var.data_type is not None and (len(shape) != arr.ndim or any(
                    d != -1 and d != s for d, s in zip(shape, arr.shape))):
                raise ExecutionError(f"{where(program.source, 0, var=name)}: feed has shape "
                                     f"{list(arr.shape)}, the variable is declared {list(shape)}")
            (scope if var.persistable else local).set(name, arr)
            if name in lods:
                self._lods[name] = _lod.checked(lods.pop(name), arr, where(program.source, 0, var=name))
        for name in self._list_vars(block):
            local.set(name, [])

    def _list_vars(self, block: Block) -> list[str]:
        """Vars of the feed/fetch list types (looked up once per block)."""
        key = (id(block.desc), block.idx, len(block.vars), "lists")
        names = self._plans.get(key)
        if names is None:
            names = [v.name for v in block.vars.values() if v.type in _LIST_VAR_TYPES]
            self._plans[key] = names
        return names

    def _read_names(self, program: Program) -> frozenset[str]:
        """The names some op of `program` reads (looked up once per program shape)."""
        key = (id(program.desc), "read", tuple(len(b.ops) for b in program.blocks))
        names = self._plans.get(key)
        if names is None:
            names = frozenset(n for b in program.blocks for op in b.ops for n in op.input_arg_names)
            self._plans[key] = names
        return names

    # -- compile -----------------------------------------------------------
    def _plan(self, block: Block) -> list[_Step]:
        key = (id(block.desc), block.idx, len(block.ops))
        plan = self._plans.get(key)
        if plan is None:
            plan = [self._compile(block, i, op) for i, op in enumerate(block.ops)]
            self._plans[key] = plan
        return plan

    def _compile(self, block: Block, index: int, op) -> _Step:
        opdef = registry.find(op.type)
        if opdef is None or opdef.kernel is None:
            supported = sum(1 for d in registry.all_ops().values() if d.kernel is not None)
            paddle_cpu = paddle_runs_on_cpu(op.type, opdef.grad_of if opdef is not None else None)
            why = ("; Paddle 3.3.1 has no CPU kernel for this op either" if paddle_cpu is False else "")
            if opdef is not None and opdef.no_kernel:
                why += f"; {opdef.no_kernel}"
            raise ExecutionError(
                f"{where(block.program.source, block.idx, index, op.type)}: no kernel for op type "
                f"'{op.type}' ({supported} op types have kernels; `pybackward ops` lists them){why}")
        outs = op.outputs
        out_items = []
        for slot, names in outs.items():
            recs = []
            for n in names:
                if n == EMPTY_VAR_NAME:
                    recs.append((n, None, False))
                    continue
                v = block.find_var_recursive(n)
                dt = None
                if v is not None and v.data_type is not None:
                    try:
                        dt = dtypes.to_numpy(v.data_type)
                    except KeyError:
                        dt = None
                recs.append((n, dt, bool(v is not None and v.persistable)))
            out_items.append((slot, tuple(recs)))
        attrs = {a.name: _attrs.decode(a) for a in op.desc.attrs if a.name != "op_callstack"}
        in_names = op.inputs
        ins = tuple((s, tuple(a for a in args if a != EMPTY_VAR_NAME)) for s, args in in_names.items())
        # What control-flow ops need (see _Step): array args, where outputs live.
        arrays, local, depth = set(), set(), {}
        for n in set(op.input_arg_names) | set(op.output_arg_names):
            d = find_var_desc(block, n)     # Paddle's lookup: grad blocks see their forward block
            if d is not None and d.type.type == dtypes.VarType.DENSE_TENSOR_ARRAY:
                arrays.add(n)
        for n in op.output_arg_names:
            if block.has_var(n):
                local.add(n)
                continue
            b, k = block.parent, 1
            while b is not None and not b.has_var(n):
                b, k = b.parent, k + 1
            if b is not None:
                depth[n] = k
        return _Step(index, op.type, opdef.kernel, ins, outs, tuple(out_items), attrs, in_names,
                     opdef.allow_missing_inputs,
                     frozenset(arrays), frozenset(local), depth,
                     _lod.share_pairs(opdef.sets_lod_level, in_names, outs))

    # -- run ---------------------------------------------------------------
    def _run_block(self, block: Block, scope: Scope, root: Scope | None = None) -> None:
        program = block.program
        env = OpEnv(self, program, scope, block)
        root = root if root is not None else _root_of(scope)
        # At the top level a non-persistable value always lives in `scope`;
        # inside a sub-block it goes to whichever enclosing scope holds it.
        top = scope.parent is root
        local = scope.vars
        find = scope.find
        rng, check_nan, track = self.rng, self.check_nan, self.track_memory
        lods = self._lods
        timed = top and self._deadline is not None
        progress = self.progress if top else None
        plan = self._plan(block)
        for step in plan:
            if progress is not None:
                progress(step.index, len(plan), step.op_type)
            if timed and time.monotonic() > self._deadline:
                raise ExecutionLimitError(f"{where(program.source, block.idx, step.index, step.op_type)}: "
                                          f"timed out before this op: the run took longer than its time "
                                          f"limit of {self.timeout:g} s (--timeout / Executor(timeout=...))")
            ins: dict[str, list] = {}
            env.in_names = step.in_names
            for slot, names in step.ins:
                vals = []
                for n in names:
                    v = local.get(n, _MISSING)
                    if v is _MISSING:
                        v = find(n)
                        if v is _MISSING and n in step.arrays:
                            v = []          # Paddle's tensor arrays start empty
                        elif v is _MISSING and step.lenient:
                            v = None        # uninitialised: the kernel decides
                        if v is _MISSING:
                            raise ExecutionError(
                                f"{where(program.source, block.idx, step.index, step.op_type, n)}: input "
                                f"'{slot}' has no value: not fed, not initialised by a startup program, "
                                "and no earlier op computed it")
                    vals.append(v)
                ins[slot] = vals
            try:
                res = step.kernel(Call(step.op_type, ins, step.attrs, step.outs, rng, env,
                                       _lod.input_lods(step.ins, lods) if lods else None))
            except PyBackwardError as e:
                cls = ExecutionLimitError if isinstance(e, ExecutionLimitError) else ExecutionError
                raise cls(f"{where(program.source, block.idx, step.index, step.op_type)}: {e}") from None
            except _Interrupted:
                self._disarm()
                raise ExecutionLimitError(f"{where(program.source, block.idx, step.index, step.op_type)}: "
                                          f"timed out in this op: the run took longer than its time limit "
                                          f"of {self.timeout:g} s (--timeout / Executor(timeout=...))") from None
            except KeyboardInterrupt as e:       # say where the run was, innermost op first
                e.add_note(f"at {where(program.source, block.idx, step.index, step.op_type)}")
                raise
            except SystemExit:
                raise
            except Exception as e:  # MemoryError included: one clear line, never a traceback
                raise ExecutionError(f"{where(program.source, block.idx, step.index, step.op_type)}: "
                                     f"kernel failed on inputs {_shapes(ins)}: {type(e).__name__}: "
                                     f"{str(e)[:300]}") from None
            for slot, recs in step.out_items:
                val = res.get(slot)
                if val is None:
                    continue
                vals = val if isinstance(val, (list, tuple)) else (val,)
                if step.arrays and len(recs) == 1 and recs[0][0] in step.arrays and isinstance(val, list) \
                        and not (len(val) == 1 and isinstance(val[0], list)):
                    vals = (val,)           # a tensor array returned bare
                for (n, dt, persistable), v in zip(recs, vals):
                    if v is None or n == EMPTY_VAR_NAME:
                        continue
                    if dt is not None:
                        if isinstance(v, np.ndarray):
                            if v.dtype != dt:
                                v = _as_declared(v, dt, program, block, step, n)
                        elif not isinstance(v, list):
                            v = np.asarray(v, dtype=dt)
                    if check_nan and isinstance(v, np.ndarray) and v.dtype.kind in "fc" \
                            and not np.all(np.isfinite(v)):
                        raise ExecutionError(f"{where(program.source, block.idx, step.index, step.op_type, n)}: "
                                             "produced NaN or Inf (first op to do so)")
                    if persistable:
                        owner = scope.owner(n)
                        (owner if owner is not None else root).vars[n] = v
                    elif top or n in step.local_outs:
                        local[n] = v
                    else:
                        # Declared in an enclosing block: its scope (Paddle
                        # creates a block's vars in the block's scope).
                        owner = scope.owner(n)
                        if owner is None or owner is root:
                            owner = scope
                            for _ in range(step.outer_depth.get(n, 0)):
                                if owner.parent is None or owner.parent is root:
                                    break
                                owner = owner.parent
                        owner.vars[n] = v
            if lods or LOD_KEY in res:
                _lod.set_output_lods(step.outs, step.lod_share, res, lods)
            if track:
                self.peak_bytes = max(self.peak_bytes, scope_bytes(scope, root))


def _check_run_args(program, feed, fetch_list, scope) -> None:
    if not isinstance(program, Program):
        raise ArgumentTypeError(f"Executor.run() takes a Program, not {type(program).__name__}")
    if feed is not None and not isinstance(feed, Mapping):
        raise ArgumentTypeError(f"feed must be a mapping of names to arrays, not {type(feed).__name__}")
    if feed is not None:
        for k in feed:
            if not isinstance(k, str):
                raise ArgumentTypeError(f"feed keys must be var names, not {type(k).__name__}: {k!r}")
    if fetch_list is not None:
        if isinstance(fetch_list, (str, Variable)) or not isinstance(fetch_list, (list, tuple)):
            raise ArgumentTypeError("fetch_list must be a list of names or Variables, not "
                                    f"{type(fetch_list).__name__}")
        for f in fetch_list:
            if not isinstance(f, (str, Variable)):
                raise ArgumentTypeError(f"fetch_list entries must be names or Variables, not "
                                        f"{type(f).__name__}: {f!r}")
    if scope is not None and not isinstance(scope, Scope):
        raise ArgumentTypeError(f"scope must be a pybackward Scope, not {type(scope).__name__}")


def _as_declared(v: np.ndarray, dt: np.dtype, program: Program, block: Block, step: _Step,
                 name: str) -> np.ndarray:
    """An op's output cast to its var's declared dtype.

    A cast that would lose values is refused: complex values with imaginary
    parts into a real var; into an integer var, floats with fractional parts
    (or NaN) and values outside its range; into a bool var, anything but 0
    and 1. Paddle's vars keep the kernel's dtype at run time and
    pybackward's hold what the program declares, so the loss would go
    unseen. Grad ops are exempt: a complex gradient written into a real var
    is the gradient of a real var, whose real part is the answer (as
    Paddle's grad kernels take it)."""
    kind, to = v.dtype.kind, dt.kind
    lost = None
    if kind == "c" and to != "c":
        if np.any(v.imag):
            lost = f"complex values into '{name}'", "their imaginary parts would be lost"
        v, kind = v.real, "f"
    if lost is None and to in "iub" and kind in "iuf" and v.size:
        if kind == "f" and not np.array_equal(v, np.trunc(v)):
            lost = f"floats into '{name}'", "their fractional parts would be lost"
        elif to == "b":
            if not np.all((v == 0) | (v == 1)):
                lost = f"values other than 0 and 1 into '{name}'", "they would all become True"
        else:
            info = np.iinfo(dt)
            if v.min() < info.min or v.max() > info.max:
                lost = f"values outside {dt}'s range into '{name}'", "they would wrap around"
    if lost is not None:
        opdef = registry.find(step.op_type)
        if opdef is None or opdef.grad_of is None:
            raise ExecutionError(f"{where(program.source, block.idx, step.index, step.op_type, name)}: "
                                 f"wrote {lost[0]}, which the program declares {dt}; {lost[1]}")
    return v.astype(dt)


def _shapes(ins: dict) -> dict:
    """Input shapes for an error message (never fails itself)."""
    out = {}
    for slot, vals in ins.items():
        shapes = []
        for v in vals:
            try:
                shapes.append(tuple(np.shape(v)) if not isinstance(v, list) else f"array[{len(v)}]")
            except Exception:
                shapes.append("?")
        out[slot] = shapes
    return out


def _root_of(scope: Scope) -> Scope:
    while scope.parent is not None:
        scope = scope.parent
    return scope


def scope_bytes(scope: Scope, stop: Scope | None = None) -> int:
    """Bytes of the arrays held by `scope` and its parents below `stop`."""
    total = 0
    s: Scope | None = scope
    while s is not None and s is not stop:
        for v in s.vars.values():
            if isinstance(v, np.ndarray):
                total += v.nbytes
        s = s.parent
    return total


def load_params(scope: Scope, values: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> None:
    """Put parameter values (e.g. from an .npz) into a scope."""
    items = values.items() if hasattr(values, "items") else values
    for k, v in items:
        scope.set(k, np.asarray(v))
