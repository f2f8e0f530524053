"""Record which op types Paddle 3.3.1 can run on CPU (needs live Paddle; run with FLAGS_enable_pir_api=0).

Writes cpu_kernels.json: for every op type Paddle knows (core.get_all_op_protos()), whether a plain CPU kernel
is registered for the op type itself (legacy registry) or for the phi kernel the op type maps to
(core._get_phi_kernel_name), and the dtypes it has. pybackward's `ops --coverage` reads this file to say which op
types a kernel is owed for; the file is data, pybackward never imports Paddle.

    FLAGS_enable_pir_api=0 python testdata/kernels/gen_cpu_kernels.py
"""
import json
import os
import re
import sys

os.environ.setdefault("FLAGS_enable_pir_api", "0")
import paddle  # noqa: E402

paddle.enable_static()
from paddle.base import core  # noqa: E402

_KEY = re.compile(r"data_type\[([^\]]*)\]; data_layout\[([^\]]*)\]; place\[([^\]]*)\]; library_type\[([^\]]*)\]")


def cpu_dtypes(entries):
    out = set()
    for e in entries:
        m = _KEY.search(e)
        if not m:
            continue
        dtype, layout, place, lib = m.groups()
        if "cpu" in place.lower() and lib == "PLAIN":
            out.add(dtype.replace("::phi::dtype::", ""))
    return sorted(out)


def main(path):
    registered = core._get_all_register_op_kernels()
    from paddle.base.proto import framework_pb2
    types = sorted(framework_pb2.OpProto.FromString(p).type for p in core.get_all_op_protos())
    table = {}
    for t in types:
        phi = core._get_phi_kernel_name(t) or t
        dtypes = sorted(set(cpu_dtypes(registered.get(t, []))) | set(cpu_dtypes(registered.get(phi, []))))
        grad_t = t + "_grad"
        grad_phi = core._get_phi_kernel_name(grad_t) or grad_t
        gdtypes = sorted(set(cpu_dtypes(registered.get(grad_t, []))) | set(cpu_dtypes(registered.get(grad_phi, []))))
        table[t] = {"phi": phi, "cpu": dtypes, "grad_cpu": gdtypes}
    with open(path, "w") as f:
        json.dump({"paddle": paddle.__version__, "ops": table}, f, indent=1, sort_keys=True)
        f.write("\n")
    with_cpu = sum(1 for v in table.values() if v["cpu"])
    print(f"{len(table)} op types, {with_cpu} with a CPU kernel -> {path}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "cpu_kernels.json"))
