r"""A prior on a scale σ > 0 tilted by a Gaussian kernel: the mean-field posterior of a scale that multiplies."""

from __future__ import annotations

import numpy as np

from ._tilted_scale_kernel import (
    EXPONENTIAL,
    HALF_NORMAL,
    HALF_T,
    UNIFORM,
    proper,
    tilted_scale_logcdf,
    tilted_scale_ppf,
    tilted_scale_stats,
)
from .base import ExponentialFamily, Nat, Quantiles, Shape

_CODES = {"half_t": HALF_T, "half_normal": HALF_NORMAL, "exponential": EXPONENTIAL, "uniform": UNIFORM}


class TiltedScale(Quantiles, ExponentialFamily):
    r"""q(σ) ∝ h(σ) exp(η₁σ + η₂σ²) on σ > 0: a scale prior h times a Gaussian kernel, batched.

    .. math::

        q(\sigma) = h(\sigma)\,\exp\bigl(\eta_1\sigma + \eta_2\sigma^2 - \kappa(\eta)\bigr),\qquad
        \kappa(\eta) = \log\int_0^\infty h(\sigma)\,e^{\eta_1\sigma + \eta_2\sigma^2}\,d\sigma .

    It is the exponential family with statistics u(σ) = (σ, σ²) — a Gaussian's — and base measure h, the
    prior's normalised density: a half-Student-t (half-Cauchy), half-normal, exponential or U(0, U) law on σ.
    Gaussian messages (η₁, η₂) multiply into it unchanged, so it is the exact mean-field coordinate optimum
    of a scale that enters Gaussian terms linearly (θ = μ + σ·η, the non-centred parametrisation).
    κ, E[σ], Var[σ] and E[log h] come from a quadrature in log σ (:mod:`._tilted_scale_kernel`), accurate
    to about 1e-12.  The entropy is H = −E[log h] − ηᵀE[u] + κ; the ELBO of the prior term and q together is
    E[log h] + H = κ − ηᵀE[u] = −KL(q ‖ h) (:meth:`elbo_term`).

    Parameters
    ----------
    eta1, eta2 : array_like
        The kernel's natural parameters (the coefficients of σ and σ²).
    prior : str
        "half_t", "half_normal", "exponential" or "uniform".
    p0, p1 : array_like
        The prior's parameters in the kernel's form: half_t p0 = log(ν s²), p1 = (ν + 1)/2; half_normal
        p0 = 1/(2s²); exponential p0 = rate; uniform p0 = U.
    const : array_like
        log h(σ) − k(σ): the prior's normalising constant (see the kernel module for k).
    """

    event_ndims = (0, 0)
    __slots__ = ("_prior",)
    _repr_fields = ("mean", "std")

    def __init__(self, eta1, eta2, prior: str, p0, p1, const) -> None:
        super().__init__(eta1, eta2)
        self._prior = _prior(prior, p0, p1, const, self.batch_shape)

    @classmethod
    def from_natural(cls, *nat: np.ndarray, prior=None):
        """From natural parameters (η₁, η₂) and the prior (a dict: "prior", "p0", "p1", "const")."""
        if prior is None:
            raise TypeError("TiltedScale.from_natural needs prior={...}")
        obj = cls.__new__(cls)
        ExponentialFamily.__init__(obj, *nat)
        obj._prior = _prior(prior["prior"], prior["p0"], prior["p1"], prior["const"], obj.batch_shape)
        return obj

    @classmethod
    def uniform(cls, batch_shape: Shape = (), event_shape: Shape = ()):
        raise TypeError("TiltedScale has no flat message: messages to it are Gaussian natural parameters")

    @property
    def prior(self) -> dict:
        """The base measure: {"prior", "p0", "p1", "const"}."""
        return dict(self._prior)

    def _like(self, *nat: np.ndarray) -> TiltedScale:
        return type(self).from_natural(*nat, prior=self._prior)

    def __getitem__(self, index):
        idx = index if isinstance(index, tuple) else (index,)
        p = {k: (v[idx] if isinstance(v, np.ndarray) else v) for k, v in self._prior.items()}
        return type(self).from_natural(*(n[idx] for n in self._nat), prior=p)

    def __mul__(self, other):
        return self._like(*(a + b for a, b in zip(self._nat, other.natural, strict=True)))

    def __truediv__(self, other):
        return self._like(*(a - b for a, b in zip(self._nat, other.natural, strict=True)))

    def __pow__(self, power: float):
        raise TypeError("TiltedScale: a power would also raise the base measure; combine natural parameters")

    def damp(self, previous, alpha: float):
        """Damped (1 − α)·η_self + α·η_previous, the base measure kept."""
        if not 0.0 <= alpha < 1.0:
            raise ValueError(f"damping must lie in [0, 1), got {alpha!r}")
        return self._like(*((1.0 - alpha) * a + alpha * b for a, b in zip(self._nat, previous.natural, strict=True)))

    # ------------------------------------------------------------------------------ quadrature
    def _args(self, *extra):
        p = self._prior
        arrs = np.broadcast_arrays(p["p0"], p["p1"], *self._nat, *extra)
        return tuple(np.ascontiguousarray(a, dtype=float).reshape(-1) for a in arrs), arrs[0].shape

    def _stats(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(κ, E[σ], Var[σ], E[log h]), batch-shaped."""
        hit = self._cache.get("stats")
        if hit is None:
            flat, shape = self._args()
            lz, m, v, ek = tilted_scale_stats(_CODES[self._prior["prior"]], *flat)
            c = self._prior["const"]
            hit = (lz.reshape(shape) + c, m.reshape(shape), v.reshape(shape), ek.reshape(shape) + c)
            self._cache["stats"] = hit
        return hit

    def is_proper(self) -> np.ndarray:
        code = _CODES[self._prior["prior"]]
        p0, e1, e2 = np.broadcast_arrays(self._prior["p0"], *self._nat)
        return np.vectorize(lambda a, b, c: proper(code, a, b, c), otypes=[bool])(p0, e1, e2)

    def log_partition(self) -> np.ndarray:
        """κ(η) (+inf where improper)."""
        return self._stats()[0]

    def mean(self) -> np.ndarray:
        return self._stats()[1]

    def var(self) -> np.ndarray:
        return self._stats()[2]

    def expected_stats(self) -> Nat:
        """(E[σ], E[σ²])."""
        _, m, v, _ = self._stats()
        return (m, v + m * m)

    def sufficient_stats(self, x) -> Nat:
        x = np.asarray(x, dtype=float)
        return (x, x * x)

    def mean_log_prior(self) -> np.ndarray:
        """E_q[log h(σ)], the prior's expected log density."""
        return self._stats()[3]

    def elbo_term(self) -> np.ndarray:
        """E_q[log h] + H[q] = κ − ηᵀE[u] = −KL(q ‖ h): the prior term and the entropy together."""
        lz, m, v, _ = self._stats()
        return lz - self._nat[0] * m - self._nat[1] * (v + m * m)

    def entropy(self) -> np.ndarray:
        """H[q] = κ − ηᵀE[u] − E[log h]."""
        return self.elbo_term() - self.mean_log_prior()

    def _check_same(self, other) -> None:
        if not isinstance(other, TiltedScale) or other._prior["prior"] != self._prior["prior"]:
            raise TypeError(f"cannot compare TiltedScale with {type(other).__name__} of another base measure")

    def log_base(self, x) -> np.ndarray:
        """log h(x), the prior's log density (−inf outside its support)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return _log_prior(self._prior, np.asarray(x, dtype=float))

    def logpdf(self, x) -> np.ndarray:
        """log h(σ) + η₁σ + η₂σ² − κ for σ in the support, −inf elsewhere."""
        x = np.asarray(x, dtype=float)
        p = self._prior
        with np.errstate(divide="ignore", invalid="ignore"):
            lh = _log_prior(p, x)
            lp = lh + self._nat[0] * x + self._nat[1] * x * x - self._stats()[0]
        return np.where(np.isfinite(lh) & (x > 0), lp, -np.inf)

    def cdf(self, x) -> np.ndarray:
        """P(σ ≤ x), the ratio of the quadratures up to log x and over the whole range."""
        x = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore"):
            ux = np.log(np.maximum(x, 0.0))
        flat, shape = self._args(ux)
        out = np.exp(tilted_scale_logcdf(_CODES[self._prior["prior"]], *flat))
        return out.reshape(shape)

    def sf(self, x) -> np.ndarray:
        return 1.0 - self.cdf(x)

    def ppf(self, q) -> np.ndarray:
        """The q-quantile (Newton's method on the exact cdf, to 1e-12 in log σ)."""
        q = np.asarray(q, dtype=float)
        shape = np.broadcast_shapes(q.shape, self.batch_shape)
        k = len(shape) - len(self.batch_shape)  # leading sample axes
        qq = np.broadcast_to(q, shape).reshape((-1,) + self.batch_shape) if k else np.broadcast_to(q, shape)[None]
        qq = np.moveaxis(qq.reshape(qq.shape[0], -1), 0, 1)  # (elements, draws)
        p = self._prior
        flat = [np.ascontiguousarray(np.broadcast_to(a, self.batch_shape), dtype=float).reshape(-1)
                for a in (p["p0"], p["p1"], *self._nat)]
        out = tilted_scale_ppf(_CODES[p["prior"]], *flat, np.ascontiguousarray(qq))
        return np.moveaxis(out, 1, 0).reshape(shape)



def _prior(kind: str, p0, p1, const, batch: Shape) -> dict:
    if kind not in _CODES:
        raise ValueError(f"TiltedScale: unknown prior {kind!r}; have {sorted(_CODES)}")
    return {"prior": kind, **{k: np.broadcast_to(np.asarray(v, float), batch)
                              for k, v in (("p0", p0), ("p1", p1), ("const", const))}}


def _log_prior(p: dict, x: np.ndarray) -> np.ndarray:
    """log h(x), −inf outside the support."""
    kind, p0, p1, c = p["prior"], p["p0"], p["p1"], p["const"]
    if kind == "half_t":
        lh = c - p1 * np.log1p(x * x * np.exp(-p0))
    elif kind == "half_normal":
        lh = c - p0 * x * x
    elif kind == "exponential":
        lh = c - p0 * x
    else:
        lh = np.where(x < p0, c, -np.inf)
    return np.where(x > 0, lh, -np.inf)
