"""The hand-written ONNX ModelProto bytes: parsed by ``onnx`` and run by onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from ember.backend.numpy.kernels import onnx_proto
from ember.backend.numpy.kernels.onnx_proto import Node

# Slice -> Transpose -> Conv: int and int-list attributes, a negative int, int64 initializers
NODES = [
    Node("Slice", ["x", "starts", "ends", "axes"], ["xs"]),
    Node("Transpose", ["xs"], ["xt"], {"perm": [1, 0, 2, 3]}),
    Node(
        "Conv",
        ["xt", "w"],
        ["y"],
        {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 0], "group": 1},
    ),
]
INPUTS = {"x": (3, 2, 9, 7), "w": (4, 3, 3, 2)}
OUTPUTS = {"y": (2, 4, 4, 5)}  # x cut to (3, 2, 7, 6), read as (2, 3, 7, 6)
INITS = {"starts": [0, 0], "ends": [-2, 6], "axes": [2, 3]}


def _bytes() -> bytes:
    return onnx_proto.model(NODES, INPUTS, OUTPUTS, initializers=INITS, opsets={"": 17})


def test_parses_as_the_graph_it_describes() -> None:
    onnx = pytest.importorskip("onnx")
    m = onnx.load_from_string(_bytes())
    onnx.checker.check_model(m, full_check=True)  # also infers and checks every shape
    assert m.ir_version == 8
    assert [(o.domain, o.version) for o in m.opset_import] == [("", 17)]
    g = m.graph
    assert [n.op_type for n in g.node] == ["Slice", "Transpose", "Conv"]
    assert list(g.node[0].input) == ["x", "starts", "ends", "axes"]
    conv = {a.name: onnx.helper.get_attribute_value(a) for a in g.node[2].attribute}
    assert conv == {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 0], "group": 1}
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in g.input}
    assert shapes == {k: list(v) for k, v in INPUTS.items()}
    assert [d.dim_value for d in g.output[0].type.tensor_type.shape.dim] == list(OUTPUTS["y"])
    inits = {t.name: onnx.numpy_helper.to_array(t).tolist() for t in g.initializer}
    assert inits == INITS


def test_a_custom_domain_and_a_large_varint() -> None:
    onnx = pytest.importorskip("onnx")
    node = Node("ReorderOutput", ["a"], ["b"], {"channels": 300, "big": [2**40, -1]}, "x.y")
    raw = onnx_proto.model([node], {"a": (1,)}, {"b": (1,)}, opsets={"": 17, "x.y": 1})
    m = onnx.load_from_string(raw)
    assert m.graph.node[0].domain == "x.y"
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in m.graph.node[0].attribute}
    assert attrs == {"channels": 300, "big": [2**40, -1]}
    assert [(o.domain, o.version) for o in m.opset_import] == [("", 17), ("x.y", 1)]


def test_runs_in_onnxruntime() -> None:
    ort = pytest.importorskip("onnxruntime")
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.standard_normal(INPUTS["x"], dtype=np.float32)
    w = rng.standard_normal(INPUTS["w"], dtype=np.float32)
    session = ort.InferenceSession(_bytes(), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"x": x, "w": w})
    xt = torch.from_numpy(np.ascontiguousarray(x[:, :, :-2, :6].transpose(1, 0, 2, 3)))
    want = torch.nn.functional.conv2d(xt, torch.from_numpy(w), None, (2, 1), (1, 0)).numpy()
    assert y.shape == OUTPUTS["y"]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def _layer_norm(epsilon: float) -> bytes:
    node = Node("LayerNormalization", ["x", "w", "b"], ["y"], {"axis": -1, "epsilon": epsilon})
    inputs = {"x": (2, 4), "w": (4,), "b": (4,)}
    return onnx_proto.model([node], inputs, {"y": (2, 4)}, opsets={"": 17})


def test_a_float_attribute_parses() -> None:
    onnx = pytest.importorskip("onnx")
    node = onnx.load_from_string(_layer_norm(0.25)).graph.node[0]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs == {"axis": -1, "epsilon": 0.25}


def test_a_float_attribute_runs() -> None:
    # LayerNormalization's epsilon, kept in float32 as ONNX keeps it
    ort = pytest.importorskip("onnxruntime")
    x = np.array([[1, 2, 3, 4], [0, 0, 0, 8]], np.float32)
    w, b = np.ones(4, np.float32), np.zeros(4, np.float32)
    session = ort.InferenceSession(_layer_norm(0.25), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"x": x, "w": w, "b": b})
    xc = x - x.mean(axis=1, keepdims=True)
    want = xc / np.sqrt((xc * xc).mean(axis=1, keepdims=True) + 0.25)  # 1e-5 would differ
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
