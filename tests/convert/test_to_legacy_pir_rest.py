"""PIR -> legacy on the rest of testdata/pir/ (issue #34's "every PIR golden").

tests/convert/test_to_legacy.py checks the 18 recorded runs of testdata/pir/ (their values in
testdata/pir_values/) and `zoo`; this module checks every other program file there and keeps
the list whole: `test_every_file_of_testdata_pir_is_classified` fails when a file appears
without being put in one of the classes below.

* `LIVE_PIR` (older format versions of cnn, Paddle's re-saves and its readable re-saves of
  recorded cases): Paddle 3.3.1's legacy Executor (`FLAGS_enable_pir_api=0`) on the converted
  program gives what its PIR Executor gives on the original (deserialized by Paddle, as
  testdata/pir/gen_pir.py and testdata/pir_values/gen_pir_values.py load a `.json`), with the
  same seeded feeds and parameters and `paddle.seed`, for every value with a var Paddle's PIR
  side can fetch (top-level dense tensors, as gen_pir_values.py fetches them).
* `LIVE_OURS` (`zoo` in older versions, and `nan`): Paddle's PIR Executor cannot be the oracle
  -- it cannot fetch zoo's values after its tensor-array ops ("its type is phi::TensorArray",
  testdata/pir_values/README.md), and cannot read nan.json at all (it writes "NaN", reads only
  "NAN") -- so Paddle's legacy Executor on the converted program is compared with pybackward's
  PIR interpreter on the original instead (as test_to_legacy.py's `_zoo` does for zoo).
* `BARE_OPS` (`v<N>_bare_ops`): ops with no operands and no results, the attribute forms the
  version patches touch; they convert op for op with their attributes carried. Nothing runs
  them: with no operands there is nothing to compute, and Paddle's legacy Executor refuses
  each (the live test shows it: its required inputs are missing, or an attribute with no
  default that the bare PIR op does not carry either).
* `ELSEWHERE`: test_to_legacy.py's recorded runs and zoo. `REFUSED`: what to_legacy refuses,
  with the reason (test_to_legacy.py checks the refusals).

Offline, pybackward's legacy interpreter on each converted LIVE program gives what its PIR
interpreter gives on the original.
"""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from conftest import TESTDATA, run_paddle
from pybackward import pir
from pybackward.convert.to_legacy import ConversionError, NoLegacyCounterpartError, convert, resolve
from pybackward.interpreter.pir_executor import run as run_pir
from pybackward.pir.types import DenseTensorType
from pybackward.tensors.paddle_files import load_arrays
from test_to_legacy import REFUSED as PYLAYERS
from test_to_legacy import RUNS, run_legacy

PIR_DIR = TESTDATA / "pir"
SEED = 2024                          # paddle.seed of every run (testdata/pir_values' runs use it too)
RTOL, ATOL = 1e-5, 1e-6              # test_to_legacy.py's

#: Paddle's legacy Executor against Paddle's PIR Executor on the original.
LIVE_PIR = {
    "v1_cnn.json": "cnn in format version 1 (int32 pool strides), upgraded by the reader",
    "v1_cnn.upgraded.json": "Paddle's re-save of v1_cnn.json",
    "cnn_infer.resave.json": "Paddle's re-save of cnn_infer.json (attribute maps reordered)",
    "jit.resave.json": "Paddle's re-save of jit.json",
    "mlp_bwd.readable.json": "Paddle's readable re-save of mlp_bwd.json",
    "while.readable.json": "Paddle's readable re-save of while.json",
}
#: Paddle's legacy Executor against pybackward's PIR interpreter (Paddle's PIR Executor cannot
#: fetch zoo's values, and cannot read nan.json).
LIVE_OURS = {
    **{f"v{n}_zoo{s}.json": f"zoo in format version {n}" + (", Paddle's re-save" if s else "")
       for n in (1, 2, 3) for s in ("", ".upgraded")},
    "nan.json": "a NaN constant: Paddle writes \"NaN\" but reads only \"NAN\"",
}
#: Converted op for op, not run (no operands: nothing to compute).
BARE_OPS = {f"v{n}_bare_ops{s}.json": f"bare ops in format version {n}" + (", Paddle's re-save" if s else "")
            for n in (1, 2, 3) for s in ("", ".upgraded")}
#: Checked by test_to_legacy.py: the recorded runs (testdata/pir_values/) and zoo.
ELSEWHERE = {**{f"{RUNS[r]['case']}.json": "a recorded run (test_to_legacy.py)" for r in RUNS
                if RUNS[r]["case"] not in PYLAYERS},
             "zoo.json": "test_to_legacy.py: legacy interpreter and Executor against the PIR interpreter"}
#: Refused by to_legacy, with the reason.
REFUSED = {**{f"{c}.json": "pd_op.pylayer: its backward is a Python function of the writing process"
              for c in PYLAYERS},
           "print_zoo.json": "the printer's bare ops read values no op writes: not a program",
           "print_zoo.resave.json": "Paddle's re-save of print_zoo.json: not a program"}
CLASSES = {"live against Paddle's PIR Executor": LIVE_PIR, "live against the PIR interpreter": LIVE_OURS,
           "bare ops, op for op": BARE_OPS, "test_to_legacy.py": ELSEWHERE, "refused": REFUSED}
#: Files that are not programs: suffix -> what (each goes with a program file of its stem).
NOT_PROGRAMS = {".txt": "Paddle's print of <stem>.json", ".pdparams": "parameters of <stem>.json",
                ".pdiparams": "parameters of <stem>.json", ".pdopt": "optimizer state of <stem>.json (empty)"}
OTHER_FILES = {"README.md", "gen_pir.py", "manifest.json"}

LIVE = sorted(LIVE_PIR) + sorted(LIVE_OURS)


# --------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------
def _load(name: str) -> pir.Program:
    return pir.load(PIR_DIR / name)


def _stem(name: str) -> str:
    """`cnn_infer.resave.json` -> `cnn_infer`: the case whose parameter file a program uses."""
    return name.split(".")[0]


def _feeds(prog: pir.Program) -> dict[str, np.ndarray]:
    """Seeded random feeds for the program's `pd_op.data` ops, -1 dims 2; ints in [0, 3)."""
    rs = np.random.RandomState(SEED)
    out = {}
    for op in prog.ops:
        if op.name != "pd_op.data":
            continue
        t = op.results[0].type
        shape = [d if d >= 0 else 2 for d in t.dims]
        dtype = np.dtype(t.dtype)
        out[op.attr("name")] = (rs.randint(0, 3, size=shape) if dtype.kind in "iu"
                                else rs.randn(*shape)).astype(dtype)
    return out


def _params(name: str, prog: pir.Program) -> dict[str, np.ndarray]:
    """The case's `.pdparams` / `.pdiparams`, else seeded random for each `builtin.parameter`
    (standard normal: the only such files are v1_cnn and its re-save, train mode, whose batch
    norm reads no running variance)."""
    for sfx in (".pdparams", ".pdiparams"):
        path = PIR_DIR / (_stem(name) + sfx)
        if path.exists():
            return load_arrays(path, prog)
    rs = np.random.RandomState(SEED + 1)
    return {op.attr("parameter_name"): rs.randn(*op.results[0].type.dims).astype(op.results[0].type.dtype)
            for op in prog.parameters()}


def _without_bfloat16(prog: pir.Program) -> pir.Program:
    """zoo's bfloat16 cast taken out (NumPy cannot hold bfloat16; nothing reads it), as
    test_to_legacy.py's zoo tests do."""
    for op in [op for op in prog.ops if op.name == "pd_op.cast" and op.attr("dtype") == "bfloat16"]:
        assert not op.results[0].uses
        prog.block.remove(op)
    return prog


def _unwritten(op, k: int) -> bool:
    """Results a test-mode op leaves unwritten (testdata/pir_values' `skipped`): a test-mode
    dropout's mask, a test-mode batch norm's saved mean / variance / reserve space."""
    if not op.attr("is_test", False):
        return False
    return (op.name == "pd_op.dropout" and k == 1) or (op.name in ("pd_op.batch_norm", "pd_op.batch_norm_")
                                                       and k >= 3)


def _refs(prog: pir.Program, ids: dict[str, str]) -> list[str]:
    """Every top-level dense-tensor result with a legacy var (the values Paddle's PIR side
    fetches, gen_pir_values.py's rule; pd_op.fetch's own result and `_unwritten` ones left
    out, as there)."""
    return [f"%{v.id}" for op in prog.ops if op.name != "pd_op.fetch" for k, v in enumerate(op.results)
            if isinstance(v.type, DenseTensorType) and v.type.dtype != "bfloat16" and f"%{v.id}" in ids
            and not _unwritten(op, k)]


def _legacy(program, feeds: dict, params: dict, fetch: list[str]) -> dict[str, np.ndarray]:
    return run_legacy(program, feeds, params, fetch, SEED)


def _assert_same(have, want, what):
    assert have.dtype == want.dtype, f"{what}: dtype {have.dtype}, want {want.dtype}"
    assert have.shape == want.shape, f"{what}: shape {have.shape}, want {want.shape}"
    np.testing.assert_allclose(have, want, rtol=RTOL, atol=ATOL, err_msg=what)


# --------------------------------------------------------------------------
# 1. every file is classified
# --------------------------------------------------------------------------
def _unclassified(names: set[str]) -> list[str]:
    """What is wrong with a listing of testdata/pir/: program files in no class, or classified
    files that are gone, other files of an unknown kind or with no program of their stem."""
    classified = {n for cls in CLASSES.values() for n in cls}
    programs = {n for n in names if n.endswith(".json")} - OTHER_FILES
    bad = [f"unclassified {n}" for n in sorted(programs - classified)]
    bad += [f"gone {n}" for n in sorted(classified - programs)]
    for n in sorted(names - programs - OTHER_FILES):
        stem, _, sfx = n.partition(".")
        if "." + sfx not in NOT_PROGRAMS or f"{stem}.json" not in names:
            bad.append(f"unknown file {n}")
    return bad


def test_every_file_of_testdata_pir_is_classified():
    classified = [n for cls in CLASSES.values() for n in cls]
    assert len(classified) == len(set(classified)), "a file in two classes"
    names = {p.name for p in PIR_DIR.iterdir()}
    assert _unclassified(names) == []
    assert _unclassified(names | {"new.json", "cnn.npz", "new.txt"}) == \
        ["unclassified new.json", "unknown file cnn.npz"]      # new.txt goes with new.json
    assert _unclassified(names - {"nan.json"}) == ["gone nan.json", "unknown file nan.txt"]
    # the classes say what the files are
    versions = json.loads((PIR_DIR / "manifest.json").read_text())["versions"]
    assert {f"{v}.json" for v in versions} | {f"{v}.upgraded.json" for v in versions} == \
        {n for n in classified if n.startswith("v")}
    assert {f"{v}.json" for v, e in versions.items() if e["base"] == "bare_ops"} | \
        {f"{v}.upgraded.json" for v, e in versions.items() if e["base"] == "bare_ops"} == set(BARE_OPS)
    assert len(ELSEWHERE) == 15 and len(LIVE) == 13 and len(BARE_OPS) == 6


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_the_refused_files_are_refused(name):
    with pytest.raises((NoLegacyCounterpartError, ConversionError)) as e:
        convert(_load(name))
    assert "\n" not in str(e.value) and name in str(e.value)


# --------------------------------------------------------------------------
# 2. bare ops: op for op, attributes carried
# --------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(BARE_OPS))
def test_bare_ops_convert_op_for_op_with_their_attributes(name):
    """One legacy op per PIR op, of the mapped type, each PIR attribute under its legacy name
    with its value (after the reader's upgrade to version 4, as Paddle's re-save has it; the
    widened int64 / double attributes written back as the legacy protos' int / float). Not
    run: no operands, so nothing to compute."""
    prog = _load(name)
    upgraded = _load(name if name.endswith(".upgraded.json") else name.replace(".json", ".upgraded.json"))
    assert pir.equal(prog, upgraded)        # the reader's upgrade is Paddle's
    ops = convert(prog).program.global_block().ops
    assert len(ops) == len(prog.ops) == 8
    for op, lop in zip(prog.ops, ops):
        assert not op.operands and not op.results
        m = resolve(op.name).map
        assert lop.type == m.legacy_type and not lop.input_names and not lop.output_names, op.name
        legacy_name = {am.name: am.legacy for am in m.attrs}
        assert op.attrs, op.name
        for k, a in op.attrs.items():
            assert legacy_name.get(k), f"{op.name}.{k}: no legacy attribute"
            have, want = lop.attr(legacy_name[k]), a.py()
            assert have == (pytest.approx(want) if isinstance(want, (float, list)) else want), f"{op.name}.{k}"
            assert isinstance(have, list) == isinstance(want, list), f"{op.name}.{k}"


# --------------------------------------------------------------------------
# 3. offline: the legacy interpreter on the converted program, the PIR interpreter on the original
# --------------------------------------------------------------------------
@pytest.mark.parametrize("name", LIVE)
def test_the_legacy_interpreter_gives_what_the_pir_interpreter_gives(name):
    prog = _without_bfloat16(_load(name))
    conv = convert(prog)
    ids = conv.by_id()
    refs = _refs(prog, ids)
    assert len(refs) >= 3
    no_var = {op.name for op in prog.ops for v in op.results
              if isinstance(v.type, DenseTensorType) and f"%{v.id}" not in ids}
    assert no_var <= {"pd_op.full", "pd_op.full_int_array"}, f"{name}: values with no var: {no_var}"
    feeds, params = _feeds(prog), _params(name, prog)
    want = run_pir(prog, feeds, params, fetch=refs, paddle_seed=SEED)
    got = _legacy(conv.program, feeds, params, [ids[r] for r in refs])
    for r in refs:
        _assert_same(got[ids[r]], want[r], f"{name} {r} as {ids[r]}")


# --------------------------------------------------------------------------
# 4. live: Paddle's legacy Executor
# --------------------------------------------------------------------------
_PADDLE_SCRIPT = r"""
import json, sys
import numpy as np
import paddle
from paddle.base import core
paddle.enable_static()
jobs = json.load(open(sys.argv[1]))
place = paddle.CPUPlace()


def numbered(prog):
    # "%N" -> (value, top level?, op name): results numbered 1, 2, ... in write order
    out = []

    def walk(block, top):
        for op in block.ops:
            for r in op.results():
                out.append((r, top, op.name()))
            for b in op.blocks():
                walk(b, False)

    walk(prog.global_block(), True)
    return {f"%{i + 1}": x for i, x in enumerate(out)}


def run_pir(job, feeds):
    with paddle.pir_utils.IrGuard():
        prog = paddle.static.Program()
        core.deserialize_pir_program(job["pir"], prog, -1)
        values = numbered(prog)
        ids = [i for i in job["vars"] if values[i][1] and values[i][0].initialized()
               and values[i][0].is_dense_tensor_type() and not values[i][0].is_dense_tensor_array_type()
               and values[i][2] != "pd_op.fetch"]
        for op in list(prog.global_block().ops):
            if op.name() == "pd_op.fetch":      # its fetch column would clash with ours
                op.erase()
        outs = []
        for _ in range(2):
            scope = paddle.static.Scope()
            with paddle.static.scope_guard(scope):
                for k, v in np.load(job["params"]).items():
                    scope.var(k).get_tensor().set(v, place)
                paddle.seed(job["seed"])
                outs.append(paddle.static.Executor(place).run(prog, feed=feeds, fetch_list=[values[i][0] for i in ids]))
    keep, unstable = [], []
    for i, a, b in zip(ids, *outs):
        if a is None or not np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True):
            unstable.append(i)
        else:
            keep.append((i, np.asarray(a)))
    return keep, unstable


for job in jobs:
    print("job", job["name"], file=sys.stderr, flush=True)
    if job.get("bare"):         # expected to be refused: keep the reason
        try:
            prog = paddle.static.Program.parse_from_string(open(job["program"], "rb").read())
            with paddle.static.scope_guard(paddle.static.Scope()):
                paddle.static.Executor(place).run(prog, fetch_list=[])
            job["ran"] = True
        except Exception as e:
            job["refused"] = " ".join(str(e).split())[-600:]
        continue
    try:
        feeds = dict(np.load(job["feeds"]))
        if job.get("pir"):
            keep, job["unstable"] = run_pir(job, feeds)
            job["ids"] = [i for i, _ in keep]
            np.savez(job["out_pir"], **{i: a for i, a in keep})
        prog = paddle.static.Program.parse_from_string(open(job["program"], "rb").read())
        scope = paddle.static.Scope()
        with paddle.static.scope_guard(scope):
            for k, v in np.load(job["params"]).items():
                scope.var(k).get_tensor().set(v, place)
            paddle.seed(job["seed"])
            out = paddle.static.Executor(place).run(prog, feed=feeds, fetch_list=[job["vars"][i] for i in job["ids"]])
        np.savez(job["out"], **dict(zip(job["ids"], out)))
    except Exception as e:
        job["error"] = (type(e).__name__ + ": " + str(e))[-2000:]
json.dump(jobs, open(sys.argv[2], "w"))
print("ok", len(jobs))
"""


def _bare_programs(tmp_path) -> list[tuple[str, str, list[str], str]]:
    """Each bare op of each BARE_OPS file converted alone: (file, legacy type, the legacy
    attribute names the PIR op carries, .pdmodel path)."""
    out = []
    for name in sorted(BARE_OPS):
        prog = _load(name)
        for i, op in enumerate(prog.ops):
            legacy = convert(_load(name)).program
            block = legacy.global_block()
            for j in reversed(range(len(block.ops))):
                if j != i:
                    block.remove_op(j)
            (lop,) = block.ops
            path = tmp_path / f"{name}.{i}.pdmodel"
            path.write_bytes(legacy.to_bytes())
            names = {am.name: am.legacy for am in resolve(op.name).map.attrs}
            out.append((name, lop.type, [names[k] for k in op.attrs], str(path)))
    return out


@pytest.mark.paddle
def test_paddles_legacy_executor_gives_what_paddles_pir_executor_gives(tmp_path):
    """One Paddle process: LIVE_PIR files against Paddle's PIR Executor on the original (it
    fetches every value the legacy side has a var for, and gives the same bits), LIVE_OURS
    files against pybackward's PIR interpreter; and every bare op, alone, is refused by
    Paddle's legacy Executor: it misses the inputs its legacy op requires, or an attribute
    with no default that the bare PIR op does not carry either (lp_pool2d's kernel_size,
    PIR's operand; moe_permute's num_experts; moe_unpermute's total_zipped_tokens_num): the
    fixture's, not the conversion's."""
    jobs, wants = [], {}
    for name in LIVE:
        prog = _without_bfloat16(_load(name)) if name in LIVE_OURS else _load(name)
        conv = convert(prog)
        ids = conv.by_id()
        feeds, params = _feeds(prog), _params(name, prog)
        model = tmp_path / f"{name}.pdmodel"
        model.write_bytes(conv.program.to_bytes())
        np.savez(tmp_path / f"{name}.feeds.npz", **feeds)
        np.savez(tmp_path / f"{name}.params.npz", **params)
        refs = _refs(prog, ids)
        job = dict(name=name, program=str(model), params=str(tmp_path / f"{name}.params.npz"),
                   feeds=str(tmp_path / f"{name}.feeds.npz"), vars={r: ids[r] for r in refs}, seed=SEED,
                   out=str(tmp_path / f"{name}.out.npz"))
        if name in LIVE_PIR:
            job.update(pir=str(PIR_DIR / name), out_pir=str(tmp_path / f"{name}.pir.npz"))
        else:       # Paddle's PIR Executor cannot fetch zoo's values, nor read nan.json: ours is the oracle
            job["ids"] = refs
            wants[name] = run_pir(prog, feeds, params, fetch=refs, paddle_seed=SEED)
        jobs.append(job)
    bare = _bare_programs(tmp_path)
    jobs += [dict(name=f"bare:{path}", bare=True, program=path) for _, _, _, path in bare]
    spec, result = tmp_path / "jobs.json", tmp_path / "results.json"
    spec.write_text(json.dumps(jobs))
    r = run_paddle(_PADDLE_SCRIPT, str(spec), str(result))
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stderr[-3000:]
    done = {j["name"]: j for j in json.loads(result.read_text())}
    errors = {k: j["error"] for k, j in done.items() if "error" in j}
    assert not errors, errors
    for name in LIVE:
        job = done[name]
        got = dict(np.load(job["out"]))
        if name in LIVE_PIR:
            assert job["ids"] == list(job["vars"]) and job["unstable"] == [], \
                f"{name}: Paddle's PIR side left out {sorted(set(job['vars']) - set(job['ids']))}, " \
                f"unstable {job['unstable']}"
            want = dict(np.load(job["out_pir"]))
            for i in job["ids"]:        # the same kernels: the same bits
                assert got[i].dtype == want[i].dtype and got[i].shape == want[i].shape, f"{name} {i}"
                np.testing.assert_array_equal(got[i], want[i], err_msg=f"{name} {i} as {job['vars'][i]}")
        else:
            want = wants[name]
            for i in job["ids"]:
                _assert_same(got[i], np.asarray(want[i]), f"{name} {i} as {job['vars'][i]}")
        assert len(job["ids"]) >= 3 and set(got) == set(job["ids"])
    for name, type_, carried, path in bare:
        job = done[f"bare:{path}"]
        assert "refused" in job, f"{name}: Paddle's legacy Executor ran the bare {type_}: run it here"
        why = job["refused"]
        missing = re.search(r"Attribute \((\w+)\) is not set correctly", why)
        if missing:
            assert missing.group(1) not in carried, f"{name} {type_}: {why}"
        else:
            assert "Expected it != inputs_.end()" in why, f"{name} {type_}: {why}"
