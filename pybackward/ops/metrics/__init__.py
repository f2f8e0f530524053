"""Metric ops: accuracy, histogram, auc.

One module per family, each declaring its ops' kernels, grad rules and samples
(registered on import of `pybackward.ops`): `accuracy_histogram`, `auc`.
"""
