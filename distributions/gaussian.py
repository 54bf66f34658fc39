"""Scalar Gaussian N(m, v), batched."""

from __future__ import annotations

import numpy as np

from ._checks import as_array, broadcast, exactly_one, positive
from .base import ExponentialFamily, Nat, RngLike, Shape, as_rng, as_shape, where_proper

_LOG_2PI = float(np.log(2.0 * np.pi))


class Gaussian(ExponentialFamily):
    r"""Scalar Gaussian N(x | m, v), batched over leading axes.

    .. math::

        \log q(x) = -\tfrac12\log(2\pi v) - \frac{(x - m)^2}{2v}

    Sufficient statistics u(x) = (x, x²), natural parameters η = (m/v, −1/(2v)), base measure 1,

    .. math::

        \kappa(\eta) = -\frac{\eta_1^2}{4\eta_2} - \tfrac12\log(-2\eta_2) + \tfrac12\log 2\pi,
        \qquad E[u] = (m, m^2 + v),\qquad H = \tfrac12\log(2\pi e v).

    Parameters
    ----------
    mean : array_like
        Mean m (finite).
    var, precision : array_like, optional
        Variance v > 0 or precision 1/v > 0; give at most one (default v = 1).

    Notes
    -----
    A message with η₂ ≥ 0 is improper (``is_proper`` False); its ``mean``/``var`` are still
    η₁/(−2η₂) and 1/(−2η₂) (negative variance, or inf/nan for the flat message η = 0).
    """

    event_ndims = (0, 0)
    __slots__ = ()
    _repr_fields = ("mean", "var")

    def __init__(self, mean=0.0, var=None, precision=None) -> None:
        owner = "Gaussian"
        m = as_array(owner, "mean", mean)
        if var is None and precision is None:
            var = 1.0
        which = exactly_one(owner, var=var, precision=precision)
        if which == "var":
            tau = 1.0 / positive(owner, "var", var)
        else:
            tau = positive(owner, "precision", precision)
        m, tau = broadcast(owner, mean=m, **{which: tau})
        super().__init__(m * tau, -0.5 * tau)

    # ------------------------------------------------------------------------------ parameters
    @property
    def precision(self) -> np.ndarray:
        """Precision 1/v = −2η₂."""
        return -2.0 * self._nat[1]

    def mean(self) -> np.ndarray:
        """m = η₁ / (−2η₂)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self._nat[0] / self.precision

    def var(self) -> np.ndarray:
        """v = 1 / (−2η₂)."""
        with np.errstate(divide="ignore"):
            return 1.0 / self.precision

    def is_proper(self) -> np.ndarray:
        """η₂ < 0 and η finite."""
        e1, e2 = self._nat
        return (e2 < 0) & np.isfinite(e1) & np.isfinite(e2)

    # ------------------------------------------------------------------------------ exp. family
    def sufficient_stats(self, x) -> Nat:
        """u(x) = (x, x²)."""
        x = np.asarray(x, dtype=float)
        return x, x * x

    def expected_stats(self) -> Nat:
        """E[u] = (m, m² + v)."""
        m, v = self.mean(), self.var()
        return m, m * m + v

    def log_partition(self) -> np.ndarray:
        """κ = ½m²/v + ½log v + ½log 2π (+inf where improper)."""
        proper = self.is_proper()
        with np.errstate(divide="ignore", invalid="ignore"):
            tau = self.precision
            k = 0.5 * self._nat[0] ** 2 / tau - 0.5 * np.log(tau) + 0.5 * _LOG_2PI
        return where_proper(k, proper, np.inf)

    def entropy(self) -> np.ndarray:
        """H = ½ log(2πe v)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            h = 0.5 * (_LOG_2PI + 1.0 - np.log(self.precision))
        return where_proper(h, self.is_proper(), np.nan)

    def logpdf(self, x) -> np.ndarray:
        """log N(x | m, v) = −½log(2πv) − (x − m)²/(2v)."""
        x = np.asarray(x, dtype=float)
        tau = self.precision
        return 0.5 * (np.log(tau) - _LOG_2PI) - 0.5 * tau * (x - self.mean()) ** 2

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Draws of shape ``shape + batch_shape``."""
        size = as_shape(shape) + self.batch_shape
        return self.mean() + np.sqrt(self.var()) * as_rng(rng).standard_normal(size)

    def kl(self, other: Gaussian) -> np.ndarray:
        """KL(q‖p) = ½[v_q/v_p + (m_q − m_p)²/v_p − 1 + log(v_p/v_q)]."""
        self._check_same(other)
        tq, tp = self.precision, other.precision
        r = tp / tq
        return 0.5 * (r + tp * (self.mean() - other.mean()) ** 2 - 1.0 - np.log(r))
