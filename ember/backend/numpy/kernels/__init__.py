"""NumPy kernels of the neural-network rows, one module per family.

The ``NumpyBackend`` methods in its "nn kernels" section call these functions: ``activations``,
``softmax`` (softmax, log-softmax, cross-entropy, nll), ``bce``, ``norm``, ``attention``, ``conv``
(on the columns of ``im2col``), ``pooling`` and ``embedding``; ``pool`` holds the thread pool and
row blocking they share.
"""
