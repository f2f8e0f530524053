"""A PIR step against the legacy step of the same model, in the NumPy interpreter.

    python benchmarks/bench_pir_step.py [--repeat 200] [--batch 2]

For each model with a legacy twin in testdata/pir_values/legacy/ (the MLP and
the CNN of testdata/pir, built again by Paddle 3.3.1 in legacy mode and
differentiated by its legacy `append_backward`), one forward + backward step
fetching the loss and every parameter's gradient: the PIR program
(`pir_executor.PirExecutor.run`) and its legacy twin (`Executor.run`), same
feeds and parameters, best of `--repeat` runs after a warm-up. The programs
are tiny, so the time is mostly dispatch: the worst case for the ratio. The
MLP's loss and gradients are checked to agree between the two (the CNN's
dropout is unseeded: both draw from NumPy's generator here, in different
orders). The transformer, which has no legacy twin, is timed alone.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pybackward  # noqa: E402
from pybackward import pir  # noqa: E402
from pybackward.interpreter.executor import Executor, Scope  # noqa: E402
from pybackward.interpreter.pir_executor import PirExecutor, gradient_names  # noqa: E402

VALUES = ROOT / "testdata" / "pir_values"


def best_of(fn, repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _batch(feeds: dict, batch: int) -> dict:
    return {k: np.concatenate([v] * max(1, batch // v.shape[0])) if v.ndim and v.shape[0] == 2 else v
            for k, v in feeds.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--batch", type=int, default=2, help="batch size (the recorded feeds are repeated)")
    args = ap.parse_args(argv)
    manifest = json.loads((VALUES / "manifest.json").read_text())
    print(f"{'model':<12} {'ops pir':>8} {'ops legacy':>10} {'pir ms':>8} {'legacy ms':>10} {'pir/legacy':>10}")
    for case, twin in manifest["legacy"].items():
        run = twin["run"]
        prog = pir.load(ROOT / "testdata" / manifest["runs"][run]["program"])
        feeds = _batch(dict(np.load(VALUES / f"{run}.feeds.npz")), args.batch)
        params = dict(np.load(VALUES / f"{run}.params.npz"))
        grads = gradient_names(prog)
        exe = PirExecutor()         # NumPy's generator for the dropout, as the legacy Executor
        info = exe.compile(prog).info
        fetch = [f"%{info.loss.id}"] + sorted(grads)
        t_pir = best_of(lambda: exe.run(prog, feeds, params, fetch=fetch), args.repeat)

        legacy = pybackward.load(ROOT / "testdata" / twin["program"])
        lparams = dict(np.load(VALUES / "legacy" / f"{case}_bwd.params.npz"))
        lfetch = [twin["loss"]] + [twin["grads"][g[:-5]] for g in sorted(grads)]
        lexe = Executor()

        def legacy_step():
            scope = Scope()
            for k, v in lparams.items():
                scope.set(k, v)
            return lexe.run(legacy, feed=feeds, fetch_list=lfetch, scope=scope)

        t_legacy = best_of(legacy_step, args.repeat)
        if case == "mlp":
            ours, theirs = exe.run(prog, feeds, params, fetch=fetch), legacy_step()
            for (k, a), b in zip(ours.items(), theirs):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=k)
        n_legacy = len(legacy.global_block().ops)
        print(f"{case:<12} {prog.num_ops():>8} {n_legacy:>10} {t_pir * 1e3:>8.3f} {t_legacy * 1e3:>10.3f} "
              f"{t_pir / t_legacy:>10.2f}")
    run = "transformer_bwd"
    prog = pir.load(ROOT / "testdata" / manifest["runs"][run]["program"])
    feeds = _batch(dict(np.load(VALUES / f"{run}.feeds.npz")), args.batch)
    params = dict(np.load(VALUES / f"{run}.params.npz"))
    exe = PirExecutor()
    t = best_of(lambda: exe.run(prog, feeds, params), args.repeat)
    print(f"{'transformer':<12} {prog.num_ops():>8} {'-':>10} {t * 1e3:>8.3f} {'-':>10} {'-':>10}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
