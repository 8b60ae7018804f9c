"""Recurrent layers: LSTM, GRU and RNN with PyTorch's parameter names, gate order and init.

Each layer and direction runs as one whole-sequence row (``lstm_seq``, ``gru_seq``, ``rnn_seq``
in ``ember/ops/``): one GEMM for the input projection of every step, then the recurrence in one
row call forward and backward. Where the backend runs a whole layer in one library call (cuDNN
on CUDA), an LSTM layer is one ``lstm_layer`` row instead (``ember/ops/lstm_layer.py``), a GRU or
Elman layer one ``recurrent_layer`` row (``ember/ops/recurrent_layer.py``).
"""

from __future__ import annotations

import math

from ..._core.device import Device
from ..._core.dispatch import apply
from ..._core.tensor import Tensor
from ...dtype import DType, float32
from ...errors import DTypeError, ShapeError
from ...ops.registry import OPS
from .. import functional as F
from .. import init
from ..module import Module
from ..param import Param

State = tuple[Tensor, ...]
_LSTM_SEQ, _GRU_SEQ, _RNN_SEQ = OPS["lstm_seq"], OPS["gru_seq"], OPS["rnn_seq"]
_LSTM_LAYER, _LAYER = OPS["lstm_layer"], OPS["recurrent_layer"]


class _Recurrent(Module):
    """Shared machinery: parameters per layer and direction, the loop over layers, checks."""

    gates = 1

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ShapeError(
                f"{type(self).__name__}: expected dropout in [0, 1), got {dropout}. Hint: it is "
                "the probability of zeroing each output of every layer but the last."
            )
        self.dropout = float(dropout)
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.batch_first, self.has_bias = batch_first, bias
        self.num_directions = 2 if bidirectional else 1
        bound = 1.0 / math.sqrt(hidden_size)
        g = self.gates * hidden_size
        for layer in range(num_layers):
            fan = input_size if layer == 0 else hidden_size * self.num_directions
            for suffix in ("", "_reverse")[: self.num_directions]:
                for name, shape in (
                    (f"weight_ih_l{layer}{suffix}", (g, fan)),
                    (f"weight_hh_l{layer}{suffix}", (g, hidden_size)),
                    (f"bias_ih_l{layer}{suffix}", (g,)),
                    (f"bias_hh_l{layer}{suffix}", (g,)),
                ):
                    if name.startswith("bias") and not bias:
                        continue
                    t = init.uniform(shape, -bound, bound, device=device, dtype=dtype)
                    setattr(self, name, Param(t))

    def _weights(self, layer: int, direction: int) -> tuple[Tensor, ...]:
        d = self.__dict__
        s = f"l{layer}{'_reverse' if direction else ''}"
        w_ih, w_hh = d[f"weight_ih_{s}"].val(), d[f"weight_hh_{s}"].val()
        if not self.has_bias:
            return w_ih, w_hh
        return w_ih, w_hh, d[f"bias_ih_{s}"].val(), d[f"bias_hh_{s}"].val()

    def _layer(self, x: Tensor, layer: int, direction: int, state: State) -> tuple[Tensor, State]:
        """One layer and direction over the sequence: ``(T, B, H)`` outputs, final state."""
        raise NotImplementedError(f"{type(self).__name__}._layer: subclasses run their row.")

    def _layer_row(
        self, x: Tensor, layer: int, direction: int, state: State, mode: str
    ) -> tuple[Tensor, State]:
        """A GRU / Elman layer as one ``recurrent_layer`` row of cell ``mode``: the backend runs
        it in one library call."""
        w = self._weights(layer, direction)
        if len(w) == 2:  # no bias: 0-d placeholders
            none = Tensor.zeros((), device=x.device, dtype=x.dtype)
            w = (*w, none, none)
        y = apply(_LAYER, (x, *w, state[0]), {"mode": mode, "reverse": bool(direction)})
        return y, (y[0 if direction else x.shape[0] - 1],)

    def _projected(
        self, x: Tensor, layer: int, direction: int, fold_bias: bool
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """``(xw, w_hh, b_hh)``: ``xw = x W_ih^T + b_ih`` ``(T, B, gates * H)`` for all steps in
        one GEMM, ``b_hh`` added into it (and returned as None) when ``fold_bias``."""
        w = self._weights(layer, direction)
        b_ih, b_hh = (w[2], w[3]) if len(w) == 4 else (None, None)
        if fold_bias and b_ih is not None and b_hh is not None:
            b_ih, b_hh = b_ih + b_hh, None
        return F.linear(x, w[0], b_ih), w[1], b_hh

    def _run(self, x: Tensor, init_state: State | None, num_states: int) -> tuple[Tensor, State]:
        if x.ndim != 3 or x.shape[-1] != self.input_size:
            raise ShapeError(
                f"{type(self).__name__}: expected an input (T, B, {self.input_size}) (or (B, T, "
                f"{self.input_size}) with batch_first), got shape {x.shape}."
            )
        if self.batch_first:
            x = x.swap_dims(0, 1)  # (B, T, C) -> (T, B, C)
        batch = x.shape[1]
        nd = self.num_directions
        shape = (self.num_layers * nd, batch, self.hidden_size)
        if init_state is None:
            zeros = Tensor.zeros(shape, device=x.device, dtype=x.dtype)
            init_state = (zeros,) * num_states
        dt = self._weights(0, 0)[0].dtype
        for s in (x, *init_state):
            if s.dtype != dt:
                raise DTypeError(
                    f"{type(self).__name__}: expected the input and initial states in the "
                    f"parameters' dtype {dt.name}, got {s.dtype.name}. Hint: x.cast(em.{dt.name}), "
                    "or build the layer with dtype=; like torch.nn's recurrent layers, one dtype."
                )
        for s in init_state:
            if tuple(s.shape) != shape:
                raise ShapeError(
                    f"{type(self).__name__}: expected initial states of shape (num_layers * "
                    f"directions, B, hidden_size) = {shape}, got {s.shape}. Hint: states are "
                    "batch-second even with batch_first, as in PyTorch."
                )
        finals: list[list[Tensor]] = [[] for _ in range(num_states)]
        layer_in = x
        for layer in range(self.num_layers):
            if layer and self.dropout and self.training:
                layer_in = F.dropout(layer_in, self.dropout)
            outs = []
            for direction in range(nd):
                state = tuple(s[layer * nd + direction] for s in init_state)
                y, state = self._layer(layer_in, layer, direction, state)
                for f, s in zip(finals, state):
                    f.append(s)
                outs.append(y)
            layer_in = outs[0] if nd == 1 else Tensor.cat(outs, -1)  # (T, B, nd * H)
        out = layer_in.swap_dims(0, 1) if self.batch_first else layer_in
        return out, tuple(Tensor.stack(f, 0) for f in finals)

    def extra_repr(self) -> str:
        return (
            f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, "
            f"bidirectional={self.num_directions == 2}"
            + (f", dropout={self.dropout}" if self.dropout else "")
        )


class LSTM(_Recurrent):
    """Long short-term memory, gates ``i, f, g, o`` stacked in ``weight_ih_l{k}`` ``[4H, in]``.

    ``LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, *, device=None, dtype=float32)``, PyTorch's positional order.
    Returns ``(output, (h_n, c_n))`` like ``torch.nn.LSTM``; ``bidirectional`` adds
    ``*_reverse`` parameters and concatenates both directions' outputs; ``dropout`` zeroes the
    inputs of every layer but the first while training.

    Shapes: input ``(T, B, in)`` (``(B, T, in)`` with ``batch_first``) -> output
    ``(T, B, D * H)``; ``h_n``, ``c_n``: ``(num_layers * D, B, H)`` with D directions.

    Example:
        >>> out, (h, c) = LSTM(3, 5, num_layers=2)(Tensor.ones((7, 2, 3)))
        >>> out.shape, h.shape
        ((7, 2, 5), (2, 2, 5))
    """

    gates = 4

    def _layer(self, x: Tensor, layer: int, direction: int, state: State) -> tuple[Tensor, State]:
        if x._hardware.b.lstm_layer_takes(x._raw):
            return self._fused_layer(x, layer, direction, state)
        xw, w_hh, _ = self._projected(x, layer, direction, fold_bias=True)
        y = apply(_LSTM_SEQ, (xw, w_hh, state[0], state[1]), {"reverse": bool(direction)})
        hid = self.hidden_size
        last = 0 if direction else x.shape[0] - 1
        return y[:, :, :hid], (y[last, :, :hid], y[last, :, hid:])

    def _fused_layer(
        self, x: Tensor, layer: int, direction: int, state: State
    ) -> tuple[Tensor, State]:
        """The layer as one ``lstm_layer`` row: the backend runs it in one library call."""
        w = self._weights(layer, direction)
        if len(w) == 2:  # no bias: 0-d placeholders
            none = Tensor.zeros((), device=x.device, dtype=x.dtype)
            w = (*w, none, none)
        y = apply(_LSTM_LAYER, (x, *w, *state), {"reverse": bool(direction)})
        steps = x.shape[0]
        return y[:steps], (y[0 if direction else steps - 1], y[steps])

    def forward(
        self, x: Tensor, state: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        out, (h, c) = self._run(x, state, 2)
        return out, (h, c)


class GRU(_Recurrent):
    """Gated recurrent unit, gates ``r, z, n`` stacked in ``weight_ih_l{k}`` ``[3H, in]``.

    ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``, ``h' = (1 - z) * n + z * h``.
    Arguments as ``LSTM``'s; returns ``(output, h_n)`` like ``torch.nn.GRU``, shapes as for
    ``LSTM``.
    """

    gates = 3

    def _layer(self, x: Tensor, layer: int, direction: int, state: State) -> tuple[Tensor, State]:
        if x._hardware.b.recurrent_layer_takes(x._raw, "gru"):
            return self._layer_row(x, layer, direction, state, "gru")
        # b_hh stays out of xw: the reset gate scales b_hn
        xw, w_hh, b_hh = self._projected(x, layer, direction, fold_bias=False)
        if b_hh is None:
            b_hh = Tensor.zeros((), device=x.device, dtype=x.dtype)  # the row's "no bias"
        y = apply(_GRU_SEQ, (xw, w_hh, b_hh, state[0]), {"reverse": bool(direction)})
        return y, (y[0 if direction else x.shape[0] - 1],)

    def forward(self, x: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        out, (h,) = self._run(x, None if state is None else (state,), 1)
        return out, h


class RNN(_Recurrent):
    """Elman recurrent layer: ``h' = act(W_ih x + b_ih + W_hh h + b_hh)``, ``act`` tanh or relu.

    ``RNN(input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, ...)`` as
    ``torch.nn.RNN``. Returns ``(output, h_n)``; parameters, shapes and ``dropout`` as for
    ``LSTM`` (one gate: ``weight_ih_l{k}`` ``[H, in]``).
    """

    gates = 1

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        *,
        device: Device | None = None,
        dtype: DType = float32,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ShapeError(
                f"RNN: expected nonlinearity 'tanh' or 'relu', got {nonlinearity!r}. Hint: "
                "other activations need a custom cell."
            )
        super().__init__(
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            device=device,
            dtype=dtype,
        )
        self.nonlinearity = nonlinearity

    def _layer(self, x: Tensor, layer: int, direction: int, state: State) -> tuple[Tensor, State]:
        mode = f"rnn_{self.nonlinearity}"
        if x._hardware.b.recurrent_layer_takes(x._raw, mode):
            return self._layer_row(x, layer, direction, state, mode)
        xw, w_hh, _ = self._projected(x, layer, direction, fold_bias=True)
        attrs = {"reverse": bool(direction), "nonlinearity": self.nonlinearity}
        y = apply(_RNN_SEQ, (xw, w_hh, state[0]), attrs)
        return y, (y[0 if direction else x.shape[0] - 1],)

    def forward(self, x: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        out, (h,) = self._run(x, None if state is None else (state,), 1)
        return out, h
