"""Beta distribution Beta(α, β), batched."""

from __future__ import annotations

import numpy as np
from scipy.special import betaln, digamma, xlog1py, xlogy

from ._checks import broadcast, positive
from .base import ExponentialFamily, Nat, RngLike, Shape, as_rng, as_shape, where_proper


class Beta(ExponentialFamily):
    r"""Beta(p | α, β) on [0, 1], batched over leading axes.

    .. math::

        \log q(p) = (\alpha - 1)\log p + (\beta - 1)\log(1 - p) - \log B(\alpha, \beta)

    Sufficient statistics u(p) = (log p, log(1 − p)), natural parameters η = (α − 1, β − 1),
    base measure 1, κ = log B(α, β),

    .. math::

        E[u] = (\psi(\alpha) - \psi(\alpha+\beta),\ \psi(\beta) - \psi(\alpha+\beta)),\qquad
        H = \log B(\alpha,\beta) - (\alpha-1)\psi(\alpha) - (\beta-1)\psi(\beta)
            + (\alpha+\beta-2)\psi(\alpha+\beta).

    Parameters
    ----------
    alpha, beta : array_like
        Concentrations α > 0, β > 0.

    Notes
    -----
    The flat message η = 0 is the proper uniform Beta(1, 1).
    """

    event_ndims = (0, 0)
    __slots__ = ()
    _repr_fields = ("alpha", "beta")

    def __init__(self, alpha, beta) -> None:
        owner = "Beta"
        a, b = broadcast(owner, alpha=positive(owner, "alpha", alpha), beta=positive(owner, "beta", beta))
        super().__init__(a - 1.0, b - 1.0)

    # ------------------------------------------------------------------------------ parameters
    @property
    def alpha(self) -> np.ndarray:
        """α = η₁ + 1."""
        return self._nat[0] + 1.0

    @property
    def beta(self) -> np.ndarray:
        """β = η₂ + 1."""
        return self._nat[1] + 1.0

    def mean(self) -> np.ndarray:
        """α / (α + β)."""
        a, b = self.alpha, self.beta
        return a / (a + b)

    def var(self) -> np.ndarray:
        """αβ / ((α + β)²(α + β + 1))."""
        a, b = self.alpha, self.beta
        s = a + b
        return a * b / (s * s * (s + 1.0))

    def is_proper(self) -> np.ndarray:
        """α > 0 and β > 0 (finite)."""
        a, b = self.alpha, self.beta
        return (a > 0) & (b > 0) & np.isfinite(a) & np.isfinite(b)

    # ------------------------------------------------------------------------------ exp. family
    def sufficient_stats(self, x) -> Nat:
        """u(p) = (log p, log(1 − p))."""
        x = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(x), np.log1p(-x)

    def expected_stats(self) -> Nat:
        """E[u] = (ψ(α) − ψ(α+β), ψ(β) − ψ(α+β))."""
        a, b = self.alpha, self.beta
        d = digamma(a + b)
        return digamma(a) - d, digamma(b) - d

    def log_partition(self) -> np.ndarray:
        """κ = log B(α, β) (+inf where improper)."""
        with np.errstate(invalid="ignore"):
            k = betaln(self.alpha, self.beta)
        return where_proper(k, self.is_proper(), np.inf)

    def entropy(self) -> np.ndarray:
        """H = log B(α,β) − (α−1)ψ(α) − (β−1)ψ(β) + (α+β−2)ψ(α+β)."""
        a, b = self.alpha, self.beta
        with np.errstate(invalid="ignore"):
            h = (betaln(a, b) - (a - 1.0) * digamma(a) - (b - 1.0) * digamma(b)
                 + (a + b - 2.0) * digamma(a + b))
        return where_proper(h, self.is_proper(), np.nan)

    def logpdf(self, x) -> np.ndarray:
        """(α−1) log p + (β−1) log(1−p) − log B(α, β) on [0, 1], −inf outside."""
        x = np.asarray(x, dtype=float)
        a, b = self.alpha, self.beta
        with np.errstate(divide="ignore", invalid="ignore"):
            lp = xlogy(a - 1.0, x) + xlog1py(b - 1.0, -x) - betaln(a, b)
        return np.where((x >= 0) & (x <= 1), lp, -np.inf)

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Draws of shape ``shape + batch_shape``."""
        size = as_shape(shape) + self.batch_shape
        return as_rng(rng).beta(self.alpha, self.beta, size=size)

    def kl(self, other: Beta) -> np.ndarray:
        """KL(q‖p) = log B(α_p,β_p) − log B(α_q,β_q) + (α_q−α_p)ψ(α_q) + (β_q−β_p)ψ(β_q)
        + (α_p − α_q + β_p − β_q)ψ(α_q + β_q)."""
        self._check_same(other)
        aq, bq, ap, bp = self.alpha, self.beta, other.alpha, other.beta
        return (betaln(ap, bp) - betaln(aq, bq) + (aq - ap) * digamma(aq) + (bq - bp) * digamma(bq)
                + (ap - aq + bp - bq) * digamma(aq + bq))
