"""SelectedRows ops run as their dense equivalent."""
from __future__ import annotations

import numpy as np
from ...base.errors import ExecutionError
from ..paddle_table import paddle_opdef
from ..registry import Call, register


# --------------------------------------------------------------------------
# SelectedRows as their dense equivalent
# --------------------------------------------------------------------------
def _dense_identity(c: Call):
    x = c.x("X")
    if x is None:
        raise ExecutionError(f"op {c.op_type}: input X is required")
    return {"Out": np.array(x, copy=True)}


register(paddle_opdef("get_tensor_from_selected_rows", _dense_identity,
                      doc="the value of a SelectedRows: here its dense equivalent, copied (docs/ops.md)"))
register(paddle_opdef("merge_selected_rows", _dense_identity,
                      doc="a SelectedRows with its rows merged: the dense equivalent is unchanged (docs/ops.md)"))
