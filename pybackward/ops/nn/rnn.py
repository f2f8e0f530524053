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


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1.0)


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


def _run_direction(s: _Spec, xin: np.ndarray, wts, h: np.ndarray, c: np.ndarray | None, reverse: bool):
    """One layer, one direction, forward. Returns (out [T,B,H], h_last, c_last, tape)."""
    w_ih, w_hh, b_ih, b_hh = wts
    H, T = s.H, s.T
    pre = xin @ w_ih.T + b_ih                         # [T, B, G*H]
    if s.mode == "GRU":
        pre[..., :2 * H] += b_hh[:2 * H]
    else:
        pre += b_hh
    out = np.zeros(xin.shape[:2] + (H,), dtype=xin.dtype)
    tape = []
    steps = range(T - 1, -1, -1) if reverse else range(T)
    for t in steps:
        hp, cp = h, c
        if s.mode == "LSTM":
            g = pre[t] + hp @ w_hh.T
            i, f = _sigmoid(g[:, :H]), _sigmoid(g[:, H:2 * H])
            gg, o = np.tanh(g[:, 2 * H:3 * H]), _sigmoid(g[:, 3 * H:])
            cn = f * cp + i * gg
            tc = np.tanh(cn)
            hn = o * tc
            rec = (i, f, gg, o, tc)
        elif s.mode == "GRU":
            rz = _sigmoid(pre[t][:, :2 * H] + hp @ w_hh[:2 * H].T)
            r, z = rz[:, :H], rz[:, H:]
            hc = hp @ w_hh[2 * H:].T + b_hh[2 * H:]
            n = np.tanh(pre[t][:, 2 * H:] + r * hc)
            hn = z * hp + (1 - z) * n
            cn = None
            rec = (r, z, hc, n)
        else:
            hn = _act(s.mode, pre[t] + hp @ w_hh.T)
            cn = None
            rec = (hn,)
        if s.mask is not None:
            m = s.mask[t]
            out[t] = hn * m
            h = hn * m + hp * (1 - m)
            if cn is not None:
                c = cn * m + cp * (1 - m)
        else:
            out[t] = hn
            h, c = hn, cn
        tape.append((t, hp, cp, rec))
    return out, h, c, tape


def _forward(s: _Spec, keep_tape: bool = False):
    """Every layer and direction: (Out, h_last, c_last, tapes, layer inputs)."""
    rows = s.layers * s.dirs
    h_last = np.empty((rows, s.B, s.H), dtype=s.x.dtype)
    c_last = np.empty_like(h_last) if s.mode == "LSTM" else None
    xin = s.x
    tapes, inputs = [], []
    for layer in range(s.layers):
        outs, layer_tapes = [], []
        for d in range(s.dirs):
            k = layer * s.dirs + d
            out, h, c, tape = _run_direction(s, xin, s.w[layer][d], s.h0[k],
                                             None if s.c0 is None else s.c0[k], reverse=d == 1)
            outs.append(out)
            h_last[k] = h
            if c_last is not None:
                c_last[k] = c
            layer_tapes.append(tape if keep_tape else None)
        inputs.append(xin)
        tapes.append(layer_tapes)
        xin = outs[0] if s.dirs == 1 else np.concatenate(outs, axis=-1)
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
def _back_direction(s: _Spec, xin, wts, tape, dout, dh, dc):
    """Backprop one layer-direction. dout [T,B,H]; dh, dc: grads of its last
    state. Returns (dxin, (dW_ih, dW_hh, db_ih, db_hh), dh0, dc0)."""
    w_ih, w_hh, b_ih, b_hh = wts
    H = s.H
    dpre = np.zeros(xin.shape[:2] + (s.gates * H,), dtype=xin.dtype)
    dw_hh = np.zeros_like(w_hh)
    db_hh_c = np.zeros(H, dtype=xin.dtype) if s.mode == "GRU" else None
    for t, hp, cp, rec in reversed(tape):
        if s.mask is not None:
            m = s.mask[t]
            dhn = (dout[t] + dh) * m
            dh_carry = dh * (1 - m)
            dcn = dc * m if dc is not None else None
            dc_carry = dc * (1 - m) if dc is not None else None
        else:
            dhn = dout[t] + dh
            dh_carry = 0.0
            dcn, dc_carry = dc, 0.0
        if s.mode == "LSTM":
            i, f, gg, o, tc = rec
            do = dhn * tc
            dct = dcn + dhn * o * (1 - tc * tc)
            dg = np.concatenate([dct * gg * i * (1 - i), dct * cp * f * (1 - f),
                                 dct * i * (1 - gg * gg), do * o * (1 - o)], axis=1)
            dpre[t] = dg
            dw_hh += dg.T @ hp
            dh = dh_carry + dg @ w_hh
            dc = dc_carry + dct * f
        elif s.mode == "GRU":
            r, z, hc, n = rec
            dn = dhn * (1 - z)
            da = dn * (1 - n * n)
            dhc = da * r
            drz = np.concatenate([da * hc * r * (1 - r), dhn * (hp - n) * z * (1 - z)], axis=1)
            dpre[t, :, :2 * H] = drz
            dpre[t, :, 2 * H:] = da
            dw_hh[:2 * H] += drz.T @ hp
            dw_hh[2 * H:] += dhc.T @ hp
            db_hh_c += dhc.sum(axis=0)
            dh = dh_carry + dhn * z + drz @ w_hh[:2 * H] + dhc @ w_hh[2 * H:]
        else:
            (hn,) = rec
            dg = dhn * ((hn > 0).astype(hn.dtype) if s.mode == "RNN_RELU" else (1 - hn * hn))
            dpre[t] = dg
            dw_hh += dg.T @ hp
            dh = dh_carry + dg @ w_hh
    flat_dpre = dpre.reshape(-1, dpre.shape[-1])
    dw_ih = flat_dpre.T @ xin.reshape(-1, xin.shape[-1])
    db_ih = flat_dpre.sum(axis=0)
    if s.mode == "GRU":
        db_hh = np.concatenate([db_ih[:2 * H], db_hh_c])
    else:
        db_hh = db_ih.copy()
    dxin = dpre @ w_ih
    return dxin, (dw_ih, dw_hh, db_ih, db_hh), dh, dc


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
        xin = inputs[layer]
        dxin = np.zeros_like(xin)
        for d in range(s.dirs):
            k = layer * s.dirs + d
            dcl = dc_last[k] if s.mode == "LSTM" else None
            dx, dws, dh, dc = _back_direction(s, xin, s.w[layer][d], tapes[layer][d],
                                              dout[..., d * s.H:(d + 1) * s.H], dh_last[k], dcl)
            dxin += dx
            dh0[k] = dh
            if dc0 is not None:
                dc0[k] = dc
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
