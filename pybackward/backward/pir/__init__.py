"""The gradient pass on PIR programs: Paddle 3.3.1's `ir_backward` op for op.

Gradients are SSA values; each forward op's VJP rule (`pybackward.pir.vjp_rules`)
appends its grad ops; several gradients of one value are summed by
`builtin.combine` + `pd_op.add_n`; `pd_op.if` / `pd_op.while` get grad regions fed
by the `cf` stack ops. Imports the PIR model (`pybackward.pir`), the analyses and
the base; never the legacy IR.
"""
