#!/usr/bin/env python
"""Record the gradient calls of Paddle's own legacy backward tests with a live
PaddlePaddle 3.3.1, for tests/backward/test_backward_replay.py to replay on
pybackward op for op (issue #35 items 4 and 5).

Each scenario below rebuilds one test of Paddle's test suite
(test/legacy_test/test_calc_gradient.py, ...), in legacy IR
(``FLAGS_enable_pir_api=0``), calling ``record(...)`` where the test calls
``gradients`` / ``append_backward``. For every call it writes, under
``testdata/backward_replay/<scenario>/``:

* ``call<k>_before.pb``: the main program right before the call;
  ``call<k>_after.pb``: Paddle's answer for that program read from the file
  (see ``Recorder``);
* ``case.json``: per call the API, the arguments by name, Paddle's
  ``_appending_grad_times`` before the call and the names it returned; then
  what the test runs (feeds, fetches), the values Paddle's Executor fetched,
  and the values the test asserts;
* ``startup.pb``, ``params.npz`` (persistables after the startup program) and
  ``feeds.npz``.

Run it with the Paddle interpreter (it re-executes itself with
``PYTHONHASHSEED=0``, ``FLAGS_enable_pir_api=0`` and its absolute path)::

    /path/to/paddle/venv/bin/python testdata/gen_backward_replay.py [scenario ...]
"""

from __future__ import annotations

import os
import sys

_SCRIPT = os.path.abspath(__file__)
if __name__ == "__main__" and (
    os.environ.get("PYTHONHASHSEED") != "0"
    or os.environ.get("FLAGS_enable_pir_api") != "0"
    or sys.argv[0] != _SCRIPT
):
    env = dict(os.environ, PYTHONHASHSEED="0", FLAGS_enable_pir_api="0")
    os.execve(sys.executable, [sys.executable, _SCRIPT] + sys.argv[1:], env)

import json  # noqa: E402
import logging  # noqa: E402
import shutil  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

warnings.filterwarnings("ignore")

import paddle  # noqa: E402
from google.protobuf import text_format  # noqa: E402
from paddle.base.proto import framework_pb2  # noqa: E402

paddle.enable_static()
logging.disable(logging.WARNING)

OUT_ROOT = os.path.join(os.path.dirname(_SCRIPT), "backward_replay")
SCENARIOS = []


def scenario(fn):
    SCENARIOS.append(fn)
    return fn


def _names(vs):
    if vs is None:
        return None
    if not isinstance(vs, (list, tuple)):
        vs = [vs]
    return [None if v is None else (v if isinstance(v, str) else v.name) for v in vs]


class Recorder:
    """Writes the program around each recorded call.

    The program after a call is Paddle's answer for the program before it as
    a file: the before-bytes re-parsed (``Program.parse_from_string``, as a
    user's saved program is read), ``_appending_grad_times`` set as the
    in-memory program had it, and the same call made on it by var names -
    what pybackward gets when it loads the before-file. (An in-memory
    program keeps its vars in creation order; a parsed one in file order.)
    The test itself goes on with its in-memory program."""

    def __init__(self, out_dir: str, main: paddle.static.Program):
        self.out_dir, self.main, self.calls = out_dir, main, []

    def _write(self, fname: str, data: bytes) -> None:
        with open(os.path.join(self.out_dir, fname), "wb") as f:
            f.write(data)
        msg = framework_pb2.ProgramDesc.FromString(data)
        with open(os.path.join(self.out_dir, fname[:-3] + ".pbtxt"), "w") as f:
            f.write(text_format.MessageToString(msg))

    def _as_file(self, before: bytes, times: int, api: str, args: dict):
        prog = paddle.static.Program.parse_from_string(before)
        prog._appending_grad_times = times
        block = prog.global_block()

        def v(names):
            return None if names is None else [None if n is None else block.var(n) for n in names]
        with paddle.static.program_guard(prog), paddle.utils.unique_name.guard():
            if api == "gradients":
                out = paddle.static.gradients(v(args["targets"]), v(args["inputs"]), v(args["target_gradients"]),
                                              args["no_grad_set"] and set(args["no_grad_set"]))
                returned = _names(out)
            else:
                ckpt = args.get("checkpoints")
                out = paddle.static.append_backward(block.var(args["targets"][0]), args["parameter_list"],
                                                    args["no_grad_set"] and set(args["no_grad_set"]),
                                                    checkpoints=v(ckpt) if ckpt is not None else None)
                if ckpt:
                    pairs, names = out
                    returned = [[[p.name, None if g is None else g.name] for p, g in pairs], list(names)]
                else:
                    returned = [[p.name, None if g is None else g.name] for p, g in out]
        return prog.desc.serialize_to_string(), returned

    def _record(self, api: str, args: dict, call):
        k = len(self.calls)
        times = self.main._appending_grad_times
        before = self.main.desc.serialize_to_string()
        self._write(f"call{k}_before.pb", before)
        after, returned = self._as_file(before, times, api, args)
        self._write(f"call{k}_after.pb", after)
        out = call()
        self.calls.append(dict(api=api, **args, appending_grad_times=times, returned=returned))
        return out

    def gradients(self, targets, inputs, target_gradients=None, no_grad_set=None):
        args = {"targets": _names(targets), "inputs": _names(inputs),
                "target_gradients": _names(target_gradients),
                "no_grad_set": sorted(_names(list(no_grad_set))) if no_grad_set else None}
        return self._record("gradients", args, lambda: paddle.static.gradients(
            targets, inputs, target_gradients, no_grad_set))

    def append_backward(self, loss, parameter_list=None, no_grad_set=None, checkpoints=None):
        args = {"targets": [loss.name], "parameter_list": _names(parameter_list),
                "no_grad_set": sorted(_names(list(no_grad_set))) if no_grad_set else None}
        if checkpoints is not None:  # recompute (RecomputeOptimizer's call)
            args["checkpoints"] = _names(checkpoints)
        return self._record("append_backward", args, lambda: paddle.static.append_backward(
            loss, parameter_list, no_grad_set, checkpoints=checkpoints))


def _paddle_feed(feed: dict) -> dict:
    """Feed values for Paddle's Executor: an `(array, lod)` pair (LoD as
    offsets) becomes a LoDTensor."""
    out = {}
    for n, v in feed.items():
        if isinstance(v, tuple):
            t = paddle.base.core.LoDTensor()
            t.set(v[0], paddle.CPUPlace())
            t.set_lod(v[1])
            out[n] = t
        else:
            out[n] = v
    return out


def _npz_feed(feed: dict) -> dict:
    """Feed values as an .npz holds them: a LoD as `<var>@LOD0`, ... arrays."""
    out = {}
    for n, v in feed.items():
        if isinstance(v, tuple):
            out[n] = v[0]
            for k, level in enumerate(v[1]):
                out[f"{n}@LOD{k}"] = np.asarray(level, np.int64)
        else:
            out[n] = v
    return out


def _check_expectations(name: str, run: dict, values: dict) -> None:
    """The test's own value assertions, on Paddle's values: the scenario
    rebuilds the test faithfully only if Paddle passes them."""
    for n, want in run.get("expect", {}).items():
        np.testing.assert_array_equal(values[n], np.asarray(want, dtype=values[n].dtype), err_msg=f"{name}: {n}")
    for n, (want, rtol, atol) in run.get("expect_close", {}).items():
        np.testing.assert_allclose(values[n], want, rtol=rtol, atol=atol, err_msg=f"{name}: {n}")
    for n, (total, delta) in run.get("expect_sum", {}).items():
        assert abs(float(np.sum(values[n])) - total) <= delta, (name, n)


def _json_feed(feed: dict) -> dict:
    return {n: {"dtype": str(np.asarray(v).dtype), "value": np.asarray(v).tolist()} for n, v in feed.items()}


def _fd_check(exe, main, run: dict, fd: dict, got: dict) -> None:
    """The test's finite-difference check (TestCondBackward's helper): one-sided
    differences of `loss` in each element of feed `wrt`, against `grad`."""
    feed = dict(run["feed"])
    base = float(np.asarray(got[fd["loss"]]).reshape(-1)[0])
    x = feed[fd["wrt"]]
    num = np.zeros(x.shape, np.float32)
    for j in range(x.size):
        xd = x.copy()
        xd.reshape(-1)[j] += fd["delta"]
        feed[fd["wrt"]] = xd
        (val,) = exe.run(main, feed=_paddle_feed(feed), fetch_list=[fd["loss"]])
        num.reshape(-1)[j] = (float(np.asarray(val).reshape(-1)[0]) - base) / fd["delta"]
    np.testing.assert_allclose(got[fd["grad"]], num, rtol=fd["rtol"], atol=fd["atol"])


def generate(builder) -> None:
    name = builder.__name__
    out_dir = os.path.join(OUT_ROOT, name)
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    paddle.seed(2024)
    main, startup = paddle.static.Program(), paddle.static.Program()
    rec = Recorder(out_dir, main)
    with paddle.utils.unique_name.guard(), paddle.static.program_guard(main, startup):
        spec = builder(rec)
    with open(os.path.join(out_dir, "startup.pb"), "wb") as f:
        f.write(startup.desc.serialize_to_string())
    scope = paddle.static.Scope()
    exe = paddle.static.Executor(paddle.CPUPlace())
    fetch = _names(spec.get("fetch", []))
    got, runs = [], []
    with paddle.static.scope_guard(scope):
        exe.run(startup)
        persist = sorted(v.name for v in main.list_vars() if v.persistable and v.name not in ("feed", "fetch"))
        params = {n: np.array(scope.find_var(n).get_tensor()) for n in persist
                  if scope.find_var(n) is not None and scope.find_var(n).get_tensor()._is_initialized()}
        if fetch:
            for k, run in enumerate([spec] + spec.get("runs", [])):
                vals = exe.run(main, feed=_paddle_feed(run.get("feed", {})), fetch_list=fetch)
                by_name = dict(zip(fetch, (np.asarray(v) for v in vals)))
                _check_expectations(name, run, by_name)
                if "expect_fd" in spec:
                    _fd_check(exe, main, run, spec["expect_fd"], by_name)
                if k == 0:
                    got = vals
                else:
                    runs.append({"feed": _json_feed(run["feed"]), "paddle_values": [np.asarray(v).tolist() for v in vals],
                                 "expect": run.get("expect", {}), "expect_close": run.get("expect_close", {})})
    np.savez(os.path.join(out_dir, "params.npz"), **params)
    np.savez(os.path.join(out_dir, "feeds.npz"), **_npz_feed(spec.get("feed", {})))
    case = {"test": spec["test"], "calls": rec.calls, "fetch": fetch,
            "paddle_values": [np.asarray(v).tolist() for v in got],
            "expect": spec.get("expect", {})}
    for key in ("expect_close", "expect_sum", "expect_fd", "expect_ops", "expect_params"):
        if key in spec:
            case[key] = spec[key]
    if runs:
        case["runs"] = runs
    with open(os.path.join(out_dir, "case.json"), "w") as f:
        json.dump(case, f, indent=1)
        f.write("\n")
    print(f"{name}: {len(rec.calls)} calls, fetched {[np.asarray(v).shape for v in got]}")


def matmul(x, y):
    """paddle.matmul as a legacy `matmul_v2` op (Paddle 3.3.1's paddle.matmul
    takes the PIR path even in legacy mode)."""
    helper = paddle.base.layer_helper.LayerHelper("matmul_v2")
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type="matmul_v2", inputs={"X": [x], "Y": [y]}, outputs={"Out": [out]},
                     attrs={"trans_x": False, "trans_y": False})
    return out


# --------------------------------------------------------------------------
# test_calc_gradient.py
# --------------------------------------------------------------------------
@scenario
def calc_gradient_matmul_mean(rec):
    x = paddle.create_parameter(dtype="float32", shape=[5, 10])
    y = paddle.create_parameter(dtype="float32", shape=[10, 8])
    mul_out = matmul(x, y)
    mean_out = paddle.mean(mul_out)
    a = rec.gradients(mean_out, mul_out)
    b = rec.gradients(mean_out, x)
    return {"test": "test_calc_gradient.py::TestCalcGradient::test_calc_gradient", "fetch": [a[0], b[0]]}


@scenario
def double_grad_x_minus_grad(rec):
    net = lambda v: v * v  # noqa: E731
    x = paddle.create_parameter(name="x", shape=[1], dtype="float32",
                                default_initializer=paddle.nn.initializer.Constant(3))
    (grad1,) = rec.gradients(net(x), x)              # 2x = 6
    z = net(x - grad1)
    (grad2,) = rec.gradients(z, x)                   # d (x - 2x)^2 / dx = 2x = 6
    return {"test": "test_calc_gradient.py::TestDoubleGrad::test1", "fetch": [grad1, grad2],
            "expect": {grad1.name: [6.0], grad2.name: [6.0]}}


@scenario
def double_grad_of_grad_squared(rec):
    x = paddle.create_parameter(name="x", shape=[1], dtype="float32",
                                default_initializer=paddle.nn.initializer.Constant(1))
    y = x * x
    (dx1,) = rec.gradients(y, x)
    z = dx1 * dx1 + y * y
    (dx2,) = rec.gradients(z, x)
    return {"test": "test_calc_gradient.py::TestDoubleGrad::test2", "fetch": [dx2], "expect": {dx2.name: [12.0]}}


@scenario
def gradient_with_prune(rec):
    x = paddle.static.data(name="x", shape=[3], dtype="float32")
    x.stop_gradient = False
    x1, _, _ = paddle.split(x, axis=0, num_or_sections=3)
    y = x1 * 2
    (x1_grad,) = rec.gradients(y, x)
    return {"test": "test_calc_gradient.py::TestGradientWithPrune::test_prune", "fetch": [x1_grad],
            "feed": {"x": np.ones([3], np.float32)}, "expect": {x1_grad.name: [2.0, 0.0, 0.0]}}


@scenario
def double_gradient_single_target(rec):
    x = paddle.static.data("x", shape=[2, 2])
    x.stop_gradient = False
    y = x * x
    v = paddle.ones([2, 2])
    v.stop_gradient = False
    grad_y = paddle.zeros_like(y)
    grad_y.stop_gradient = False
    grad_x = rec.gradients(y, x, grad_y)
    jvp = rec.gradients(grad_x, grad_y, v)
    return {"test": "test_calc_gradient.py::TestDoubleGradient::test_calc_gradient",
            "fetch": [grad_x[0], jvp[0]], "feed": {"x": np.ones([2, 2], np.float32)},
            "expect": {grad_x[0].name: [[0.0, 0.0], [0.0, 0.0]], jvp[0].name: [[2.0, 2.0], [2.0, 2.0]]}}


@scenario
def double_gradient_multi_target(rec):
    x = paddle.static.data("x", shape=[2, 2])
    x.stop_gradient = False
    y = x * x
    y2 = y + x
    v = paddle.ones([2, 2])
    v.stop_gradient = False
    grad_y = paddle.zeros_like(y)
    grad_y.stop_gradient = False
    grad_x = rec.gradients(y, x, grad_y)
    grad_x2 = rec.gradients(y2, x, grad_y)
    jvp = rec.gradients([grad_x[0], grad_x2[0]], grad_y, [v, v])
    return {"test": "test_calc_gradient.py::TestDoubleGradient2::test_calc_gradient",
            "fetch": [grad_x[0], jvp[0]], "feed": {"x": np.ones([2, 2], np.float32)},
            "expect": {grad_x[0].name: [[0.0, 0.0], [0.0, 0.0]], jvp[0].name: [[5.0, 5.0], [5.0, 5.0]]}}


def main(scenarios=SCENARIOS):
    only = set(sys.argv[1:])
    os.makedirs(OUT_ROOT, exist_ok=True)
    for builder in scenarios:
        if not only or builder.__name__ in only:
            generate(builder)


if __name__ == "__main__":
    main()
