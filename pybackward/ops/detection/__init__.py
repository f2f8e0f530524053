"""Detection: box coding, prior / anchor boxes, NMS, region proposals, RoI and PS-RoI pooling.

One module per family, each declaring its ops' kernels, grad rules and samples
(registered on import of `pybackward.ops`): `boxes`, `nms`, `proposals`, `psroi_pool`, `roi`.
"""
