"""NumPy's BLAS threads against ember's kernel pool (ember/backend/numpy/kernels/blas.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from ember.backend.numpy.kernels import blas
from ember.backend.numpy.kernels import threads as pool

pytestmark = pytest.mark.skipif(not blas.threads(), reason="no controllable BLAS library")


def _env(**names: str) -> dict[str, str]:
    """This process's environment without ember's thread settings, plus ``names``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.pop(var, None)
    return {**env, **names}


def test_serial_sets_one_thread_and_restores() -> None:
    before = blas.threads()
    with blas.serial():
        assert blas.threads() == [1] * len(before)
        with blas.serial():  # nested: still one, and the outer block still restores
            assert blas.threads() == [1] * len(before)
        assert blas.threads() == [1] * len(before)
    assert blas.threads() == before


def test_serial_restores_after_an_error() -> None:
    before = blas.threads()
    with pytest.raises(RuntimeError), blas.serial():
        raise RuntimeError("inside")
    assert blas.threads() == before


def test_split_work_runs_blas_serially(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", "2")
    before = blas.threads()
    seen: list[list[int]] = []
    lock = threading.Lock()

    def fn(lo: int, hi: int) -> None:
        with lock:
            seen.append(blas.threads())

    pool._parallel_split(4, 1 << 20, fn)  # above _PARALLEL_MIN: two shares on two threads
    assert len(seen) == 2
    assert all(s == [1] * len(before) for s in seen)
    assert blas.threads() == before
    seen.clear()
    pool._parallel_rows(64, 4096, fn)
    assert seen and all(s == [1] * len(before) for s in seen)
    assert blas.threads() == before


def test_conv_backward_two_tasks_restore_blas(monkeypatch: pytest.MonkeyPatch) -> None:
    from ember.backend.numpy.kernels import conv

    monkeypatch.setenv("EMBER_NUM_THREADS", "2")
    monkeypatch.setenv("EMBER_CONV", "numpy")  # ember's two-task path, not the ONNX Runtime one
    before = blas.threads()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 4, 16, 16)).astype(np.float32)
    w = rng.normal(size=(8, 4, 3, 3)).astype(np.float32)
    g = rng.normal(size=(8, 8, 16, 16)).astype(np.float32)
    gx, gw, _ = conv.conv2d_backward(g, x, w, (1, 1), (1, 1), (1, 1), 1, True, True)
    assert gx is not None and gw is not None
    assert blas.threads() == before


def test_env_sets_blas_threads_at_first_use() -> None:
    # a fresh process: EMBER_NUM_THREADS=1 gives the BLAS one thread before any kernel runs
    code = (
        "from ember.backend.numpy.kernels import blas; t = blas.threads(); "
        "assert t and all(n == 1 for n in t), t; print('ok')"
    )
    env = _env(EMBER_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_blas_threads_env_overrides() -> None:
    code = (
        "from ember.backend.numpy.kernels import blas; t = blas.threads(); "
        "assert t and all(n == 1 for n in t), t; print('ok')"
    )
    env = _env(EMBER_NUM_THREADS="2", EMBER_BLAS_THREADS="1")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_split_work_without_blas_leaves_the_blas_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_NUM_THREADS", "2")
    before = blas.threads()
    seen: list[list[int]] = []
    pool._parallel_split(4, 1 << 20, lambda lo, hi: seen.append(blas.threads()), blas=False)
    assert len(seen) == 2 and all(s == before for s in seen)
