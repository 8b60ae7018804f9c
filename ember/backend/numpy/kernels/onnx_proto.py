"""A minimal writer of ONNX ``ModelProto`` bytes, for ``ort_conv.py``'s one-op graphs.

Only the protobuf fields those graphs use: nodes with int / int-list attributes, float32 inputs
and outputs of static shape, int64 initializers, opset imports. The ``onnx`` package is not a
run-time dependency; the tests parse this module's output with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

FLOAT, INT64 = 1, 7  # TensorProto.DataType
_INT, _INTS = 2, 7  # AttributeProto.AttributeType
Attr = int | Sequence[int]


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


def _value_info(name: str, shape: Sequence[int]) -> bytes:
    dims = b"".join(_len(1, _int(1, d)) for d in shape)  # Dimension{dim_value}
    tensor = _int(1, FLOAT) + _len(2, dims)  # TypeProto.Tensor{elem_type, shape}
    return _len(1, name) + _len(2, _len(1, tensor))  # ValueInfoProto{name, TypeProto{tensor}}


def _int64_tensor(name: str, values: Sequence[int]) -> bytes:
    raw = np.asarray(values, dtype="<i8").tobytes()
    return _int(1, len(values)) + _int(2, INT64) + _len(8, name) + _len(9, raw)


def model(
    nodes: Sequence[Node],
    inputs: Mapping[str, Sequence[int]],
    outputs: Mapping[str, Sequence[int]],
    *,
    initializers: Mapping[str, Sequence[int]] | None = None,
    opsets: Mapping[str, int],
) -> bytes:
    """Serialised ``ModelProto`` of one graph.

    Args:
        nodes: The graph's nodes in execution order.
        inputs: Float32 graph inputs, name -> shape.
        outputs: Float32 graph outputs, name -> shape.
        initializers: Constant 1-d int64 tensors, name -> values.
        opsets: Domain ("" for the ONNX one) -> opset version.

    Example:
        >>> conv = Node("Conv", ["x", "w"], ["y"], {"kernel_shape": [1, 1]})
        >>> len(model([conv], {"x": (1, 1, 2, 2), "w": (1, 1, 1, 1)}, {"y": (1, 1, 2, 2)},
        ...           opsets={"": 17})) > 0
        True
    """
    graph = b"".join(_len(1, _node(n, i)) for i, n in enumerate(nodes)) + _len(2, "g")
    graph += b"".join(_len(5, _int64_tensor(k, v)) for k, v in (initializers or {}).items())
    graph += b"".join(_len(11, _value_info(k, s)) for k, s in inputs.items())
    graph += b"".join(_len(12, _value_info(k, s)) for k, s in outputs.items())
    opset = b"".join(_len(8, _len(1, d) + _int(2, v)) for d, v in opsets.items())
    return _int(1, 8) + opset + _len(7, graph)  # ir_version 8: the format of opset 17
