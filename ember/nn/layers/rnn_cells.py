"""Single-step recurrent cells: LSTMCell, GRUCell and RNNCell, as PyTorch names and computes them.

Each cell holds ``weight_ih`` ``[gates * H, in]``, ``weight_hh`` ``[gates * H, H]`` and (with
``bias``) ``bias_ih``, ``bias_hh`` ``[gates * H]``, initialised U(-1/sqrt(H), 1/sqrt(H)) like
PyTorch, so PyTorch state dicts load unchanged. Inputs are ``(B, in)`` or unbatched ``(in,)``;
a missing state starts at zeros.
"""

from __future__ import annotations

import math

from ..._core.device import Device
from ..._core.tensor import Tensor
from ...dtype import DType, float32
from ...errors import ShapeError
from .. import functional as F
from .. import init
from ..module import Module
from ..param import Param


class _Cell(Module):
    """Parameters and input checks shared by the cells."""

    gates = 1

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__()
        self.input_size, self.hidden_size, self.has_bias = input_size, hidden_size, bias
        bound = 1.0 / math.sqrt(hidden_size)
        g = self.gates * hidden_size
        shapes: list[tuple[str, tuple[int, ...]]] = [
            ("weight_ih", (g, input_size)),
            ("weight_hh", (g, hidden_size)),
        ]
        if bias:
            shapes += [("bias_ih", (g,)), ("bias_hh", (g,))]
        for name, shape in shapes:
            setattr(
                self, name, Param(init.uniform(shape, -bound, bound, device=device, dtype=dtype))
            )

    def _projections(self, x: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        """``(W_ih x + b_ih, W_hh h + b_hh)``, each ``(B, gates * H)``."""
        d = self.__dict__
        b_ih = d["bias_ih"].val() if self.has_bias else None
        b_hh = d["bias_hh"].val() if self.has_bias else None
        return F.linear(x, d["weight_ih"].val(), b_ih), F.linear(h, d["weight_hh"].val(), b_hh)

    def _batched(self, x: Tensor) -> tuple[Tensor, bool]:
        """``x`` as ``(B, in)`` and whether it came unbatched."""
        if x.ndim not in (1, 2) or x.shape[-1] != self.input_size:
            raise ShapeError(
                f"{type(self).__name__}: expected an input (B, {self.input_size}) or "
                f"({self.input_size},), got shape {x.shape}. Hint: a sequence (T, B, in) "
                "goes to the matching multi-step layer (LSTM, GRU, RNN)."
            )
        return (x.unsqueeze_dim(0), True) if x.ndim == 1 else (x, False)

    def _state(self, s: Tensor | None, x: Tensor, unbatched: bool, what: str) -> Tensor:
        """The state ``s`` as ``(B, H)``; zeros when ``None``."""
        want = (x.shape[0], self.hidden_size)
        if s is None:
            return Tensor.zeros(want, device=x.device, dtype=x.dtype)
        s = s.unsqueeze_dim(0) if unbatched and s.ndim == 1 else s
        if tuple(s.shape) != want:
            raise ShapeError(
                f"{type(self).__name__}: expected {what} of shape {want} for this input, got "
                f"{s.shape}. Hint: states are (B, hidden_size), or (hidden_size,) unbatched."
            )
        return s

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, bias={self.has_bias}"


class LSTMCell(_Cell):
    """One LSTM step, gates ``i, f, g, o``: ``(x, (h, c)) -> (h', c')``, each ``(B, H)``.

    Example:
        >>> h, c = LSTMCell(3, 5)(Tensor.ones((2, 3)))
        >>> h.shape, c.shape
        ((2, 5), (2, 5))
    """

    gates = 4

    def forward(
        self, x: Tensor, state: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, Tensor]:
        x, unbatched = self._batched(x)
        h = self._state(None if state is None else state[0], x, unbatched, "h")
        c = self._state(None if state is None else state[1], x, unbatched, "c")
        xw, hw = self._projections(x, h)
        z = xw + hw
        hid = self.hidden_size
        gi, gf = F.sigmoid(z[:, :hid]), F.sigmoid(z[:, hid : 2 * hid])
        gg, go = z[:, 2 * hid : 3 * hid].tanh(), F.sigmoid(z[:, 3 * hid :])
        c = gf * c + gi * gg
        h = go * c.tanh()
        return (h.squeeze_dim(0), c.squeeze_dim(0)) if unbatched else (h, c)


class GRUCell(_Cell):
    """One GRU step, gates ``r, z, n``: ``(x, h) -> h'`` ``(B, H)``, with
    ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))`` and ``h' = (1 - z) * n + z * h``."""

    gates = 3

    def forward(self, x: Tensor, state: Tensor | None = None) -> Tensor:
        x, unbatched = self._batched(x)
        h = self._state(state, x, unbatched, "h")
        xw, hw = self._projections(x, h)
        hid = self.hidden_size
        r = F.sigmoid(xw[:, :hid] + hw[:, :hid])
        z = F.sigmoid(xw[:, hid : 2 * hid] + hw[:, hid : 2 * hid])
        n = (xw[:, 2 * hid :] + r * hw[:, 2 * hid :]).tanh()
        h = n + z * (h - n)
        return h.squeeze_dim(0) if unbatched else h


class RNNCell(_Cell):
    """One Elman step: ``h' = act(W_ih x + b_ih + W_hh h + b_hh)``, ``act`` tanh or relu."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ShapeError(
                f"RNNCell: expected nonlinearity 'tanh' or 'relu', got {nonlinearity!r}. "
                "Hint: other activations need a custom cell."
            )
        super().__init__(input_size, hidden_size, bias, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, x: Tensor, state: Tensor | None = None) -> Tensor:
        x, unbatched = self._batched(x)
        h = self._state(state, x, unbatched, "h")
        xw, hw = self._projections(x, h)
        z = xw + hw
        h = z.tanh() if self.nonlinearity == "tanh" else F.relu(z)
        return h.squeeze_dim(0) if unbatched else h
