"""Paddle 3.3.1 values tests/ops/test_index_elementwise_eig_pyramid_hash.py compares with, float32 and float64:

* eig and eig_grad on REAL X (keys `<case>|...`, cases real_spectrum, pair, batch_pairs, one);
* forwards of registry samples whose gradient Paddle's legacy executor refuses
  (keys `<sample>|<dtype>|out|<slot>|<i>`, e.g. index_elementwise_get-4: two index tensors).

Paddle's eig_grad kernel makes a complex X@GRAD also for a real X; its executor hands the program
the real part in X's dtype. The registry samples of eig are complex (their X@GRAD is complex in
Paddle as here), so the real case is probed here, with gen_kernel_refs.run_case's one-op program
and loss sum(Re(conj(cot) * out)).

    FLAGS_enable_pir_api=0 /path/to/paddle/python testdata/kernels/last_diff_eig_probe.py
"""
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import numpy as np  # noqa: E402
import paddle  # noqa: E402
from gen_kernel_refs import run_case  # noqa: E402


#: Registry samples (last_diff.samples.*) whose forward is compared here: Paddle refuses their grad.
FORWARD_ONLY = ("index_elementwise_get-4",)


def spectrum(rs, ws, shape=()):
    """Real matrices P D P^-1 with eigenvalues ws ((a, b) stands for the pair a +- ib)."""
    n = sum(2 if isinstance(w, tuple) else 1 for w in ws)
    d = np.zeros((n, n))
    k = 0
    for w in ws:
        if isinstance(w, tuple):
            d[k:k + 2, k:k + 2] = [[w[0], w[1]], [-w[1], w[0]]]
            k += 2
        else:
            d[k, k] = w
            k += 1
    p = 0.4 * rs.standard_normal(shape + (n, n)) + np.eye(n)
    return p @ d @ np.linalg.inv(p)


def main():
    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())
    rs = np.random.RandomState(7)
    xs = {"real_spectrum": spectrum(rs, [-1.5, 0.5, 2.0]), "pair": spectrum(rs, [(0.5, 1.2), -1.0]),
          "batch_pairs": spectrum(rs, [(1.0, 0.7), (-0.8, 1.5)], (2,)), "one": np.array([[2.5]])}
    arrays, report = {}, {}
    for name, x in xs.items():
        n = x.shape[-1]
        arrays[f"{name}|in|X|0"] = x
        arrays[f"{name}|cot|Eigenvalues|0"] = rs.standard_normal(x.shape[:-1]) + 1j * rs.standard_normal(x.shape[:-1])
        arrays[f"{name}|cot|Eigenvectors|0"] = rs.standard_normal(x.shape) + 1j * rs.standard_normal(x.shape)
        case = {"case": name, "op": "eig", "attrs": {}, "inputs": {"X": 1},
                "outputs": {"Eigenvalues": 1, "Eigenvectors": 1},
                "out_dtypes": {"Eigenvalues": ["complex128"], "Eigenvectors": ["complex128"]},
                "loss": {"Eigenvalues": [True], "Eigenvectors": [True]}, "wrt": ["X"]}
        for dtype in ("float32", "float64"):
            vals = run_case(case, arrays, dtype, exe)
            report[f"{name}|{dtype}"] = sorted(vals)
            for k, v in vals.items():
                arrays[f"{name}|{dtype}|{k}"] = v
    cases = {c["case"]: c for c in json.loads((HERE / "last_diff.samples.json").read_text())}
    samples = dict(np.load(HERE / "last_diff.samples.npz"))
    for name in FORWARD_ONLY:
        for dtype in ("float32", "float64"):
            vals = run_case(cases[name], samples, dtype, exe, with_loss=False)
            report[f"{name}|{dtype}"] = sorted(vals)
            for k, v in vals.items():
                arrays[f"{name}|{dtype}|{k}"] = v
    np.savez_compressed(HERE / "last_diff_probe.ref.npz", **arrays)
    (HERE / "last_diff_probe.ref.json").write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
