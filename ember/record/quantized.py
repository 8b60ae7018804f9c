"""Quantized weights in module records: int8 values, float32 scales, scheme in the metadata.

A quantized parameter ``name`` is stored as three safetensors entries, ``name`` (int8 values),
``name.__qscale`` (float32 scales, of the values' rank) and, for affine schemes,
``name.__qzero`` (int32 zero points), plus one JSON entry of the ``quantization`` metadata
field: ``{name: {"scheme": QuantScheme.to_json(), "axis": int | null, "float": dtype name}}``.
Loading rebuilds the same ``QuantizedTensor`` bit for bit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._core.qscheme import QuantScheme
from .._core.quantized import QuantizedTensor, from_parts
from .._core.tensor import Tensor
from ..dtype import DTYPES
from .errors import RecordError

META = "quantization"
_SCALE, _ZERO = ".__qscale", ".__qzero"


def split(state: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``state`` with each quantized tensor as its stored parts, and the metadata entry."""
    out: dict[str, Any] = {}
    info: dict[str, Any] = {}
    for name, t in state.items():
        if not isinstance(t, QuantizedTensor):
            out[name] = t
            continue
        out[name] = t._values
        out[name + _SCALE] = t._scales
        if t._zeros is not None:
            out[name + _ZERO] = t._zeros
        info[name] = {"scheme": t.scheme.to_json(), "axis": t.axis, "float": t.float_dtype.name}
    return out, info


def join(
    op: str, where: str, arrays: dict[str, np.ndarray], meta: Mapping[str, str]
) -> tuple[dict[str, np.ndarray], dict[str, QuantizedTensor]]:
    """The plain arrays and the quantized tensors (CPU, plain) a record holds."""
    text = meta.get(META)
    if text is None:
        return arrays, {}
    rest = dict(arrays)
    out: dict[str, QuantizedTensor] = {}
    try:
        info = json.loads(text)
        if not isinstance(info, dict):
            raise ValueError(f"expected a JSON object, got {type(info).__name__}")
        for name, entry in info.items():
            scheme = QuantScheme.from_json(entry["scheme"])
            float_dtype = DTYPES[entry["float"]]
            axis = entry["axis"]
            if axis is not None and type(axis) is not int:
                raise ValueError(f"axis of {name!r} is {axis!r}")
            values = Tensor.from_data(rest.pop(name))
            scales = Tensor.from_data(rest.pop(name + _SCALE))
            zeros = rest.pop(name + _ZERO, None)
            z = None if zeros is None else Tensor.from_data(zeros)
            out[name] = from_parts(values, scales, z, scheme, float_dtype, axis)
    except (ValueError, KeyError, TypeError, ArithmeticError) as e:
        raise RecordError(
            f"{op}: the quantized weights of {where!r} are damaged ({type(e).__name__}: {e}). "
            "Write the record again (ember quantize) or load a backup."
        ) from None
    return rest, out
