#!/usr/bin/env python
"""Goldens for the PIR gradient pass (issue #32 item 7), written by a live PaddlePaddle 3.3.1.

Run it with Paddle's interpreter from anywhere::

    /work/main/.paddle-venv/bin/python testdata/pir_backward/gen_pir_backward.py            # every case
    /work/main/.paddle-venv/bin/python testdata/pir_backward/gen_pir_backward.py option cf   # some groups
    /work/main/.paddle-venv/bin/python testdata/pir_backward/gen_pir_backward.py lenet cond_true  # some cases

It re-executes itself with ``PYTHONHASHSEED=0``, PIR on (``FLAGS_enable_pir_api`` unset, so Paddle's
default: PIR mode, prim off) and an absolute script path. Paddle is the oracle only: pybackward never
imports it. Per case ``<c>`` it writes

* ``<c>.json`` + ``<c>.pdparams``: ``paddle.static.save`` of the forward program, BEFORE the gradient
  call, after the startup program ran with ``paddle.seed(2024)`` (the ``.pdopt`` is dropped: empty);
* ``<c>.bwd.json``: ``serialize_pir_program`` of the same program after Paddle's call
  (``append_backward`` / ``gradients`` / ``calc_gradient``), with ``FLAGS_save_cf_stack_op=True`` when
  the program has control flow (with the default flag Paddle aborts saving it);
* ``<c>.feeds.npz``: the feeds (``np.random.RandomState(0)``), keyed by data name;
* ``<c>.values.npz``: Paddle's Executor on the backward program (float32): the loss / targets and every
  returned gradient, keyed by the value's id (``%N``) in ``<c>.bwd.json``;
* ``manifest.json``: per case the call and its arguments (value ids in ``<c>.json`` and in
  ``<c>.bwd.json``, names where the value has one), the ``stop_gradient`` flags the builder set, what
  Paddle returned (ids in ``<c>.bwd.json``), op counts, Paddle's error text when it refuses the call.

Value ids are Paddle's writer numbering (results 1, 2, ... and block arguments -1, -2, ... in write
order: an op, then its regions' blocks); the script numbers the in-memory program that way and checks
every op of the saved file against it. Output is deterministic (fixed seeds, no call stacks in PIR
files, npz members with a fixed timestamp); the script ends by printing a sha256 over what it wrote.
The real-model builders are imported from ``testdata/models/gen_models.py`` (see README.md).
"""
from __future__ import annotations

import os
import sys

_SCRIPT = os.path.abspath(__file__)
if (os.environ.get("PYTHONHASHSEED") != "0" or os.environ.get("FLAGS_enable_pir_api", "1") not in ("1", "true", "True")
        or sys.argv[0] != _SCRIPT):
    env = dict(os.environ, PYTHONHASHSEED="0")
    env.pop("FLAGS_enable_pir_api", None)
    os.execve(sys.executable, [sys.executable, _SCRIPT] + sys.argv[1:], env)

os.environ.setdefault("GLOG_v", "0")
os.environ.setdefault("GLOG_minloglevel", "2")

import collections  # noqa: E402
import hashlib  # noqa: E402
import importlib.util  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402
import zipfile  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

warnings.filterwarnings("ignore")
import paddle  # noqa: E402
import paddle.nn.functional as F  # noqa: E402
from paddle import nn, static  # noqa: E402
from paddle.base import core  # noqa: E402
from paddle.utils import unique_name  # noqa: E402

OUT = Path(_SCRIPT).parent
MODELS_DIR = OUT.parent / "models"
KEEP = {"gen_pir_backward.py", "README.md"}
SEED = 2024
BATCH = 2
PLACE = paddle.CPUPlace()
DIALECTS = {"0": "builtin", "1": "pd_op", "2": "cf", "3": "custom_op", "4": "dist_op"}

paddle.enable_static()
logging.disable(logging.WARNING)


# --------------------------------------------------------------------------
# Paddle's writer numbering, checked against the saved file
# --------------------------------------------------------------------------
def number_values(program) -> dict[str, int]:
    """value.id (the C++ address, unique while the value lives) -> the id Paddle's writer gives it:
    results 1, 2, ... and block arguments -1, -2, ... in write order (an op's results, then its
    regions' blocks, first region first)."""
    ids: dict[str, int] = {}
    nxt, narg = 1, -1

    def block(b) -> None:
        nonlocal nxt, narg
        kwargs = b.kwargs()
        for a in list(b.args()) + [kwargs[k] for k in kwargs]:
            ids[a.id] = narg
            narg -= 1
        for op in b.ops:
            for r in op.results():
                ids[r.id] = nxt
                nxt += 1
            if op.num_regions():
                for sub in op.blocks():
                    block(sub)

    block(program.global_block())
    return ids


def file_ops(data: dict):
    """(op json, depth) in write order."""
    stack = [iter(data["program"]["regions"][0]["blocks"][0]["ops"])]
    while stack:
        op = next(stack[-1], None)
        if op is None:
            stack.pop()
            continue
        yield op
        for region in reversed(op.get("regions", [])):
            for b in reversed(region["blocks"]):
                stack.append(iter(b["ops"]))


def op_name(op: dict) -> str:
    if op["#"] == "p":
        return "builtin.parameter"
    d, _, name = op["#"].partition(".")
    return f"{DIALECTS.get(d, d)}.{name}" if d in DIALECTS else op["#"]


def results(op: dict) -> list[int]:
    o = op.get("O", [])
    return [o["%"]] if isinstance(o, dict) else [r["%"] for r in o]


def check_numbering(program, ids: dict[str, int], path: Path) -> None:
    """Every op of the file, in write order, has the name and result ids of the program's op."""
    data = json.loads(path.read_text(encoding="utf-8"))
    mine = []

    def walk(b) -> None:
        for op in b.ops:
            mine.append(op)
            if op.num_regions():
                for sub in op.blocks():
                    walk(sub)

    walk(program.global_block())
    theirs = list(file_ops(data))
    if len(mine) != len(theirs):
        raise AssertionError(f"{path.name}: {len(theirs)} ops in the file, {len(mine)} in the program")
    for a, b in zip(mine, theirs):
        want = [ids[r.id] for r in a.results()]
        if a.name() != op_name(b) or want != results(b):
            raise AssertionError(f"{path.name}: op {op_name(b)} {results(b)} != {a.name()} {want}")


def count_ops(path: Path) -> tuple[int, collections.Counter]:
    data = json.loads(path.read_text(encoding="utf-8"))
    names = [op_name(op) for op in file_ops(data)]
    return len(names), collections.Counter(names)


def has_control_flow(program) -> bool:
    return any(op.num_regions() for op in program.global_block().ops)


def value_name(v) -> str | None:
    try:
        return v.name
    except Exception:  # noqa: BLE001  (unnamed values raise)
        return None


# --------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------
def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """np.savez, but with a fixed member timestamp (np.savez stamps the current time), deflated."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key in sorted(arrays):
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            member = io.BytesIO()
            np.lib.format.write_array(member, np.array(arrays[key], order="C"), allow_pickle=False)
            zf.writestr(info, member.getvalue())
    path.write_bytes(buf.getvalue())


def make_feeds(feed_values: dict, spec: dict, batch: int) -> dict[str, np.ndarray]:
    """Feeds from np.random.RandomState(0), in spec order: None = uniform [-1, 1); ("uniform", lo, hi);
    ("int", n) / ("int", lo, hi); ("value", array)."""
    rs = np.random.RandomState(0)
    feeds = {}
    for name, s in spec.items():
        v = feed_values[name]
        shape = [batch if d < 0 else d for d in v.shape]
        dtype = paddle.base.data_feeder.convert_dtype(v.dtype)
        if s is None:
            feeds[name] = rs.uniform(-1.0, 1.0, size=shape).astype(dtype)
        elif s[0] == "uniform":
            feeds[name] = rs.uniform(s[1], s[2], size=shape).astype(dtype)
        elif s[0] == "int":
            lo, hi = (0, s[1]) if len(s) == 2 else (s[1], s[2])
            feeds[name] = rs.randint(lo, hi, size=shape).astype(dtype)
        elif s[0] == "value":
            feeds[name] = np.asarray(s[1], dtype=dtype).reshape(shape)
        else:
            raise ValueError(f"feed spec {s!r}")
    return feeds


def error_text(e: BaseException) -> str:
    msg = " ".join(str(e).split())
    cut = msg.find(" [Hint")
    return f"{type(e).__name__}: " + (msg[:cut] if cut > 0 else msg)[:500]


# --------------------------------------------------------------------------
# One case
# --------------------------------------------------------------------------
MANIFEST: dict = {}


class Built:
    """What a builder returns (inside program_guard): the call and its arguments as Values."""

    def __init__(self, *, call: str = "append_backward", loss=None, targets=None, inputs=None,
                 parameter_list=None, no_grad_set=None, target_gradients=None, feeds: dict | None = None,
                 stop_gradient=(), description: str = "", batch: int = BATCH, **extra) -> None:
        self.call, self.loss, self.targets, self.inputs = call, loss, targets, inputs
        self.parameter_list, self.no_grad_set, self.target_gradients = parameter_list, no_grad_set, target_gradients
        self.feeds = feeds or {}
        self.stop_gradient = list(stop_gradient)
        self.description, self.batch, self.extra = description, batch, extra


def run_case(name: str, group: str, builder, *, narrow_ctx=None, model_info=None) -> dict:
    t0 = time.perf_counter()
    for p in OUT.glob(f"{name}.*"):
        p.unlink()
    paddle.seed(SEED)
    np.random.seed(SEED)
    # Layer calls stamp ops with struct_name "/ResNet_<k>/..." from a process-wide tree that
    # unique_name.guard() does not reset: a fresh tree per case keeps each case's bytes independent
    # of the cases built before it (a partial run writes what a full run writes).
    paddle.base.framework._name_struct = paddle.base.framework.NameStruct()
    main, startup = static.Program(), static.Program()
    main.random_seed = startup.random_seed = SEED
    with unique_name.guard(), static.program_guard(main, startup):
        if narrow_ctx is not None:
            with narrow_ctx:
                b = builder()
        else:
            b = builder()
    data_ops = {op.result(0).name: op.result(0) for op in main.global_block().ops if op.name() == "pd_op.data"}
    files: dict = {"forward": f"{name}.json", "params": f"{name}.pdparams", "backward": None,
                   "feeds": f"{name}.feeds.npz", "values": None}

    # forward: startup (seed 2024), paddle.static.save, numbering checked
    scope = static.Scope()
    exe = static.Executor(PLACE)
    with static.scope_guard(scope):
        paddle.seed(SEED)
        exe.run(startup)
        static.save(main, str(OUT / name))
    (OUT / f"{name}.pdopt").unlink()
    fwd_ids = number_values(main)
    check_numbering(main, fwd_ids, OUT / files["forward"])
    fwd_ops, _ = count_ops(OUT / files["forward"])
    feeds = make_feeds(data_ops, b.feeds, b.batch)
    missing = sorted(set(data_ops) - set(feeds))
    if missing:
        raise AssertionError(f"{name}: no feed spec for {missing}")
    write_npz(OUT / files["feeds"], feeds)

    def ref(v, ids):
        if isinstance(v, str):                       # a name given where Paddle wants a Value
            return {"id": None, "name": v}
        return None if v is None else {"id": f"%{ids[v.id]}", "name": value_name(v)}

    def refs(vs, ids):
        return None if vs is None else [ref(v, ids) for v in vs]

    def args(ids) -> dict:
        a = {}
        if b.call == "append_backward":
            a["loss"] = ref(b.loss, ids)
            a["parameter_list"] = refs(b.parameter_list, ids)
        else:
            a["targets"] = refs(b.targets, ids)
            a["inputs"] = refs(b.inputs, ids)
            a["target_gradients"] = refs(b.target_gradients, ids)
        a["no_grad_set"] = refs(b.no_grad_set, ids)
        return a

    entry = {"group": group, "description": b.description, "call": b.call, "args": args(fwd_ids),
             "stop_gradient": [dict(ref(v, fwd_ids), value=bool(v.stop_gradient)) for v in b.stop_gradient],
             "feeds": {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in feeds.items()},
             "params": sorted(_pickle_keys(OUT / files["params"])),
             "files": files, "control_flow": has_control_flow(main), "error": None}
    entry.update(b.extra)
    if model_info:
        entry.update(model_info)

    # the call
    try:
        with static.program_guard(main, startup):
            if b.call == "append_backward":
                ret = static.append_backward(b.loss, parameter_list=b.parameter_list, no_grad_set=b.no_grad_set)
            elif b.call == "gradients":
                ret = static.gradients(b.targets, b.inputs, b.target_gradients, b.no_grad_set)
            elif b.call == "calc_gradient":
                ret = paddle.base.backward.calc_gradient(b.targets, b.inputs, b.target_gradients, b.no_grad_set)
            else:
                raise ValueError(b.call)
    except Exception as e:  # noqa: BLE001
        entry["error"] = error_text(e)
        entry["op_counts"] = {"forward": fwd_ops}
        MANIFEST[name] = entry
        print(f"{name}: Paddle refuses: {entry['error'][:160]} ({time.perf_counter() - t0:.1f}s)", flush=True)
        return entry

    cf = has_control_flow(main)
    files["backward"] = f"{name}.bwd.json"
    paddle.set_flags({"FLAGS_save_cf_stack_op": bool(cf)})
    try:
        core.serialize_pir_program(main, str(OUT / files["backward"]), True, False, True)
    finally:
        paddle.set_flags({"FLAGS_save_cf_stack_op": False})
    bwd_ids = number_values(main)
    check_numbering(main, bwd_ids, OUT / files["backward"])
    bwd_ops, bwd_counter = count_ops(OUT / files["backward"])
    _, fwd_counter = count_ops(OUT / files["forward"])
    added = bwd_counter - fwd_counter

    entry["args_bwd"] = args(bwd_ids)
    entry["save_cf_stack_op"] = bool(cf)
    if b.call == "append_backward":
        entry["returned"] = [[f"%{bwd_ids[p.id]}", None if g is None else f"%{bwd_ids[g.id]}"] for p, g in ret]
        entry["returned_names"] = [value_name(p) for p, _ in ret]
        outs = [b.loss]
        grads = [g for _, g in ret if g is not None]
    else:
        ret = list(ret) if isinstance(ret, (list, tuple)) else [ret]
        entry["returned"] = [None if g is None else f"%{bwd_ids[g.id]}" for g in ret]
        outs = list(b.targets)
        grads = [g for g in ret if g is not None]
    entry["op_counts"] = {"forward": fwd_ops, "backward": bwd_ops,
                          "added": dict(sorted((k, v) for k, v in added.items() if v > 0))}

    # values: Paddle's Executor on the backward program (already saved: the run adds fetch ops)
    fetch, keys = [], []
    for v in outs + grads:
        k = f"%{bwd_ids[v.id]}"
        if k not in keys:
            keys.append(k)
            fetch.append(v)
    with static.scope_guard(scope):
        paddle.seed(SEED)
        try:
            vals = exe.run(main, feed=feeds, fetch_list=fetch, scope=scope)
        except Exception as e:  # noqa: BLE001
            entry["executor_error"] = error_text(e)
            vals = None
    if vals is not None:
        files["values"] = f"{name}.values.npz"
        write_npz(OUT / files["values"], {k: np.asarray(a) for k, a in zip(keys, vals)})
        entry["fetched"] = keys
    MANIFEST[name] = entry
    print(f"{name}: {b.call} fwd={fwd_ops} bwd={bwd_ops} returned={len(entry['returned'])}"
          f"{' (cf)' if cf else ''}{' EXECUTOR FAILED' if vals is None else ''} "
          f"({time.perf_counter() - t0:.1f}s)", flush=True)
    return entry


def _pickle_keys(path: Path) -> list[str]:
    import pickle
    with open(path, "rb") as f:
        return list(pickle.load(f))


# --------------------------------------------------------------------------
# (b) option cases
# --------------------------------------------------------------------------
def data(name, shape, dtype="float32", stop_gradient=True):
    v = static.data(name, shape, dtype)
    v.stop_gradient = stop_gradient
    return v


def mlp_layers():
    """x [-1, 4] -> Linear(4, 8) -> relu -> h -> Linear(8, 3) -> o; loss = mean((o - y)^2)."""
    x, y = data("x", [-1, 4]), data("y", [-1, 3])
    l1, l2 = nn.Linear(4, 8), nn.Linear(8, 3)
    h = F.relu(l1(x))
    o = l2(h)
    loss = paddle.mean((o - y) ** 2)
    return dict(x=x, y=y, l1=l1, l2=l2, h=h, o=o, loss=loss)


MLP_FEEDS = {"x": None, "y": None}
MLP_DESC = "x[-1,4] -> Linear(4,8) -> relu -> h -> Linear(8,3) -> o; loss = mean((o - y)**2). "

OPTION: dict[str, callable] = {}


def option(name):
    def deco(fn):
        OPTION[name] = fn
        return fn
    return deco


@option("mlp")
def _mlp():
    m = mlp_layers()
    return Built(loss=m["loss"], feeds=MLP_FEEDS, description=MLP_DESC + "append_backward(loss).")


@option("mlp_parameter_list")
def _mlp_plist():
    m = mlp_layers()
    return Built(loss=m["loss"], parameter_list=[m["l1"].weight, m["l2"].bias], feeds=MLP_FEEDS,
                 description=MLP_DESC + "append_backward(loss, parameter_list=[l1.weight, l2.bias]).")


@option("mlp_no_grad_set_middle")
def _mlp_ngs():
    m = mlp_layers()
    return Built(loss=m["loss"], no_grad_set=[m["h"]], feeds=MLP_FEEDS,
                 description=MLP_DESC + "append_backward(loss, no_grad_set={h}): the first layer gets no "
                                        "gradients ((param, None) pairs).")


@option("mlp_stop_gradient_param")
def _mlp_sg_param():
    m = mlp_layers()
    m["l1"].bias.stop_gradient = True
    return Built(loss=m["loss"], feeds=MLP_FEEDS, stop_gradient=[m["l1"].bias],
                 description=MLP_DESC + "l1.bias.stop_gradient = True (a frozen parameter); append_backward(loss).")


@option("mlp_stop_gradient_input")
def _mlp_sg_input():
    x, y = data("x", [-1, 4], stop_gradient=False), data("y", [-1, 3])
    l1, l2 = nn.Linear(4, 8), nn.Linear(8, 3)
    h = F.relu(l1(x))
    h2 = paddle.tanh(h)
    h2.stop_gradient = True
    o = l2(h + h2)
    loss = paddle.mean((o - y) ** 2)
    return Built(call="gradients", targets=[loss], inputs=[x, l1.weight, l2.weight], feeds=MLP_FEEDS,
                 stop_gradient=[x, y, h2],
                 description="x (stop_gradient=False) -> Linear(4,8) -> relu -> h; h2 = tanh(h) with "
                             "stop_gradient=True; o = Linear(8,3)(h + h2); loss = mean((o-y)**2); "
                             "gradients([loss], [x, l1.weight, l2.weight]).")


@option("gradients_targets")
def _grad_targets():
    x = data("x", [-1, 4], stop_gradient=False)
    l1 = nn.Linear(4, 8)
    h = F.relu(l1(x))
    t1 = paddle.sum(h * h)
    t2 = paddle.mean(paddle.sin(h))
    return Built(call="gradients", targets=[t1, t2], inputs=[x, l1.weight, l1.bias], feeds={"x": None},
                 stop_gradient=[x],
                 description="h = relu(Linear(4,8)(x)); t1 = sum(h*h), t2 = mean(sin(h)); "
                             "gradients([t1, t2], [x, l1.weight, l1.bias]).")


@option("gradients_target_gradients")
def _grad_tgrads():
    x = data("x", [-1, 4], stop_gradient=False)
    g = data("g", [-1, 8])
    l1 = nn.Linear(4, 8)
    h = l1(x)
    t1 = paddle.tanh(h)
    t2 = paddle.sum(h * 3.0)
    return Built(call="gradients", targets=[t1, t2], inputs=[x, l1.weight], target_gradients=[g, None],
                 feeds={"x": None, "g": None}, stop_gradient=[x],
                 description="h = Linear(4,8)(x); t1 = tanh(h) [-1,8], t2 = sum(h*3); gradients([t1, t2], "
                             "[x, l1.weight], target_gradients=[g (a data feed), None]).")


@option("calc_gradient_non_params")
def _calc_grad():
    x = data("x", [-1, 4], stop_gradient=False)
    l1, l2 = nn.Linear(4, 8), nn.Linear(8, 1)
    h = F.sigmoid(l1(x))
    loss = paddle.mean(l2(h))
    return Built(call="calc_gradient", targets=[loss], inputs=[h, x], feeds={"x": None}, stop_gradient=[x],
                 description="h = sigmoid(Linear(4,8)(x)); loss = mean(Linear(8,1)(h)); "
                             "calc_gradient([loss], [h, x]): inputs that are not parameters.")


@option("used_three_times")
def _three():
    x = data("x", [-1, 4])
    l1 = nn.Linear(4, 4)
    h = l1(x)
    z = h * h + h
    loss = paddle.mean(z)
    return Built(loss=loss, feeds={"x": None},
                 description="h = Linear(4,4)(x) used three times: z = h*h + h; loss = mean(z) "
                             "(builtin.combine + pd_op.add_n).")


@option("split_concat_stack")
def _split_concat():
    x = data("x", [-1, 6])
    l1 = nn.Linear(6, 6)
    h = l1(x)
    a, b, c = paddle.split(h, 3, axis=1)
    s = paddle.stack([a * 2.0, b, c], axis=0)            # [3, -1, 2]
    u0, u1, u2 = paddle.unbind(s, axis=0)
    cat = paddle.concat([u0, paddle.exp(u1), a], axis=1)  # [-1, 6]; a used twice
    loss = paddle.mean(cat * cat) + paddle.mean(u2)
    return Built(loss=loss, feeds={"x": None},
                 description="h = Linear(6,6)(x); split(h, 3) -> a, b, c; stack([a*2, b, c]); unbind; "
                             "concat([u0, exp(u1), a]); loss = mean(cat*cat) + mean(u2): vector results "
                             "(builtin.combine / builtin.split glue), a split result used twice.")


def small_cnn(dropout_p=0.0, bn=True, mode="train"):
    img, label = data("img", [-1, 1, 8, 8]), data("label", [-1, 1], "int64")
    conv = nn.Conv2D(1, 4, 3, padding=1)
    h = conv(img)
    layers = [conv]
    if bn:
        bnl = nn.BatchNorm2D(4)
        (bnl.train if mode == "train" else bnl.eval)()
        h = bnl(h)
    h = F.max_pool2d(F.relu(h), 2, 2)
    if dropout_p:
        h = F.dropout(h, dropout_p, training=(mode == "train"))
    logits = nn.Linear(64, 3)(paddle.flatten(h, 1))
    loss = paddle.mean(F.cross_entropy(logits, label))
    return loss, layers


CNN_FEEDS = {"img": None, "label": ("int", 3)}


@option("batch_norm")
def _bn():
    loss, _ = small_cnn(bn=True)
    return Built(loss=loss, feeds=CNN_FEEDS,
                 description="Conv2D(1,4,3) -> BatchNorm2D(4) (train: batch statistics) -> relu -> max_pool2d "
                             "-> flatten -> Linear(64,3) -> cross_entropy -> mean; append_backward(loss): "
                             "(param, None) pairs for the running mean and variance.")


@option("batch_norm_eval")
def _bn_eval():
    loss, _ = small_cnn(bn=True, mode="eval")
    return Built(loss=loss, feeds=CNN_FEEDS,
                 description="as batch_norm, BatchNorm2D in eval mode (running statistics).")


@option("dropout")
def _dropout():
    loss, _ = small_cnn(bn=False, dropout_p=0.5)
    return Built(loss=loss, feeds=CNN_FEEDS,
                 description="Conv2D -> relu -> max_pool2d -> dropout(0.5, train; program random_seed "
                             "2024, so a fixed seed) -> flatten -> Linear -> cross_entropy -> mean.")


@option("cnn")
def _cnn():
    loss, _ = small_cnn(bn=True, dropout_p=0.5)
    return Built(loss=loss, feeds=CNN_FEEDS,
                 description="Conv2D -> BatchNorm2D -> relu -> max_pool2d -> dropout(0.5) -> flatten -> "
                             "Linear(64,3) -> cross_entropy -> mean (testdata/pir's cnn, other sizes).")


@option("loss_not_scalar")
def _nonscalar():
    x = data("x", [-1, 4])
    l1 = nn.Linear(4, 8)
    h = paddle.tanh(l1(x))
    return Built(call="gradients", targets=[h], inputs=[l1.weight, l1.bias], feeds={"x": None},
                 description="h = tanh(Linear(4,8)(x)), a [-1, 8] target; gradients([h], [l1.weight, "
                             "l1.bias]): the seed is full_like(h, 1).")


@option("append_backward_not_scalar")
def _ab_nonscalar():
    x = data("x", [-1, 4])
    l1 = nn.Linear(4, 8)
    h = paddle.tanh(l1(x))
    return Built(loss=h, feeds={"x": None},
                 description="append_backward on a [-1, 8] value (not one element): what Paddle does.")


@option("error_parameter_list_names")
def _err_plist():
    m = mlp_layers()
    return Built(loss=m["loss"], parameter_list=[m["l1"].weight.name], feeds=MLP_FEEDS,
                 description=MLP_DESC + "parameter_list given as a name: Paddle's PIR pass refuses names.",
                 names_given=True)


@option("error_no_grad_set_names")
def _err_ngs():
    m = mlp_layers()
    return Built(loss=m["loss"], no_grad_set={m["l1"].weight.name}, feeds=MLP_FEEDS,
                 description=MLP_DESC + "no_grad_set given as a name: Paddle's PIR pass refuses names.",
                 names_given=True)


# --------------------------------------------------------------------------
# (c) control flow
# --------------------------------------------------------------------------
CF: dict[str, callable] = {}


def cf_case(name):
    def deco(fn):
        CF[name] = fn
        return fn
    return deco


POS, NEG = ("uniform", 0.1, 1.0), ("uniform", -1.0, -0.1)


def _cond(sign):
    x = data("x", [4], stop_gradient=False)
    w = paddle.create_parameter([4], "float32", name="w", default_initializer=nn.initializer.Constant(0.5))
    v = paddle.create_parameter([4], "float32", name="v", default_initializer=nn.initializer.Constant(-0.3))
    h = x * w
    out = static.nn.cond(paddle.sum(h) > 0, lambda: h * v + 2.0 * h, lambda: paddle.tanh(h) - v)
    loss = paddle.mean(out * out)
    return Built(loss=loss, feeds={"x": POS if sign > 0 else NEG}, stop_gradient=[x],
                 description=f"h = x*w; out = cond(sum(h) > 0, h*v + 2h, tanh(h) - v); loss = mean(out^2); "
                             f"parameter v used in both branches; x in ({'0.1, 1' if sign > 0 else '-1, -0.1'}): "
                             f"the {'true' if sign > 0 else 'false'} branch runs.",
                 branch_taken="true" if sign > 0 else "false")


cf_case("cond_true")(lambda: _cond(+1))
cf_case("cond_false")(lambda: _cond(-1))


def _nested(sign_outer, sign_inner):
    x = data("x", [4], stop_gradient=False)
    s = data("s", [1])
    w = paddle.create_parameter([4], "float32", name="w", default_initializer=nn.initializer.Constant(0.5))
    h = x * w

    def outer_true():
        return static.nn.cond(paddle.sum(s) > 0, lambda: paddle.sin(h) * w, lambda: h * h)

    out = static.nn.cond(paddle.sum(x) > 0, outer_true, lambda: paddle.exp(h))
    loss = paddle.mean(out)
    return Built(loss=loss, feeds={"x": POS if sign_outer > 0 else NEG, "s": POS if sign_inner > 0 else NEG},
                 stop_gradient=[x],
                 description="h = x*w; out = cond(sum(x) > 0, cond(sum(s) > 0, sin(h)*w, h*h), exp(h)); "
                             f"loss = mean(out); branches taken: outer {'true' if sign_outer > 0 else 'false'}"
                             + (f", inner {'true' if sign_inner > 0 else 'false'}" if sign_outer > 0 else "")
                             + ".",
                 branch_taken=("true" if sign_outer > 0 else "false")
                 + ("/" + ("true" if sign_inner > 0 else "false") if sign_outer > 0 else ""))


cf_case("nested_cond_tt")(lambda: _nested(+1, +1))
cf_case("nested_cond_tf")(lambda: _nested(+1, -1))
cf_case("nested_cond_f")(lambda: _nested(-1, +1))


@cf_case("while_param")
def _while_param():
    x = data("x", [-1, 4], stop_gradient=False)
    lin = nn.Linear(4, 4)
    i = paddle.full([1], 0, "int64")
    n = paddle.full([1], 3, "int64")
    _, v = static.nn.while_loop(lambda i, v: i < n, lambda i, v: [i + 1, paddle.tanh(lin(v))], [i, x])
    loss = paddle.mean(v * v)
    return Built(loss=loss, feeds={"x": None}, stop_gradient=[x],
                 description="v = x; while i < 3: v = tanh(Linear(4,4)(v)) (the Linear's parameters used in "
                             "the body); loss = mean(v*v).")


@cf_case("cond_in_while")
def _cond_in_while():
    x = data("x", [4], stop_gradient=False)
    w = paddle.create_parameter([4], "float32", name="w", default_initializer=nn.initializer.Constant(0.5))
    h = x * w
    i = paddle.full([1], 0, "int64")
    n = paddle.full([1], 4, "int64")

    def body(i, v):
        v2 = static.nn.cond(paddle.sum(v) > 0, lambda: v * w - 0.3, lambda: paddle.exp(v) * w)
        return [i + 1, v2]

    _, v = static.nn.while_loop(lambda i, v: i < n, body, [i, h])
    loss = paddle.mean(v)
    return Built(loss=loss, feeds={"x": ("uniform", 0.2, 1.0)}, stop_gradient=[x],
                 description="h = x*w; 4 times: v = cond(sum(v) > 0, v*w - 0.3, exp(v)*w); loss = mean(v); "
                             "both branches are taken over the iterations.")


def _while_in_while(counter_inside: bool):
    x = data("x", [4], stop_gradient=False)
    w = paddle.create_parameter([4], "float32", name="w", default_initializer=nn.initializer.Constant(0.7))
    i = paddle.full([1], 0, "int64")
    n = paddle.full([1], 2, "int64")
    j0 = paddle.full([1], 0, "int64")
    m = paddle.full([1], 2, "int64")

    def outer(i, v):
        j = paddle.full([1], 0, "int64") if counter_inside else j0
        _, v2 = static.nn.while_loop(lambda j, u: j < m, lambda j, u: [j + 1, paddle.sin(u * w)], [j, v])
        return [i + 1, v2 + v]

    _, v = static.nn.while_loop(lambda i, v: i < n, outer, [i, x])
    loss = paddle.mean(v * v)
    where = "a full() inside the outer body" if counter_inside else "a full() before the loops"
    return Built(loss=loss, feeds={"x": None}, stop_gradient=[x],
                 description="outer while (2 steps): inner while (2 steps) u = sin(u*w); v = inner(v) + v; "
                             f"loss = mean(v*v); the inner loop's counter starts from {where}."
                             + (" Paddle's Executor fails on Paddle's own backward program (pd_op.while: "
                                "'DenseTensor shouldn't be null'): op-for-op golden only, no values."
                                if counter_inside else ""))


cf_case("while_in_while")(lambda: _while_in_while(False))
cf_case("while_in_while_inner_counter")(lambda: _while_in_while(True))


# --------------------------------------------------------------------------
# (a) the real-model corpus, built again in PIR mode
# --------------------------------------------------------------------------
def import_gen_models():
    """Import testdata/models/gen_models.py for its builders. Its header re-executes the process unless
    FLAGS_enable_pir_api=0 and argv[0] is its own path: both are faked for the import only (Paddle is
    already loaded, in PIR mode; the env var is read once, at Paddle's start)."""
    path = MODELS_DIR / "gen_models.py"
    saved_env, saved_argv = os.environ.get("FLAGS_enable_pir_api"), sys.argv[0]
    os.environ["FLAGS_enable_pir_api"] = "0"
    sys.argv[0] = str(path)
    try:
        spec = importlib.util.spec_from_file_location("gen_models", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["gen_models"] = mod
        spec.loader.exec_module(mod)
    finally:
        sys.argv[0] = saved_argv
        if saved_env is None:
            os.environ.pop("FLAGS_enable_pir_api", None)
        else:
            os.environ["FLAGS_enable_pir_api"] = saved_env
    if not paddle.framework.in_pir_mode():
        raise AssertionError("importing gen_models left Paddle's PIR mode")
    return mod


def model_cases(gm) -> dict:
    """name -> (builder, narrow ctx factory, info). One case per model variant (gan: two)."""
    out = {}
    for mname, spec in gm.MODELS.items():
        variants = ["default"]
        if mname == "gan":
            variants = ["default", "generator"]
        for variant in variants:
            cname = mname if variant == "default" else f"{mname}_{variant}"

            def builder(spec=spec, variant=variant):
                info = spec["fn"](spec["mode"])
                call = (info.get("variants") or {}).get(variant) or {"loss": info["loss"]}
                plist = call.get("parameter_list")
                if plist is not None:
                    params = {op.result(0).name: op.result(0) for op in static.default_main_program()
                              .global_block().ops if op.name() == "builtin.parameter"}
                    plist = [params[p] for p in plist]
                sg = [v for op in static.default_main_program().global_block().ops if op.name() == "pd_op.data"
                      for v in [op.result(0)] if not v.stop_gradient]
                return Built(loss=call["loss"], parameter_list=plist, feeds=info["feeds"], stop_gradient=sg,
                             batch=info.get("batch", BATCH), description=info["description"],
                             reduction=info["reduction"], mode=spec["mode"])

            out[cname] = (builder, spec, mname, variant)
    return out


# --------------------------------------------------------------------------
def dedupe(cases: dict) -> None:
    """A file equal byte for byte to one of the same kind of an earlier case is dropped and the case
    points to the earlier one (cond_true/cond_false share their programs, the train/eval models their
    feeds and parameters)."""
    seen: dict[tuple[str, str], str] = {}
    for name, c in cases.items():
        for kind, fn in c["files"].items():
            if fn is None:
                continue
            h = hashlib.sha256((OUT / fn).read_bytes()).hexdigest()
            first = seen.setdefault((kind, h), fn)
            if first != fn:
                c["files"][kind] = first
                if fn.startswith(name + "."):
                    (OUT / fn).unlink()


def dump_manifest(manifest: dict) -> str:
    """Two levels indented (the top keys, each case's keys), the values compact."""
    def compact(v) -> str:
        return json.dumps(v, separators=(", ", ": "))

    lines = ["{"]
    top = list(manifest.items())
    for i, (k, v) in enumerate(top):
        end = "," if i < len(top) - 1 else ""
        if k in ("cases", "model_build_failures") and v:
            lines.append(f" {json.dumps(k)}: {{")
            items = list(v.items())
            for j, (name, entry) in enumerate(items):
                lines.append(f"  {json.dumps(name)}: {{")
                fields = list(entry.items())
                for m, (fk, fv) in enumerate(fields):
                    lines.append(f"   {json.dumps(fk)}: {compact(fv)}" + ("," if m < len(fields) - 1 else ""))
                lines.append("  }" + ("," if j < len(items) - 1 else ""))
            lines.append(" }" + end)
        else:
            lines.append(f" {json.dumps(k)}: {compact(v)}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def digest() -> tuple[str, int, int]:
    h, total, n = hashlib.sha256(), 0, 0
    for p in sorted(OUT.iterdir()):
        if p.is_file() and p.name not in KEEP:
            data_ = p.read_bytes()
            h.update(p.name.encode() + b"\0" + data_)
            total += len(data_)
            n += 1
    return h.hexdigest(), n, total


def main() -> None:
    sel = sys.argv[1:]
    groups = {"option", "cf", "model"}
    want_groups = {s for s in sel if s in groups} or (groups if not sel else set())
    want_names = {s for s in sel if s not in groups}
    manifest_path = OUT / "manifest.json"
    old = json.loads(manifest_path.read_text())["cases"] if manifest_path.exists() else {}
    if not sel:
        for p in OUT.iterdir():
            if p.is_file() and p.name not in KEEP:
                p.unlink()
        old = {}
    gm = import_gen_models()
    mcases = model_cases(gm)
    plan = [(n, "option", f) for n, f in OPTION.items()] + [(n, "control_flow", f) for n, f in CF.items()]
    plan += [(n, "model", v) for n, v in mcases.items()]
    known = {n for n, _, _ in plan}
    unknown = want_names - known
    if unknown:
        sys.exit(f"unknown case(s): {sorted(unknown)}")
    MANIFEST.update(old)
    failed_builds = dict(json.loads(manifest_path.read_text()).get("model_build_failures", {})) \
        if manifest_path.exists() and sel else {}
    t0 = time.perf_counter()
    for name, group, what in plan:
        g = {"option": "option", "control_flow": "cf", "model": "model"}[group]
        if not (g in want_groups or name in want_names):
            continue
        if group != "model":
            run_case(name, group, what)
            continue
        builder, spec, mname, variant = what
        failed_builds.pop(name, None)
        try:
            run_case(name, group, builder, narrow_ctx=gm.narrow(spec["narrow"], keep=spec.get("keep", ())),
                     model_info={"model": mname, "variant": variant, "narrow": spec["narrow"],
                                 "legacy_corpus": f"testdata/models/{mname}"})
        except Exception as e:  # noqa: BLE001
            MANIFEST.pop(name, None)
            for p in OUT.glob(f"{name}.*"):
                p.unlink()
            tb = traceback.extract_tb(e.__traceback__)
            failed_builds[name] = {"error": error_text(e),
                                   "where": [f"{os.path.basename(fr.filename)}:{fr.lineno} {fr.name}"
                                             for fr in tb[-3:]]}
            print(f"{name}: FAILED to build in PIR mode: {failed_builds[name]['error'][:200]}", flush=True)
    order = [n for n, _, _ in plan]
    cases = {n: MANIFEST[n] for n in order if n in MANIFEST}
    manifest = {"_generated_by": "testdata/pir_backward/gen_pir_backward.py", "paddle": paddle.__version__,
                "paddle_commit": paddle.version.commit, "seed": SEED,
                "flags": "default (PIR mode, prim off, FLAGS_max_inplace_grad_add=0)",
                "cases": cases, "model_build_failures": dict(sorted(failed_builds.items()))}
    dedupe(cases)
    manifest_path.write_text(dump_manifest(manifest))
    json.loads(manifest_path.read_text())
    h, n, total = digest()
    print(f"{len(cases)} cases ({sum(1 for c in cases.values() if c['error'])} refused by Paddle), "
          f"{len(failed_builds)} model builds failed; {n} files, {total / 1e6:.2f} MB, "
          f"{time.perf_counter() - t0:.0f}s; sha256 {h}")


if __name__ == "__main__":
    main()
