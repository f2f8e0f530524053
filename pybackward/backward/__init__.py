"""The gradient pass: Paddle's append_backward / gradients, step by step."""
from __future__ import annotations

from typing import Any

#: Imported on first use (PEP 562), so that the PIR pass (`pybackward.backward.pir`, a
#: subpackage: importing it runs this file) does not import the legacy pass with it.
_LAZY = {"append_backward": "api", "calc_gradient": "api", "gradients": "api", "grad_op_descs": "grad_ops"}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
