"""cvm (dense X, no LoD): the show / click columns of CTR features, log-transformed or dropped."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, Sample, register
from .._inputs import array_in


# --------------------------------------------------------------------------
# cvm (dense X, no LoD): the show/click columns, log-transformed or dropped
# --------------------------------------------------------------------------
def _cvm_args(c: Call):
    x, cvm = array_in(c, "X"), array_in(c, "CVM")
    if x.ndim != 2 or x.shape[1] < 2:
        raise ExecutionError(f"cvm: X must be 2-D with at least 2 columns, got {list(x.shape)}")
    if cvm.ndim != 2 or cvm.shape[1] != 2 or cvm.shape[0] != x.shape[0]:
        raise ExecutionError(f"cvm: CVM must be [{x.shape[0]}, 2], got {list(cvm.shape)}")
    return x, cvm, bool(c.attr("use_cvm", True))


def _cvm(c: Call):
    x, _, use_cvm = _cvm_args(c)
    if not use_cvm:
        return {"Y": x[:, 2:].copy()}
    y = x.copy()
    y[:, 0] = np.log(x[:, 0] + 1)
    y[:, 1] = np.log(x[:, 1] + 1) - y[:, 0]
    return {"Y": y}


def _cvm_grad(c: Call):
    """Paddle's cvm_grad: Y@GRAD passes through to the other columns, and the
    show/click columns of X@GRAD are CVM itself (not a derivative, by design)."""
    x, cvm, use_cvm = _cvm_args(c)
    g = array_in(c, "Y@GRAD")
    gx = np.empty(x.shape, g.dtype)
    gx[:, 2:] = g[:, 2:] if use_cvm else g
    gx[:, :2] = cvm
    return {"X@GRAD": gx}


register(paddle_opdef("cvm", _cvm, {"cvm_grad": _cvm_grad}, samples=lambda rng: [
    # X@GRAD's first two columns are CVM by design, so finite differences can
    # only check them with CVM = 0 and use_cvm = False (use_cvm = True and a
    # nonzero CVM: tests/ops/test_kernel_cases.py, against Paddle's values)
    Sample({"X": [rng.random((3, 5))], "CVM": [np.zeros((3, 2))]}, {"use_cvm": False}, wrt=("X",))],
    attrs_handled=("use_cvm",),
    doc="Y = X with columns 0, 1 -> log(show + 1), log(click + 1) - log(show + 1) (use_cvm), else X[:, 2:]"))
