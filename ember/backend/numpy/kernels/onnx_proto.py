"""A minimal writer of ONNX ``ModelProto`` bytes, for the ``ort_*.py`` kernels' small graphs.

Only the protobuf fields those graphs use: nodes with float / int / int-list attributes,
float32 inputs and outputs (each dimension fixed, or named where it varies between runs),
float32 and int64 initializers, opset imports. The ``onnx`` package is not a run-time
dependency; the tests parse this module's output with it.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

FLOAT, INT64 = 1, 7  # TensorProto.DataType
_DTYPES = {np.dtype(np.float32): FLOAT, np.dtype(np.int64): INT64}
_FLOAT, _INT, _INTS = 1, 2, 7  # AttributeProto.AttributeType
Attr = float | int | Sequence[int]
Dim = int | str  # a fixed size, or the name of a size that varies between runs


class Node(NamedTuple):
    op_type: str
    inputs: Sequence[str]
    outputs: Sequence[str]
    attrs: Mapping[str, Attr] | None = None
    domain: str = ""


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # a negative int64 is written as its 10-byte two's complement
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        if not n:
            out.append(low)
            return bytes(out)
        out.append(low | 0x80)


def _int(field: int, n: int) -> bytes:  # wire type 0
    return _varint(field << 3) + _varint(n)


def _len(field: int, payload: bytes | str) -> bytes:  # wire type 2
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _attribute(name: str, value: Attr) -> bytes:
    if isinstance(value, float):  # field 2 (f) is a fixed32: wire type 5
        return _len(1, name) + _varint(2 << 3 | 5) + struct.pack("<f", value) + _int(20, _FLOAT)
    if isinstance(value, int):
        return _len(1, name) + _int(3, value) + _int(20, _INT)
    return _len(1, name) + b"".join(_int(8, v) for v in value) + _int(20, _INTS)


def _node(node: Node, index: int) -> bytes:
    parts = [_len(1, s) for s in node.inputs] + [_len(2, s) for s in node.outputs]
    parts += [_len(3, f"n{index}"), _len(4, node.op_type)]
    parts += [_len(5, _attribute(k, v)) for k, v in (node.attrs or {}).items()]
    if node.domain:
        parts.append(_len(7, node.domain))
    return b"".join(parts)


def _dim(d: Dim) -> bytes:  # Dimension{dim_value} or Dimension{dim_param}
    return _len(1, _len(2, d) if isinstance(d, str) else _int(1, d))


def _value_info(name: str, shape: Sequence[Dim]) -> bytes:
    dims = b"".join(_dim(d) for d in shape)
    tensor = _int(1, FLOAT) + _len(2, dims)  # TypeProto.Tensor{elem_type, shape}
    return _len(1, name) + _len(2, _len(1, tensor))  # ValueInfoProto{name, TypeProto{tensor}}


def _tensor(name: str, values: Sequence[int] | np.ndarray) -> bytes:
    """TensorProto{dims, data_type, name, raw_data}: an int sequence as 1-d int64, an array in
    its own dtype and shape (float32 or int64)."""
    a = np.asarray(values, dtype=np.int64) if not isinstance(values, np.ndarray) else values
    raw = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
    dims = b"".join(_int(1, d) for d in a.shape)
    return dims + _int(2, _DTYPES[a.dtype]) + _len(8, name) + _len(9, raw)


def model(
    nodes: Sequence[Node],
    inputs: Mapping[str, Sequence[Dim]],
    outputs: Mapping[str, Sequence[Dim]],
    *,
    initializers: Mapping[str, Sequence[int] | np.ndarray] | None = None,
    opsets: Mapping[str, int],
) -> bytes:
    """Serialised ``ModelProto`` of one graph.

    Args:
        nodes: The graph's nodes in execution order.
        inputs: Float32 graph inputs, name -> shape (a str names a size that varies).
        outputs: Float32 graph outputs, name -> shape.
        initializers: Constants, name -> values: an int sequence is a 1-d int64 tensor, an
            array a float32 or int64 tensor of its shape (0-d for a scalar).
        opsets: Domain ("" for the ONNX one) -> opset version.

    Example:
        >>> conv = Node("Conv", ["x", "w"], ["y"], {"kernel_shape": [1, 1]})
        >>> len(model([conv], {"x": (1, 1, 2, 2), "w": (1, 1, 1, 1)}, {"y": (1, 1, 2, 2)},
        ...           opsets={"": 17})) > 0
        True
    """
    graph = b"".join(_len(1, _node(n, i)) for i, n in enumerate(nodes)) + _len(2, "g")
    graph += b"".join(_len(5, _tensor(k, v)) for k, v in (initializers or {}).items())
    graph += b"".join(_len(11, _value_info(k, s)) for k, s in inputs.items())
    graph += b"".join(_len(12, _value_info(k, s)) for k, s in outputs.items())
    opset = b"".join(_len(8, _len(1, d) + _int(2, v)) for d, v in opsets.items())
    return _int(1, 8) + opset + _len(7, graph)  # ir_version 8: the format of opset 17
