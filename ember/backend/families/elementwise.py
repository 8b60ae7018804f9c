"""Elementwise kernels: unary math, binary arithmetic and comparisons, Python-scalar forms.

Binary kernels broadcast like NumPy. A ``*_scalar`` kernel takes a Python scalar (or one
``scalar`` made) that never changes ``x``'s dtype.
"""

from __future__ import annotations

import abc

from .types import Raw


class ElementwiseOps(abc.ABC):
    """Kernels applied value by value; results keep the input shape (or the broadcast one)."""

    @abc.abstractmethod
    def neg(self, x: Raw) -> Raw:
        """-x."""

    @abc.abstractmethod
    def exp(self, x: Raw) -> Raw:
        """e**x."""

    @abc.abstractmethod
    def log(self, x: Raw) -> Raw:
        """Natural logarithm."""

    @abc.abstractmethod
    def log1p(self, x: Raw) -> Raw:
        """log(1 + x), exact near 0."""

    @abc.abstractmethod
    def sqrt(self, x: Raw) -> Raw:
        """Square root."""

    @abc.abstractmethod
    def sin(self, x: Raw) -> Raw:
        """Sine."""

    @abc.abstractmethod
    def cos(self, x: Raw) -> Raw:
        """Cosine."""

    @abc.abstractmethod
    def tanh(self, x: Raw) -> Raw:
        """Hyperbolic tangent."""

    @abc.abstractmethod
    def abs(self, x: Raw) -> Raw:
        """|x|."""

    @abc.abstractmethod
    def sign(self, x: Raw) -> Raw:
        """-1, 0 or 1 (0 for 0)."""

    @abc.abstractmethod
    def erf(self, x: Raw) -> Raw:
        """The error function."""

    @abc.abstractmethod
    def recip(self, x: Raw) -> Raw:
        """1 / x."""

    @abc.abstractmethod
    def logical_not(self, x: Raw) -> Raw:
        """not x, elementwise."""

    @abc.abstractmethod
    def floor(self, x: Raw) -> Raw:
        """Round down."""

    @abc.abstractmethod
    def ceil(self, x: Raw) -> Raw:
        """Round up."""

    @abc.abstractmethod
    def round(self, x: Raw) -> Raw:
        """Round half to even, like PyTorch and Burn."""

    @abc.abstractmethod
    def add(self, x: Raw, y: Raw) -> Raw:
        """x + y, broadcasting."""

    @abc.abstractmethod
    def sub(self, x: Raw, y: Raw) -> Raw:
        """x - y."""

    @abc.abstractmethod
    def mul(self, x: Raw, y: Raw) -> Raw:
        """x * y."""

    @abc.abstractmethod
    def div(self, x: Raw, y: Raw) -> Raw:
        """x / y (true division)."""

    @abc.abstractmethod
    def floor_divide(self, x: Raw, y: Raw) -> Raw:
        """floor(x / y) in x's (promoted) dtype, as Python's ``//`` (exact for ints)."""

    @abc.abstractmethod
    def remainder(self, x: Raw, y: Raw) -> Raw:
        """x - floor_divide(x, y) * y: the sign of y, as Python's ``%``."""

    @abc.abstractmethod
    def powf(self, x: Raw, y: Raw) -> Raw:
        """x ** y."""

    @abc.abstractmethod
    def equal(self, x: Raw, y: Raw) -> Raw:
        """x == y, as bool."""

    @abc.abstractmethod
    def not_equal(self, x: Raw, y: Raw) -> Raw:
        """x != y, as bool."""

    @abc.abstractmethod
    def greater(self, x: Raw, y: Raw) -> Raw:
        """x > y, as bool."""

    @abc.abstractmethod
    def greater_equal(self, x: Raw, y: Raw) -> Raw:
        """x >= y, as bool."""

    @abc.abstractmethod
    def lower(self, x: Raw, y: Raw) -> Raw:
        """x < y, as bool."""

    @abc.abstractmethod
    def lower_equal(self, x: Raw, y: Raw) -> Raw:
        """x <= y, as bool."""

    @abc.abstractmethod
    def logical_and(self, x: Raw, y: Raw) -> Raw:
        """x and y, elementwise."""

    @abc.abstractmethod
    def logical_or(self, x: Raw, y: Raw) -> Raw:
        """x or y, elementwise."""

    @abc.abstractmethod
    def powf_scalar(self, x: Raw, value: float) -> Raw:
        """x ** value for a float exponent."""

    @abc.abstractmethod
    def powi_scalar(self, x: Raw, value: int) -> Raw:
        """x ** value for an int exponent (a negative one on ints gives float32)."""

    @abc.abstractmethod
    def clamp(self, x: Raw, min: float | None, max: float | None) -> Raw:
        """``x`` limited to [min, max]; ``None`` leaves that side open. Keeps the dtype."""

    @abc.abstractmethod
    def where(self, mask: Raw, x: Raw, y: Raw) -> Raw:
        """``x`` where ``mask`` holds, else ``y``."""

    @abc.abstractmethod
    def add_scalar(self, x: Raw, value: float) -> Raw:
        """x + value."""

    @abc.abstractmethod
    def sub_scalar(self, x: Raw, value: float) -> Raw:
        """x - value."""

    @abc.abstractmethod
    def mul_scalar(self, x: Raw, value: float) -> Raw:
        """x * value."""

    @abc.abstractmethod
    def div_scalar(self, x: Raw, value: float) -> Raw:
        """x / value."""

    @abc.abstractmethod
    def rsub_scalar(self, x: Raw, value: float) -> Raw:
        """value - x."""

    @abc.abstractmethod
    def rdiv_scalar(self, x: Raw, value: float) -> Raw:
        """value / x."""
