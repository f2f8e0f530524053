"""Neural-network layers: convolutions, pooling, normalisation, interpolation, grid sampling, recurrent cells, embeddings.

One module per family, each declaring its ops' kernels, grad rules and samples
(registered on import of `pybackward.ops`): `conv`, `conv_nd`, `cvm`, `deformable_conv`, `fused_softmax_mask`, `grid_sample`, `im2col`, `interp`, `interp_antialias`, `lrn`, `maxout_affine_channel`, `norm`, `pad3d_bilinear_interp`, `pool`, `pool3d_unpool_fractional`, `pool_nd`, `position_encoding`, `pyramid_hash`, `rnn`, `spectral_norm`.
"""
