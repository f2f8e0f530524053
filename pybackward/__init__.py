"""pybackward: append the backward section to PaddlePaddle static programs.

    import pybackward
    prog = pybackward.load("model.pb")          # a legacy ProgramDesc; a PIR .json gives a pybackward.pir.Program
    params_grads = pybackward.append_backward(prog.var("mean_0.tmp_0"))
    pybackward.save(prog, "model_with_backward.pb")
"""
from __future__ import annotations

__version__ = "0.1.0"

from .base.errors import (
    ArgumentError, ArgumentTypeError, ArrayFileError, CheckFailedError, ExecutionError, ExecutionLimitError,
    OutputError, PaddleDeviationWarning, ProgramFileError, PyBackwardError, PyBackwardWarning, UnknownOpError,
    UnsupportedDtypeError, VarNotFoundError)  # noqa: F401
from .formats import dumps, load, loads, save  # noqa: F401  (either IR, told apart by content)
from .legacy.program import Block, Operator, Program, Variable  # noqa: F401
from .legacy import text  # noqa: F401
from .tensors.paddle_files import load_arrays, save_arrays  # noqa: F401
from .backward import append_backward, calc_gradient, grad_op_descs, gradients  # noqa: F401,E402
from .ops.custom import register_ops  # noqa: F401,E402
from .interpreter.gradcheck import check_gradients  # noqa: F401,E402
from .interpreter.executor import Executor, Scope  # noqa: F401,E402
from .views.summary import summary  # noqa: F401,E402
from . import memory  # noqa: F401,E402  (the module is callable: pybackward.memory(program, batch_size=N))

#: The public API: what `from pybackward import *` gives and the API docs list.
#: Modules with more (each documents itself): `pybackward.legacy.text`, `.paddle_text`,
#: `.diff`, `.dot`, `.graph_view`, `.html_view`, `.testing`, `.static`,
#: `.backward.verify`, `.memory`, `.paddle_files`.
__all__ = [
    "__version__",
    # files
    "load", "loads", "save", "dumps", "load_arrays", "save_arrays",
    # the program model
    "Program", "Block", "Operator", "Variable",
    # the backward pass
    "append_backward", "gradients", "calc_gradient", "grad_op_descs", "register_ops",
    # running and checking
    "Executor", "Scope", "check_gradients", "summary", "memory", "text",
    # errors
    "PyBackwardError", "ArgumentError", "ArrayFileError", "CheckFailedError", "ExecutionError", "OutputError",
    "ProgramFileError", "UnknownOpError", "UnsupportedDtypeError", "VarNotFoundError",
]
