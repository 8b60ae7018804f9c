"""Quantization: int8 weights with float32 scales (API.md "Quantization", SEMANTICS.md §11).

- ``em.QuantScheme(dtype=em.int8, mode="symmetric" | "affine", granularity=...)``: how;
- ``t.quantize(scheme)`` -> ``QuantizedTensor``; ``q.dequantize()`` -> float tensor;
- ``em.quantization.quantize(model, scheme, include=(nn.Linear, nn.Embedding))``: a model's
  weights replaced by frozen quantized ones (a quarter of the float32 bytes, per channel);
- ``em.quantization.Observer(kind="minmax" | "percentile")``: calibrated activation ranges, to
  quantize activations for int8 x int8 products.

Example:
    >>> import ember as em
    >>> net = em.nn.Linear(64, 10)
    >>> em.quantization.quantize(net, em.QuantScheme(granularity=("channel", 0)))
    Linear(in_features=64, out_features=10, bias=True)
    >>> net.weight.val().is_quantized()
    True
"""

from .._core.qscheme import QuantScheme as QuantScheme
from .._core.quantized import QuantizedTensor as QuantizedTensor
from .model import quantize as quantize
from .observer import Observer as Observer

__all__ = ["Observer", "QuantScheme", "QuantizedTensor", "quantize"]
