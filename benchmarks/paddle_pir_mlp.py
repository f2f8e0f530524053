"""Paddle's side of bench_pir_backward.py (run with a Python that has paddlepaddle 3.3.1).

    python benchmarks/paddle_pir_mlp.py LAYERS OUT.json [--no-call]

Builds an MLP of LAYERS `paddle.static.nn.fc(relu)` layers (width 16) and a mean
loss in PIR mode (default flags, prim off), saves the forward program to OUT.json
(`serialize_pir_program`), then times `paddle.static.append_backward(loss)` alone
and prints one JSON line: {"layers", "ops_before", "ops_after", "append_backward_s"}.
With --no-call it only builds and saves the program (for timing pybackward's side again).
"""
import json
import os
import sys
import time

os.environ.pop("FLAGS_enable_pir_api", None)
import paddle  # noqa: E402
from paddle.base import core  # noqa: E402

layers, out = int(sys.argv[1]), sys.argv[2]
paddle.enable_static()
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    x = paddle.static.data("x", [-1, 16], "float32")
    h = x
    for _ in range(layers):
        h = paddle.static.nn.fc(h, 16, activation="relu")
    loss = paddle.mean(h)
    ops_before = len(main.global_block().ops)
    core.serialize_pir_program(main, out, True, False, True)   # overwrite, not readable, trainable
    if "--no-call" in sys.argv[3:]:
        print(json.dumps({"layers": layers, "ops_before": ops_before}))
        sys.exit(0)
    t0 = time.perf_counter()
    paddle.static.append_backward(loss)
    dt = time.perf_counter() - t0
print(json.dumps({"layers": layers, "ops_before": ops_before, "ops_after": len(main.global_block().ops),
                  "append_backward_s": round(dt, 3)}))
