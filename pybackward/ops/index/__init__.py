"""Indexing: slice, gather, scatter, where, along-axis, masked, index_put, strided views, sorting, top-k, unique, search.

One module per family, each declaring its ops' kernels, grad rules and samples
(registered on import of `pybackward.ops`): `along_axis`, `core`, `index_elementwise`, `index_put`, `index_sample_add`, `masked`, `repeat_multiplex`, `scatter_nd_add`, `search_count`, `set_strided`, `slicing`, `sort`, `strided_views`, `unique`.
"""
