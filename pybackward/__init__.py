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
import importlib as _importlib

#: Public names imported when first used, not with the package: `pybackward
#: --help`, `show` and `append` need neither NumPy nor the kernels, and a
#: facade that imported them all would make every command pay for them.
#: name -> (module, attribute or None for the module itself).
_LAZY = {
    **{n: (".formats", n) for n in ("dumps", "load", "loads", "save")},   # either IR, told apart by content
    **{n: (".legacy.program", n) for n in ("Block", "Operator", "Program", "Variable")},
    "text": (".legacy.text", None),
    **{n: (".tensors.paddle_files", n) for n in ("load_arrays", "save_arrays")},
    **{n: (".backward", n) for n in ("append_backward", "calc_gradient", "grad_op_descs", "gradients")},
    "register_ops": (".ops.custom", "register_ops"),
    "check_gradients": (".interpreter.gradcheck", "check_gradients"),
    **{n: (".interpreter.executor", n) for n in ("Executor", "Scope")},
    "summary": (".views.summary", "summary"),
    "memory": (".memory", None),   # the module is callable: pybackward.memory(program, batch_size=N)
}


def __getattr__(name: str):
    """Import a public name on first use (PEP 562) and keep it as a module attribute."""
    try:
        module, attr = _LAZY[name]
    except KeyError:
        # a subpackage (pybackward.pir, .ops, ...): an attribute once imported, as before
        from importlib.util import find_spec     # here, not at start-up (importlib.util imports contextlib)
        if name.startswith("_") or find_spec(f"{__name__}.{name}") is None:
            raise AttributeError(f"module 'pybackward' has no attribute {name!r}") from None
        module, attr = f".{name}", None
    mod = _importlib.import_module(module, __name__)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
