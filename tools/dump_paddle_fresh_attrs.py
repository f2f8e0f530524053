"""Record, per op type, the attrs Paddle fills in on an op it creates or checks.

Paddle fills every op with its type's default attrs (`OpDesc.check_attrs`) and
serialises attrs with the "extra" (runtime) ones first, each group sorted. The
backward pass needs both facts: ops it makes from nothing (the loss-grad
`fill_constant`, `sum`, zero fills, ...) carry exactly these attrs, and grad ops
made from a forward op gain the defaults their own type has and the forward
op lacks (split's grad is a `concat`, which has `use_quantizer`).

This script asks a live Paddle 3.3.1, for the op types given (every type
pybackward registers), and writes `pybackward/data/fresh_attrs.json`:
    {op_type: {"attrs": [[name, AttrType, default], ...], "extras": [name, ...]}}
Paddle and pybackward cannot share a process (both register the schema), so
the type list comes from pybackward's environment:

    python -c "from pybackward.ops import registry; print(*registry.all_ops())" \
      | xargs env FLAGS_enable_pir_api=0 /path/to/paddle/python tools/dump_paddle_fresh_attrs.py
"""
import json
import os
import pathlib
import sys

os.environ.setdefault("FLAGS_enable_pir_api", "0")
import paddle  # noqa: E402
from paddle.base import core  # noqa: E402
from paddle.base.proto import framework_pb2  # noqa: E402

#: Attrs without a default that Paddle refuses to fill in; set as the pass sets them.
REQUIRED = {"cast": {"in_dtype": 5, "out_dtype": 5}}
_FIELD = {0: "i", 1: "f", 2: "s", 3: "ints", 4: "floats", 5: "strings", 6: "b", 7: "bools",
          9: "l", 11: "longs", 12: "float64s", 15: "float64"}


def _value(a):
    field = _FIELD.get(a.type)
    if field is None:
        return None
    v = getattr(a, field)
    return list(v) if field.endswith("s") and field != "s" else v


def main() -> None:
    paddle.enable_static()
    table = {}
    for t in sorted(set(sys.argv[1:])):
        prog = paddle.static.Program()
        d = prog.global_block().desc.append_op()
        try:
            d.set_type(t)
            for name, value in REQUIRED.get(t, {}).items():
                d._set_attr(name, value)
            d.check_attrs()
        except Exception as e:  # an op type Paddle does not know, or one without a checker
            print(f"skip {t}: {str(e).splitlines()[0][:100]}", file=sys.stderr)
            continue
        m = framework_pb2.ProgramDesc()
        m.ParseFromString(prog.desc.serialize_to_string())
        try:
            extras = sorted(core.get_op_extra_attrs(t))
        except Exception:
            extras = []
        table[t] = {"attrs": [[a.name, a.type, _value(a)] for a in m.blocks[0].ops[0].attrs],
                    "extras": extras}
    out = pathlib.Path(__file__).resolve().parent.parent / "pybackward" / "data" / "fresh_attrs.json"
    out.write_text(json.dumps(table, indent=0, sort_keys=True) + "\n")
    print(f"{out}: {len(table)} op types", file=sys.stderr)


if __name__ == "__main__":
    main()
