#!/usr/bin/env python
"""Record what Paddle 3.3.1's PIR Executor computes on each PIR golden of testdata/pir.

Run it with Paddle's interpreter from anywhere::

    /work/main/.paddle-venv/bin/python testdata/pir_values/gen_pir_values.py

It re-executes itself with Paddle in its default (PIR) mode, `PYTHONHASHSEED=0`
and `FLAGS_save_cf_stack_op` on (the control-flow backwards carry the stack
ops), rewrites every file here except itself and README.md, and prints a
sha256 over what it wrote. Paddle is the oracle only: pybackward never
imports it.

Per run `<r>` (a golden case, or a case with a second feed: `cond_bwd-neg`):

* `<r>.feeds.npz`: the feeds (fixed: `numpy.random.RandomState`, one seed per run);
* `<r>.params.npz`: the parameters, as the golden's parameter file holds them
  (`.pdparams` read with pickle; `.pdiparams` through `load_inference_model`);
* `<r>.values.npz`: every top-level value of the program that is a dense
  tensor, fetched in one `paddle.static.Executor.run` of the deserialized
  program (`paddle.base.core.deserialize_pir_program`), keyed `%N`, the id the
  value has in the file (results numbered 1, 2, ... in write order, as
  `pybackward.pir` numbers them): the loss, every gradient, everything between.

`manifest.json` lists every run: its program, feeds, parameter source, the
`paddle.seed` it ran under (a dropout without a fixed seed draws from Paddle's
global generator), per recorded id the op that defines it, and the values
left out with the reason. `legacy/` holds the MLP and the CNN built again in
legacy mode, for benchmarks/bench_pir_step.py. See README.md.
"""
from __future__ import annotations

import os
import sys

_SCRIPT = os.path.abspath(__file__)
if (os.environ.get("PYTHONHASHSEED") != "0" or os.environ.get("FLAGS_enable_pir_api", "1") not in ("1", "true", "True")
        or os.environ.get("FLAGS_save_cf_stack_op") != "1" or sys.argv[0] != _SCRIPT):
    env = dict(os.environ, PYTHONHASHSEED="0", FLAGS_save_cf_stack_op="1")
    env.pop("FLAGS_enable_pir_api", None)
    os.execve(sys.executable, [sys.executable, _SCRIPT] + sys.argv[1:], env)

os.environ.setdefault("GLOG_v", "0")
os.environ.setdefault("GLOG_minloglevel", "2")

import hashlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import pickle  # noqa: E402
import subprocess  # noqa: E402
import warnings  # noqa: E402
import zipfile  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

warnings.filterwarnings("ignore")
import paddle  # noqa: E402
from paddle.base import core  # noqa: E402

OUT = Path(_SCRIPT).parent
GOLDEN = OUT.parent / "pir"
KEEP = {"gen_pir_values.py", "README.md"}
#: The paddle.seed every run starts from (the CNN's dropout draws from the global generator).
PADDLE_SEED = 2024


def _feeds(case: str, variant: str, seed: int) -> dict[str, np.ndarray]:
    """Fixed feeds for a case, from its manifest entry's shapes (-1 -> 2); `neg` / `pos` force the sign."""
    spec = json.loads((GOLDEN / "manifest.json").read_text())["cases"][case]
    rs = np.random.RandomState(seed)
    out = {}
    for f in spec["feeds"]:
        shape = [d if d >= 0 else 2 for d in f["shape"]]
        if f["dtype"].startswith("int"):
            out[f["name"]] = rs.randint(0, 3, size=shape).astype(f["dtype"])
        else:
            a = rs.randn(*shape).astype(f["dtype"])
            if variant == "neg":
                a = -np.abs(a) - 0.5      # the other branch of a cond
            elif variant == "pos":
                a = np.abs(a) + 0.1
            out[f["name"]] = a
    return out


#: run name -> (case, variant). Forward and backward programs of one model get the same feeds.
RUNS: dict[str, tuple[str, str]] = {}
for _c in ("mlp", "cnn", "transformer", "while", "pylayer"):
    RUNS[_c] = (_c, "")
    RUNS[_c + "_bwd"] = (_c + "_bwd", "")
for _c in ("cond", "cond_in_while"):
    for _v in ("pos", "neg"):
        RUNS[f"{_c}-{_v}"] = (_c, _v)
        RUNS[f"{_c}_bwd-{_v}"] = (_c + "_bwd", _v)
RUNS["cnn_infer"] = ("cnn_infer", "")
RUNS["jit"] = ("jit", "")
# Not here: zoo (Paddle 3.3.1's executor fails fetching its values after the tensor
# array ops: "cannot get value ... its type is phi::TensorArray", then garbage types),
# print_zoo / nan (not runnable), the v<N>_ files (the same programs, older formats).


def _number(prog) -> list[tuple[int, str, object, bool]]:
    """(file id, op name, value, top level?) for every op result, in write order."""
    out: list = []

    def walk(block, top: bool) -> None:
        for op in block.ops:
            for r in op.results():
                out.append((len(out) + 1, op.name(), r, top))
            for b in op.blocks():
                walk(b, False)

    walk(prog.global_block(), True)
    return out


def _params(case: str, exe, scope) -> dict[str, np.ndarray]:
    spec = json.loads((GOLDEN / "manifest.json").read_text())["cases"][case]
    pfile = spec["params"]
    if pfile.endswith(".pdparams"):
        with open(GOLDEN / pfile, "rb") as f:
            return {k: np.asarray(v) for k, v in pickle.load(f).items()}
    # .pdiparams: Paddle's loader knows the order of the combined stream
    with paddle.static.scope_guard(scope):
        prog, _, _ = paddle.static.load_inference_model(str(GOLDEN / case), exe)
        names = [op.attrs()["parameter_name"] for op in prog.global_block().ops if op.name() == "builtin.parameter"]
        return {n: np.array(scope.find_var(n).get_tensor()) for n in names}


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """An .npz with fixed entry times and order, so a re-run gives the same bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name in sorted(arrays):
            one = io.BytesIO()
            a = np.asarray(arrays[name])
            if a.dtype == object:
                raise SystemExit(f"{path.name}: {name} is not an array: {arrays[name]!r}")
            np.lib.format.write_array(one, a, allow_pickle=False)
            z.writestr(zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0)), one.getvalue())
    path.write_bytes(buf.getvalue())


def _execute(case: str, params: dict, feeds: dict) -> tuple[list, list]:
    """One run of the deserialized program: [(id, op name)], [fetched value or None]."""
    prog = paddle.static.Program()
    core.deserialize_pir_program(str(GOLDEN / f"{case}.json"), prog, -1)
    fetch = [(i, name, r) for i, name, r, top in _number(prog)
             if top and r.initialized() and r.is_dense_tensor_type() and not r.is_dense_tensor_array_type()
             and name != "pd_op.fetch"]
    for op in list(prog.global_block().ops):
        if op.name() == "pd_op.fetch":   # its own fetch columns would clash with ours; its value is fetched
            op.erase()
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        for k, v in params.items():
            scope.var(k).get_tensor().set(v, paddle.CPUPlace())
        paddle.seed(PADDLE_SEED)
        outs = paddle.static.Executor(paddle.CPUPlace()).run(prog, feed=feeds, fetch_list=[r for _, _, r in fetch])
    return [(i, name) for i, name, _ in fetch], outs


def _test_mode_saved(case: str) -> set[int]:
    """Ids of the results a test-mode batch_norm leaves unwritten (they hold whatever
    memory they got: the same within a process, not across processes)."""
    prog = paddle.static.Program()
    core.deserialize_pir_program(str(GOLDEN / f"{case}.json"), prog, -1)
    out = set()
    for i, name, r, _ in _number(prog):
        op = r.get_defining_op()
        if name in ("pd_op.batch_norm", "pd_op.batch_norm_") and op.attrs().get("is_test") \
                and r.index() >= 3:
            out.add(i)
    return out


def run_one(run: str, case: str, variant: str) -> dict:
    params = _params(case, paddle.static.Executor(paddle.CPUPlace()), paddle.static.Scope())
    feeds = _feeds(case, variant, seed=sum(map(ord, case.replace("_bwd", ""))) + (7 if variant == "neg" else 0))
    ids, outs = _execute(case, params, feeds)
    _, again = _execute(case, params, feeds)
    values, skipped = {}, {}
    test_mode = _test_mode_saved(case)
    for (i, name), o, o2 in zip(ids, outs, again):
        if i in test_mode:
            skipped[f"%{i}"] = ("a test-mode batch_norm's saved mean / variance / reserve space: "
                                "Paddle leaves it unwritten")
        elif o is None:
            skipped[f"%{i}"] = "not written (a test-mode dropout's mask)"
        elif not np.array_equal(np.asarray(o), np.asarray(o2), equal_nan=True):
            skipped[f"%{i}"] = "differs between two runs (memory Paddle leaves unwritten)"
        else:
            values[f"%{i}"] = np.asarray(o)
    _save_npz(OUT / f"{run}.feeds.npz", feeds)
    _save_npz(OUT / f"{run}.params.npz", params)
    _save_npz(OUT / f"{run}.values.npz", values)
    return {"case": case, "variant": variant, "program": f"pir/{case}.json", "feeds": sorted(feeds),
            "params": sorted(params), "paddle_seed": PADDLE_SEED,
            "values": {f"%{i}": name for i, name in ids if f"%{i}" in values}, "skipped": skipped}


# --------------------------------------------------------------------------
# Legacy twins: the same models built in legacy mode, for the speed comparison
# --------------------------------------------------------------------------
_LEGACY = r"""
import json, os, sys, warnings
warnings.filterwarnings("ignore")
import numpy as np
import paddle
paddle.enable_static()
out_dir, case = sys.argv[1], sys.argv[2]
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.utils.unique_name.guard(), paddle.static.program_guard(main, startup):
    if case == "mlp":
        x = paddle.static.data("x", [-1, 4], "float32"); y = paddle.static.data("y", [-1, 1], "float32")
        h = paddle.static.nn.fc(x, 8, activation="relu"); o = paddle.static.nn.fc(h, 1)
        loss = paddle.mean((o - y) ** 2)
    elif case == "cnn":
        x = paddle.static.data("img", [-1, 1, 8, 8], "float32"); label = paddle.static.data("label", [-1, 1], "int64")
        c = paddle.nn.Conv2D(1, 4, 3, padding=1)(x); b = paddle.nn.BatchNorm2D(4)(c)
        r = paddle.nn.functional.relu(b); p = paddle.nn.functional.max_pool2d(r, 2, 2)
        d = paddle.nn.functional.dropout(p, 0.5); f = paddle.flatten(d, 1)
        logits = paddle.nn.Linear(64, 3)(f)
        loss = paddle.mean(paddle.nn.functional.cross_entropy(logits, label))
    pairs = paddle.static.append_backward(loss)
with open(os.path.join(out_dir, case + "_bwd.pdmodel"), "wb") as f:
    f.write(main.desc.serialize_to_string())
params = [p.name for p in main.global_block().all_parameters()]
print(json.dumps({"loss": loss.name, "params": params, "grads": {p.name: g.name for p, g in pairs}}))
"""
#: The models with a legacy twin (same code as testdata/pir/gen_pir.py, legacy mode). Only
#: these two: in legacy mode Paddle 3.3.1 sends paddle.sum / sin / matmul (the transformer's
#: attention, the cond and while models) to the PIR API ("sum(): argument (position 1) must be
#: Value, but got Variable").
TWINS = ("mlp", "cnn")


def _rank_key(name: str, names: list[str]) -> tuple:
    """`fc_2.w_0` among its family's names -> ('fc', rank of 2, 'w_0'): legacy and PIR
    programs of one model number their parameters from different counters."""
    prefix, _, rest = name.partition(".")
    stem, _, num = prefix.rpartition("_")
    nums = sorted({int(n.partition(".")[0].rpartition("_")[2]) for n in names
                   if n.partition(".")[0].rpartition("_")[0] == stem})
    return stem, nums.index(int(num)), rest


def legacy_twins(manifest: dict) -> None:
    """Write legacy/<case>_bwd.pdmodel (Paddle's legacy append_backward of the same
    model) with the PIR run's parameters under their legacy names."""
    legacy = OUT / "legacy"
    legacy.mkdir(exist_ok=True)
    for p in legacy.iterdir():
        p.unlink()
    env = dict(os.environ, FLAGS_enable_pir_api="0")
    manifest["legacy"] = {}
    for case in TWINS:
        run = case + "_bwd"
        done = subprocess.run([sys.executable, "-c", _LEGACY, str(legacy), case], env=env, check=True,
                              capture_output=True, text=True)
        facts = json.loads(done.stdout.strip().splitlines()[-1])
        pir_params = dict(np.load(OUT / f"{run}.params.npz"))
        by_key = {_rank_key(n, list(pir_params)): n for n in pir_params}
        names = {n: by_key[_rank_key(n, facts["params"])] for n in facts["params"]}
        _save_npz(legacy / f"{case}_bwd.params.npz", {n: pir_params[m] for n, m in names.items()})
        manifest["legacy"][case] = {"program": f"pir_values/legacy/{case}_bwd.pdmodel", "run": run,
                                    "loss": facts["loss"], "params": names,
                                    "grads": {names[p]: g for p, g in facts["grads"].items() if p in names}}


def main() -> None:
    for p in OUT.iterdir():
        if p.is_file() and p.name not in KEEP:
            p.unlink()
    paddle.enable_static()
    manifest = {"_generated_by": "testdata/pir_values/gen_pir_values.py", "paddle": paddle.__version__,
                "paddle_commit": paddle.version.commit, "runs": {}}
    for run, (case, variant) in RUNS.items():
        manifest["runs"][run] = run_one(run, case, variant)
    legacy_twins(manifest)
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    h, n = hashlib.sha256(), 0
    for p in sorted(OUT.rglob("*")):
        if p.is_file() and p.name not in KEEP:
            h.update(str(p.relative_to(OUT)).encode() + b"\0" + p.read_bytes())
            n += 1
    print(f"wrote {n} files, sha256 {h.hexdigest()}")


if __name__ == "__main__":
    main()
