"""Activations and softmax: each forward with the ``*_backward`` its row's rule calls.

Softmax and log-softmax have no backward here: their rows' rules are written once in
``ember/ops/nn.py``; a backend may supply fused ones (``families/fused.py``).
"""

from __future__ import annotations

import abc

from .types import Raw


class ActivationOps(abc.ABC):
    """Pointwise activations and softmax along a dim; a backward takes ``grad`` and its inputs."""

    @abc.abstractmethod
    def relu(self, x: Raw) -> Raw:
        """max(x, 0)."""

    @abc.abstractmethod
    def relu_backward(self, grad: Raw, out: Raw) -> Raw:
        """``grad`` where ``out > 0``, else 0."""

    @abc.abstractmethod
    def sigmoid(self, x: Raw) -> Raw:
        """1 / (1 + e**-x)."""

    @abc.abstractmethod
    def softplus(self, x: Raw) -> Raw:
        """log(1 + e**x), stable for large |x|."""

    @abc.abstractmethod
    def gelu(self, x: Raw, approximate: str) -> Raw:
        """x Phi(x); ``approximate`` is "none" or "tanh"."""

    @abc.abstractmethod
    def gelu_backward(self, grad: Raw, x: Raw, approximate: str) -> Raw:
        """The gradient of ``gelu`` at ``x``."""

    @abc.abstractmethod
    def silu(self, x: Raw) -> Raw:
        """x sigmoid(x)."""

    @abc.abstractmethod
    def silu_backward(self, grad: Raw, x: Raw) -> Raw:
        """The gradient of ``silu`` at ``x``."""

    @abc.abstractmethod
    def softmax(self, x: Raw, dim: int) -> Raw:
        """exp(x) / sum(exp(x)) along ``dim``, stable."""

    @abc.abstractmethod
    def log_softmax(self, x: Raw, dim: int) -> Raw:
        """x - logsumexp(x) along ``dim``."""
