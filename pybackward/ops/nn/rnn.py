"""Recurrent ops: `rnn` (what paddle.nn.SimpleRNN / LSTM / GRU build in
static mode) and its grad, full backpropagation through time, vectorised over
the batch (the loop over time steps is inherently sequential).

Paddle 3.3.1's CPU rnn kernel (checked against its values by
testdata/rnn/gen_rnn.py), in NumPy terms:

* Input is time-major `[T, B, I]`; PreState is `[h0]` (`[h0, c0]` for LSTM),
  each `[L*D, B, H]` (L layers, D = 2 when is_bidirec), row `l*D + d`.
* WeightList holds, for each layer and direction (layer 0 forward, layer 0
  backward, layer 1 forward, ...), `W_ih [G*H, I_l]` and `W_hh [G*H, H]`;
  then, in the same order, `b_ih [G*H]` and `b_hh [G*H]`. I_l is I for layer
  0 and D*H above it; G is 4 (LSTM), 3 (GRU) or 1 (RNN_TANH / RNN_RELU).
* Gate order: LSTM i, f, g (candidate), o:
  `c' = f*c + i*tanh(g)`, `h' = o*tanh(c')`;
  GRU r, z, c with the reset gate applied to the hidden part *after* its
  bias: `n = tanh(x W_ic + b_ic + r*(h W_hc + b_hc))`, `h' = z*h + (1-z)*n`;
  RNN: `h' = act(x W_ih + b_ih + h W_hh + b_hh)`.
* The backward direction runs the same cell from t = T-1 down to 0; a
  layer's output is `[out_fwd, out_bwd]` along the last axis, and the next
  layer reads it.
* SequenceLength `[B]`: at steps t >= len[b] the output is 0 and the state
  (h, and c for LSTM) is carried unchanged, so State holds the state at each
  sequence's last valid step (the backward direction starts there from h0).
* Out `[T, B, D*H]`; State `[h_last]` (`[h_last, c_last]` for LSTM), each
  like PreState. When not is_test, DropoutState is a uint8 ones mask of Out's
  shape and Reserve a `[rows, D*T*B*H]` buffer of Paddle's shape (its
  contents are internal to Paddle's kernels; rnn_grad here recomputes what it
  needs from the inputs and ignores it).

dropout_prob > 0 (dropout between layers while training) is not supported:
Paddle draws its mask from a generator pybackward cannot reproduce.

One known disagreement, on purpose: Paddle 3.3.1's rnn_grad takes the
previous step's *output* as the previous hidden state, which is zero at a
padded step while the forward carried the state on. In the backward
direction a padded sequence's first valid step follows padded steps, so
Paddle's W_hh (and GRU update-gate) gradients there act as if h0 were zero.
The gradient here is the true one (finite differences agree); the two match
whenever PreState h is zero - paddle.nn's default - or nothing is padded
(tests/ops/test_nn_rnn.py, KNOWN_PADDLE_WRONG).
"""
from __future__ import annotations

import weakref

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _sigmoid(x: np.ndarray, half=0.5, one=1.0) -> np.ndarray:
    """0.5 * (tanh(0.5 * x) + 1), on a temporary (half / one: the scalars as
    x's dtype, which NumPy takes faster than Python floats; the same values)."""
    t = np.multiply(x, half)
    np.tanh(t, out=t)
    t += one
    t *= half
    return t


class _Spec:
    """The decoded attrs and inputs of one rnn / rnn_grad call."""

    def __init__(self, c: Call):
        mode = c.attr("mode", "RNN_TANH")
        if mode not in _GATES:
            raise c.unsupported("mode", mode, f"expected one of {', '.join(_GATES)}")
        self.mode = mode
        self.gates = _GATES[mode]
        self.layers = int(c.attr("num_layers", 1))
        self.dirs = 2 if c.attr("is_bidirec", False) else 1
        p = float(c.attr("dropout_prob", 0.0))
        if p != 0.0 and not c.attr("is_test", False):
            raise c.unsupported("dropout_prob", p, "dropout between layers while training draws a random "
                                                   "mask pybackward cannot reproduce (use 0 or is_test)")
        self.is_test = bool(c.attr("is_test", False))
        x = np.asarray(c.x("Input"))
        if x.ndim != 3:
            raise ExecutionError(f"Input must be [time, batch, input_size], it has shape {list(x.shape)}")
        if x.dtype.kind != "f":
            raise ExecutionError(f"Paddle 3.3.1 has no {x.dtype} kernel for rnn (float32 / float64 only)")
        self.x = x
        self.T, self.B = x.shape[0], x.shape[1]
        states = [np.asarray(s) for s in c.xs("PreState")]
        n_states = 2 if mode == "LSTM" else 1
        if len(states) != n_states:
            raise ExecutionError(f"mode {mode} needs {n_states} PreState tensors, got {len(states)}")
        rows = self.layers * self.dirs
        for s in states:
            if s.ndim != 3 or s.shape[0] != rows or s.shape[1] != self.B:
                raise ExecutionError(f"PreState must be [num_layers * directions = {rows}, batch = {self.B}, "
                                     f"hidden], it has shape {list(s.shape)}")
        self.h0 = states[0]
        self.c0 = states[1] if mode == "LSTM" else None
        self.H = self.h0.shape[2]
        weights = [np.asarray(w) for w in c.xs("WeightList")]
        n_w = 4 * rows
        if len(weights) != n_w:
            raise ExecutionError(f"WeightList must hold {n_w} tensors (4 per layer and direction), "
                                 f"it holds {len(weights)}")
        gh = self.gates * self.H
        self.w: list[list[tuple[np.ndarray, ...]]] = []   # [layer][dir] = (w_ih, w_hh, b_ih, b_hh)
        for layer in range(self.layers):
            in_size = x.shape[2] if layer == 0 else self.dirs * self.H
            per_dir = []
            for d in range(self.dirs):
                k = layer * self.dirs + d
                w_ih, w_hh = weights[2 * k], weights[2 * k + 1]
                b_ih, b_hh = weights[n_w // 2 + 2 * k], weights[n_w // 2 + 2 * k + 1]
                for name, a, shape in (("W_ih", w_ih, (gh, in_size)), ("W_hh", w_hh, (gh, self.H)),
                                       ("b_ih", b_ih, (gh,)), ("b_hh", b_hh, (gh,))):
                    if a.shape != shape:
                        raise ExecutionError(f"WeightList: {name} of layer {layer} direction {d} has shape "
                                             f"{list(a.shape)}, expected {list(shape)}")
                per_dir.append((w_ih, w_hh, b_ih, b_hh))
            self.w.append(per_dir)
        sl = c.x("SequenceLength")
        self.mask = None
        if sl is not None:
            lens = np.asarray(sl).reshape(-1).astype(np.int64)
            if lens.size != self.B:
                raise ExecutionError(f"SequenceLength holds {lens.size} lengths for a batch of {self.B}")
            self.mask = (np.arange(self.T)[:, None] < lens[None, :]).astype(x.dtype)[:, :, None]  # [T, B, 1]


def _act(mode: str, a: np.ndarray) -> np.ndarray:
    return np.maximum(a, 0) if mode == "RNN_RELU" else np.tanh(a)


def _stacked(s: _Spec, layer: int):
    """A layer's weights with the directions stacked on a leading axis:
    W_hh [D, G*H, H], b_hh [D, G*H] (the input side is projected per direction)."""
    ws = s.w[layer]
    return np.stack([w[1] for w in ws]), np.stack([w[3] for w in ws])


def _masks(s: _Spec):
    """(mask, 1 - mask) per step and direction, [T, D, B, H] (direction d's
    step k is time k, or T-1-k backwards), or (None, None). Full-shape, so
    each step's products need no broadcasting (a broadcast multiply of these
    tiny arrays costs several times a plain one)."""
    if s.mask is None:
        return None, None
    m = s.mask[:, None]                                   # [T, 1, B, 1]
    if s.dirs == 2:
        m = np.concatenate([m, m[::-1]], axis=1)
    m = np.ascontiguousarray(np.broadcast_to(m, (s.T, s.dirs, s.B, s.H)))
    return m, 1 - m


def _run_layer(s: _Spec, layer: int, xin: np.ndarray, h: np.ndarray, c: np.ndarray | None):
    """One layer, every direction at once, forward: direction d runs its step
    k at time k (forward) or T-1-k (backward), the directions stacked on an
    axis, so each time step is one set of NumPy calls for all of them (the
    same arithmetic, element by element, as one direction at a time).
    h, c: [D, B, H]. Returns (layer output [T, B, D*H], h_last, c_last, tape)."""
    H, T, D = s.H, s.T, s.dirs
    w_hh, b_hh = _stacked(s, layer)
    pre = np.empty((T, D) + xin.shape[1:2] + (s.gates * H,), dtype=xin.dtype)   # step-major
    for d, (w_ih, _, b_ih, b_hh_d) in enumerate(s.w[layer]):
        p = xin @ w_ih.T + b_ih                         # [T, B, G*H]
        if s.mode == "GRU":
            p[..., :2 * H] += b_hh_d[:2 * H]
        else:
            p += b_hh_d
        pre[:, d] = p if d == 0 else p[::-1]
    masks, keeps = _masks(s)
    out = np.zeros((T, D) + xin.shape[1:2] + (H,), dtype=xin.dtype)
    one, half = xin.dtype.type(1), xin.dtype.type(0.5)
    tape = []
    if s.mode == "GRU":
        w_rz_t, w_c_t = w_hh[:, :2 * H].transpose(0, 2, 1), w_hh[:, 2 * H:].transpose(0, 2, 1)
        b_c = b_hh[:, None, 2 * H:]
    else:
        w_t = w_hh.transpose(0, 2, 1)
    for k in range(T):
        hp, cp = h, c
        pk = pre[k]
        if s.mode == "LSTM":
            g = pk + hp @ w_t
            sg = _sigmoid(g, half, one)
            i, f, o = sg[..., :H], sg[..., H:2 * H], sg[..., 3 * H:]
            gg = np.tanh(g[..., 2 * H:3 * H])
            cn = f * cp + i * gg
            tc = np.tanh(cn)
            hn = o * tc
            rec = (i, f, gg, o, tc)
        elif s.mode == "GRU":
            rz = _sigmoid(pk[..., :2 * H] + hp @ w_rz_t, half, one)
            r, z = rz[..., :H], rz[..., H:]
            hc = hp @ w_c_t + b_c
            n = np.tanh(pk[..., 2 * H:] + r * hc)
            hn = z * hp + (one - z) * n
            cn = None
            rec = (r, z, hc, n)
        else:
            hn = _act(s.mode, pk + hp @ w_t)
            cn = None
            rec = (hn,)
        if masks is not None:
            m, keep = masks[k], keeps[k]
            hm = np.multiply(hn, m, out=out[k])
            h = hm + hp * keep
            if cn is not None:
                c = cn * m + cp * keep
        else:
            out[k] = hn
            h, c = hn, cn
        tape.append((k, hp, cp, rec))
    y = out[:, 0] if D == 1 else np.concatenate([out[:, 0], out[::-1, 1]], axis=-1)
    return np.ascontiguousarray(y), h, c, tape


def _forward(s: _Spec, keep_tape: bool = False):
    """Every layer and direction: (Out, h_last, c_last, tapes, layer inputs)."""
    rows = s.layers * s.dirs
    h_last = np.empty((rows, s.B, s.H), dtype=s.x.dtype)
    c_last = np.empty_like(h_last) if s.mode == "LSTM" else None
    xin = s.x
    tapes, inputs = [], []
    for layer in range(s.layers):
        k0 = layer * s.dirs
        y, h, c, tape = _run_layer(s, layer, xin, s.h0[k0:k0 + s.dirs],
                                   None if s.c0 is None else s.c0[k0:k0 + s.dirs])
        h_last[k0:k0 + s.dirs] = h
        if c_last is not None:
            c_last[k0:k0 + s.dirs] = c
        inputs.append(xin)
        tapes.append(tape if keep_tape else None)
        xin = y
    return xin, h_last, c_last, tapes, inputs


def _reserve_rows(s: _Spec) -> int:
    extra = {"LSTM": 2, "GRU": 1}.get(s.mode, 0)
    return (s.gates + extra) * s.layers + s.layers - 1


#: id(Out array) -> (the inputs the forward ran on, its other results with
#: the tape): rnn_grad given that very Out and the very same inputs skips
#: running the forward again. An entry goes when its Out array does (the
#: entry holds no reference to it).
_TAPES: dict[int, tuple[tuple, tuple]] = {}


def _inputs_of(c: Call) -> tuple:
    return (c.x("Input"), *c.xs("PreState"), *c.xs("WeightList"), c.x("SequenceLength"))


def _same_inputs(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def _rnn(c: Call):
    s = _Spec(c)
    fwd = _forward(s, keep_tape=not s.is_test)
    out, h_last, c_last, _, _ = fwd
    res = {"Out": out, "State": [h_last] + ([c_last] if c_last is not None else [])}
    if not s.is_test:
        res["DropoutState"] = np.ones(out.shape, dtype=np.uint8)
        res["Reserve"] = np.zeros((_reserve_rows(s), s.dirs * s.T * s.B * s.H), dtype=s.x.dtype)
        _TAPES[id(out)] = (_inputs_of(c), fwd[1:])
        weakref.finalize(out, _TAPES.pop, id(out), None)
    return res


# --------------------------------------------------------------------------
# rnn_grad: backpropagation through time
# --------------------------------------------------------------------------
def _back_layer(s: _Spec, layer: int, xin, tape, dout, dh, dc):
    """Backprop one layer, its directions stacked as in _run_layer. dout
    [T, B, D*H]; dh, dc: grads of its last states [D, B, H]. Returns (dxin,
    [(dW_ih, dW_hh, db_ih, db_hh) per direction], dh0, dc0)."""
    H, T, D = s.H, s.T, s.dirs
    w_hh, _ = _stacked(s, layer)
    douts = np.empty((T, D) + dout.shape[1:2] + (H,), dtype=dout.dtype)     # step-major
    douts[:, 0] = dout[..., :H]
    if D == 2:
        douts[:, 1] = dout[::-1, :, H:2 * H]
    masks, keeps = _masks(s)
    dpre = np.zeros((T, D) + xin.shape[1:2] + (s.gates * H,), dtype=xin.dtype)
    dw_hh = np.zeros_like(w_hh)
    db_hh_c = np.zeros((D, H), dtype=xin.dtype) if s.mode == "GRU" else None
    w_rz, w_c = w_hh[:, :2 * H], w_hh[:, 2 * H:]
    one = xin.dtype.type(1)
    for k, hp, cp, rec in reversed(tape):
        if masks is not None:
            m, keep = masks[k], keeps[k]
            dhn = douts[k] + dh
            dhn *= m
            dh_carry = dh * keep
            dcn = dc * m if dc is not None else None
            dc_carry = dc * keep if dc is not None else None
        else:
            dhn = douts[k] + dh
            dh_carry = 0.0
            dcn, dc_carry = dc, 0.0
        if s.mode == "LSTM":
            i, f, gg, o, tc = rec
            do = dhn * tc
            dct = dcn + dhn * o * (one - tc * tc)
            dg = dpre[k]
            np.multiply(dct * gg * i, one - i, out=dg[..., :H])
            np.multiply(dct * cp * f, one - f, out=dg[..., H:2 * H])
            np.multiply(dct * i, one - gg * gg, out=dg[..., 2 * H:3 * H])
            np.multiply(do * o, one - o, out=dg[..., 3 * H:])
            dw_hh += dg.transpose(0, 2, 1) @ hp
            dh = dh_carry + dg @ w_hh
            dc = dc_carry + dct * f
        elif s.mode == "GRU":
            r, z, hc, n = rec
            dn = dhn * (one - z)
            da = np.multiply(dn, one - n * n, out=dpre[k, ..., 2 * H:])
            dhc = da * r
            drz = dpre[k, ..., :2 * H]
            np.multiply(da * hc * r, one - r, out=drz[..., :H])
            np.multiply(dhn * (hp - n) * z, one - z, out=drz[..., H:])
            dw_hh[:, :2 * H] += drz.transpose(0, 2, 1) @ hp
            dw_hh[:, 2 * H:] += dhc.transpose(0, 2, 1) @ hp
            db_hh_c += dhc.sum(axis=1)
            dh = dh_carry + dhn * z + drz @ w_rz + dhc @ w_c
        else:
            (hn,) = rec
            dg = np.multiply(dhn, (hn > 0).astype(hn.dtype) if s.mode == "RNN_RELU" else (one - hn * hn),
                             out=dpre[k])
            dw_hh += dg.transpose(0, 2, 1) @ hp
            dh = dh_carry + dg @ w_hh
    dxin = np.zeros_like(xin)
    grads = []
    for d, (w_ih, _, _, _) in enumerate(s.w[layer]):
        dp = np.ascontiguousarray(dpre[:, d] if d == 0 else dpre[::-1, d])      # [T, B, G*H], time order
        flat_dpre = dp.reshape(-1, dp.shape[-1])
        dw_ih = flat_dpre.T @ xin.reshape(-1, xin.shape[-1])
        db_ih = flat_dpre.sum(axis=0)
        if s.mode == "GRU":
            db_hh = np.concatenate([db_ih[:2 * H], db_hh_c[d]])
        else:
            db_hh = db_ih.copy()
        dxin += dp @ w_ih
        grads.append((dw_ih, dw_hh[d], db_ih, db_hh))
    return dxin, grads, dh, dc


def _rnn_grad(c: Call):
    s = _Spec(c)
    out = c.x("Out") if c.has("Out") else None
    kept = _TAPES.get(id(out)) if out is not None else None
    if kept is not None and _same_inputs(kept[0], _inputs_of(c)):
        _, _, tapes, inputs = kept[1]             # the forward op's own run, on these very inputs
    else:
        out, _, _, tapes, inputs = _forward(s, keep_tape=True)
    dt = s.x.dtype
    g_out = c.x("Out@GRAD")
    dout = np.zeros_like(out) if g_out is None else np.asarray(g_out, dtype=dt).reshape(out.shape)
    g_states = c.xs("State@GRAD")
    dh_last = g_states[0] if len(g_states) > 0 else None
    dc_last = g_states[1] if len(g_states) > 1 else None
    rows = s.layers * s.dirs
    dh_last = np.zeros((rows, s.B, s.H), dt) if dh_last is None else np.asarray(dh_last, dt)
    if s.mode == "LSTM":
        dc_last = np.zeros((rows, s.B, s.H), dt) if dc_last is None else np.asarray(dc_last, dt)
    dh0 = np.zeros_like(dh_last)
    dc0 = np.zeros_like(dh_last) if s.mode == "LSTM" else None
    n_w = 4 * rows
    dweights: list = [None] * n_w
    for layer in range(s.layers - 1, -1, -1):
        k0 = layer * s.dirs
        dxin, grads, dh, dc = _back_layer(s, layer, inputs[layer], tapes[layer], dout,
                                          dh_last[k0:k0 + s.dirs],
                                          dc_last[k0:k0 + s.dirs] if s.mode == "LSTM" else None)
        dh0[k0:k0 + s.dirs] = dh
        if dc0 is not None:
            dc0[k0:k0 + s.dirs] = dc
        for d, dws in enumerate(grads):
            k = k0 + d
            dweights[2 * k], dweights[2 * k + 1] = dws[0], dws[1]
            dweights[n_w // 2 + 2 * k], dweights[n_w // 2 + 2 * k + 1] = dws[2], dws[3]
        dout = dxin
    res = {}
    if c.wants("Input@GRAD"):
        res["Input@GRAD"] = dout
    names = c.outs.get("PreState@GRAD", ())
    if names:
        res["PreState@GRAD"] = [dh0, dc0][:len(names)]
    if c.outs.get("WeightList@GRAD"):
        res["WeightList@GRAD"] = dweights
    return res


# --------------------------------------------------------------------------
# Samples: small, every mode, layers, directions, sequence lengths
# --------------------------------------------------------------------------
def _rnn_sample(rng, mode, T=3, B=2, I=3, H=2, layers=1, bidirec=False, lens=None, zero_h0=False, **attrs):
    dirs = 2 if bidirec else 1
    g = _GATES[mode]
    r = lambda *shape: rng.uniform(-0.8, 0.8, shape)  # noqa: E731
    ws, bs = [], []
    for layer in range(layers):
        in_size = I if layer == 0 else dirs * H
        for _ in range(dirs):
            ws += [r(g * H, in_size), r(g * H, H)]
            bs += [r(g * H), r(g * H)]
    states = [r(layers * dirs, B, H) for _ in range(2 if mode == "LSTM" else 1)]
    if zero_h0:
        states[0] = np.zeros_like(states[0])
    ins = {"Input": [r(T, B, I)], "PreState": states, "WeightList": ws + bs}
    if lens is not None:
        ins["SequenceLength"] = [np.array(lens, dtype=np.int32)]
    a = {"mode": mode, "num_layers": layers, "is_bidirec": bidirec, "hidden_size": H, "input_size": I,
         "dropout_prob": 0.0, "is_test": False}
    a.update(attrs)
    n_states = 2 if mode == "LSTM" else 1
    note = f"{mode} L{layers}{' bidi' if bidirec else ''}{' lens' if lens is not None else ''}" \
        f"{' h0=0' if zero_h0 else ''}"
    return Sample(ins, a, outputs={"Out": 1, "State": n_states, "DropoutState": 1, "Reserve": 1},
                  wrt=("Input", "PreState", "WeightList"), note=note)


def _rnn_samples(rng):
    out = []
    for mode in ("LSTM", "GRU", "RNN_TANH", "RNN_RELU"):
        out.append(_rnn_sample(rng, mode))
        out.append(_rnn_sample(rng, mode, layers=2, bidirec=True, lens=[3, 2]))
    out.append(_rnn_sample(rng, "LSTM", T=4, B=3, lens=[2, 4, 1]))
    out.append(_rnn_sample(rng, "GRU", T=4, B=3, layers=2, lens=[4, 1, 3]))
    out.append(_rnn_sample(rng, "GRU", bidirec=True))
    out.append(_rnn_sample(rng, "LSTM", layers=3, H=3))
    # Padded sequences in the backward direction with h0 = 0 (paddle.nn's
    # default): where Paddle's own rnn_grad is right (see the module doc).
    for mode in ("LSTM", "GRU", "RNN_TANH"):
        out.append(_rnn_sample(rng, mode, T=4, B=3, layers=2, bidirec=True, lens=[4, 1, 2], zero_h0=True))
    return out


register(paddle_opdef("rnn", _rnn, {"rnn_grad": _rnn_grad}, samples=_rnn_samples,
                      attrs_handled=("mode", "num_layers", "is_bidirec", "dropout_prob", "is_test",
                                     "hidden_size", "input_size"),
                      doc="multi-layer (bidirectional) LSTM / GRU / RNN_TANH / RNN_RELU over time-major "
                          "Input, with SequenceLength masking; grad: backpropagation through time"))
