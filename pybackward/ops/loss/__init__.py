"""Losses: cross entropy, NLL, pointwise losses (BCE, hinge, KL, Huber), CTC, hierarchical sigmoid, NCE, YOLOv3.

One module per family, each declaring its ops' kernels, grad rules and samples
(registered on import of `pybackward.ops`): `cross_entropy`, `ctc`, `hsigmoid`, `identity_loss`, `nce`, `nll`, `pointwise`, `yolov3`.
"""
