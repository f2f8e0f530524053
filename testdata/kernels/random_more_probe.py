"""Paddle 3.3.1's values for the random_more ops (dygraph, CPU), for tests/ops/test_kernel_cases.py.

    FLAGS_enable_pir_api=0 /path/to/paddle/python testdata/kernels/random_more_probe.py > testdata/kernels/random_more.ref.json
"""
import json
import os

os.environ["FLAGS_enable_pir_api"] = "0"
import numpy as np  # noqa: E402
import paddle  # noqa: E402
from paddle import _C_ops  # noqa: E402

paddle.seed(2024)
res = {}
for dt in ("float32", "float64"):
    res[f"uniform_inplace|{dt}"] = _C_ops.uniform_inplace(paddle.zeros([2, 5], dt), -1.0, 2.0, 7, 0, 0, 1.0).numpy().tolist()
    res[f"gaussian_inplace|{dt}"] = _C_ops.gaussian_inplace(paddle.zeros([2, 5], dt), 1.0, 2.0, 7).numpy().tolist()
x = paddle.to_tensor(np.linspace(-2, 2, 9), stop_gradient=False)
out = _C_ops.rrelu(x, 0.1, 0.3, True)
(gx,) = paddle.grad([out], [x], [paddle.to_tensor(np.arange(1.0, 10.0))])
res["rrelu_test"] = {"out": out.numpy().tolist(), "grad": gx.numpy().tolist()}
xt = paddle.to_tensor(np.full([20000], -1.0), stop_gradient=False)
out = _C_ops.rrelu(xt, 0.1, 0.3, False)
(gx,) = paddle.grad([out], [xt], [paddle.ones([20000], "float64")])
n = -out.numpy()
res["rrelu_train"] = {"min": float(n.min()), "max": float(n.max()), "mean": float(n.mean()),
                      "grad_equals_noise": bool(np.allclose(gx.numpy(), n))}
a = _C_ops.exponential_(paddle.zeros([50000], "float64"), 2.0).numpy()
res["exponential"] = {"mean": float(a.mean()), "var": float(a.var()), "min": float(a.min())}
a = _C_ops.poisson(paddle.full([50000], 3.5, "float64")).numpy()
res["poisson"] = {"mean": float(a.mean()), "var": float(a.var()), "integral": bool(np.all(a == np.round(a)))}
for dt, lo, hi in (("float32", 0, 5), ("int64", -3, 2)):
    a = _C_ops.random(paddle.zeros([20000], dt), lo, hi).numpy()
    v, cnt = np.unique(a, return_counts=True)
    res[f"random|{dt}"] = {"dtype": str(a.dtype), "values": v.tolist(), "counts": cnt.tolist()}
xg = paddle.to_tensor(np.array([[1.0, 2.0, 0.5, -1.0], [0.0, 0.3, -0.2, 0.1]]), stop_gradient=False)
out = _C_ops.gumbel_softmax(xg, 0.5, False, -1)
cot = np.array([[1.0, -2.0, 0.5, 3.0], [0.2, 0.1, -0.4, 1.0]])
(gx,) = paddle.grad([out], [xg], [paddle.to_tensor(cot)])
res["gumbel_soft_T0.5"] = {"out": out.numpy().tolist(), "grad": gx.numpy().tolist(), "cot": cot.tolist()}
hard = _C_ops.gumbel_softmax(paddle.to_tensor(np.zeros([5000, 3])), 1.0, True, -1).numpy()
res["gumbel_hard"] = {"row_sums_one": bool(np.all(hard.sum(1) == 1)), "freq": (hard.mean(0)).tolist()}
print(json.dumps(res, indent=0, sort_keys=True))
