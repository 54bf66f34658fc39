"""A density of a positive variable tabulated on a uniform grid in log x (a quadrature's nodes)."""

from __future__ import annotations

import numpy as np

from .base import Distribution, Quantiles, Shape, describe


class GridDensity(Quantiles, Distribution):
    r"""q(x) on x > 0 given by its values at the nodes u_g = log x_g of a uniform grid (spacing h), scalar.

    Between nodes log q(u) (the density of u = log x) is linear, so the law is a continuous piecewise
    log-linear density in u, normalised exactly over [u_1, u_G].  With ``log_weights`` L_g = log q(u_g) + const:

    .. math::

        E[x^k] = \int e^{k u} q(u)\,du,\qquad P(x \le e^u) = \int_{u_1}^{u} q,

    each segment in closed form (the integral of an exponential of a linear function).  This is the trapezoid
    rule's own interpolant refined, so moments agree with the trapezoid sums to O(h²) and converge with the grid.

    Parameters
    ----------
    u : array_like, shape (G,)
        Increasing, equally spaced nodes in log x.
    log_weights : array_like, shape (G,)
        log q(u_g) up to an additive constant.
    """

    def __init__(self, u, log_weights) -> None:
        u = np.asarray(u, dtype=float)
        lw = np.asarray(log_weights, dtype=float)
        if u.ndim != 1 or u.size < 2 or u.shape != lw.shape or np.any(np.diff(u) <= 0) or not np.all(np.isfinite(lw)):
            raise ValueError("GridDensity: need increasing nodes u and finite log weights of the same length ≥ 2")
        self._u, self._lw = u, lw - lw.max()
        self._seg = self._segments(0.0)
        self._z = self._seg.sum()

    def _segments(self, k: float) -> np.ndarray:
        """∫ e^{k u} e^{L(u)} du over each segment, L linear between nodes (relative to max L)."""
        a, b = self._lw[:-1] + k * self._u[:-1], self._lw[1:] + k * self._u[1:]
        h = np.diff(self._u)
        d = b - a
        small = np.abs(d) < 1e-8
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            exact = h * (np.exp(b) - np.exp(a)) / np.where(small, 1.0, d)
        return np.where(small, h * np.exp(0.5 * (a + b)) * (1.0 + d * d / 24.0), exact)

    @property
    def nodes(self) -> np.ndarray:
        return np.exp(self._u)

    @property
    def batch_shape(self) -> Shape:
        return ()

    @property
    def event_shape(self) -> Shape:
        return ()

    def moment(self, k: float) -> float:
        """E[x^k]."""
        return float(self._segments(k).sum() / self._z)

    def mean(self) -> np.ndarray:
        return np.asarray(self.moment(1.0))

    def var(self) -> np.ndarray:
        m = self.moment(1.0)
        return np.asarray(max(self.moment(2.0) - m * m, 0.0))

    def logpdf(self, x) -> np.ndarray:
        """log q(x) = log q_u(log x) − log x (−inf outside the grid)."""
        x = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore"):
            u = np.log(x)
        inside = (u >= self._u[0]) & (u <= self._u[-1])
        lu = np.interp(u, self._u, self._lw) - np.log(self._z)
        return np.where(inside, lu - u, -np.inf)

    def cdf(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore"):
            u = np.clip(np.log(np.maximum(x, 0.0)), self._u[0], self._u[-1])
        cum = np.concatenate([[0.0], np.cumsum(self._seg)])
        i = np.clip(np.searchsorted(self._u, u, side="right") - 1, 0, self._u.size - 2)
        a = self._lw[i]
        d = self._lw[i + 1] - a
        h = self._u[i + 1] - self._u[i]
        t = u - self._u[i]
        slope = d / h
        small = np.abs(slope * h) < 1e-8
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            part = np.where(small, np.exp(a) * t, np.exp(a) * np.expm1(slope * t) / np.where(small, 1.0, slope))
        return (cum[i] + part) / self._z

    def ppf(self, q) -> np.ndarray:
        """The quantile: the segment by the cumulative masses, then the closed-form inverse within it."""
        q = np.asarray(q, dtype=float)
        cum = np.concatenate([[0.0], np.cumsum(self._seg)]) / self._z
        i = np.clip(np.searchsorted(cum, q, side="right") - 1, 0, self._u.size - 2)
        rest = (q - cum[i]) * self._z
        a = self._lw[i]
        slope = (self._lw[i + 1] - a) / (self._u[i + 1] - self._u[i])
        small = np.abs(slope) < 1e-10
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            t = np.where(small, rest * np.exp(-a), np.log1p(rest * slope * np.exp(-a)) / np.where(small, 1.0, slope))
        return np.exp(np.clip(self._u[i] + t, self._u[0], self._u[-1]))

    def entropy(self) -> np.ndarray:
        """H[x] = H[u] + E[u] by the same piecewise rule (on a fine subdivision of each segment)."""
        u = np.linspace(self._u[0], self._u[-1], 20 * (self._u.size - 1) + 1)
        lq = np.interp(u, self._u, self._lw) - np.log(self._z)
        f = np.exp(lq) * (-lq + u)
        return np.asarray(float(np.sum(0.5 * (f[1:] + f[:-1]) * np.diff(u))))

    def __repr__(self) -> str:
        return describe(self, ("mean", "std"))
