"""Fused nn kernels: losses, normalisation, attention, convolution, pooling, embedding.

Each forward has a ``*_backward`` partner that returns what the row's rule needs; shapes and ranges
were checked by ``ember.nn``. Every pair has a direct PyTorch equivalent (F.conv2d and its grads).
Normalisation and attention have none: their rows' rules are written once in ``ember/ops/nn.py``
(attention's reads ``attention_weights``); a backend may supply fused ones (``families/fused.py``).
"""

from __future__ import annotations

import abc

from .types import Pair, Raw


class NnOps(abc.ABC):
    """The fused rows of ``ember/ops/nn.py`` and ``conv.py``."""

    @abc.abstractmethod
    def cross_entropy(
        self, logits: Raw, target: Raw, ignore_index: int, label_smoothing: float
    ) -> tuple[Raw, Raw]:
        """(loss, lse): the (R,) per-row loss (0 on ignored rows) and, as the row's residual,
        each row's logsumexp; float32 math."""

    @abc.abstractmethod
    def cross_entropy_backward(
        self,
        grad: Raw,
        logits: Raw,
        target: Raw,
        lse: Raw,
        ignore_index: int,
        label_smoothing: float,
    ) -> Raw:
        """The gradient of the logits (from the (R,) loss gradient), in their dtype."""

    @abc.abstractmethod
    def cross_entropy_soft(self, logits: Raw, probs: Raw, label_smoothing: float) -> Raw:
        """(R,): per-row loss against class probabilities."""

    @abc.abstractmethod
    def cross_entropy_soft_backward(
        self, grad: Raw, logits: Raw, probs: Raw, label_smoothing: float
    ) -> tuple[Raw, Raw]:
        """The gradients of the logits and the probabilities."""

    @abc.abstractmethod
    def nll_loss(self, logp: Raw, target: Raw, ignore_index: int) -> Raw:
        """(R,): ``-logp[r, target[r]]``, 0 on ignored rows."""

    @abc.abstractmethod
    def nll_loss_backward(self, grad: Raw, target: Raw, num_classes: int, ignore_index: int) -> Raw:
        """The gradient of ``logp`` (R, C)."""

    @abc.abstractmethod
    def binary_cross_entropy(self, p: Raw, t: Raw) -> Raw:
        """Elementwise -(t log p + (1 - t) log(1 - p)), logs clamped at -100."""

    @abc.abstractmethod
    def binary_cross_entropy_backward(self, grad: Raw, p: Raw, t: Raw) -> tuple[Raw, Raw]:
        """The gradients of ``p`` and ``t``."""

    @abc.abstractmethod
    def binary_cross_entropy_with_logits(self, x: Raw, t: Raw, pos_weight: Raw) -> Raw:
        """Elementwise BCE of sigmoid(x), stable; ``pos_weight`` scales positives."""

    @abc.abstractmethod
    def layer_norm(self, x: Raw, weight: Raw, bias: Raw, normalized_ndim: int, eps: float) -> Raw:
        """Normalised over the last ``normalized_ndim`` dims, then ``* weight + bias``."""

    @abc.abstractmethod
    def rms_norm(self, x: Raw, weight: Raw, normalized_ndim: int, eps: float) -> Raw:
        """``x / rms(x) * weight`` over the last ``normalized_ndim`` dims."""

    @abc.abstractmethod
    def batch_norm(self, x: Raw, weight: Raw, bias: Raw, eps: float) -> Raw:
        """Normalised with batch statistics over every dim but 1, then ``* weight + bias``."""

    @abc.abstractmethod
    def attention(
        self, q: Raw, k: Raw, v: Raw, bias: Raw, keep: Raw, scale: float, is_causal: bool
    ) -> Raw:
        """softmax(q k^T scale + bias) v, maybe causal; a 0-d ``bias`` / ``keep`` means none."""

    @abc.abstractmethod
    def attention_weights(self, q: Raw, k: Raw, bias: Raw, scale: float, is_causal: bool) -> Raw:
        """softmax(q k^T scale + bias [+ causal mask]) (..., L, S), as ``attention`` uses them;
        a row whose keys are all masked gives 0, not NaN (the row's generic backward reads it)."""

    @abc.abstractmethod
    def conv2d(
        self,
        x: Raw,
        weight: Raw,
        bias: Raw,
        stride: Pair,
        padding: Pair,
        dilation: Pair,
        groups: int,
    ) -> Raw:
        """2-d cross-correlation of (N, C, H, W) by (O, C / groups, kH, kW), plus ``bias``."""

    @abc.abstractmethod
    def conv2d_backward(
        self,
        grad: Raw,
        x: Raw,
        weight: Raw,
        stride: Pair,
        padding: Pair,
        dilation: Pair,
        groups: int,
        need_input: bool,
        need_weight: bool,
        need_bias: bool = True,
    ) -> tuple[Raw | None, Raw | None, Raw | None]:
        """(grad x, grad weight, grad bias), each None where its ``need_*`` is False (the
        unneeded ones are not computed)."""

    @abc.abstractmethod
    def conv_transpose2d(
        self,
        x: Raw,
        weight: Raw,
        bias: Raw,
        stride: Pair,
        padding: Pair,
        output_padding: Pair,
        groups: int,
        dilation: Pair,
    ) -> Raw:
        """The transpose (gradient) of ``conv2d``, as a layer."""

    @abc.abstractmethod
    def conv_transpose2d_backward(
        self,
        grad: Raw,
        x: Raw,
        weight: Raw,
        stride: Pair,
        padding: Pair,
        groups: int,
        dilation: Pair,
        need_input: bool,
        need_weight: bool,
        need_bias: bool = True,
    ) -> tuple[Raw | None, Raw | None, Raw | None]:
        """(grad x, grad weight, grad bias), each None where its ``need_*`` is False."""

    @abc.abstractmethod
    def max_pool2d(
        self,
        x: Raw,
        kernel_size: Pair,
        stride: Pair,
        padding: Pair,
        dilation: Pair,
        ceil_mode: bool = False,
    ) -> Raw:
        """The maximum of each window of (N, C, H, W); ``ceil_mode`` rounds the output size up
        (the last window starting inside the input or its left padding)."""

    @abc.abstractmethod
    def max_pool2d_indices(
        self,
        x: Raw,
        kernel_size: Pair,
        stride: Pair,
        padding: Pair,
        dilation: Pair,
        ceil_mode: bool = False,
    ) -> Raw:
        """int64 (N, C, Ho, Wo): each window's argmax as a flat index into its (H, W) plane."""

    @abc.abstractmethod
    def max_pool2d_backward(
        self,
        grad: Raw,
        x: Raw,
        kernel_size: Pair,
        stride: Pair,
        padding: Pair,
        dilation: Pair,
        ceil_mode: bool = False,
    ) -> Raw:
        """The gradient of ``x``: ``grad`` at each window's maximum."""

    @abc.abstractmethod
    def avg_pool2d(
        self,
        x: Raw,
        kernel_size: Pair,
        stride: Pair,
        padding: Pair,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> Raw:
        """Each window's sum over ``divisor_override``, else over its positions inside the
        padded input (``count_include_pad``) or inside the input."""

    @abc.abstractmethod
    def avg_pool2d_backward(
        self,
        grad: Raw,
        input_shape: tuple[int, ...],
        kernel_size: Pair,
        stride: Pair,
        padding: Pair,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> Raw:
        """The gradient of the input of ``input_shape``."""

    @abc.abstractmethod
    def adaptive_avg_pool2d(self, x: Raw, output_size: Pair) -> Raw:
        """Means over windows that tile the input into ``output_size``."""

    @abc.abstractmethod
    def adaptive_avg_pool2d_backward(self, grad: Raw, input_shape: tuple[int, ...]) -> Raw:
        """The gradient of the input of ``input_shape``."""

    @abc.abstractmethod
    def embedding(self, indices: Raw, weight: Raw) -> Raw:
        """Rows of ``weight`` at ``indices``."""

    @abc.abstractmethod
    def embedding_backward(self, grad: Raw, indices: Raw, num_embeddings: int) -> Raw:
        """``grad``'s rows summed into a (num_embeddings, D) table."""
