"""Normal–Wishart block q(μ, Λ): μ | Λ ~ N(m, (βΛ)⁻¹), Λ ~ Wishart(ν, V), batched."""

from __future__ import annotations

import numpy as np

from . import _linalg as la
from ._checks import as_array, batch_of, positive
from .base import ExponentialFamily, Nat, RngLike, Shape, as_rng, as_shape, where_proper
from .wishart import Wishart, log_multigamma

_LOG_2 = float(np.log(2.0))
_LOG_2PI = float(np.log(2.0 * np.pi))


class GaussianWishart(ExponentialFamily):
    r"""Joint normal–Wishart q(μ, Λ) = N(μ | m, (βΛ)⁻¹) W(Λ | ν, V), μ ∈ R^D, batched.

    The conjugate prior (and posterior) of a Gaussian with unknown mean and precision (Bishop 2006,
    §2.3.6 and §10.2).  The Wishart uses the inverse scale matrix V (E[Λ] = νV⁻¹), see
    :class:`Wishart`.

    .. math::

        \log q(\mu, \Lambda) = \tfrac D2\log\beta - \tfrac D2\log 2\pi + \tfrac12\log|\Lambda|
          - \tfrac\beta2(\mu - m)^\top\Lambda(\mu - m) + \log W(\Lambda | \nu, V)

    Sufficient statistics u = (Λμ, μᵀΛμ, Λ, log|Λ|) (event axes (1, 0, 2, 0)); natural parameters

    .. math::

        \eta = (\beta m,\ -\tfrac\beta2,\ -\tfrac12(V + \beta m m^\top),\ \tfrac{\nu - D}2),

    so β = −2η₂, m = η₁/β, V = −2η₃ − η₁η₁ᵀ/β, ν = 2η₄ + D.  Base measure 1, and

    .. math::

        \kappa = -\tfrac D2\log\beta + \tfrac D2\log 2\pi + \tfrac{\nu D}2\log 2 - \tfrac\nu2\log|V|
                 + \log\Gamma_D(\tfrac\nu2),\\
        E[u] = (\nu V^{-1}m,\ D/\beta + \nu m^\top V^{-1}m,\ \nu V^{-1},\
                \psi_D(\tfrac\nu2) + D\log 2 - \log|V|),\qquad H = \kappa - \eta^\top E[u].

    The marginal of μ is a multivariate Student-t with ν − D + 1 degrees of freedom, location m
    and scale matrix V/(β(ν − D + 1)); ``mean()`` = m and ``cov()`` = V/(β(ν − D − 1)) for ν > D + 1.

    Parameters
    ----------
    mean : array_like, shape (D,) or batch + (D,)
        m.
    beta : array_like
        β > 0, the precision scaling of μ (batch-shaped).
    dof : array_like
        ν > D − 1.
    scale : array_like
        The inverse scale matrix V of the Wishart (a scalar s means s·I).
    """

    event_ndims = (1, 0, 2, 0)
    __slots__ = ()

    def __init__(self, mean, beta, dof, scale) -> None:
        owner = "GaussianWishart"
        m = as_array(owner, "mean", mean, min_ndim=1)
        d = m.shape[-1]
        v = la.spd_matrix(owner, "scale", scale, d)
        b = positive(owner, "beta", beta)
        nu = as_array(owner, "dof", dof)
        bad = ~(nu > d - 1)
        if bad.any():
            raise ValueError(f"{owner}: dof must exceed D − 1 = {d - 1}, got {nu[bad].ravel()[0].item()!r}")
        batch = batch_of(owner, mean=m.shape[:-1], beta=b.shape, dof=nu.shape, scale=v.shape[:-2])
        m = np.broadcast_to(m, batch + (d,))
        b = np.broadcast_to(b, batch)
        nu = np.broadcast_to(nu, batch)
        v = np.broadcast_to(v, batch + (d, d))
        bm = b[..., None] * m
        super().__init__(bm, -0.5 * b, -0.5 * (v + bm[..., :, None] * m[..., None, :]), 0.5 * (nu - d))

    # ------------------------------------------------------------------------------ parameters
    @property
    def dim(self) -> int:
        """D."""
        return self._nat[0].shape[-1]

    @property
    def beta(self) -> np.ndarray:
        """β = −2η₂."""
        return -2.0 * self._nat[1]

    @property
    def location(self) -> np.ndarray:
        """m = η₁/β."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self._nat[0] / self.beta[..., None]

    @property
    def dof(self) -> np.ndarray:
        """ν = 2η₄ + D."""
        return 2.0 * self._nat[3] + self.dim

    @property
    def scale(self) -> np.ndarray:
        """The Wishart's inverse scale V = −2η₃ − η₁η₁ᵀ/β."""
        e1 = self._nat[0]
        with np.errstate(divide="ignore", invalid="ignore"):
            return -2.0 * la.sym(self._nat[2]) - e1[..., :, None] * e1[..., None, :] / self.beta[..., None, None]

    @property
    def precision(self) -> Wishart:
        """The Wishart(ν, V) marginal of Λ."""
        return Wishart.from_natural(-0.5 * self.scale, 0.5 * (self.dof - self.dim - 1.0))

    def _wishart(self) -> Wishart:
        if "w" not in self._cache:
            self._cache["w"] = self.precision
        return self._cache["w"]

    def mean(self) -> np.ndarray:
        """E[μ] = m."""
        return self.location

    def cov(self) -> np.ndarray:
        """Cov[μ] = V/(β(ν − D − 1)) for ν > D + 1, +inf otherwise."""
        c = self.dof - self.dim - 1.0
        with np.errstate(divide="ignore", invalid="ignore"):
            out = self.scale / (self.beta * c)[..., None, None]
        return np.where((c > 0)[..., None, None], out, np.inf)

    def var(self) -> np.ndarray:
        """diag Cov[μ]."""
        return np.diagonal(self.cov(), axis1=-2, axis2=-1).copy()

    def is_proper(self) -> np.ndarray:
        """β > 0 and the Wishart marginal proper."""
        b = self.beta
        return (b > 0) & np.isfinite(b) & self._wishart().is_proper() & np.isfinite(self._nat[0]).all(-1)

    # ------------------------------------------------------------------------------ exp. family
    def sufficient_stats(self, mu, lam) -> Nat:
        """u(μ, Λ) = (Λμ, μᵀΛμ, Λ, log|Λ|)."""
        mu = np.asarray(mu, dtype=float)
        lam = np.asarray(lam, dtype=float)
        lm = la.matvec(lam, mu)
        sign, logdet = np.linalg.slogdet(lam)
        return lm, np.einsum("...i,...i->...", mu, lm), lam, np.where(sign > 0, logdet, np.nan)

    def expected_stats(self) -> Nat:
        """E[u] = (νV⁻¹m, D/β + νmᵀV⁻¹m, νV⁻¹, E[log|Λ|])."""
        w = self._wishart()
        elam, elog = w.expected_stats()
        m = self.location
        lm = la.matvec(elam, m)
        with np.errstate(divide="ignore", invalid="ignore"):
            q = self.dim / self.beta + np.einsum("...i,...i->...", m, lm)
        return lm, q, elam, elog

    def log_partition(self) -> np.ndarray:
        """κ = −(D/2) log β + (D/2) log 2π + κ_Wishart(ν, V) (+inf where improper)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            k = (-0.5 * self.dim * np.log(self.beta) + 0.5 * self.dim * _LOG_2PI
                 + 0.5 * self.dof * self.dim * _LOG_2 - 0.5 * self.dof * self._wishart().logdet_scale()
                 + log_multigamma(0.5 * self.dof, self.dim))
        return where_proper(k, self.is_proper(), np.inf)

    def entropy(self) -> np.ndarray:
        """H = H_Wishart + (D/2)(1 + log 2π) − (D/2) log β − ½E[log|Λ|]."""
        w = self._wishart()
        with np.errstate(divide="ignore", invalid="ignore"):
            h = (w.entropy() + 0.5 * self.dim * (1.0 + _LOG_2PI) - 0.5 * self.dim * np.log(self.beta)
                 - 0.5 * w.mean_logdet())
        return where_proper(h, self.is_proper(), np.nan)

    def logpdf(self, mu, lam) -> np.ndarray:
        """log N(μ | m, (βΛ)⁻¹) + log W(Λ | ν, V)."""
        mu = np.asarray(mu, dtype=float)
        lam = la.sym(np.asarray(lam, dtype=float))
        d = self.dim
        r = mu - self.location
        sign, logdet = np.linalg.slogdet(lam)
        with np.errstate(divide="ignore", invalid="ignore"):
            lg = (0.5 * d * np.log(self.beta) - 0.5 * d * _LOG_2PI + 0.5 * logdet
                  - 0.5 * self.beta * la.quad(lam, r))
        return np.where(sign > 0, lg, -np.inf) + self._wishart().logpdf(lam)

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> tuple[np.ndarray, np.ndarray]:
        """Joint draws (μ, Λ): Λ of shape ``shape + batch_shape + (D, D)``, μ of that shape + (D,)."""
        rng = as_rng(rng)
        lam = self._wishart().sample(shape, rng)
        size = as_shape(shape) + self.batch_shape
        z = rng.standard_normal(size + (self.dim,))
        chol = np.linalg.cholesky(lam * self.beta[..., None, None])
        # μ = m + L⁻ᵀz has covariance (LLᵀ)⁻¹ = (βΛ)⁻¹
        x = np.linalg.solve(np.swapaxes(chol, -1, -2), z[..., None])[..., 0]
        return self.location + x, lam
