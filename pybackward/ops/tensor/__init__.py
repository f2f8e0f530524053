"""Tensor creation and copies: feed / fetch, fill_constant, assign, cast, shape, range, linspace, data, SelectedRows as dense.

One module per family, each declaring its ops' kernels, grad rules and samples
(registered on import of `pybackward.ops`): `constants`, `creation`, `data`, `fill_any`, `info`, `linspace`, `selected_rows`.
"""
