#!/usr/bin/env python
"""A LoD sequence model built and run by a live PaddlePaddle 3.3.1.

x (LoD level 1) -> fc -> lstm (peepholes) -> sequence_pool MAX
                -> fc -> gru (reverse)    -> sequence_softmax of a projection
                                             -> sequence_pool SUM
                -> sequence_conv (trainable padding) -> sequence_pool AVERAGE
loss = weighted sum of the pooled rows. ``forward.pb`` is the program without
its backward (pybackward appends it), ``ref.npz`` the feeds (x with its LoD as
``x@LOD0``, the form `pybackward run --feeds` reads), the parameters, and what
Paddle's Executor fetched: the loss, Hidden of lstm and gru, and the gradients
of x and of every parameter (their LoDs in ``case.json``). tests/ops/test_sequence.py checks the
interpreter against them.

    FLAGS_enable_pir_api=0 /path/to/paddle/venv/bin/python testdata/sequence/gen_sequence.py
"""
from __future__ import annotations

import json
import os

os.environ["FLAGS_enable_pir_api"] = "0"

import numpy as np  # noqa: E402
import paddle  # noqa: E402
from paddle import static  # noqa: E402
from paddle.base.layer_helper import LayerHelper  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
LOD = [[0, 3, 4, 8]]
I, D = 5, 3


def op(type, inputs, attrs=None):
    helper = LayerHelper(type)
    out = helper.create_variable_for_type_inference("float32")
    helper.append_op(type=type, inputs=inputs, outputs={"Out": [out]}, attrs=attrs or {})
    return out


def main() -> None:
    paddle.enable_static()
    rng = np.random.default_rng(2024)
    prog, start = static.Program(), static.Program()
    with static.program_guard(prog, start):
        x = static.data("x", [-1, I], "float32", lod_level=1)
        x.stop_gradient = False
        helper = LayerHelper("seq_model")
        f32 = "float32"
        # lstm
        proj = static.nn.fc(x, 4 * D, bias_attr=False)
        w = static.create_parameter([D, 4 * D], f32, name="lstm_w")
        b = static.create_parameter([1, 7 * D], f32, name="lstm_b")
        hid, cell, bg, bc = (helper.create_variable_for_type_inference(f32) for _ in range(4))
        helper.append_op(type="lstm", inputs={"Input": [proj], "Weight": [w], "Bias": [b]},
                         outputs={"Hidden": [hid], "Cell": [cell], "BatchGate": [bg], "BatchCellPreAct": [bc]},
                         attrs={"use_peepholes": True, "is_reverse": False, "gate_activation": "sigmoid",
                                "cell_activation": "tanh", "candidate_activation": "tanh"})
        p1 = static.nn.sequence_pool(hid, "max")
        # gru, reversed
        proj2 = static.nn.fc(x, 3 * D, bias_attr=False)
        gw = static.create_parameter([D, 3 * D], f32, name="gru_w")
        gb = static.create_parameter([1, 3 * D], f32, name="gru_b")
        ghid, g1, g2, g3 = (helper.create_variable_for_type_inference(f32) for _ in range(4))
        helper.append_op(type="gru", inputs={"Input": [proj2], "Weight": [gw], "Bias": [gb]},
                         outputs={"Hidden": [ghid], "BatchGate": [g1], "BatchResetHiddenPrev": [g2],
                                  "BatchHidden": [g3]},
                         attrs={"activation": "tanh", "gate_activation": "sigmoid", "is_reverse": True,
                                "origin_mode": False})
        score = static.nn.sequence_softmax(static.nn.fc(ghid, 1))
        p2 = static.nn.sequence_pool(op("elementwise_mul", {"X": [ghid], "Y": [score]}), "sum")
        # sequence_conv with trainable padding
        conv = static.nn.sequence_conv(x, 4, filter_size=3, padding=True, padding_start=-1,
                                       act="tanh", bias_attr=False)
        p3 = static.nn.sequence_pool(conv, "average")
        pooled = op("concat", {"X": [p1, p2, p3]}, {"axis": 1})
        wsum = static.data("wsum", [3, 2 * D + 4], f32)
        loss = op("reduce_sum", {"X": [op("elementwise_mul", {"X": [pooled], "Y": [wsum]})]},
                  {"reduce_all": True, "dim": []})
        forward = prog.clone()
        static.append_backward(loss)
    exe = static.Executor(paddle.CPUPlace())
    exe.run(start)
    scope = static.global_scope()
    params = {}
    for p in prog.global_block().all_parameters():
        val = rng.uniform(-0.6, 0.6, p.shape).astype(f32)
        scope.find_var(p.name).get_tensor().set(val, paddle.CPUPlace())
        params[p.name] = val
    xv = rng.uniform(-1, 1, (LOD[0][-1], I)).astype(f32)
    wv = rng.uniform(-1, 1, (3, 2 * D + 4)).astype(f32)
    t = paddle.base.core.LoDTensor()
    t.set(xv, paddle.CPUPlace())
    t.set_lod(LOD)
    fetch = [loss.name, hid.name, ghid.name, "x@GRAD"] + [f"{n}@GRAD" for n in params]
    got = exe.run(prog, feed={"x": t, "wsum": wv}, fetch_list=fetch, return_numpy=False)
    lods = {k: [list(level) for level in v.lod()] for k, v in zip(fetch, got)}
    got = [np.array(v) for v in got]
    with open(os.path.join(HERE, "forward.pb"), "wb") as f:
        f.write(forward.desc.serialize_to_string())
    np.savez(os.path.join(HERE, "ref.npz"), **{"feed:x": xv, "feed:x@LOD0": np.array(LOD[0], np.int64),
                                               "feed:wsum": wv},
             **{f"param:{k}": v for k, v in params.items()},
             **{f"fetch:{k}": np.asarray(v) for k, v in zip(fetch, got)})
    with open(os.path.join(HERE, "case.json"), "w") as f:
        json.dump({"loss": loss.name, "fetch": fetch, "lods": lods,
                   "ops": [o.type for o in forward.global_block().ops]}, f, indent=1)


if __name__ == "__main__":
    main()
