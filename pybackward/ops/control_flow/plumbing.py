"""Ops that move values rather than compute them: fetch_v2, shadow_output,
share_buffer, npu_identity, view_slice, transfer_layout; and the checks
assert and accuracy_check.

Each is what Paddle 3.3.1's CPU kernel does with the value:

* fetch_v2 copies X (deepcopy or not, a copy here: the interpreter's values
  are never aliased);
* shadow_output and npu_identity are the identity on CPU;
* share_buffer gives each Out (and XOut) the matching X: Paddle shares the
  memory, a copy holds the same values;
* view_slice is rows [begin_idx, end_idx) of the input's first axis;
* transfer_layout between NHWC (1) and NCHW (2) permutes a 4-D value (its
  other layouts - any (0), oneDNN - leave the values as they are). Paddle
  reads the source layout from the tensor, which a program file does not
  hold; the `src_layout` attr the program carries says it here;
* assert raises when its boolean Cond is false, naming up to `summarize`
  values of each Data var (all with -1), as Paddle's message does;
* accuracy_check compares x and y as allclose(rtol, atol, equal_nan) and
  raises naming `fn_name` when they differ; out is the elementwise result.
"""
from __future__ import annotations

import numpy as np

from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register

_NHWC, _NCHW = 1, 2          # phi::DataLayout


def _copy(x_slot: str, out_slot: str):
    def kernel(c: Call):
        return {out_slot: np.array(c.x(x_slot), copy=True)}
    return kernel


def _value_samples(slot: str, **attrs):
    return lambda rng: [Sample({slot: [rng.standard_normal((2, 3))]}, dict(attrs)),
                        Sample({slot: [np.arange(6, dtype=np.int64).reshape(3, 2)]}, dict(attrs), note="int64")]


register(paddle_opdef("fetch_v2", _copy("X", "Out"), samples=_value_samples("X", col=0), attrs_handled=("deepcopy",),
                      doc="Out = copy of X (the fetch of the new executor)"))
register(paddle_opdef("shadow_output", _copy("x", "out"), samples=_value_samples("x", name="out"),
                      doc="out = x (the output a PIR program names)"))
register(paddle_opdef("npu_identity", _copy("x", "out"), samples=_value_samples("x"),
                      doc="out = x (a storage-format change on NPU; the identity on CPU)"))


def _share_buffer(c: Call):
    xs = c.xs("X")
    n_out = c.n_out("Out")
    if n_out > len(xs):
        raise ExecutionError(f"op share_buffer: {n_out} Out vars for {len(xs)} X vars")
    out = {"Out": [np.array(x, copy=True) for x in xs[:n_out]]}
    if c.n_out("XOut"):
        out["XOut"] = [np.array(x, copy=True) for x in xs[:c.n_out("XOut")]]
    return out


register(paddle_opdef("share_buffer", _share_buffer,
                      samples=lambda rng: [Sample({"X": [rng.standard_normal((2, 2)), rng.standard_normal(3)]},
                                                  {"share_dims_and_dtype": [True, True]},
                                                  outputs={"Out": 2, "XOut": 2})],
                      doc="Out[i] and XOut[i] = X[i] (Paddle shares their memory)"))


def _view_slice(c: Call):
    x = np.asarray(c.x("input"))
    begin, end = int(c.attr("begin_idx", 0)), int(c.attr("end_idx", 0))
    if x.ndim == 0 or not 0 <= begin <= end <= x.shape[0]:
        raise ExecutionError(f"op view_slice: rows [{begin}, {end}) are not within the "
                             f"{x.shape[0] if x.ndim else 0} rows of the input")
    return {"out": x[begin:end].copy()}


register(paddle_opdef("view_slice", _view_slice, attrs_handled=("begin_idx", "end_idx"),
                      samples=lambda rng: [Sample({"input": [rng.standard_normal((5, 2))]},
                                                  {"begin_idx": 1, "end_idx": 4})],
                      doc="out = input[begin_idx:end_idx] (first axis)"))


def _transfer_layout(c: Call):
    x = np.asarray(c.x("X"))
    src, dst = int(c.attr("src_layout", -1)), int(c.attr("dst_layout", 0))
    if src == dst and src in (_NHWC, _NCHW):
        raise ExecutionError("op transfer_layout: no layout transform is needed between the same layout "
                             "(Paddle refuses it too)")
    if {src, dst} == {_NCHW, _NHWC}:
        if x.ndim != 4:
            raise ExecutionError(f"op transfer_layout: a layout change needs a 4-D value, not "
                                 f"{list(x.shape)}")
        return {"Out": np.ascontiguousarray(x.transpose((0, 2, 3, 1) if dst == _NHWC else (0, 3, 1, 2)))}
    return {"Out": x.copy()}


register(paddle_opdef("transfer_layout", _transfer_layout, attrs_handled=("src_layout", "dst_layout"),
                      samples=lambda rng: [  # C = H = W: Paddle's compile-time shape keeps X's
                          Sample({"X": [rng.standard_normal((2, 3, 3, 3))]}, {"src_layout": 2, "dst_layout": 1},
                                 note="NCHW -> NHWC")],
                      doc="Out = X in dst_layout (NCHW <-> NHWC permutes; other layouts keep the values)"))


def _assert(c: Call):
    cond = np.asarray(c.x("Cond"))
    if cond.size != 1 or cond.dtype != np.bool_:
        raise ExecutionError(f"op assert: Cond must be one bool, not {cond.dtype}{list(cond.shape)}")
    if bool(cond.reshape(-1)[0]):
        return {}
    n = int(c.attr("summarize", -1))
    shown = []
    for i, d in enumerate(c.xs("Data")):
        flat = np.asarray(d).reshape(-1)
        vals = flat if n < 0 else flat[:n]
        shown.append(f"Data[{i}] {np.asarray(d).dtype}{list(np.shape(d))}: {vals.tolist()}")
    raise ExecutionError("the condition of an assert op is false" + (": " + "; ".join(shown) if shown else ""))


register(paddle_opdef("assert", _assert, attrs_handled=("summarize",),
                      samples=lambda rng: [Sample({"Cond": [np.array([True])], "Data": [rng.standard_normal(3)]},
                                                  {"summarize": 2})],
                      doc="raises when Cond is false, showing the Data values"))


def _accuracy_check(c: Call):
    x, y = np.asarray(c.x("x")), np.asarray(c.x("y"))
    rtol, atol = float(c.attr("rtol", 1e-5)), float(c.attr("atol", 1e-8))
    equal_nan = bool(c.attr("equal_nan", False))
    close = np.isclose(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if not close.all():
        bad = np.argwhere(~close)[0]
        where_ = tuple(int(i) for i in bad)
        raise ExecutionError(f"accuracy_check {c.attr('fn_name', '')!r} failed: x{list(where_)} = "
                             f"{x[where_]!r}, y = {y[where_]!r} (rtol {rtol:g}, atol {atol:g})")
    return {"out": close}


register(paddle_opdef("accuracy_check", _accuracy_check, attrs_handled=("fn_name", "rtol", "atol", "equal_nan"),
                      samples=lambda rng: [Sample({"x": [np.ones((2, 2))], "y": [np.ones((2, 2)) + 1e-9]},
                                                  {"fn_name": "demo", "rtol": 1e-5, "atol": 1e-8,
                                                   "equal_nan": False})],
                      doc="out = isclose(x, y); raises naming fn_name where they differ"))
