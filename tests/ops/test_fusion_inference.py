"""Inference-only ops of ops/fusion/inference.py against Paddle 3.3.1's CPU values
(testdata/kernels/fused_infer.paddle.*), every run Paddle made, and their
edge cases (XXH64 test vectors, Paddle's no-op identity, coalesce padding)."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from pybackward.base.errors import ExecutionError
from pybackward.ops import opcheck
from pybackward.ops.fusion.inference import xxh64
from test_sequence_beam_search import compare_with_paddle, paddle_runs

KDIR = pathlib.Path(__file__).resolve().parents[2] / "testdata" / "kernels"


@pytest.mark.parametrize("family,name,dtype", [p for p in paddle_runs("fused_infer")
                                               if not p.values[1].startswith("coalesce_tensor")])
def test_fused_infer_equals_paddle(family, name, dtype):
    compare_with_paddle(family, name, dtype)


@pytest.mark.parametrize("name", [f"coalesce_tensor-{i}" for i in range(4)])
def test_coalesce_tensor_equals_paddle_where_paddle_writes(name):
    """Paddle leaves the alignment padding (and float64 inputs under an FP32
    dtype attr: refused) unset; the outputs and the data slots must agree."""
    cases = {c["case"]: c for c in json.loads((KDIR / "fused_infer.samples.json").read_text())}
    arrays = dict(np.load(KDIR / "fused_infer.samples.npz"))
    run = json.loads((KDIR / "fused_infer.paddle.json").read_text())[name]
    assert "float64" in run["float64"]["error"]
    paddle = np.load(KDIR / "fused_infer.paddle.npz")
    case = cases[name]
    ins = {"Input": [arrays[f"{name}|in|Input|{i}"] for i in range(case["inputs"]["Input"])]}
    outs, _ = opcheck.run_with_grads("coalesce_tensor", ins, case["attrs"], case["outputs"], {})
    fused_p = paddle[f"{name}|float32|out|FusedOutput|0"]
    fused = outs["FusedOutput"][0]
    assert fused.shape == fused_p.shape and fused.dtype == fused_p.dtype
    align = case["attrs"].get("align_size", -1)
    align = align if align > 0 else 4096
    written = np.zeros(fused_p.shape, bool)
    off = 0
    for i, x in enumerate(ins["Input"]):
        np.testing.assert_array_equal(outs["Output"][i], paddle[f"{name}|float32|out|Output|{i}"])
        written[off:off + x.size] = True
        off += -(-x.size * 4 // align) * align // 4 if case["attrs"].get("use_align", True) else x.size
    assert off == fused.size
    if case["attrs"].get("set_constant"):
        written[:] = True
    np.testing.assert_array_equal(fused[written], fused_p[written])


def test_xxh64_known_values():
    for data, want in ((b"", 0xEF46DB3751D8E999), (b"a", 0xD24EC4F1A98C6E5B), (b"abc", 0x44BC2CF5AD770999)):
        assert int(xxh64(np.frombuffer(data, np.uint8).reshape(1, -1), [0])[0, 0]) == want


def test_hash_refuses_rank_3():
    with pytest.raises(ExecutionError, match="2-D"):
        opcheck.run_with_grads("hash", {"X": [np.zeros((2, 2, 2), np.int64)]}, {"num_hash": 1, "mod_by": 10},
                               {"Out": 1}, {})


def test_seqpool_cvm_concat_refuses_empty_sequences():
    x = np.ones((3, 2))
    with pytest.raises(ExecutionError, match="empty sequence"):
        opcheck.run_with_grads("fusion_seqpool_cvm_concat", {"X": [x], "CVM": [np.ones((2, 2))]},
                               {"pooltype": "SUM"}, {"Out": 1}, {}, lod={"X": [[0, 0, 3]]})
