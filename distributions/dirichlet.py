"""Dirichlet distribution Dir(α) on the K-simplex, batched."""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln, xlogy

from ._checks import positive
from .base import ExponentialFamily, Nat, RngLike, Shape, as_rng, as_shape, where_proper

_SIMPLEX_TOL = 1e-8


class Dirichlet(ExponentialFamily):
    r"""Dirichlet Dir(p | α) on the simplex {p ∈ [0,1]^K : Σp = 1}, batched over leading axes.

    .. math::

        \log q(p) = \sum_k(\alpha_k - 1)\log p_k - \log B(\alpha),\qquad
        \log B(\alpha) = \sum_k\log\Gamma(\alpha_k) - \log\Gamma(\alpha_0),\ \alpha_0 = \sum_k\alpha_k

    Sufficient statistics u(p) = log p, natural parameters η = α − 1 (shape ``batch + (K,)``),
    base measure 1 (w.r.t. Lebesgue measure on the first K − 1 coordinates), κ = log B(α),

    .. math::

        E[u_k] = \psi(\alpha_k) - \psi(\alpha_0),\qquad
        H = \log B(\alpha) + (\alpha_0 - K)\psi(\alpha_0) - \sum_k(\alpha_k - 1)\psi(\alpha_k).

    Parameters
    ----------
    concentration : array_like, shape batch + (K,)
        α_k > 0.

    Notes
    -----
    The flat message η = 0 is the proper uniform Dir(1, …, 1).
    """

    event_ndims = (1,)
    __slots__ = ()
    _repr_fields = ("concentration",)

    def __init__(self, concentration) -> None:
        a = positive("Dirichlet", "concentration", concentration, min_ndim=1)
        super().__init__(a - 1.0)

    # ------------------------------------------------------------------------------ parameters
    @property
    def concentration(self) -> np.ndarray:
        """α = η + 1."""
        return self._nat[0] + 1.0

    @property
    def dim(self) -> int:
        """Number of categories K."""
        return self._nat[0].shape[-1]

    def mean(self) -> np.ndarray:
        """α / α₀."""
        a = self.concentration
        return a / a.sum(axis=-1, keepdims=True)

    def var(self) -> np.ndarray:
        """α_k(α₀ − α_k) / (α₀²(α₀ + 1))."""
        a = self.concentration
        a0 = a.sum(axis=-1, keepdims=True)
        return a * (a0 - a) / (a0 * a0 * (a0 + 1.0))

    def cov(self) -> np.ndarray:
        """(α₀ diag(α) − ααᵀ) / (α₀²(α₀ + 1)), shape ``batch + (K, K)``."""
        a = self.concentration
        a0 = a.sum(axis=-1)[..., None, None]
        outer = a[..., :, None] * a[..., None, :]
        return (a0 * (a[..., :, None] * np.eye(self.dim)) - outer) / (a0 * a0 * (a0 + 1.0))

    def is_proper(self) -> np.ndarray:
        """All α_k > 0 (finite)."""
        a = self.concentration
        return ((a > 0) & np.isfinite(a)).all(axis=-1)

    # ------------------------------------------------------------------------------ exp. family
    def sufficient_stats(self, x) -> Nat:
        """u(p) = log p."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return (np.log(np.asarray(x, dtype=float)),)

    def expected_stats(self) -> Nat:
        """E[log p_k] = ψ(α_k) − ψ(α₀)."""
        a = self.concentration
        return (digamma(a) - digamma(a.sum(axis=-1, keepdims=True)),)

    def _log_b(self) -> np.ndarray:
        a = self.concentration
        return gammaln(a).sum(axis=-1) - gammaln(a.sum(axis=-1))

    def log_partition(self) -> np.ndarray:
        """κ = Σ log Γ(α_k) − log Γ(α₀) (+inf where improper)."""
        with np.errstate(invalid="ignore"):
            return where_proper(self._log_b(), self.is_proper(), np.inf)

    def entropy(self) -> np.ndarray:
        """H = log B(α) + (α₀ − K)ψ(α₀) − Σ(α_k − 1)ψ(α_k)."""
        a = self.concentration
        a0 = a.sum(axis=-1)
        with np.errstate(invalid="ignore"):
            h = self._log_b() + (a0 - self.dim) * digamma(a0) - ((a - 1.0) * digamma(a)).sum(axis=-1)
        return where_proper(h, self.is_proper(), np.nan)

    def logpdf(self, x) -> np.ndarray:
        """Σ(α_k − 1) log p_k − log B(α) on the simplex (to 1e-8), −inf off it."""
        x = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            lp = xlogy(self._nat[0], x).sum(axis=-1) - self._log_b()
        on = (x >= 0).all(axis=-1) & (np.abs(x.sum(axis=-1) - 1.0) <= _SIMPLEX_TOL * self.dim)
        return np.where(on, lp, -np.inf)

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Draws of shape ``shape + batch_shape + (K,)``.

        Normalised Gamma draws, in log space so that small α do not underflow:
        log g = log G(α + 1) + log(U)/α with G ~ Gamma(α + 1, 1), U ~ Uniform(0, 1).
        """
        rng = as_rng(rng)
        a = self.concentration
        size = as_shape(shape) + a.shape
        logg = np.log(rng.gamma(a + 1.0, 1.0, size=size)) + np.log(rng.random(size)) / a
        logg -= logg.max(axis=-1, keepdims=True)
        p = np.exp(logg)
        return p / p.sum(axis=-1, keepdims=True)

    def kl(self, other: Dirichlet) -> np.ndarray:
        """KL(q‖p) = log B(α_p) − log B(α_q) + Σ(α_q − α_p)(ψ(α_q) − ψ(α_q,0))."""
        self._check_same(other)
        d = self.concentration - other.concentration
        return other._log_b() - self._log_b() + (d * self.expected_stats()[0]).sum(axis=-1)
