"""Tensor functions (`paddle.mean`, `paddle.reshape`, ...), as Paddle's legacy
static branch builds them. `matmul` and `sum` lost that branch in Paddle
3.3.1 (PIR only); they build what Paddle 2.6's legacy branch built:
`matmul_v2` named `matmul_v2_N`, and `reduce_sum` named `sum_N`."""
from __future__ import annotations

from typing import Any, Sequence

from ..base import dtypes
from .framework import Variable
from .layer_helper import LayerHelper

__all__ = ["mean", "sum", "matmul", "reshape", "transpose", "concat", "split", "slice",
           "gather", "stack", "cast", "scale", "unsqueeze", "squeeze"]


def _reduce_axis(axis: Any, x: Variable) -> tuple[bool, list[int]]:
    if axis is not None and not isinstance(axis, list):
        if isinstance(axis, (tuple, range)):
            axis = list(axis)
        elif isinstance(axis, int):
            axis = [axis]
        else:
            raise TypeError(f"The type of axis must be int, list or tuple, but received {type(axis)}")
    if axis is None:
        axis = []
    return (axis == [] or len(axis) == len(x.shape)), axis


def mean(x: Variable, axis: int | Sequence[int] | None = None, keepdim: bool = False,
         name: str | None = None, *, dtype: Any = None) -> Variable:
    """`reduce_mean` (`mean_N.tmp_0`); no axis reduces all dims to a 0-D value."""
    if dtype is not None and x.dtype != dtypes.to_numpy(dtypes.from_any(dtype)):
        x = cast(x, dtype)
    reduce_all, axis = _reduce_axis(axis, x)
    helper = LayerHelper("mean", x=x, name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type="reduce_mean", inputs={"X": x}, outputs={"Out": out},
                     attrs={"dim": axis, "keep_dim": keepdim, "reduce_all": reduce_all})
    return out


def sum(x: Variable, axis: int | Sequence[int] | None = None, dtype: Any = None,
        keepdim: bool = False, name: str | None = None) -> Variable:
    """`reduce_sum` (`sum_N.tmp_0`)."""
    reduce_all, axis = _reduce_axis(axis, x)
    attrs: dict[str, Any] = {"dim": axis, "keep_dim": keepdim, "reduce_all": reduce_all}
    out_dtype = x.dtype
    if dtype is not None:
        attrs.update({"in_dtype": x.data_type, "out_dtype": dtypes.from_any(dtype)})
        out_dtype = dtype
    helper = LayerHelper("sum", x=x, name=name)
    out = helper.create_variable_for_type_inference(dtype=out_dtype)
    helper.append_op(type="reduce_sum", inputs={"X": x}, outputs={"Out": out}, attrs=attrs)
    return out


def matmul(x: Variable, y: Variable, transpose_x: bool = False, transpose_y: bool = False,
           name: str | None = None) -> Variable:
    """`matmul_v2` (`matmul_v2_N.tmp_0`) with `trans_x` / `trans_y`."""
    helper = LayerHelper("matmul_v2", x=x, y=y, name=name)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="matmul_v2", inputs={"X": x, "Y": y}, outputs={"Out": out},
                     attrs={"trans_x": transpose_x, "trans_y": transpose_y})
    return out


def reshape(x: Variable, shape: Sequence[int], name: str | None = None) -> Variable:
    """`reshape2` (`reshape2_N.tmp_0`, XShape `reshape2_N.tmp_1`); one -1 dim
    is inferred, a 0 copies the input dim."""
    if not isinstance(shape, (list, tuple)):
        raise ValueError("shape must be an instance of `list` or `tuple` in pybackward.static, "
                         f"got '{type(shape)}.'")
    unk = -1
    for i, d in enumerate(shape):
        if d == -1:
            if unk != -1:
                raise AssertionError("Only one dimension value of 'shape' in reshape can be -1. "
                                     f"But received shape[{i}] is also -1.")
            unk = i
        elif d != 0 and d < 0:
            raise AssertionError("Each dimension value of 'shape' in reshape must not be negative "
                                 f"except one unknown dimension. But received shape[{i}] = {d}.")
    helper = LayerHelper("reshape2", x=x, name=name)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    x_shape = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="reshape2", inputs={"X": x}, attrs={"shape": list(shape)},
                     outputs={"Out": out, "XShape": x_shape})
    return out


def transpose(x: Variable, perm: Sequence[int], name: str | None = None) -> Variable:
    """`transpose2` (`transpose_N.tmp_0`, XShape `transpose_N.tmp_1`)."""
    perm = list(perm)
    if len(perm) != len(x.shape):
        raise ValueError("Input(perm) is the permutation of dimensions of Input(x), its length "
                         "should be equal to dimensions of Input(x), but received dimension of "
                         f"Input(x) is {len(x.shape)}, the length of Input(perm) is {len(perm)}.")
    for idx, dim in enumerate(perm):
        if dim >= len(x.shape):
            raise ValueError(f"Each element in Input(perm) should be less than Input(x)'s "
                             f"dimension, but {idx}-th element in Input(perm) is {perm[idx]} "
                             f"which exceeds Input(x)'s dimension {len(x.shape)}.")
    helper = LayerHelper("transpose", x=x, name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    x_shape = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type="transpose2", inputs={"X": [x]},
                     outputs={"Out": [out], "XShape": [x_shape]}, attrs={"axis": perm})
    return out


def concat(x: Sequence[Variable], axis: int = 0, name: str | None = None) -> Variable:
    """`concat` (`concat_N.tmp_0`)."""
    inputs = [x] if isinstance(x, Variable) else list(x)
    for v in inputs[1:]:
        if v.dtype != inputs[0].dtype:
            raise TypeError("All the Tensors in the input must have the same data type.")
    helper = LayerHelper("concat", input=inputs, name=name)
    out = helper.create_variable_for_type_inference(dtype=helper.input_dtype())
    helper.append_op(type="concat", inputs={"X": inputs}, outputs={"Out": [out]},
                     attrs={"axis": axis})
    return out


def split(x: Variable, num_or_sections: int | Sequence[int], axis: int = 0,
          name: str | None = None) -> list[Variable]:
    """`split` into `num` equal parts or the given sections (one -1 allowed)."""
    helper = LayerHelper("split", input=x, name=name)
    shape = x.shape
    if len(shape) + axis < 0:
        raise AssertionError("(rank(x) + axis) must >= 0")
    axis = len(shape) + axis if axis < 0 else axis
    attrs: dict[str, Any] = {"num": num_or_sections if isinstance(num_or_sections, int) else 0,
                             "axis": axis}
    if isinstance(num_or_sections, int):
        if num_or_sections <= 0:
            raise AssertionError("num_or_sections must be than 0.")
        if shape[axis] > 0 and shape[axis] % num_or_sections != 0:
            raise AssertionError("The input's size along the split dimension must be evenly "
                                 f"divisible by Attr(num_or_sections). But {num_or_sections} is "
                                 f"not evenly divisible by {shape[axis]}. ")
        num = num_or_sections
    else:
        sections = list(num_or_sections)
        if shape[axis] > 0 and len(sections) > shape[axis]:
            raise AssertionError("len(num_or_sections) must not be more than input.shape[dim].")
        if sections.count(-1) > 1:
            raise AssertionError("Only one value of 'num_or_section' in split can be -1.")
        num = len(sections)
        attrs["sections"] = sections
    outs = [helper.create_variable_for_type_inference(dtype=helper.input_dtype())
            for _ in range(num)]
    helper.append_op(type="split", inputs={"X": x}, outputs={"Out": outs}, attrs=attrs)
    return outs


def slice(input: Variable, axes: Sequence[int], starts: Sequence[int],
          ends: Sequence[int]) -> Variable:
    """`slice` along `axes` (`slice_N.tmp_0`)."""
    if not isinstance(axes, (list, tuple)) or not axes:
        raise ValueError("Input axes must be a non-empty python list or tuple")
    rank = len(input.shape)
    axes = [max(0, a + rank) if a < 0 else min(rank - 1, a) for a in axes]
    helper = LayerHelper("slice", input=input)
    out = helper.create_variable_for_type_inference(dtype=helper.input_dtype("input"))
    helper.append_op(type="slice", inputs={"Input": input}, outputs={"Out": out},
                     attrs={"axes": axes, "starts": list(starts), "ends": list(ends),
                            "infer_flags": [1] * len(axes)})
    return out


def gather(x: Variable, index: Variable, axis: int | None = None,
           name: str | None = None) -> Variable:
    """`gather` of rows `index` (int32/int64) along `axis` (default 0)."""
    if index.dtype.name not in ("int32", "int64"):
        raise TypeError(f"The data type of 'index' in gather must be int32 or int64, "
                        f"but received {index.dtype.name}.")
    helper = LayerHelper("gather", x=x, name=name)
    out = helper.create_variable_for_type_inference(helper.input_dtype("x"))
    helper.append_op(type="gather", inputs={"X": x, "Index": index}, outputs={"Out": out},
                     attrs={"axis": axis, "overwrite": False})
    return out


def stack(x: Sequence[Variable], axis: int = 0, name: str | None = None) -> Variable:
    """`stack` (`stack_N.tmp_0`, output slot `Y`)."""
    axis = 0 if axis is None else axis
    x = list(x)
    helper = LayerHelper("stack", x=x, name=name)
    out = helper.create_variable_for_type_inference(x[0].dtype)
    helper.append_op(type="stack", inputs={"X": x}, outputs={"Y": out}, attrs={"axis": axis})
    return out


def cast(x: Variable, dtype: Any) -> Variable:
    """`cast` (`cast_N.tmp_0`), keeping x's stop_gradient."""
    out_type = dtypes.from_any(dtype)
    helper = LayerHelper("cast", x=x, dtype=dtype)
    out = helper.create_variable_for_type_inference(dtype=out_type, stop_gradient=x.stop_gradient)
    helper.append_op(type="cast", inputs={"X": [x]}, outputs={"Out": [out]},
                     attrs={"in_dtype": x.data_type, "out_dtype": out_type})
    return out


def scale(x: Variable, scale: float = 1.0, bias: float = 0.0, bias_after_scale: bool = True,
          act: str | None = None, name: str | None = None) -> Variable:
    """`scale`: x * scale + bias (`scale_N.tmp_0`)."""
    inputs: dict[str, Any] = {"X": [x]}
    attrs: dict[str, Any] = {"bias": float(bias), "bias_after_scale": bias_after_scale}
    if isinstance(scale, Variable):
        inputs["ScaleTensor"] = [scale]
    else:
        attrs["scale"] = float(scale)
    helper = LayerHelper("scale", x=x, act=act, name=name)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="scale", inputs=inputs, outputs={"Out": out}, attrs=attrs)
    return helper.append_activation(out)


def unsqueeze(x: Variable, axis: int | Sequence[int], name: str | None = None) -> Variable:
    """`unsqueeze2` (`unsqueeze2_N.tmp_0`)."""
    axes = [axis] if isinstance(axis, int) else list(axis)
    helper = LayerHelper("unsqueeze2", x=x, name=name)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    x_shape = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="unsqueeze2", inputs={"X": x}, attrs={"axes": axes},
                     outputs={"Out": out, "XShape": x_shape})
    return out


def squeeze(x: Variable, axis: int | Sequence[int] | None = None,
            name: str | None = None) -> Variable:
    """`squeeze2` (`squeeze_N.tmp_0`)."""
    axes = [] if axis is None else [axis] if isinstance(axis, int) else list(axis)
    helper = LayerHelper("squeeze", x=x, name=name)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    x_shape = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="squeeze2", inputs={"X": x}, attrs={"axes": axes},
                     outputs={"Out": out, "XShape": x_shape})
    return out
