"""Scalar log-normal LogN(μ, σ²) (log x ~ N(μ, σ²)), batched."""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

from ._checks import as_array, broadcast, positive
from .base import ExponentialFamily, Nat, RngLike, Shape, as_rng, as_shape, where_proper

_LOG_2PI = float(np.log(2.0 * np.pi))


class LogNormal(ExponentialFamily):
    r"""Scalar log-normal x > 0 with log x ~ N(μ, σ²), batched over leading axes.

    .. math::

        \log q(x) = -\log x - \tfrac12\log(2\pi\sigma^2) - \frac{(\log x - \mu)^2}{2\sigma^2}

    Sufficient statistics u(x) = (log x, log² x) and base measure 1, so that a factor's message is the gradient
    of its E[log f] in E[u] as for every family here: the density's −log x sits in the natural parameters,
    η = (μ/σ² − 1, −1/(2σ²)), and κ(η) is the Gaussian's at (η₁ + 1, η₂).  E[u] = (μ, μ² + σ²);
    E[x] = exp(μ + σ²/2), Var x = (e^{σ²} − 1)e^{2μ + σ²}, H = ½log(2πeσ²) + μ.

    Parameters
    ----------
    mu : array_like
        Mean of log x (finite).
    sigma : array_like
        Standard deviation of log x (> 0; default 1).
    """

    event_ndims = (0, 0)
    __slots__ = ()
    _repr_fields = ("mu", "sigma")

    def __init__(self, mu=0.0, sigma=1.0) -> None:
        owner = "LogNormal"
        m = as_array(owner, "mu", mu)
        s = positive(owner, "sigma", sigma)
        m, s = broadcast(owner, mu=m, sigma=s)
        tau = 1.0 / (s * s)
        super().__init__(m * tau - 1.0, -0.5 * tau)

    @classmethod
    def observed_stats(cls, x) -> Nat:
        """u(x) = (log x, log² x) of observed positive values."""
        lx = np.log(np.asarray(x, dtype=float))
        return lx, lx * lx

    # ------------------------------------------------------------------------------ parameters
    def _log_precision(self) -> np.ndarray:
        return -2.0 * self._nat[1]

    @property
    def mu(self) -> np.ndarray:
        """μ = (η₁ + 1) / (−2η₂), the mean of log x."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return (self._nat[0] + 1.0) / self._log_precision()

    @property
    def sigma(self) -> np.ndarray:
        """σ = (−2η₂)^(−½), the standard deviation of log x."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return 1.0 / np.sqrt(self._log_precision())

    def mean(self) -> np.ndarray:
        """E[x] = exp(μ + σ²/2)."""
        return np.exp(self.mu + 0.5 * self.sigma**2)

    def var(self) -> np.ndarray:
        """Var x = (e^{σ²} − 1) e^{2μ + σ²}."""
        s2 = self.sigma**2
        return np.expm1(s2) * np.exp(2.0 * self.mu + s2)

    def ppf(self, q) -> np.ndarray:
        """exp(μ + σΦ⁻¹(q))."""
        return np.exp(self.mu + self.sigma * ndtri(np.asarray(q, dtype=float)))

    def median(self) -> np.ndarray:
        """exp(μ)."""
        return np.exp(self.mu)

    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """The central interval holding ``level`` of the mass."""
        return self.ppf(0.5 * (1.0 - level)), self.ppf(0.5 * (1.0 + level))

    def is_proper(self) -> np.ndarray:
        """η₂ < 0 and η finite."""
        e1, e2 = self._nat
        return (e2 < 0) & np.isfinite(e1) & np.isfinite(e2)

    # ------------------------------------------------------------------------------ exp. family
    def sufficient_stats(self, x) -> Nat:
        """u(x) = (log x, log² x)."""
        return self.observed_stats(x)

    def expected_stats(self) -> Nat:
        """E[u] = (μ, μ² + σ²)."""
        m, s = self.mu, self.sigma
        return m, m * m + s * s

    def log_partition(self) -> np.ndarray:
        """κ = ½μ²/σ² + log σ + ½log 2π (+inf where improper): the Gaussian's at (η₁ + 1, η₂)."""
        proper = self.is_proper()
        with np.errstate(divide="ignore", invalid="ignore"):
            tau = self._log_precision()
            k = 0.5 * (self._nat[0] + 1.0) ** 2 / tau - 0.5 * np.log(tau) + 0.5 * _LOG_2PI
        return where_proper(k, proper, np.inf)

    def entropy(self) -> np.ndarray:
        """H = ½log(2πeσ²) + μ."""
        with np.errstate(divide="ignore", invalid="ignore"):
            h = 0.5 * (_LOG_2PI + 1.0 - np.log(self._log_precision())) + self.mu
        return where_proper(h, self.is_proper(), np.nan)

    def logpdf(self, x) -> np.ndarray:
        """log q(x) = −log x − ½log(2πσ²) − (log x − μ)²/(2σ²)."""
        lx = np.log(np.asarray(x, dtype=float))
        tau = self._log_precision()
        return -lx + 0.5 * (np.log(tau) - _LOG_2PI) - 0.5 * tau * (lx - self.mu) ** 2

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Draws of shape ``shape + batch_shape``."""
        size = as_shape(shape) + self.batch_shape
        return np.exp(self.mu + self.sigma * as_rng(rng).standard_normal(size))

    def kl(self, other: LogNormal) -> np.ndarray:
        """KL(q‖p), that of the Gaussians of log x."""
        self._check_same(other)
        tq, tp = self._log_precision(), other._log_precision()
        r = tp / tq
        return 0.5 * (r + tp * (self.mu - other.mu) ** 2 - 1.0 - np.log(r))
