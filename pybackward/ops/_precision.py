"""Accumulation precision for float32 kernels.

pybackward's float32 results must stay within Paddle's own float32-vs-float64
distance on the same inputs (issue #22 item 3, checked on a deep CNN by
tests/interpreter/test_float32_numerics.py). Two float32 computations that both
accumulate in float32 differ from the exact result by errors of the same
size but at different elements, so the long sums (GEMMs over N*OH*OW in a
convolution's filter gradient, reductions over many elements) accumulate in
float64 here and round once to float32: never less precise than Paddle's
float32 kernels, usually by an order of magnitude more.
"""
from __future__ import annotations

import numpy as np

#: Float dtypes whose long sums accumulate in float64.
_WIDEN = (np.dtype(np.float32), np.dtype(np.float16))


def matmul64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.matmul with float64 accumulation for float32/float16 operands,
    rounded once to the dtype np.matmul would return."""
    out_dtype = np.result_type(a, b)
    if out_dtype not in _WIDEN:
        return np.matmul(a, b)
    return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(out_dtype)


def sum64(x: np.ndarray, axis=None, keepdims: bool = False) -> np.ndarray:
    """np.sum in X's dtype, accumulated in float64 for float32/float16."""
    if x.dtype not in _WIDEN:
        return np.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype)
    return np.sum(x, axis=axis, keepdims=keepdims, dtype=np.float64).astype(x.dtype)
