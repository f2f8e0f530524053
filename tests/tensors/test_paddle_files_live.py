"""Paddle loads what pybackward writes: .pdparams/.pdopt through
`load_program_state`, .pdiparams through `load_inference_model` and
`load_vars(filename=...)`, per-var files through `load_vars`, every value
bit-exact. Skips cleanly without Paddle (see conftest.run_paddle)."""
from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np

import pybackward
from pybackward.tensors import paddle_files as pf

from conftest import TESTDATA, run_paddle

PF = TESTDATA / "paddle_files"

_SCRIPT = r"""
import hashlib, json, sys
import numpy as np
import paddle
from paddle import static
paddle.enable_static()
d = sys.argv[1]
exe = static.Executor(paddle.CPUPlace())

def digest(a):
    a = np.asarray(a)
    return [str(a.dtype), list(a.shape), hashlib.sha256(a.tobytes()).hexdigest()]

def scope_values(names):
    scope = static.global_scope()
    return {n: digest(np.array(scope.find_var(n).get_tensor())) for n in names}

out = {}
state = static.load_program_state(d + "/ours")             # ours.pdparams + ours.pdopt
out["pickle"] = {k: digest(v) for k, v in state.items()}

with static.scope_guard(static.Scope()):
    prog, feeds, fetches = static.load_inference_model(d + "/inf", exe)
    names = sorted(v.name for v in prog.list_vars() if static.io.is_persistable(v))
    out["pdiparams"] = scope_values(names)

with open(d + "/m.pdmodel", "rb") as f:
    main = static.Program.parse_from_string(f.read())
with static.scope_guard(static.Scope()):
    params = [v for v in main.list_vars() if static.io.is_persistable(v)]
    static.load_vars(exe, d + "/vars", main, vars=params)
    out["vars"] = scope_values([v.name for v in params])

with open(d + "/dtypes.pdmodel", "rb") as f:
    dprog = static.Program.parse_from_string(f.read())
with static.scope_guard(static.Scope()):
    dvars = [v for v in dprog.list_vars() if v.persistable]
    static.load_vars(exe, d, dprog, vars=dvars, filename="dtypes.pdiparams")
    out["dtypes"] = scope_values([v.name for v in dvars])
print("RESULT " + json.dumps(out))
"""


def _digest(a: np.ndarray) -> list:
    return [str(a.dtype), list(a.shape), hashlib.sha256(a.tobytes()).hexdigest()]


def test_paddle_loads_every_file_pybackward_writes(tmp_path):
    mlp = dict(np.load(PF / "mlp" / "values.npz"))
    adam = dict(np.load(PF / "adam" / "values.npz"))
    dtypes_vals = dict(np.load(PF / "dtypes" / "values.npz"))
    adam_params = pf.load_arrays(PF / "adam" / "adam.pdparams")
    pf.save_arrays(tmp_path / "ours.pdparams", {k: adam[k] for k in adam_params})
    pf.save_arrays(tmp_path / "ours.pdopt", {k: v for k, v in adam.items() if k not in adam_params})
    shutil.copy(PF / "mlp" / "inf.pdmodel", tmp_path / "inf.pdmodel")
    pf.save_arrays(tmp_path / "inf.pdiparams", mlp, pybackward.load(tmp_path / "inf.pdmodel"))
    shutil.copy(PF / "mlp" / "m.pdmodel", tmp_path / "m.pdmodel")
    pf.save_arrays(f"{tmp_path}/vars/", mlp)
    shutil.copy(PF / "dtypes" / "dtypes.pdmodel", tmp_path / "dtypes.pdmodel")
    pf.save_arrays(tmp_path / "dtypes.pdiparams", dtypes_vals, pybackward.load(tmp_path / "dtypes.pdmodel"))

    r = run_paddle(_SCRIPT, str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("RESULT "))
    got = json.loads(line[len("RESULT "):])
    assert got["pickle"] == {k: _digest(v) for k, v in adam.items()}
    assert got["pdiparams"] == {k: _digest(v) for k, v in mlp.items()}
    assert got["vars"] == {k: _digest(v) for k, v in mlp.items()}
    assert got["dtypes"] == {k: _digest(v) for k, v in dtypes_vals.items()}
