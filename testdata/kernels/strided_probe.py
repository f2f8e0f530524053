"""Paddle 3.3.1 dygraph values for as_strided, index_select_strided, view_shape (tests/ops/test_kernel_cases.py).

    FLAGS_enable_pir_api=0 /path/to/paddle/python testdata/kernels/strided_probe.py > testdata/kernels/strided.ref.json
"""
import os; os.environ["FLAGS_enable_pir_api"]="0"
import numpy as np, paddle, json
from paddle import _C_ops
res = {}  # dygraph: the legacy executor has no kernels for the strided ops
x = paddle.to_tensor(np.arange(12.).reshape(3, 4), stop_gradient=False)
for key, dims, st, off in (("t", [4, 3], [1, 4], 0), ("sub", [2, 2], [4, 2], 8), ("overlap", [3, 3], [1, 1], 8)):
    o = paddle.as_strided(x, dims, st, off)
    cot = paddle.to_tensor(np.arange(1.0, 1.0 + np.prod(dims)).reshape(dims))
    (g,) = paddle.grad([o], [x], [cot])
    res["as_strided|" + key] = {"out": o.numpy().tolist(), "grad": g.numpy().tolist()}
o = _C_ops.index_select_strided(x, 1, 0)
(g,) = paddle.grad([o], [x], [paddle.ones_like(o)])
res["index_select_strided"] = {"out": o.numpy().tolist(), "grad": g.numpy().tolist()}
o = x.view([2, 6])
res["view_shape"] = {"out": o.numpy().tolist(), "shape": list(o.shape)}
print(json.dumps(res))
