"""Torch kernels of the neural-network rows, one module per family, mirroring the NumPy ones.

Each forward calls PyTorch's fused ATen kernel (cuDNN convolution, fused layer norm, softmax,
cross entropy, flash / memory-efficient attention on CUDA) and each ``*_backward`` calls the
matching ATen backward kernel directly, so torch's autograd is never involved. The ``TorchBackend``
methods in its "nn kernels" section call these functions: ``activations``, ``softmax`` (softmax,
log-softmax, cross-entropy, nll), ``bce``, ``norm``, ``attention``, ``conv``, ``pooling`` and
``embedding``; ``stats`` holds the statistics a forward remembers for its backward.
"""
