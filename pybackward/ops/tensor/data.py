"""data: the op whose var holds what was fed."""
from __future__ import annotations

from ...base.errors import ExecutionError
from ..registry import Call
from .._inputs import register_plain


# --------------------------------------------------------------------------
# data: its var holds what was fed
# --------------------------------------------------------------------------
def _data(c: Call):
    names = [n for n in c.outs.get("out", ()) if n]
    scope = getattr(c.env, "scope", None)
    value = scope.get(names[0]) if scope is not None and names else None
    if value is None:
        raise ExecutionError(f"data: var {names[0] if names else '?'!r} (name attr "
                             f"{c.attr('name', '')!r}) was not fed")
    return {"out": value}


register_plain("data", _data, None, ("name", "shape", "dtype", "place"),
     "out = the value fed to its var (the op only declares the input)")
