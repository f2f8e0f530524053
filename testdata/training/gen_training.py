#!/usr/bin/env python
"""Whole training programs (forward + backward + optimizer) made and run by Paddle 3.3.1.

For each case, a small MLP classifier (Linear -> ReLU -> Linear, softmax
cross entropy, mean) is built in the legacy static graph and trained with one
of Paddle's optimizers (`paddle.optimizer.X(...).minimize(loss)`), some with
gradient clipping (clip_by_norm, clip) and L2 regularization. Written under
`testdata/training/<case>/`:

* `main.pb` / `startup.pb` (+ `.pbtxt`): the programs, as Paddle saved them;
* `init.npz`: every persistable var after the startup program ran (params,
  learning rate, moments, beta pows ...), so the test starts from Paddle's state;
* `feeds.npz`: the batches `x<k>`, `label<k>` of steps k = 0, 1, 2;
* `after.npz`: the loss of each step (`loss<k>`) and every parameter after
  three steps of Paddle's Executor on CPU;
* `case.json`: the optimizer, its arguments, the param and loss names.

tests/ops/test_optim.py runs main.pb three times with pybackward's
interpreter from init.npz and compares. Run with Paddle's Python (no
pybackward needed); its outputs are committed:

    FLAGS_enable_pir_api=0 /path/to/paddle/python testdata/training/gen_training.py
"""
import json
import os
import pathlib
import shutil
import warnings

os.environ["FLAGS_enable_pir_api"] = "0"
warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import paddle  # noqa: E402
from google.protobuf import text_format  # noqa: E402
from paddle.base.proto import framework_pb2  # noqa: E402
from paddle.utils import unique_name  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
STEPS = 3
BATCH, IN, HIDDEN, CLASSES = 8, 5, 6, 3

#: case -> (optimizer class name, its keyword arguments). Not here: ASGD and
#: ClipGradByGlobalNorm, which Paddle 3.3.1 fails to build in a legacy-IR program;
#: NAdam / RAdam (Paddle's CPU kernels are wrong for params of more than one element).
CASES = {
    "sgd": ("SGD", {"learning_rate": 0.1}),
    "momentum": ("Momentum", {"learning_rate": 0.1, "momentum": 0.9}),
    "momentum_nesterov_l2": ("Momentum", {"learning_rate": 0.05, "momentum": 0.9, "use_nesterov": True,
                                          "weight_decay": paddle.regularizer.L2Decay(0.01)}),
    "adam": ("Adam", {"learning_rate": 0.01}),
    "adam_amsgrad": ("Adam", {"learning_rate": 0.01, "beta1": 0.8, "beta2": 0.99, "amsgrad": True}),
    "adamw": ("AdamW", {"learning_rate": 0.01, "weight_decay": 0.05}),
    "adagrad": ("Adagrad", {"learning_rate": 0.1}),
    "adamax": ("Adamax", {"learning_rate": 0.05}),
    "adadelta": ("Adadelta", {"learning_rate": 1.0}),
    "rmsprop": ("RMSProp", {"learning_rate": 0.01, "momentum": 0.5}),
    "rmsprop_centered": ("RMSProp", {"learning_rate": 0.01, "centered": True}),
    "lamb": ("Lamb", {"learning_rate": 0.01}),
    "rprop": ("Rprop", {"learning_rate": 0.01}),
    "momentum_clip_norm": ("Momentum", {"learning_rate": 0.2, "grad_clip": paddle.nn.ClipGradByNorm(0.2)}),
    "adam_l2_clip_value": ("Adam", {"learning_rate": 0.02, "weight_decay": paddle.regularizer.L2Decay(0.05),
                                    "grad_clip": paddle.nn.ClipGradByValue(0.1)}),
}


def write_pb(path: pathlib.Path, b: bytes) -> None:
    path.write_bytes(b)
    m = framework_pb2.ProgramDesc()
    m.ParseFromString(b)
    path.with_suffix(".pbtxt").write_text(text_format.MessageToString(m))


def build(opt_name, kwargs):
    main, startup = paddle.static.Program(), paddle.static.Program()
    main.random_seed = startup.random_seed = 7
    with unique_name.guard(), paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [BATCH, IN], "float32")
        label = paddle.static.data("label", [BATCH, 1], "int64")
        h = paddle.nn.functional.relu(paddle.nn.Linear(IN, HIDDEN)(x))
        logits = paddle.nn.Linear(HIDDEN, CLASSES)(h)
        loss = paddle.mean(paddle.nn.functional.cross_entropy(logits, label))
        opt = getattr(paddle.optimizer, opt_name)(**kwargs)
        opt.minimize(loss)
    return main, startup, loss


def persistables(program):
    return sorted(v.name for v in program.list_vars() if v.persistable and v.type not in (
        paddle.base.core.VarDesc.VarType.FEED_MINIBATCH, paddle.base.core.VarDesc.VarType.FETCH_LIST))


def run_case(name, opt_name, kwargs, exe):
    main, startup, loss = build(opt_name, kwargs)
    scope = paddle.static.Scope()
    rng = np.random.default_rng(sum(map(ord, name)))
    feeds = {}
    for k in range(STEPS):
        feeds[f"x{k}"] = rng.standard_normal((BATCH, IN)).astype("float32")
        feeds[f"label{k}"] = rng.integers(0, CLASSES, (BATCH, 1)).astype("int64")
    names = persistables(main)
    params = sorted(p.name for p in main.all_parameters())
    with paddle.static.scope_guard(scope):
        exe.run(startup)
        init = {n: np.array(scope.find_var(n).get_tensor()) for n in names if scope.find_var(n) is not None}
        after = {}
        for k in range(STEPS):
            (lv,) = exe.run(main, feed={"x": feeds[f"x{k}"], "label": feeds[f"label{k}"]}, fetch_list=[loss])
            after[f"loss{k}"] = np.asarray(lv)
        for n in names:
            v = scope.find_var(n)
            if v is not None and v.get_tensor()._is_initialized():
                after[n] = np.array(v.get_tensor())
    out = HERE / name
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    write_pb(out / "main.pb", main.desc.serialize_to_string())
    write_pb(out / "startup.pb", startup.desc.serialize_to_string())
    np.savez(out / "init.npz", **init)
    np.savez(out / "feeds.npz", **feeds)
    np.savez(out / "after.npz", **after)
    ops = sorted({op.type for op in main.global_block().ops})
    meta = {"optimizer": opt_name, "kwargs": {k: (v if isinstance(v, (int, float, bool)) else repr(v))
                                              for k, v in kwargs.items()},
            "steps": STEPS, "loss": loss.name, "params": params, "persistables": sorted(init), "op_types": ops,
            "paddle": paddle.__version__}
    (out / "case.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"{name}: {len(main.global_block().ops)} ops, losses "
          + " ".join(f"{float(after[f'loss{k}']):.5f}" for k in range(STEPS)))


def main():
    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())
    for name, (opt_name, kwargs) in CASES.items():
        run_case(name, opt_name, kwargs, exe)


if __name__ == "__main__":
    main()
