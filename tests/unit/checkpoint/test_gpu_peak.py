"""bench/gpu_peak.py's replay of an allocator trace (the CUDA peak's composition), on a
hand-made trace: the largest running total, what is live there, grouped by ember frames."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any


def _module() -> ModuleType:
    path = Path(__file__).resolve().parents[3] / "bench" / "gpu_peak.py"
    spec = importlib.util.spec_from_file_location("_bench_gpu_peak", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def _frames(*names: str) -> list[dict[str, Any]]:
    return [{"filename": f"/site/torch/{n}.py", "line": 1, "name": n} for n in ("inner",)] + [
        {"filename": f"/repo/ember/{n}.py", "line": i + 1, "name": n} for i, n in enumerate(names)
    ]


def _alloc(addr: int, size: int, *names: str) -> dict[str, Any]:
    return {"action": "alloc", "addr": addr, "size": size, "frames": _frames(*names)}


def _free(addr: int, size: int) -> dict[str, Any]:
    return {"action": "free_completed", "addr": addr, "size": size, "frames": []}


def test_the_peak_and_what_is_live_there() -> None:
    gp = _module()
    trace = [
        _free(99, 50),  # a block from before the step: the total starts below zero
        _alloc(1, 100, "ops/linalg", "nn/linear"),
        _alloc(2, 30, "ops/linalg", "nn/linear"),
        {"action": "free_requested", "addr": 2, "size": 30, "frames": []},  # not yet freed
        _alloc(3, 40, "backend/sum"),
        _free(3, 40),
        _alloc(4, 60, "backend/cast"),  # the peak: -50 + 100 + 30 + 60 = 140
        _free(1, 100),
        _alloc(5, 70, "backend/cast"),
    ]
    peak = gp.find_peak(trace, depth=2)
    assert (peak.bytes, peak.index) == (140, 6)
    assert peak.groups == {
        "ops/linalg.py:1:ops/linalg <- nn/linear.py:2:nn/linear": [100, 30],
        "backend/cast.py:1:backend/cast": [60],
    }
    lines = gp.report(peak, "s", base=10**9, top=1)
    assert lines[0].startswith("== s: peak 1.000 GB = base 1.000 GB") and len(lines) == 2
    assert "   2x  ops/linalg.py" in lines[1]  # the largest group only
