"""Benchmark workloads behind ``ember bench``: each module has ``run(device, ...) -> list[dict]``.

``overhead`` (core dispatch and autodiff cost), ``mlp``, ``cnn``, ``gpt`` (model training steps
against PyTorch) and ``checkpointing`` (Balanced vs Disabled). ``bench/overhead.py`` wraps
``overhead``; the other scripts in ``bench/`` are standalone studies (GPU GPT, kernels, the
12-block checkpointing model) with their own command-line options.
"""
