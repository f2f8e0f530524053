"""Paddle's OpRole bit set and the attrs every op carries (names and values).

`op_role` is an INT attr on every op: 0 forward, bit 1 backward, bit 2
optimize, 256 the op that makes the loss (or its gradient's seed).
`op_role_var` lists [param, grad, ...] on the op that last writes a
parameter's gradient; `op_device` names a device ("" for any).
"""
OP_ROLE_FORWARD = 0
OP_ROLE_BACKWARD = 1
OP_ROLE_OPTIMIZE = 2
OP_ROLE_LOSS = 256
OP_ROLE_ATTR = "op_role"
OP_ROLE_VAR_ATTR = "op_role_var"
OP_DEVICE_ATTR = "op_device"
