"""PIR -> legacy on the PIR gradient-pass corpus (testdata/pir_backward/, issue #34's done-when).

The 62 cases there are Paddle 3.3.1 programs built from real models and from the gradient
options (forward `<c>.json`, Paddle's backward `<c>.bwd.json`), with Paddle's PIR Executor's
values of the backward program for 59 of them (`<c>.values.npz`, keyed `%N`). Here:

1. every backward program converts (`convert`) and pybackward's legacy interpreter, with the
   case's feeds and parameters and dropout drawing what Paddle's does (`PaddleGlobalRng` after
   the manifest's seed, as test_to_legacy.py's `_legacy_run`), gives every recorded value that
   has a var, within rtol 1e-5 / atol 1e-6 (the PIR interpreter's on these goldens,
   `test_pir_goldens.test_values_equal_paddles`) -- except 14 conv models, compared as
   `tests/test_models.py` compares the same models (`_rel_err`: max |diff| over the gradient's
   largest element, floored at 1e-3 of the model's largest gradient). Five well-conditioned ones
   (`SCALED`: eval mode, squeezenet, googlenet, crnn_ctc) have each value within rtol 1e-5 /
   atol 1e-6 or within 1e-5 of that: float32 summation order leaves small elements of weight
   gradients off by more than rtol 1e-5 (as it leaves Paddle's own float32 off its float64). Nine with train-mode batch_norm over a batch of 2
   (`ILL_CONDITIONED`), whose float32 gradients Paddle itself gets only to 1e-3..1e-1 of its
   float64 ones, get test_models' float32 rule: within 1e-3 where Paddle's float32 is within
   1e-4 of its float64. This is no tolerance over a bug: for each of the 14, the converted
   program computed in float64 gives Paddle's own float64 gradients
   (`testdata/models/<m>/grads64.npz`: the legacy corpus, built by the same builders with the
   same parameters and feeds, checked) within 1e-8 of the scale, and each case is checked to
   need its tier (it fails the stricter comparison).
2. every forward program converts and the legacy interpreter gives the loss / targets the PIR
   interpreter computes on the original, to the bit.
3. live: Paddle 3.3.1's legacy Executor (`FLAGS_enable_pir_api=0`) runs every converted
   backward program and gives Paddle's PIR values (and, for the looser tiers, the float64
   copy gives Paddle's float64 gradients); and on every forward program Paddle's PIR
   Executor on the original (`IrGuard`, `deserialize_pir_program`) and its legacy Executor
   on the converted program give the same loss / targets. One Paddle process for all,
   `paddle.seed(2024)` before every run.

`NOT_YET` names the goldens `to_legacy` still refuses, as strict xfails on the refusal (none
today: the RNN goldens with `pd_op.rnn` / `tensor_to_array` / `create_array_like` convert).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import pybackward
from conftest import TESTDATA, run_paddle
from pybackward import pir
from pybackward.convert.to_legacy import ConversionError, NoLegacyCounterpartError, convert
from pybackward.interpreter.gradcheck import to_float64
from pybackward.interpreter.pir_executor import run as run_pir

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backward" / "pir"))
from pir_cases import Case, cases, manifest  # noqa: E402
from test_to_legacy import run_legacy  # noqa: E402

SEED = manifest()["seed"]                   # paddle.seed of every recorded run (2024)
MODELS = TESTDATA / "models"
RTOL, ATOL = 1e-5, 1e-6                     # test_pir_goldens.test_values_equal_paddles
SCALED_TOL = 1e-5                           # _rel_err, SCALED
TOL64, TOL32, TOL32_OURS = 1e-8, 1e-4, 1e-3   # tests/test_models.py's

#: Well-conditioned convnets (Paddle's float32 within 3e-6 of its float64, and ours): a few
#: small elements of conv / linear gradients differ from Paddle's by more than rtol 1e-5
#: (float32 summation order; crnn_ctc: Paddle's float32 `linear_0.b_0@GRAD` is 2e-6 off its
#: float64, ours 4e-8), every gradient within 1e-5 of its largest element.
SCALED = {"vgg11_bn_eval", "resnet18_eval", "squeezenet1_0", "googlenet", "crnn_ctc"}
#: Train-mode batch_norm over a batch of 2 (tiny maps): float32 rounding is amplified by
#: 1/sqrt(var + eps); Paddle's float32 gradients are off from its float64 ones by 1e-3..1e-1.
ILL_CONDITIONED = {"vgg11_bn_train", "resnet18_train", "resnext", "wide_resnet50_2", "mobilenet_v1",
                   "mobilenet_v3_small", "mobilenet_v3_large", "shufflenet_v2", "inception_v3"}

#: Goldens to_legacy still refuses ("<case>" the forward file, "<case>.bwd" the backward one ->
#: why): strict xfails on the refusal. Empty: the 13 this module started with (`pd_op.rnn` with a
#: computed dropout_state_in: gru, lstm, simplernn, crnn_ctc, seq2seq_while, forward and backward;
#: `pd_op.tensor_to_array` / `create_array_like`: birnn_gru_cell, rnn_lstm_cell,
#: rnn_simple_cell_reverse backward) convert since to_legacy's RNN / tensor-array work, and pass.
NOT_YET: dict[str, str] = {}

VALUED = [c for c in cases() if c.path("values") is not None]


def _forwards() -> list[Case]:
    """One case per forward file (cond_false and the nested conds share theirs)."""
    seen, out = set(), []
    for c in cases():
        if c.forward_path not in seen:
            seen.add(c.forward_path)
            out.append(c)
    return out


FORWARDS = _forwards()


def _param(c: Case, key: str):
    marks = []
    if key in NOT_YET:
        marks.append(pytest.mark.xfail(strict=True, reason=NOT_YET[key],
                                       raises=(NoLegacyCounterpartError, ConversionError)))
    return pytest.param(c, marks=marks, id=c.name)


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------
def _inputs(c: Case) -> tuple[dict, dict]:
    return (c.feeds() if c.path("feeds") else {}), (c.params() if c.path("params") else {})


def _widen(arrays: dict) -> dict:
    return {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in arrays.items()}


def _legacy(program, feeds: dict, params: dict, fetch: list[str]) -> dict[str, np.ndarray]:
    """pybackward's legacy interpreter, random ops drawing what Paddle's draw after paddle.seed."""
    return run_legacy(program, feeds, params, fetch, SEED)


def _converted_values(c: Case):
    """(conversion, refs with a var, Paddle's values, our float32 values by ref)."""
    conv = convert(c.backward())
    ids, want = conv.by_id(), c.values()
    refs = [r for r in want if r in ids]
    assert refs == list(want), f"{c.name}: recorded values with no var: {sorted(set(want) - set(refs))}"
    feeds, params = _inputs(c)
    got = _legacy(conv.program, feeds, params, [ids[r] for r in refs])
    return conv, refs, want, {r: got[ids[r]] for r in refs}


def _rel_err(got, want, scale: float) -> float:
    """tests/test_models.py's: max |got - want| over max(max |want|, 1e-3 * scale)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"shape {got.shape}, Paddle's {want.shape}"
    return float(np.abs(got - want).max(initial=0) / max(np.abs(want).max(initial=0), 1e-3 * scale, 1e-300))


def _scale(arrays) -> float:
    return max(float(np.abs(a).max(initial=0)) for a in arrays)


def _twin(c: Case) -> tuple[Path, str]:
    """The legacy corpus model the case was built as (testdata/models/<m>, the variant's suffix)."""
    e = c.entry
    return MODELS / e["model"], "" if e["variant"] == "default" else f"_{e['variant']}"


def _twin_keys(c: Case) -> dict[str, str]:
    """"%N" of the loss and of each returned gradient -> its name in the twin's grads.npz (the
    parameter's `@GRAD`, whatever the converted var is called; the twin's loss var)."""
    mdir, _ = _twin(c)
    twin = json.loads((mdir / "case.json").read_text())["variants"][c.entry["variant"]]
    keys = {c.args_bwd["loss"]["id"]: twin["loss"]}
    for (_, g), name in zip(c.returned, c.entry["returned_names"]):
        if g is not None:
            keys[g] = f"{name}@GRAD"
    return keys


def _close(got, want) -> bool:
    return got.dtype == want.dtype and got.shape == want.shape and np.allclose(got, want, rtol=RTOL, atol=ATOL)


def _mismatches(refs, want, got, ids) -> list[str]:
    return [f"{r} as {ids[r]}: max |diff| {np.max(np.abs(got[r].astype(np.float64) - want[r])):.3g}"
            if got[r].shape == want[r].shape else f"{r} as {ids[r]}: shape {got[r].shape}, Paddle {want[r].shape}"
            for r in refs if not _close(got[r], want[r])]


# --------------------------------------------------------------------------
# 1. the backward programs: pybackward's legacy interpreter gives Paddle's PIR values
# --------------------------------------------------------------------------
def test_the_corpus_and_its_tiers():
    assert len(cases()) == 62 and len(VALUED) == 59
    names = {c.name for c in VALUED}
    assert SCALED <= names and ILL_CONDITIONED <= names and not SCALED & ILL_CONDITIONED
    assert all(c.group == "model" and c.entry.get("legacy_corpus") for c in VALUED
               if c.name in SCALED | ILL_CONDITIONED)
    files = {p.name for c in cases() for p in (c.forward_path, c.backward_path) if p is not None}
    assert {k.replace(".bwd", "") + (".bwd.json" if k.endswith(".bwd") else ".json") for k in NOT_YET} <= files
    assert len(NOT_YET) <= 13


@pytest.mark.parametrize("case", [_param(c, f"{c.name}.bwd") for c in VALUED])
def test_the_legacy_interpreter_gives_paddles_pir_values(case):
    conv, refs, want, got = _converted_values(case)
    ids = conv.by_id()
    for r in refs:
        assert got[r].dtype == want[r].dtype and got[r].shape == want[r].shape, \
            f"{case.name} {r} as {ids[r]}: {got[r].dtype}{got[r].shape}, Paddle {want[r].dtype}{want[r].shape}"
    if case.name in ILL_CONDITIONED:
        mdir, sfx = _twin(case)
        want64, keys = dict(np.load(mdir / f"grads64{sfx}.npz")), _twin_keys(case)
        scale = _scale(want64.values())
        stable = [r for r in refs if _rel_err(want[r], want64[keys[r]], scale) <= TOL32]
        assert case.args_bwd["loss"]["id"] in stable         # the loss is stable: compared
        bad = {ids[r]: e for r in stable if (e := _rel_err(got[r], want[r], scale)) > TOL32_OURS}
        assert not bad, f"{case.name}: {len(bad)} of {len(stable)} stable values off by more than " \
            f"{TOL32_OURS:g} of the scale: {bad}"
    elif case.name in SCALED:            # each value within rtol / atol, or 1e-5 of its largest element
        scale = _scale(want.values())
        bad = {ids[r]: e for r in refs
               if not _close(got[r], want[r]) and (e := _rel_err(got[r], want[r], scale)) > SCALED_TOL}
        assert not bad, f"{case.name}: {len(bad)} of {len(refs)} values off by more than {SCALED_TOL:g}: {bad}"
    else:
        bad = _mismatches(refs, want, got, ids)
        assert not bad, f"{case.name}: {len(bad)} of {len(refs)} values differ: {bad[:6]}"


@pytest.mark.parametrize("case", [_param(c, f"{c.name}.bwd") for c in VALUED if c.name in SCALED | ILL_CONDITIONED])
def test_where_float32_is_compared_loosely_float64_gives_paddles_float64(case):
    """The converted program in float64 against Paddle's float64 run of the same model (the legacy
    corpus twin: same builder, same parameters and feeds), within 1e-8 of the model's scale: the
    float32 differences of the looser tiers are rounding, not a conversion or kernel error. Each
    case needs its tier: it fails the stricter comparison."""
    mdir, sfx = _twin(case)
    feeds, params = _inputs(case)
    twin_params, twin_feeds = dict(np.load(mdir / "params.npz")), dict(np.load(mdir / "feeds.npz"))
    conv, refs, want, got = _converted_values(case)
    ids = conv.by_id()
    # the same inputs: every parameter the program reads (crnn_ctc's PIR build also has the rnn's
    # dropout state, and a flat weight buffer `lstm_0.w_0` no op reads, zero there)
    read = {n for b in conv.program.blocks for op in b.ops for s in op.input_names for n in op.input(s)}
    used = sorted(k for k in params if k in read and not k.startswith("dropout_state"))
    assert len(used) >= len(params) - 2 and all(np.array_equal(twin_params[k], params[k]) for k in used), case.name
    assert sorted(twin_feeds) == sorted(feeds) and all(np.array_equal(twin_feeds[k], v) for k, v in feeds.items())
    want64 = dict(np.load(mdir / f"grads64{sfx}.npz"))
    keys = _twin_keys(case)
    assert sorted(keys) == sorted(refs) and set(keys.values()) <= set(want64)
    got64 = _legacy(to_float64(conv.program), _widen(feeds), _widen(params), [ids[r] for r in refs])
    scale = _scale(want64.values())
    bad = {ids[r]: e for r in refs if (e := _rel_err(got64[ids[r]], want64[keys[r]], scale)) > TOL64}
    assert not bad, f"{case.name} float64: {bad}"
    if case.name in SCALED:
        assert _mismatches(refs, want, got, ids), f"{case.name} passes rtol {RTOL:g}: take it out of SCALED"
    else:
        scale32 = _scale(want.values())
        assert any(not _close(got[r], want[r]) and _rel_err(got[r], want[r], scale32) > SCALED_TOL for r in refs), \
            f"{case.name} passes the SCALED comparison: move it there"


def test_an_eval_batch_norm_grad_reads_the_running_statistics_as_paddles_legacy_maker_writes_it():
    """Paddle's legacy batch_norm_grad with global statistics (is_test / use_global_stats) reads
    Mean / Variance, the MeanOut / VarianceOut vars (testdata/models/vgg11_bn_eval/backward.pb);
    its kernel dereferences them, and Paddle's legacy Executor died (SIGSEGV) on the converted
    batch_norm_eval without them. PIR's batch_norm_grad passes mean_out / variance_out only."""
    paddles = next(op for op in pybackward.load(MODELS / "vgg11_bn_eval" / "backward.pb").global_block().ops
                   if op.type == "batch_norm_grad")
    assert paddles.input("Mean") == paddles.input("MeanOut")
    assert paddles.input("Variance") == paddles.input("VarianceOut")
    for name, global_stats in (("batch_norm_eval", True), ("vgg11_bn_eval", True), ("resnet18_eval", True),
                               ("batch_norm", False), ("cnn", False)):
        grads = [op for op in convert(cases(names=[name])[0].backward()).program.global_block().ops
                 if op.type == "batch_norm_grad"]
        assert grads, name
        for op in grads:
            assert op.attr("is_test") == global_stats, name
            if global_stats:
                assert op.input("Mean") == op.input("MeanOut") != [] and \
                    op.input("Variance") == op.input("VarianceOut") != [], name
            else:                                       # Paddle's maker adds them only with global stats
                assert op.input("Mean") == [] and op.input("Variance") == [], name


def test_arange_becomes_a_range_reading_its_dtype():
    """PIR's arange computes in its `dtype` attribute from float64 fulls; legacy range computes in
    Start's dtype (Paddle's kernel; pybackward's `range` kernel too, its executor then casting to
    the declared var), so Paddle's legacy Executor gave bert_encoder float64 position ids and its
    embedding refused them. Start / End / Step are cast to the dtype, as legacy paddle.arange
    does (testdata/models/bert_encoder/forward.pb: int64 fill_constants)."""
    legacy = pybackward.load(MODELS / "bert_encoder" / "forward.pb").global_block()
    paddles = next(op for op in legacy.ops if op.type == "range")
    assert {legacy.vars[n].dtype for s in ("Start", "End", "Step") for n in paddles.input(s)} == {np.dtype("int64")}
    for prog in (cases(names=["bert_encoder"])[0].forward(), cases(names=["bert_encoder"])[0].backward()):
        (arange,) = [op for op in prog.ops if op.name == "pd_op.arange"]
        assert arange.operands[0].type.dtype == "float64" and arange.attr("dtype") == "int64"
        block = convert(prog).program.global_block()
        (rng,) = [op for op in block.ops if op.type == "range"]
        for s in ("Start", "End", "Step"):
            (n,) = rng.input(s)
            assert block.vars[n].dtype == block.vars[rng.output("Out")[0]].dtype == np.dtype("int64"), s
            (cast,) = [op for op in block.ops if op.output_names and n in op.output("Out")]
            assert cast.type == "cast" and cast.attr("out_dtype") == 3


# --------------------------------------------------------------------------
# 2. the forward programs: the legacy interpreter on the converted program, the PIR
#    interpreter on the original
# --------------------------------------------------------------------------
def _forward_refs(c: Case, prog: pir.Program) -> list[str]:
    """The call's loss / targets / inputs in `<c>.json` that some op computes."""
    out = []
    for key in ("loss", "targets", "inputs"):
        for ref in c.refs(key):
            if ref and ref.get("id") and ref["id"] not in out:
                op = prog.value(ref["id"]).defining_op
                if op is None or op.name not in ("pd_op.data", "builtin.parameter"):
                    out.append(ref["id"])
    return out


@pytest.mark.parametrize("case", [_param(c, c.name) for c in FORWARDS])
def test_every_forward_computes_what_the_pir_interpreter_computes(case):
    prog = case.forward()
    conv = convert(prog)
    ids = conv.by_id()
    refs = [r for r in _forward_refs(case, prog) if r in ids]
    assert refs, f"{case.name}: no loss / target with a var"
    feeds, params = _inputs(case)
    want = run_pir(case.forward(), feeds, params, fetch=refs, paddle_seed=SEED)
    got = _legacy(conv.program, feeds, params, [ids[r] for r in refs])
    for r in refs:
        np.testing.assert_array_equal(got[ids[r]], want[r], err_msg=f"{case.name} {r} as {ids[r]}")
        assert got[ids[r]].dtype == want[r].dtype


# --------------------------------------------------------------------------
# 3. live: Paddle's legacy Executor on the converted programs, its PIR Executor on the originals
# --------------------------------------------------------------------------
_PADDLE_SCRIPT = r"""
import json, sys
import numpy as np
import paddle
from paddle.base import core
paddle.enable_static()
jobs = json.load(open(sys.argv[1]))
place = paddle.CPUPlace()


def pir_values(prog, ids):
    # "%N": results numbered 1, 2, ... in write order (an op's results, then its regions' blocks)
    out = []

    def walk(block):
        for op in block.ops:
            out.extend(op.results())
            for b in op.blocks():
                walk(b)

    walk(prog.global_block())
    return [out[i - 1] for i in ids]


for job in jobs:
    print("job", job["name"], file=sys.stderr, flush=True)     # names the job a crash stopped at
    try:
        scope = paddle.static.Scope()
        with paddle.static.scope_guard(scope):
            for k, v in np.load(job["params"]).items():
                scope.var(k).get_tensor().set(v, place)
            feeds = dict(np.load(job["feeds"]))
            if job["kind"] == "pir":
                with paddle.pir_utils.IrGuard():
                    prog = paddle.static.Program()
                    core.deserialize_pir_program(job["program"], prog, -1)
                    fetch = pir_values(prog, job["fetch"])
                    paddle.seed(job["seed"])
                    out = paddle.static.Executor(place).run(prog, feed=feeds, fetch_list=fetch)
            else:
                prog = paddle.static.Program.parse_from_string(open(job["program"], "rb").read())
                paddle.seed(job["seed"])
                out = paddle.static.Executor(place).run(prog, feed=feeds, fetch_list=job["fetch"])
        np.savez(job["out"], *out)
    except Exception as e:
        job["error"] = (type(e).__name__ + ": " + str(e))[-2000:]
json.dump(jobs, open(sys.argv[2], "w"))
print("ok", len(jobs))
"""


def _try_convert(c: Case, program: pir.Program, key: str):
    """The conversion, or None for a NOT_YET golden still refused."""
    try:
        return convert(program)
    except (NoLegacyCounterpartError, ConversionError):
        if key in NOT_YET:
            return None
        raise


@pytest.mark.paddle
@pytest.mark.slow
def test_paddles_legacy_executor_gives_its_pir_values_on_the_corpus(tmp_path):
    """One Paddle process: (a) the legacy Executor on every converted backward program gives the
    values Paddle's PIR Executor recorded (and, for SCALED / ILL_CONDITIONED, on the float64
    copy, Paddle's float64 gradients); (b) on every forward program, the PIR Executor on the
    original and the legacy Executor on the converted program give the same loss / targets."""
    jobs, checks, refused = [], {}, []

    def job(name, kind, program, params, feeds, fetch):
        pfile, ffile = tmp_path / f"{name}.params.npz", tmp_path / f"{name}.feeds.npz"
        np.savez(pfile, **params)
        np.savez(ffile, **feeds)
        jobs.append(dict(name=name, kind=kind, program=str(program), params=str(pfile), feeds=str(ffile),
                         fetch=fetch, seed=SEED, out=str(tmp_path / f"{name}.out.npz")))

    for c in VALUED:
        conv = _try_convert(c, c.backward(), f"{c.name}.bwd")
        if conv is None:
            refused.append(f"{c.name}.bwd")
            continue
        ids, want = conv.by_id(), c.values()
        refs = [r for r in want if r in ids]
        feeds, params = _inputs(c)
        model = tmp_path / f"{c.name}.bwd.pdmodel"
        model.write_bytes(conv.program.to_bytes())
        job(f"bwd:{c.name}", "legacy", model, params, feeds, [ids[r] for r in refs])
        checks[f"bwd:{c.name}"] = (c, "bwd", [(ids[r], want[r]) for r in refs])
        if c.name in SCALED | ILL_CONDITIONED:
            mdir, sfx = _twin(c)
            want64, keys = dict(np.load(mdir / f"grads64{sfx}.npz")), _twin_keys(c)
            wide = tmp_path / f"{c.name}.bwd64.pdmodel"
            wide.write_bytes(to_float64(conv.program).to_bytes())
            job(f"bwd64:{c.name}", "legacy", wide, _widen(params), _widen(feeds), [ids[r] for r in refs])
            checks[f"bwd64:{c.name}"] = (c, "bwd64", [(ids[r], want64[keys[r]]) for r in refs])
    for c in FORWARDS:
        prog = c.forward()
        conv = _try_convert(c, prog, c.name)
        if conv is None:
            refused.append(c.name)
            continue
        ids = conv.by_id()
        refs = [r for r in _forward_refs(c, prog) if r in ids]
        feeds, params = _inputs(c)
        model = tmp_path / f"{c.name}.pdmodel"
        model.write_bytes(conv.program.to_bytes())
        job(f"pir:{c.name}", "pir", c.forward_path, params, feeds, [int(r[1:]) for r in refs])
        job(f"fwd:{c.name}", "legacy", model, params, feeds, [ids[r] for r in refs])
        checks[f"fwd:{c.name}"] = (c, "fwd", [f"{r} as {ids[r]}" for r in refs])
    assert all(k in NOT_YET for k in refused), refused
    kinds = [kind for _, kind, _ in checks.values()]
    assert kinds.count("bwd") + sum(k.endswith(".bwd") for k in refused) == len(VALUED) == 59
    assert kinds.count("fwd") + sum(not k.endswith(".bwd") for k in refused) == len(FORWARDS)
    assert kinds.count("bwd64") == len(SCALED | ILL_CONDITIONED) and all(items for _, _, items in checks.values())
    spec, result = tmp_path / "jobs.json", tmp_path / "results.json"
    spec.write_text(json.dumps(jobs))
    r = run_paddle(_PADDLE_SCRIPT, str(spec), str(result), timeout=1800)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stderr[-3000:]
    done = {j["name"]: j for j in json.loads(result.read_text())}
    errors = {k: j["error"] for k, j in done.items() if "error" in j}
    assert not errors, errors
    bad = []
    for name, (c, kind, items) in checks.items():
        got = np.load(done[name]["out"])
        if kind == "fwd":
            want = np.load(done[f"pir:{c.name}"]["out"])
            for k, what in enumerate(items):
                a, b = got[f"arr_{k}"], want[f"arr_{k}"]
                if a.dtype != b.dtype or a.shape != b.shape or not np.array_equal(a, b):
                    bad.append(f"forward {c.name} {what}: legacy {a.dtype}{a.shape}, PIR {b.dtype}{b.shape}, "
                               f"max |diff| {np.max(np.abs(a.astype(np.float64) - b)) if a.shape == b.shape else '-'}")
        elif kind == "bwd64":
            scale = _scale(w for _, w in items)
            bad += [f"{name} {n}: {e:.2g}" for k, (n, w) in enumerate(items)
                    if (e := _rel_err(got[f"arr_{k}"], w, scale)) > TOL64]
        else:
            bad += [f"{name} {n}: max |diff| {np.max(np.abs(got[f'arr_{k}'].astype(np.float64) - w)):.3g}"
                    for k, (n, w) in enumerate(items) if not _close(got[f"arr_{k}"], w)]
    assert not bad, f"{len(bad)} differences: {bad[:20]}"
