"""Point mass δ(x − x₀): an observed or clamped value, batched.  Not an exponential-family member."""

from __future__ import annotations

import numpy as np

from ._checks import as_array
from .base import Distribution, ExponentialFamily, Nat, RngLike, Shape, as_shape, describe


class PointMass(Distribution):
    r"""The point mass q(x) = δ(x − x₀) at a fixed value x₀ (batched).

    Used for observed or clamped variables.  It is not a member of an exponential family and has no
    message algebra; under it, the expectation of any statistic is its value at x₀,
    E[u(x)] = u(x₀) (``expected_stats(family)``).

    - ``mean()`` = x₀, ``var()`` = 0 (``cov()`` = 0 for vectors), ``sample`` repeats x₀;
    - ``entropy()`` = 0, the entropy in the *discrete* sense (a deterministic value carries no
      uncertainty; the differential entropy would be −∞).  This is what the evidence needs: an
      observed variable contributes no entropy term;
    - ``logpdf(x)`` = 0 where x = x₀ (all event entries equal) and −inf elsewhere, i.e. the log
      mass with respect to counting measure.

    Parameters
    ----------
    value : array_like
        x₀ (finite), shape ``batch_shape + event_shape``.
    event_ndims : int, default 0
        How many trailing axes of ``value`` are event axes (1 for a vector variable).
    """

    __slots__ = ("_value", "_event_ndims")

    def __init__(self, value, event_ndims: int = 0) -> None:
        v = as_array("PointMass", "value", value)
        if not 0 <= event_ndims <= v.ndim:
            raise ValueError(f"PointMass: event_ndims must lie in [0, {v.ndim}] for a value of shape "
                             f"{v.shape}, got {event_ndims!r}")
        self._value = v
        self._event_ndims = int(event_ndims)

    @property
    def value(self) -> np.ndarray:
        """The location x₀."""
        return self._value

    @property
    def batch_shape(self) -> Shape:
        return self._value.shape[: self._value.ndim - self._event_ndims]

    @property
    def event_shape(self) -> Shape:
        return self._value.shape[self._value.ndim - self._event_ndims:]

    def __getitem__(self, index):
        idx = index if isinstance(index, tuple) else (index,)
        return PointMass(self._value[idx], self._event_ndims)

    def mean(self) -> np.ndarray:
        """x₀."""
        return self._value

    def var(self) -> np.ndarray:
        """0 (shape of x₀)."""
        return np.zeros_like(self._value)

    def cov(self) -> np.ndarray:
        """0, shape ``batch_shape + (D, D)`` (vector point masses only)."""
        if self._event_ndims != 1:
            raise ValueError("PointMass.cov is defined for event_ndims == 1")
        return np.zeros(self._value.shape + self._value.shape[-1:])

    def is_proper(self) -> np.ndarray:
        """Always True."""
        return np.ones(self.batch_shape, dtype=bool)

    def entropy(self) -> np.ndarray:
        """0 (discrete sense), batch-shaped."""
        return np.zeros(self.batch_shape)

    def logpdf(self, x) -> np.ndarray:
        """0 where x equals x₀ over the event axes, −inf elsewhere."""
        eq = np.asarray(x, dtype=float) == self._value
        if self._event_ndims:
            eq = eq.all(axis=tuple(range(-self._event_ndims, 0)))
        return np.where(eq, 0.0, -np.inf)

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """x₀ repeated, shape ``shape + batch_shape + event_shape`` (``rng`` is not used)."""
        s = as_shape(shape)
        return np.broadcast_to(self._value, s + self._value.shape).copy()

    def expected_stats(self, family: ExponentialFamily) -> Nat:
        """E[u(x)] = u(x₀) in the sufficient statistics of ``family`` (an instance)."""
        return family.sufficient_stats(self._value)

    def __repr__(self) -> str:
        return describe(self, ("value",))
