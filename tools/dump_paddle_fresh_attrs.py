"""Record the attrs Paddle writes on a freshly created op of each type.

The backward pass creates some ops from nothing (the loss-grad
`fill_constant`, `fill_any_like` zero fills and target seeds, `sum` /
`grad_add` accumulation, `seed` for recompute, ...). Paddle fills every such
op with its proto's default attrs (`OpDesc.check_attrs`) and serialises them
in a fixed order. This script asks a live Paddle 3.3.1 for that list and
writes it to `pybackward/ops/fresh_attrs.json`: {op_type: [[name, AttrType,
default], ...]} in serialised order. Run it with a Python that has Paddle:

    FLAGS_enable_pir_api=0 python tools/dump_paddle_fresh_attrs.py
"""
import json
import os
import pathlib
import sys

os.environ.setdefault("FLAGS_enable_pir_api", "0")
import paddle  # noqa: E402
from google.protobuf import text_format  # noqa: E402, F401
from paddle.base.proto import framework_pb2  # noqa: E402

OP_TYPES = ["fill_constant", "fill_any_like", "sum", "grad_add", "seed", "scale",
            "assign", "cast", "concat", "increment"]


#: Attrs without a default that Paddle refuses to fill in; set as the pass sets them.
REQUIRED = {"cast": {"in_dtype": 5, "out_dtype": 5}}


def _value(a):
    field = {0: "i", 1: "f", 2: "s", 3: "ints", 4: "floats", 5: "strings", 6: "b",
             7: "bools", 9: "l", 11: "longs", 12: "float64s", 15: "float64"}[a.type]
    v = getattr(a, field)
    return list(v) if field.endswith("s") and field != "s" else v


def main() -> None:
    paddle.enable_static()
    table = {}
    for t in OP_TYPES:
        prog = paddle.static.Program()
        d = prog.global_block().desc.append_op()
        d.set_type(t)
        for name, value in REQUIRED.get(t, {}).items():
            d._set_attr(name, value)
        d.check_attrs()
        m = framework_pb2.ProgramDesc()
        m.ParseFromString(prog.desc.serialize_to_string())
        table[t] = [[a.name, a.type, _value(a)] for a in m.blocks[0].ops[0].attrs]
    out = pathlib.Path(__file__).resolve().parent.parent / "pybackward" / "ops" / "fresh_attrs.json"
    out.write_text(json.dumps(table, indent=1) + "\n")
    print(out, file=sys.stderr)


if __name__ == "__main__":
    main()
