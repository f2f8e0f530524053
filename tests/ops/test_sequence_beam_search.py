"""beam_search (ops/sequence/beam_search.py) against Paddle 3.3.1's CPU values.

Paddle's CPU beam_search reads scores as float32 whatever the kernel's dtype,
so its float64 runs fail and tests/ops/test_kernels_vs_paddle.py skips these
cases (PADDLE_REFUSES); here every run Paddle made (float32) is compared:
values, dtypes and the outputs' LoDs (testdata/kernels/decode_beam.paddle.*).
"""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import pybackward
from pybackward.base.errors import ExecutionError
from pybackward.interpreter.executor import Executor, Scope
from pybackward.ops import opcheck, registry

KDIR = pathlib.Path(__file__).resolve().parents[2] / "testdata" / "kernels"
#: Cases Paddle refuses in every dtype, with why.
REFUSED_EVERYWHERE = {
    "beam_search-2": "without `ids` Paddle 3.3.1's beam_search fails reading a float32 tensor as int64 "
                     "(its functor would take the column as the id, as pybackward does)",
}


def paddle_runs(family: str):
    """(family, case, dtype) for every run Paddle made of the family's samples."""
    report = json.loads((KDIR / f"{family}.paddle.json").read_text())
    for name, runs in sorted(report.items()):
        for dtype, r in runs.items():
            if "fetched" in r:
                yield pytest.param(family, name, dtype, id=f"{name}-{dtype}")


def compare_with_paddle(family: str, name: str, dtype: str) -> None:
    from test_kernels_vs_paddle import _compare
    cases = {c["case"]: c for c in json.loads((KDIR / f"{family}.samples.json").read_text())}
    arrays = dict(np.load(KDIR / f"{family}.samples.npz"))
    run = json.loads((KDIR / f"{family}.paddle.json").read_text())[name][dtype]
    paddle = np.load(KDIR / f"{family}.paddle.npz")
    case = cases[name]
    ins = {slot: [arrays[f"{name}|in|{slot}|{i}"] for i in range(n)] for slot, n in case["inputs"].items()}
    ins = {s: [a.astype(dtype) if a.dtype.kind == "f" else a for a in v] for s, v in ins.items()}
    out_lods: dict = {}
    outs, _ = opcheck.run_with_grads(case["op"], ins, case["attrs"], case["outputs"], {},
                                     lod=case.get("lod"), out_lods=out_lods)
    inter = registry.get(case["op"]).intermediate_outputs
    for key in run["fetched"]:
        kind, slot, i = key.split("|")
        if kind != "out" or slot in inter:
            continue
        _compare(f"{name} [{dtype}] {key}", outs[slot][int(i)], paddle[f"{name}|{dtype}|{key}"], dtype, None)
        if case.get("lod") is not None:
            got = out_lods.get(slot, [None] * (int(i) + 1))[int(i)]
            assert got == run.get("lods", {}).get(key), f"{name} {key}: LoD {got}, Paddle {run.get('lods')}"


@pytest.mark.parametrize("family,name,dtype", list(paddle_runs("decode_beam")))
def test_decode_beam_equals_paddle(family, name, dtype):
    compare_with_paddle(family, name, dtype)


def test_refusals_are_the_known_ones():
    report = json.loads((KDIR / "decode_beam.paddle.json").read_text())
    everywhere = {n for n, runs in report.items() if all("error" in r for r in runs.values())}
    assert everywhere == set(REFUSED_EVERYWHERE)
    for name, runs in report.items():  # float64 scores: Paddle's data<float>() check
        assert "float32" in runs["float64"]["error"] and "float64" in runs["float64"]["error"]


def test_float64_scores_are_refused_as_paddle_does():
    lod = [[0, 1], [0, 1]]
    ins = {"pre_ids": [np.array([[1]], np.int64)], "pre_scores": [np.zeros((1, 1))],
           "ids": [np.array([[3, 4]], np.int64)], "scores": [np.array([[-1.0, -2.0]])]}
    with pytest.raises(ExecutionError, match="float32"):
        opcheck.run_with_grads("beam_search", ins, {"level": 0, "beam_size": 1, "end_id": 0},
                               {"selected_ids": 1, "selected_scores": 1}, {},
                               lod={s: lod for s in ins})


def test_ties_at_the_cut_follow_paddles_insertion():
    """Equal (score, row) candidates at the cut: Paddle's sorted insertion keeps
    the first beam_size - 1 of them and, in the last place, the last one."""
    ins = {"pre_ids": [np.array([[5]], np.int64)], "pre_scores": [np.zeros((1, 1), np.float32)],
           "ids": [np.array([[1, 2, 3, 4, 5]], np.int64)], "scores": [np.full((1, 5), -1.0, np.float32)]}
    lod = [[0, 1], [0, 1]]
    outs, _ = opcheck.run_with_grads("beam_search", ins, {"level": 0, "beam_size": 3, "end_id": 0},
                                     {"selected_ids": 1, "selected_scores": 1, "parent_idx": 1}, {},
                                     lod={s: lod for s in ins})
    assert outs["selected_ids"][0].reshape(-1).tolist() == [1, 2, 5]


# --------------------------------------------------------------------------
# beam_search_decode: tensor arrays whose elements carry LoDs, which the
# interpreter cannot hold yet (decode_beam.ARRAY_LOD_HOOK); the kernel is
# called with the per-element LoDs it would get, and compared with Paddle's
# values (testdata/kernels/decode_beam_arrays.py -> decode_beam.arrays.json)
# --------------------------------------------------------------------------
def _decode(scn, dtype):
    from pybackward.ops.registry import Call, get
    steps = scn["steps"]
    ids = [np.array(s[0], np.int64).reshape(-1, 1) for s in steps]
    scores = [np.array(s[1], dtype).reshape(-1, 1) for s in steps]
    lods = [s[2] for s in steps]
    call = Call("beam_search_decode", {"Ids": [ids], "Scores": [scores]},
                {"beam_size": scn["beam_size"], "end_id": scn["end_id"]},
                {"SentenceIds": ["ids"], "SentenceScores": ["scores"]}, lods={"Ids": [lods], "Scores": [lods]})
    return get("beam_search_decode").kernel(call)


_ARRAYS = json.loads((KDIR / "decode_beam.arrays.json").read_text())


@pytest.mark.parametrize("name,dtype", [(n, d) for n in _ARRAYS for d in ("float32", "float64")])
def test_beam_search_decode_equals_paddle(name, dtype):
    from pybackward.ops.registry import LOD_KEY
    want = _ARRAYS[name]["paddle"][dtype]
    got = _decode(_ARRAYS[name]["scenario"], dtype)
    assert got["SentenceIds"].tolist() == want["ids"]
    assert got["SentenceScores"].dtype == np.dtype(want["dtype"])
    np.testing.assert_array_equal(got["SentenceScores"], np.array(want["scores"], want["dtype"]))
    assert got[LOD_KEY]["SentenceIds"] == want["lod"] and got[LOD_KEY]["SentenceScores"] == want["score_lod"]


def test_beam_search_decode_refuses_array_steps_without_their_lods():
    """An array whose elements carry no LoD (or one LoD for the whole array) is refused in one line."""
    from pybackward.ops.registry import Call, get
    ids = [np.array([[1]], np.int64)]
    for lods in (None, {"Ids": [[[0, 1], [0, 1]]]}):
        call = Call("beam_search_decode", {"Ids": [ids], "Scores": [[np.zeros((1, 1), np.float32)]]},
                    {"beam_size": 1, "end_id": 0}, {"SentenceIds": ["a"], "SentenceScores": ["b"]}, lods=lods)
        with pytest.raises(ExecutionError, match="each step of the array needs its own LoD"):
            get("beam_search_decode").kernel(call)


def _decode_program(steps: int, dtype: str):
    """Each step's ids and scores (fed with their LoDs) written into two tensor
    arrays with write_to_array, then beam_search_decode over the arrays."""
    from pybackward.base.dtypes import VarType
    prog = pybackward.Program()
    b = prog.global_block()
    for name in ("ids_arr", "scores_arr"):
        b.create_var(name, dtype="int64" if name == "ids_arr" else dtype, type=VarType.DENSE_TENSOR_ARRAY)
    for t in range(steps):
        b.create_var(f"ids_{t}", (-1, 1), "int64")
        b.create_var(f"scores_{t}", (-1, 1), dtype)
        b.create_var(f"i_{t}", (1,), "int64")
        b.append_op("fill_constant", {}, {"Out": [f"i_{t}"]}, {"shape": [1], "dtype": int(VarType.INT64),
                                                                 "value": float(t)})
        b.append_op("write_to_array", {"X": [f"ids_{t}"], "I": [f"i_{t}"]}, {"Out": ["ids_arr"]}, {})
        b.append_op("write_to_array", {"X": [f"scores_{t}"], "I": [f"i_{t}"]}, {"Out": ["scores_arr"]}, {})
    b.create_var("sent_ids", (-1,), "int64")
    b.create_var("sent_scores", (-1,), dtype)
    return prog, b


@pytest.mark.parametrize("name,dtype", [(n, d) for n in _ARRAYS for d in ("float32", "float64")])
def test_beam_search_decode_in_a_program_equals_paddle(name, dtype):
    """The steps reach beam_search_decode through write_to_array, each array
    element keeping its own LoD (ops/lod.py ArrayLoDs), and the sentences and
    their LoDs equal Paddle's."""
    scn, want = _ARRAYS[name]["scenario"], _ARRAYS[name]["paddle"][dtype]
    prog, b = _decode_program(len(scn["steps"]), dtype)
    b.append_op("beam_search_decode", {"Ids": ["ids_arr"], "Scores": ["scores_arr"]},
                {"SentenceIds": ["sent_ids"], "SentenceScores": ["sent_scores"]},
                {"beam_size": scn["beam_size"], "end_id": scn["end_id"]})
    feed = {}
    for t, (ids, scores, lod) in enumerate(scn["steps"]):
        feed[f"ids_{t}"] = (np.array(ids, np.int64).reshape(-1, 1), lod)
        feed[f"scores_{t}"] = (np.array(scores, dtype).reshape(-1, 1), lod)
    exe = Executor()
    got_ids, got_scores = exe.run(pybackward.loads(pybackward.dumps(prog)), feed=feed,
                                  fetch_list=["sent_ids", "sent_scores"], scope=Scope())
    assert got_ids.tolist() == want["ids"]
    np.testing.assert_array_equal(got_scores, np.array(want["scores"], want["dtype"]))
    assert exe.lod("sent_ids") == want["lod"] and exe.lod("sent_scores") == want["score_lod"]
