"""Recommendation ops: tree-based deep models (tdm_child, tdm_sampler).

One module per family, each declaring its ops' kernels, grad rules and samples
(registered on import of `pybackward.ops`): `tdm`.
"""
