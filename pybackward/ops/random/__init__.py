"""Random ops: Paddle's mt19937_64 engine, uniform / gaussian draws, dropout, distributions, in-place fills, rrelu, gumbel_softmax, shuffle_batch.

One module per family, each declaring its ops' kernels, grad rules and samples
(registered on import of `pybackward.ops`): `distributions`, `engine`, `inplace_and_global`.
"""
