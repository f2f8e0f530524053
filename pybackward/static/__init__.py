"""A small, Paddle-shaped program builder: the legacy `paddle.static` API on
pybackward alone (no Paddle needed).

    from pybackward import static
    F = static.nn.functional

    x = static.data(name='x', shape=[None, 13], dtype='int64')
    y = static.data(name='y', shape=[None, 1], dtype='float32')
    x_emb = static.nn.embedding(x, size=[100, 256])
    y_predict = static.nn.fc(x=x_emb, size=1, activation=None, name='my_fc')
    avg_loss = static.mean(F.square_error_cost(input=y_predict, label=y))
    static.append_backward(loss=avg_loss)
    # [(embedding_0.w_0, embedding_0.w_0@GRAD), (my_fc.w_0, my_fc.w_0@GRAD), (my_fc.b_0, my_fc.b_0@GRAD)]

The programs are `pybackward.Program`s, op for op what Paddle 3.3.1 builds
from the same code (same op types, slots, attrs and attr order, var names,
shapes, dtypes and flags; `op_callstack` is left empty). This module plays
both `paddle` (tensor functions: `static.mean`, `static.matmul`, ...) and
`paddle.static`; `static.nn` is `paddle.static.nn` and also carries
`functional` and `initializer`, as `paddle.nn` does. `static.save` and
`static.save_inference_model` write Paddle's files (`static.io`).
"""
from __future__ import annotations

from . import unique_name  # noqa: F401
from . import _math
from .framework import (Block, Parameter, Program, Variable, data,  # noqa: F401
                        default_main_program, default_startup_program, program_guard)
from . import initializer  # noqa: F401
from .layer_helper import LayerHelper, ParamAttr  # noqa: F401
from . import functional  # noqa: F401
from . import nn  # noqa: F401
from .tensor import (cast, concat, gather, matmul, mean, reshape, scale, slice,  # noqa: F401
                     split, squeeze, stack, sum, transpose, unsqueeze)
from .functional import (dropout, gelu, relu, sigmoid, softmax, tanh)  # noqa: F401
from .backward import append_backward, gradients  # noqa: F401
from .executor import CPUPlace, Executor, Scope, global_scope, scope_guard  # noqa: F401
from . import io  # noqa: F401
from .io import normalize_program, save, save_inference_model  # noqa: F401

_math.patch(Variable)

__all__ = [
    "Program", "Block", "Variable", "Parameter", "program_guard", "default_main_program",
    "default_startup_program", "data", "ParamAttr", "LayerHelper", "unique_name", "initializer",
    "nn", "functional", "append_backward", "gradients", "Executor", "Scope", "global_scope",
    "scope_guard", "CPUPlace", "mean", "sum", "matmul", "reshape", "transpose", "concat", "split",
    "slice", "gather", "stack", "cast", "scale", "unsqueeze", "squeeze", "relu", "sigmoid", "tanh",
    "softmax", "gelu", "dropout", "io", "save", "save_inference_model", "normalize_program",
]
