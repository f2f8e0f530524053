#!/usr/bin/env python
"""paddle.nn.LSTM / GRU / SimpleRNN programs run by a live PaddlePaddle 3.3.1.

Each case directory holds the static program Paddle builds (one `rnn` op,
``forward.pb``), Paddle's backward program (``backward.pb``), and
``ref.npz``: the feeds, the parameters, and the values Paddle's Executor
computed - the outputs and the gradients of a weighted sum of them with
respect to the input, the initial states and every weight. tests/ops/test_nn_rnn.py
checks pybackward's kernels against them.

Run with the Paddle interpreter::

    FLAGS_enable_pir_api=0 /path/to/paddle/venv/bin/python testdata/rnn/gen_rnn.py
"""
from __future__ import annotations

import json
import os
import zlib

import numpy as np
import paddle
from paddle import static
from paddle.base.layer_helper import LayerHelper

HERE = os.path.dirname(os.path.abspath(__file__))
paddle.enable_static()

CASES = {
    # name: (layer class, kwargs, T, B, I, H, lengths or None, initial states?, loss uses states?, time_major)
    "lstm_l1": ("LSTM", {}, 4, 3, 5, 4, None, True, True, True),
    "lstm_l2_bidi_lens": ("LSTM", {"num_layers": 2, "direction": "bidirect"}, 4, 3, 3, 2, [4, 2, 1], True, True, True),
    "lstm_batch_major_no_states": ("LSTM", {}, 3, 2, 3, 2, None, False, False, False),
    "gru_l1": ("GRU", {}, 4, 3, 5, 4, None, True, True, True),
    "gru_l2_bidi_lens": ("GRU", {"num_layers": 2, "direction": "bidirect"}, 4, 3, 3, 2, [3, 4, 1], True, True, True),
    "rnn_tanh_l2_bidi_lens": ("SimpleRNN", {"num_layers": 2, "direction": "bidirect"}, 4, 3, 3, 2, [2, 4, 3],
                              True, True, True),
    "lstm_bidi_lens_no_states": ("LSTM", {"direction": "bidirect"}, 4, 3, 3, 2, [4, 2, 1], False, True, True),
    "gru_bidi_lens_no_states": ("GRU", {"direction": "bidirect", "num_layers": 2}, 4, 3, 3, 2, [1, 4, 3], False, True,
                                True),
    "rnn_relu_l1_lens": ("SimpleRNN", {"activation": "relu"}, 5, 3, 3, 4, [5, 3, 2], True, True, True),
}


def op(type, inputs, attrs=None):
    helper = LayerHelper(type)
    out = helper.create_variable_for_type_inference("float32")
    helper.append_op(type=type, inputs=inputs, outputs={"Out": [out]}, attrs=attrs or {})
    return out


def weighted_sum(v, w):
    return op("reduce_sum", {"X": [op("elementwise_mul", {"X": [v], "Y": [w]})]}, {"reduce_all": True, "dim": []})


def build(name, cls, kw, T, B, I, H, lens, with_states, loss_states, time_major):
    main, start = static.Program(), static.Program()
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    feed = {}
    with static.program_guard(main, start):
        x_shape = [T, B, I] if time_major else [B, T, I]
        x = static.data("x", x_shape, "float32")
        x.stop_gradient = False
        feed["x"] = rng.uniform(-1, 1, x_shape).astype("float32")
        layer = getattr(paddle.nn, cls)(I, H, time_major=time_major, **kw)
        dirs = 2 if kw.get("direction") == "bidirect" else 1
        rows = kw.get("num_layers", 1) * dirs
        init = None
        if with_states:
            names = ["h0", "c0"] if cls == "LSTM" else ["h0"]
            init = []
            for n in names:
                v = static.data(n, [rows, B, H], "float32")
                v.stop_gradient = False
                feed[n] = rng.uniform(-1, 1, [rows, B, H]).astype("float32")
                init.append(v)
            init = tuple(init) if cls == "LSTM" else init[0]
        sl = None
        if lens is not None:
            sl = static.data("sl", [B], "int64")
            feed["sl"] = np.array(lens, dtype="int64")
        y, st = layer(x, initial_states=init, sequence_length=sl)
        outs = [y] + (list(st) if cls == "LSTM" else [st])
        if not loss_states:
            outs = [y]
        terms = []
        for k, v in enumerate(outs):
            w = static.data(f"w{k}", list(v.shape), "float32")
            feed[f"w{k}"] = rng.uniform(-1, 1, [d if d > 0 else 1 for d in v.shape]).astype("float32")
            terms.append(weighted_sum(v, w))
        loss = terms[0]
        for t in terms[1:]:
            loss = op("elementwise_add", {"X": [loss], "Y": [t]})
        forward = main.clone()
        static.append_backward(loss)
    exe = static.Executor(paddle.CPUPlace())
    scope = paddle.static.global_scope()
    exe.run(start)
    params = {}
    for p in layer.parameters():
        val = rng.uniform(-0.7, 0.7, p.shape).astype("float32")
        scope.find_var(p.name).get_tensor().set(val, paddle.CPUPlace())
        params[p.name] = val
    grads = ["x@GRAD"] + [f"{n}@GRAD" for n in ("h0", "c0") if n in feed] + [f"{p}@GRAD" for p in params]
    fetch = [v.name for v in outs] + [loss.name] + grads
    got = exe.run(main, feed=feed, fetch_list=fetch)
    d = os.path.join(HERE, name)
    os.makedirs(d, exist_ok=True)
    for fname, prog in (("forward.pb", forward), ("backward.pb", main)):
        with open(os.path.join(d, fname), "wb") as f:
            f.write(prog.desc.serialize_to_string())
    np.savez(os.path.join(d, "ref.npz"), **{f"feed:{k}": v for k, v in feed.items()},
             **{f"param:{k}": v for k, v in params.items()}, **{f"fetch:{k}": v for k, v in zip(fetch, got)})
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump({"loss": loss.name, "fetch": fetch, "layer": cls, "kwargs": kw}, f, indent=1)


if __name__ == "__main__":
    for name, spec in CASES.items():
        build(name, *spec)
