#!/usr/bin/env python
"""Record which PIR ops Paddle 3.3.1 marks forward-only (`core.is_forward_only`).

    /path/to/paddle/venv/bin/python testdata/pir_vjp/gen_forward_only.py

Paddle's PIR pass lets an op without a VJP through when the op carries
`ForwardOnlyTrait` (e.g. `pd_op.coalesce_tensor`, `pd_op.create_array`); it
refuses the others unless all their results stop gradients. The trait is a
fact of the op type: this script reads one bare op per registered `pd_op`
name (from pybackward/data/pir_op_names.json; Paddle reads bare ops
unverified), asks `core.is_forward_only` of each, and writes the sorted names
to pybackward/data/pir_forward_only.json. Deterministic; a few seconds.
"""
import json
import os
import sys
import tempfile

os.environ.pop("FLAGS_enable_pir_api", None)
import paddle  # noqa: E402
from paddle.base import core  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAMES = os.path.join(ROOT, "pybackward", "data", "pir_op_names.json")
OUT = os.path.join(ROOT, "pybackward", "data", "pir_forward_only.json")

names = json.load(open(NAMES))["ops"]["pd_op"]
ops = [{"#": "1." + n, "A": [], "I": [], "O": [], "OA": []} for n in names]
doc = {"base_code": {"magic": "pir", "trainable": True, "version": 4},
       "program": {"regions": [{"#": "region_0", "blocks": [{"#": "block_0", "args": [], "ops": ops}]}]}}
paddle.enable_static()
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "bare.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    prog = paddle.static.Program()
    core.deserialize_pir_program(path, prog, -1)
fwd_only = sorted({op.name() for op in prog.global_block().ops if core.is_forward_only(op)})
with open(OUT, "w") as f:
    json.dump({"_generated_by": "testdata/pir_vjp/gen_forward_only.py", "paddle": paddle.__version__,
               "_what": "PIR ops with Paddle's ForwardOnlyTrait: its PIR pass lets them through without a VJP",
               "ops": fwd_only}, f, indent=1)
    f.write("\n")
print(f"{len(fwd_only)} forward-only ops of {len(names)}", file=sys.stderr)
