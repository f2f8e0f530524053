"""Linear algebra: matrix products, solves, determinants, decompositions (LU, QR, SVD, eig), matrix structure (diag, tril/triu), einsum.

One module per family, each declaring its ops' kernels, grad rules and samples
(registered on import of `pybackward.ops`): `decompositions`, `eig`, `einsum`, `linear`, `lu`, `products_and_solves`, `structure`.
"""
