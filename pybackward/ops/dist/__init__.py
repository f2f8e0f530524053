"""Collective, model-parallel and point-to-point ops, run as a world of one process; class_center_sample.

One module per family, each declaring its ops' kernels, grad rules and samples
(registered on import of `pybackward.ops`): `class_center_sample`, `collective`, `p2p`.
"""
