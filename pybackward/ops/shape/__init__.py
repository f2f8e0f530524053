"""Shape ops: reshape, transpose, squeeze, concat / split, stack, expand / tile, flip / roll, pad / crop, and their legacy versions.

One module per family, each declaring its ops' kernels, grad rules and samples
(registered on import of `pybackward.ops`): `core`, `legacy_versions`, `pad_crop`, `partial_sum_concat`, `rearrange`, `reverse`, `unbind_meshgrid`.
"""
