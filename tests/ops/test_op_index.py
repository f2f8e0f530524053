"""The op index (pybackward/data/op_index.json): fresh, faithful, and lazy.

The registry answers from the index until an op type's code is read, then
imports its family (pybackward/ops/__init__.py). These tests hold the three
promises that makes: the index is what the families declare today (a new or
changed op fails here until `python tools/gen_op_index.py` is run); an
IndexedOpDef behaves as its family's OpDef (data fields and grad ops); and
the families imported in any order give the same registry as a full import.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import pybackward.ops as ops
from pybackward.ops import registry
from pybackward.ops.registry import CODE_FIELDS, FwdOp

ROOT = Path(__file__).resolve().parents[2]
GEN = ROOT / "tools" / "gen_op_index.py"
INDEX = json.loads(ops.INDEX_FILE.read_text())


def _run(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def test_index_is_fresh():
    r = subprocess.run([sys.executable, str(GEN), "--check"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (f"{r.stderr.strip()}\nAn op family changed: regenerate the index with "
                               f"`python tools/gen_op_index.py` and commit pybackward/data/op_index.json")


def test_check_fails_on_a_stale_index(tmp_path):
    """The freshness check is not vacuous: one changed record makes it fail, naming the script."""
    stale = json.loads(ops.INDEX_FILE.read_text())
    group, rec = stale["ops"]["relu"]
    stale["ops"]["relu"] = [group, rec.replace('"X"', '"Z"')]
    path = tmp_path / "op_index.json"
    path.write_text(json.dumps(stale))
    r = subprocess.run([sys.executable, str(GEN), "--check", "--index", str(path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "tools/gen_op_index.py" in r.stderr


def _fwd(d: registry.OpDef) -> FwdOp:
    return FwdOp(d.type, {s: [f"{s.lower()}_0", f"{s.lower()}_1"] for s in d.inputs},
                 {s: [f"out_{s.lower()}"] for s in d.outputs}, (), {"x_0@GRAD"})


def test_every_indexed_opdef_is_its_familys():
    """Each type's IndexedOpDef (decoded from the index, no family imported by
    it) has the real OpDef's data fields, and makes the same grad ops."""
    real = registry.all_ops()
    assert set(real) == set(INDEX["ops"])
    data_fields = [f.name for f in registry.dataclasses.fields(registry.OpDef)
                   if f.name not in CODE_FIELDS and f.name != "grad"]
    for t, (_group, rec) in INDEX["ops"].items():
        stub, d = ops.from_record(t, json.loads(rec)), real[t]
        for name in data_fields:
            assert getattr(stub, name) == getattr(d, name), (t, name)
        assert stub.has_kernel == (d.kernel is not None), t
        assert stub.has_grad == d.has_grad and stub.grad_kind == d.grad_kind, t
        assert stub.differentiable_inputs == d.differentiable_inputs, t
        if stub.grad_kind is not None and "grad" not in json.loads(rec).get("code", ()):
            try:
                want = d.make_grad(_fwd(d))
            except Exception as e:      # NoGradMaker: the stub refuses the same way
                with pytest.raises(type(e)):
                    stub.make_grad(_fwd(d))
                continue
            assert stub.make_grad(_fwd(d)) == want, t


_ORDER = r"""
import json, random, sys
import pybackward.ops as ops
from pybackward.ops import registry
idx = json.loads(ops.INDEX_FILE.read_text())
rng = random.Random(int(sys.argv[1]))
types = list(idx["ops"]); rng.shuffle(types)
for t in types[:300]:
    d = registry.get(t)
    if rng.random() < 0.5:
        d.kernel        # imports the family (and its group) now, in this random order
table = registry.all_ops()
bad = [t for t, (g, rec) in idx["ops"].items()
       if json.dumps(ops.record(table[t]), separators=(",", ":"), sort_keys=True) != rec]
print(json.dumps({"bad": bad, "extra": sorted(set(table) ^ set(idx["ops"]))}))
"""


@pytest.mark.parametrize("seed", [1, 2])
def test_families_imported_in_any_order_give_the_same_registry(seed):
    r = _run(_ORDER, str(seed))
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out == {"bad": [], "extra": []}


_LAZY = r"""
import json, sys
import pybackward.ops as ops
from pybackward.ops import registry
from pybackward.base.errors import UnknownOpError
out = {}
d = registry.get("conv2d")
out["stub"] = type(d).__name__
out["spec"] = d.grad.type
out["before"] = ops.loaded_families() + [m for m in ("numpy",) if m in sys.modules]
try:
    registry.get("conv2dd")
except UnknownOpError as e:
    out["error"] = str(e)
out["after_error"] = ops.loaded_families()
out["kernel"] = callable(d.kernel)
out["after_kernel"] = ops.loaded_families()
out["real"] = type(registry.get("conv2d")).__name__
print(json.dumps(out))
"""


def test_a_family_is_imported_when_its_code_is_read():
    r = _run(_LAZY)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["stub"] == "IndexedOpDef" and out["spec"] == "conv2d_grad"
    assert out["before"] == [] and out["after_error"] == []     # data, and unknown types, import nothing
    assert "did you mean conv2d" in out["error"] and f"{len(INDEX['ops'])} op types" in out["error"]
    assert out["kernel"] is True and "pybackward.ops.nn.conv" in out["after_kernel"]
    assert out["real"] == "OpDef"


_TWICE = r"""
import pybackward.ops as ops
from pybackward.ops import registry

def my_relu(call):
    return {"Out": call.x("X")}

try:
    registry.register(registry.OpDef(type="relu", inputs=("X",), outputs=("Out",), kernel=my_relu))
except ValueError as e:
    print("refused:", e, "|", "pybackward.ops.math.activation" in ops.loaded_families())
else:
    print("accepted")
"""


def test_a_user_cannot_shadow_a_family_op_not_imported_yet():
    """Registering a type a family declares fails as before the index, imported family or not."""
    r = _run(_TWICE)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("refused: op type 'relu' registered twice") and r.stdout.strip().endswith("True")


def test_load_families_imports_the_families_of_the_types_given():
    code = ("import json, pybackward.ops as ops\n"
            "ops.load_families(['conv2d', 'relu', 'no_such_type', 'feed'])\n"
            "print(json.dumps(ops.loaded_families()))")
    r = _run(code)
    assert r.returncode == 0, r.stderr[-2000:]
    loaded = json.loads(r.stdout)
    assert {"pybackward.ops.nn.conv", "pybackward.ops.math.activation"} <= set(loaded)
    assert "pybackward.ops.linalg.eig" not in loaded
