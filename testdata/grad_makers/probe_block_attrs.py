"""Which Paddle 3.3.1 op types declare BLOCK / BLOCKS attrs, from their op protos.

    FLAGS_enable_pir_api=0 python testdata/grad_makers/probe_block_attrs.py > testdata/grad_makers/block_attrs.json

pybackward's registry declares these as `OpDef.block_attrs` (control_flow.py
for conditional_block and while, paddle_table.py for the rest); a loaded op
of any other known type carrying a BLOCK attr is refused (wire.check_block_attrs).
Grad ops have no proto; theirs are their forward op's (Paddle's grad makers
copy the forward attrs).
"""
import json
import os

os.environ.setdefault("FLAGS_enable_pir_api", "0")

from paddle.base import core  # noqa: E402
from paddle.base.proto import framework_pb2  # noqa: E402

out = {}
for data in core.get_all_op_protos():
    proto = framework_pb2.OpProto.FromString(data)
    names = [a.name for a in proto.attrs if a.type in (framework_pb2.BLOCK, framework_pb2.BLOCKS)]
    if names:
        out[proto.type] = names
print(json.dumps(dict(sorted(out.items())), indent=1))
