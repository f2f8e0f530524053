"""Optimizer updates: SGD, momentum, Adam family, Adagrad family, Lamb, DGC, sparse momentum, and loss scaling / gradient clipping.

One module per family, each declaring its ops' kernels, grad rules and samples
(registered on import of `pybackward.ops`): `_util`, `adaptive`, `asgd_rprop_dpsgd`, `dgc`, `lamb`, `loss_scaling`, `optimizers`, `sparse_momentum`.
"""
