"""Fused ops Paddle's inference passes write: fc, fusion_gru / lstm, seqpool concats, fused elementwise and embedding ops.

One module per family, each declaring its ops' kernels, grad rules and samples
(registered on import of `pybackward.ops`): `cpu`, `fc`, `inference`.
"""
