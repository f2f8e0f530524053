"""The fused walk (pybackward/backward/fused.py) gives exactly what the
step-by-step pass gives: the program's bytes and the returned
(param, grad) names, on every model of testdata/models/, on the fc MLP the
benchmarks use, and on hundreds of random straight-line programs (shared
inputs, fan-out, no-grad and stop_gradient vars, unused outputs, cascading
prunes, multi-input and multi-output ops, parameter_list / no_grad_set
variants). `fused.STATS` shows the walk ran where expected, so no test
compares the pass with itself. Each qualifying condition is then broken
on its own, and the walk must decline for that reason.
"""
from __future__ import annotations

import importlib.util
import json
import random
import sys
import warnings
from pathlib import Path

import pytest

import pybackward
from pybackward.backward import fused

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from randprog import OpSpec, VarSpec, materialize  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "testdata" / "models"


def _walks() -> int:
    return fused.STATS["walks"]


def _declines(reason: str) -> int:
    return fused.STATS["decline:" + reason]


def both_ways(load, run):
    """(bytes, result) with the walk on and off, and how many walks the on run did."""
    out = []
    walked = 0
    for on in (True, False):
        fused.ENABLED = on
        try:
            prog = load()
            before = _walks()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    res = run(prog)
                except pybackward.PyBackwardError as e:     # the same refusal both ways
                    res = ("error", type(e).__name__, str(e))
            if on:
                walked = _walks() - before
            out.append((pybackward.dumps(prog), res))
        finally:
            fused.ENABLED = True
    return out[0], out[1], walked


def _names(pairs):
    if isinstance(pairs, tuple):
        return pairs
    return [(p.name, g.name if g is not None else None) for p, g in pairs]


def _append(loss, **kw):
    return lambda prog: _names(pybackward.append_backward(loss, program=prog, **kw))


# --------------------------------------------------------------------------
# Every model of testdata/models/
# --------------------------------------------------------------------------
def _model_variants():
    out = []
    for d in sorted(MODELS.iterdir()):
        if (d / "case.json").exists():
            case = json.loads((d / "case.json").read_text())
            out += [(d.name, v) for v in case["variants"]]
    return out


def _model_both_ways(name: str, variant: str = "default", options: bool = False):
    """`both_ways` on a model of testdata/models with its case's loss (and,
    with `options`, its parameter_list and no_grad_set)."""
    spec = json.loads((MODELS / name / "case.json").read_text())["variants"][variant]
    kwargs = {}
    if options:
        kwargs = {"parameter_list": spec["parameter_list"],
                  "no_grad_set": set(spec["no_grad_set"]) if spec["no_grad_set"] else None}
    return both_ways(lambda: pybackward.load(MODELS / name / "forward.pb"), _append(spec["loss"], **kwargs))


@pytest.mark.parametrize("name,variant", _model_variants(), ids=lambda x: x)
def test_models_both_ways(name, variant):
    on, off, _ = _model_both_ways(name, variant, options=True)
    assert on[1] == off[1]
    assert on[0] == off[0]


def test_models_walk_where_expected():
    """The straight-line models (one block, spec-made grads) take the walk."""
    walked = []
    for name in ("lenet", "alexnet_train", "vgg11_bn_train", "mobilenet_v1"):
        walked.append(_model_both_ways(name)[2])
    assert sum(walked) >= 1, walked
    # ... and a model with control flow does not
    before = _walks()
    _model_both_ways("seq2seq_while")
    assert _walks() == before


# --------------------------------------------------------------------------
# The benchmarks' fc MLP
# --------------------------------------------------------------------------
def _bench():
    spec = importlib.util.spec_from_file_location("bench_backward", ROOT / "benchmarks" / "bench_backward.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fc_mlp_200():
    main, _ = _bench().build_fc_mlp(200)
    data = pybackward.dumps(main)
    on, off, walked = both_ways(lambda: pybackward.loads(data), _append("mean_0.tmp_0"))
    assert walked == 1
    assert on[1] == off[1] and len(on[1]) == 400
    assert on[0] == off[0]


# --------------------------------------------------------------------------
# Random straight-line programs
# --------------------------------------------------------------------------
_UNARY = ("relu", "tanh", "sigmoid", "exp", "square", "softmax")
_BINARY = ("elementwise_add", "elementwise_sub", "elementwise_mul", "mul", "matmul_v2")


def random_straight(seed: int):
    """(vars, ops, loss, params) of a random one-block program: ops with
    spec-made grads (and now and then one with a maker of its own, or an
    op reading one var twice: the walk declines those), fan-out, stop_gradient
    vars, unused outputs, multi-input (concat, stack) and multi-output
    (unstack, dropout, reshape2) ops."""
    rng = random.Random(seed)
    vars_: dict[str, VarSpec] = {}
    ops: list[OpSpec] = []
    pool: list[str] = []
    params: list[str] = []
    counters: dict[str, int] = {}
    odd = rng.random() < 0.15           # allow ops the walk declines
    redefine = rng.random() < 0.3
    taken: list[str] = []               # the inputs of the op being made

    def declare(name, kind="tmp", stop=False):
        vars_[name] = VarSpec(name, (4, 4), kind, stop)
        return name

    def out(t, j=0):
        k = counters.get(t, 0)
        if redefine and rng.random() < 0.15:
            # a var written a second time (accumulation then renames a sum's output)
            olds = [n for n in pool if vars_[n].kind == "tmp" and n not in taken]
            if olds:
                return rng.choice(olds)
        return declare(f"{t}_{k}.tmp_{j}", stop=rng.random() < 0.1)

    def pick():
        # recent vars more likely; old ones now and then (fan-out)
        if rng.random() < 0.3:
            name = rng.choice(pool)
        else:
            name = pool[-1 - min(int(rng.expovariate(0.7)), len(pool) - 1)]
        taken.append(name)
        return name

    for i in range(rng.randint(1, 3)):
        params.append(declare(f"p_{i}", "param", stop=rng.random() < 0.2))
        pool.append(params[-1])
    for i in range(rng.randint(1, 2)):
        pool.append(declare(f"x_{i}", "feed", stop=rng.random() < 0.7))
    for _ in range(rng.randint(1, 18)):
        taken.clear()
        r = rng.random()
        if r < 0.3:
            t = rng.choice(_UNARY)
            ins, outs = {"X": [pick()]}, {"Out": [out(t)]}
            attrs = {"axis": -1} if t == "softmax" else {}
        elif r < 0.6:
            t = rng.choice(_BINARY)
            a, b = pick(), pick()
            if a == b and not odd:
                b = rng.choice(pool)
            if t == "mul":
                attrs = {"x_num_col_dims": 1, "y_num_col_dims": 1}
            elif t == "matmul_v2":
                attrs = {"trans_x": False, "trans_y": False}
            else:
                attrs = {"axis": -1}
            ins, outs = {"X": [a], "Y": [b]}, {"Out": [out(t)]}
        elif r < 0.7:
            t = rng.choice(("concat", "stack"))
            xs = list(dict.fromkeys(pick() for _ in range(rng.randint(1, 3))))
            if t == "concat":
                ins, outs, attrs = {"X": xs}, {"Out": [out(t)]}, {"axis": 0}
            else:
                ins, outs, attrs = {"X": xs}, {"Y": [out(t)]}, {"axis": 0}
        elif r < 0.8:
            n = rng.randint(1, 3)
            t = "unstack"
            ins, outs, attrs = {"X": [pick()]}, {"Y": [out(t, j) for j in range(n)]}, {"axis": 0, "num": n}
        elif r < 0.88:
            t = rng.choice(("dropout", "reshape2"))
            if t == "dropout":
                mask = declare(f"dropout_{counters.get(t, 0)}.tmp_1", stop=True)
                ins, outs = {"X": [pick()]}, {"Out": [out(t)], "Mask": [mask]}
                attrs = {"dropout_prob": 0.5, "is_test": False,
                         "dropout_implementation": "upscale_in_train"}
            else:
                xs = declare(f"reshape2_{counters.get(t, 0)}.tmp_1", stop=True)
                ins, outs, attrs = {"X": [pick()]}, {"Out": [out(t)], "XShape": [xs]}, {"shape": [4, 4]}
        elif odd and r < 0.94:
            t = "scale"                 # a maker of its own: no template
            ins, outs, attrs = {"X": [pick()]}, {"Out": [out(t)]}, {"scale": 2.0, "bias": 0.0,
                                                                     "bias_after_scale": True}
        else:
            t = "mean"
            ins, outs, attrs = {"X": [pick()]}, {"Out": [out(t)]}, {}
        ops.append(OpSpec(t, ins, outs, attrs))
        counters[t] = counters.get(t, 0) + 1
        for slot_outs in outs.values():
            for o in slot_outs:
                if not vars_[o].stop_gradient or rng.random() < 0.5:
                    pool.append(o)
    # the loss: a mean over a sum of some of the last vars (fan-in)
    last = list(dict.fromkeys(pool[-rng.randint(1, 3):]))
    s = declare("sum_0.tmp_0")
    ops.append(OpSpec("concat", {"X": last}, {"Out": [s]}, {"axis": 0}))
    loss = declare("mean_0.tmp_0")
    vars_[loss].shape = (1,)
    ops.append(OpSpec("mean", {"X": [s]}, {"Out": [loss]}, {}))
    return vars_, ops, loss, params


def _written_twice(ops: list[OpSpec]) -> bool:
    outs = [o for op in ops for args in op.outputs.values() for o in args]
    return len(set(outs)) < len(outs)


def _variant_kwargs(seed: int, params: list[str], vars_: dict, ops: list[OpSpec]) -> dict:
    rng = random.Random(seed ^ 0x5EED)
    kw: dict = {}
    if _written_twice(ops) and rng.random() < 0.7:
        # a var written twice: refused unless paddle_exact (accumulation then
        # renames a pending sum's output)
        kw["paddle_exact"] = True
    r = rng.random()
    if r < 0.25 and params:
        kw["parameter_list"] = rng.sample(params, rng.randint(1, len(params)))
    elif r < 0.5:
        tmps = [n for n, v in vars_.items() if v.kind == "tmp" and n != "mean_0.tmp_0"]
        if tmps:
            kw["no_grad_set"] = set(rng.sample(tmps, min(len(tmps), rng.randint(1, 2))))
    elif r < 0.6:
        kw["paddle_exact"] = True
    return kw


N_RANDOM = 320


def test_random_straight_line_programs():
    walked = 0
    fills = sums = 0
    for seed in range(N_RANDOM):
        vars_, ops, loss, params = random_straight(seed)
        data = pybackward.dumps(materialize(vars_, ops))
        kw = _variant_kwargs(seed, params, vars_, ops)
        on, off, n = both_ways(lambda: pybackward.loads(data), _append(loss, **kw))
        assert on[1] == off[1], (seed, kw)
        assert on[0] == off[0], (seed, kw)
        walked += n
        if n:
            text = on[0]
            fills += b"fill_any_like" in text
            sums += b"@RENAME@block0@" in text
    # the walk did most of them, with accumulation and zero fills among them
    assert walked >= N_RANDOM // 2, walked
    assert sums >= 20 and fills >= 5, (sums, fills)


def test_random_programs_of_the_fuzz_generator():
    """tests/randprog.py's programs (shared vars, x*x, in-place ops ...), both ways."""
    from randprog import random_program
    for seed in range(40):
        rp = random_program(seed, max_ops=10, inplace=seed % 3 == 0)
        data = rp.to_bytes()
        on, off, _ = both_ways(lambda: pybackward.loads(data), _append(rp.loss))
        assert on[1] == off[1], seed
        assert on[0] == off[0], seed


# --------------------------------------------------------------------------
# Each qualifying condition declines when broken
# --------------------------------------------------------------------------
def _chain(extra_ops=(), extra_vars=(), same_input=False, writes_input=False):
    """x -> mul(p0) -> relu -> elementwise_add(p1) -> mean, plus what a case adds."""
    vars_ = {n: VarSpec(n, (4, 4), k, False) for n, k in
             (("x", "feed"), ("p0", "param"), ("p1", "param"), ("h0", "tmp"), ("h1", "tmp"), ("h2", "tmp"))}
    vars_["x"].stop_gradient = True
    for v in extra_vars:
        vars_[v.name] = v
    vars_["loss"] = VarSpec("loss", (1,), "tmp", False)
    ops = [OpSpec("mul", {"X": ["x"], "Y": ["p0"]}, {"Out": ["h0"]}, {"x_num_col_dims": 1, "y_num_col_dims": 1}),
           OpSpec("relu", {"X": ["h0"]}, {"Out": ["h1"]}, {}),
           OpSpec("elementwise_add", {"X": ["h1"], "Y": ["h1" if same_input else "p1"]},
                  {"Out": ["h1" if writes_input else "h2"]}, {"axis": -1}),
           *extra_ops]
    last = ops[-1].outputs[next(iter(ops[-1].outputs))][0]
    ops.append(OpSpec("mean", {"X": [last]}, {"Out": ["loss"]}, {}))
    return pybackward.dumps(materialize(vars_, ops))


def _declined(data: bytes, reason: str, run=None) -> None:
    run = run or _append("loss")
    before_d, before_w = _declines(reason), _walks()
    on, off, walked = both_ways(lambda: pybackward.loads(data), run)
    assert on == off
    assert walked == 0 and _walks() == before_w
    assert _declines(reason) == before_d + 1, dict(fused.STATS)


def test_the_plain_chain_walks():
    on, off, walked = both_ways(lambda: pybackward.loads(_chain()), _append("loss"))
    assert walked == 1 and on == off


def test_declines_when_disabled(monkeypatch):
    before = _declines("disabled")
    monkeypatch.setenv("PYBACKWARD_NO_FUSED", "1")
    prog = pybackward.loads(_chain())
    pybackward.append_backward("loss", program=prog)
    assert _declines("disabled") == before + 1
    monkeypatch.delenv("PYBACKWARD_NO_FUSED")
    monkeypatch.setattr(fused, "ENABLED", False)
    pybackward.append_backward("loss", program=pybackward.loads(_chain()))
    assert _declines("disabled") == before + 2


def test_declines_with_callbacks():
    def run(p):
        seen = []
        pairs = pybackward.append_backward("loss", program=p,
                                           callbacks=[lambda block, context: seen.append(1)])
        return _names(pairs), len(seen)
    _declined(_chain(), "callbacks", run)


def test_declines_pairwise_aggregation():
    _declined(_chain(), "aggregation", _append("loss", aggregation="pairwise"))


def test_declines_second_pass():
    def twice(p):
        pybackward.append_backward("loss", program=p)
        return [v.name for v in pybackward.gradients(["loss"], ["h0"], program=p)]
    before = _declines("second pass")
    on, off, walked = both_ways(lambda: pybackward.loads(_chain()), twice)
    assert on == off and walked == 1          # the first pass walks, the second declines
    assert _declines("second pass") == before + 1


def test_declines_sub_block():
    before = _declines("sub-block")
    on, off, walked = _model_both_ways("seq2seq_while")
    assert on == off and walked == 0
    assert _declines("sub-block") == before + 1


def test_declines_op_writing_its_input():
    # (off the path: keep_read_values looks at every op of the block)
    _declined(_chain(extra_ops=[OpSpec("relu", {"X": ["z"]}, {"Out": ["z"]}, {}),
                                OpSpec("relu", {"X": ["h2"]}, {"Out": ["h3"]}, {})],
                     extra_vars=[VarSpec("z", (4, 4)), VarSpec("h3", (4, 4))]), "op writes its input")


def test_declines_op_on_the_path_writing_its_input():
    _declined(_chain(writes_input=True), "op writes its input")


def test_declines_repeated_name():
    # (the templates from an op whose names are distinct: a template is never
    # recorded from one that repeats a name - that declines as "no template")
    pybackward.append_backward("loss", program=pybackward.loads(_chain()))
    _declined(_chain(same_input=True), "repeated name")


def test_declines_maker_without_template():
    _declined(_chain(extra_ops=[OpSpec("scale", {"X": ["h2"]}, {"Out": ["h3"]},
                                       {"scale": 2.0, "bias": 0.0, "bias_after_scale": True})],
                     extra_vars=[VarSpec("h3", (4, 4))]), "no template")


def test_declines_existing_grad_var():
    _declined(_chain(extra_vars=[VarSpec("h1@GRAD", (4, 4))]), "existing grad var")


def test_declines_unfed_grad_op(monkeypatch):
    """A grad op reading neither a forward var nor an earlier grad op's
    output (find_not_needed's head): here made so by a template whose grad
    op reads only gradients of a var nothing writes."""
    data = _chain()
    real = fused._prepare

    def unfed(tmpl, op, vals):
        f = real(tmpl, op, vals)
        if f and op.type == "relu":
            info, _ = f.ops[0]
            # relu_grad reading only `zz@GRAD` (made by nothing): a head
            f = fused._Fused([(info, lambda v: ["zz", "zz@GRAD", v[2]])], f.mapped)
        return f
    monkeypatch.setattr(fused, "_prepare", unfed)
    for t in _all_templates():
        t.fused = None
    try:
        before = _declines("unfed grad op")
        fused.ENABLED = True
        pybackward.append_backward("loss", program=pybackward.loads(data))
        assert _declines("unfed grad op") == before + 1
    finally:
        for t in _all_templates():
            t.fused = None


def _all_templates():
    from pybackward.backward import grad_ops
    return list(vars(grad_ops)["_TEMPLATES"].values())


def test_declines_in_place_grad_template(monkeypatch):
    """A template whose grad op reads and writes one position declines."""
    real = fused._prepare
    calls = []

    def spy(tmpl, op, vals):
        f = real(tmpl, op, vals)
        calls.append((op.type, f))
        return f
    monkeypatch.setattr(fused, "_prepare", spy)
    for t in _all_templates():
        t.fused = None
    # (relu_grad: Out, Out@GRAD -> X@GRAD; made to write Out@GRAD too)
    from pybackward.backward import grad_ops
    try:
        prog = pybackward.loads(_chain())
        relu = prog.global_block().ops[1]
        [(tmpl, vals, _)] = grad_ops.op_templates(grad_ops.spec_made([relu]), set())
        saved = tmpl.positions
        ins, outs = saved[0]
        in_grad = [p for _, ps in ins for p in ps if vals[p].endswith("@GRAD")][0]
        tmpl.positions = [(ins, [(outs[0][0], [in_grad])])]
        tmpl.fused = None
        assert fused._prepare(tmpl, prog.global_block().ops[1], vals) is False
    finally:
        tmpl.positions = saved
        for t in _all_templates():
            t.fused = None


def test_paddle_exact_and_gradients_with_target_gradients():
    """paddle_exact qualifies (the skipped corrections are off anyway);
    gradients() with a target gradient walks, and finish declares the vars
    the step-by-step way (the renames of the target's gradient)."""
    on, off, walked = both_ways(lambda: pybackward.loads(_chain()), _append("loss", paddle_exact=True))
    assert on == off and walked == 1

    def with_tgrad(p):
        g = p.global_block().create_var("g_in", shape=[1], dtype="float32")
        return _names([(v, v) for v in pybackward.gradients(["loss"], ["h0", "p0"], target_gradients=[g],
                                                               program=p) if v is not None])
    on, off, walked = both_ways(lambda: pybackward.loads(_chain()), with_tgrad)
    assert on == off and walked == 1


def test_long_names_and_large_ops():
    """Names past 127 bytes (two-byte lengths), a slot past 127 bytes and an
    op past 16383 bytes (three-byte length): the walk's bytes as the pass's."""
    long = "v" * 150
    xs = [f"{long}_{i}" for i in range(120)]
    vars_ = {n: VarSpec(n, (4, 4), "param") for n in xs}
    vars_["h"] = VarSpec("h", (4, 4))
    vars_[long + "_relu"] = VarSpec(long + "_relu", (4, 4))
    vars_["loss"] = VarSpec("loss", (1,))
    ops = [OpSpec("concat", {"X": xs}, {"Out": ["h"]}, {"axis": 0}),
           OpSpec("relu", {"X": ["h"]}, {"Out": [long + "_relu"]}, {}),
           OpSpec("elementwise_add", {"X": [long + "_relu"], "Y": [xs[0]]}, {"Out": ["h2"]}, {"axis": -1}),
           OpSpec("mean", {"X": ["h2"]}, {"Out": ["loss"]}, {})]
    vars_["h2"] = VarSpec("h2", (4, 4))
    data = pybackward.dumps(materialize(vars_, ops))
    on, off, walked = both_ways(lambda: pybackward.loads(data), _append("loss"))
    assert walked == 1
    assert on == off
    assert len(on[0]) > 40000


def test_declines_a_template_it_cannot_take():
    """text_cnn: a grad op the walk's steps do not cover (`_prepare` False)."""
    before = _declines("template")
    on, off, walked = _model_both_ways("text_cnn")
    assert on == off and walked == 0
    assert _declines("template") == before + 1


def test_declines_grad_blocks_loops_and_second_calls_directly():
    """The state conditions no public call reaches on its own: a grad block
    (`block`), a loop body (`loop`), input grad names (`second pass`), a
    FlatRun already taken in this pass."""
    from pybackward.backward.grad_ops import PassState, op_templates, spec_made
    prog = pybackward.loads(_chain())
    root = prog.global_block()
    state = PassState(prog, {0: set()}, {}, {})
    prog.appending_grad_times = 1
    loss = root.var("loss")
    other = prog.create_block(parent_idx=0)
    cases = [((root, other, None, None), "block"),
             ((root, root, None, root.ops[0]), "loop"),
             ((root, root, {"loss@GRAD"}, None), "second pass")]
    for (block, target, ign, owner), reason in cases:
        before = _declines(reason)
        assert not fused.fused_walk(block, list(root.ops), [loss], target, state, ign, owner, (spec_made, op_templates))
        assert _declines(reason) == before + 1, reason
    state.flat_run = object()
    before = _declines("flat run taken")
    assert not fused.fused_walk(root, list(root.ops), [loss], root, state, None, None, (spec_made, op_templates))
    assert _declines("flat run taken") == before + 1
    assert len(root.ops) == 4                      # nothing written


def test_in_place_and_odd_zero_fills_decline_inside_the_steps():
    from pybackward.backward.emit import FlatInfo, FlatOp
    info = FlatInfo("relu_grad", [("Out@GRAD", 1)], [("X@GRAD", 1)], b"", "", (0,), (1,))
    with pytest.raises(fused._Decline, match="in-place grad"):
        fused._accumulate([FlatOp(info, ["a@GRAD", "a@GRAD"])])
    # a kept op reading a no-grad `z@GRAD_slice_0@GRAD` (and another gradient):
    # its zero fill's X, `z@GRAD_slice_0`, would read as a gradient
    two = FlatInfo("add_grad", [("A", 1), ("B", 1)], [("O", 1)], b"", "", (0, 1), (2,))
    with pytest.raises(fused._Decline, match="gradient's gradient"):
        fused._remove_no_grad_branch([FlatOp(two, ["z@GRAD_slice_0@GRAD", "w@GRAD", "y@GRAD"])],
                                     {"z@GRAD_slice_0@GRAD"}, set(), [])
    # (a plain no-grad name fills: no decline)
    out = fused._remove_no_grad_branch([FlatOp(two, ["z@GRAD", "w@GRAD", "y@GRAD"])], {"z@GRAD"}, set(), [])
    assert [o.info.type for o in out] == ["fill_any_like", "add_grad"] and out[0].names == ["z", "z@GRAD"]


# --------------------------------------------------------------------------
# Round 2's shortcuts: each keyed as its slow form is
# --------------------------------------------------------------------------
def test_op_templates_attr_tail_equals_attrs_tail():
    """`op_templates` cuts each op's attr bytes off its serialisation itself
    (one-byte lengths inline, else `wire.attrs_tail`): the tail it keys by
    is `attrs_tail`'s - for plain ops, an op whose slot field is past 127
    bytes, and an op with no attrs at all (nothing after its type) - and
    ops differing in one attr get different templates."""
    from pybackward.backward import grad_ops
    from pybackward.legacy.wire import attrs_tail
    long = "w" * 140
    vars_ = {n: VarSpec(n, (4, 4), k) for n, k in
             (("x", "feed"), ("p0", "param"), ("p1", "param"), (long, "tmp"), ("h1", "tmp"), ("h2", "tmp"),
              ("h3", "tmp"))}
    ops = [OpSpec("mul", {"X": ["x"], "Y": ["p0"]}, {"Out": [long]}, {"x_num_col_dims": 1, "y_num_col_dims": 1}),
           OpSpec("relu", {"X": [long]}, {"Out": ["h1"]}, {}),
           OpSpec("mul", {"X": ["h1"], "Y": ["p1"]}, {"Out": ["h2"]}, {"x_num_col_dims": 1, "y_num_col_dims": 2}),
           OpSpec("relu", {"X": ["h2"]}, {"Out": ["h3"]}, {})]
    prog = materialize(vars_, ops)
    block = prog.global_block()
    del block.ops[3].desc.attrs[:]          # (the last relu: no attrs)
    prog = pybackward.loads(pybackward.dumps(prog))
    block = prog.global_block()
    assert not block.ops[3].desc.attrs
    got = grad_ops.op_templates(grad_ops.spec_made(list(block.ops)), set())
    assert got is not None and len(got) == 4
    for tmpl, _, op in got:
        assert tmpl.tail == attrs_tail(op.desc.SerializePartialToString())
    assert got[3][0].tail == b""
    assert got[0][0] is not got[2][0]       # (y_num_col_dims 1 and 2)


def test_new_vars_typed_each_by_its_own_forward_var():
    """`_append_vars_sorted` makes each grad var type's bytes once per type
    object per call: vars of distinct forward types (FP64, FP32, other
    dims, a LoD level) each get their own forward var's type, on the
    walk and off."""
    from pybackward._proto import framework_pb2 as pb

    def load():
        prog = pybackward.loads(_chain())
        block = prog.global_block()
        block.var("h0").desc.type.dense_tensor.tensor.data_type = pb.VarType.FP64
        del block.var("h1").desc.type.dense_tensor.tensor.dims[:]
        block.var("h1").desc.type.dense_tensor.tensor.dims.extend([2, 8])
        block.var("h2").desc.type.dense_tensor.legacy_lod_level = 1
        return pybackward.loads(pybackward.dumps(prog))

    on, off, walked = both_ways(load, _append("loss"))
    assert walked == 1 and on == off
    prog = pybackward.loads(on[0])
    block = prog.global_block()
    seen = set()
    for name in ("h0", "h1", "h2", "p0", "p1"):
        fwd = block.var(name).desc.type
        grad = block.var(name + "@GRAD").desc.type
        assert grad.type == fwd.type
        assert grad.dense_tensor.tensor == fwd.dense_tensor.tensor, name
        seen.add(grad.SerializePartialToString())
    # FP64 [4, 4]; FP32 [2, 8]; FP32 [4, 4] with the LoD level
    # elementwise_add_grad shares onto h2@GRAD; FP32 [4, 4]
    assert block.var("h2@GRAD").desc.type.dense_tensor.legacy_lod_level == 1
    assert len(seen) == 4


# --------------------------------------------------------------------------
# Session 12's shortcuts: each against its step-by-step form
# --------------------------------------------------------------------------
def _random_flat_ops(rng: random.Random, n_ops: int, in_place: bool) -> list:
    """Flat grad ops over a few names (so that gradients get written twice,
    read before and after their writes, and - if `in_place` - written by the
    op reading them), with forward names among the inputs."""
    from pybackward.backward.emit import FlatInfo, FlatOp
    fwd = ["a", "b", "c", "d", "e"]
    grads = [f + "@GRAD" for f in fwd]
    ops = []
    for _ in range(n_ops):
        ins = [rng.choice(fwd + grads) for _ in range(rng.randint(0, 3))]
        outs = [rng.choice(grads) for _ in range(rng.randint(0, 2))]
        if in_place and ins and rng.random() < 0.2:
            outs.append(rng.choice(ins) + ("" if ins[-1].endswith("@GRAD") else "@GRAD"))
        names = ins + outs
        info = FlatInfo("t_grad", [(f"I{k}", 1) for k in range(len(ins))], [(f"O{k}", 1) for k in range(len(outs))],
                        b"", rng.choice(["", "gpu:0"]),
                        [k for k, a in enumerate(ins) if a.endswith("@GRAD")],
                        [len(ins) + k for k, a in enumerate(outs) if a.endswith("@GRAD")])
        ops.append(FlatOp(info, names))
    return ops


def _run_flat(step, ops, *args):
    """What a flat step gives: its ops as (type, names), or its decline."""
    from pybackward.backward.emit import FlatOp
    copies = [FlatOp(fo.info, list(fo.names)) for fo in ops]
    try:
        got = step(copies, *args)
    except fused._Decline as e:
        return ("decline", str(e))
    return [(fo.info.type, fo.names) for fo in got]


def test_accumulate_written_once_shortcut_equals_the_steps():
    """`_accumulate` gives ops whose gradients are each written once back
    as they are (`_written_once`): on random flat ops, with and without
    repeated writes and in-place writes, the same as its steps (and the
    shortcut is taken where it applies, not where it does not)."""
    rng = random.Random(12)
    taken = stepped = 0
    for case in range(600):
        ops = _random_flat_ops(rng, rng.randint(1, 8), in_place=case % 4 == 0)
        short = fused._written_once(ops)
        fast = _run_flat(fused._accumulate, ops)
        slow = _run_flat(fused._accumulate_steps, ops)
        assert fast == slow, case
        if short:
            taken += 1
            assert slow == [(fo.info.type, fo.names) for fo in ops], case
        else:
            stepped += 1
    assert taken >= 50 and stepped >= 50, (taken, stepped)
    # (each condition of the shortcut on its own)
    from pybackward.backward.emit import FlatInfo, FlatOp
    one = FlatInfo("t_grad", [("I", 1)], [("O", 1)], b"", "", (0,), (1,))
    assert fused._written_once([FlatOp(one, ["a@GRAD", "b@GRAD"]), FlatOp(one, ["b@GRAD", "c@GRAD"])])
    assert not fused._written_once([FlatOp(one, ["a@GRAD", "b@GRAD"]), FlatOp(one, ["c@GRAD", "b@GRAD"])])
    assert not fused._written_once([FlatOp(one, ["a@GRAD", "a@GRAD"])])
    two = FlatInfo("t_grad", [("I", 1)], [("O", 1), ("P", 1)], b"", "", (0,), (1, 2))
    assert not fused._written_once([FlatOp(two, ["a@GRAD", "b@GRAD", "b@GRAD"])])


def test_remove_no_grad_branch_shortcut_equals_the_steps():
    """`_remove_no_grad_branch` with no op naming a no-grad name keeps the
    ops with outputs and adds nothing: on random flat ops and no-grad sets
    (disjoint, covering outputs, covering gradient inputs, reading a no-grad
    gradient) the same ops, updates and no-grad set as its steps."""
    rng = random.Random(37)
    taken = 0
    pool = ["a@GRAD", "b@GRAD", "c@GRAD", "d@GRAD", "e@GRAD", "z@GRAD", "a"]
    for case in range(600):
        ops = _random_flat_ops(rng, rng.randint(1, 8), in_place=False)
        no_grad = set(rng.sample(pool, rng.randint(0, 3)))
        targets = {rng.choice(pool)}
        got = []
        for step in (fused._remove_no_grad_branch, fused._no_grad_steps):
            ng, updates = set(no_grad), []
            got.append((_run_flat(step, ops, ng, targets, updates), ng, updates))
        assert got[0] == got[1], case
        taken += no_grad.isdisjoint(n for fo in ops for n in fo.names)
    assert 50 <= taken <= 550, taken


def test_op_templates_keys_as_make_op_grads_mapped_does():
    """`op_templates` asks the no-grad mask of the forward names (`a` for
    `a@GRAD`) and builds `vals` as names + their @GRADs: for every no-grad
    set over a chain's names (in an order where templates of other masks
    already exist), each op's template is the one `make_op_grads_mapped`
    keys by `a@GRAD in no_grad`, and vals are inputs, outputs, their @GRADs, @EMPTY@."""
    import itertools
    from pybackward.backward import grad_ops
    from pybackward.legacy.wire import attrs_tail
    prog = pybackward.loads(_chain())
    ops = list(prog.global_block().ops)
    names = ["x", "p0", "h0", "h1", "p1", "h2", "loss"]
    subsets = [set(c) for k in range(4) for c in itertools.combinations([n + "@GRAD" for n in names], k)]
    random.Random(5).shuffle(subsets)
    grad_ops._TEMPLATES.clear()
    checked = 0
    for no_grad in subsets:
        typed = grad_ops.spec_made(ops)
        got = grad_ops.op_templates(typed, frozenset(no_grad) if len(no_grad) % 2 else no_grad)
        if got is None:
            continue
        for (tmpl, vals, op), (_, desc, spec) in zip(got, typed):
            ins, outs = op.input_arg_names, op.output_arg_names
            gins = [a + "@GRAD" for a in ins]
            key = grad_ops._template_key(spec, attrs_tail(desc.SerializePartialToString()), op,
                                         tuple(map(no_grad.__contains__, gins)))
            assert grad_ops._TEMPLATES[key] is tmpl, (no_grad, op.type)
            assert vals == [*ins, *outs, *gins, *[a + "@GRAD" for a in outs], "@EMPTY@"]
            checked += 1
    assert checked >= 200, checked
    # (vals None exactly where they would repeat a name: a name read twice,
    # a var named @EMPTY@)
    vars_ = {n: VarSpec(n, (4, 4), k) for n, k in (("x", "feed"), ("p0", "param"), ("@EMPTY@", "tmp"),
                                                    ("h1", "tmp"), ("loss", "tmp"))}
    empty = pybackward.dumps(materialize(vars_, [
        OpSpec("mul", {"X": ["x"], "Y": ["p0"]}, {"Out": ["@EMPTY@"]}, {"x_num_col_dims": 1, "y_num_col_dims": 1}),
        OpSpec("relu", {"X": ["@EMPTY@"]}, {"Out": ["h1"]}, {}), OpSpec("mean", {"X": ["h1"]}, {"Out": ["loss"]}, {})]))
    for data, bad in ((_chain(same_input=True), ["elementwise_add"]), (empty, ["mul", "relu"])):
        ops = list(pybackward.loads(data).global_block().ops)
        got = grad_ops.op_templates(grad_ops.spec_made(ops), set())
        assert sorted(op.type for _, vals, op in got if vals is None) == bad
        for _, vals, op in got:
            full = [*op.input_arg_names, *op.output_arg_names]
            full += [a + "@GRAD" for a in full] + ["@EMPTY@"]
            assert (vals is None) == (len(set(full)) != len(full)) and vals in (None, full)

