"""Python operators on builder variables, as Paddle's legacy
`monkey_patch_variable` defines them.

* `x + 2.0`, `x - 2`, `2.0 * x`, `x / 2`, `1.0 + x`, `1.0 - x`, `-x`: one
  `scale` op (scale, bias) into a `tmp_N` var;
* variable with variable: `elementwise_add/sub/mul/div/pow/floordiv/mod`
  with `axis=-1`; `x @ y`: `matmul_v2`;
* a scalar on the other side of an op without a scale form (`2.0 / x`,
  `x ** 2`): a `fill_constant` (shape `[]`, or x's shape; with an unknown
  dim `fill_constant_batch_size_like`) then the elementwise op;
* int variables meet float scalars through a `cast` to float32.

The comparison operators (`==`, `<`, ...) are not overloaded: variables
compare and hash by identity here (Paddle appends `equal`/`less_than` ops).
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..base import dtypes
from .._proto import framework_pb2 as pb
from .framework import Variable, default_main_program

VT = pb.VarType
_INT_TYPES = {VT.BOOL, VT.UINT8, VT.INT8, VT.INT16, VT.INT32, VT.INT64}
_PROMOTING = {"__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__mod__",
              "__rmod__", "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__",
              "__pow__", "__rpow__"}


def _block(var):
    return var.block.program.current_block()


def _tmp(block, dtype):
    return block.create_var(name=default_main_program()._name_generator.generate("tmp"),
                            dtype=dtype)


def astype(self, dtype: Any):
    """A `cast` to `dtype` into a `tmp_N` var (self if it already has it)."""
    target = dtypes.from_any(dtype)
    if self.data_type == target:
        return self
    block = _block(self)
    out = _tmp(block, target)
    block.append_op(type="cast", inputs={"X": [self]}, outputs={"Out": [out]},
                    attrs={"in_dtype": self.data_type, "out_dtype": out.data_type})
    out.stop_gradient = self.stop_gradient
    return out


def _scalar_op(var, scale: float, bias: float):
    block = _block(var)
    out = _tmp(block, var.data_type)
    block.append_op(type="scale", inputs={"X": [var]}, outputs={"Out": [out]},
                    attrs={"scale": scale, "bias": bias})
    return out


def _fill(block, value: float, dtype: int, shape):
    var = _tmp(block, dtype)
    block.append_op(type="fill_constant", outputs={"Out": [var]},
                    attrs={"dtype": var.data_type, "shape": list(shape), "value": float(value),
                           "force_cpu": False})
    var.stop_gradient = True
    return var


def _fill_batch_size_like(ref, value: float, dtype: int):
    block = _block(ref)
    var = _tmp(block, dtype)
    batch_dim, shape = -1, []
    for i, d in enumerate(ref.shape):
        if d < 0:
            if batch_dim < 0:
                batch_dim = i
                shape.append(d)
            else:
                shape.append(1)
        else:
            shape.append(d)
    block.append_op(type="fill_constant_batch_size_like", inputs={"Input": [ref]},
                    outputs={"Out": [var]},
                    attrs={"shape": shape, "value": float(value), "input_dim_idx": batch_dim,
                           "output_dim_idx": batch_dim})
    var.stop_gradient = True
    return var


def _promote(a: int, b: int) -> int:
    fa, fb = dtypes.is_float(a), dtypes.is_float(b)
    if fa != fb:
        return a if fa else b
    if a == VT.BOOL:
        return b
    if b == VT.BOOL:
        return a
    return a if np.dtype(dtypes.to_numpy(a)).itemsize >= np.dtype(dtypes.to_numpy(b)).itemsize else b


def _binary(method: str, op_type: str, reverse: bool = False, scalar=None):
    def impl(self, other):
        if isinstance(other, np.generic):
            other = other.item()
        if isinstance(other, float):
            if self.data_type in _INT_TYPES:
                self = astype(self, "float32")
            if scalar is not None:
                return scalar(self, other)
        elif isinstance(other, int):
            other = float(other)
            if op_type == "elementwise_div" and self.data_type in _INT_TYPES:
                self = astype(self, "float32")
            if self.data_type == VT.BOOL:
                self = astype(self, "int64")
            if scalar is not None:
                return scalar(self, other)
        elif not isinstance(other, Variable):
            return NotImplemented
        lhs = self.data_type
        if not isinstance(other, Variable):
            if reverse:
                if any(d < 0 for d in self.shape):
                    other = _fill_batch_size_like(self, other, lhs)
                else:
                    other = _fill(_block(self), other, lhs, self.shape)
            else:
                other = _fill(_block(self), other, lhs, [])
        rhs = other.data_type
        if lhs != rhs:
            if method not in _PROMOTING:
                raise TypeError(f"got different data type in {op_type} between "
                                f"{dtypes.type_name(lhs)} and {dtypes.type_name(rhs)}.")
            if len(other.shape) == 0 or len(self.shape) == 0:
                same_kind = dtypes.is_float(lhs) == dtypes.is_float(rhs)
                if not same_kind or (len(other.shape) == 0 and len(self.shape) == 0):
                    target = _promote(lhs, rhs)
                    self, other = astype(self, target), astype(other, target)
                elif len(self.shape) == 0:
                    self = astype(self, rhs)
                else:
                    other = astype(other, lhs)
            elif dtypes.is_float(lhs) and dtypes.is_float(rhs):
                warnings.warn(f"The input dtypes of OP {op_type} are {dtypes.type_name(lhs)} and "
                              f"{dtypes.type_name(rhs)}, the output will be auto-promoted")
        if reverse:
            self, other = other, self
        if op_type == "elementwise_div" and self.data_type in _INT_TYPES \
                and self.data_type == other.data_type:
            self, other = astype(self, "float32"), astype(other, "float32")
        block = _block(self)
        out = _tmp(block, self.data_type)
        block.append_op(type=op_type, inputs={"X": [self], "Y": [other]}, outputs={"Out": out},
                        attrs={"axis": -1})
        return out

    impl.__name__ = method
    impl.__doc__ = f"`{op_type}` (axis=-1) into a `tmp_N` var."
    return impl


def patch(cls) -> None:
    """Install the operators on the builder's Variable class."""
    methods = {
        "__neg__": lambda v: _scalar_op(v, -1.0, 0.0),
        "astype": astype,
        "__add__": _binary("__add__", "elementwise_add", False, lambda v, s: _scalar_op(v, 1.0, s)),
        "__radd__": _binary("__radd__", "elementwise_add", False, lambda v, s: _scalar_op(v, 1.0, s)),
        "__sub__": _binary("__sub__", "elementwise_sub", False, lambda v, s: _scalar_op(v, 1.0, -s)),
        "__rsub__": _binary("__rsub__", "elementwise_sub", True, lambda v, s: _scalar_op(v, -1.0, s)),
        "__mul__": _binary("__mul__", "elementwise_mul", False, lambda v, s: _scalar_op(v, s, 0.0)),
        "__rmul__": _binary("__rmul__", "elementwise_mul", False, lambda v, s: _scalar_op(v, s, 0.0)),
        "__truediv__": _binary("__truediv__", "elementwise_div", False,
                               lambda v, s: _scalar_op(v, 1.0 / s, 0.0)),
        "__rtruediv__": _binary("__rtruediv__", "elementwise_div", True),
        "__pow__": _binary("__pow__", "elementwise_pow"),
        "__rpow__": _binary("__rpow__", "elementwise_pow", True),
        "__floordiv__": _binary("__floordiv__", "elementwise_floordiv"),
        "__rfloordiv__": _binary("__rfloordiv__", "elementwise_floordiv", True),
        "__mod__": _binary("__mod__", "elementwise_mod"),
        "__rmod__": _binary("__rmod__", "elementwise_mod", True),
        "__matmul__": _binary("__matmul__", "matmul_v2"),
        "__rmatmul__": _binary("__rmatmul__", "matmul_v2", True),
    }
    for name, fn in methods.items():
        setattr(cls, name, fn)
