"""Multinomial distribution: counts of K categories in n trials, batched."""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln, xlogy

from ._checks import _describe, as_array
from .base import Distribution, RngLike, Shape, as_rng, as_shape
from .counts_base import counts, expected_log_factorial_binomial


def log_multinomial_coef(x: np.ndarray) -> np.ndarray:
    """log (n! / Π_k x_k!) over the last axis, n = Σ_k x_k."""
    x = np.asarray(x, dtype=float)
    return gammaln(x.sum(-1) + 1.0) - gammaln(x + 1.0).sum(-1)


class Multinomial(Distribution):
    r"""Multinomial(x | n, π): counts x_1..x_K with Σ x_k = n of n draws from the categories π, batched.

    .. math::

        \log p(x) = \log n! - \sum_k \log x_k! + \sum_k x_k \log \pi_k

    Mean nπ, variance nπ_k(1 − π_k) (covariance n(diag π − ππᵀ)); entropy
    −log n! − n Σ π_k log π_k + Σ_k E[log x_k!] with x_k ~ Binomial(n, π_k) marginally.

    As an observed variable of a factor graph its statistics are u(x) = (x, log n! − Σ log x_k!)
    (``observed_stats``; event axes 1 and 0).
    """

    event_ndims = (1, 0)
    __slots__ = ("_n", "_p")

    def __init__(self, trials, probs) -> None:
        n = counts("Multinomial", "trials", trials)
        p = as_array("Multinomial", "probs", probs, min_ndim=1)
        bad = (p < 0) | (p > 1)
        if bad.any():
            raise ValueError(f"Multinomial: probs must lie in [0, 1], got {_describe(p, bad)}")
        s = p.sum(-1)
        if not np.allclose(s, 1.0, atol=1e-9):
            raise ValueError(f"Multinomial: probs must sum to 1 over the last axis, got sums {s}")
        try:
            shape = np.broadcast_shapes(n.shape, p.shape[:-1])
        except ValueError as err:
            raise ValueError(f"Multinomial: trials {n.shape} and probs batch {p.shape[:-1]} do not broadcast") \
                from err
        self._n = np.broadcast_to(n, shape)
        self._p = np.broadcast_to(p, shape + p.shape[-1:])

    @staticmethod
    def observed_stats(x) -> tuple[np.ndarray, np.ndarray]:
        """(x, log n! − Σ_k log x_k!) of observed count vectors."""
        x = np.asarray(x, dtype=float)
        return x, log_multinomial_coef(x)

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
        return self._p.shape[-1:]

    def mean(self) -> np.ndarray:
        """nπ."""
        return self._n[..., None] * self._p

    def var(self) -> np.ndarray:
        """nπ_k(1 − π_k)."""
        return self._n[..., None] * self._p * (1.0 - self._p)

    def cov(self) -> np.ndarray:
        """n(diag π − ππᵀ)."""
        p = self._p
        return self._n[..., None, None] * (p[..., :, None] * np.eye(p.shape[-1]) - p[..., :, None] * p[..., None, :])

    def logpmf(self, x) -> np.ndarray:
        """log n! − Σ log x_k! + Σ x_k log π_k, −inf unless x are non-negative integers summing to n."""
        x = np.asarray(x, dtype=float)
        ok = np.all((x >= 0) & (x == np.round(x)), -1) & (x.sum(-1) == self._n)
        xs = np.where(ok[..., None], x, 0.0)
        return np.where(ok, log_multinomial_coef(xs) + xlogy(xs, self._p).sum(-1), -np.inf)

    logpdf = logpmf

    def pmf(self, x) -> np.ndarray:
        """The probability of x."""
        return np.exp(self.logpmf(x))

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Integer count vectors of shape ``shape + batch_shape + (K,)``."""
        size = as_shape(shape) + self.batch_shape
        n = np.broadcast_to(self._n, size).astype(np.int64)
        p = np.broadcast_to(self._p, size + self.event_shape)
        return as_rng(rng).multinomial(n, p)

    def entropy(self) -> np.ndarray:
        """−log n! − n Σ π_k log π_k + Σ_k E[log x_k!], x_k ~ Binomial(n, π_k)."""
        n, p = self._n, self._p
        e = expected_log_factorial_binomial(n[..., None], p).sum(-1)
        return -gammaln(n + 1.0) - n * xlogy(p, p).sum(-1) + e

    def __repr__(self) -> str:
        return f"Multinomial(batch_shape={self.batch_shape}, event_shape={self.event_shape})"
