"""Control flow and plumbing: conditional_block, while and their grads, select_input / select_output, fetch / shadow_output, identities, check_numerics.

One module per family, each declaring its ops' kernels, grad rules and samples
(registered on import of `pybackward.ops`): `check_numerics`, `cond_while`, `identities`, `plumbing`.
"""
