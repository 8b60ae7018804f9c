"""Convolutions with one window that covers the whole input: matrix products, no columns.

A conv2d whose kernel is its input's H x W, without padding, has one output position per image:
y (N, O) = x (N, C*H*W) @ w (O, C*H*W)^T (a DCGAN discriminator's last layer). Its adjoint, a
transposed conv of a 1 x 1 input without padding, writes one kernel-sized image per input:
y (N, Cout*kh*kw) = x (N, Cin) @ w (Cin, Cout*kh*kw) (a DCGAN generator's first layer). ORT's
Conv ran the first 5x slower than this (DCGAN's 128 -> 1 4x4 over 4x4: 445 µs against 93 µs
for PyTorch). Products go through ``matmul.matmul``, which splits large ones over the pool.

Shapes: ``x`` (N, C, H, W), ``weight`` (O, C, kh, kw) for a conv and (Cin, Cout, kh, kw) for a
transposed conv, as in ``conv.py``; groups 1 and dilation 1 only.
"""

from __future__ import annotations

import numpy as np

from .im2col import Pair
from .matmul import matmul


def covers(x_shape: tuple[int, ...], kernel: Pair, padding: Pair, dilation: Pair) -> bool:
    """Whether a conv of x (N, C, H, W) has one window, all of x (kernel H x W, no padding)."""
    return padding == (0, 0) and dilation == (1, 1) and kernel == tuple(x_shape[2:])


def covers_transposed(x_shape: tuple[int, ...], padding: Pair, dilation: Pair) -> bool:
    """Whether a transposed conv of x (N, Cin, 1, 1) writes one kernel-sized window per image
    (no padding; its output padding is then zero, as its output is the kernel's size)."""
    return padding == (0, 0) and dilation == (1, 1) and tuple(x_shape[2:]) == (1, 1)


def conv2d(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """(N, C, H, W) -> (N, O, 1, 1)."""
    n, o = x.shape[0], weight.shape[0]
    y = matmul(x.reshape(n, -1), weight.reshape(o, -1).T)
    if bias.any():
        y += bias
    return y.reshape(n, o, 1, 1)


def conv2d_backward(
    grad: np.ndarray, x: np.ndarray, weight: np.ndarray, need_input: bool, need_weight: bool
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """x's and the weight's gradients of ``conv2d`` from grad (N, O, 1, 1), each when asked."""
    n, o = grad.shape[:2]
    g = grad.reshape(n, o)
    gx = matmul(g, weight.reshape(o, -1)).reshape(x.shape) if need_input else None
    gw = matmul(g.T, x.reshape(n, -1)).reshape(weight.shape) if need_weight else None
    return gx, gw


def conv_transpose2d(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """(N, Cin, 1, 1) -> (N, Cout, kh, kw)."""
    n, cin = x.shape[:2]
    y = matmul(x.reshape(n, cin), weight.reshape(cin, -1)).reshape(n, *weight.shape[1:])
    if bias.any():
        y += bias.reshape(1, -1, 1, 1)
    return y


def conv_transpose2d_backward(
    grad: np.ndarray, x: np.ndarray, weight: np.ndarray, need_input: bool, need_weight: bool
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """x's and the weight's gradients of ``conv_transpose2d`` from grad (N, Cout, kh, kw)."""
    n, cin = x.shape[:2]
    g = grad.reshape(n, -1)
    gx = matmul(g, weight.reshape(cin, -1).T).reshape(x.shape) if need_input else None
    gw = matmul(x.reshape(n, cin).T, g).reshape(weight.shape) if need_weight else None
    return gx, gw
