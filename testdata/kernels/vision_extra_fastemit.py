"""Paddle 3.3.1's warprnnt with FastEmit (fastemit_lambda 0.5), for
tests/ops/test_nn_detection_quant.py: FastEmit changes the gradient but not the loss, so
finite differences cannot check it and the registry's samples keep lambda 0.

    /path/to/paddle/python testdata/kernels/vision_extra_fastemit.py
"""
import pathlib

import numpy as np
import paddle

HERE = pathlib.Path(__file__).resolve().parent


def main() -> None:
    rng = np.random.default_rng(0)
    z = rng.standard_normal((2, 4, 3, 5))
    acts = z - np.log(np.exp(z).sum(-1, keepdims=True))
    label = np.array([[1, 3], [2, 0]], np.int32)
    tl, ul = np.array([4, 3], np.int32), np.array([2, 1], np.int32)
    x = paddle.to_tensor(acts, stop_gradient=False)
    loss = paddle.nn.functional.rnnt_loss(x, paddle.to_tensor(label), paddle.to_tensor(tl), paddle.to_tensor(ul),
                                          blank=0, fastemit_lambda=0.5, reduction="none")
    loss.sum().backward()
    np.savez_compressed(HERE / "vision_extra.fastemit.npz", acts=acts, label=label, input_lengths=tl,
                        label_lengths=ul, loss=loss.numpy(), grad=x.grad.numpy())


if __name__ == "__main__":
    main()
