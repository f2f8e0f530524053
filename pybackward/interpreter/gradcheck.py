"""Numerical gradient checks: the backward section against finite differences.

`check_gradients` works on a float64 copy of the program (every FP32/FP16
var and `dtype`-like attr widened), appends the backward section there,
computes analytic gradients with the interpreter and compares them with
central differences of the loss, element by element or - for large tensors -
along random directions: <g, v> against (f(x + eps v) - f(x - eps v)) / 2 eps.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..base import _args, dtypes
from .._proto import framework_pb2 as pb
from ..backward.api import append_backward
from ..base.errors import ArgumentError, ArgumentTypeError
from ..base.names import printable
from .executor import Executor, Scope
from ..legacy.program import Program, Variable

_WIDEN = {pb.VarType.FP32: pb.VarType.FP64, pb.VarType.FP16: pb.VarType.FP64,
          pb.VarType.BF16: pb.VarType.FP64}
_DTYPE_ATTRS = ("dtype", "in_dtype", "out_dtype")

#: Default tolerances by the dtype the program declares for the var.
DEFAULT_TOLERANCES = {"float64": (1e-5, 1e-7), "float32": (1e-5, 1e-7), "float16": (1e-3, 1e-5)}


@dataclasses.dataclass
class GradCheckRow:
    var: str
    shape: tuple[int, ...]
    max_abs_err: float
    max_rel_err: float
    checked: int            # elements or directions
    mode: str               # "elements" or "directions"
    ok: bool


def to_float64(program: Program) -> Program:
    """A copy of `program` computing in float64 (vars and dtype attrs widened)."""
    p = program.clone()
    for b in p.desc.blocks:
        for v in b.vars:
            for field in ("dense_tensor", "tensor_array"):
                if v.type.HasField(field):
                    t = getattr(v.type, field).tensor
                    t.data_type = _WIDEN.get(t.data_type, t.data_type)
        for op in b.ops:
            widened = False
            for a in op.attrs:
                if a.name in _DTYPE_ATTRS and a.type == pb.AttrType.INT and a.i in _WIDEN:
                    a.i = _WIDEN[a.i]
                    widened = True
            if widened:
                _widen_values(op)
    p.sync()
    return p


def _widen_values(op: Any) -> None:
    """A constant stored per dtype (`assign_value`'s `fp32_values`) moves to the float64 list
    (`fp64_values`) when its dtype was widened: the kernels read the list of their dtype."""
    attrs = {a.name: a for a in op.attrs}
    narrow = attrs.get("fp32_values")
    if narrow is None or narrow.type != pb.AttrType.FLOATS or not narrow.floats:
        return
    wide = attrs.get("fp64_values")
    if wide is None:
        wide = op.attrs.add(name="fp64_values", type=pb.AttrType.FLOAT64S)
    elif wide.type != pb.AttrType.FLOAT64S or wide.float64s:
        return
    wide.float64s.extend(narrow.floats)
    del narrow.floats[:]


def _loss_value(exe: Executor, prog: Program, loss: str, feed: dict, params: dict, seed: int) -> float:
    scope = Scope()
    for k, v in params.items():
        scope.set(k, v)
    exe.reseed(seed)        # every evaluation draws the same random numbers (dropout masks, noise)
    (val,) = exe.run(prog, feed=feed, fetch_list=[loss], scope=scope)
    return float(np.sum(val))


def check_options(wrt, eps, rtol, atol, max_elements, directions) -> tuple:
    """The options every gradient check takes, checked (one clear error per mistake)."""
    return (_args.names(wrt, "wrt"), _args.number(eps, "eps", minimum=0, open_min=True),
            _args.number(rtol, "rtol", minimum=0, allow_none=True),
            _args.number(atol, "atol", minimum=0, allow_none=True),
            _args.integer(max_elements, "max_elements", minimum=0), _args.integer(directions, "directions", minimum=1))


def check_gradients(program: Program, loss: str, feed: Mapping[str, Any] | None = None,
                    params: Mapping[str, Any] | None = None, wrt: Sequence[str] | None = None,
                    eps: float = 1e-6, rtol: float | None = None, atol: float | None = None,
                    max_elements: int = 64, directions: int = 4, seed: int = 0,
                    progress: Callable[[int, int, str], None] | None = None) -> list[GradCheckRow]:
    """Check d(loss)/d(var) for each var in `wrt` (default: every parameter with a gradient).

    Tensors with more than `max_elements` elements are checked along
    `directions` random directions instead of element by element.
    `progress(done, total, name)` is called before each var is checked.

    Every run of the program (the analytic gradients, and each evaluation of
    the loss) starts its random draws from `seed`, so a program that draws
    random numbers (unseeded dropout) sees the same mask each time. A name
    given both in `params` and in `feed` is refused: the feed would replace
    the parameter in every run, so perturbing it would change nothing.
    """
    if not isinstance(program, Program):
        raise ArgumentTypeError(f"check_gradients() takes a Program, not {type(program).__name__}")
    if isinstance(loss, Variable):
        loss = loss.name
    if not isinstance(loss, str):
        raise ArgumentTypeError(f"loss must be a var name or a Variable, not {type(loss).__name__}: {loss!r}")
    wrt, eps, rtol, atol, max_elements, directions = check_options(wrt, eps, rtol, atol, max_elements, directions)
    seed = _args.integer(seed, "seed", minimum=0)
    feed = {k: np.asarray(v) for k, v in _args.mapping(feed, "feed").items()}
    params = {k: np.asarray(v) for k, v in _args.mapping(params, "params").items()}
    both = sorted(set(feed) & set(params))
    if both:
        raise ArgumentError(", ".join(f"'{n}'" for n in both) + " given both as a parameter and as a feed: "
                            "the feed would replace the parameter in every run, so finite differences "
                            "would see no change; give each name once (--params or --feed)")
    fwd = to_float64(program)
    bwd = fwd.clone()
    loss_var = bwd.global_block().var(loss)
    pairs = append_backward(loss_var)
    grads = {p.name: g.name for p, g in pairs if g is not None}
    targets = list(wrt) if wrt else list(grads)
    for name in targets:
        if name not in grads:
            grads[name] = _input_grad(bwd, name)
    feed64 = {k: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in feed.items()}
    params64 = {k: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in params.items()}
    exe = Executor(seed=seed)
    scope = Scope()
    for k, v in params64.items():
        scope.set(k, v)
    analytic = exe.run(bwd, feed=feed64, fetch_list=[grads[n] for n in targets], scope=scope)
    rng = np.random.default_rng(seed)
    rows = []
    for i, (name, g) in enumerate(zip(targets, analytic)):
        if progress is not None:
            progress(i, len(targets), name)
        var = program.global_block().var(name)
        rt, at = _tolerances(var, rtol, atol)
        source = params64 if name in params64 else feed64
        if name not in source:
            raise ArgumentError(f"'{name}' is neither a given parameter nor a feed")
        x0 = source[name]
        g = np.asarray(g, dtype=np.float64).reshape(x0.shape)

        def f(x, name=name, source=source):
            vals = dict(source)
            vals[name] = x
            if source is params64:
                return _loss_value(exe, fwd, loss, feed64, vals, seed)
            return _loss_value(exe, fwd, loss, vals, params64, seed)
        if x0.size <= max_elements:
            num = np.zeros_like(x0, dtype=np.float64)
            for i in range(x0.size):
                xp, xm = x0.copy(), x0.copy()
                xp.reshape(-1)[i] += eps
                xm.reshape(-1)[i] -= eps
                num.reshape(-1)[i] = (f(xp) - f(xm)) / (2 * eps)
            err = np.abs(g - num)
            bound = at + rt * np.abs(num)
            rel = err / np.maximum(np.abs(num), 1e-12)
            rows.append(GradCheckRow(name, x0.shape, float(err.max(initial=0)), float(rel.max(initial=0)),
                                     x0.size, "elements", bool(np.all(err <= bound))))
        else:
            errs, rels, ok = [], [], True
            for _ in range(directions):
                v = rng.standard_normal(x0.shape)
                num = (f(x0 + eps * v) - f(x0 - eps * v)) / (2 * eps)
                ana = float(np.sum(g * v))
                e = abs(ana - num)
                errs.append(e)
                rels.append(e / max(abs(num), 1e-12))
                ok &= e <= at * np.sqrt(x0.size) + rt * abs(num)
            rows.append(GradCheckRow(name, x0.shape, max(errs), max(rels), directions, "directions", bool(ok)))
    return rows


def _input_grad(prog: Program, name: str) -> str:
    g = name + "@GRAD"
    if not prog.global_block().has_var(g):
        raise ArgumentError(f"'{name}' gets no gradient from the loss (stop_gradient, or not on its path)")
    return g


def _tolerances(var, rtol, atol) -> tuple[float, float]:
    key = str(var.dtype) if var.dtype is not None else "float64"
    drt, dat = DEFAULT_TOLERANCES.get(key, DEFAULT_TOLERANCES["float64"])
    return (drt if rtol is None else rtol), (dat if atol is None else atol)


__all__ = ["check_gradients", "GradCheckRow", "to_float64", "dtypes"]


def rows_to_table(rows: list[GradCheckRow]) -> str:
    """The rows as an aligned text table; every column as wide as its widest cell (a var's
    name with its control characters escaped: `base.names.printable`)."""
    head = ("var", "shape", "max abs err", "max rel err", "checked", "result")
    cells = [(printable(r.var), str(list(r.shape)), f"{r.max_abs_err:.3e}", f"{r.max_rel_err:.3e}",
              f"{r.checked} {r.mode if r.checked != 1 else r.mode[:-1]}", "ok" if r.ok else "FAIL") for r in rows]
    widths = [max(len(c[i]) for c in [head, *cells]) for i in range(len(head))]
    right = (False, False, True, True, False, False)

    def line(c) -> str:
        return "  ".join(s.rjust(w) if r else s.ljust(w) for s, w, r in zip(c, widths, right)).rstrip()
    return "\n".join(line(c) for c in [head, *cells])


__all__ += ["rows_to_table"]
