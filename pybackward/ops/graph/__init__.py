"""Graph ops: segment pooling, message passing (send / recv), neighbour sampling.

One module per family, each declaring its ops' kernels, grad rules and samples
(registered on import of `pybackward.ops`): `message_passing`, `sampling`.
"""
