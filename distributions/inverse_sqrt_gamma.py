r"""The distribution of a standard deviation σ = τ^(−1/2) whose precision τ is Gamma(a, b), batched."""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln

from .base import Distribution, Quantiles, RngLike, Shape
from .gamma import Gamma
from .truncated_gamma import TruncatedGamma


class InverseSqrtGamma(Quantiles, Distribution):
    r"""σ = τ^(−1/2) with τ ~ Gamma(a, b) (shape a, rate b): the posterior of a scale built with
    ``fg.half_cauchy`` and the like, reported on the σ scale.

    .. math::

        \log p(\sigma) = \log 2 + a\log b - \log\Gamma(a) - (2a + 1)\log\sigma - b\sigma^{-2},\qquad
        E[\sigma^k] = b^{k/2}\,\Gamma(a - k/2)/\Gamma(a)\ (a > k/2).

    Its cdf and quantiles are exact through the Gamma: P(σ ≤ s) = P(τ ≥ s⁻²).  ``precision`` is the
    Gamma over τ itself.  With a Gamma truncated to τ > c (``fg.uniform_scale``: σ < c^(−1/2)) the same
    relations hold with the truncated Gamma's moments, E[σ^k] = E[τ^(−k/2)] = b^(k/2) Γ(a − k/2, bc)/Γ(a, bc)
    (finite for every k), and its survival function.

    Parameters
    ----------
    precision : Gamma or TruncatedGamma
        The distribution of τ = σ⁻².
    """

    __slots__ = ("precision",)

    def __init__(self, precision: Gamma) -> None:
        if not isinstance(precision, Gamma | TruncatedGamma):
            raise TypeError("InverseSqrtGamma needs a Gamma or TruncatedGamma over the precision, got "
                            f"{type(precision).__name__}")
        self.precision = precision

    @property
    def _truncated(self) -> bool:
        return isinstance(self.precision, TruncatedGamma)

    @property
    def batch_shape(self) -> Shape:
        return self.precision.batch_shape

    @property
    def event_shape(self) -> Shape:
        return ()

    @property
    def shape(self) -> np.ndarray:
        """a, the Gamma's shape."""
        return self.precision.shape

    @property
    def rate(self) -> np.ndarray:
        """b, the Gamma's rate."""
        return self.precision.rate

    def moment(self, k: float) -> np.ndarray:
        """E[σ^k] = b^(k/2) Γ(a − k/2)/Γ(a), +inf where a ≤ k/2 (truncated: E[τ^(−k/2)])."""
        if self._truncated:
            return self.precision.moment(-0.5 * k)
        a, b = self.shape, self.rate
        with np.errstate(invalid="ignore", divide="ignore"):
            val = np.exp(0.5 * k * np.log(b) + gammaln(a - 0.5 * k) - gammaln(a))
        return np.where(a > 0.5 * k, val, np.inf)

    def mean(self) -> np.ndarray:
        """E[σ] = √b Γ(a − ½)/Γ(a) (a > ½)."""
        return self.moment(1.0)

    def var(self) -> np.ndarray:
        """E[σ²] − E[σ]² = b/(a − 1) − E[σ]² (a > 1), computed as E[σ]²(Γ(a)Γ(a−1)/Γ(a−½)² − 1)."""
        if self._truncated:
            m = self.mean()
            return self.moment(2.0) - m * m
        a = self.shape
        m = self.mean()
        with np.errstate(invalid="ignore", over="ignore"):
            ratio = np.expm1(gammaln(a) + gammaln(a - 1.0) - 2.0 * gammaln(a - 0.5))
            v = m * m * ratio
        return np.where(a > 1.0, v, np.inf)

    def mean_log(self) -> np.ndarray:
        """E[log σ] = −E[log τ]/2 = −(ψ(a) − log b)/2 (untruncated)."""
        if self._truncated:
            return -0.5 * self.precision.mean_log()
        return -0.5 * (digamma(self.shape) - np.log(self.rate))

    def logpdf(self, x) -> np.ndarray:
        """log p(σ) = log q_τ(σ⁻²) + log 2 − 3 log σ for σ > 0, −inf otherwise."""
        x = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            lp = self.precision.logpdf(1.0 / (x * x)) + np.log(2.0) - 3.0 * np.log(x)
        return np.where(x > 0, lp, -np.inf)

    def cdf(self, x) -> np.ndarray:
        """P(σ ≤ x) = P(τ ≥ x⁻²)."""
        from scipy.special import gammaincc

        x = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore"):
            if self._truncated:
                return np.where(x > 0, self.precision.sf(1.0 / (x * x)), 0.0)
            return np.where(x > 0, gammaincc(self.shape, self.rate / (x * x)), 0.0)

    def ppf(self, q) -> np.ndarray:
        """The q-quantile: σ_q = (τ_{1−q})^(−1/2)."""
        from scipy.special import gammainccinv

        q = np.asarray(q, dtype=float)
        if self._truncated:
            return self.precision.isf(q) ** -0.5
        return np.sqrt(self.rate / gammainccinv(self.shape, q))

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Draws of σ: τ^(−1/2) of Gamma draws."""
        return self.precision.sample(shape, rng) ** -0.5

    def entropy(self) -> np.ndarray:
        """H[σ] = H[τ] − E[log |dτ/dσ|] = H[τ] − log 2 + 3 E[log σ]."""
        return self.precision.entropy() - np.log(2.0) + 3.0 * self.mean_log()

    def __repr__(self) -> str:
        return f"InverseSqrtGamma(precision={self.precision!r})"
