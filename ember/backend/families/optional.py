"""Optional kernels: multi-tensor steps and cheaper splits, with per-tensor defaults.

A backend overrides one of these when it has a faster way (``torch._foreach`` kernels, one
``split_with_sizes`` call); the default computes the same values with the backend's own
per-tensor kernels, so callers never ask whether a backend has it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

from ...errors import DeviceError
from .elementwise import ElementwiseOps
from .fused import FusedBackwards
from .index import IndexOps
from .layout import LayoutOps
from .linalg import LinalgOps
from .reduce import ReduceOps
from .storage import StorageOps
from .types import Raw


class OptionalKernels(StorageOps, ElementwiseOps, ReduceOps, LayoutOps, IndexOps, FusedBackwards):
    """Defaults written with the abstract kernels of the other families; the fused backward
    kernels of ``FusedBackwards`` default to "none" (the row's generic rule runs)."""

    def split_views(self, x: Raw, sizes: Sequence[int], dim: int) -> list[Raw]:
        """Consecutive views of ``sizes`` along ``dim``: one ``index`` per piece by default."""
        lead = (slice(None),) * dim
        out = []
        start = 0
        for n in sizes:
            out.append(self.index(x, (*lead, slice(start, start + n))))
            start += n
        return out

    def batch_stats(self, x: Raw, correction: int) -> tuple[Raw, Raw]:
        """``(mean, var)`` per channel of ``x`` (N, C, *), both (C,): the batch statistics that
        batch norm's running averages move towards (the variance over ``count - correction``,
        count > correction). By default the channels are made rows of one (C, count) copy."""
        shape = x.shape
        c = shape[1]
        dims = (1, 0, *range(2, len(shape)))
        flat = self.reshape(self.copy(self.permute(x, dims)), (c, -1))
        mean = self.reshape(self.mean_dim(flat, 1), (c,))
        return mean, self.reshape(self.var(flat, 1, correction), (c,))

    def attention_draws_dropout(self, q: Raw, k: Raw, v: Raw, is_causal: bool) -> bool:
        """Whether ``attention_dropout`` takes these inputs: a fused kernel that draws its own
        dropout mask (CUDA's flash / cuDNN / memory-efficient attention). None by default:
        ``F.scaled_dot_product_attention`` then draws the mask as a kept tensor."""
        return False

    def attention_dropout(
        self, q: Raw, k: Raw, v: Raw, scale: float, is_causal: bool, dropout_p: float
    ) -> tuple[Raw, Any]:
        """``(out, saved)``: attention with dropout on its weights, the mask drawn inside the
        kernel from this backend's generator; ``saved`` names the mask for the backward. Only
        where ``attention_draws_dropout`` said so."""
        raise DeviceError(
            f"attention_dropout: the {type(self).__name__} has no attention kernel that draws "
            "its own dropout mask; F.scaled_dot_product_attention draws the mask as a tensor "
            "there (attention_draws_dropout is False)."
        )

    def attention_dropout_backward(
        self,
        grad: Raw,
        q: Raw,
        k: Raw,
        v: Raw,
        saved: Any,
        scale: float,
        is_causal: bool,
        dropout_p: float,
    ) -> tuple[Raw, Raw, Raw]:
        """(grad q, grad k, grad v) of ``attention_dropout``; ``saved`` redraws the mask."""
        raise DeviceError(
            f"attention_dropout_backward: the {type(self).__name__} has no fused attention "
            "dropout kernel."
        )

    def lstm_layer_takes(self, x: Raw) -> bool:
        """Whether ``lstm_layer_fused`` runs a whole LSTM layer on ``x`` ``(T, B, I)`` in one
        library call (cuDNN on CUDA). False by default: ``nn.LSTM`` then uses ``lstm_seq``."""
        return False

    def lstm_layer_fused(
        self, x: Raw, w_ih: Raw, w_hh: Raw, b_ih: Raw, b_hh: Raw, h0: Raw, c0: Raw, reverse: bool
    ) -> tuple[Raw, tuple[Any, ...]] | None:
        """``(out, saved)`` of the ``lstm_layer`` row from one library call, ``saved`` a tuple
        of the library's residuals; ``None`` (the default) where there is no such kernel."""
        return None

    def lstm_layer_fused_backward(
        self,
        grad: Raw,
        x: Raw,
        w_ih: Raw,
        w_hh: Raw,
        b_ih: Raw,
        b_hh: Raw,
        h0: Raw,
        c0: Raw,
        saved: tuple[Any, ...],
        reverse: bool,
    ) -> tuple[Raw, ...]:
        """Gradients of ``lstm_layer``'s seven inputs from ``lstm_layer_fused``'s residuals."""
        raise DeviceError(
            f"lstm_layer_fused_backward: the {type(self).__name__} has no fused LSTM layer."
        )

    def recurrent_layer_takes(self, x: Raw, mode: str) -> bool:
        """Whether ``recurrent_layer_fused`` runs a whole GRU / Elman layer (``mode`` ``"gru"``,
        ``"rnn_tanh"``, ``"rnn_relu"``) on ``x`` ``(T, B, I)`` in one library call (cuDNN on
        CUDA). False by default: ``nn.GRU`` / ``nn.RNN`` then use ``gru_seq`` / ``rnn_seq``."""
        return False

    def recurrent_layer_fused(
        self, x: Raw, w_ih: Raw, w_hh: Raw, b_ih: Raw, b_hh: Raw, h0: Raw, mode: str, reverse: bool
    ) -> tuple[Raw, tuple[Any, ...]] | None:
        """``(out, saved)`` of the ``recurrent_layer`` row from one library call, ``saved`` a
        tuple of the library's residuals; ``None`` (the default) where there is no such kernel."""
        return None

    def recurrent_layer_fused_backward(
        self,
        grad: Raw,
        x: Raw,
        w_ih: Raw,
        w_hh: Raw,
        b_ih: Raw,
        b_hh: Raw,
        h0: Raw,
        saved: tuple[Any, ...],
        mode: str,
        reverse: bool,
    ) -> tuple[Raw, ...]:
        """Gradients of ``recurrent_layer``'s six inputs from ``recurrent_layer_fused``'s
        residuals."""
        raise DeviceError(
            f"recurrent_layer_fused_backward: the {type(self).__name__} has no fused {mode} layer."
        )

    def chunk_logsumexp(self, z: Raw) -> Raw:
        """``(N, 1)`` float32 logsumexp of each row of logits ``z`` ``(N, C)`` (a chunk of the
        vocabulary in ``linear_cross_entropy``), half-precision logits widened first."""
        from ...dtype import float32

        if self.dtype_of(z).itemsize < 4:
            z = self.cast(z, float32)
        top = self.max_dim(z, 1)
        total = self.sum_dim(self.exp(self.sub(z, top)), 1)
        return self.asarray(self.add(self.log(total), top))

    def ce_chunk_grad(
        self, z: Raw, lse: Raw, t: Raw, g: Raw, lo: int, keep: float, smooth: float, dtype: Any
    ) -> Raw:
        """The logit gradient of one vocabulary chunk in ``linear_cross_entropy``:
        ``(exp(z - lse) - keep * onehot(t - lo) - smooth) * g`` in ``dtype``, for logits ``z``
        ``(N, C)``, float32 ``lse`` and ``g`` ``(N, 1)`` and int targets ``t`` ``(N, 1)``."""
        from ...dtype import float32

        zw = self.cast(z, float32) if self.dtype_of(z).itemsize < 4 else z
        hi = lo + z.shape[1]
        cols = self.arange(lo, hi, 1, self.dtype_of(t))
        hit = self.cast(self.equal(t, cols), self.dtype_of(zw))  # (N, C) one-hot of the target
        d = self.sub(self.exp(self.sub(zw, lse)), self.mul_scalar(hit, keep))
        if smooth:
            d = self.add_scalar(d, -smooth)
        d = self.mul(d, g)
        return d if self.dtype_of(d) is dtype else self.cast(d, dtype)

    def int8_matmul(self, a: Raw, b: Raw) -> Raw:
        """The exact int32 product of int8 matrices ``a`` (M, K) and ``b`` (K, N).

        Quantized products use it (ember/_core/qops.py). The default multiplies in float64,
        exact for any K below 2**38; backends override it with int32 accumulation.
        """
        from ...dtype import float64, int32

        lin = cast(LinalgOps, self)  # every Backend is one (base.py lists both families)
        out = lin.matmul(self.cast(a, float64), self.cast(b, float64))
        return self.cast(out, int32)

    def int8_weight_linear(self, x: Raw, w: Raw, s: Raw) -> Raw:
        """``(x @ w^T) * s^T`` for float ``x`` (*, K), int8 ``w`` (N, K) and scales ``s`` (N, 1)
        or (1, 1), in ``x``'s dtype. The default converts ``w`` to ``x``'s dtype first; a
        backend with a kernel that dequantizes inside the product overrides it."""
        dt = self.dtype_of(x)
        lin = cast(LinalgOps, self)
        prod = lin.matmul(x, self.permute(self.cast(w, dt), (1, 0)))
        s_row = self.permute(s if self.dtype_of(s) is dt else self.cast(s, dt), (1, 0))
        return self.asarray(self.mul(prod, s_row))

    def int8_matmul_scaled(self, a: Raw, b: Raw, scale_a: Raw, scale_b: Raw) -> Raw:
        """float32 ``int8_matmul(a, b) * (scale_a * scale_b)`` for float32 scales ``scale_a``
        (M, 1) or (1, 1) and ``scale_b`` (1, N) or (1, 1): a product of two quantized matrices.
        Backends with an int8 GEMM apply the scales in its epilogue."""
        from ...dtype import float32

        sums = self.cast(self.int8_matmul(a, b), float32)
        return self.asarray(self.mul(sums, self.mul(scale_a, scale_b)))

    def clip_norm_many(
        self, grads: list[Raw], max_norm: float, eps: float
    ) -> tuple[list[Raw], Raw]:
        """Gradients scaled by ``min(1, max_norm / (norm + eps))`` and their global L2 norm.

        No branch on the norm's value (a clamp), so nothing is read back; the inputs are left
        unchanged. The default sums each gradient's squares, one tensor at a time.
        """
        sq = None
        for g in grads:
            s = self.sum(self.mul(g, g))
            sq = s if sq is None else self.add(sq, s)
        total = self.asarray(self.sqrt(sq))
        scaled = self.rdiv_scalar(self.add_scalar(total, self.scalar(eps, total)), max_norm)
        factor = self.asarray(self.clamp(self.asarray(scaled), None, 1.0))
        dtype = self.dtype_of(factor)
        out = []
        for g in grads:
            dg = self.dtype_of(g)
            f = factor if dg is dtype else self.cast(factor, dg)
            out.append(self.asarray(self.mul(g, f)))
        return out, total

    def adam_many(
        self,
        params: list[Raw],
        grads: list[Raw],
        exp_avgs: list[Raw] | None,
        exp_avg_sqs: list[Raw] | None,
        step: int,
        lr: float,
        beta1: float,
        beta2: float,
        eps: float,
        weight_decay: float,
        decoupled: bool,
        donate_moments: bool = False,
    ) -> tuple[list[Raw], list[Raw], list[Raw]]:
        """One Adam / AdamW step of many parameters: new parameters, first and second moments.

        The values of ``ember.optim.Adam.update`` per parameter (``exp_avgs`` / ``exp_avg_sqs``
        are ``None`` on the first step). The inputs are left unchanged; ``donate_moments`` says
        the caller holds the moments' only references, so a kernel may update them in place
        (the default never does).
        """
        root_bc2 = math.sqrt(1.0 - beta2**step)
        shift = eps * root_bc2
        rate = lr * root_bc2 / (1.0 - beta1**step)
        new, ms, vs = [], [], []
        for i, (p, g) in enumerate(zip(params, grads)):
            if weight_decay and decoupled:
                p = self.mul_scalar(p, self.scalar(1.0 - lr * weight_decay, p))
            elif weight_decay:
                g = self.add(g, self.mul_scalar(p, self.scalar(weight_decay, p)))
            g2 = self.mul(g, g)
            if exp_avgs is None or exp_avg_sqs is None:
                m = self.mul_scalar(g, self.scalar(1.0 - beta1, g))
                v = self.mul_scalar(g2, self.scalar(1.0 - beta2, g2))
            else:  # the moving averages as lerps, m + (g - m)(1 - b1), as Adam.update has them
                m0, v0 = exp_avgs[i], exp_avg_sqs[i]
                d = self.sub(g, m0)
                m = self.add(m0, self.mul_scalar(d, self.scalar(1.0 - beta1, d)))
                d = self.sub(g2, v0)
                v = self.add(v0, self.mul_scalar(d, self.scalar(1.0 - beta2, d)))
            m, v = self.asarray(m), self.asarray(v)
            root = self.sqrt(v)
            ratio = self.div(m, self.add_scalar(root, self.scalar(shift, root)))
            p = self.sub(p, self.mul_scalar(ratio, self.scalar(rate, ratio)))
            new.append(self.asarray(p))
            ms.append(m)
            vs.append(v)
        return new, ms, vs
