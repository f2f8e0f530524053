#!/usr/bin/env python
"""Record every op name Paddle 3.3.1 registers for PIR, in all five dialects a PIR
file can name (builtin, pd_op, cf, custom_op, pd_dist), into
``pybackward/data/pir_op_names.json``. pybackward's PIR reader refuses an op
whose name is not in it (Paddle's reader accepts any name and makes an op with
an empty name).

Run with Paddle's interpreter::

    /work/main/.paddle-venv/bin/python tools/dump_pir_op_names.py

Paddle has no API that lists its registered PIR ops, so the candidates are
gathered from three places and then checked one by one:

1. every ``<dialect>.<name>`` string in ``libpaddle.so`` (the dist dialect,
   id 4, is ``pd_dist``, but its ops are named ``dist_op.*``: Paddle 3.3.1 can
   write them only under that full name, which its reader refuses, so none
   can appear in a file and the list for id 4 is empty);
2. the functions of ``paddle._C_ops`` / ``core.pir.ops`` (as ``pd_op.<name>``);
3. every legacy op name (``core.get_all_op_names()``) as ``pd_op.<name>``.

A candidate is registered when Paddle's own reader, given a one-op JSON program
naming it (no operands, no results: the reader creates ops unverified), gives
the op back under that name; an unregistered name comes back as "". Each check
batch runs in a fresh process, split in half when Paddle dies on one of them.
custom_op has no ops until a user loads a custom-op library, so it is empty.
The output is sorted, so a re-run with the same Paddle gives the same bytes.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "pybackward" / "data" / "pir_op_names.json"
DIALECT_IDS = {"builtin": "0", "pd_op": "1", "cf": "2", "custom_op": "3", "pd_dist": "4"}
NAME_RE = re.compile(rb"\b(builtin|pd_op|cf|custom_op|pd_dist)\.([a-z0-9_]+)")

_CHECK = r"""
import json, sys, warnings
warnings.filterwarnings("ignore")
import paddle
from paddle.base import core
paddle.enable_static()
paddle.base.libpaddle.pir.register_dist_dialect()
names = json.load(open(sys.argv[1]))
ids = json.load(open(sys.argv[2]))
ops = [{"#": ids[n.split(".", 1)[0]] + "." + n.split(".", 1)[1], "A": [], "I": [], "O": [], "OA": []} for n in names]
data = {"base_code": {"magic": "pir", "trainable": True, "version": 4},
        "program": {"regions": [{"#": "region_0", "blocks": [{"#": "block_0", "args": [], "ops": ops}]}]}}
json.dump(data, open(sys.argv[3], "w"))
prog = paddle.static.Program()
core.deserialize_pir_program(sys.argv[3], prog, -1)
got = [op.name() for op in prog.global_block().ops]
json.dump([n for n, g in zip(names, got) if g == n], open(sys.argv[4], "w"))
"""


def candidates() -> set[str]:
    import paddle
    from paddle.base import core
    so = Path(core.__file__).with_name("libpaddle.so")
    found = {f"{d.decode()}.{n.decode()}" for d, n in NAME_RE.findall(so.read_bytes())}
    for mod in (paddle._C_ops, core.pir.ops):
        found |= {f"pd_op.{n}" for n in dir(mod) if re.fullmatch(r"[a-z0-9_]+", n)}
    found |= {f"pd_op.{n}" for n in core.get_all_op_names() if re.fullmatch(r"[a-z0-9_]+", n)}
    return found


def check(names: list[str], tmp: Path) -> list[str]:
    """The registered ones among `names`, checked in a fresh Paddle process (bisected on a crash)."""
    if not names:
        return []
    src, ids, prog, out = (tmp / f for f in ("names.json", "ids.json", "prog.json", "ok.json"))
    src.write_text(json.dumps(names))
    ids.write_text(json.dumps(DIALECT_IDS))
    r = subprocess.run([sys.executable, "-c", _CHECK, str(src), str(ids), str(prog), str(out)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if r.returncode == 0:
        return json.loads(out.read_text())
    if len(names) == 1:
        print(f"  Paddle fails on {names[0]}: left out", file=sys.stderr)
        return []
    half = len(names) // 2
    return check(names[:half], tmp) + check(names[half:], tmp)


def main() -> None:
    import paddle
    cands = sorted(candidates())
    print(f"{len(cands)} candidates", file=sys.stderr)
    with tempfile.TemporaryDirectory() as d:
        ok = check(cands, Path(d))
    by_dialect: dict[str, list[str]] = {d: [] for d in DIALECT_IDS}
    for n in sorted(set(ok)):
        dialect, op = n.split(".", 1)
        by_dialect[dialect].append(op)
    data = {
        "_generated_by": "tools/dump_pir_op_names.py",
        "_what": "op names Paddle registers for PIR, per dialect; a PIR file writes an op as "
                 "'<dialect id>.<op>' with these ids",
        "paddle": paddle.__version__,
        "paddle_commit": paddle.version.commit,
        "dialect_ids": DIALECT_IDS,
        "counts": {d: len(v) for d, v in by_dialect.items()},
        "ops": by_dialect,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {OUT}: " + ", ".join(f"{d} {len(v)}" for d, v in by_dialect.items()), file=sys.stderr)


if __name__ == "__main__":
    os.environ.setdefault("GLOG_minloglevel", "2")
    main()
