"""Finite differences against the backward section of a PIR program.

A PIR program carries its backward section (Paddle's `append_backward` in
PIR mode wrote it). `check_gradients` runs a float64 copy of the program
(`to_float64`: every float tensor type and `dtype` attribute widened), reads
each parameter's and data value's gradient from the backward section
(`NAME@GRAD`, `pir_grads`) and compares it with central differences of the
loss (the value the section's seed differentiates): element by element, or,
for tensors past `max_elements`, along random directions. Rows are the
legacy check's (`gradcheck.GradCheckRow`), so the same table prints them.
May import: every layer below the interpreter, and the interpreter's modules.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..base import _args
from ..base.errors import ArgumentError, ArgumentTypeError
from ..pir import codec
from ..pir.model import Program
from ..pir.types import FLOAT_DTYPES, Attr, DenseTensorType, Type, VectorType, scalar
from .gradcheck import DEFAULT_TOLERANCES, GradCheckRow, check_options
from .pir_executor import PirExecutor
from .pir_grads import GRAD_SUFFIX, backward_info, named_gradients

_F64 = scalar("float64")


def _widen(t: Type) -> Type:
    if isinstance(t, DenseTensorType) and t.dtype in FLOAT_DTYPES and t.dtype != "float64":
        return type(t)(_F64, t.dims, t.layout, t.lod, t.offset, t.tag) if type(t) is DenseTensorType else t
    if isinstance(t, VectorType):
        return VectorType(tuple(_widen(i) for i in t.items))
    return t


def to_float64(program: Program) -> Program:
    """A copy of `program` computing in float64: float tensor types and float
    `dtype` attributes (full, full_like, data, cast, ...) widened."""
    copy = codec.loads(codec.dumps(program), source=program.source)
    f64 = Attr.dtype("float64")
    for op in copy.walk():
        for v in op.results:
            v.type = _widen(v.type)
        for region in op.regions:
            for b in region.blocks:
                for v in b.args + b.kwargs:
                    v.type = _widen(v.type)
        for k, a in list(op.attrs.items()):
            if a.tag == "1.a_dtype" and a.value in FLOAT_DTYPES and a.value != "float64":
                op.attrs[k] = f64
    copy.names_changed()
    return copy


def check_gradients(program: Program, feeds: Mapping[str, Any] | None = None,
                    params: Mapping[str, Any] | None = None, wrt: Sequence[str] | None = None,
                    eps: float = 1e-6, rtol: float | None = None, atol: float | None = None,
                    max_elements: int = 64, directions: int = 4, seed: int = 0,
                    paddle_seed: int | None = None,
                    progress: Callable[[int, int, str], None] | None = None) -> list[GradCheckRow]:
    """Check d(loss)/d(NAME) for each NAME in `wrt` (default: every parameter and
    data value the backward section computes a gradient for) against central
    differences on a float64 copy. Every run starts its random draws afresh
    (`seed`, or Paddle's global generator after `paddle.seed(paddle_seed)`), so
    a dropout keeps its mask across the runs."""
    if not isinstance(program, Program):
        raise ArgumentTypeError(f"check_gradients() takes a pir.Program, not {type(program).__name__}")
    wrt, eps, rtol, atol, max_elements, directions = check_options(wrt, eps, rtol, atol, max_elements, directions)
    feeds = {k: np.asarray(v) for k, v in _args.mapping(feeds, "feeds").items()}
    params = {k: np.asarray(v) for k, v in _args.mapping(params, "params").items()}
    prog = to_float64(program)
    info = backward_info(prog)
    if info.loss is None:
        raise ArgumentError(f"{program.source or 'the program'}: has no backward section (no full_like seed read "
                            "by a grad op): nothing to check; append one first")
    grads = named_gradients(prog, info)
    targets = [n[: -len(GRAD_SUFFIX)] for n in grads] if not wrt else list(wrt)
    for name in targets:
        if name + GRAD_SUFFIX not in grads:
            raise ArgumentError(f"{program.source or 'the program'}: the backward section computes no gradient "
                                f"for {name!r} (gradients: {', '.join(sorted(grads)) or 'none'})")
    feeds64 = {k: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in feeds.items()}
    params64 = {k: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in params.items()}
    exe = PirExecutor(seed=_args.integer(seed, "seed", minimum=0), paddle_seed=paddle_seed)
    analytic = exe.run(prog, feeds64, params64, fetch=[n + GRAD_SUFFIX for n in targets])
    rng = np.random.default_rng(seed)
    rows = []
    for i, name in enumerate(targets):
        if progress is not None:
            progress(i, len(targets), name)
        source = params64 if name in params64 else feeds64
        if name not in source:
            raise ArgumentError(f"'{name}' is neither a given parameter nor a feed")
        x0 = source[name]
        g = np.asarray(analytic[name + GRAD_SUFFIX], dtype=np.float64).reshape(x0.shape)
        declared = str(program.value(name).type.dtype) if isinstance(program.value(name).type, DenseTensorType) \
            else "float64"
        drt, dat = DEFAULT_TOLERANCES.get(declared, DEFAULT_TOLERANCES["float64"])
        rt, at = (drt if rtol is None else rtol), (dat if atol is None else atol)

        def f(x: np.ndarray, name: str = name, source: dict = source) -> float:
            vals = dict(source)
            vals[name] = x
            if source is params64:
                return float(np.sum(exe.loss(prog, feeds64, vals)))
            return float(np.sum(exe.loss(prog, vals, params64)))

        if x0.size <= max_elements:
            num = np.zeros_like(x0, dtype=np.float64)
            for j in range(x0.size):
                xp, xm = x0.copy(), x0.copy()
                xp.reshape(-1)[j] += eps
                xm.reshape(-1)[j] -= eps
                num.reshape(-1)[j] = (f(xp) - f(xm)) / (2 * eps)
            err = np.abs(g - num)
            rel = err / np.maximum(np.abs(num), 1e-12)
            rows.append(GradCheckRow(name, x0.shape, float(err.max(initial=0)), float(rel.max(initial=0)),
                                     x0.size, "elements", bool(np.all(err <= at + rt * np.abs(num)))))
        else:
            errs, rels, ok = [], [], True
            for _ in range(directions):
                v = rng.standard_normal(x0.shape)
                num = (f(x0 + eps * v) - f(x0 - eps * v)) / (2 * eps)
                e = abs(float(np.sum(g * v)) - num)
                errs.append(e)
                rels.append(e / max(abs(num), 1e-12))
                ok &= e <= at * np.sqrt(x0.size) + rt * abs(num)
            rows.append(GradCheckRow(name, x0.shape, max(errs), max(rels), directions, "directions", bool(ok)))
    return rows
