"""Paddle 3.3.1's CPU weight_quantize on float16 weights (ops/quant/weight_quant.py).

Its CPU kernel takes float16 / bfloat16 only, which the one-op pipeline
(float32 / float64) cannot run: here every algo x arch (70, and 80 for the
mixed-GEMM layout) x group_size (-1, 64) on three shapes, written to weight_quant.refs.npz (`<case>|x`, `<case>|out`,
`<case>|scale`) with the cases in weight_quant.refs.json.

    FLAGS_enable_pir_api=0 /path/to/paddle/python testdata/kernels/weight_quant_refs.py
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import warnings

os.environ["FLAGS_enable_pir_api"] = "0"
warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import paddle  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent


def run_one(x, algo, arch, group):
    main_p = paddle.static.Program()
    with paddle.static.program_guard(main_p, paddle.static.Program()):
        v = paddle.static.data("x", list(x.shape), "float16")
        b = main_p.global_block()
        o = b.create_var(name="o", dtype="int8")
        s = b.create_var(name="s", dtype="float32" if algo == "llm.int8" else "float16")
        b.append_op(type="weight_quantize", inputs={"x": [v]}, outputs={"out": [o], "scale": [s]},
                    attrs={"algo": algo, "arch": arch, "group_size": group})
    return paddle.static.Executor(paddle.CPUPlace()).run(main_p, feed={"x": x}, fetch_list=[o, s])


def shapes():
    rng = np.random.default_rng(7)
    xs = {"64x128": rng.normal(size=(64, 128)).astype(np.float16),
          "128x64": (rng.normal(size=(128, 64)) * 3).astype(np.float16),
          "128x128": rng.uniform(-2, 2, (128, 128)).astype(np.float16)}
    xs["128x64"][:, 5] = 0   # an all-zero column: scale 0, 0 / 0
    return xs


def main():
    """Each case in its own process (several in one process hung Paddle here)."""
    if len(sys.argv) == 6:   # one case: shape algo arch group out.npz
        shape, algo, arch, group, dst = sys.argv[1:]
        paddle.enable_static()
        out, scale = run_one(shapes()[shape], algo, int(arch), int(group))
        np.savez(dst, out=out, scale=scale)
        return
    cases, arrays = [], {}
    for shape, x in shapes().items():
        arrays[f"{shape}|x"] = x
        for algo in ("weight_only_int8", "weight_only_int4", "llm.int8"):
            for arch in (70, 80):
                for group in (-1, 64):
                    name = f"{shape}|{algo}|{arch}|{group}"
                    case = {"case": name, "shape": shape, "attrs": {"algo": algo, "arch": arch, "group_size": group}}
                    with tempfile.TemporaryDirectory() as tmp:
                        dst = os.path.join(tmp, "case.npz")
                        try:
                            r = subprocess.run([sys.executable, __file__, shape, algo, str(arch), str(group), dst],
                                               capture_output=True, text=True, timeout=120)
                            if r.returncode == 0:
                                got = np.load(dst)
                                arrays[f"{name}|out"], arrays[f"{name}|scale"] = got["out"], got["scale"]
                            else:
                                msg = [m.strip() for m in r.stderr.splitlines() if "Error" in m]
                                case["error"] = (msg[0] if msg else f"exit {r.returncode}")[:300]
                        except subprocess.TimeoutExpired:
                            case["error"] = "no answer within 120 s"
                    cases.append(case)
                    print(name, case.get("error", "ok"), flush=True)
    (HERE / "weight_quant.refs.json").write_text(json.dumps(cases, indent=0) + "\n")
    np.savez_compressed(HERE / "weight_quant.refs.npz", **arrays)


if __name__ == "__main__":
    main()
