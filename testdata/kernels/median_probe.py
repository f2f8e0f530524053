"""Paddle 3.3.1's median / nanmedian values on ties, integers and NaNs (dygraph, CPU), for tests/ops/test_kernel_cases.py.

    FLAGS_enable_pir_api=0 /path/to/paddle/python testdata/kernels/median_probe.py > testdata/kernels/median_ties.ref.json
"""
import os; os.environ["FLAGS_enable_pir_api"]="0"
import numpy as np, paddle, json
from paddle import _C_ops
tied = np.array([[3., 1, 2, 5], [4, 4, 1, 0], [2, 7, 2, 9]]) + 0.25
alln = np.array([[1., np.nan, 3, 2], [np.nan]*4, [5, 1, np.nan, np.nan]])
res = {}
def run(op, x, ax, kd, mode, key):
    t = paddle.to_tensor(x, stop_gradient=x.dtype.kind!='f')
    o, m = getattr(_C_ops, op)(t, ax, kd, mode)
    r = {"out": o.numpy().tolist(), "idx": m.numpy().tolist(), "odtype": str(o.numpy().dtype)}
    if x.dtype.kind == 'f':
        g = np.arange(1, o.size+1, dtype=x.dtype).reshape(o.shape)
        (gx,) = paddle.grad([o], [t], [paddle.to_tensor(g)])
        r["grad"] = gx.numpy().tolist()
    res[key] = r
for op in ("median", "nanmedian"):
    run(op, tied, [], False, "avg", op+"-tied-all-avg")
    run(op, tied, [1], False, "avg", op+"-tied-1-avg")
    run(op, tied, [1], True, "min", op+"-tied-1-min")
    run(op, tied.T.copy(), [0], False, "avg", op+"-tiedT-0-avg")
    run(op, np.array([[3, 1, 2, 6], [-3, -2, 5, 1]], np.int64), [1], False, "avg", op+"-int64-avg")
    run(op, np.array([[3, 1, 2], [-3, -2, 5]], np.int32), [0], True, "min", op+"-int32-min")
run("nanmedian", alln, [1], False, "avg", "nanmedian-nan-avg")
run("nanmedian", alln, [1], False, "min", "nanmedian-nan-min")
run("nanmedian", np.full((2,3), np.nan), [1], False, "avg", "nanmedian-allnan-avg")
run("median", np.array([[1., np.nan, 3], [2, 5, 4]]), [1], False, "min", "median-nan3-min")
print(json.dumps(res, indent=0, sort_keys=True))
