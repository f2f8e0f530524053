"""Elementwise and reduction maths: arithmetic, activations, unary and special functions, comparisons and logic, complex numbers, scans, reductions and norms, FFTs.

One module per family, each declaring its ops' kernels, grad rules and samples
(registered on import of `pybackward.ops`): `activation`, `boolean_reductions`, `compare`, `complex`, `core`, `elementwise`, `fft`, `fused_elementwise`, `integer`, `median`, `reduce_as`, `reductions_and_norms`, `scan`, `special`, `unary`, `variance`.
"""
