"""Record which PIR op names Paddle 3.3.1 can run on CPU (needs live Paddle).

Writes pybackward/data/pir_cpu_kernels.json: for every `pd_op.*` name Paddle
registers (pybackward/data/pir_op_names.json), whether a plain CPU kernel is
registered for it in Paddle's phi kernel registry
(`core._get_all_register_op_kernels("all")`), found under the first of these
kernel names that is registered: the op's own name (an in-place `X_` under
`X`), its `_double_grad` as `_grad_grad` and back, its legacy type (the op map,
pybackward/data/pir_op_map.json) and that type's phi kernel name
(`core._get_phi_kernel_name`), each also with a `_kernel` suffix (`print`'s
kernel is `print_kernel`). A CPU kernel that is registered but cannot run
(testdata/kernels/gen_cpu_kernels.py's CPU_KERNEL_CANNOT_RUN, by legacy type,
recorded in testdata/kernels/cpu_kernels.json) is kept with why, unless why
is the legacy executor's own limit.

The PIR interpreter's "no kernel" error reads it to say whether Paddle has a
CPU kernel for the op (pybackward/interpreter/pir_glue.py, `paddle_cpu`);
pybackward never imports Paddle.

    /work/main/.paddle-venv/bin/python testdata/pir_opmap/gen_cpu_kernels.py [--out FILE]
"""
import argparse
import json
import pathlib

import paddle
from paddle.base import core

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "pybackward" / "data"
OUT = DATA / "pir_cpu_kernels.json"


def cpu_dtypes(keys) -> list[str]:
    out = set()
    for k in keys:
        if "place[Place(cpu)]" in k and "library_type[PLAIN]" in k:
            dt = k.split("data_type[", 1)[1].split("]", 1)[0].replace("::phi::dtype::", "")
            out.add(dt)
    return sorted(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    kernels = core._get_all_register_op_kernels("all")
    names = json.loads((DATA / "pir_op_names.json").read_text())["ops"]["pd_op"]
    pir_map = json.loads((DATA / "pir_op_map.json").read_text())["pir"]
    legacy_cpu = json.loads((ROOT / "testdata" / "kernels" / "cpu_kernels.json").read_text())["ops"]
    ops = {}
    for n in sorted(names):
        full = f"pd_op.{n}"
        base = n[:-1] if n.endswith("_") and not n.endswith("__") else n
        legacy = pir_map.get(full) or pir_map.get(f"pd_op.{base}")
        cands = [base, base.replace("_double_grad", "_grad_grad"), base.replace("_grad_grad", "_double_grad")]
        if legacy:
            cands.append(legacy)
            try:
                cands.append(core._get_phi_kernel_name(legacy))
            except Exception:   # noqa: BLE001  (no phi name)
                pass
        cands += [c + "_kernel" for c in list(cands)]
        found, dts = None, []
        for c in dict.fromkeys(c for c in cands if c):
            d = cpu_dtypes(kernels.get(c, ()))
            if d:
                found, dts = c, d
                break
        rec = {"cpu": bool(found)}
        if found:
            rec["kernel"] = found
            rec["dtypes"] = dts
            why = legacy_cpu.get(legacy or "", {}).get("cannot_run")
            if why and "legacy executor" not in why:     # a legacy executor's limit is not PIR's
                rec["cannot_run"] = why
        if legacy:
            rec["legacy"] = legacy
        ops[full] = rec
    out = {"_generated_by": "testdata/pir_opmap/gen_cpu_kernels.py", "paddle": paddle.__version__,
           "paddle_commit": paddle.version.commit,
           "_what": "per pd_op name: whether Paddle registers a plain CPU kernel for it (cpu), under which "
                    "kernel name, its dtypes, and why a registered one cannot run (cannot_run)",
           "ops": ops}
    pathlib.Path(args.out).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"{args.out}: {len(ops)} ops, {sum(r['cpu'] for r in ops.values())} with a CPU kernel")


if __name__ == "__main__":
    main()
