"""Legacy recurrent ops over LoD sequences: lstm, gru (whole sequences) and
gru_unit (one step), with their grads - Paddle 3.3.1's CPU kernels in NumPy
terms. (The modern time-major `rnn` op is ops/nn/rnn.py.)

lstm and gru read Input `[T, G*D]` (the input projection, already x W_x)
whose LoD level 0 splits it into sequences, and run them all at once in
Paddle's *batch* layout (funcs/sequence2batch): sequences sorted by length,
longest first (ties keep their order); step n takes row n of every sequence
longer than n (from its end when is_reverse), so a step's rows are a prefix
of the previous step's. H0 / C0 `[num_sequences, D]` are in sequence order
and reordered the same way. The intermediate outputs are Paddle's, in that
batch layout (row k of step n at batch_starts[n] + k), with Paddle's LoD
`[batch_starts, batch row -> input row, sorted sequence order]` on BatchGate
(and gru's BatchHidden) - all equal to Paddle's (tests/ops/test_sequence.py):

* lstm: gates per row `[candidate, input, forget, output]` (each D wide);
  Bias `[1, 4D]`, or `[1, 7D]` with the peepholes `W_ic, W_fc, W_oc` when
  use_peepholes:
      g = x + b + h_prev W;  i = act_g(g_i + c_prev W_ic);  f = act_g(g_f + c_prev W_fc)
      c = act_cand(g_c) * i + c_prev * f;  o = act_g(g_o + c W_oc);  h = o * act_cell(c)
  BatchGate holds the activated gates, BatchCellPreAct act_cell(c) (despite
  its name). Hidden and Cell are in sequence order. lstm_grad reads no
  Cell@GRAD: the gradient flows from Hidden only, as in Paddle. H0 needs C0.
* gru: gates `[update u, reset r, candidate c]`; Weight `[D, 3D]` is two
  matrices in one buffer: the first 2D*D values are `W_ur [D, 2D]`, the last
  D*D `W_c [D, D]`:
      g = x + b;  [u, r] = act_g(g_ur + h_prev W_ur);  c = act(g_c + (r * h_prev) W_c)
      h = (1 - u) * h_prev + u * c    (origin_mode: u * h_prev + (1 - u) * c)
  BatchGate holds [u, r, c], BatchResetHiddenPrev r * h_prev, BatchHidden h.
* gru_unit: one such step on a batch (HiddenPrev given); its activations are
  attrs coded 0 identity, 1 sigmoid, 2 tanh, 3 relu, computed plainly (Eigen),
  while lstm / gru use Paddle's clipped sigmoid (input in [-40, 13]) and tanh.

The grads recompute the forward from the inputs and run backpropagation
through time; they do not read the intermediate outputs.

fusion_gru / fusion_lstm (inference-only fc + gru / lstm, no grad) give
Paddle's Hidden (and Cell); fusion_gru also its in-place gate buffers,
fusion_lstm none of its scratch outputs.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import LOD_KEY, Call, Sample, register


# --------------------------------------------------------------------------
# Activations (Paddle's funcs/detail/activation_functions.h); the grads take the output
# --------------------------------------------------------------------------
def _sigmoid_clipped(a):
    return 1.0 / (1.0 + np.exp(-np.clip(a, -40.0, 13.0)))


def _tanh_clipped(a):
    return 2.0 / (1.0 + np.exp(np.minimum(-2.0 * a, 40.0))) - 1.0


_ACTS = {"sigmoid": (_sigmoid_clipped, "sigmoid"), "sigmoid_v2": (lambda a: 1.0 / (1.0 + np.exp(-a)), "sigmoid"),
         "relu": (lambda a: np.maximum(a, 0), "relu"), "tanh": (_tanh_clipped, "tanh"),
         "tanh_v2": (lambda a: 2.0 / (1.0 + np.exp(-2.0 * a)) - 1.0, "tanh"),
         "identity": (lambda a: a, "identity"), "": (lambda a: a, "identity")}
#: gru_unit's int codes, plain Eigen functors
_UNIT_ACTS = {0: (lambda a: a, "identity"), 1: (lambda a: 1.0 / (1.0 + np.exp(-a)), "sigmoid"),
              2: (np.tanh, "tanh"), 3: (lambda a: np.maximum(a, 0), "relu")}


def _act(c: Call, name: str, default, table=_ACTS):
    v = c.attr(name, default)
    if v not in table:
        raise c.unsupported(name, v, f"expected one of {', '.join(repr(k) for k in table)}")
    return table[v]


def _dact(kind: str, y, dy):
    """Gradient through an activation, from its output y (Paddle's backward::*)."""
    if kind == "sigmoid":
        return dy * y * (1.0 - y)
    if kind == "tanh":
        return dy * (1.0 - y * y)
    if kind == "relu":
        return dy * (y > 0)
    return dy


# --------------------------------------------------------------------------
# The batch layout (sequence2batch)
# --------------------------------------------------------------------------
class _Batch:
    """Paddle's reordering of a LoD tensor's sequences into time steps."""

    def __init__(self, c: Call, rows: int, slot: str = "Input"):
        lod = c.lod(slot)
        if not lod:
            raise ExecutionError(f"op {c.op_type}: {slot} has no LoD (docs/lod.md)")
        if len(lod) != 1:
            raise ExecutionError(f"op {c.op_type}: only one LoD level is supported, {slot} has {len(lod)}")
        off = np.asarray(lod[0], dtype=np.int64)
        if off[-1] != rows:
            raise ExecutionError(f"op {c.op_type}: the LoD of {slot} ends at {off[-1]}, it has {rows} rows")
        lens = np.diff(off)
        if lens.size == 0 or lens.max(initial=0) == 0:
            raise ExecutionError(f"op {c.op_type}: Input holds no sequence steps")
        self.order = np.argsort(-lens, kind="stable")       # sorted sequence -> original sequence
        slens = lens[self.order]
        self.steps = int(slens[0])
        counts = (slens[None, :] > np.arange(self.steps)[:, None]).sum(axis=1)  # sequences per step
        self.starts = np.concatenate([[0], np.cumsum(counts)])
        idx = []
        reverse = bool(c.attr("is_reverse", False))
        for n in range(self.steps):
            k = counts[n]
            s, ln = off[self.order[:k]], slens[:k]
            idx.append(s + ln - 1 - n if reverse else s + n)
        self.index = np.concatenate(idx)                     # batch row -> input row
        self.n_seq = len(lens)

    def lod(self) -> list[list[int]]:
        return [self.starts.tolist(), self.index.tolist(), self.order.tolist()]

    def rows(self, n: int) -> slice:
        return slice(int(self.starts[n]), int(self.starts[n + 1]))


def _init_state(c: Call, slot: str, b: _Batch, d: int, dtype) -> np.ndarray | None:
    v = c.x(slot)
    if v is None:
        return None
    v = np.asarray(v)
    if v.shape != (b.n_seq, d):
        raise ExecutionError(f"op {c.op_type}: {slot} must be [{b.n_seq}, {d}], it is {list(v.shape)}")
    return v[b.order].astype(dtype, copy=False)


def _float_input(c: Call) -> np.ndarray:
    x = np.asarray(c.x("Input"))
    if x.ndim != 2 or x.dtype.kind != "f":
        raise ExecutionError(f"op {c.op_type}: Input must be a 2-D float tensor, it is {x.dtype} {list(x.shape)}")
    return x


def _gated_input(c: Call, fused: tuple[np.ndarray, np.ndarray] | None, gates: int):
    """(X, hidden weight, hidden size) of an lstm (4 gates) or gru (3 gates), checked;
    `fused`: a fusion op's projected X and WeightH instead of the op's Input and Weight."""
    x = _float_input(c) if fused is None else fused[0]
    if x.shape[1] % gates:
        raise ExecutionError(f"op {c.op_type}: the input width {x.shape[1]} is not {gates} * hidden size")
    d = x.shape[1] // gates
    w = np.asarray(c.x("Weight")) if fused is None else fused[1]
    if w.shape != (d, gates * d):
        raise ExecutionError(f"op {c.op_type}: the hidden weight must be [{d}, {gates * d}], it is "
                             f"{list(w.shape)}")
    return x, w, d


# --------------------------------------------------------------------------
# lstm
# --------------------------------------------------------------------------
class _Lstm:
    """Decoded inputs and the forward pass in batch layout; `fused`: fusion_lstm's
    projected X (bias included) and WeightH."""

    def __init__(self, c: Call, fused: tuple[np.ndarray, np.ndarray] | None = None):
        x, self.w, d = _gated_input(c, fused, 4)
        self.x, self.d = x, d
        bias = np.asarray(c.x("Bias")).reshape(-1)
        self.peep = bool(c.attr("use_peepholes", True))
        if bias.size != (7 if self.peep else 4) * d:
            raise ExecutionError(f"op lstm: Bias must be [1, {(7 if self.peep else 4) * d}] "
                                 f"(use_peepholes={self.peep}), it has {bias.size} values")
        self.bias = bias if fused is None else np.zeros_like(bias)   # fused: already in x
        self.checks = bias[4 * d:].reshape(3, d) if self.peep else np.zeros((3, d), x.dtype)
        self.acts = [_act(c, "gate_activation", "sigmoid"), _act(c, "cell_activation", "tanh"),
                     _act(c, "candidate_activation", "tanh")]
        self.b = _Batch(c, x.shape[0], "Input" if fused is None else "X")
        self.h0 = _init_state(c, "H0", self.b, d, x.dtype)
        self.c0 = _init_state(c, "C0", self.b, d, x.dtype)
        if self.h0 is not None and self.c0 is None:
            raise ExecutionError(f"op {c.op_type}: H0 is given without C0 (Paddle requires both or C0 alone)")

    def prev(self, n: int, arr: np.ndarray, init: np.ndarray | None, k: int) -> np.ndarray:
        if n == 0:
            return init if init is not None else np.zeros((k, self.d), self.x.dtype)
        return arr[self.b.rows(n - 1)][:k]

    def forward(self):
        d, b = self.d, self.b
        (gate, _), (cell_act, _), (cand, _) = self.acts
        ci, cf, co = self.checks
        gates = self.x[b.index] + self.bias[: 4 * d]
        hs = np.empty((len(b.index), d), self.x.dtype)
        cs, tcs = np.empty_like(hs), np.empty_like(hs)
        for n in range(b.steps):
            r = b.rows(n)
            k = r.stop - r.start
            h_prev, c_prev = self.prev(n, hs, self.h0, k), self.prev(n, cs, self.c0, k)
            g = gates[r]
            if n > 0 or self.h0 is not None:
                g = g + h_prev @ self.w
            gc = cand(g[:, :d])
            gi = gate(g[:, d:2 * d] + c_prev * ci)
            gf = gate(g[:, 2 * d:3 * d] + c_prev * cf)
            cell = gc * gi + c_prev * gf
            go = gate(g[:, 3 * d:] + cell * co)
            tcs[r] = cell_act(cell)
            cs[r], hs[r] = cell, go * tcs[r]
            gates[r] = np.concatenate([gc, gi, gf, go], axis=1)
        return gates, hs, cs, tcs


def _lstm(c: Call):
    m = _Lstm(c)
    gates, hs, cs, tcs = m.forward()
    hidden, cell = np.empty_like(hs), np.empty_like(cs)
    hidden[m.b.index], cell[m.b.index] = hs, cs
    lod = c.lod("Input")
    return {"Hidden": hidden, "Cell": cell, "BatchGate": gates, "BatchCellPreAct": tcs,
            LOD_KEY: {"Hidden": lod, "Cell": lod, "BatchGate": m.b.lod()}}


def _lstm_grad(c: Call):
    m = _Lstm(c)
    d, b = m.d, m.b
    (_, gk), (_, ck), (_, dk) = m.acts
    ci, cf, co = m.checks
    gates, hs, cs, tcs = m.forward()
    dh_all = np.asarray(c.x("Hidden@GRAD"))[b.index].astype(hs.dtype, copy=True)
    dgates = np.zeros_like(gates)
    dc_next = np.zeros_like(cs)
    dw = np.zeros_like(m.w)
    dchecks = np.zeros((3, d), hs.dtype)
    dh0 = dc0 = None
    for n in range(b.steps - 1, -1, -1):
        r = b.rows(n)
        k = r.stop - r.start
        gc, gi, gf, go = (gates[r][:, j * d:(j + 1) * d] for j in range(4))
        c_prev, h_prev = m.prev(n, cs, m.c0, k), m.prev(n, hs, m.h0, k)
        dh = dh_all[r]
        do = _dact(gk, go, dh * tcs[r])
        dcell = dc_next[r] + _dact(ck, tcs[r], dh * go) + do * co
        dgc = _dact(dk, gc, dcell * gi)
        di = _dact(gk, gi, dcell * gc)
        df = _dact(gk, gf, dcell * c_prev)
        dc_prev = dcell * gf + di * ci + df * cf
        dg = np.concatenate([dgc, di, df, do], axis=1)
        dgates[r] = dg
        dchecks += np.stack([(di * c_prev).sum(0), (df * c_prev).sum(0), (do * cs[r]).sum(0)])
        if n > 0:
            pr = b.rows(n - 1)
            dh_all[pr.start: pr.start + k] += dg @ m.w.T
            dc_next[pr.start: pr.start + k] = dc_prev
            dw += h_prev.T @ dg
        else:
            if m.h0 is not None:
                dw += h_prev.T @ dg
                dh0 = dg @ m.w.T
            dc0 = dc_prev
    res = {}
    if c.wants("Input@GRAD"):
        dx = np.empty_like(dgates)
        dx[b.index] = dgates
        res["Input@GRAD"] = dx
    if c.wants("Weight@GRAD"):
        res["Weight@GRAD"] = dw
    if c.wants("Bias@GRAD"):
        db = dgates.sum(0)
        if m.peep:
            db = np.concatenate([db, dchecks.reshape(-1)])
        res["Bias@GRAD"] = db.reshape(1, -1)
    for slot, v in (("H0@GRAD", dh0), ("C0@GRAD", dc0)):
        if c.wants(slot) and v is not None:
            out = np.empty_like(v)
            out[b.order] = v
            res[slot] = out
    return res


def _lstm_samples(rng):
    def s(lod, d=2, peep=True, h0=True, c0=True, note="", **attrs):
        t, n = lod[-1], len(lod) - 1
        ins = {"Input": [rng.uniform(-1, 1, (t, 4 * d))], "Weight": [rng.uniform(-0.8, 0.8, (d, 4 * d))],
               "Bias": [rng.uniform(-0.5, 0.5, (1, (7 if peep else 4) * d))]}
        if h0:
            ins["H0"] = [rng.uniform(-1, 1, (n, d))]
        if c0:
            ins["C0"] = [rng.uniform(-1, 1, (n, d))]
        a = {"use_peepholes": peep, "is_reverse": False, "is_test": False, "gate_activation": "sigmoid",
             "cell_activation": "tanh", "candidate_activation": "tanh"}
        a.update(attrs)
        return Sample(ins, a, lod={"Input": [lod]}, note=note)
    return [s([0, 2, 5, 6], note="peepholes, h0, c0"),
            s([0, 3, 4], peep=False, h0=False, c0=False, note="no peepholes, zero state"),
            s([0, 1, 4, 6], is_reverse=True, note="reverse"),
            s([0, 3, 6, 8], d=3, h0=False, c0=True, note="equal lengths, c0 only"),
            s([0, 2, 5], gate_activation="sigmoid", cell_activation="relu", candidate_activation="identity",
              note="relu / identity")]


register(paddle_opdef("lstm", _lstm, {"lstm_grad": _lstm_grad}, samples=_lstm_samples,
                      attrs_handled=("use_peepholes", "is_reverse", "is_test", "gate_activation",
                                     "cell_activation", "candidate_activation"),
                      doc="LSTM over the sequences of a LoD Input (projected input), Paddle's batch layout"))


# --------------------------------------------------------------------------
# gru and gru_unit: one step on rows, shared
# --------------------------------------------------------------------------
def _split_weight(w: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Weight [D, 3D] as Paddle reads its buffer: W_ur [D, 2D] then W_c [D, D]."""
    flat = w.reshape(-1)
    return flat[: 2 * d * d].reshape(d, 2 * d), flat[2 * d * d:].reshape(d, d)


def _gru_step(g, h_prev, w_ur, w_c, gate, act, origin, has_prev=True):
    """One GRU step on rows: (activated [u, r, c], r * h_prev, h)."""
    d = w_c.shape[0]
    ur = g[:, : 2 * d] + h_prev @ w_ur if has_prev else g[:, : 2 * d]
    u, r = gate(ur[:, :d]), gate(ur[:, d:])
    rh = r * h_prev
    cand = act(g[:, 2 * d:] + rh @ w_c if has_prev else g[:, 2 * d:])
    h = u * h_prev + (1 - u) * cand if origin else h_prev - u * h_prev + u * cand
    return np.concatenate([u, r, cand], axis=1), rh, h


def _gru_step_grad(gates, h_prev, dh, w_ur, w_c, gk, ak, origin):
    """(d gate pre-activations [u, r, c], dh_prev, dW_ur, dW_c) of one step."""
    d = w_c.shape[0]
    u, r, cand = gates[:, :d], gates[:, d:2 * d], gates[:, 2 * d:]
    if origin:
        du, dcand, dh_prev = dh * (h_prev - cand), dh * (1 - u), dh * u
    else:
        du, dcand, dh_prev = dh * (cand - h_prev), dh * u, dh * (1 - u)
    dc = _dact(ak, cand, dcand)
    drh = dc @ w_c.T
    dw_c = (r * h_prev).T @ dc
    dr = _dact(gk, r, drh * h_prev)
    dh_prev = dh_prev + drh * r
    dur = np.concatenate([_dact(gk, u, du), dr], axis=1)
    dh_prev = dh_prev + dur @ w_ur.T
    return np.concatenate([dur, dc], axis=1), dh_prev, h_prev.T @ dur, dw_c


def _weight_grad(dw_ur: np.ndarray, dw_c: np.ndarray, shape) -> np.ndarray:
    return np.concatenate([dw_ur.reshape(-1), dw_c.reshape(-1)]).reshape(shape)


class _Gru:
    """gru's inputs and forward; `fused`: fusion_gru's projected X (xx) and
    WeightH, with no bias (it is in xx) and no origin_mode (its kernel ignores it)."""

    def __init__(self, c: Call, fused: tuple[np.ndarray, np.ndarray] | None = None):
        x, self.w, d = _gated_input(c, fused, 3)
        self.x, self.d = x, d
        self.w_ur, self.w_c = _split_weight(self.w, d)
        bias = c.x("Bias") if fused is None else None
        self.bias = None if bias is None else np.asarray(bias).reshape(1, -1)
        if self.bias is not None and self.bias.shape[1] != 3 * d:
            raise ExecutionError(f"op gru: Bias must be [1, {3 * d}], it is {list(np.shape(bias))}")
        self.gate, self.act = _act(c, "gate_activation", "sigmoid"), _act(c, "activation", "tanh")
        self.origin = bool(c.attr("origin_mode", False)) if fused is None else False
        self.b = _Batch(c, x.shape[0], "Input" if fused is None else "X")
        self.h0 = _init_state(c, "H0", self.b, d, x.dtype)

    def prev(self, n: int, hs: np.ndarray, k: int) -> np.ndarray:
        if n == 0:
            return self.h0 if self.h0 is not None else np.zeros((k, self.d), self.x.dtype)
        return hs[self.b.rows(n - 1)][:k]

    def forward(self):
        b = self.b
        gates = self.x[b.index] + (self.bias if self.bias is not None else 0)
        rhs, hs = np.empty((len(b.index), self.d), self.x.dtype), np.empty((len(b.index), self.d), self.x.dtype)
        for n in range(b.steps):
            r = b.rows(n)
            h_prev = self.prev(n, hs, r.stop - r.start)
            gates[r], rhs[r], hs[r] = _gru_step(gates[r], h_prev, self.w_ur, self.w_c, self.gate[0], self.act[0],
                                                self.origin, n > 0 or self.h0 is not None)
        return gates, rhs, hs


def _gru(c: Call):
    m = _Gru(c)
    gates, rhs, hs = m.forward()
    hidden = np.empty_like(hs)
    hidden[m.b.index] = hs
    return {"Hidden": hidden, "BatchGate": gates, "BatchResetHiddenPrev": rhs, "BatchHidden": hs,
            LOD_KEY: {"Hidden": c.lod("Input"), "BatchGate": m.b.lod(), "BatchHidden": m.b.lod()}}


def _gru_grad(c: Call):
    m = _Gru(c)
    b = m.b
    gates, _, hs = m.forward()
    dh_all = np.asarray(c.x("Hidden@GRAD"))[b.index].astype(hs.dtype, copy=True)
    dgates = np.zeros_like(gates)
    dw_ur, dw_c = np.zeros_like(m.w_ur), np.zeros_like(m.w_c)
    dh0 = None
    for n in range(b.steps - 1, -1, -1):
        r = b.rows(n)
        k = r.stop - r.start
        h_prev = m.prev(n, hs, k)
        dg, dh_prev, gur, gc = _gru_step_grad(gates[r], h_prev, dh_all[r], m.w_ur, m.w_c, m.gate[1], m.act[1],
                                              m.origin)
        dgates[r] = dg
        if n > 0 or m.h0 is not None:
            dw_ur += gur
            dw_c += gc
        if n > 0:
            pr = b.rows(n - 1)
            dh_all[pr.start: pr.start + k] += dh_prev
        elif m.h0 is not None:
            dh0 = dh_prev
    res = {}
    if c.wants("Input@GRAD"):
        dx = np.empty_like(dgates)
        dx[b.index] = dgates
        res["Input@GRAD"] = dx
    if c.wants("Weight@GRAD"):
        res["Weight@GRAD"] = _weight_grad(dw_ur, dw_c, m.w.shape)
    if c.wants("Bias@GRAD") and m.bias is not None:
        res["Bias@GRAD"] = dgates.sum(0).reshape(1, -1)
    if c.wants("H0@GRAD") and dh0 is not None:
        out = np.empty_like(dh0)
        out[b.order] = dh0
        res["H0@GRAD"] = out
    return res


def _gru_samples(rng):
    def s(lod, d=2, h0=True, bias=True, note="", **attrs):
        t, n = lod[-1], len(lod) - 1
        ins = {"Input": [rng.uniform(-1, 1, (t, 3 * d))], "Weight": [rng.uniform(-0.8, 0.8, (d, 3 * d))]}
        if h0:
            ins["H0"] = [rng.uniform(-1, 1, (n, d))]
        if bias:
            ins["Bias"] = [rng.uniform(-0.5, 0.5, (1, 3 * d))]
        a = {"activation": "tanh", "gate_activation": "sigmoid", "is_reverse": False, "origin_mode": False,
             "is_test": False}
        a.update(attrs)
        return Sample(ins, a, lod={"Input": [lod]}, note=note)
    return [s([0, 2, 5, 6], note="h0, bias"),
            s([0, 3, 4], h0=False, bias=False, note="zero h0, no bias"),
            s([0, 1, 4, 6], is_reverse=True, origin_mode=True, note="reverse, origin_mode"),
            s([0, 2, 4], d=3, activation="relu", gate_activation="sigmoid", note="relu, equal lengths")]


register(paddle_opdef("gru", _gru, {"gru_grad": _gru_grad}, samples=_gru_samples,
                      attrs_handled=("activation", "gate_activation", "is_reverse", "origin_mode", "is_test"),
                      doc="GRU over the sequences of a LoD Input (projected input), Paddle's batch layout"))


# --------------------------------------------------------------------------
# gru_unit
# --------------------------------------------------------------------------
def _unit_inputs(c: Call):
    x = np.asarray(c.x("Input"))
    h = np.asarray(c.x("HiddenPrev"))
    w = np.asarray(c.x("Weight"))
    d = h.shape[-1]
    if x.ndim != 2 or x.shape[1] != 3 * d or w.shape != (d, 3 * d) or h.shape != (x.shape[0], d):
        raise ExecutionError(f"op gru_unit: Input [B, 3D], HiddenPrev [B, D], Weight [D, 3D] expected, got "
                             f"{list(x.shape)}, {list(h.shape)}, {list(w.shape)}")
    g = x + (np.asarray(c.x("Bias")).reshape(1, -1) if c.has("Bias") else 0)
    w_ur, w_c = _split_weight(w, d)
    return g, h, w, w_ur, w_c, _act(c, "gate_activation", 1, _UNIT_ACTS), _act(c, "activation", 2, _UNIT_ACTS)


def _gru_unit(c: Call):
    g, h, _, w_ur, w_c, gate, act = _unit_inputs(c)
    gates, rh, out = _gru_step(g, h, w_ur, w_c, gate[0], act[0], bool(c.attr("origin_mode", False)))
    return {"Gate": gates, "ResetHiddenPrev": rh, "Hidden": out}


def _gru_unit_grad(c: Call):
    g, h, w, w_ur, w_c, gate, act = _unit_inputs(c)
    origin = bool(c.attr("origin_mode", False))
    gates, _, _ = _gru_step(g, h, w_ur, w_c, gate[0], act[0], origin)
    dg, dh, gur, gc = _gru_step_grad(gates, h, np.asarray(c.x("Hidden@GRAD")), w_ur, w_c, gate[1], act[1], origin)
    res = {"Input@GRAD": dg, "HiddenPrev@GRAD": dh, "Weight@GRAD": _weight_grad(gur, gc, w.shape)}
    if c.has("Bias"):
        res["Bias@GRAD"] = dg.sum(0).reshape(1, -1)
    return {k: v for k, v in res.items() if c.wants(k)}


def _gru_unit_samples(rng):
    def s(b=3, d=2, bias=True, note="", **attrs):
        ins = {"Input": [rng.uniform(-1, 1, (b, 3 * d))], "HiddenPrev": [rng.uniform(-1, 1, (b, d))],
               "Weight": [rng.uniform(-0.8, 0.8, (d, 3 * d))]}
        if bias:
            ins["Bias"] = [rng.uniform(-0.5, 0.5, (1, 3 * d))]
        a = {"activation": 2, "gate_activation": 1, "origin_mode": False}
        a.update(attrs)
        return Sample(ins, a, note=note)
    return [s(note="tanh / sigmoid"), s(bias=False, origin_mode=True, note="origin_mode, no bias"),
            s(b=2, d=3, activation=0, gate_activation=1, note="identity"),
            s(activation=3, gate_activation=2, note="relu / tanh gates")]


register(paddle_opdef("gru_unit", _gru_unit, {"gru_unit_grad": _gru_unit_grad}, samples=_gru_unit_samples,
                      attrs_handled=("activation", "gate_activation", "origin_mode"),
                      doc="one GRU step: Gate [u, r, c], ResetHiddenPrev r * h_prev, Hidden"))


# --------------------------------------------------------------------------
# fusion_gru (inference only): fc then gru, Paddle's fused CPU kernel
# --------------------------------------------------------------------------
def _fusion_gru(c: Call):
    x = np.asarray(c.x("X"))
    if x.ndim == 3 and x.shape[1] == 1:
        x = x.reshape(x.shape[0], x.shape[2])
    if x.ndim != 2 or x.dtype.kind != "f":
        raise ExecutionError(f"op fusion_gru: X must be a 2-D float tensor, it is {x.dtype} {list(x.shape)}")
    wx, wh = np.asarray(c.x("WeightX")), np.asarray(c.x("WeightH"))
    if wx.ndim != 2 or wx.shape[0] != x.shape[1]:
        raise ExecutionError(f"op fusion_gru: WeightX must be [{x.shape[1]}, 3D], it is {list(wx.shape)}")
    xx = x @ wx
    if c.has("Bias"):
        xx = xx + np.asarray(c.x("Bias")).reshape(1, -1)
    m = _Gru(c, fused=(xx, wh))
    gates, _, hs = m.forward()
    if m.h0 is None:   # Paddle's first step without H0 (jit GRUH1) leaves the reset gate unactivated
        first = m.b.rows(0)
        gates[first, m.d: 2 * m.d] = xx[m.b.index[first], m.d: 2 * m.d]
    hidden, seq_gates = np.empty_like(hs), np.empty_like(gates)
    hidden[m.b.index], seq_gates[m.b.index] = hs, gates
    # Paddle computes the gates in place: in XX (sequence order) on its sequence path, in
    # BatchedInput (batch order) on its batch path, where XX is the fc output (or X reordered)
    lods = {"Hidden": c.lod("X"), "XX": c.lod("X")}
    res = {"Hidden": hidden, "XX": seq_gates, LOD_KEY: lods}
    if not c.attr("use_seq", True) and m.b.n_seq > 1:
        res["BatchedInput"], res["BatchedOut"] = gates, hs
        lods["BatchedInput"] = lods["BatchedOut"] = m.b.lod()
        if x.shape[1] > xx.shape[1]:
            res["XX"] = xx
        else:
            res["XX"], lods["XX"] = x[m.b.index], m.b.lod()
        if m.h0 is not None:
            res["ReorderedH0"] = m.h0
    return res


def _fusion_gru_samples(rng):
    def s(lod, m=4, d=2, h0=True, bias=True, note="", **attrs):
        t, n = lod[-1], len(lod) - 1
        ins = {"X": [rng.uniform(-1, 1, (t, m))], "WeightX": [rng.uniform(-0.8, 0.8, (m, 3 * d))],
               "WeightH": [rng.uniform(-0.8, 0.8, (d, 3 * d))]}
        if h0:
            ins["H0"] = [rng.uniform(-1, 1, (n, d))]
        if bias:
            ins["Bias"] = [rng.uniform(-0.5, 0.5, (1, 3 * d))]
        a = {"activation": "tanh", "gate_activation": "sigmoid", "is_reverse": False, "use_seq": True,
             "origin_mode": False}
        a.update(attrs)
        return Sample(ins, a, lod={"X": [lod]}, outputs={"Hidden": 1, "XX": 1, "ReorderedH0": 1,
                                                         "BatchedInput": 1, "BatchedOut": 1}, note=note)
    return [s([0, 2, 5, 6], note="use_seq, h0"),
            s([0, 3, 4], h0=False, is_reverse=True, note="use_seq, reverse, zero h0"),
            s([0, 2, 5, 6], use_seq=False, note="batch path, h0"),
            s([0, 1, 4], m=8, d=2, h0=False, bias=False, use_seq=False, is_reverse=True,
              note="batch path, M > 3D, reverse")]


register(paddle_opdef("fusion_gru", _fusion_gru, samples=_fusion_gru_samples,
                      attrs_handled=("activation", "gate_activation", "is_reverse", "use_seq"),
                      doc="inference-only fused fc + gru over LoD X (origin_mode ignored, as Paddle's kernel)"))


# --------------------------------------------------------------------------
# fusion_lstm (inference only): fc then lstm, Paddle's fused CPU kernel. Hidden and
# Cell only: its scratch buffers (XX, Batched*, Reordered*, CheckedCell) are not written
# --------------------------------------------------------------------------
def _fusion_lstm(c: Call):
    x = np.asarray(c.x("X"))
    if x.ndim != 2 or x.dtype.kind != "f":
        raise ExecutionError(f"op fusion_lstm: X must be a 2-D float tensor, it is {x.dtype} {list(x.shape)}")
    wx, wh = np.asarray(c.x("WeightX")), np.asarray(c.x("WeightH"))
    if wx.ndim != 2 or wx.shape[0] != x.shape[1]:
        raise ExecutionError(f"op fusion_lstm: WeightX must be [{x.shape[1]}, 4D], it is {list(wx.shape)}")
    xx = x @ wx + np.asarray(c.x("Bias")).reshape(-1)[: wx.shape[1]]
    if c.has("H0") and not c.has("C0"):
        raise ExecutionError("op fusion_lstm: H0 is given without C0")
    m = _Lstm(c, fused=(xx, wh))
    _, hs, cs, _ = m.forward()
    hidden, cell = np.empty_like(hs), np.empty_like(cs)
    hidden[m.b.index], cell[m.b.index] = hs, cs
    lod = c.lod("X")
    return {"Hidden": hidden, "Cell": cell, LOD_KEY: {"Hidden": lod, "Cell": lod}}


def _fusion_lstm_samples(rng):
    def s(lod, m=3, d=2, peep=False, h0=True, note="", **attrs):
        t, n = lod[-1], len(lod) - 1
        ins = {"X": [rng.uniform(-1, 1, (t, m))], "WeightX": [rng.uniform(-0.8, 0.8, (m, 4 * d))],
               "WeightH": [rng.uniform(-0.8, 0.8, (d, 4 * d))],
               "Bias": [rng.uniform(-0.5, 0.5, (1, (7 if peep else 4) * d))]}
        if h0:
            ins["H0"] = [rng.uniform(-1, 1, (n, d))]
            ins["C0"] = [rng.uniform(-1, 1, (n, d))]
        a = {"use_peepholes": peep, "is_reverse": False, "use_seq": True, "gate_activation": "sigmoid",
             "cell_activation": "tanh", "candidate_activation": "tanh"}
        a.update(attrs)
        return Sample(ins, a, lod={"X": [lod]}, outputs={"Hidden": 1, "Cell": 1, "XX": 1, "BatchedInput": 1,
                                                         "BatchedHidden": 1, "BatchedCell": 1,
                                                         "ReorderedH0": 1, "ReorderedC0": 1, "CheckedCell": 1},
                      note=note)
    return [s([0, 2, 5, 6], note="use_seq, h0, c0"),
            s([0, 3, 4], h0=False, is_reverse=True, note="use_seq, reverse, zero state"),
            s([0, 2, 5, 6], use_seq=False, note="batch path"),
            s([0, 1, 4], m=9, h0=False, use_seq=False, is_reverse=True, note="batch path, M > 4D, reverse"),
            s([0, 2, 5, 6], peep=True, note="peepholes"),
            s([0, 3, 4], peep=True, h0=False, use_seq=False, note="peepholes, batch path, zero state")]


register(paddle_opdef("fusion_lstm", _fusion_lstm, samples=_fusion_lstm_samples,
                      attrs_handled=("use_peepholes", "is_reverse", "use_seq", "gate_activation",
                                     "cell_activation", "candidate_activation"),
                      doc="inference-only fused fc + lstm over LoD X"))
