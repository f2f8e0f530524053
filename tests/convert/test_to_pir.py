"""Legacy -> PIR (`pybackward.convert.to_pir`) against Paddle 3.3.1's program translator.

The goldens (`testdata/convert/to_pir/`, written by `testdata/convert/gen_to_pir.py`
with a live Paddle) are what `paddle.pir.translate_to_pir` makes of every legacy
golden program; each must convert canonically equal, and what Paddle refused
must be refused. The value tests run the converted program with pybackward's
PIR interpreter and the original with the legacy interpreter.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import pybackward
from pybackward import pir
from pybackward.base.errors import ArgumentTypeError, ProgramFileError, PyBackwardError, UnknownOpError
from pybackward.convert.to_pir import to_pir, to_pir_with_map
from pybackward.interpreter import pir_executor
from pybackward.interpreter.executor import Executor, Scope, load_params
from pybackward.legacy.program import Program as LProgram

from conftest import require_paddle

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "testdata" / "convert" / "to_pir"
MANIFEST = json.loads((GOLDEN / "manifest.json").read_text())
CASES = MANIFEST["cases"]
TRANSLATED = sorted(n for n, c in CASES.items() if c.get("status") == "translated")
REFUSED = sorted(n for n, c in CASES.items() if c.get("status") == "refused")
#: The slowest goldens to convert (1,000 ops or more each): marked slow.
HEAVY = {"models/densenet121/backward", "models/densenet121/forward", "models/inception_v3/backward",
         "models/shufflenet_v2/backward"}


def _load(name: str) -> LProgram:
    return pybackward.load(str(ROOT / CASES[name]["source"]))


def _params(name: str) -> list:
    return [pytest.param(n, marks=pytest.mark.slow) if n in HEAVY else n for n in name]


def test_manifest_covers_the_legacy_goldens():
    """The goldens cover what the brief lists; Paddle translated most of them."""
    groups = {n.split("/")[0] for n in CASES}
    assert groups == {"models", "programs", "paddle_files"}
    assert any("while" in n for n in TRANSLATED) and any("cond" in n for n in TRANSLATED)
    assert len(TRANSLATED) >= 70 and all(CASES[n].get("why") for n in REFUSED)


@pytest.mark.parametrize("name", _params(TRANSLATED))
def test_golden_converts_canonically_equal(name):
    got = to_pir(_load(name))
    want = pir.load(str(GOLDEN / f"{name}.json"))
    d = pir.diff(want, got, ("paddle", "pybackward"), context=2)
    assert not d, f"{name}: {len(d)} diff lines\n" + "\n".join(d[:60])


@pytest.mark.parametrize("name", REFUSED)
def test_what_paddle_refuses_is_refused_in_one_line(name):
    with pytest.raises(PyBackwardError) as e:
        to_pir(_load(name))
    msg = str(e.value)
    assert "\n" not in msg and CASES[name]["source"] in msg
    assert any(t in msg for t in ("while_grad", "conditional_block_grad", "rnn_grad")), msg


def test_refusal_names_the_op_and_counts_it():
    prog = pybackward.load(str(ROOT / "testdata/programs/cond_in_while/backward.pb"))
    with pytest.raises(UnknownOpError) as e:
        to_pir(prog)
    # one conditional_block_grad and two while_grad (the nested and the outer loop)
    n = sum(1 for b in prog.blocks for op in b.ops if op.type in ("while_grad", "conditional_block_grad"))
    assert f"{n} ops with no PIR counterpart" in str(e.value)
    assert "'conditional_block_grad'" in str(e.value) and "'while_grad'" in str(e.value)


def test_unmapped_op_is_refused_by_name():
    prog = pybackward.load(str(ROOT / "testdata/models/lenet/forward.pb"))
    op = prog.blocks[0].ops[0]
    op.desc.type = "py_func"
    with pytest.raises(UnknownOpError, match=r"^.*1 op with no PIR counterpart.*'py_func'"):
        to_pir(prog)


def test_empty_output_of_rnn_grad_is_refused_like_paddle():
    """Paddle: "[op:rnn_grad] Output @EMPTY@ should not be null"."""
    with pytest.raises(ProgramFileError, match=r"rnn_grad.*'@EMPTY@'"):
        to_pir(_load("models/gru/backward"))


def test_not_a_legacy_program():
    with pytest.raises(ArgumentTypeError):
        to_pir(pir.load(str(GOLDEN / "models/lenet/forward.json")))  # type: ignore[arg-type]


def test_data_ops_come_first_in_reverse_read_order_then_parameters():
    """Paddle inserts each undefined var's data op at the very top."""
    got = to_pir(_load("models/lenet/forward"))
    heads = [(op.name, op.attr("name", None) or op.attr("parameter_name", None)) for op in got.ops[:3]]
    assert heads == [("pd_op.data", "label"), ("pd_op.data", "image"), ("builtin.parameter", "conv2d_0.w_0")]


def test_conversion_is_deterministic_and_writes_like_paddle():
    a, b = to_pir(_load("programs/while_array/forward")), to_pir(_load("programs/while_array/forward"))
    assert pir.dumps(a) == pir.dumps(b)
    assert pir.equal(pir.loads(pir.dumps(a)), pir.load(str(GOLDEN / "programs/while_array/forward.json")))


def test_param_map_binds_names_to_values():
    prog, names = to_pir_with_map(_load("programs/cond_block/forward"))
    assert names["w"].defining_op.name == "builtin.parameter"
    assert names["x"].defining_op.name == "pd_op.data"
    if_ops = [op for op in prog.ops if op.name == "pd_op.if"]
    assert any(names[n].defining_op is if_ops[0] for n in names)


# ------------------------------------------------------------------ values
def _values(d: str, stem: str) -> tuple[dict, dict]:
    """(legacy interpreter on the original, PIR interpreter on the converted program)."""
    lp = pybackward.load(str(ROOT / f"testdata/{d}/{stem}.pb"))
    feeds = dict(np.load(ROOT / f"testdata/{d}/feeds.npz"))
    params = dict(np.load(ROOT / f"testdata/{d}/params.npz"))
    case = json.loads((ROOT / f"testdata/{d}/case.json").read_text())
    made = {n for op in lp.blocks[0].ops for n in op.output_arg_names}
    fetch = [case["loss"]] + [p + "@GRAD" for p in case["params"] if p + "@GRAD" in made]
    # Paddle's translator reads each XShape through a data op: feed it zeros shaped like X.
    xshape_of = {op.output("XShape")[0]: op.input("X")[0] for op in lp.blocks[0].ops
                 if "XShape" in op.output_names and op.output("XShape")}
    prog, names = to_pir_with_map(lp)
    need = [op.attr("name") for op in prog.ops if op.name == "pd_op.data" and op.attr("name") in xshape_of]
    scope = Scope()
    load_params(scope, params)
    every = fetch + [xshape_of[n] for n in need]
    legacy = dict(zip(every, Executor().run(lp, feed=feeds, fetch_list=every, scope=scope)))
    feeds.update({n: np.zeros_like(legacy[xshape_of[n]]) for n in need})
    got = pir_executor.run(prog, feeds, params, fetch=[names[n] for n in fetch])
    return {k: legacy[k] for k in fetch}, dict(zip(fetch, got.values()))


@pytest.mark.parametrize("d,stem", [("models/lenet", "backward"), ("models/transformer_encoder_train", "backward"),
                                    ("programs/cond_block", "forward"), ("programs/while_array", "forward"),
                                    pytest.param("models/mobilenet_v1", "backward", marks=pytest.mark.slow)])
def test_converted_program_computes_the_same(d, stem):
    want, got = _values(d, stem)
    assert len(want) > 1 or stem == "forward"
    for k in want:
        np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(want[k]), err_msg=f"{d}/{stem}: {k}")


# ------------------------------------------------------------------ live Paddle
_LIVE = r"""
import sys, warnings
warnings.filterwarnings("ignore")
import paddle
from paddle.base import core
paddle.enable_static()
prog = paddle.pir.translate_to_pir(core.ProgramDesc(open(sys.argv[1], "rb").read()))
core.serialize_pir_program(prog, sys.argv[2], True, False, True)
"""


@pytest.mark.paddle
def test_live_paddle_translation_matches(tmp_path):
    """The goldens are current: Paddle translates a program, pybackward converts it equal."""
    py = require_paddle()
    src = ROOT / "testdata/programs/while_multi/forward.pb"
    out = tmp_path / "p.json"
    env = dict(os.environ, PYTHONHASHSEED="0")
    env.pop("FLAGS_enable_pir_api", None)
    r = subprocess.run([py, "-c", _LIVE, str(src), str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    d = pir.diff(pir.load(str(out)), to_pir(pybackward.load(str(src))), ("paddle", "pybackward"))
    assert not d, "\n".join(d[:60])
