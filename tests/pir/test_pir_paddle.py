"""Live Paddle: files pybackward writes load in Paddle 3.3.1 and run to the same values.

For each golden program Paddle wrote, pybackward reads it and writes it out
again (as `readable=True` JSON, so the bytes differ from Paddle's), and one
Paddle process loads both with `deserialize_pir_program` (or
`load_inference_model` for the inference files), runs each with the Executor
on the same feeds and parameters, and compares every float value the
program's top-level ops compute, gradients included. Also run: the v1 CNN as
pybackward upgraded it against Paddle's own loading of the v1 file, and the
MLP with an op pybackward appended. Paddle's loader checks little (an unknown
op loads as a nameless one), so running the program is the check.
"""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from conftest import TESTDATA, run_paddle
from pybackward import pir
from pybackward.pir.model import Operation
from pybackward.pir.types import Attr

PIR = TESTDATA / "pir"
MANIFEST = json.loads((PIR / "manifest.json").read_text())

PADDLE_RUN = r"""
import json, os, pickle, sys, warnings
os.environ["FLAGS_enable_pir_api"] = "1"          # run_paddle sets legacy mode; these files are PIR
os.environ.setdefault("GLOG_minloglevel", "2")
warnings.filterwarnings("ignore")
import numpy as np
import paddle
from paddle.base import core
paddle.enable_static()
place = paddle.CPUPlace()


def feeds(specs):
    rng = np.random.RandomState(0)
    out = {}
    for s in specs:
        shape = [2 if d < 0 else d for d in s["shape"]]
        if s["dtype"].startswith("int"):
            out[s["name"]] = rng.randint(0, 3, size=shape).astype(s["dtype"])
        else:
            out[s["name"]] = rng.standard_normal(shape).astype(s["dtype"])
    return out


def run(job, path):
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        exe = paddle.static.Executor(place)
        if job["kind"] == "inference":
            prog, _, fetch = paddle.static.load_inference_model(path[: -len(".json")], exe)
        else:
            prog = paddle.static.Program()
            core.deserialize_pir_program(path, prog, -1)
            with open(job["params"], "rb") as f:
                params = pickle.load(f)
            for name, arr in params.items():
                if isinstance(arr, np.ndarray):
                    scope.var(name).get_tensor().set(arr, place)
            fetch = [v for op in prog.global_block().ops if op.name() != "builtin.parameter"
                     for v in op.results() if v.initialized() and v.is_dense_tensor_type()
                     and v.dtype in (paddle.float32, paddle.float64)]
        paddle.seed(0)
        out = exe.run(prog, feed=feeds(job["feeds"]), fetch_list=fetch)
    return [np.asarray(x) for x in out], [op.name() for op in prog.global_block().ops]


results = []
for job in json.load(open(sys.argv[1])):
    try:
        theirs, _ = run(job, job["paddle"])
        ours, names = run(job, job["ours"])
        n = len(theirs)
        diffs = [float(np.max(np.abs(a.astype("float64") - b.astype("float64")))) if a.size else 0.0
                 for a, b in zip(theirs, ours[:n])]
        shapes_equal = all(a.shape == b.shape for a, b in zip(theirs, ours[:n]))
        extra = [x.tolist() for x in ours[n:]]
        results.append({"name": job["name"], "values": n, "ours": len(ours), "max_diff": max(diffs, default=0.0),
                        "shapes_equal": shapes_equal, "extra": extra, "last": theirs[-1].tolist() if n else None,
                        "op_names": names})
    except Exception as e:
        results.append({"name": job["name"], "error": (type(e).__name__ + ": " + str(e))[-3000:]})
json.dump(results, open(sys.argv[2], "w"))
print("ok", len(results))
"""

RUNNABLE = [c for c, v in MANIFEST["cases"].items()
            if v["kind"] in ("static.save", "save_inference_model", "jit.save") and not c.startswith("pylayer")]


def _job(name: str, paddle_path, ours_path, case: str) -> dict:
    spec = MANIFEST["cases"][case]
    kind = "inference" if spec["kind"] != "static.save" else "static"
    return {"name": name, "kind": kind, "paddle": str(paddle_path), "ours": str(ours_path),
            "params": str(PIR / spec["params"]), "feeds": spec["feeds"]}


@pytest.mark.paddle
def test_paddle_runs_what_pybackward_writes(tmp_path):
    jobs = []
    for case in RUNNABLE:
        prog = pir.load(PIR / f"{case}.json")
        d = tmp_path / case
        d.mkdir()
        ours = d / f"{case}.json"
        pir.save(prog, ours, readable=True)
        paddle_path = PIR / f"{case}.json"
        if MANIFEST["cases"][case]["kind"] != "static.save":   # load_inference_model wants prefix.pdiparams
            shutil.copy(PIR / MANIFEST["cases"][case]["params"], d / MANIFEST["cases"][case]["params"])
        jobs.append(_job(case, paddle_path, ours, case))
    # the v1 CNN: pybackward's upgrade against Paddle's own reading of the v1 file
    upgraded = tmp_path / "v1_cnn.json"
    pir.save(pir.load(PIR / "v1_cnn.json"), upgraded)
    jobs.append(_job("v1_cnn", PIR / "v1_cnn.json", upgraded, "cnn"))
    # the MLP with an op pybackward appended: relu of the loss
    prog = pir.load(PIR / "mlp.json")
    loss = prog.ops[-1].results[0]
    prog.block.append(Operation("pd_op.relu", [loss], [loss.type], {}, {"stop_gradient": Attr.bools([False])}))
    edited = tmp_path / "mlp_edited.json"
    pir.save(prog, edited)
    jobs.append(_job("mlp_edited", PIR / "mlp.json", edited, "mlp"))

    spec, out = tmp_path / "jobs.json", tmp_path / "results.json"
    spec.write_text(json.dumps(jobs))
    r = run_paddle(PADDLE_RUN, str(spec), str(out), timeout=600)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stderr[-3000:]
    results = {x["name"]: x for x in json.loads(out.read_text())}
    assert set(results) == {j["name"] for j in jobs}
    for name, res in results.items():
        assert "error" not in res, f"{name}: {res.get('error')}"
        assert res["values"] > 0 and res["shapes_equal"], name
        assert res["max_diff"] == 0.0, f"{name}: outputs differ by {res['max_diff']}"
        if name != "mlp_edited":
            assert res["ours"] == res["values"], name
    edited_res = results["mlp_edited"]
    assert edited_res["op_names"][-1] != "" and "pd_op.relu" in edited_res["op_names"]
    assert len(edited_res["extra"]) == 1
    assert np.isclose(edited_res["extra"][0], max(edited_res["last"], 0.0))
