"""weight_quantize (ops/quant/weight_quant.py) against Paddle 3.3.1's CPU kernel on
float16 weights (testdata/kernels/weight_quant_refs.py -> weight_quant.refs.*):
every algo, arch 70 and the mixed-GEMM layout (80), per-column and 64-row
groups, three shapes (one with an all-zero column)."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from pybackward.base.errors import ExecutionError
from pybackward.ops import opcheck

KDIR = pathlib.Path(__file__).resolve().parents[2] / "testdata" / "kernels"
_CASES = json.loads((KDIR / "weight_quant.refs.json").read_text())
_REFS = np.load(KDIR / "weight_quant.refs.npz")


def _run(x, attrs):
    outs, _ = opcheck.run_with_grads("weight_quantize", {"x": [x]}, attrs, {"out": 1, "scale": 1}, {})
    return outs["out"][0], outs["scale"][0]


#: Paddle's llm.int8 with arch 70 reads past its buffer on a non-square x: its values there are
#: other memory (m < n) or it crashes (m > n); pybackward refuses both.
_UNDEFINED = {f"{shape}|llm.int8|70|{g}" for shape in ("64x128", "128x64") for g in (-1, 64)}


@pytest.mark.parametrize("case", [c for c in _CASES if "error" not in c and c["case"] not in _UNDEFINED],
                         ids=lambda c: c["case"])
def test_weight_quantize_equals_paddle(case):
    out, scale = _run(_REFS[f"{case['shape']}|x"], case["attrs"])
    want_out, want_scale = _REFS[f"{case['case']}|out"], _REFS[f"{case['case']}|scale"]
    assert out.dtype == want_out.dtype and out.shape == want_out.shape
    np.testing.assert_array_equal(out, want_out)
    assert scale.dtype == want_scale.dtype and scale.shape == want_scale.shape
    np.testing.assert_array_equal(scale, want_scale)


def test_paddle_failures_are_the_known_ones():
    """Paddle 3.3.1 crashes (SIGSEGV) or hangs on llm.int8 with arch 70 when x has more rows than
    columns; pybackward refuses those."""
    failed = {c["case"] for c in _CASES if "error" in c}
    assert failed == {f"128x64|llm.int8|70|{g}" for g in (-1, 64)}
    for shape in ("128x64", "64x128"):
        with pytest.raises(ExecutionError, match="non-square"):
            _run(_REFS[f"{shape}|x"], {"algo": "llm.int8", "arch": 70, "group_size": -1})


def test_float32_weights_are_refused_as_paddle_has_no_kernel_for_them():
    with pytest.raises(ExecutionError, match="float16"):
        _run(np.zeros((64, 64), np.float32), {"algo": "weight_only_int8", "arch": 80, "group_size": -1})
