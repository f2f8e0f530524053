"""List the PIR op names the op map maps whose legacy form has no kernel, and what runs them.

Writes no_kernel.json beside this file: for every PIR name in the op map
(pybackward/data/pir_op_map.json) whose legacy type has no pybackward kernel,
its legacy type, whether the PIR interpreter runs it all the same and how (a
glue function of `pir_glue.GLUE`, or another legacy type's kernel by
`pir_glue.ROUTES`, with the identity that makes it right), whether Paddle
3.3.1 has a CPU kernel for it (pybackward/data/pir_cpu_kernels.json, recorded
by gen_cpu_kernels.py from a live Paddle) and pybackward's note on the legacy
type. tests/interpreter/test_pir_routes.py checks the file is current.

    python testdata/pir_opmap/gen_no_kernel.py [--out FILE]      # pybackward's venv; no Paddle
"""
import argparse
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

import pybackward.ops  # noqa: E402,F401  (registers every op family)
from pybackward.interpreter.pir_glue import GLUE, ROUTES, paddle_cpu  # noqa: E402
from pybackward.pir.opmap import resolve  # noqa: E402
from pybackward.ops import registry  # noqa: E402
from pybackward.pir import opmap  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(HERE / "no_kernel.json"))
    args = ap.parse_args()
    rows = {}
    for name in sorted(opmap.pir_names()):
        r = resolve(name)
        d = registry.find(r.map.legacy_type) if r is not None else None
        if r is None or (d is not None and d.kernel is not None):
            continue
        row = {"legacy": r.map.legacy_type}
        if r.map.forward:
            row["forward"] = r.map.forward
        if name in GLUE:
            fn = GLUE[name]
            row["runs"] = f"glue: pir_glue.{fn.__name__}"
        elif name in ROUTES:
            route = ROUTES[name]
            row["runs"] = f"legacy kernel {route.legacy_type}: {route.why}"
        else:
            row["runs"] = None
        rec = paddle_cpu(name)
        row["paddle_cpu"] = rec["cpu"] if rec else None
        if rec and rec.get("cpu"):
            row["paddle_kernel"] = rec["kernel"]
            if rec.get("cannot_run"):
                row["paddle_cannot_run"] = rec["cannot_run"]
        if d is not None and d.no_kernel:
            row["note"] = d.no_kernel
        rows[name] = row
    runs = sum(1 for r in rows.values() if r["runs"])
    cpu = sum(1 for r in rows.values() if not r["runs"] and r["paddle_cpu"] and "paddle_cannot_run" not in r)
    out = {"_generated_by": "testdata/pir_opmap/gen_no_kernel.py",
           "_what": "mapped PIR op names whose legacy type has no pybackward kernel: what runs them (runs: null "
                    "= nothing yet) and whether Paddle 3.3.1 has a CPU kernel for them",
           "counts": {"names": len(rows), "runs": runs, "not_run_but_paddle_runs_on_cpu": cpu},
           "ops": rows}
    pathlib.Path(args.out).write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"{args.out}: {len(rows)} names, {runs} run by glue or another kernel, "
          f"{cpu} others Paddle runs on CPU")


if __name__ == "__main__":
    main()
