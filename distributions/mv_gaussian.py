"""Multivariate Gaussian N(μ, Σ) over R^D, batched, stored by its precision."""

from __future__ import annotations

import numpy as np

from . import _linalg as la
from ._checks import as_array, batch_of, exactly_one
from .base import ExponentialFamily, Nat, RngLike, Shape, as_rng, as_shape, where_proper

_LOG_2PI = float(np.log(2.0 * np.pi))


class MvGaussian(ExponentialFamily):
    r"""Multivariate Gaussian N(x | μ, Σ) on R^D, batched over leading axes.

    .. math::

        \log q(x) = -\tfrac D2\log 2\pi - \tfrac12\log|\Sigma| - \tfrac12(x-\mu)^\top\Lambda(x-\mu),
        \qquad \Lambda = \Sigma^{-1}

    Sufficient statistics u(x) = (x, xxᵀ); natural parameters η = (Λμ, −½Λ) with shapes
    ``batch + (D,)`` and ``batch + (D, D)``; base measure 1,

    .. math::

        \kappa = \tfrac12\mu^\top\Lambda\mu - \tfrac12\log|\Lambda| + \tfrac D2\log 2\pi,\qquad
        E[u] = (\mu, \Sigma + \mu\mu^\top),\qquad H = \tfrac12\log\det(2\pi e\Sigma).

    Parameters
    ----------
    mean : array_like, shape (D,) or batch + (D,)
        Mean μ.
    cov, precision : array_like, optional
        Covariance Σ or precision Λ (give at most one; default Λ = I): a scalar s (meaning s·I)
        or symmetric positive definite matrices of trailing shape (D, D).  Batch axes of
        ``mean`` and the matrix broadcast.

    Notes
    -----
    Everything is derived from the Cholesky factor Λ = LLᵀ (of the symmetric part of −2η₂), cached
    with μ and Σ = L⁻ᵀL⁻¹.  Where Λ is not positive definite (``is_proper`` False) the mean and
    covariance are Λ⁻¹η₁ and Λ⁻¹ by LU (nan if Λ is singular), and κ is +inf.
    """

    event_ndims = (1, 2)
    __slots__ = ()
    _repr_fields = ("mean", "cov")

    def __init__(self, mean, cov=None, precision=None) -> None:
        owner = "MvGaussian"
        mu = as_array(owner, "mean", mean, min_ndim=1)
        d = mu.shape[-1]
        if cov is None and precision is None:
            precision = 1.0
        which = exactly_one(owner, cov=cov, precision=precision)
        mat = la.spd_matrix(owner, which, cov if which == "cov" else precision, d)
        if which == "cov":
            chol, _ = la.cholesky(mat)
            lam = la.inverse(mat, chol, np.ones(mat.shape[:-2], bool))
        else:
            lam = mat
        batch = batch_of(owner, mean=mu.shape[:-1], **{which: mat.shape[:-2]})
        mu = np.broadcast_to(mu, batch + (d,))
        lam = np.broadcast_to(lam, batch + (d, d))
        super().__init__(la.matvec(lam, mu), -0.5 * lam)

    # ------------------------------------------------------------------------------ cached algebra
    def _chol(self) -> tuple[np.ndarray, np.ndarray]:
        """(L, ok): Cholesky factor of Λ and the mask where it exists."""
        if "chol" not in self._cache:
            self._cache["chol"] = la.cholesky(self.precision)
        return self._cache["chol"]

    def _moments(self) -> tuple[np.ndarray, np.ndarray]:
        """(μ, Σ), cached."""
        if "moments" not in self._cache:
            chol, ok = self._chol()
            cov = la.inverse(self.precision, chol, ok)
            self._cache["moments"] = (la.matvec(cov, self._nat[0]), cov)
        return self._cache["moments"]

    # ------------------------------------------------------------------------------ parameters
    @property
    def dim(self) -> int:
        """Event dimension D."""
        return self._nat[0].shape[-1]

    @property
    def precision(self) -> np.ndarray:
        """Precision matrix Λ = −2η₂ (symmetrised)."""
        return -la.sym(self._nat[1]) * 2.0

    def mean(self) -> np.ndarray:
        """μ = Λ⁻¹η₁, shape ``batch + (D,)``."""
        return self._moments()[0]

    def cov(self) -> np.ndarray:
        """Σ = Λ⁻¹, shape ``batch + (D, D)``."""
        return self._moments()[1]

    def var(self) -> np.ndarray:
        """Marginal variances diag(Σ)."""
        return np.diagonal(self.cov(), axis1=-2, axis2=-1).copy()

    def logdet_cov(self) -> np.ndarray:
        """log det Σ = −2 Σᵢ log Lᵢᵢ (nan where not proper)."""
        chol, ok = self._chol()
        with np.errstate(invalid="ignore"):
            return -la.logdet_from_chol(chol)

    def is_proper(self) -> np.ndarray:
        """Λ positive definite (Cholesky succeeds) and η finite, per batch element."""
        return self._chol()[1] & np.isfinite(self._nat[0]).all(axis=-1)

    # ------------------------------------------------------------------------------ exp. family
    def sufficient_stats(self, x) -> Nat:
        """u(x) = (x, xxᵀ)."""
        x = np.asarray(x, dtype=float)
        return x, x[..., :, None] * x[..., None, :]

    def expected_stats(self) -> Nat:
        """E[u] = (μ, Σ + μμᵀ)."""
        mu, cov = self._moments()
        return mu, cov + mu[..., :, None] * mu[..., None, :]

    def log_partition(self) -> np.ndarray:
        """κ = ½η₁ᵀμ + ½log|Σ| + (D/2) log 2π (+inf where improper)."""
        with np.errstate(invalid="ignore"):
            k = (0.5 * np.einsum("...i,...i->...", self._nat[0], self.mean())
                 + 0.5 * self.logdet_cov() + 0.5 * self.dim * _LOG_2PI)
        return where_proper(k, self.is_proper(), np.inf)

    def entropy(self) -> np.ndarray:
        """H = ½ log det(2πeΣ) = (D/2)(1 + log 2π) + ½ log|Σ|."""
        h = 0.5 * self.dim * (1.0 + _LOG_2PI) + 0.5 * self.logdet_cov()
        return where_proper(h, self.is_proper(), np.nan)

    def logpdf(self, x) -> np.ndarray:
        """log N(x | μ, Σ) = −(D/2)log 2π + Σ log Lᵢᵢ − ½‖Lᵀ(x − μ)‖², with Λ = LLᵀ."""
        x = np.asarray(x, dtype=float)
        chol, _ = self._chol()
        r = np.einsum("...ji,...j->...i", chol, x - self.mean())
        return -0.5 * self.dim * _LOG_2PI - 0.5 * self.logdet_cov() - 0.5 * np.sum(r * r, axis=-1)

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Draws μ + L⁻ᵀz, z ~ N(0, I), of shape ``shape + batch_shape + (D,)``."""
        size = as_shape(shape) + self.batch_shape + (self.dim,)
        z = as_rng(rng).standard_normal(size)
        if "linv" not in self._cache:
            self._cache["linv"] = np.linalg.inv(self._chol()[0])
        return self.mean() + np.einsum("...ji,...j->...i", self._cache["linv"], z)

    def kl(self, other: MvGaussian) -> np.ndarray:
        """KL(q‖p) = ½[tr(Λ_p Σ_q) + (μ_p − μ_q)ᵀΛ_p(μ_p − μ_q) − D + log|Σ_p| − log|Σ_q|]."""
        self._check_same(other)
        lam_p = other.precision
        d = other.mean() - self.mean()
        tr = np.einsum("...ij,...ji->...", lam_p, self.cov())
        return 0.5 * (tr + la.quad(lam_p, d) - self.dim + other.logdet_cov() - self.logdet_cov())
