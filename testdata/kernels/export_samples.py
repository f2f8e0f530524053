"""Write the registry's kernel samples to files Paddle can run (no Paddle needed).

Every op type with a kernel and `samples` in pybackward's registry is checked
against Paddle's own CPU kernels in two steps:

1. this script (pybackward's environment) writes, per op family,
   `testdata/kernels/<family>.samples.{json,npz}`: each sample's op type,
   attrs, input arrays, output slot counts, which inputs are differentiated,
   and a fixed random cotangent for each float or complex output (the loss
   is sum over outputs of <cot, out>, Re(conj(cot) * out) for complex ones);
2. `gen_kernel_refs.py` (Paddle's environment) runs each sample's op in a
   one-op program in float32 and float64, takes `paddle.static.gradients` of
   that loss, and writes `<family>.paddle.{json,npz}`.

`tests/ops/test_kernels_vs_paddle.py` then compares pybackward's forward and grad
kernels with Paddle's values, without Paddle.

    python testdata/kernels/export_samples.py [--family activation ...] [--ops a,b]
    FLAGS_enable_pir_api=0 /path/to/paddle/python testdata/kernels/gen_kernel_refs.py [family ...]
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
from pybackward.ops import opcheck, registry  # noqa: E402

#: Families whose ops draw random numbers or need a whole program.
SKIP_FAMILIES = {"random", "random_more", "control_flow", "paddle_table"}


def plain(v):
    """An attr value as JSON (numpy scalars and tuples made plain)."""
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, bytes):
        return v.decode()
    return v


def export(family: str, ops: list[str]) -> int:
    cases, arrays = [], {}
    for op_type in ops:
        d = registry.get(op_type)
        for i, sample in enumerate(d.samples(np.random.default_rng(1234))):
            name = f"{op_type}-{i}"
            rng = np.random.default_rng(1000 + i)
            out_counts = sample.outputs or {s: 1 for s in d.outputs}
            try:
                lods = {s: opcheck.slot_lods(lod) for s, lod in (sample.lod or {}).items()}
                outs = opcheck.run_kernel(op_type, sample.inputs, dict(sample.attrs),
                                          {s: [f"{s}{k}" for k in range(n)] for s, n in out_counts.items()},
                                          lods=lods)
            except Exception as e:  # a sample meant to fail, or a kernel bug: record it
                print(f"{name}: forward failed here: {e}", file=sys.stderr)
                continue
            loss, dtypes = {}, {}
            for s, n in out_counts.items():
                dtypes[s] = [str(np.asarray(a).dtype) for a in outs.get(s, [])[:n]]
                flags = []
                for k, arr in enumerate(outs.get(s, [])[:n]):
                    use = (s not in d.intermediate_outputs and isinstance(arr, np.ndarray)
                           and arr.dtype.kind in "fc")
                    flags.append(use)
                    if use:  # a complex output's cotangent is complex (see opcheck.complex_cotangent)
                        arrays[f"{name}|cot|{s}|{k}"] = (rng.standard_normal(arr.shape) if arr.dtype.kind == "f"
                                                         else opcheck.complex_cotangent(rng, arr.shape))
                loss[s] = flags
            for s, arrs in sample.inputs.items():
                for k, a in enumerate(arrs):
                    arrays[f"{name}|in|{s}|{k}"] = np.asarray(a)
            wrt = sample.wrt if sample.wrt is not None else tuple(
                s for s in (d.differentiable_inputs or sample.inputs) if s in sample.inputs)
            case = {"case": name, "op": op_type, "attrs": {k: plain(v) for k, v in sample.attrs.items()},
                    "inputs": {s: len(a) for s, a in sample.inputs.items()},
                    "outputs": dict(out_counts), "out_dtypes": dtypes, "loss": loss,
                    "wrt": [s for s in wrt if s in sample.inputs] if d.grad is not None else [],
                    "note": sample.note}
            if sample.lod is not None:  # a sequence op: inputs' LoDs (slot -> lod of its first var)
                case["lod"] = {s: plain(lod) for s, lod in sample.lod.items()}
            cases.append(case)
    (HERE / f"{family}.samples.json").write_text(json.dumps(cases, indent=0) + "\n")
    np.savez_compressed(HERE / f"{family}.samples.npz", **arrays)
    return len(cases)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", action="append", help="only these families (default: all)")
    ap.add_argument("--ops", help="comma-separated op types (default: every op with samples)")
    args = ap.parse_args()
    wanted = set(args.ops.split(",")) if args.ops else None
    by_family: dict[str, list[str]] = {}
    for t, d in registry.all_ops().items():
        if d.kernel is None or d.samples is None or d.grad_of is not None or d.family in SKIP_FAMILIES:
            continue
        if wanted is not None and t not in wanted:
            continue
        if args.family and d.family not in args.family:
            continue
        by_family.setdefault(d.family, []).append(t)
    for family, ops in sorted(by_family.items()):
        print(f"{family}: {export(family, sorted(ops))} samples of {len(ops)} op types", file=sys.stderr)


if __name__ == "__main__":
    main()
