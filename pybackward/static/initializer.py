"""Parameter initializers, as Paddle 3.3.1 defines them for legacy static
programs (`paddle.nn.initializer`): each appends one op to the startup block
that fills the parameter.

| class | op | values |
|---|---|---|
| Constant(value) | fill_constant | value |
| Uniform(low, high) | uniform_random | U(low, high) |
| Normal(mean, std) | gaussian_random | N(mean, std) |
| TruncatedNormal(mean, std, a, b) | truncated_gaussian_random | N(mean, std) cut to [a, b] |
| XavierUniform(fan_in, fan_out, gain) | uniform_random | limit = gain*sqrt(6/(fan_in+fan_out)) |
| XavierNormal(fan_in, fan_out, gain) | gaussian_random | std = gain*sqrt(2/(fan_in+fan_out)) |
| KaimingUniform(fan_in, negative_slope, nonlinearity, mode) | uniform_random | limit = gain*sqrt(3/fan) |
| KaimingNormal(...) | gaussian_random | std = gain/sqrt(fan) |

fan_in/fan_out (`_compute_fans`): 0-D -> 1, 1; 1-D [n] -> n, n; 2-D [a, b] ->
a, b; more dims [o, i, *k] -> i*prod(k), o*prod(k). A seed of 0 takes the
block's `program.random_seed` when the op is made (and the initializer keeps
it, as Paddle's does). float16/bfloat16 parameters (Paddle's extra cast op)
are not supported.
"""
from __future__ import annotations

import copy
import math

import numpy as np

from ..base import dtypes
from .._proto import framework_pb2 as pb
from .framework import default_main_program

__all__ = ["Initializer", "Constant", "Uniform", "Normal", "TruncatedNormal", "XavierUniform",
           "XavierNormal", "KaimingUniform", "KaimingNormal", "ConstantInitializer",
           "UniformInitializer", "NormalInitializer", "TruncatedNormalInitializer",
           "XavierInitializer", "MSRAInitializer", "calculate_gain"]

_FLOATS = (pb.VarType.FP32, pb.VarType.FP64)


_ATOMIC = frozenset({type(None), bool, int, float, complex, str, bytes})


def deepcopy_fields(obj, memo: dict):
    """`copy.deepcopy` of a plain object whose fields are mostly numbers and
    strings: the same result as the generic path (a new object, every field
    deep-copied), without its per-field dispatch - layers copy a ParamAttr
    and its initializer for every parameter they create."""
    cls = type(obj)
    if not _plain_class(cls):  # a subclass with its own state protocol: the generic path
        return copy._reconstruct(obj, memo, *obj.__reduce_ex__(4))
    new = object.__new__(cls)
    memo[id(obj)] = new
    fields = new.__dict__
    for k, v in obj.__dict__.items():
        fields[k] = v if type(v) in _ATOMIC else copy.deepcopy(v, memo)
    return new


def _plain_class(cls: type) -> bool:
    if (cls.__reduce_ex__ is not object.__reduce_ex__ or cls.__reduce__ is not object.__reduce__
            or cls.__getstate__ is not object.__getstate__):
        return False
    for c in cls.__mro__:
        if "__slots__" in c.__dict__:
            return False
    return True


class Initializer:
    """Base class: `init(param, block)` appends the init op to `block`."""

    __deepcopy__ = deepcopy_fields

    def __call__(self, param, block=None):
        if block is None:
            block = default_main_program().global_block()
        return self.forward(param, block)

    def forward(self, param, block):
        raise NotImplementedError

    def _compute_fans(self, var) -> tuple[int, int]:
        shape = var.shape
        if not shape:
            return 1, 1
        if len(shape) == 1:
            return shape[0], shape[0]
        if len(shape) == 2:
            return shape[0], shape[1]
        receptive = int(np.prod(shape[2:]))
        return shape[1] * receptive, shape[0] * receptive

    def _take_seed(self, block) -> int:
        if self._seed == 0:
            self._seed = block.program.random_seed
        return self._seed

    @staticmethod
    def _check_float(var, what: str, data_type: int | None = None) -> int:
        """The var's data type (read once), which must be a float."""
        if data_type is None:
            data_type = var.data_type
        if data_type not in _FLOATS:
            raise TypeError(f"{what}: pybackward.static initializes float32/float64 parameters "
                            f"only; '{var.name}' is {dtypes.type_name(data_type)}")
        return data_type


class ConstantInitializer(Initializer):
    def __init__(self, value: float = 0.0, force_cpu: bool = False):
        if value is None:
            raise ValueError("value must not be none.")
        self._value = value
        self._force_cpu = force_cpu

    def forward(self, var, block):
        return block.append_op(
            type="fill_constant", outputs={"Out": var},
            attrs={"shape": list(var.shape), "dtype": int(var.data_type),
                   "value": float(self._value), "str_value": str(float(self._value)),
                   "force_cpu": self._force_cpu})


class Constant(ConstantInitializer):
    def __init__(self, value: float = 0.0):
        super().__init__(value=value, force_cpu=False)


class UniformInitializer(Initializer):
    def __init__(self, low: float = -1.0, high: float = 1.0, seed: int = 0, diag_num: int = 0,
                 diag_step: int = 0, diag_val: float = 1.0):
        if high < low:
            raise AssertionError("high should greater or equal than low")
        if diag_num > 0 or diag_step > 0:
            assert diag_num > 0 and diag_step > 0
        self._low, self._high, self._seed = low, high, seed
        self._diag_num, self._diag_step, self._diag_val = diag_num, diag_step, diag_val

    def forward(self, var, block):
        self._check_float(var, "uniform_random")
        seed = self._take_seed(block)
        return block.append_op(
            type="uniform_random", inputs={}, outputs={"Out": var},
            attrs={"shape": list(var.shape), "dtype": int(var.data_type), "min": self._low,
                   "max": self._high, "seed": seed, "diag_num": self._diag_num,
                   "diag_step": self._diag_step, "diag_val": self._diag_val})


class Uniform(UniformInitializer):
    def __init__(self, low: float = -1.0, high: float = 1.0, name: str | None = None):
        super().__init__(low=low, high=high, seed=0)


class NormalInitializer(Initializer):
    def __init__(self, loc: float = 0.0, scale: float = 1.0, seed: int = 0):
        self._mean, self._std_dev, self._seed = loc, scale, seed

    def forward(self, var, block):
        self._check_float(var, "gaussian_random")
        seed = self._take_seed(block)
        return block.append_op(
            type="gaussian_random", outputs={"Out": var},
            attrs={"shape": list(var.shape), "dtype": int(var.data_type), "mean": self._mean,
                   "std": self._std_dev, "seed": seed})


class Normal(NormalInitializer):
    def __init__(self, mean: float = 0.0, std: float = 1.0, name: str | None = None):
        super().__init__(loc=mean, scale=std, seed=0)


class TruncatedNormalInitializer(Initializer):
    def __init__(self, loc: float = 0.0, scale: float = 1.0, seed: int = 0, a: float = -2.0,
                 b: float = 2.0):
        self._mean, self._std_dev, self._seed, self._a, self._b = loc, scale, seed, a, b

    def forward(self, var, block):
        self._check_float(var, "truncated_gaussian_random")
        seed = self._take_seed(block)
        return block.append_op(
            type="truncated_gaussian_random", outputs={"Out": var},
            attrs={"shape": list(var.shape), "dtype": int(var.data_type), "mean": self._mean,
                   "std": self._std_dev, "seed": seed, "a": self._a, "b": self._b})


class TruncatedNormal(TruncatedNormalInitializer):
    def __init__(self, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                 name: str | None = None):
        super().__init__(loc=mean, scale=std, seed=0, a=a, b=b)


class XavierInitializer(Initializer):
    def __init__(self, uniform: bool = True, fan_in: float | None = None,
                 fan_out: float | None = None, seed: int = 0, gain: float = 1.0):
        self._uniform, self._fan_in, self._fan_out = uniform, fan_in, fan_out
        self._seed, self._gain = seed, gain

    def forward(self, var, block):
        dt = self._check_float(var, "xavier_init")
        shape = list(var.shape)
        f_in, f_out = self._compute_fans(var)
        fan_in = f_in if self._fan_in is None else self._fan_in
        fan_out = f_out if self._fan_out is None else self._fan_out
        seed = self._take_seed(block)
        zero = 0 in (fan_in, fan_out)
        if self._uniform:
            limit = 0.0 if zero else self._gain * math.sqrt(6.0 / float(fan_in + fan_out))
            return block.append_op(
                type="uniform_random", inputs={}, outputs={"Out": var},
                attrs={"shape": shape, "dtype": int(dt), "min": -limit,
                       "max": limit, "seed": seed})
        std = 0.0 if zero else self._gain * math.sqrt(2.0 / float(fan_in + fan_out))
        return block.append_op(
            type="gaussian_random", outputs={"Out": var},
            attrs={"shape": shape, "dtype": int(dt), "mean": 0.0,
                   "std": std, "seed": seed})


class XavierUniform(XavierInitializer):
    def __init__(self, fan_in: float | None = None, fan_out: float | None = None,
                 gain: float = 1.0, name: str | None = None):
        super().__init__(uniform=True, fan_in=fan_in, fan_out=fan_out, seed=0, gain=gain)


class XavierNormal(XavierInitializer):
    def __init__(self, fan_in: float | None = None, fan_out: float | None = None,
                 gain: float = 1.0, name: str | None = None):
        super().__init__(uniform=False, fan_in=fan_in, fan_out=fan_out, seed=0, gain=gain)


def calculate_gain(nonlinearity: str, param: bool | float | None = None) -> float:
    """Paddle's recommended gain for a nonlinearity."""
    param = 0.01 if param is None else float(param)
    gains = {
        "sigmoid": 1, "linear": 1, "conv1d": 1, "conv2d": 1, "conv3d": 1,
        "conv1d_transpose": 1, "conv_transpose1d": 1, "conv2d_transpose": 1,
        "conv_transpose2d": 1, "conv3d_transpose": 1, "conv_transpose3d": 1,
        "tanh": 5.0 / 3, "relu": math.sqrt(2.0),
        "leaky_relu": math.sqrt(2.0 / (1 + param ** 2)), "selu": 3.0 / 4,
    }
    if nonlinearity not in gains:
        raise ValueError(f"nonlinearity function {nonlinearity} is not supported now.")
    return gains[nonlinearity]


class MSRAInitializer(Initializer):
    def __init__(self, uniform: bool = True, fan_in: float | None = None, seed: int = 0,
                 negative_slope: float = 0, nonlinearity: str = "relu", mode: str = "fan_in"):
        if mode not in ("fan_in", "fan_out"):
            raise ValueError("The mode of KaimingNormal/KaimingUniform should be 'fan_in' or "
                             f"'fan_out', but received {mode}.")
        if mode == "fan_out" and fan_in is not None:
            raise ValueError("The mode of KaimingNormal/KaimingUniform is 'fan_out', but fan_in "
                             "is set. Please set fan_in to None.")
        self._uniform, self._fan_in, self._seed = uniform, fan_in, seed
        self._negative_slope, self._nonlinearity, self._mode = negative_slope, nonlinearity, mode

    def forward(self, var, block):
        self._check_float(var, "kaiming_init")
        f_in, f_out = self._compute_fans(var)
        fan = (f_in if self._fan_in is None else self._fan_in) if self._mode == "fan_in" else f_out
        seed = self._take_seed(block)
        gain = calculate_gain(self._nonlinearity, self._negative_slope)
        if self._uniform:
            limit = gain * math.sqrt(3.0 / float(fan))
            return block.append_op(
                type="uniform_random", inputs={}, outputs={"Out": var},
                attrs={"shape": list(var.shape), "dtype": int(var.data_type), "min": -limit,
                       "max": limit, "seed": seed})
        std = gain / math.sqrt(float(fan))
        return block.append_op(
            type="gaussian_random", outputs={"Out": var},
            attrs={"shape": list(var.shape), "dtype": int(var.data_type), "mean": 0.0,
                   "std": std, "seed": seed})


class KaimingUniform(MSRAInitializer):
    def __init__(self, fan_in: float | None = None, negative_slope: float = 0.0,
                 nonlinearity: str = "relu", mode: str = "fan_in"):
        super().__init__(uniform=True, fan_in=fan_in, seed=0, negative_slope=negative_slope,
                         nonlinearity=nonlinearity, mode=mode)


class KaimingNormal(MSRAInitializer):
    def __init__(self, fan_in: float | None = None, negative_slope: float = 0.0,
                 nonlinearity: str = "relu", mode: str = "fan_in"):
        super().__init__(uniform=False, fan_in=fan_in, seed=0, negative_slope=negative_slope,
                         nonlinearity=nonlinearity, mode=mode)
