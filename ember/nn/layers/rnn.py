"""Recurrent layers: LSTM and GRU with PyTorch's parameter names, gate order and init."""

from __future__ import annotations

import math

from ...dtype import DType, float32
from ...errors import ShapeError
from ...tensor.device import Device
from ...tensor.tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..param import Param


class _Recurrent(Module):
    gates = 1

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int,
        bias: bool,
        batch_first: bool,
        device: Device | None,
        dtype: DType,
    ) -> None:
        super().__init__()
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.batch_first, self.has_bias = batch_first, bias
        bound = 1.0 / math.sqrt(hidden_size)
        g = self.gates * hidden_size
        for layer in range(num_layers):
            fan = input_size if layer == 0 else hidden_size
            for name, shape in (
                (f"weight_ih_l{layer}", (g, fan)),
                (f"weight_hh_l{layer}", (g, hidden_size)),
                (f"bias_ih_l{layer}", (g,)),
                (f"bias_hh_l{layer}", (g,)),
            ):
                if name.startswith("bias") and not bias:
                    continue
                t = init.uniform(shape, -bound, bound, device=device, dtype=dtype)
                setattr(self, name, Param(t))

    def _layer(self, i: int) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
        d = self.__dict__
        w_ih, w_hh = d[f"weight_ih_l{i}"].val(), d[f"weight_hh_l{i}"].val()
        if not self.has_bias:
            return w_ih, w_hh, None, None
        return w_ih, w_hh, d[f"bias_ih_l{i}"].val(), d[f"bias_hh_l{i}"].val()

    def _check(self, x: Tensor) -> tuple[Tensor, int]:
        if x.ndim != 3 or x.shape[-1] != self.input_size:
            raise ShapeError(
                f"{type(self).__name__}: expected an input (T, B, {self.input_size}) (or (B, T, "
                f"{self.input_size}) with batch_first), got shape {x.shape}."
            )
        if self.batch_first:
            x = x.swap_dims(0, 1)  # (B, T, C) -> (T, B, C)
        return x, x.shape[1]

    def _zeros(self, x: Tensor, batch: int) -> Tensor:
        return Tensor.zeros(
            (self.num_layers, batch, self.hidden_size), device=x.device, dtype=x.dtype
        )

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}"


class LSTM(_Recurrent):
    """Long short-term memory, gates ``i, f, g, o`` stacked in ``weight_ih_l{k}`` ``[4H, in]``.

    Returns ``(output, (h_n, c_n))`` like ``torch.nn.LSTM`` (one direction).

    Shapes: input ``(T, B, in)`` (``(B, T, in)`` with ``batch_first``) -> output
    ``(T, B, H)``; ``h_n``, ``c_n``: ``(num_layers, B, H)``.
    """

    gates = 4

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, device, dtype)

    def forward(
        self, x: Tensor, state: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        x, batch = self._check(x)
        h0, c0 = (self._zeros(x, batch), self._zeros(x, batch)) if state is None else state
        hid = self.hidden_size
        hs, cs = [], []
        layer_in = x
        for i in range(self.num_layers):
            w_ih, w_hh, b_ih, b_hh = self._layer(i)
            xw = F.linear(layer_in, w_ih, b_ih)  # (T, B, 4H), all steps at once
            w_hh_t = w_hh.transpose()
            h, c = h0[i], c0[i]
            ys = []
            for t in range(x.shape[0]):
                z = xw[t] + h @ w_hh_t
                if b_hh is not None:
                    z = z + b_hh
                gi = F.sigmoid(z[:, :hid])
                gf = F.sigmoid(z[:, hid : 2 * hid])
                gg = z[:, 2 * hid : 3 * hid].tanh()
                go = F.sigmoid(z[:, 3 * hid :])
                c = gf * c + gi * gg
                h = go * c.tanh()
                ys.append(h)
            hs.append(h)
            cs.append(c)
            layer_in = Tensor.stack(ys, 0)
        out = layer_in.swap_dims(0, 1) if self.batch_first else layer_in
        return out, (Tensor.stack(hs, 0), Tensor.stack(cs, 0))


class GRU(_Recurrent):
    """Gated recurrent unit, gates ``r, z, n`` stacked in ``weight_ih_l{k}`` ``[3H, in]``.

    ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``, ``h' = (1 - z) * n + z * h``.
    Returns ``(output, h_n)`` like ``torch.nn.GRU`` (one direction).
    """

    gates = 3

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, device, dtype)

    def forward(self, x: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        x, batch = self._check(x)
        h0 = self._zeros(x, batch) if state is None else state
        hid = self.hidden_size
        hs = []
        layer_in = x
        for i in range(self.num_layers):
            w_ih, w_hh, b_ih, b_hh = self._layer(i)
            xw = F.linear(layer_in, w_ih, b_ih)  # (T, B, 3H)
            w_hh_t = w_hh.transpose()
            h = h0[i]
            ys = []
            for t in range(x.shape[0]):
                a = xw[t]
                hw = h @ w_hh_t
                if b_hh is not None:
                    hw = hw + b_hh
                r = F.sigmoid(a[:, :hid] + hw[:, :hid])
                z = F.sigmoid(a[:, hid : 2 * hid] + hw[:, hid : 2 * hid])
                n = (a[:, 2 * hid :] + r * hw[:, 2 * hid :]).tanh()
                h = n + z * (h - n)
                ys.append(h)
            hs.append(h)
            layer_in = Tensor.stack(ys, 0)
        out = layer_in.swap_dims(0, 1) if self.batch_first else layer_in
        return out, Tensor.stack(hs, 0)
