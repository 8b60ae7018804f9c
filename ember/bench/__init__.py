"""Benchmark workloads behind ``ember bench``: each module has ``run(device, ...) -> list[dict]``.

``overhead`` (core dispatch and autodiff cost), ``mlp``, ``cnn``, ``gpt`` (model training steps
against PyTorch) and ``checkpointing`` (Balanced vs Disabled). The scripts in ``bench/`` are thin
wrappers around these modules.
"""
