"""Normal–gamma block q(w, τ): w | τ ~ N(μ, (τΛ)⁻¹), τ ~ Gamma(a, b), batched."""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln, xlogy

from . import _linalg as la
from ._checks import as_array, batch_of, exactly_one, positive
from .base import ExponentialFamily, Nat, RngLike, Shape, as_rng, as_shape, where_proper
from .gamma import Gamma

_LOG_2PI = float(np.log(2.0 * np.pi))


class GaussianGamma(ExponentialFamily):
    r"""Joint normal–gamma q(w, τ) = N(w | μ, (τΛ)⁻¹) Gamma(τ | a, b), w ∈ R^D, batched.

    The conjugate block of Bayesian linear regression (weights w, noise precision τ).

    .. math::

        \log q(w,\tau) = \tfrac D2\log\tau + \tfrac12\log|\Lambda| - \tfrac D2\log 2\pi
          - \tfrac\tau2(w-\mu)^\top\Lambda(w-\mu) + a\log b - \log\Gamma(a) + (a-1)\log\tau - b\tau

    Sufficient statistics u = (τw, τwwᵀ, τ, log τ) (event axes (1, 2, 0, 0)); natural parameters

    .. math::

        \eta = (\Lambda\mu,\ -\tfrac12\Lambda,\ -b - \tfrac12\mu^\top\Lambda\mu,\ a - 1 + D/2),

    so Λ = −2η₂, μ = Λ⁻¹η₁, a = η₄ + 1 − D/2, b = −η₃ − ½μᵀΛμ.  Base measure 1, and

    .. math::

        \kappa = -\tfrac12\log|\Lambda| + \tfrac D2\log 2\pi + \log\Gamma(a) - a\log b,\\
        E[u] = (\tfrac ab\mu,\ \Lambda^{-1} + \tfrac ab\mu\mu^\top,\ \tfrac ab,\ \psi(a) - \log b),\\
        H = H_{\mathrm{Gamma}}(a, b) + \tfrac D2\log(2\pi e) - \tfrac12\log|\Lambda|
            - \tfrac D2(\psi(a) - \log b).

    The marginal of w is a multivariate Student-t with 2a degrees of freedom, location μ and scale
    matrix (b/a)Λ⁻¹; hence ``mean()`` = μ and ``cov()`` = b/(a − 1)·Λ⁻¹ (for a > 1, +inf otherwise).

    Parameters
    ----------
    mean : array_like, shape (D,) or batch + (D,)
        μ.
    precision, scale : array_like, optional
        Λ or the scale matrix V = Λ⁻¹ (give at most one; default Λ = I); a scalar s means s·I,
        otherwise symmetric positive definite with trailing shape (D, D).
    shape, rate : array_like (keyword-only)
        a > 0, b > 0 of the Gamma marginal of τ.
    """

    event_ndims = (1, 2, 0, 0)
    __slots__ = ()
    _repr_fields = ("mean", "scale_matrix", "shape", "rate")

    def __init__(self, mean, precision=None, scale=None, *, shape, rate) -> None:
        owner = "GaussianGamma"
        mu = as_array(owner, "mean", mean, min_ndim=1)
        d = mu.shape[-1]
        if precision is None and scale is None:
            precision = 1.0
        which = exactly_one(owner, precision=precision, scale=scale)
        mat = la.spd_matrix(owner, which, precision if which == "precision" else scale, d)
        if which == "scale":
            chol, _ = la.cholesky(mat)
            lam = la.inverse(mat, chol, np.ones(mat.shape[:-2], bool))
        else:
            lam = mat
        a = positive(owner, "shape", shape)
        b = positive(owner, "rate", rate)
        batch = batch_of(owner, mean=mu.shape[:-1], **{which: mat.shape[:-2]}, shape=a.shape, rate=b.shape)
        mu = np.broadcast_to(mu, batch + (d,))
        lam = np.broadcast_to(lam, batch + (d, d))
        eta1 = la.matvec(lam, mu)
        eta3 = -b - 0.5 * np.einsum("...i,...i->...", eta1, mu)
        super().__init__(eta1, -0.5 * lam, eta3, a - 1.0 + 0.5 * d)  # base broadcasts the batch

    # ------------------------------------------------------------------------------ cached algebra
    def _chol(self) -> tuple[np.ndarray, np.ndarray]:
        if "chol" not in self._cache:
            self._cache["chol"] = la.cholesky(self.precision_matrix)
        return self._cache["chol"]

    def _moments(self) -> tuple[np.ndarray, np.ndarray]:
        """(μ, V = Λ⁻¹), cached."""
        if "moments" not in self._cache:
            chol, ok = self._chol()
            scale = la.inverse(self.precision_matrix, chol, ok)
            self._cache["moments"] = (la.matvec(scale, self._nat[0]), scale)
        return self._cache["moments"]

    def _logdet_scale(self) -> np.ndarray:
        """log|V| = −log|Λ|."""
        return -la.logdet_from_chol(self._chol()[0])

    # ------------------------------------------------------------------------------ parameters
    @property
    def dim(self) -> int:
        """Dimension D of w."""
        return self._nat[0].shape[-1]

    @property
    def precision_matrix(self) -> np.ndarray:
        """Λ = −2η₂ (symmetrised)."""
        return -2.0 * la.sym(self._nat[1])

    @property
    def scale_matrix(self) -> np.ndarray:
        """V = Λ⁻¹ (Cov[w | τ] = V/τ)."""
        return self._moments()[1]

    @property
    def shape(self) -> np.ndarray:
        """a = η₄ + 1 − D/2."""
        return self._nat[3] + 1.0 - 0.5 * self.dim

    @property
    def rate(self) -> np.ndarray:
        """b = −η₃ − ½μᵀΛμ = −η₃ − ½η₁ᵀμ."""
        return -self._nat[2] - 0.5 * np.einsum("...i,...i->...", self._nat[0], self._moments()[0])

    @property
    def tau(self) -> Gamma:
        """The Gamma(a, b) marginal of τ."""
        return Gamma.from_natural(-self.rate, self.shape - 1.0)

    def mean(self) -> np.ndarray:
        """E[w] = μ."""
        return self._moments()[0]

    def cov(self) -> np.ndarray:
        """Cov[w] = b/(a − 1)·V for a > 1 (Student-t with 2a dof), +inf otherwise."""
        a = self.shape
        with np.errstate(divide="ignore", invalid="ignore"):
            c = (self.rate / (a - 1.0))[..., None, None] * self.scale_matrix
        return np.where((a > 1.0)[..., None, None], c, np.inf)

    def var(self) -> np.ndarray:
        """diag Cov[w]."""
        return np.diagonal(self.cov(), axis1=-2, axis2=-1).copy()

    def is_proper(self) -> np.ndarray:
        """Λ positive definite, a > 0, b > 0, η finite."""
        a, b = self.shape, self.rate
        with np.errstate(invalid="ignore"):
            return self._chol()[1] & (a > 0) & (b > 0) & np.isfinite(a) & np.isfinite(b)

    # ------------------------------------------------------------------------------ exp. family
    def sufficient_stats(self, w, tau) -> Nat:
        """u(w, τ) = (τw, τwwᵀ, τ, log τ)."""
        w = np.asarray(w, dtype=float)
        tau = np.asarray(tau, dtype=float)
        t = tau[..., None]
        with np.errstate(divide="ignore", invalid="ignore"):
            return t * w, t[..., None] * w[..., :, None] * w[..., None, :], tau, np.log(tau)

    def expected_stats(self) -> Nat:
        """E[u] = ((a/b)μ, V + (a/b)μμᵀ, a/b, ψ(a) − log b)."""
        mu, scale = self._moments()
        a, b = self.shape, self.rate
        with np.errstate(divide="ignore", invalid="ignore"):
            r = a / b
            elog = digamma(a) - np.log(b)
        return (r[..., None] * mu, scale + r[..., None, None] * mu[..., :, None] * mu[..., None, :], r, elog)

    def log_partition(self) -> np.ndarray:
        """κ = ½log|V| + (D/2)log 2π + log Γ(a) − a log b (+inf where improper)."""
        a, b = self.shape, self.rate
        with np.errstate(divide="ignore", invalid="ignore"):
            k = 0.5 * self._logdet_scale() + 0.5 * self.dim * _LOG_2PI + gammaln(a) - a * np.log(b)
        return where_proper(k, self.is_proper(), np.inf)

    def entropy(self) -> np.ndarray:
        """H = H_Gamma(a, b) + (D/2)log(2πe) + ½log|V| − (D/2)(ψ(a) − log b)."""
        a, b, d = self.shape, self.rate, self.dim
        with np.errstate(divide="ignore", invalid="ignore"):
            elog = digamma(a) - np.log(b)
            h_tau = a - np.log(b) + gammaln(a) + (1.0 - a) * digamma(a)
            h = h_tau + 0.5 * d * (1.0 + _LOG_2PI) + 0.5 * self._logdet_scale() - 0.5 * d * elog
        return where_proper(h, self.is_proper(), np.nan)

    def logpdf(self, w, tau) -> np.ndarray:
        """log N(w | μ, (τΛ)⁻¹) + log Gamma(τ | a, b) (−inf for τ ≤ 0)."""
        w = np.asarray(w, dtype=float)
        tau = np.asarray(tau, dtype=float)
        chol, _ = self._chol()
        a, b, d = self.shape, self.rate, self.dim
        r = np.einsum("...ji,...j->...i", chol, w - self.mean())
        with np.errstate(divide="ignore", invalid="ignore"):
            lp = (0.5 * d * np.log(tau) - 0.5 * self._logdet_scale() - 0.5 * d * _LOG_2PI
                  - 0.5 * tau * np.sum(r * r, axis=-1)
                  + xlogy(a, b) - gammaln(a) + xlogy(a - 1.0, tau) - b * tau)
        return np.where(tau > 0, lp, -np.inf)

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> tuple[np.ndarray, np.ndarray]:
        """Joint draws (w, τ): τ of shape ``shape + batch_shape``, w of that shape + (D,)."""
        rng = as_rng(rng)
        size = as_shape(shape) + self.batch_shape
        tau = rng.gamma(self.shape, 1.0, size=size) / self.rate
        z = rng.standard_normal(size + (self.dim,))
        if "linv" not in self._cache:
            self._cache["linv"] = np.linalg.inv(self._chol()[0])
        w = self.mean() + np.einsum("...ji,...j->...i", self._cache["linv"], z) / np.sqrt(tau)[..., None]
        return w, tau

    def kl(self, other: GaussianGamma) -> np.ndarray:
        """KL(q‖p) = KL_Gamma(τ) + ½[tr(Λ_p V_q) + (a_q/b_q)(μ_p − μ_q)ᵀΛ_p(μ_p − μ_q) − D
        + log|V_p| − log|V_q|]."""
        self._check_same(other)
        lam_p = other.precision_matrix
        dm = other.mean() - self.mean()
        tr = np.einsum("...ij,...ji->...", lam_p, self.scale_matrix)
        r = self.shape / self.rate
        kl_w = 0.5 * (tr + r * la.quad(lam_p, dm) - self.dim + other._logdet_scale() - self._logdet_scale())
        return self.tau.kl(other.tau) + kl_w
