"""Paddle 3.3.1's cvm / cvm_grad values with use_cvm and a nonzero CVM (static, CPU), for tests/ops/test_kernel_cases.py.

    FLAGS_enable_pir_api=0 /path/to/paddle/python testdata/kernels/cvm_probe.py > testdata/kernels/cvm.ref.json
"""
import json
import os

os.environ["FLAGS_enable_pir_api"] = "0"
import numpy as np  # noqa: E402
import paddle  # noqa: E402

paddle.enable_static()
res = {}
xv = np.arange(1.0, 16.0).reshape(3, 5) / 4
cv = np.array([[0.5, 2.0], [1.5, -1.0], [3.0, 0.25]])
cot_full = np.linspace(-1, 1, 15).reshape(3, 5)
for use_cvm in (True, False):
    main, st = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, st):
        x = paddle.static.data("x", [3, 5], "float64")
        x.stop_gradient = False
        c = paddle.static.data("c", [3, 2], "float64")
        b = main.global_block()
        y = b.create_var(name="y", dtype="float64")
        b.append_op(type="cvm", inputs={"X": [x], "CVM": [c]}, outputs={"Y": [y]}, attrs={"use_cvm": use_cvm})
        cot = cot_full if use_cvm else cot_full[:, 2:]
        cv_var = paddle.static.data("cot", list(cot.shape), "float64")
        prod = b.create_var(name="prod", dtype="float64")
        b.append_op(type="elementwise_mul", inputs={"X": [y], "Y": [cv_var]}, outputs={"Out": [prod]},
                    attrs={"axis": -1})
        loss = b.create_var(name="loss", dtype="float64")
        b.append_op(type="reduce_sum", inputs={"X": [prod]}, outputs={"Out": [loss]},
                    attrs={"reduce_all": True, "dim": [], "keep_dim": False})
        (gx,) = paddle.static.gradients([loss], [x])
    exe = paddle.static.Executor(paddle.CPUPlace())
    yv, gv = exe.run(main, feed={"x": xv, "c": cv, "cot": cot}, fetch_list=[y, gx])
    res[f"use_cvm={use_cvm}"] = {"y": yv.tolist(), "grad": gv.tolist()}
print(json.dumps({"x": xv.tolist(), "cvm": cv.tolist(), "cot": cot_full.tolist(), **res}))
