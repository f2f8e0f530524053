"""Generate `pybackward/data/op_index.json`, the op index, from the op families.

The registry answers "what is op type T?" from this index without importing
T's family (a NumPy kernel module): `pybackward/ops/__init__.py` installs it,
and imports a family only when something reads code of one of its types (a
kernel, samples, a structure check, a grad maker function). This script
imports every family the way a full import does, watching each `register`
call, and writes:

* `groups`: lists of family modules that must be imported together, in the
  order the full import takes them - families that declare or mention the
  same op type (one implies a grad op type another declares in full) or that
  import each other - so a type's OpDef does not depend on which family was
  asked for first;
* `ops`: per op type, its group (-1: declared from Paddle's records alone,
  `paddle_table`) and its record (`pybackward.ops.record`: the OpDef's data
  fields, which code fields it has, its grad rule as data), as a JSON string
  decoded when the type is first asked for.

Adding an op touches one family module; then run this script (the test
`tests/ops/test_op_index.py` fails, naming it, until the index is fresh):

    python tools/gen_op_index.py            # write the index
    python tools/gen_op_index.py --check    # exit 1 if it is stale

Run it in a process of its own (it must see the families' first import).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def build_index() -> dict:
    """The index of the families in this checkout (imports them all)."""
    import importlib

    import pybackward.ops as ops
    from pybackward.ops import paddle_table, registry

    if any(m in sys.modules for m in ops.family_modules()):
        raise RuntimeError("a family was imported before the index was built; run in a fresh process")
    registry.set_index(None)        # the families as they are, not as the index says
    mentions: dict[str, list[str]] = {}     # op type -> the modules whose register calls name it
    current = ["paddle_table"]
    original = registry.register

    def types_named(op: registry.OpDef) -> list[str]:
        out = [op.type]
        spec = op.grad
        while isinstance(spec, registry.GradSpec):
            out.append(spec.type)
            spec = spec.grad
        grad_op_types = getattr(op.grad, "grad_op_types", None)
        if grad_op_types is not None:
            out.extend(t for t, *_ in grad_op_types())
        return out

    def watching(op: registry.OpDef) -> registry.OpDef:
        for t in types_named(op):
            mentions.setdefault(t, [])
            if current[0] not in mentions[t]:
                mentions[t].append(current[0])
        return original(op)

    registry.register = watching
    paddle_table.register = watching
    families = ops.family_modules()
    order: list[str] = []                      # families in the order their bodies finished
    imported_with: dict[str, list[str]] = {}   # family -> families its import imported
    try:
        for module in families:
            if module in sys.modules:
                continue
            current[0] = module
            importlib.import_module(module)
            new = [m for m in families if m in sys.modules and m not in order and m != module]
            imported_with[module] = new
            order.extend(new)
            order.append(module)
        current[0] = "paddle_table"
        paddle_table.register_paddle_ops()
    finally:
        registry.register = original
        paddle_table.register = original

    # groups: union of families that name a common type or import one another
    parent = {m: m for m in families}

    def root(m: str) -> str:
        while parent[m] != m:
            parent[m] = parent[parent[m]]
            m = parent[m]
        return m

    def union(a: str, b: str) -> None:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[rb] = ra

    for t, mods in mentions.items():
        fam = [m for m in mods if m != "paddle_table"]
        for m in fam[1:]:
            union(fam[0], m)
    for m, new in imported_with.items():
        for n in new:
            union(m, n)
    by_root: dict[str, list[str]] = {}
    for m in order:
        by_root.setdefault(root(m), []).append(m)
    groups = sorted(by_root.values(), key=lambda g: order.index(g[0]))
    group_of = {m: i for i, g in enumerate(groups) for m in g}

    out_ops = {}
    for t, d in sorted(registry.all_registered().items()):
        fam = [m for m in mentions.get(t, ()) if m != "paddle_table"]
        if fam:
            g = group_of[fam[0]]
        elif "paddle_table" in mentions.get(t, ()):
            g = -1
        else:
            raise RuntimeError(f"op type {t!r} was registered outside any family")
        rec = ops.record(d)
        if g < 0 and rec.get("code"):
            raise RuntimeError(f"op type {t!r} is declared from Paddle's records but has code")
        out_ops[t] = [g, json.dumps(rec, separators=(",", ":"), sort_keys=True)]
    return {"about": "generated by tools/gen_op_index.py from the op families; do not edit",
            "groups": groups, "ops": out_ops}


def dumps(index: dict) -> str:
    return json.dumps(index, indent=0, sort_keys=True) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the index on disk is stale")
    ap.add_argument("--index", type=Path, default=None, help="the index file (default: pybackward/data/op_index.json)")
    args = ap.parse_args()
    from pybackward.base.files import write_atomic
    from pybackward.ops import INDEX_FILE as DEFAULT
    index_file = args.index or DEFAULT
    text = dumps(build_index())
    if args.check:
        if not index_file.exists() or index_file.read_text() != text:
            print(f"{index_file} is stale (the op families changed): run `python tools/gen_op_index.py`",
                  file=sys.stderr)
            return 1
        print(f"{index_file} is up to date")
        return 0
    write_atomic(str(index_file), text.encode())
    print(f"wrote {index_file}: {len(json.loads(text)['ops'])} op types")
    return 0


if __name__ == "__main__":
    sys.exit(main())
