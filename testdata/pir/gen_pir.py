#!/usr/bin/env python
"""Write pybackward's PIR golden files with a live PaddlePaddle 3.3.1 (PIR mode).

Run it with Paddle's interpreter from anywhere::

    /work/main/.paddle-venv/bin/python testdata/pir/gen_pir.py

It re-executes itself with ``PYTHONHASHSEED=0``, PIR on (``FLAGS_enable_pir_api``
unset) and an absolute script path, then rewrites every file in this directory
except itself and README.md. Paddle is the oracle only: pybackward never imports
it. Output is deterministic (fixed seeds; PIR files carry no call stacks); the
script ends by printing a sha256 over what it wrote. It takes about a minute on
2 cores, most of it in the fresh Paddle processes that print and re-save each
file (Paddle numbers `cf.stack_create` values per printer object, so a print in
a long-lived process is not the print a user sees).

What it writes, per case ``<c>`` (``manifest.json`` lists them all):

* ``<c>.json``: the program as Paddle saved it (``paddle.static.save``,
  ``save_inference_model`` or ``jit.save``), with ``<c>.pdparams`` (pickle) or
  ``<c>.pdiparams`` (save_combine stream) holding its parameters;
* ``<c>.txt``: ``print(program)`` of the program Paddle reads back from ``<c>.json``;
* ``<c>.resave.json``: Paddle's re-save of ``<c>.json`` (deserialize, then
  serialize with the file's own ``trainable`` flag), written only when it differs
  from ``<c>.json`` (the manifest says ``byte_stable``);
* ``<c>.readable.json`` for some cases: Paddle's ``readable=True`` re-save;
* ``v<N>_<c>.json`` (N = 1, 2, 3): a 3.3.1 file turned back into format version N
  (version number and the op forms that the patch sets N..4 change), with
  ``v<N>_<c>.upgraded.json``, Paddle's re-save after loading it: what an upgrade
  to version 4 must give.
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

import copy  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

warnings.filterwarnings("ignore")
import paddle  # noqa: E402
from paddle.base import core  # noqa: E402

OUT = Path(_SCRIPT).parent
KEEP = {"gen_pir.py", "README.md"}
MANIFEST: dict = {"_generated_by": "testdata/pir/gen_pir.py", "paddle": paddle.__version__,
                  "paddle_commit": paddle.version.commit, "cases": {}, "versions": {}}

# One fresh Paddle process per file: print it, re-save it (compact and readable).
_HELPER = r"""
import sys, warnings
warnings.filterwarnings("ignore")
import paddle
from paddle.base import core
paddle.enable_static()
src, txt, resave, readable, trainable = sys.argv[1:6]
prog = paddle.static.Program()
core.deserialize_pir_program(src, prog, -1)
if txt != "-":
    with open(txt, "w", encoding="utf-8") as f:
        f.write(str(prog))
if resave != "-":
    core.serialize_pir_program(prog, resave, True, False, trainable == "1")
if readable != "-":
    core.serialize_pir_program(prog, readable, True, True, trainable == "1")
"""


def paddle_helper(src: Path, txt: str = "-", resave: str = "-", readable: str = "-") -> None:
    trainable = json.loads(src.read_text())["base_code"].get("trainable", False)
    subprocess.run([sys.executable, "-c", _HELPER, str(src), txt, resave, readable, "1" if trainable else "0"],
                   check=True, env=dict(os.environ, FLAGS_save_cf_stack_op="1"),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def feed_specs(feeds) -> list[dict]:
    return [{"name": v.name, "shape": list(v.shape), "dtype": str(v.dtype).replace("paddle.", "")} for v in feeds]


def finish(name: str, *, kind: str, feeds: list[dict], params: str | None, readable: bool = False,
           note: str = "") -> None:
    """Print, re-save (and maybe write readable) the saved `<name>.json`; record it in the manifest."""
    src = OUT / f"{name}.json"
    resave = OUT / f"{name}.resave.json"
    paddle_helper(src, txt=str(OUT / f"{name}.txt"), resave=str(resave),
                  readable=str(OUT / f"{name}.readable.json") if readable else "-")
    stable = resave.read_bytes() == src.read_bytes()
    if stable:
        resave.unlink()
    data = json.loads(src.read_text())
    MANIFEST["cases"][name] = {"kind": kind, "feeds": feeds, "params": params, "byte_stable": stable,
                               "readable": readable, "trainable": data["base_code"]["trainable"],
                               "ops": count_ops(data["program"]), "note": note}


def count_ops(prog: dict) -> int:
    n, stack = 0, [prog]
    while stack:
        node = stack.pop()
        for region in node.get("regions", []):
            for block in region["blocks"]:
                for op in block["ops"]:
                    n += 1
                    stack.append(op)
    return n


def static_save(name: str, main, startup, feeds, *, backward_of=None, readable: bool = False, cf: bool = False,
                note: str = "") -> None:
    """Run startup (seed 0), optionally append_backward, save with paddle.static.save."""
    if backward_of is not None:
        with paddle.static.program_guard(main, startup):
            paddle.static.append_backward(backward_of)
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        paddle.seed(0)
        exe.run(startup)
        if cf:
            paddle.set_flags({"FLAGS_save_cf_stack_op": True})
        paddle.static.save(main, str(OUT / name))
        paddle.set_flags({"FLAGS_save_cf_stack_op": False})
    opt = OUT / f"{name}.pdopt"
    if name != "mlp" and opt.exists():      # every .pdopt here is an empty dict; keep one
        opt.unlink()
    finish(name, kind="static.save", feeds=feed_specs(feeds), params=f"{name}.pdparams", readable=readable,
           note=note)


# --------------------------------------------------------------------------
# The models
# --------------------------------------------------------------------------
def mlp(with_backward: bool):
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [-1, 4], "float32")
        y = paddle.static.data("y", [-1, 1], "float32")
        h = paddle.static.nn.fc(x, 8, activation="relu")
        o = paddle.static.nn.fc(h, 1)
        loss = paddle.mean((o - y) ** 2)
    return main, startup, [x, y], loss


def cnn():
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("img", [-1, 1, 8, 8], "float32")
        label = paddle.static.data("label", [-1, 1], "int64")
        c = paddle.nn.Conv2D(1, 4, 3, padding=1)(x)
        b = paddle.nn.BatchNorm2D(4)(c)
        r = paddle.nn.functional.relu(b)
        p = paddle.nn.functional.max_pool2d(r, 2, 2)
        d = paddle.nn.functional.dropout(p, 0.5)
        f = paddle.flatten(d, 1)
        logits = paddle.nn.Linear(64, 3)(f)
        loss = paddle.mean(paddle.nn.functional.cross_entropy(logits, label))
    return main, startup, [x, label], loss, logits


def transformer():
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("tokens", [-1, 4, 8], "float32")
        layer = paddle.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0)
        h = layer(x)
        loss = paddle.mean(h * h)
    return main, startup, [x], loss


def cond_prog():
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [4], "float32")
        x.stop_gradient = False
        w = paddle.create_parameter([4], "float32", default_initializer=paddle.nn.initializer.Constant(0.5))
        h = x * w
        out = paddle.static.nn.cond(paddle.sum(h) > 0, lambda: h * 2.0, lambda: paddle.tanh(h) - 1.0)
        loss = paddle.mean(out)
    return main, startup, [x], loss


def while_prog():
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [4], "float32")
        x.stop_gradient = False
        w = paddle.create_parameter([4], "float32", default_initializer=paddle.nn.initializer.Constant(0.5))
        h = x * w
        i = paddle.full([1], 0, "int64")
        n = paddle.full([1], 3, "int64")
        _, v = paddle.static.nn.while_loop(lambda i, v: i < n, lambda i, v: [i + 1, paddle.sin(v) * 1.5], [i, h])
        loss = paddle.mean(v)
    return main, startup, [x], loss


def cond_in_while_prog():
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [4], "float32")
        x.stop_gradient = False
        w = paddle.create_parameter([4], "float32", default_initializer=paddle.nn.initializer.Constant(0.5))
        h = x * w
        i = paddle.full([1], 0, "int64")
        n = paddle.full([1], 3, "int64")

        def body(i, v):
            v2 = paddle.static.nn.cond(paddle.sum(v) > 0, lambda: v * 0.5, lambda: paddle.exp(v))
            return [i + 1, v2]

        _, v = paddle.static.nn.while_loop(lambda i, v: i < n, body, [i, h])
        loss = paddle.mean(v)
    return main, startup, [x], loss


def zoo():
    """Forward only: many type and attribute kinds, the ops the version patches touch,
    an escaped, non-ASCII data name, +-inf constants (not NaN: Paddle writes "NaN"
    but reads only "NAN", so it cannot read its own NaN file; see nan.json)."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data('in"put\\数据', [2, 3, 4, 4], "float32")
        a = paddle.concat([x, x], axis=1)
        s1, _ = paddle.split(a, 2, axis=1)
        paddle.assign(np.array([1.5, 2.5], "float32"))
        paddle.assign(np.array([1, 2], "int64"))
        arr = paddle.tensor.create_array("float32")
        i0 = paddle.zeros([1], "int64")
        paddle.tensor.array_write(s1, i0, arr)
        paddle.tensor.array_read(arr, i0)
        paddle.full([2], float("inf"))
        paddle.full([2], -float("inf"))
        paddle.full([1], 1e15)
        paddle.full([1], 1.0e-7)
        paddle.full([1], 0.1)
        paddle.full([1], 123456789.0, "float64")
        paddle.full([1], 3, "int32")
        paddle.kthvalue(x, 2, axis=-1)
        paddle.repeat_interleave(x, 2, axis=0)
        paddle.nn.functional.leaky_relu(x, 0.1)
        paddle.nn.functional.softplus(x, 2.0, 15.0)
        paddle.logit(x, 1e-6)
        paddle.nn.functional.pad(paddle.unsqueeze(x, 2), [1, 1, 1, 1, 1, 1], value=0.5, mode="constant",
                                 data_format="NCDHW")
        paddle.nn.functional.group_norm(x, num_groups=1, epsilon=1e-5)
        paddle.nn.functional.interpolate(x, scale_factor=[2.0, 2.0], mode="bilinear")
        paddle.nn.functional.interpolate(x, scale_factor=[2.0, 2.0], mode="nearest")
        paddle.nn.functional.interpolate(x, scale_factor=[2.0, 2.0], mode="bicubic")
        paddle.nn.functional.max_pool3d(paddle.unsqueeze(x, 2), 1, 1)
        paddle.cast(x, "float16")
        paddle.cast(x, "bfloat16")
        paddle.argmax(x, axis=1)
        paddle.nn.functional.max_pool2d(x, 2, 2)
        paddle.expand_as(paddle.ones([1, 4], "float32"), paddle.ones([3, 4]))
        paddle.full([2], 1 + 2j, "complex64")
        paddle.cast(x, "uint8")
        paddle.cast(x, "int8")
        paddle.cast(x, "int16")
        paddle.cast(x, "bool")
        paddle.cast(x, "float64")
    return main, startup, [x]


def pylayer_prog():
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [4], "float32")
        x.stop_gradient = False
        y = paddle.static.nn.static_pylayer(lambda x: paddle.exp(x), [x], lambda dy: dy * 2.0)
        loss = paddle.mean(y)
    return main, startup, [x], loss


def _dt(dtype: str, dims=(2,), layout="NCHW", lod=(), offset=0) -> dict:
    return {"#": "0.t_dtensor", "D": [{"#": dtype}, list(dims), layout, [list(x) for x in lod], offset]}


def print_zoo() -> None:
    """Hand-made bare ops (Paddle reads ops unverified) carrying every type and
    attribute form pybackward prints, for the print golden; not a runnable program."""
    scalars = ["0.t_bool", "0.t_bf16", "0.t_f16", "0.t_f32", "0.t_f64", "0.t_i8", "0.t_ui8", "0.t_i16", "0.t_i32",
               "0.t_i64", "0.t_index", "0.t_c64", "0.t_c128", "0.t_f8e4m3fn", "0.t_f8e5m2"]
    types = [_dt(t) for t in scalars] + [{"#": t} for t in scalars[:4]] + [
        _dt("0.t_f32", ()), _dt("0.t_f32", (-1, 3, 0)), _dt("0.t_f32", (2,), "NHWC", [[0, 1, 2]], 3),
        _dt("0.t_f32", (2,), "Undefined(AnyLayout)"), _dt("0.t_f32", (2,), "NCDHW"),
        {"#": "0.t_vec", "D": []}, {"#": "0.t_vec", "D": [_dt("0.t_f32"), _dt("0.t_i64", (-1,))]},
        {"#": "1.t_dense_tensor_array", "D": [{"#": "0.t_f32"}, [2, -1], "NCHW"]},
        {"#": "1.t_selected_rows", "D": [{"#": "0.t_f32"}, [8, 4], "NCHW", [], 0]},
        {"#": "1.t_sparse_coo_tensor", "D": [{"#": "0.t_f32"}, [4, 4], [3], "NCHW", _dt("0.t_i64", (2, 3)),
                                             _dt("0.t_f32", (3,))]},
        {"#": "1.t_sparse_csr_tensor", "D": [{"#": "0.t_f32"}, [4, 4], "NCHW", _dt("0.t_i64", (5,)),
                                             _dt("0.t_i64", (3,)), _dt("0.t_f32", (3,))]},
        {"#": "2.t_stack"}, {"#": "2.t_inlet"}, {"#": "2.t_outlet"}, {"#": "NULL"}]
    floats = [0.0, 0.1, 1.5, 2.0, 1e-05, 1e-4, 0.0001234, 123456.7, 1234567.0, 1e15, 1234567890123456.8, 1e16,
              1e300, 3.14159265358979, -2.5, 5e-324, 1.7976931348623157e308, 1e22, 1e21, 100.0, 1e-7]
    attrs = []
    for i, f in enumerate(floats):
        attrs.append(("f64_%02d" % i, {"#": "0.a_f64", "D": f}))
        attrs.append(("f32_%02d" % i, {"#": "0.a_f32", "D": f}))
    def a(tag: str, data) -> dict:
        return {"#": tag, "D": data}

    attrs += [("f64_inf", {"#": "0.a_f64", "VD": "INF"}), ("f64_ninf", {"#": "0.a_f64", "VD": "-INF"}),
              ("f32_inf", {"#": "0.a_f32", "VD": "INF"}), ("f32_nan", {"#": "0.a_f32", "VD": "NAN"}),
              ("f64_int", a("0.a_f64", 3)), ("b_t", a("0.a_bool", True)), ("b_f", a("0.a_bool", False)),
              ("i32", a("0.a_i32", -2147483648)), ("i64", a("0.a_i64", 9223372036854775807)),
              ("idx", a("0.a_index", 7)), ("s_empty", a("0.a_str", "")),
              ("s_esc", a("0.a_str", 'a"b\\c\td\u00e9\u4e2d\u007f')), ("tn", a("0.a_tensorname", 'w"0')),
              ("c64", a("0.a_c64", [1.5, -2.0])), ("c128", a("0.a_c128", [0.1, 1e20])),
              ("arr_empty", a("0.a_array", [])),
              ("arr_nested", a("0.a_array", [a("0.a_i32", 1), a("0.a_array", [a("0.a_str", "x")])])),
              ("ty_t", a("0.a_type", _dt("0.t_f32", (2, -1)))), ("ty_s", a("0.a_type", {"#": "0.t_i64"})),
              ("ia", a("1.a_intarray", [-1, 0, 9223372036854775807])), ("ia_empty", a("1.a_intarray", [])),
              ("sc_f32", a("1.a_scalar", ["float32", 0.1])), ("sc_f64", a("1.a_scalar", ["float64", 1e-7])),
              ("sc_i32", a("1.a_scalar", ["int32", -7])), ("sc_i64", a("1.a_scalar", ["int64", 12])),
              ("sc_b", a("1.a_scalar", ["bool", False])), ("sc_c64", a("1.a_scalar", ["complex64", 1, 2])),
              ("la_nchw", a("1.a_layout", "NCHW")), ("la_any", a("1.a_layout", "ANYLAYOUT")),
              ("la_nhwc", a("1.a_layout", "NHWC")), ("la_strided", a("1.a_layout", "STRIDED"))]
    for dt in ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "bfloat16", "float16",
               "float32", "float64", "complex64", "complex128", "pstring", "float8_e4m3fn", "Undefined(ALL_DTYPE)"]:
        attrs.append(("dt_" + dt, {"#": "1.a_dtype", "D": dt}))
    for t, dev, kind in [(0, 0, ""), (1, 0, ""), (2, 1, ""), (3, 0, ""), (4, 2, ""), (5, 0, ""), (7, 0, ""),
                         (9, 3, "npu")]:
        attrs.append((f"pl_{t}", {"#": "1.a_place", "D": [t, dev, kind]}))
    ops = [{"#": "0.combine", "A": [{"AT": at, "N": n} for n, at in attrs], "I": [], "O": [], "OA": []}]
    vid = 1
    for t in types:
        ops.append({"#": "0.combine", "A": [], "I": [], "O": [{"%": vid, "TT": t}], "OA": []})
        vid += 1
    ops.append({"#": "1.relu", "A": [], "I": [{"%": 1}, {"%": 0}, {"%": 2}], "O": [{"%": vid, "TT": {"#": "NULL"}}],
                "OA": [{"AT": {"#": "0.a_array", "D": [{"#": "0.a_bool", "D": True}]}, "N": "stop_gradient"},
                       {"AT": {"#": "0.a_array", "D": [{"#": "0.a_bool", "D": False}]}, "N": "persistable"}]})
    data = {"base_code": {"magic": "pir", "trainable": True, "version": 4},
            "program": {"regions": [{"#": "region_0", "blocks": [{"#": "block_0", "args": [], "ops": ops}]}]}}
    write_compact(OUT / "print_zoo.json", data)
    finish("print_zoo", kind="hand-made", feeds=[], params=None,
           note="bare ops with every type and attribute form; Paddle reads it unverified and prints it")


def jit_layer():
    paddle.disable_static()
    paddle.seed(0)

    class Net(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.l1 = paddle.nn.Linear(4, 8)
            self.l2 = paddle.nn.Linear(8, 2)

        def forward(self, x):
            return self.l2(paddle.nn.functional.relu(self.l1(x)))

    paddle.jit.save(Net(), str(OUT / "jit"), input_spec=[paddle.static.InputSpec([None, 4], "float32", "x")])
    paddle.enable_static()
    finish("jit", kind="jit.save", feeds=[{"name": "x", "shape": [-1, 4], "dtype": "float32"}],
           params="jit.pdiparams", note="fetch op: Paddle's OA order for it is not stable across saves")


def inference():
    main, startup, feeds, _, logits = cnn()
    exe = paddle.static.Executor(paddle.CPUPlace())
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        paddle.seed(0)
        exe.run(startup)
        paddle.static.save_inference_model(str(OUT / "cnn_infer"), [feeds[0]], [logits], exe, program=main)
    finish("cnn_infer", kind="save_inference_model", feeds=feed_specs(feeds[:1]), params="cnn_infer.pdiparams",
           note="normalize_pir_program: pruned to the fetch, is_test=true, fetch ops appended")


def nan_file() -> None:
    """A tiny program with a NaN constant: Paddle writes it and cannot read it back."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [2], "float32")
        y = x + paddle.full([2], float("nan"))
        paddle.mean(y)
    core.serialize_pir_program(main, str(OUT / "nan.json"), True, False, True)
    (OUT / "nan.txt").write_text(str(main), encoding="utf-8")
    MANIFEST["cases"]["nan"] = {"kind": "serialize_pir_program", "feeds": [], "params": None, "byte_stable": None,
                                "readable": False, "trainable": True,
                                "ops": count_ops(json.loads((OUT / "nan.json").read_text())["program"]),
                                "note": "Paddle cannot read it (writes VD \"NaN\", reads only \"NAN\"); "
                                        "nan.txt is print() of the program before saving"}


# --------------------------------------------------------------------------
# Older format versions
# --------------------------------------------------------------------------
#: What each patch set changes, as the old form to write: (op, attr, old tag) for
#: element/scalar type changes; (op, attr) for attributes an older file lacks.
RETAG = {
    2: [("pool2d", "strides", "0.a_i32"), ("pool2d", "paddings", "0.a_i32"),
        ("lp_pool2d", "strides", "0.a_i32"), ("lp_pool2d", "paddings", "0.a_i32"),
        ("pool3d", "kernel_size", "0.a_i32"), ("pool3d", "strides", "0.a_i32"), ("pool3d", "paddings", "0.a_i32"),
        ("expand_as", "target_shape", "0.a_i32")],
    3: [("kthvalue", "k", "0.a_i32")],
    4: [("leaky_relu", "negative_slope", "0.a_f32"), ("softplus", "beta", "0.a_f32"),
        ("softplus", "threshold", "0.a_f32"), ("logit", "eps", "0.a_f32"), ("pad3d", "pad_value", "0.a_f32"),
        ("group_norm", "epsilon", "0.a_f32"), ("add_group_norm_silu", "epsilon", "0.a_f32"),
        ("group_norm_silu_xpu", "epsilon", "0.a_f32"), ("top_p_sampling", "seed", "0.a_i32"),
        ("bicubic_interp", "scale", "0.a_f32"), ("nearest_interp", "scale", "0.a_f32"),
        ("linear_interp", "scale", "0.a_f32"), ("bilinear_interp", "scale", "0.a_f32"),
        ("trilinear_interp", "scale", "0.a_f32")],
}
DROP = {3: [("repeat_interleave", "output_size"), ("repeat_interleave_with_tensor_index", "output_size")],
        4: [("moe_permute", "using_ue8m0_scale"), ("moe_permute", "return_expert_indices"),
            ("moe_permute", "override_buffer_size"), ("moe_unpermute", "using_ue8m0_scale"),
            ("moe_unpermute", "using_weighted_combine")]}

#: Bare ops (no operands, no results: Paddle loads ops unverified) carrying every
#: attribute a patch touches that the models above do not reach.
BARE_OPS = [
    ("lp_pool2d", [("strides", "0.a_array", [2, 2], "0.a_i64"), ("paddings", "0.a_array", [0, 0], "0.a_i64")]),
    ("top_p_sampling", [("seed", "0.a_i64", -1, None)]),
    ("add_group_norm_silu", [("epsilon", "0.a_f32", 1e-5, None)]),
    ("linear_interp", [("scale", "0.a_array", [2.0], "0.a_f64")]),
    ("trilinear_interp", [("scale", "0.a_array", [2.0, 2.0, 2.0], "0.a_f64")]),
    ("repeat_interleave_with_tensor_index", [("axis", "0.a_i32", 0, None), ("output_size", "0.a_i64", -1, None)]),
    ("moe_permute", [("using_ue8m0_scale", "0.a_bool", False, None), ("return_expert_indices", "0.a_bool", False, None),
                     ("override_buffer_size", "0.a_i32", -1, None)]),
    ("moe_unpermute", [("using_ue8m0_scale", "0.a_bool", False, None),
                       ("using_weighted_combine", "0.a_bool", False, None)]),
]


def bare_ops_file() -> dict:
    ops = []
    for name, attrs in BARE_OPS:
        a = []
        for attr, tag, value, elem in attrs:
            at = {"#": tag, "D": [{"#": elem, "D": v} for v in value] if elem else value}
            a.append({"AT": at, "N": attr})
        ops.append({"#": f"1.{name}", "A": a, "I": [], "O": [], "OA": []})
    return {"base_code": {"magic": "pir", "trainable": True, "version": 4},
            "program": {"regions": [{"#": "region_0", "blocks": [{"#": "block_0", "args": [], "ops": ops}]}]}}


def walk_ops(prog: dict):
    stack = [prog]
    while stack:
        node = stack.pop()
        for region in node.get("regions", []):
            for block in region["blocks"]:
                for op in block["ops"]:
                    yield op
                    stack.append(op)


def downgrade(data: dict, version: int) -> dict:
    """The file as a build of format `version` would have written it, as far as the
    3.3.1 patch sets (version..4, the range Paddle applies when reading it) tell."""
    data = copy.deepcopy(data)
    data["base_code"]["version"] = version
    for op in walk_ops(data["program"]):
        name = op["#"].split(".", 1)[1] if op["#"] != "p" else "p"
        for v in range(version, 5):
            for op_name, attr, tag in RETAG.get(v, []):
                if op_name != name:
                    continue
                for a in op["A"]:
                    if a["N"] != attr:
                        continue
                    at = a["AT"]
                    if at["#"] == "0.a_array":
                        for e in at["D"]:
                            e["#"] = tag
                            if tag == "0.a_f32":
                                e["D"] = float(np.float32(e["D"]))
                    else:
                        at["#"] = tag
                        if tag == "0.a_f32":
                            at["D"] = float(np.float32(at["D"]))
            for op_name, attr in DROP.get(v, []):
                if op_name == name:
                    op["A"] = [a for a in op["A"] if a["N"] != attr]
    return data


def _nl_float(x: float) -> str:
    """A float as Paddle's JSON library writes it: Python's repr, except that
    1e15 <= |x| < 1e16 is written in exponent form (1e+15)."""
    r = repr(x)
    if not 1e15 <= abs(x) < 1e16 or "e" in r:
        return r
    whole, frac = r.lstrip("-").split(".")
    digits = (whole + frac).rstrip("0")
    return ("-" if x < 0 else "") + digits[0] + ("." + digits[1:] if len(digits) > 1 else "") + "e+15"


def write_compact(path: Path, data: dict) -> None:
    """Write JSON as Paddle does: sorted keys, no spaces, UTF-8, Paddle's float spelling."""
    texts: list[str] = []

    def mark(x):
        if isinstance(x, dict):
            return {k: mark(v) for k, v in x.items()}
        if isinstance(x, list):
            return [mark(v) for v in x]
        if isinstance(x, float) and _nl_float(x) != repr(x):
            texts.append(_nl_float(x))
            return f"\x00F{len(texts) - 1}"
        return x

    text = json.dumps(mark(data), separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    for i, t in enumerate(texts):
        text = text.replace(f'"\\u0000F{i}"', t, 1)
    path.write_text(text, encoding="utf-8")


def versions() -> None:
    write_compact(OUT / "bare_ops.json", bare_ops_file())
    bases = {"zoo": json.loads((OUT / "zoo.json").read_text()), "cnn": json.loads((OUT / "cnn.json").read_text()),
             "bare_ops": json.loads((OUT / "bare_ops.json").read_text())}
    (OUT / "bare_ops.json").unlink()
    plan = [(1, "zoo"), (1, "cnn"), (1, "bare_ops"), (2, "zoo"), (2, "bare_ops"), (3, "zoo"), (3, "bare_ops")]
    for version, base in plan:
        name = f"v{version}_{base}"
        src = OUT / f"{name}.json"
        write_compact(src, downgrade(bases[base], version))
        paddle_helper(src, resave=str(OUT / f"{name}.upgraded.json"))
        MANIFEST["versions"][name] = {"version": version, "base": base}


def main() -> None:
    for p in OUT.iterdir():
        if p.is_file() and p.name not in KEEP:
            p.unlink()
    paddle.enable_static()

    jit_layer()
    for bwd in (False, True):
        sfx = "_bwd" if bwd else ""
        m, s, feeds, loss = mlp(bwd)
        static_save("mlp" + sfx, m, s, feeds, backward_of=loss if bwd else None, readable=bwd)
        m, s, feeds, loss, _ = cnn()
        static_save("cnn" + sfx, m, s, feeds, backward_of=loss if bwd else None)
        m, s, feeds, loss = transformer()
        static_save("transformer" + sfx, m, s, feeds, backward_of=loss if bwd else None)
        for name, build in (("cond", cond_prog), ("while", while_prog), ("cond_in_while", cond_in_while_prog)):
            m, s, feeds, loss = build()
            static_save(name + sfx, m, s, feeds, backward_of=loss if bwd else None, cf=bwd,
                        readable=(name == "while" and not bwd),
                        note="saved with FLAGS_save_cf_stack_op=True (default flags abort)" if bwd else "")
    for bwd in (False, True):
        m, s, feeds, loss = pylayer_prog()
        static_save("pylayer" + ("_bwd" if bwd else ""), m, s, feeds, backward_of=loss if bwd else None,
                    note="backward_function_id names a Python function of the writing process: not runnable elsewhere")
    inference()
    m, s, feeds = zoo()
    static_save("zoo", m, s, feeds)
    print_zoo()
    nan_file()
    versions()

    (OUT / "manifest.json").write_text(json.dumps(MANIFEST, indent=1, sort_keys=False) + "\n")
    h = hashlib.sha256()
    for p in sorted(OUT.iterdir()):
        if p.is_file() and p.name not in KEEP:
            h.update(p.name.encode() + b"\0" + p.read_bytes())
    total = sum(p.stat().st_size for p in OUT.iterdir() if p.is_file())
    print(f"wrote {len(list(OUT.iterdir()))} files, {total} bytes, sha256 {h.hexdigest()}")


if __name__ == "__main__":
    main()
