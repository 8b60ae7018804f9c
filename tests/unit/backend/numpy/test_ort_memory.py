"""The ONNX Runtime routes a transformer takes on the NumPy backend (matrix products, layer norm,
GELU) return NumPy's memory: ``tracemalloc`` (ember's memory tests, the checkpointing benches'
NumPy peaks, a user's profile) counts their outputs. ORT's ``session.run`` returns arrays in
ORT's own memory, which it does not see; the convolution and pooling routes keep that
(``ort_conv._run``: binding their outputs cost them 1-6% a run)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import numpy as np
import pytest

from ember.backend.numpy.kernels import ort_gelu, ort_gemm, ort_norm

pytest.importorskip("onnxruntime")

_rng = np.random.default_rng(0)
X = _rng.standard_normal((16, 16, 12, 12), dtype=np.float32)
G = _rng.standard_normal((16, 16, 12, 12), dtype=np.float32)
A = _rng.standard_normal((512, 256), dtype=np.float32)
ONES, ZEROS = np.ones(144, np.float32), np.zeros(144, np.float32)

ROUTES: dict[str, Callable[[], object]] = {
    "gelu": lambda: ort_gelu.gelu(X),
    "gelu_backward": lambda: ort_gelu.gelu_backward(G, X),
    "matmul": lambda: ort_gemm.matmul(A, A.T),
    "layer_norm": lambda: ort_norm.layer_norm(X.reshape(-1, 144), ONES, ZEROS, 1e-5),
}


@pytest.mark.parametrize("name", ROUTES)
def test_outputs_are_numpys_memory(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMBER_CONV", raising=False)
    run = ROUTES[name]
    assert run() is not None  # the route runs here (and its session is built, untraced)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out = run()
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    arrays = out if isinstance(out, tuple) else (out,)
    assert all(isinstance(a, np.ndarray) for a in arrays)
    assert held >= sum(a.nbytes for a in arrays if isinstance(a, np.ndarray))
