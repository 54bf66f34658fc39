"""Gamma distribution Gamma(shape a, rate b), batched."""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln, xlogy

from ._checks import broadcast, positive
from .base import ExponentialFamily, Nat, RngLike, Shape, as_rng, as_shape, where_proper


class Gamma(ExponentialFamily):
    r"""Gamma(x | a, b) with shape a and rate b (mean a/b), batched over leading axes.

    .. math::

        \log q(x) = a\log b - \log\Gamma(a) + (a - 1)\log x - b x,\qquad x > 0

    Sufficient statistics u(x) = (x, log x), natural parameters η = (−b, a − 1), base measure 1,

    .. math::

        \kappa = \log\Gamma(a) - a\log b,\qquad E[u] = (a/b,\ \psi(a) - \log b),\qquad
        H = a - \log b + \log\Gamma(a) + (1 - a)\psi(a).

    Parameters
    ----------
    shape : array_like
        Shape a > 0.
    rate : array_like
        Rate b > 0 (scipy's ``scale`` is 1/b).
    """

    event_ndims = (0, 0)
    __slots__ = ()
    _repr_fields = ("shape", "rate")

    def __init__(self, shape, rate) -> None:
        owner = "Gamma"
        a, b = broadcast(owner, shape=positive(owner, "shape", shape), rate=positive(owner, "rate", rate))
        super().__init__(-b, a - 1.0)

    # ------------------------------------------------------------------------------ parameters
    @property
    def shape(self) -> np.ndarray:
        """Shape a = η₂ + 1."""
        return self._nat[1] + 1.0

    @property
    def rate(self) -> np.ndarray:
        """Rate b = −η₁."""
        return -self._nat[0]

    @property
    def scale(self) -> np.ndarray:
        """Scale 1/b."""
        with np.errstate(divide="ignore"):
            return 1.0 / self.rate

    def mean(self) -> np.ndarray:
        """a / b."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.shape / self.rate

    def var(self) -> np.ndarray:
        """a / b²."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.shape / self.rate**2

    def mean_log(self) -> np.ndarray:
        """E[log x] = ψ(a) − log b."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return digamma(self.shape) - np.log(self.rate)

    def is_proper(self) -> np.ndarray:
        """a > 0 and b > 0 (finite)."""
        a, b = self.shape, self.rate
        return (a > 0) & (b > 0) & np.isfinite(a) & np.isfinite(b)

    # ------------------------------------------------------------------------------ exp. family
    def sufficient_stats(self, x) -> Nat:
        """u(x) = (x, log x)."""
        x = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return x, np.log(x)

    def expected_stats(self) -> Nat:
        """E[u] = (a/b, ψ(a) − log b)."""
        return self.mean(), self.mean_log()

    def log_partition(self) -> np.ndarray:
        """κ = log Γ(a) − a log b (+inf where improper)."""
        a, b = self.shape, self.rate
        with np.errstate(divide="ignore", invalid="ignore"):
            k = gammaln(a) - a * np.log(b)
        return where_proper(k, self.is_proper(), np.inf)

    def entropy(self) -> np.ndarray:
        """H = a − log b + log Γ(a) + (1 − a)ψ(a)."""
        a, b = self.shape, self.rate
        with np.errstate(divide="ignore", invalid="ignore"):
            h = a - np.log(b) + gammaln(a) + (1.0 - a) * digamma(a)
        return where_proper(h, self.is_proper(), np.nan)

    def logpdf(self, x) -> np.ndarray:
        """a log b − log Γ(a) + (a − 1) log x − b x for x > 0, −inf for x < 0."""
        x = np.asarray(x, dtype=float)
        a, b = self.shape, self.rate
        with np.errstate(divide="ignore", invalid="ignore"):
            lp = xlogy(a, b) - gammaln(a) + xlogy(a - 1.0, x) - b * x
        return np.where(x >= 0, lp, -np.inf)

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Draws of shape ``shape + batch_shape``."""
        size = as_shape(shape) + self.batch_shape
        return as_rng(rng).gamma(self.shape, 1.0, size=size) / self.rate

    def kl(self, other: Gamma) -> np.ndarray:
        """KL(q‖p) = (a_q − a_p)ψ(a_q) − log Γ(a_q) + log Γ(a_p) + a_p log(b_q/b_p) + a_q(b_p − b_q)/b_q."""
        self._check_same(other)
        aq, bq, ap, bp = self.shape, self.rate, other.shape, other.rate
        return ((aq - ap) * digamma(aq) - gammaln(aq) + gammaln(ap) + ap * np.log(bq / bp)
                + aq * (bp - bq) / bq)
