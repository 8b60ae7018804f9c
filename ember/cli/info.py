"""``ember info``: version, installed backends, visible devices and where data is cached."""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import platform
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("info", help="show version, backends and devices")
    p.set_defaults(run=run, parser=p)


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def collect() -> dict[str, Any]:
    """What ``ember info`` prints, as a dict."""
    import numpy as np

    import ember as em

    from ..data.download import cache_dir

    backends = {"numpy": f"available (NumPy {np.__version__})"}
    devices = ["cpu"]
    try:
        found = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # a broken or blocked installation
        found = False
    if not found:
        backends["torch"] = "not installed (pip install 'ember[torch]')"
    else:
        try:
            em.Device.torch("cpu")
            import torch

            backends["torch"] = f"available (PyTorch {torch.__version__})"
            devices.append("torch:cpu")
            for i in range(torch.cuda.device_count()):
                devices.append(f"cuda:{i} ({torch.cuda.get_device_name(i)})")
        except em.DeviceError as e:
            backends["torch"] = f"unavailable: {e}"
    return {
        "ember": em.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "backends": backends,
        "devices": devices,
        "default_device": str(em.default_device()),
        "data_cache": str(cache_dir()),
        "matplotlib": _version("matplotlib") or "not installed (training curves are skipped)",
    }


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    info = collect()
    print(f"ember {info['ember']}  (Python {info['python']}, {info['platform']})")
    print("backends:")
    for name, state in info["backends"].items():
        print(f"  {name:6s} {state}")
    print("devices: " + ", ".join(info["devices"]))
    print(f"default device: {info['default_device']}  (set EMBER_DEVICE or --device)")
    print(f"data cache: {info['data_cache']}  (set EMBER_DATA)")
    print(f"matplotlib: {info['matplotlib']}")
    return 0
