"""Paddle 3.3.1's beam_search_decode on tensor arrays (ops/sequence/beam_search.py).

beam_search_decode reads tensor arrays whose elements carry their own 2-level
LoD, which the one-op pipeline (export_samples / gen_kernel_refs) cannot feed:
here each scenario's step tensors are fed as LoDTensors, written into two
arrays with write_to_array (which keeps each element's LoD) and decoded, on
Paddle's CPU executor, for float32 and float64 scores. Writes
decode_beam.arrays.json: per scenario its steps (ids, scores, lod), attrs,
and Paddle's SentenceIds / SentenceScores with their LoD (or Paddle's error).

    FLAGS_enable_pir_api=0 /path/to/paddle/python testdata/kernels/decode_beam_arrays.py
"""
import json
import os
import pathlib
import warnings

os.environ["FLAGS_enable_pir_api"] = "0"
warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import paddle  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent

# Each step: (ids, scores, lod), as beam_search writes them (ids/scores [n, 1]).
SCENARIOS = {
    # 2 sources, beam 2; source 0's second branch ends (id 0) at step 1 and repeats the end token
    "two_sources": {"beam_size": 2, "end_id": 0, "steps": [
        ([1, 1], [0.0, 0.0], [[0, 1, 2], [0, 1, 2]]),
        ([4, 0, 3, 5], [-0.5, -0.7, -0.2, -0.9], [[0, 1, 2], [0, 2, 4]]),
        ([7, 0, 6, 8], [-1.1, -0.7, -0.6, -1.3], [[0, 2, 4], [0, 1, 2, 4, 4]]),
    ]},
    # source 1 finishes and is pruned at step 2 (no candidates), source 0 goes on
    "pruned_source": {"beam_size": 2, "end_id": 0, "steps": [
        ([2, 2], [0.0, 0.0], [[0, 1, 2], [0, 1, 2]]),
        ([5, 6, 0, 0], [-0.3, -0.4, -0.1, -0.6], [[0, 1, 2], [0, 2, 4]]),
        ([9, 3], [-0.8, -0.5], [[0, 2, 4], [0, 1, 2, 2, 2]]),
        ([0, 0], [-0.9, -0.5], [[0, 2, 2], [0, 1, 2]]),
    ]},
    # beam 3, one source, candidates spread unevenly over prefixes
    "beam3": {"beam_size": 3, "end_id": 1, "steps": [
        ([2], [0.0], [[0, 1], [0, 1]]),
        ([3, 4, 5], [-0.1, -0.2, -0.3], [[0, 1], [0, 3]]),
        ([6, 7, 8], [-0.15, -0.35, -0.25], [[0, 3], [0, 2, 2, 3]]),
        ([1, 9, 1], [-0.2, -0.4, -0.3], [[0, 3], [0, 1, 3, 3]]),
    ]},
}


def run(scn, dtype):
    main, startup = paddle.static.Program(), paddle.static.Program()
    feed = {}
    with paddle.static.program_guard(main, startup):
        block = main.global_block()
        ids_arr = block.create_var(name="ids_arr", type=paddle.base.core.VarDesc.VarType.LOD_TENSOR_ARRAY,
                                   dtype="int64")
        sc_arr = block.create_var(name="scores_arr", type=paddle.base.core.VarDesc.VarType.LOD_TENSOR_ARRAY,
                                  dtype=dtype)
        for t, (ids, scores, lod) in enumerate(scn["steps"]):
            iv = paddle.static.data(f"ids_{t}", [-1, 1], "int64", lod_level=2)
            sv = paddle.static.data(f"scores_{t}", [-1, 1], dtype, lod_level=2)
            for v, a in ((iv, np.array(ids, np.int64).reshape(-1, 1)),
                         (sv, np.array(scores, dtype).reshape(-1, 1))):
                lt = paddle.base.core.LoDTensor()
                lt.set(a, paddle.CPUPlace())
                lt.set_lod(lod)
                feed[v.name] = lt
            i = paddle.full([1], t, "int64")
            block.append_op(type="write_to_array", inputs={"X": [iv], "I": [i]}, outputs={"Out": [ids_arr]})
            block.append_op(type="write_to_array", inputs={"X": [sv], "I": [i]}, outputs={"Out": [sc_arr]})
        out_ids = block.create_var(name="sent_ids", dtype="int64")
        out_sc = block.create_var(name="sent_scores", dtype=dtype)
        block.append_op(type="beam_search_decode", inputs={"Ids": [ids_arr], "Scores": [sc_arr]},
                        outputs={"SentenceIds": [out_ids], "SentenceScores": [out_sc]},
                        attrs={"beam_size": scn["beam_size"], "end_id": scn["end_id"]})
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    got = exe.run(main, feed=feed, fetch_list=[out_ids, out_sc], return_numpy=False)
    return {"ids": np.array(got[0]).tolist(), "scores": np.array(got[1]).tolist(),
            "dtype": str(np.array(got[1]).dtype), "lod": [list(level) for level in got[0].lod()],
            "score_lod": [list(level) for level in got[1].lod()]}


def main():
    paddle.enable_static()
    out = {}
    for name, scn in SCENARIOS.items():
        out[name] = {"scenario": scn, "paddle": {}}
        for dtype in ("float32", "float64"):
            try:
                out[name]["paddle"][dtype] = run(scn, dtype)
            except Exception as e:  # recorded, not hidden
                msg = [m.strip() for m in str(e).splitlines() if m.strip()]
                out[name]["paddle"][dtype] = {"error": next((m for m in msg if "Error" in m), msg[0])[:300]}
    (HERE / "decode_beam.arrays.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
