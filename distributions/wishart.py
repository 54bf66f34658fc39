"""Wishart distribution over D×D precision matrices, batched, parameterised by its inverse scale."""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln

from . import _linalg as la
from ._checks import as_array, batch_of
from .base import ExponentialFamily, Nat, RngLike, Shape, as_rng, as_shape, where_proper

_LOG_2 = float(np.log(2.0))
_LOG_PI = float(np.log(np.pi))


def log_multigamma(a: np.ndarray, d: int) -> np.ndarray:
    """log Γ_D(a) = D(D−1)/4 log π + Σᵢ₌₁ᴰ log Γ(a + (1 − i)/2), element-wise in ``a``."""
    a = np.asarray(a, dtype=float)
    half = 0.5 * (1.0 - np.arange(1, d + 1))
    with np.errstate(invalid="ignore"):
        return 0.25 * d * (d - 1) * _LOG_PI + gammaln(a[..., None] + half).sum(-1)


def multidigamma(a: np.ndarray, d: int) -> np.ndarray:
    """ψ_D(a) = d log Γ_D(a)/da = Σᵢ₌₁ᴰ ψ(a + (1 − i)/2), element-wise in ``a``."""
    a = np.asarray(a, dtype=float)
    half = 0.5 * (1.0 - np.arange(1, d + 1))
    return digamma(a[..., None] + half).sum(-1)


class Wishart(ExponentialFamily):
    r"""Wishart distribution W(Λ | ν, V) over symmetric positive definite D×D matrices, batched.

    Parameterised, as in Infer.NET and BayesPy, by the degrees of freedom ν > D − 1 and the
    *inverse* scale matrix V (a rate-like matrix):

    .. math::

        \log q(\Lambda) = \tfrac{\nu - D - 1}2\log|\Lambda| - \tfrac12\operatorname{tr}(V\Lambda)
          + \tfrac\nu2\log|V| - \tfrac{\nu D}2\log 2 - \log\Gamma_D(\tfrac\nu2),

    so E[Λ] = ν V⁻¹.  (scipy.stats.wishart(df=ν, scale=S) is this law with S = V⁻¹.)

    Sufficient statistics u(Λ) = (Λ, log|Λ|) (event axes (2, 0)); natural parameters
    η = (−½V, (ν − D − 1)/2); base measure 1, and

    .. math::

        \kappa = \tfrac{\nu D}2\log 2 - \tfrac\nu2\log|V| + \log\Gamma_D(\tfrac\nu2),\qquad
        E[u] = (\nu V^{-1},\ \psi_D(\tfrac\nu2) + D\log 2 - \log|V|),\qquad
        H = \kappa - \eta^\top E[u],

    with log Γ_D the multivariate log-gamma function and ψ_D its derivative.

    Parameters
    ----------
    dof : array_like
        Degrees of freedom ν > D − 1 (batch-shaped).
    scale : array_like
        The inverse scale matrix V (symmetric positive definite, trailing shape (D, D); a scalar s
        means s·I and needs ``dim``).  E[Λ] = ν V⁻¹.
    dim : int, optional
        D, when ``scale`` is a scalar.
    """

    event_ndims = (2, 0)
    __slots__ = ()

    def __init__(self, dof, scale, dim: int | None = None) -> None:
        owner = "Wishart"
        s = as_array(owner, "scale", scale)
        if s.ndim == 0:
            if dim is None:
                raise ValueError(f"{owner}: a scalar scale needs dim=D")
            d = int(dim)
        else:
            d = s.shape[-1]
        v = la.spd_matrix(owner, "scale", s, d)
        nu = as_array(owner, "dof", dof)
        bad = ~(nu > d - 1)
        if bad.any():
            raise ValueError(f"{owner}: dof must exceed D − 1 = {d - 1}, got {nu[bad].ravel()[0].item()!r}")
        batch = batch_of(owner, dof=nu.shape, scale=v.shape[:-2])
        v = np.broadcast_to(v, batch + (d, d))
        nu = np.broadcast_to(nu, batch)
        super().__init__(-0.5 * v, 0.5 * (nu - d - 1.0))

    @classmethod
    def _zero_natural(cls, batch_shape: Shape, event_shape: Shape) -> Nat:
        d = event_shape[-1]
        return np.zeros(tuple(batch_shape) + (d, d)), np.zeros(tuple(batch_shape))

    # ------------------------------------------------------------------------------ cached algebra
    def _chol(self) -> tuple[np.ndarray, np.ndarray]:
        """(L, ok): Cholesky factor of V and where it exists."""
        if "chol" not in self._cache:
            self._cache["chol"] = la.cholesky(self.scale)
        return self._cache["chol"]

    def _scale_inv(self) -> np.ndarray:
        if "inv" not in self._cache:
            chol, ok = self._chol()
            self._cache["inv"] = la.inverse(self.scale, chol, ok)
        return self._cache["inv"]

    # ------------------------------------------------------------------------------ parameters
    @property
    def dim(self) -> int:
        """D."""
        return self._nat[0].shape[-1]

    @property
    def dof(self) -> np.ndarray:
        """ν = 2η₂ + D + 1."""
        return 2.0 * self._nat[1] + self.dim + 1.0

    @property
    def scale(self) -> np.ndarray:
        """The inverse scale matrix V = −2η₁ (symmetrised)."""
        return -2.0 * la.sym(self._nat[0])

    def scale_inverse(self) -> np.ndarray:
        """V⁻¹ (scipy's ``scale``)."""
        return self._scale_inv()

    def logdet_scale(self) -> np.ndarray:
        """log|V|."""
        with np.errstate(invalid="ignore"):
            return la.logdet_from_chol(self._chol()[0])

    def mean(self) -> np.ndarray:
        """E[Λ] = ν V⁻¹."""
        return self.dof[..., None, None] * self._scale_inv()

    def var(self) -> np.ndarray:
        """Element-wise Var[Λ_ij] = ν(S_ij² + S_ii S_jj), S = V⁻¹."""
        s = self._scale_inv()
        diag = np.diagonal(s, axis1=-2, axis2=-1)
        return self.dof[..., None, None] * (s * s + diag[..., :, None] * diag[..., None, :])

    def mean_logdet(self) -> np.ndarray:
        """E[log|Λ|] = ψ_D(ν/2) + D log 2 − log|V|."""
        return multidigamma(0.5 * self.dof, self.dim) + self.dim * _LOG_2 - self.logdet_scale()

    def is_proper(self) -> np.ndarray:
        """V positive definite and ν > D − 1."""
        nu = self.dof
        return self._chol()[1] & (nu > self.dim - 1) & np.isfinite(nu)

    # ------------------------------------------------------------------------------ exp. family
    def sufficient_stats(self, x) -> Nat:
        """u(Λ) = (Λ, log|Λ|)."""
        x = np.asarray(x, dtype=float)
        sign, logdet = np.linalg.slogdet(x)
        return x, np.where(sign > 0, logdet, np.nan)

    def expected_stats(self) -> Nat:
        """E[u] = (ν V⁻¹, ψ_D(ν/2) + D log 2 − log|V|)."""
        return self.mean(), self.mean_logdet()

    def log_partition(self) -> np.ndarray:
        """κ = (νD/2) log 2 − (ν/2) log|V| + log Γ_D(ν/2) (+inf where improper)."""
        nu, d = self.dof, self.dim
        with np.errstate(invalid="ignore"):
            k = 0.5 * nu * d * _LOG_2 - 0.5 * nu * self.logdet_scale() + log_multigamma(0.5 * nu, d)
        return where_proper(k, self.is_proper(), np.inf)

    def entropy(self) -> np.ndarray:
        """H = κ − ηᵀE[u] = κ + ½ tr(V E[Λ]) − ((ν − D − 1)/2) E[log|Λ|] = κ + νD/2 − ((ν − D − 1)/2) E[log|Λ|]."""
        nu, d = self.dof, self.dim
        with np.errstate(invalid="ignore"):
            h = self.log_partition() + 0.5 * nu * d - 0.5 * (nu - d - 1.0) * self.mean_logdet()
        return where_proper(h, self.is_proper(), np.nan)

    def logpdf(self, x) -> np.ndarray:
        """((ν − D − 1)/2) log|Λ| − ½ tr(VΛ) − κ (−inf where Λ is not positive definite)."""
        x = la.sym(np.asarray(x, dtype=float))
        sign, logdet = np.linalg.slogdet(x)
        nu, d = self.dof, self.dim
        with np.errstate(invalid="ignore"):
            lp = (0.5 * (nu - d - 1.0) * logdet - 0.5 * np.einsum("...ij,...ji->...", self.scale, x)
                  - self.log_partition())
        pd = np.linalg.eigvalsh(x)[..., 0] > 0
        return np.where((sign > 0) & pd, lp, -np.inf)

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Draws by the Bartlett decomposition, shape ``shape + batch_shape + (D, D)``."""
        rng = as_rng(rng)
        d = self.dim
        size = as_shape(shape) + self.batch_shape
        nu = np.broadcast_to(self.dof, size)
        # A lower triangular: A_ii = sqrt(chi²(ν − i)), A_ij ~ N(0, 1) below the diagonal
        a = np.tril(rng.standard_normal(size + (d, d)), -1)
        chi = np.sqrt(rng.chisquare(nu[..., None] - np.arange(d)))
        a = a + chi[..., :, None] * np.eye(d)
        # Λ = (L_S A)(L_S A)ᵀ with S = V⁻¹ = L_S L_Sᵀ
        ls = np.linalg.cholesky(self._scale_inv())
        la_ = ls @ a
        return la_ @ np.swapaxes(la_, -1, -2)

    def kl(self, other: Wishart) -> np.ndarray:
        """KL(q‖p) = κ_p − κ_q + (η_q − η_p)ᵀE_q[u]."""
        return super().kl(other)
