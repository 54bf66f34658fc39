"""Poisson distribution on the counts {0, 1, 2, …}, batched."""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln, xlogy

from ._checks import positive
from .base import Distribution, RngLike, Shape, as_rng, as_shape
from .counts_base import expected_log_factorial_poisson


class Poisson(Distribution):
    r"""Poisson(x | λ) with rate λ > 0, batched over leading axes.

    .. math::

        \log p(x) = x\log\lambda - \lambda - \log x!,\qquad x = 0, 1, 2, \ldots

    Mean and variance λ; entropy H = λ(1 − log λ) + E[log x!] (the last term summed numerically).

    As an observed variable of a factor graph its statistics are u(x) = (x, log x!)
    (``observed_stats``), so a factor's E[log f] needs nothing but its edges.
    """

    event_ndims = (0, 0)  # the statistics (x, log x!) of observed counts
    __slots__ = ("_rate",)

    def __init__(self, rate) -> None:
        self._rate = positive("Poisson", "rate", rate)

    @staticmethod
    def observed_stats(x) -> tuple[np.ndarray, np.ndarray]:
        """(x, log x!) of observed counts."""
        x = np.asarray(x, dtype=float)
        return x, gammaln(x + 1.0)

    @property
    def rate(self) -> np.ndarray:
        """λ."""
        return self._rate

    @property
    def batch_shape(self) -> Shape:
        return self._rate.shape

    @property
    def event_shape(self) -> Shape:
        return ()

    def mean(self) -> np.ndarray:
        """λ."""
        return self._rate

    def var(self) -> np.ndarray:
        """λ."""
        return self._rate

    def logpmf(self, x) -> np.ndarray:
        """x log λ − λ − log x! (−inf off the non-negative integers)."""
        x = np.asarray(x, dtype=float)
        ok = (x >= 0) & (x == np.round(x))
        xs = np.where(ok, x, 0.0)
        return np.where(ok, xlogy(xs, self._rate) - self._rate - gammaln(xs + 1.0), -np.inf)

    logpdf = logpmf

    def pmf(self, x) -> np.ndarray:
        """The probability of x."""
        return np.exp(self.logpmf(x))

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Integer draws of shape ``shape + batch_shape``."""
        return as_rng(rng).poisson(self._rate, size=as_shape(shape) + self.batch_shape)

    def entropy(self) -> np.ndarray:
        """λ(1 − log λ) + E[log x!]."""
        lam = self._rate
        return lam * (1.0 - np.log(lam)) + expected_log_factorial_poisson(lam)

    def __repr__(self) -> str:
        return f"Poisson(batch_shape={self.batch_shape})"
