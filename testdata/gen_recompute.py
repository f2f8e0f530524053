#!/usr/bin/env python
"""Generate recompute (checkpoint) golden programs with a live PaddlePaddle 3.3.1.

Same layout, files and ``case.json`` format as ``generate.py``, whose
machinery (``generate_case``, the op helpers, seeds, feeds) this script loads
and reuses. Each variant may carry one more key, ``checkpoints``: the names
of the vars passed (as Variables of the re-parsed program) to
``append_backward(..., checkpoints=[...])``. Paddle then returns
``(params_grads, checkpoint_names)``: ``returned`` holds ``params_grads`` as
usual and ``checkpoint_names`` the names it returned. Paddle ignores
callbacks in checkpoint mode, so ``callbacks`` is ``[]`` there.

Cases (``testdata/programs/<case>/``):

* ``recompute_mlp``: 6 x fc(16, relu) -> mean, checkpoints after layers 2
  and 4, plus variants (unsorted and repeated checkpoints, one checkpoint,
  a checkpoint that is not on the loss path, a program input as checkpoint,
  a checkpoint that makes no segment, no_grad_set, no checkpoints);
* ``recompute_mlp_dropout``: the same MLP with dropout (fix_seed) after
  layers 1, 3 and 5: Paddle inserts a ``seed`` op before each dropout and
  the recomputed dropout reads it;
* ``recompute_dropout_unseeded``: a dropout without fix_seed (the ``seed``
  op gets seed 0, a random seed at run time: no gradient values are kept);
* ``recompute_cnn``: conv2d / batch_norm / relu twice, pool, fc, with the
  relu outputs as checkpoints (a recomputed batch_norm);
* ``recompute_op_mix``: cast, scale, assign and sum, whose grad makers
  build fresh ops, in and out of the segments;
* ``recompute_transformer``: a transformer encoder layer (layer_norm,
  attention with dropout, residual, layer_norm, fc-gelu-fc, residual) with 3
  checkpoints, and with two made side by side (no segment between them).

Every variant with checkpoints has a ``plain`` sibling (no checkpoints) in
its case, except ``recompute_dropout_unseeded``.

Run it with the Paddle interpreter (it re-executes itself with
``PYTHONHASHSEED=0``, ``FLAGS_enable_pir_api=0`` and its absolute path, like
generate.py)::

    /work/paddle-venv/bin/python testdata/gen_recompute.py [case ...]
"""

from __future__ import annotations

import os
import sys

_SCRIPT = os.path.abspath(__file__)
if (
    os.environ.get("PYTHONHASHSEED") != "0"
    or os.environ.get("FLAGS_enable_pir_api") != "0"
    or sys.argv[0] != _SCRIPT
):
    env = dict(os.environ, PYTHONHASHSEED="0", FLAGS_enable_pir_api="0")
    os.execve(sys.executable, [sys.executable, _SCRIPT] + sys.argv[1:], env)

import importlib.util  # noqa: E402
import json  # noqa: E402
import threading  # noqa: E402

_GEN = os.path.join(os.path.dirname(_SCRIPT), "generate.py")


def _load_generate():
    """Import generate.py as a module without letting it re-execute itself."""
    argv0 = sys.argv[0]
    sys.argv[0] = _GEN
    try:
        spec = importlib.util.spec_from_file_location("pybackward_generate", _GEN)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.argv[0] = argv0
    return mod


gen = _load_generate()

import paddle  # noqa: E402
import paddle.nn.functional as F  # noqa: E402
from paddle import static  # noqa: E402
from paddle.base.layer_helper import LayerHelper  # noqa: E402
from paddle.utils import unique_name  # noqa: E402

op, unary, matmul_v2, elementwise, param, data = (
    gen.op, gen.unary, gen.matmul_v2, gen.elementwise, gen.param, gen.data)

CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def ab(loss, checkpoints=None, **kw):
    """An append_backward call, with `checkpoints` (var names) if given."""
    c = gen.ab(loss, **kw)
    if checkpoints is not None:
        c["checkpoints"] = list(checkpoints)
    return c


# --------------------------------------------------------------------------
# run_calls with checkpoints: generate_case looks run_calls up in its module,
# so this version replaces generate.py's there.
# --------------------------------------------------------------------------


def run_calls(fwd_bytes, calls, with_callbacks=True):
    """generate.run_calls plus checkpoints, run in a thread of its own.

    Paddle records the Python call stack of every op it creates in
    `op_callstack`, the seed ops recompute inserts included; in a fresh
    thread that stack starts here, so it does not depend on which line of
    generate_case called (generate_case compares a run with callbacks to one
    without, byte for byte).
    """
    box = {}

    def work():
        try:
            box["out"] = _run_calls(fwd_bytes, calls, with_callbacks)
        except BaseException as e:  # noqa: BLE001
            box["err"] = e

    t = threading.Thread(target=work, name="gen_recompute")
    t.start()
    t.join()
    if "err" in box:
        raise box["err"]
    return box["out"]


def _run_calls(fwd_bytes, calls, with_callbacks):
    prog = static.Program.parse_from_string(fwd_bytes)
    blk = prog.global_block()
    results = []
    with unique_name.guard(), static.program_guard(prog, static.Program()):
        for c in calls:
            res = dict(c)
            if c["api"] != "append_backward":
                raise NotImplementedError("gen_recompute records append_backward calls only")
            ngs = gen.resolve(blk, c["no_grad_set"], c["no_grad_set_kind"])
            ngs = set(ngs) if ngs is not None else None
            rec = []

            def cb(block, context, rec=rec):
                rec.append([
                    context["__current_op_desc__"].type(),
                    sorted(k for k in context if k != "__current_op_desc__"),
                ])

            plist = gen.resolve(blk, c["parameter_list"], c["parameter_list_kind"])
            ckpts = c.get("checkpoints")
            ret = static.append_backward(
                blk.var(c["targets"][0]), parameter_list=plist, no_grad_set=ngs,
                callbacks=[cb] if with_callbacks else None,
                checkpoints=None if ckpts is None else [blk.var(n) for n in ckpts])
            if ckpts is not None:
                ret, names = ret
                res["checkpoint_names"] = list(names)
            res["returned"] = [[p.name, None if g is None else g.name] for p, g in ret]
            res["callbacks"] = rec
            results.append(res)
    return prog.desc.serialize_to_string(), results


gen.run_calls = run_calls

_EXTRA_KEYS = ("checkpoints", "checkpoint_names")


def generate(builder, summary, keep_grads=True):
    """gen.generate_case, then the checkpoint keys added to case.json."""
    holder = {}

    def wrapped():
        info = builder()
        holder["info"] = info
        return info

    wrapped.__name__ = builder.__name__
    gen.generate_case(wrapped, summary)
    out_dir = os.path.join(gen.OUT_ROOT, builder.__name__)
    path = os.path.join(out_dir, "case.json")
    with open(path) as f:
        cj = json.load(f)
    for vname, calls in holder["info"]["variants"].items():
        fwd = open(os.path.join(out_dir, "forward.pb"), "rb").read()
        _, results = run_calls(fwd, calls, with_callbacks=False)
        entry = cj["variants"][vname]
        last = results[-1]
        for k in _EXTRA_KEYS:
            if k in last:
                entry[k] = last[k]
        if "calls" in entry:
            for e, r in zip(entry["calls"], results):
                for k in _EXTRA_KEYS:
                    if k in r:
                        e[k] = r[k]
        if not keep_grads and entry.get("grads_file"):
            os.unlink(os.path.join(out_dir, entry["grads_file"]))
            entry["grads_file"] = None
    if not keep_grads:
        cj.setdefault("notes", []).append(
            "no gradient values kept: the seed op has seed 0, so Paddle draws the "
            "dropout seed at run time")
    with open(path, "w") as f:
        json.dump(cj, f, indent=2)
        f.write("\n")


# --------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------


def _mlp(dropout_after=(), width=16, layers=6):
    x = data("x", [-1, width])
    h, hs = x, []
    for i in range(layers):
        h = static.nn.fc(h, width, activation="relu")
        if i in dropout_after:
            h = F.dropout(h, 0.25)
        hs.append(h)
    return x, hs, paddle.mean(h)


@case
def recompute_mlp():
    x, hs, loss = _mlp()
    # A side branch off the loss path: a checkpoint there is dropped.
    side = unary("tanh", hs[0])
    l = loss.name
    ck = [hs[1].name, hs[3].name]
    return dict(
        loss=l,
        feeds={"x": None},
        description="6 x fc(16, relu) -> mean (reduce_mean), plus tanh(h0) off "
                    "the loss path. default: checkpoints = the outputs of layers "
                    "2 and 4 (segments [0,6) and [6,12), ops 12..18 plain). "
                    "unsorted: [h3, tanh(h0), h1, h3]: sorted by producer, "
                    "de-duplicated, and the tanh output, which no op on the "
                    "path uses, dropped. one_checkpoint: [h2]. "
                    "input_checkpoint: [x, h3] (a program input sorts first). "
                    "first_op: [fc_0.tmp_0], one checkpoint made by op 0: no "
                    "segment, every grad op plain. no_grad: default "
                    "checkpoints with fc_2.w_0 in no_grad_set. plain: no "
                    "checkpoints.",
        variants={
            "default": [ab(l, ck)],
            "unsorted": [ab(l, [hs[3].name, side.name, hs[1].name, hs[3].name])],
            "one_checkpoint": [ab(l, [hs[2].name])],
            "input_checkpoint": [ab(l, [x.name, hs[3].name])],
            "first_op": [ab(l, ["fc_0.tmp_0"])],
            "no_grad": [ab(l, ck, no_grad_set=["fc_2.w_0"])],
            "plain": [ab(l)],
        },
    )


@case
def recompute_mlp_dropout():
    x, hs, loss = _mlp(dropout_after=(0, 2, 4))
    l = loss.name
    return dict(
        loss=l,
        feeds={"x": None},
        description="6 x fc(16, relu) -> mean with F.dropout(0.25) after layers "
                    "1, 3 and 5 (fix_seed: main.random_seed=2024). default: "
                    "checkpoints = the outputs of layers 2 and 4: Paddle inserts "
                    "a seed op before each dropout, drops the dropouts' "
                    "fix_seed/seed attrs, and the recomputed dropouts read the "
                    "seed ops' outputs (held) so their masks are the same. "
                    "dropout_checkpoints: the dropout outputs of layers 1 and 3. "
                    "plain: no checkpoints.",
        variants={
            "default": [ab(l, [hs[1].name, hs[3].name])],
            "dropout_checkpoints": [ab(l, [hs[0].name, hs[2].name])],
            "plain": [ab(l)],
        },
    )


@case
def recompute_dropout_unseeded():
    static.default_main_program().random_seed = 0   # F.dropout: fix_seed=False
    x, hs, loss = _mlp(dropout_after=(0,), layers=3)
    l = loss.name
    return dict(
        loss=l,
        feeds={"x": None},
        description="3 x fc(16, relu) -> mean with F.dropout(0.25) after layer "
                    "1 and no fixed seed (random_seed=0): the inserted seed op "
                    "gets seed=0. checkpoints: layers 1 and 2. No gradient "
                    "values (the dropout mask is random).",
        variants={"default": [ab(l, [hs[0].name, hs[1].name])]},
    )


@case
def recompute_cnn():
    img = data("image", [-1, 3, 8, 8])
    label = data("label", [-1, 1], "int64")
    c1 = static.nn.conv2d(img, 8, 3, padding=1)
    r1 = F.relu(static.nn.batch_norm(c1, is_test=False))
    c2 = static.nn.conv2d(r1, 8, 3, padding=1)
    r2 = F.relu(static.nn.batch_norm(c2, is_test=False))
    p = F.max_pool2d(r2, kernel_size=2, stride=2)
    logits = static.nn.fc(p, 10)
    outs = op("softmax_with_cross_entropy",
              {"Logits": [logits], "Label": [label]},
              {"Softmax": 1, "Loss": 1},
              {"soft_label": False, "ignore_index": -100,
               "numeric_stable_mode": True, "axis": -1})
    loss = paddle.mean(outs["Loss"][0])
    l = loss.name
    return dict(
        loss=l,
        feeds={"image": None, "label": ("int", 10)},
        description="2 x (conv2d(8,3,pad 1)+bias -> batch_norm (training) -> "
                    "relu) -> pool2d max 2x2 -> fc(10) -> "
                    "softmax_with_cross_entropy -> mean. default: checkpoints "
                    "= the two relu outputs: the recomputed batch_norm writes "
                    "its persistable MeanOut/VarianceOut again, its other "
                    "outputs renamed. plain: no checkpoints.",
        variants={"default": [ab(l, [r1.name, r2.name])], "plain": [ab(l)]},
    )


@case
def recompute_op_mix():
    x = data("x", [-1, 8])
    h = static.nn.fc(x, 8, activation="relu")
    c = op("cast", {"X": [h]}, {"Out": 1}, {"in_dtype": 5, "out_dtype": 6}, dtype="float64")["Out"][0]
    c2 = op("cast", {"X": [c]}, {"Out": 1}, {"in_dtype": 6, "out_dtype": 5})["Out"][0]
    h2 = static.nn.fc(c2, 8, activation="relu")
    s = op("scale", {"X": [h2]}, {"Out": 1},
           {"scale": 2.0, "bias": 1.0, "bias_after_scale": True})["Out"][0]
    a = op("assign", {"X": [s]}, {"Out": 1})["Out"][0]
    t = op("sum", {"X": [a, s]}, {"Out": 1})["Out"][0]
    h3 = static.nn.fc(t, 8, activation="relu")
    c3 = op("cast", {"X": [h3]}, {"Out": 1}, {"in_dtype": 5, "out_dtype": 6}, dtype="float64")["Out"][0]
    loss = paddle.mean(c3)
    l = loss.name
    return dict(
        loss=l,
        feeds={"x": None},
        description="fc(8,relu) -> cast fp64 -> cast fp32 -> fc(8,relu) -> "
                    "scale -> assign -> sum(assign, scale) -> fc(8,relu) -> "
                    "cast fp64 -> mean: ops whose grad makers build fresh ops "
                    "(cast, scale, assign, sum -> scale). default: checkpoints "
                    "= the first two relu outputs, so those grads are plain "
                    "(and land in Paddle's leftover local_block with the "
                    "attrs the makers set). inside: [second cast, scale]: "
                    "they are recomputed instead. plain: no checkpoints.",
        variants={"default": [ab(l, [h.name, h2.name])],
                  "inside": [ab(l, [c2.name, s.name])],
                  "plain": [ab(l)]},
    )


def _heads(t, n=2):
    """[-1,4,16] -> [-1,2,4,8]: split the features, stack the heads (no
    reshape2: Paddle 3.3.1 writes some of its attrs twice in the file)."""
    parts = op("split", {"X": [t]}, {"Out": n}, {"axis": 2, "num": n, "sections": []})["Out"]
    return op("stack", {"X": parts}, {"Y": 1}, {"axis": 1})["Y"][0]


def _merge_heads(t, n=2):
    """[-1,2,4,8] -> [-1,4,16]: unstack the heads, concat the features."""
    parts = op("unstack", {"X": [t]}, {"Y": n}, {"axis": 1, "num": n})["Y"]
    return op("concat", {"X": parts}, {"Out": 1}, {"axis": 2})["Out"][0]


def _dropout(x, p, seed):
    helper = LayerHelper("dropout")
    out = helper.create_variable_for_type_inference(x.dtype)
    mask = helper.create_variable_for_type_inference(
        paddle.base.core.VarDesc.VarType.UINT8, stop_gradient=True)
    helper.append_op(
        type="dropout", inputs={"X": [x]}, outputs={"Out": [out], "Mask": [mask]},
        attrs={"dropout_prob": p, "is_test": False, "fix_seed": True,
               "seed": seed, "dropout_implementation": "upscale_in_train"})
    return out


@case
def recompute_transformer():
    x = data("x", [-1, 4, 16], stop_gradient=False)
    ln1 = static.nn.layer_norm(x, begin_norm_axis=2)
    wq, wk, wv = (param(n, [16, 16]) for n in ("enc_wq", "enc_wk", "enc_wv"))

    q, k, v = (_heads(matmul_v2(ln1, w)) for w in (wq, wk, wv))
    scores = matmul_v2(q, k, trans_y=True)           # [-1,2,4,4]
    scaled = op("scale", {"X": [scores]}, {"Out": 1},
                {"scale": 8 ** -0.5, "bias": 0.0, "bias_after_scale": True})["Out"][0]
    probs = unary("softmax", scaled, axis=-1)
    dropped = _dropout(probs, 0.1, 7)
    ctx = _merge_heads(matmul_v2(dropped, v))        # [-1,4,16]
    attn = static.nn.fc(ctx, 16, num_flatten_dims=2)
    h1 = elementwise("elementwise_add", attn, x)
    ln2 = static.nn.layer_norm(h1, begin_norm_axis=2)
    ff = static.nn.fc(ln2, 32, num_flatten_dims=2, activation="gelu")
    ff2 = static.nn.fc(ff, 16, num_flatten_dims=2)
    h2 = elementwise("elementwise_add", ff2, h1)
    loss = paddle.mean(h2)
    l = loss.name
    return dict(
        loss=l,
        feeds={"x": None},
        description="Transformer encoder layer (as transformer_encoder in "
                    "gen_models.py, but 2 heads by split+stack and back by "
                    "unstack+concat instead of reshape2/transpose2): "
                    "layer_norm, q/k/v matmul_v2, scaled softmax, dropout(0.1, "
                    "upscale_in_train, fix_seed 7), "
                    "fc(16), residual, layer_norm, fc(32, gelu), fc(16), "
                    "residual, mean). default: checkpoints = [ln1 output, h1 "
                    "(attention residual), the gelu output]. parallel: [q heads, "
                    "k heads, h1]: q and k are made side by side, so no segment "
                    "lies between them (Paddle logs \"Could not recompute op "
                    "range\") and the one from k to h1 starts at k's first "
                    "reader. plain: none.",
        variants={
            "default": [ab(l, [ln1.name, h1.name, ff.name])],
            "parallel": [ab(l, [q.name, k.name, h1.name])],
            "plain": [ab(l)],
        },
    )


def main():
    only = set(sys.argv[1:])
    summary = {}
    for builder in CASES:
        if only and builder.__name__ not in only:
            continue
        generate(builder, summary, keep_grads=builder is not recompute_dropout_unseeded)
    print(summary)


if __name__ == "__main__":
    main()
