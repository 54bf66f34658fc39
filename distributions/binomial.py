"""Binomial distribution: successes out of n trials, batched."""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln, xlog1py, xlogy

from ._checks import batch_of, in_unit_interval
from .base import Distribution, RngLike, Shape, as_rng, as_shape
from .counts_base import counts, expected_log_factorial_binomial


def log_binom(n: np.ndarray, x: np.ndarray) -> np.ndarray:
    """log C(n, x) = log n! − log x! − log (n − x)!."""
    return gammaln(n + 1.0) - gammaln(x + 1.0) - gammaln(n - x + 1.0)


class Binomial(Distribution):
    r"""Binomial(x | n, p): successes in n independent trials of probability p, batched.

    .. math::

        \log p(x) = \log\binom{n}{x} + x\log p + (n - x)\log(1 - p),\qquad x = 0, \ldots, n

    Mean np, variance np(1 − p); entropy −log n! − n[p log p + (1−p) log(1−p)] + E[log x!] + E[log(n−x)!]
    (the expectations summed exactly over x = 0..n).

    As an observed variable of a factor graph its statistic is u(x) = x (the trials are a parameter of
    the factor).
    """

    event_ndims = (0,)
    __slots__ = ("_n", "_p")

    def __init__(self, trials, probs) -> None:
        n = counts("Binomial", "trials", trials)
        p = in_unit_interval("Binomial", "probs", probs)
        shape = batch_of("Binomial", trials=n.shape, probs=p.shape)
        self._n, self._p = np.broadcast_to(n, shape), np.broadcast_to(p, shape)

    @staticmethod
    def observed_stats(x) -> tuple[np.ndarray]:
        """(x,) of observed counts."""
        return (np.asarray(x, dtype=float),)

    @property
    def trials(self) -> np.ndarray:
        return self._n

    @property
    def probs(self) -> np.ndarray:
        return self._p

    @property
    def batch_shape(self) -> Shape:
        return self._n.shape

    @property
    def event_shape(self) -> Shape:
        return ()

    def mean(self) -> np.ndarray:
        """np."""
        return self._n * self._p

    def var(self) -> np.ndarray:
        """np(1 − p)."""
        return self._n * self._p * (1.0 - self._p)

    def logpmf(self, x) -> np.ndarray:
        """log C(n, x) + x log p + (n − x) log(1 − p) (−inf off 0..n)."""
        x = np.asarray(x, dtype=float)
        n, p = self._n, self._p
        ok = (x >= 0) & (x <= n) & (x == np.round(x))
        xs = np.where(ok, x, 0.0)
        return np.where(ok, log_binom(n, xs) + xlogy(xs, p) + xlog1py(n - xs, -p), -np.inf)

    logpdf = logpmf

    def pmf(self, x) -> np.ndarray:
        """The probability of x."""
        return np.exp(self.logpmf(x))

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Integer draws of shape ``shape + batch_shape``."""
        size = as_shape(shape) + self.batch_shape
        return as_rng(rng).binomial(self._n.astype(np.int64), self._p, size=size)

    def entropy(self) -> np.ndarray:
        """−log n! − n[p log p + (1 − p) log(1 − p)] + E[log x!] + E[log (n − x)!]."""
        n, p = self._n, self._p
        return (-gammaln(n + 1.0) - n * (xlogy(p, p) + xlog1py(1.0 - p, -p))
                + expected_log_factorial_binomial(n, p) + expected_log_factorial_binomial(n, 1.0 - p))

    def __repr__(self) -> str:
        return f"Binomial(batch_shape={self.batch_shape})"
