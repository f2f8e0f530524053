"""Run one registered op on arrays, and check its gradient by finite differences.

This exercises an op's three declarations together - forward kernel, grad
maker and grad kernel - without building a program, so every op with
`samples` is checked the moment it is registered (tests/ops/test_registry.py
walks the whole registry with it).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..base import attrs as _attrs
from . import lod as _lod
from .._proto import framework_pb2 as pb
from ..base.errors import UnknownOpError
from . import registry
from .registry import EMPTY_VAR_NAME, GRAD_SUFFIX, LOD_KEY, Call, FwdOp, GradOp, OpDef, Sample


def encode_attrs(attrs: dict[str, Any]) -> list[pb.OpDesc.Attr]:
    out = []
    for k, v in attrs.items():
        a = pb.OpDesc.Attr()
        _attrs.encode(a, k, v)
        out.append(a)
    return out


def grad_op_attrs(g: GradOp) -> dict[str, Any]:
    """The decoded attrs a grad op will carry: its base attrs plus overrides."""
    d = {a.name: _attrs.decode(a) for a in g.base_attrs}
    for k, v in g.attrs.items():
        d[k] = v[0] if isinstance(v, tuple) else v
    return d


def run_kernel(op_type: str, ins: dict[str, list[np.ndarray]], attrs: dict[str, Any],
               outs: dict[str, list[str]], rng: np.random.Generator | None = None,
               lods: dict[str, list] | None = None, out_lods: dict | None = None) -> dict[str, list[np.ndarray]]:
    """Call an op's kernel; results as {slot: [arrays]} aligned with `outs`.
    `lods`: the inputs' LoDs (slot -> [lod or None per var]); the LoDs the
    kernel gives its outputs (slot -> lod) go into `out_lods` if given."""
    opdef = registry.get(op_type)
    if opdef.kernel is None:
        raise UnknownOpError(f"op type '{op_type}' has no kernel")
    res = opdef.kernel(Call(op_type, ins, attrs, outs, rng or np.random.default_rng(0), lods=lods or None))
    if out_lods is not None:
        out_lods.update(res.get(LOD_KEY) or {})
    return {k: (list(v) if isinstance(v, (list, tuple)) else [v]) for k, v in res.items() if k != LOD_KEY}


def slot_lods(lod: Any) -> list:
    """A Sample.lod entry as one LoD per var: a LoD (`[[0, 2, 5]]`) is the
    slot's first var's; a list of LoDs (`[[[0, 2]], [[0, 1, 2]]]`) one per var."""
    if not lod:
        return []
    return list(lod) if isinstance(lod[0], (list, tuple)) and lod[0] and isinstance(lod[0][0], (list, tuple)) \
        else [lod]


def sample_lods(sample_lod: dict | None, ins_names: dict[str, list[str]]) -> dict[str, Any]:
    """A Sample's `lod` as var name -> LoD."""
    return {n: lod for s, v in (sample_lod or {}).items() for n, lod in zip(ins_names.get(s, ()), slot_lods(v))
            if lod}


def _slot_lods(ins_names: dict[str, list[str]], name_lods: dict[str, Any]) -> dict | None:
    return _lod.input_lods(tuple(ins_names.items()), name_lods) if name_lods else None


def _output_lods(opdef_type: str, ins_names: dict[str, list[str]], outs_names: dict[str, list[str]],
                 res: dict, given: dict, name_lods: dict[str, Any]) -> None:
    """The LoDs the interpreter would give an op's outputs (lod.set_output_lods)."""
    share = _lod.share_pairs(registry.get(opdef_type).sets_lod_level, ins_names, outs_names)
    _lod.set_output_lods(outs_names, share, {**res, LOD_KEY: given}, name_lods)


def _names(slot: str, n: int) -> list[str]:
    return [f"{slot.lower()}{i}" for i in range(n)]


@dataclasses.dataclass
class PhaseSample(Sample):
    """A Sample whose output slots in `phase_invariant` hold eigenvectors as
    columns (`[..., n, k]`), each defined only up to a unit complex factor
    (eig). Their gradient formulas are the gradient of losses that do not
    depend on that factor, so check_op_grad makes each such output's random
    cotangent C phase-invariant first: C - i V diag(Im(V^H C) / |v_j|^2),
    after which Re<C, V> does not change to first order when a column turns
    its phase; and the finite differences turn each perturbed column to
    the phase of the unperturbed one (`align_phases`), so a kernel that picks
    phases discontinuously (LAPACK's sign of a real largest component) is
    differentiated along a smooth choice."""

    phase_invariant: tuple[str, ...] = ()


def align_phases(v: np.ndarray, v0: np.ndarray) -> np.ndarray:
    """The columns of `v` each turned by the unit factor that makes v0_j^H v_j real
    and positive (finite differences of eigenvectors through a kernel that may
    flip a column's sign or phase between two close inputs; see PhaseSample)."""
    p = np.sum(np.conj(v0) * v, axis=-2)
    return v * (np.conj(p) / np.maximum(np.abs(p), 1e-300))[..., None, :]


def phase_invariant_cotangent(cot: np.ndarray, v: np.ndarray) -> np.ndarray:
    """`cot` with the part that turns the columns of `v` by a phase removed (see PhaseSample)."""
    im = np.imag(np.sum(np.conj(v) * cot, axis=-2)) / np.sum(np.abs(v) ** 2, axis=-2)
    return cot - 1j * v * im[..., None, :]


@dataclasses.dataclass
class OpGradResult:
    var: str
    max_abs: float
    max_rel: float
    ok: bool


def check_op_grad(opdef: OpDef, sample: Sample, eps: float = 1e-6, rtol: float = 1e-5,
                  atol: float = 1e-7, seed: int = 0) -> list[OpGradResult]:
    """Analytic grads (via the op's grad maker and grad kernels) vs central
    differences of f(x) = sum over outputs of <v, out(x)>, in float64
    (complex outputs and inputs: see `complex_cotangent`)."""
    rng = np.random.default_rng(seed)
    ins_names = {s: _names(s, len(a)) for s, a in sample.inputs.items()}
    values = {n: np.asarray(a) for s, arrs in sample.inputs.items() for n, a in zip(ins_names[s], arrs)}
    out_counts = sample.outputs or {s: 1 for s in opdef.outputs}
    outs_names = {s: _names(s, k) for s, k in out_counts.items()}
    name_lods = sample_lods(sample.lod, ins_names)
    in_lods = _slot_lods(ins_names, name_lods)

    phase_slots = getattr(sample, "phase_invariant", ())
    base: dict[str, list[np.ndarray]] = {}

    def forward(vals: dict[str, np.ndarray], out_lods: dict | None = None) -> dict[str, list[np.ndarray]]:
        ins = {s: [vals[n] for n in names] for s, names in ins_names.items()}
        res = run_kernel(opdef.type, ins, dict(sample.attrs), outs_names, np.random.default_rng(seed),
                         in_lods, out_lods)
        for s in phase_slots:   # perturbed eigenvectors turned to the phase of the unperturbed ones
            if s in base:
                res[s] = [align_phases(v, v0) for v, v0 in zip(res[s], base[s])]
        return res

    given: dict = {}
    fwd_out = forward(values, given)
    base.update({s: fwd_out[s] for s in phase_slots if s in fwd_out})
    _output_lods(opdef.type, ins_names, outs_names, fwd_out, given, name_lods)
    # Outputs whose gradient no grad op reads (lstm's Cell, match_matrix_tensor's
    # Tmp) are not differentiated, in Paddle as here: they get no cotangent.
    read = {a for g in opdef.make_grad(FwdOp(opdef.type, ins_names, outs_names, encode_attrs(sample.attrs),
                                             frozenset())) for a in g.input_args()}
    diff_out_slots = [s for s in outs_names if s not in opdef.intermediate_outputs
                      and any(n + GRAD_SUFFIX in read for n in outs_names[s])]
    cot: dict[str, np.ndarray] = {}
    for s in diff_out_slots:
        for n, arr in zip(outs_names[s], fwd_out.get(s, [])):
            if np.issubdtype(arr.dtype, np.floating):
                cot[n] = rng.standard_normal(arr.shape)
            elif np.issubdtype(arr.dtype, np.complexfloating):
                cot[n] = complex_cotangent(rng, arr.shape)
                if s in phase_slots:
                    cot[n] = phase_invariant_cotangent(cot[n], arr)

    scope = _backward(opdef, values, ins_names, outs_names, fwd_out, cot, sample.attrs, lods=name_lods)
    wrt = sample.wrt if sample.wrt is not None else tuple(
        s for s in (opdef.differentiable_inputs or tuple(ins_names)) if s in ins_names)
    results = []
    for s in wrt:
        for n in ins_names[s]:
            x = values[n]
            if np.issubdtype(x.dtype, np.complexfloating):
                results.append(_check_complex_input(
                    lambda vals: _objective(forward(vals), outs_names, cot), values, n,
                    scope.get(n + GRAD_SUFFIX), f"{s}:{n}", eps, rtol, atol))
                continue
            if not np.issubdtype(x.dtype, np.floating):
                continue
            analytic = scope.get(n + GRAD_SUFFIX)
            # a real input of a complex computation: its gradient is the real part
            # (d/d Re); the imaginary part is the derivative along Im, which it has not
            analytic = np.zeros(x.shape) if analytic is None else \
                np.asarray(np.real(analytic), dtype=np.float64).reshape(x.shape)
            dirs = _directions(x, s in sample.symmetric, f"{s}:{n}")
            numeric = np.zeros(len(dirs))
            projected = np.zeros(len(dirs))
            for k, idx in enumerate(dirs):
                plus, minus = dict(values), dict(values)  # the LoDs stay
                xp, xm = x.copy(), x.copy()
                xp.reshape(-1)[idx] += eps
                xm.reshape(-1)[idx] -= eps
                plus[n], minus[n] = xp, xm
                numeric[k] = (_objective(forward(plus), outs_names, cot)
                              - _objective(forward(minus), outs_names, cot)) / (2 * eps)
                projected[k] = analytic.reshape(-1)[idx].sum()
            err = np.abs(projected - numeric)
            rel = err / np.maximum(np.abs(numeric), 1e-12)
            ok = bool(np.all(err <= atol + rtol * np.abs(numeric)))
            results.append(OpGradResult(f"{s}:{n}", float(err.max(initial=0.0)),
                                        float(rel.max(initial=0.0)), ok))
    return results


def _directions(x: np.ndarray, symmetric: bool, what: str) -> list[np.ndarray]:
    """The perturbation directions of one input, as flat index arrays (the
    direction is the sum of the unit vectors they name): every element; or,
    for a symmetric slot, per matrix of the batch E_ii and E_ij + E_ji (i < j).
    The directional derivative along a direction is then compared with the
    analytic gradient projected on it: G_ii, and G_ij + G_ji - so an op that
    reads one triangle passes with the gradient Paddle gives it (symmetric),
    or any other whose symmetric part is right."""
    if not symmetric:
        return [np.array([i]) for i in range(x.size)]
    if x.ndim < 2 or x.shape[-1] != x.shape[-2] or not np.array_equal(x, np.swapaxes(x, -1, -2)):
        raise ValueError(f"{what}: a symmetric sample input must be a (batch of) symmetric matrices")
    idx = np.arange(x.size).reshape(x.shape)
    iu, ju = np.triu_indices(x.shape[-1])
    return [np.unique([m[i, j], m[j, i]]) for m in idx.reshape((-1,) + x.shape[-2:])
            for i, j in zip(iu, ju)]


def _backward(opdef: OpDef, values: dict[str, np.ndarray], ins_names: dict[str, list[str]],
              outs_names: dict[str, list[str]], fwd_out: dict[str, list[np.ndarray]],
              cot: dict[str, np.ndarray], attrs: dict[str, Any],
              zero_missing: bool = False, lods: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
    """Run the op's grad ops with `cot` as the output gradients; the scope
    after (inputs, outputs, and `name@GRAD` for every gradient made).
    `zero_missing`: an output gradient a grad op reads but `cot` lacks is
    zeros, as Paddle's backward fills it. `lods`: var name -> LoD of the
    inputs and outputs (the gradients get their vars' LoDs)."""
    lods = dict(lods or {})
    scope: dict[str, np.ndarray] = dict(values)
    for s, names in outs_names.items():
        for n, arr in zip(names, fwd_out.get(s, [])):
            scope[n] = arr
    for n, v in cot.items():
        scope[n + GRAD_SUFFIX] = v
    for n in list(lods):
        lods[n + GRAD_SUFFIX] = lods[n]
    if zero_missing:
        for names in outs_names.values():
            for n in names:
                if n in scope and n + GRAD_SUFFIX not in scope:
                    scope[n + GRAD_SUFFIX] = np.zeros_like(scope[n])
    fwd = FwdOp(opdef.type, ins_names, outs_names, encode_attrs(attrs), frozenset())
    written: set[str] = set()  # grads of inputs written by an earlier grad op: accumulate
    for g in opdef.make_grad(fwd):
        g_ins = {s: [_lookup(scope, a) for a in args] for s, args in g.inputs.items()}
        res = run_kernel(g.type, g_ins, grad_op_attrs(g), g.outputs, lods=_slot_lods(g.inputs, lods))
        for s, args in g.outputs.items():
            for a, arr in zip(args, res.get(s, [])):
                if a == EMPTY_VAR_NAME:
                    continue
                scope[a] = scope[a] + arr if a in written else arr
                written.add(a)
    return scope


def run_with_grads(op_type: str, inputs: dict[str, list[np.ndarray]], attrs: dict[str, Any],
                   out_counts: dict[str, int], cots: dict[str, list[np.ndarray | None]],
                   seed: int = 0, lod: dict | None = None, out_lods: dict | None = None
                   ) -> tuple[dict[str, list[np.ndarray]], dict[str, list[np.ndarray | None]]]:
    """Forward outputs, and the gradients of sum over outputs of <cot, out>
    with respect to every input (None where the op makes none) - what
    Paddle's `gradients()` of that sum gives, for comparing kernels. `lod`:
    as Sample.lod; the outputs' LoDs (slot -> [lod or None]) go into `out_lods`."""
    opdef = registry.get(op_type)
    ins_names = {s: _names(s, len(a)) for s, a in inputs.items()}
    values = {n: np.asarray(a) for s, arrs in inputs.items() for n, a in zip(ins_names[s], arrs)}
    outs_names = {s: _names(s, k) for s, k in out_counts.items()}
    name_lods = sample_lods(lod, ins_names)
    given: dict = {}
    fwd_out = run_kernel(op_type, {s: [values[n] for n in ns] for s, ns in ins_names.items()},
                         dict(attrs), outs_names, np.random.default_rng(seed), _slot_lods(ins_names, name_lods),
                         given)
    _output_lods(op_type, ins_names, outs_names, fwd_out, given, name_lods)
    if out_lods is not None:
        out_lods.update({s: [name_lods.get(n) for n in names] for s, names in outs_names.items()})
    cot = {n: c for s, names in outs_names.items() for n, c in zip(names, cots.get(s, []))
           if c is not None}
    scope = _backward(opdef, values, ins_names, outs_names, fwd_out, cot, attrs, zero_missing=True,
                      lods=name_lods) if opdef.grad is not None else {}
    grads = {s: [scope.get(n + GRAD_SUFFIX) for n in names] for s, names in ins_names.items()}
    return fwd_out, grads


def _lookup(scope: dict, name: str) -> np.ndarray:
    if name in scope:
        return scope[name]
    raise KeyError(f"grad op input '{name}' was not computed")


def _objective(out: dict[str, list[np.ndarray]], outs_names: dict[str, list[str]],
               cot: dict[str, np.ndarray]) -> float:
    total = 0.0
    for s, names in outs_names.items():
        for n, arr in zip(names, out.get(s, [])):
            if n in cot:
                # Re(conj(cot) * out): for a real output, <cot, out>
                total += float(np.sum(np.real(np.conj(cot[n]) * arr)))
    return total


# --------------------------------------------------------------------------
# Complex values
# --------------------------------------------------------------------------
# Paddle's gradient of a real loss L with respect to a complex z is
# dL/dRe(z) + i dL/dIm(z) (checked on a live Paddle 3.3.1, dygraph and a
# static fft_c2c program). So a complex output's cotangent c stands for the
# loss Re(conj(c) * out) = Re(c) Re(out) + Im(c) Im(out), whose gradient
# w.r.t. out is c itself - what Out@GRAD holds - and a complex input's
# finite differences perturb its real and imaginary parts separately.
def complex_cotangent(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """A random complex128 cotangent (real part drawn first, then imaginary)."""
    re = rng.standard_normal(shape)
    return re + 1j * rng.standard_normal(shape)


def _check_complex_input(objective: Any, values: dict[str, np.ndarray], name: str,
                         analytic: Any, label: str, eps: float, rtol: float,
                         atol: float) -> OpGradResult:
    """Central differences of the real objective along Re and Im of every
    element of complex input `name`, as dL/dRe + i dL/dIm, vs `analytic`."""
    x = values[name]
    numeric = np.zeros(x.shape, np.complex128)
    flat = numeric.reshape(-1)
    for i in range(x.size):
        for step in (eps, 1j * eps):
            plus, minus = dict(values), dict(values)
            xp, xm = x.copy(), x.copy()
            xp.reshape(-1)[i] += step
            xm.reshape(-1)[i] -= step
            plus[name], minus[name] = xp, xm
            d = (objective(plus) - objective(minus)) / (2 * eps)
            flat[i] += d if step == eps else 1j * d
    if analytic is None:
        analytic = np.zeros_like(numeric)
    analytic = np.asarray(analytic, dtype=np.complex128).reshape(x.shape)
    err = np.abs(analytic - numeric)
    rel = err / np.maximum(np.abs(numeric), 1e-12)
    ok = bool(np.all(err <= atol + rtol * np.abs(numeric)))
    return OpGradResult(label, float(err.max(initial=0.0)), float(rel.max(initial=0.0)), ok)
