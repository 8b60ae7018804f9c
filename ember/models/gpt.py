"""A character-level GPT (decoder-only transformer), after the well-known minimal GPT recipe."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from .. import nn
from .._core.creation import Distribution
from .._core.device import Device
from .._core.tensor import Tensor
from ..errors import ShapeError
from ..nn import functional as F


@dataclass
class GPTConfig:
    """Sizes of a ``GPT``: the nanoGPT character model is ``GPTConfig(vocab_size=65)``."""

    vocab_size: int
    block_size: int = 256
    n_layer: int = 6
    n_head: int = 6
    n_embd: int = 384
    dropout: float = 0.2
    bias: bool = False

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where position t only sees positions <= t."""

    def __init__(self, cfg: GPTConfig, *, device: Device | None = None) -> None:
        super().__init__()
        if cfg.n_embd % cfg.n_head:
            raise ShapeError(
                f"GPT: n_embd {cfg.n_embd} must be a multiple of n_head {cfg.n_head}; "
                "e.g. --n-embd 384 --n-head 6."
            )
        self.n_head = cfg.n_head
        self.p = cfg.dropout
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias, device=device)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias, device=device)
        self.resid_dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        H = self.n_head
        q, k, v = self.qkv(x).split(C, 2)
        # (B, T, C) -> (B, H, T, C // H)
        q = q.reshape((B, T, H, C // H)).swap_dims(1, 2)
        k = k.reshape((B, T, H, C // H)).swap_dims(1, 2)
        v = v.reshape((B, T, H, C // H)).swap_dims(1, 2)
        p = self.p if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        y = y.swap_dims(1, 2).reshape((B, T, C))  # (B, H, T, C // H) -> (B, T, C)
        return self.resid_dropout(self.proj(y))


class MLPBlock(nn.Module):
    """Position-wise feed-forward: C -> 4C -> GELU -> C."""

    def __init__(self, cfg: GPTConfig, *, device: Device | None = None) -> None:
        super().__init__()
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias, device=device)
        self.proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias, device=device)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.proj(F.gelu(self.fc(x))))


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, cfg: GPTConfig, *, device: Device | None = None) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias, device=device)
        self.attn = CausalSelfAttention(cfg, device=device)
        self.ln2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias, device=device)
        self.mlp = MLPBlock(cfg, device=device)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Token and position embeddings, ``n_layer`` blocks, a final LayerNorm and the LM head.

    The LM head is tied to the token embedding, as the reference recipe does:
    ``lm_head.weight`` is the ``Param`` ``wte.weight`` (one parameter, counted, updated and saved
    once under ``wte.weight``). Records of the earlier untied model do not load into it
    (``RecordError`` naming the two entries).

    Shapes:
        idx (B, T) int token ids with T <= block_size -> logits (B, T, vocab_size).

    Example:
        >>> model = GPT(GPTConfig(vocab_size=65, block_size=32, n_layer=2, n_head=2, n_embd=32))
        >>> model(em.Tensor.zeros((1, 5), dtype=em.int64)).shape
        (1, 5, 65)
    """

    def __init__(self, cfg: GPTConfig, *, device: Device | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd, device=device)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd, device=device)
        self.drop = nn.Dropout(cfg.dropout)
        self.n_layer = cfg.n_layer
        for i in range(cfg.n_layer):
            setattr(self, f"h{i}", Block(cfg, device=device))
        self.ln_f = nn.LayerNorm(cfg.n_embd, bias=cfg.bias, device=device)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False, device=device)
        self.lm_head.weight = self.wte.weight  # tied: one Param in both places
        self._init_weights()

    def _init_weights(self) -> None:
        # GPT-2 style: N(0, 0.02) weights, zero biases, residual projections scaled by depth
        resid_std = 0.02 / math.sqrt(2 * self.cfg.n_layer)
        state: dict[str, Tensor] = {}
        for name, p in self.named_parameters():
            device = p.val().device.without_autodiff()
            if name.endswith(".bias") or name.startswith("ln") or ".ln" in name:
                continue  # LayerNorm weights stay 1, biases 0
            std = resid_std if name.endswith("proj.weight") else 0.02
            state[name] = Tensor.random(p.shape, Distribution.normal(0.0, std), device=device)
        self.load_state_dict(state, strict=False)

    def forward(self, idx: Tensor) -> Tensor:
        return self.lm_head(self.hidden(idx))

    def hidden(self, idx: Tensor) -> Tensor:
        """The final LayerNorm's output (B, T, n_embd): what the LM head projects."""
        T = idx.shape[1]
        if T > self.cfg.block_size:
            raise ShapeError(
                f"GPT: sequence length {T} exceeds block_size {self.cfg.block_size}; "
                "crop the context to the last block_size tokens."
            )
        pos = Tensor.arange(0, T, device=idx.device.without_autodiff())
        x = self.drop(self.wte(idx) + self.wpe(pos))  # (B, T, C)
        for i in range(self.n_layer):
            x = getattr(self, f"h{i}")(x)
        return self.ln_f(x)

    def loss(self, idx: Tensor, targets: Tensor, *, ignore_index: int = -100) -> Tensor:
        """The training loss: mean cross-entropy of the next-token logits against ``targets``
        (B, T), with the LM head and the loss fused (``F.linear_cross_entropy``): the (B, T,
        vocab) logits and their gradient are never materialised. Equals
        ``F.cross_entropy(self(idx).reshape((-1, V)), targets.reshape((-1,)))``."""
        w = self.lm_head.weight.val()
        if w.is_quantized():  # a frozen int8 head (em.quantization): the logits, then the loss
            logits = F.linear(self.hidden(idx), w)
            flat = logits.reshape((-1, logits.shape[-1]))
            return F.cross_entropy(flat, targets.reshape((-1,)), ignore_index=ignore_index)
        return F.linear_cross_entropy(self.hidden(idx), w, targets, ignore_index=ignore_index)

    def generate(
        self,
        idx: np.ndarray,
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_k: int | None = None,
        seed: int | None = None,
    ) -> np.ndarray:
        """Sample ``max_new_tokens`` tokens after the prompt ids ``idx`` (B, T0).

        Runs in ``valid()`` mode (no graph, no dropout) and then restores the caller's mode: a
        model in training mode is back in ``train()`` mode afterwards. Returns ids
        (B, T0 + max_new_tokens).
        """
        if temperature <= 0:
            raise ShapeError(f"generate: expected temperature > 0, got {temperature}.")
        rng = np.random.default_rng(seed)
        weight = self.wte.weight.val()
        device = weight.device.without_autodiff()
        training = weight.is_autodiff()  # valid() makes every parameter plain
        out = np.asarray(idx, dtype=np.int64)
        self.valid()
        try:
            for _ in range(max_new_tokens):
                ctx = out[:, -self.cfg.block_size :]
                logits = self(Tensor.from_data(ctx, device=device))[:, -1, :].to_numpy()
                logits = logits.astype(np.float64) / temperature
                if top_k is not None and top_k < logits.shape[-1]:
                    kth = np.partition(logits, -top_k, axis=-1)[:, -top_k][:, None]
                    logits = np.where(logits < kth, -np.inf, logits)
                probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
                probs /= probs.sum(axis=-1, keepdims=True)
                nxt = [rng.choice(probs.shape[-1], p=row) for row in probs]
                out = np.concatenate([out, np.asarray(nxt, dtype=np.int64)[:, None]], axis=1)
        finally:
            if training:
                self.train()
        return out


def language_model_step(model: GPT, batch: Sequence[Tensor]) -> tuple[Tensor, None, Tensor]:
    """A ``Learner`` loss step for ``GPT``: ``model.loss(x, y)`` (LM head and cross-entropy
    fused), with no logits for the metrics (loss and perplexity read the loss only)."""
    x, y = batch[0], batch[-1]
    return model.loss(x, y), None, y
