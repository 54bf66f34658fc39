r"""Gamma distribution truncated to x > c (a left-truncated Gamma), batched."""

from __future__ import annotations

import numpy as np
from scipy.special import gammaincc, gammainccinv

from ._checks import as_array, broadcast, positive
from ._truncated_gamma_kernel import truncated_gamma_logz, truncated_gamma_stats
from .base import ExponentialFamily, Nat, RngLike, Shape, as_rng, as_shape, describe
from .gamma import Gamma


def _flat(fn, *arrays):
    """Apply a flat-array kernel elementwise to broadcast arrays and restore their shape."""
    arrs = np.broadcast_arrays(*(np.asarray(x, float) for x in arrays))
    shape = arrs[0].shape
    out = fn(*(np.ascontiguousarray(x).reshape(-1) for x in arrs))
    if isinstance(out, tuple):
        return tuple(o.reshape(shape) for o in out)
    return out.reshape(shape)


class TruncatedGamma(ExponentialFamily):
    r"""Gamma(a, b) truncated to x > c (shape a, rate b, lower bound c > 0), batched.

    .. math::

        q(x) = \frac{x^{a-1}e^{-bx}}{b^{-a}\,\Gamma(a, bc)}\,[x > c],\qquad
        \Gamma(a, y) = \int_y^\infty t^{a-1}e^{-t}\,dt

    (the upper incomplete gamma function, not regularised).  The truncation makes it proper for every real a
    when b > 0, and for a < 0 when b = 0 (a Pareto law).  It is the exponential family of the Gamma with the
    base measure [x > c]: statistics u(x) = (x, log x), natural parameters η = (−b, a − 1), and

    .. math::

        \kappa(\eta) = \log\Gamma(a, bc) - a\log b,\qquad
        E[x] = \frac{a}{b} + \frac{c^a b^{a-1} e^{-bc}}{\Gamma(a, bc)},\qquad
        E[x^s] = b^{-s}\frac{\Gamma(a + s, bc)}{\Gamma(a, bc)},\qquad
        E[\log x] = \partial_a\kappa = \frac{\partial_a\Gamma(a, bc)}{\Gamma(a, bc)} - \log b,

    H = κ − (a − 1)E[log x] + bE[x].  Γ(a, y) and its a-derivative (the log moment) come from a quadrature
    in log t (:mod:`._truncated_gamma_kernel`), accurate to about 1e-13; E[x] agrees with its closed form above.
    With b = 0 (η₁ = 0, a < 0): κ = a log c − log(−a), E[log x] = log c − 1/a, E[x] = c a/(a + 1) (a < −1).

    Products and ratios of messages (natural-parameter sums) keep the bound: a Gamma message from a
    Gaussian term multiplied into a truncated Gamma gives the truncated Gamma of the summed parameters.

    Parameters
    ----------
    shape : array_like
        a (any real number; a < 0 needs rate 0 or positive rate).
    rate : array_like
        b ≥ 0.
    lower : array_like
        c > 0, the truncation point.
    """

    event_ndims = (0, 0)
    __slots__ = ("_lower",)
    _repr_fields = ("shape", "rate", "lower")

    def __init__(self, shape, rate, lower) -> None:
        owner = "TruncatedGamma"
        a = as_array(owner, "shape", shape)
        b = as_array(owner, "rate", rate)
        c = positive(owner, "lower", lower)
        if np.any(b < 0):
            raise ValueError(f"{owner}: rate must be non-negative, got {b[b < 0].ravel()[0]!r}")
        a, b, c = broadcast(owner, shape=a, rate=b, lower=c)
        if np.any((b == 0) & (a >= 0)):
            raise ValueError(f"{owner}: with rate 0 the shape must be negative (a Pareto law), got "
                             f"{a[(b == 0) & (a >= 0)].ravel()[0]!r}")
        super().__init__(-b, a - 1.0)
        self._lower = c

    @classmethod
    def from_natural(cls, *nat: np.ndarray, lower=None):
        """From natural parameters (−b, a − 1) and the bound c (no validation: messages may be improper)."""
        if lower is None:
            raise TypeError("TruncatedGamma.from_natural needs lower=c")
        obj = cls.__new__(cls)
        ExponentialFamily.__init__(obj, *nat)
        obj._lower = np.broadcast_to(np.asarray(lower, float), obj.batch_shape)
        return obj

    @classmethod
    def uniform(cls, batch_shape: Shape = (), event_shape: Shape = ()):
        raise TypeError("TruncatedGamma has no flat message: messages to it are Gamma natural parameters")

    def _like(self, *nat: np.ndarray) -> TruncatedGamma:
        return type(self).from_natural(*nat, lower=self._lower)

    def __getitem__(self, index):
        idx = index if isinstance(index, tuple) else (index,)
        return type(self).from_natural(*(n[idx] for n in self._nat), lower=self._lower[idx])

    def __mul__(self, other):
        return self._like(*(a + b for a, b in zip(self._nat, _nat_of(self, other), strict=True)))

    def __truediv__(self, other):
        return self._like(*(a - b for a, b in zip(self._nat, _nat_of(self, other), strict=True)))

    def __pow__(self, power: float):
        return self._like(*(power * a for a in self._nat))

    def damp(self, previous, alpha: float):
        """Damped (1 − α)·η_self + α·η_previous, the bound kept."""
        if not 0.0 <= alpha < 1.0:
            raise ValueError(f"damping must lie in [0, 1), got {alpha!r}")
        prev = _nat_of(self, previous)
        return self._like(*((1.0 - alpha) * a + alpha * b for a, b in zip(self._nat, prev, strict=True)))

    # ------------------------------------------------------------------------------ parameters
    @property
    def shape(self) -> np.ndarray:
        """a = η₂ + 1."""
        return self._nat[1] + 1.0

    @property
    def rate(self) -> np.ndarray:
        """b = −η₁."""
        return -self._nat[0]

    @property
    def lower(self) -> np.ndarray:
        """c, the truncation point."""
        return self._lower

    def is_proper(self) -> np.ndarray:
        """b > 0 (any a), or b = 0 and a < 0; finite parameters."""
        a, b = self.shape, self.rate
        fin = np.isfinite(a) & np.isfinite(b) & np.isfinite(self._lower) & (self._lower > 0)
        return fin & ((b > 0) | ((b == 0) & (a < 0)))

    def _stats(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(κ, E[log x], E[x], Var[x]), nan where improper (cached: the object is immutable)."""
        hit = self._cache.get("stats")
        if hit is not None:
            return hit
        a, b, c = np.broadcast_arrays(self.shape, self.rate, self._lower)
        ok = self.is_proper()
        pos = ok & (b > 0)
        bb = np.where(pos, b, 1.0)
        logz, mlog, mt, vt = _flat(truncated_gamma_stats, np.where(pos, a, 1.0), np.where(pos, bb * c, 1.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            kappa = logz - a * np.log(bb)
            elog = mlog - np.log(bb)
            mean, var = mt / bb, vt / (bb * bb)
            # b = 0: the Pareto law c^(−a)(−a) x^(a−1) on x > c
            par = ok & (b == 0)
            ap = np.where(par, a, -2.0)
            kappa = np.where(par, ap * np.log(c) - np.log(-ap), kappa)
            elog = np.where(par, np.log(c) - 1.0 / ap, elog)
            mean = np.where(par, np.where(ap < -1, c * ap / (ap + 1.0), np.inf), mean)
            var = np.where(par, np.where(ap < -2, c * c * ap / (ap + 2.0) - mean * mean, np.inf), var)
        out = tuple(np.where(ok, s, np.nan) for s in (kappa, elog, mean, var))
        self._cache["stats"] = out
        return out

    # ------------------------------------------------------------------------------ moments
    def mean(self) -> np.ndarray:
        """E[x] = a/b + c^a b^(a−1) e^(−bc)/Γ(a, bc)."""
        return self._stats()[2]

    def var(self) -> np.ndarray:
        """Var[x] (by the quadrature, centred: no cancellation when c ≫ a/b)."""
        return self._stats()[3]

    def mean_log(self) -> np.ndarray:
        """E[log x] = ∂κ/∂a."""
        return self._stats()[1]

    def log_partition(self) -> np.ndarray:
        """κ = log Γ(a, bc) − a log b (+inf where improper)."""
        k = self._stats()[0]
        return np.where(self.is_proper(), k, np.inf)

    def expected_stats(self) -> Nat:
        """E[u] = (E[x], E[log x])."""
        s = self._stats()
        return s[2], s[1]

    def sufficient_stats(self, x) -> Nat:
        """u(x) = (x, log x)."""
        x = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return x, np.log(x)

    def entropy(self) -> np.ndarray:
        """H = κ − (a − 1)E[log x] + bE[x] (the b-term omitted where b = 0)."""
        k, elog, mean, _ = self._stats()
        with np.errstate(invalid="ignore"):
            return k - (self.shape - 1.0) * elog + np.where(self.rate > 0, self.rate * mean, 0.0)

    def moment(self, s: float) -> np.ndarray:
        """E[x^s] = b^(−s) Γ(a + s, bc)/Γ(a, bc) (any real s when b > 0)."""
        a, b, c = np.broadcast_arrays(self.shape, self.rate, self._lower)
        with np.errstate(divide="ignore", invalid="ignore"):
            pos = b > 0
            bb = np.where(pos, b, 1.0)
            lz = _flat(truncated_gamma_logz, a + s, bb * c) - _flat(truncated_gamma_logz, a, bb * c)
            val = np.exp(lz - s * np.log(bb))
            ap = np.where(pos, -2.0, a)
            par = np.where(ap + s < 0, c**s * ap / (ap + s), np.inf)
        return np.where(self.is_proper(), np.where(pos, val, par), np.nan)

    def logpdf(self, x) -> np.ndarray:
        """(a − 1) log x − bx − κ for x > c, −inf otherwise."""
        x = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            lp = (self.shape - 1.0) * np.log(x) - self.rate * x - self._stats()[0]
        return np.where(x > self._lower, lp, -np.inf)

    def sf(self, x) -> np.ndarray:
        """P(X > x) = Γ(a, b·max(x, c))/Γ(a, bc); (x/c)^a when b = 0."""
        x = np.maximum(np.asarray(x, dtype=float), self._lower)
        return _sf(self.shape, self.rate, self._lower, x)

    def cdf(self, x) -> np.ndarray:
        """P(X ≤ x) = 1 − sf(x)."""
        return 1.0 - self.sf(x)

    def isf(self, p) -> np.ndarray:
        """The x with P(X > x) = p, by bisection in log x (to 1e-14 relative)."""
        p = np.asarray(p, dtype=float)
        shape = np.broadcast_shapes(p.shape, self.batch_shape)
        a, b, c = (np.broadcast_to(z, shape) for z in (self.shape, self.rate, self._lower))
        return _isf(a, b, c, np.broadcast_to(p, shape))

    def ppf(self, q) -> np.ndarray:
        """The q-quantile, isf(1 − q)."""
        return self.isf(1.0 - np.asarray(q, dtype=float))

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Draws of shape ``shape + batch_shape``: by the Gamma's inverse cdf where the truncation keeps
        at least 1% of its mass (a > 0), else by rejection in log(x/c) under the tangent of its log-concave
        log density at 0.  b = 0: a Pareto inverse cdf."""
        rng = as_rng(rng)
        size = as_shape(shape) + self.batch_shape
        a, b, c = (np.broadcast_to(z, size) for z in (self.shape, self.rate, self._lower))
        u = rng.uniform(size=size)
        out = np.empty(size)
        par = b == 0
        out[par] = c[par] * (1.0 - u[par]) ** (1.0 / a[par])
        keep = np.zeros(size)
        pos = ~par & (a > 0)
        keep[pos] = gammaincc(a[pos], b[pos] * c[pos])  # the Gamma's mass above c
        inv = ~par & (a > 0) & (keep > 0.01)
        out[inv] = gammainccinv(a[inv], keep[inv] * (1.0 - u[inv])) / b[inv]
        todo = ~par & ~inv
        # here the density of z = log(x/c) ≥ 0, ∝ exp(az − bc(eᶻ − 1)), is log-concave and decreasing from 0
        # (a ≤ 0, or bc beyond the Gamma's 99% point): its tangent at 0 bounds it, so propose z from
        # Exponential(bc − a) and accept with probability exp(bc(1 + z − eᶻ))
        while todo.any():
            ai, yi = a[todo], b[todo] * c[todo]
            z = rng.exponential(1.0 / (yi - ai))
            ok = np.log(rng.uniform(size=z.shape)) < -yi * np.expm1(z) + yi * z
            idx = np.flatnonzero(todo.reshape(-1))
            out.reshape(-1)[idx[ok]] = c[todo][ok] * np.exp(z[ok])
            todo = todo.copy()
            todo.reshape(-1)[idx[ok]] = False
        return out

    def __repr__(self) -> str:

        return describe(self, self._repr_fields)


def _sf(a, b, c, x) -> np.ndarray:
    """P(X > x) for x ≥ c, elementwise."""
    with np.errstate(divide="ignore", invalid="ignore"):
        pos = b > 0
        bb = np.where(pos, b, 1.0)
        val = np.exp(_flat(truncated_gamma_logz, a, bb * x) - _flat(truncated_gamma_logz, a, bb * c))
        return np.where(pos, val, (x / c) ** a)


def _isf(a, b, c, p) -> np.ndarray:
    """The x ≥ c with P(X > x) = p, elementwise, by bracketing and bisection in log x."""
    lo = np.log(c)
    step = np.ones_like(lo)
    hi = lo + step
    for _ in range(200):
        more = _sf(a, b, c, np.exp(hi)) > p
        if not more.any():
            break
        lo = np.where(more, hi, lo)
        step = np.where(more, 2.0 * step, step)
        hi = np.where(more, hi + step, hi)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        above = _sf(a, b, c, np.exp(mid)) > p
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
        if np.all(hi - lo <= 1e-14 * (1.0 + np.abs(mid))):
            break
    return np.exp(0.5 * (lo + hi))


def _nat_of(self: TruncatedGamma, other) -> Nat:
    """The natural parameters of a message multiplied into a truncated Gamma: another one with the same
    bound, or a Gamma (a message from a conjugate term)."""

    if isinstance(other, TruncatedGamma):
        if not np.array_equal(np.broadcast_to(other.lower, self.batch_shape), self._lower):
            raise ValueError("cannot combine truncated Gammas with different bounds")
        return other.natural
    if isinstance(other, Gamma):
        return other.natural
    raise TypeError(f"cannot combine TruncatedGamma with {type(other).__name__}")
