"""Activations, dropout, losses and pooling, as `paddle.nn.functional`
builds them in legacy static mode (also `pybackward.static.nn.functional`).

`sigmoid`, `tanh` and `gelu` lost their legacy branch in Paddle 3.3.1 (they
only take PIR values there); they build what Paddle 2.6's legacy branch
built: one op named after the function (`sigmoid_0.tmp_0`).
"""
from __future__ import annotations

from typing import Any, Sequence

from ..base import dtypes
from .framework import Variable
from . import tensor
from .layer_helper import LayerHelper

__all__ = ["relu", "sigmoid", "tanh", "gelu", "softmax", "dropout", "square_error_cost",
           "cross_entropy", "softmax_with_cross_entropy", "max_pool2d", "avg_pool2d"]


def _check_float(x: Variable, fn: str) -> None:
    if x.dtype.name not in ("float16", "float32", "float64", "uint16"):
        raise TypeError(f"The data type of 'x' in {fn} must be float, but received {x.dtype.name}.")


def _unary(op_type: str, x: Variable, name: str | None, attrs: dict | None = None) -> Variable:
    _check_float(x, op_type)
    helper = LayerHelper(op_type, x=x, name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type=op_type, inputs={"X": x}, outputs={"Out": out}, attrs=attrs)
    return out


def relu(x: Variable, name: str | None = None) -> Variable:
    return _unary("relu", x, name)


def sigmoid(x: Variable, name: str | None = None) -> Variable:
    return _unary("sigmoid", x, name)


def tanh(x: Variable, name: str | None = None) -> Variable:
    return _unary("tanh", x, name)


def gelu(x: Variable, approximate: bool = False, name: str | None = None) -> Variable:
    return _unary("gelu", x, name, {"approximate": approximate})


def softmax(x: Variable, axis: int = -1, dtype: Any = None, name: str | None = None) -> Variable:
    helper = LayerHelper("softmax", x=x, axis=axis, dtype=dtype, name=name)
    src = x
    if dtype is not None:
        src = helper.create_variable_for_type_inference(dtype)
        helper.append_op(type="cast", inputs={"X": x}, outputs={"Out": src},
                         attrs={"in_dtype": x.data_type, "out_dtype": dtypes.from_any(dtype)})
    else:
        _check_float(x, "softmax")
    out = helper.create_variable_for_type_inference(src.dtype)
    helper.append_op(type="softmax", inputs={"X": src}, outputs={"Out": out},
                     attrs={"axis": axis, "use_cudnn": True})
    return out


def dropout(x: Variable, p: float = 0.5, axis: int | Sequence[int] | None = None,
            training: bool = True, inplace: bool = False, mode: str = "upscale_in_train",
            name: str | None = None) -> Variable:
    """One `dropout` op. Its seed: the main program's `random_seed` when that
    is nonzero (`fix_seed=True`), else 0 (`fix_seed=False`)."""
    if not isinstance(p, (float, int)):
        raise TypeError("p argument should be a number")
    if p == 0:
        return x
    if p < 0 or p > 1:
        raise ValueError("p argument should between 0 and 1")
    if mode not in ("downscale_in_infer", "upscale_in_train"):
        raise ValueError("mode argument should be 'downscale_in_infer' or 'upscale_in_train'")
    if axis is not None:
        raise NotImplementedError("dropout with axis (Paddle builds it from PIR-only ops) is not "
                                  "supported by pybackward.static")
    mode = "downgrade_in_infer" if mode == "downscale_in_infer" else mode
    helper = LayerHelper("dropout", x=x, name=name)
    _check_float(x, "dropout")
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    mask = helper.create_variable_for_type_inference(dtype="uint8", stop_gradient=True)
    seed = None
    if helper.main_program.random_seed != 0:
        seed = helper.main_program.random_seed
    helper.append_op(type="dropout", inputs={"X": [x]}, outputs={"Out": [out], "Mask": [mask]},
                     attrs={"dropout_prob": p, "is_test": not training,
                            "fix_seed": seed is not None, "seed": seed if seed is not None else 0,
                            "dropout_implementation": mode})
    return out


def square_error_cost(input: Variable, label: Variable) -> Variable:
    """`elementwise_sub` then `square` (`square_error_cost_N.tmp_0/1`)."""
    for v, what in ((input, "input"), (label, "label")):
        if v.dtype.name not in ("float32", "float64"):
            raise TypeError(f"The data type of '{what}' in square_error_cost must be float32 or "
                            f"float64, but received {v.dtype.name}.")
    helper = LayerHelper("square_error_cost", input=input, label=label)
    minus_out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="elementwise_sub", inputs={"X": [input], "Y": [label]},
                     outputs={"Out": [minus_out]})
    square_out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="square", inputs={"X": [minus_out]}, outputs={"Out": [square_out]})
    return square_out


def _check_label_dims(input_dims: int, label_dims: int) -> None:
    if input_dims - 1 != label_dims and input_dims != label_dims:
        raise ValueError(f"Expected input_dims - 1 = label_dims or input_dims == label_dims"
                         f"             (got input_dims{input_dims}, label_dims{label_dims})")


def cross_entropy(input: Variable, label: Variable, weight: Variable | None = None,
                  ignore_index: int = -100, reduction: str = "mean", soft_label: bool = False,
                  axis: int = -1, use_softmax: bool = True, label_smoothing: float = 0.0,
                  name: str | None = None) -> Variable:
    """`softmax_with_cross_entropy` then `mean` (`reduction='mean'`), `sum`
    (`'sum'`) or nothing (`'none'`). `weight`, `label_smoothing` and a mean
    with `ignore_index >= 0` are not supported."""
    if reduction not in ("sum", "mean", "none"):
        raise ValueError("The value of 'reduction' in softmax_cross_entropy should be 'sum', "
                         f"'mean' or 'none', but received {reduction}, which is not allowed.")
    if ignore_index > 0 and soft_label:
        raise ValueError("When soft_label == True, the value of 'ignore_index' in "
                         f"softmax_cross_entropy should be '-100', but received {ignore_index}, "
                         "which is not allowed.")
    if weight is not None or label_smoothing > 0.0:
        raise NotImplementedError("cross_entropy with weight or label_smoothing is not supported "
                                  "by pybackward.static")
    input_dims, label_dims = len(input.shape), len(label.shape)
    if input_dims == 0:
        raise ValueError("The dimension of input should be larger than zero!")
    if input_dims - 1 == label_dims:
        label = tensor.unsqueeze(label, axis=axis)
    _check_label_dims(input_dims, label_dims)
    helper = LayerHelper("softmax_with_cross_entropy", input=input, label=label, name=name)
    softmax_out = helper.create_variable_for_type_inference(dtype=input.dtype)
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="softmax_with_cross_entropy", inputs={"Logits": input, "Label": label},
                     outputs={"Softmax": softmax_out, "Loss": out},
                     attrs={"soft_label": soft_label, "ignore_index": ignore_index,
                            "numeric_stable_mode": True, "axis": axis,
                            "use_softmax": use_softmax})
    if reduction == "sum":
        return tensor.sum(out, name=name)
    if reduction == "mean":
        if ignore_index >= 0:
            raise NotImplementedError("cross_entropy(reduction='mean') with ignore_index >= 0 is "
                                      "not supported by pybackward.static")
        return tensor.mean(out, name=name)
    if input_dims - 1 == label_dims:
        out = tensor.squeeze(out, axis=axis)
    return out


def softmax_with_cross_entropy(logits: Variable, label: Variable, soft_label: bool = False,
                               ignore_index: int = -100, numeric_stable_mode: bool = True,
                               return_softmax: bool = False, axis: int = -1):
    """One `softmax_with_cross_entropy` op; returns the loss (and the softmax)."""
    input_dims, label_dims = len(logits.shape), len(label.shape)
    if input_dims == 0:
        raise ValueError("The dimension of input should be larger than zero!")
    _check_label_dims(input_dims, label_dims)
    if input_dims - 1 == label_dims:
        label = tensor.reshape(label, [label.shape[0], logits.shape[1]])
    helper = LayerHelper("softmax_with_cross_entropy", logits=logits, label=label)
    softmax_out = helper.create_variable_for_type_inference(dtype=logits.dtype)
    loss = helper.create_variable_for_type_inference(dtype=logits.dtype)
    helper.append_op(type="softmax_with_cross_entropy", inputs={"Logits": logits, "Label": label},
                     outputs={"Softmax": softmax_out, "Loss": loss},
                     attrs={"soft_label": soft_label, "ignore_index": ignore_index,
                            "numeric_stable_mode": numeric_stable_mode, "axis": axis})
    return (loss, softmax_out) if return_softmax else loss


def _pair(v: Any, what: str) -> list[int]:
    if isinstance(v, int):
        return [v, v]
    v = list(v)
    if len(v) != 2:
        raise ValueError(f"The {what}'s length must be 2. Received: {v}")
    return [int(x) for x in v]


def _pool_padding(padding: Any, channel_last: bool, ceil_mode: bool) -> tuple[list[int], str]:
    if isinstance(padding, str):
        padding = padding.upper()
        if padding not in ("SAME", "VALID"):
            raise ValueError(f"Unknown padding: '{padding}'. It can only be 'SAME' or 'VALID'.")
        if padding == "VALID" and ceil_mode:
            raise ValueError('When Attr(padding) is "VALID", Attr(ceil_mode) must be False. '
                             "Received ceil_mode: True.")
        return [0, 0], padding
    if isinstance(padding, (list, tuple)):
        if len(padding) == 4 and isinstance(padding[0], (list, tuple)):
            inner = padding[1:-1] if channel_last else padding[2:]
            padding = [e for pair in inner for e in pair]
        if len(padding) == 4 and isinstance(padding[0], int):
            p = [int(v) for v in padding]
            return ([p[0], p[2]] if p[0] == p[1] and p[2] == p[3] else p), "EXPLICIT"
        if len(padding) == 2 and isinstance(padding[0], int):
            return [int(v) for v in padding], "EXPLICIT"
        raise ValueError(f"Invalid padding: {padding}")
    return _pair(padding, "padding"), "EXPLICIT"


def _pool2d(pooling_type: str, x: Variable, kernel_size: Any, stride: Any, padding: Any,
            ceil_mode: bool, exclusive: bool, data_format: str, name: str | None) -> Variable:
    kernel_size = _pair(kernel_size, "pool_size")
    stride = kernel_size if stride is None else _pair(stride, "pool_stride")
    if data_format not in ("NCHW", "NHWC"):
        raise ValueError("Attr(data_format) should be 'NCHW' or 'NHWC'. Received "
                         f"Attr(data_format): {data_format}.")
    padding, algorithm = _pool_padding(padding, data_format == "NHWC", ceil_mode)
    helper = LayerHelper("pool2d", x=x, name=name)
    _check_float(x, f"{pooling_type}_pool2d")
    out = helper.create_variable_for_type_inference(helper.input_dtype("x"))
    helper.append_op(type="pool2d", inputs={"X": x}, outputs={"Out": out},
                     attrs={"pooling_type": pooling_type, "ksize": kernel_size,
                            "global_pooling": False, "strides": stride, "paddings": padding,
                            "padding_algorithm": algorithm, "use_cudnn": True,
                            "ceil_mode": ceil_mode, "exclusive": exclusive,
                            "data_format": data_format})
    return out


def max_pool2d(x: Variable, kernel_size: Any, stride: Any = None, padding: Any = 0,
               return_mask: bool = False, ceil_mode: bool = False, data_format: str = "NCHW",
               name: str | None = None) -> Variable:
    if return_mask:
        raise NotImplementedError("max_pool2d(return_mask=True) (max_pool2d_with_index) is not "
                                  "supported by pybackward.static")
    return _pool2d("max", x, kernel_size, stride, padding, ceil_mode, True, data_format, name)


def avg_pool2d(x: Variable, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, exclusive: bool = True, divisor_override: float | None = None,
               data_format: str = "NCHW", name: str | None = None) -> Variable:
    out = _pool2d("avg", x, kernel_size, stride, padding, ceil_mode, exclusive, data_format, name)
    if divisor_override is not None:
        ksize = _pair(kernel_size, "pool_size")
        out = out * (ksize[0] * ksize[1]) / divisor_override
    return out
