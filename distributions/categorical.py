"""Categorical distribution over K labels {0, …, K−1}, batched, stored by (unnormalised) logits."""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from ._checks import _describe, as_array, exactly_one
from ._softmax_kernel import softmax_rows
from .base import ExponentialFamily, Nat, RngLike, Shape, as_rng, as_shape, where_proper

#: log of the smallest normal double: the logit given to a zero probability (relative to the largest)
LOG_TINY = float(np.log(np.finfo(float).tiny))


def _logsumexp(eta: np.ndarray, keepdims: bool = False) -> np.ndarray:
    """log Σ_k e^{η_k} over the last axis, max-shifted; rows with a non-finite maximum (all −inf, +inf,
    nan) go to scipy's ``logsumexp``, whose conventions they keep."""
    eta = np.asarray(eta, dtype=float)
    top = np.max(eta, axis=-1, keepdims=True)
    if eta.shape[-1] == 0 or not np.isfinite(top).all():
        return logsumexp(eta, axis=-1, keepdims=keepdims)
    out = top + np.log(np.exp(eta - top).sum(axis=-1, keepdims=True))
    return out if keepdims else out[..., 0]


def log_softmax(eta: np.ndarray) -> np.ndarray:
    """η − logsumexp(η) over the last axis (max-shifted)."""
    return eta - _logsumexp(eta, keepdims=True)


def _floor_neg_inf(logits: np.ndarray) -> np.ndarray:
    """Replace −inf logits by (largest logit) + log(tiny), keeping the message algebra free of nan."""
    if not np.isneginf(logits).any():
        return logits
    top = np.max(logits, axis=-1, keepdims=True)
    return np.where(np.isneginf(logits), top + LOG_TINY, logits)


class Categorical(ExponentialFamily):
    r"""Categorical distribution over labels {0, …, K−1}, batched over leading axes.

    .. math::

        q(x = k) = p_k = \frac{e^{\eta_k}}{\sum_j e^{\eta_j}}

    Sufficient statistics u(x) = one-hot(x) (length K), natural parameters η = log p up to an
    additive constant (a message need not be normalised), base measure 1,

    .. math::

        \kappa = \log\sum_k e^{\eta_k},\qquad E[u] = \mathrm{softmax}(\eta),\qquad
        H = -\sum_k p_k\log p_k.

    Parameters
    ----------
    probs : array_like, shape batch + (K,), optional
        Probabilities (non-negative, summing to 1 to within 1e-6).
    logits : array_like, shape batch + (K,), optional
        Unnormalised log-probabilities (no nan or +inf).  Give exactly one of the two.

    Notes
    -----
    ``mean``, ``var`` and ``cov`` are the moments of the one-hot vector (as for a multinomial with
    one trial): p, p(1 − p), diag(p) − ppᵀ.  ``sample`` returns integer labels and ``logpdf`` takes
    integer labels (anything else scores −inf).  A zero probability (a −inf logit) is stored as the
    largest logit + log(tiny) ≈ −708, i.e. a probability below 1e-307, so products, ratios and
    damping never produce nan; ``logpdf`` of such a label is about −708 rather than −inf.
    """

    event_ndims = (1,)
    __slots__ = ()
    _repr_fields = ("probs",)

    def __init__(self, probs=None, logits=None) -> None:
        owner = "Categorical"
        which = exactly_one(owner, probs=probs, logits=logits)
        if which == "probs":
            p = as_array(owner, "probs", probs, min_ndim=1)
            bad = p < 0
            if bad.any():
                raise ValueError(f"{owner}: probs must be non-negative, got {_describe(p, bad)}")
            s = p.sum(axis=-1)
            bad = np.abs(s - 1.0) > 1e-6
            if bad.any():
                raise ValueError(f"{owner}: probs must sum to 1 over the last axis, got sum "
                                 f"{_describe(s, bad)}")
            with np.errstate(divide="ignore"):
                eta = np.log(p)
        else:
            try:
                eta = np.asarray(logits, dtype=float)
            except (TypeError, ValueError) as err:
                raise ValueError(f"{owner}: logits must be numeric, got {logits!r}") from err
            if eta.ndim < 1 or eta.shape[-1] == 0:
                raise ValueError(f"{owner}: logits need a non-empty last (category) axis, got shape "
                                 f"{eta.shape}")
            bad = np.isnan(eta) | np.isposinf(eta)
            if bad.any():
                raise ValueError(f"{owner}: logits must not be nan or +inf, got {_describe(eta, bad)}")
            bad = np.isneginf(eta).all(axis=-1)
            if bad.any():
                raise ValueError(f"{owner}: logits are all -inf over the category axis (no category "
                                 f"possible), got {eta.tolist()!r}")
        super().__init__(_floor_neg_inf(eta))

    # ------------------------------------------------------------------------------ parameters
    @property
    def dim(self) -> int:
        """Number of categories K."""
        return self._nat[0].shape[-1]

    def _softmax(self) -> None:
        """log p, p and H in one pass (``_softmax_kernel``); rows without a finite maximum keep scipy's
        conventions through ``log_softmax``."""
        eta = np.ascontiguousarray(self._nat[0], dtype=float)
        k = eta.shape[-1]
        if k > 0:
            rows = eta.reshape(-1, k)
            logp, p, h = np.empty_like(rows), np.empty_like(rows), np.empty(rows.shape[0])
            if softmax_rows(rows, logp, p, h):  # every row proper: a finite maximum, no nan
                self._cache.update(logp=logp.reshape(eta.shape), p=p.reshape(eta.shape),
                                   h=h.reshape(eta.shape[:-1]), all_proper=True)
                return
        logp = log_softmax(eta)
        p = np.exp(logp)
        with np.errstate(invalid="ignore"):
            h = -np.where(p > 0, p * logp, 0.0).sum(axis=-1)
        self._cache.update(logp=logp, p=p, h=h)

    @property
    def logits(self) -> np.ndarray:
        """Normalised log-probabilities log p = η − logsumexp(η)."""
        if "logp" not in self._cache:
            self._softmax()
        return self._cache["logp"]

    @property
    def probs(self) -> np.ndarray:
        """p = softmax(η)."""
        if "p" not in self._cache:
            self._softmax()
        return self._cache["p"]

    def mean(self) -> np.ndarray:
        """E[one-hot(x)] = p."""
        return self.probs

    def var(self) -> np.ndarray:
        """Var[one-hot(x)] = p(1 − p)."""
        p = self.probs
        return p * (1.0 - p)

    def cov(self) -> np.ndarray:
        """Cov[one-hot(x)] = diag(p) − ppᵀ."""
        p = self.probs
        return p[..., :, None] * np.eye(self.dim) - p[..., :, None] * p[..., None, :]

    def is_proper(self) -> np.ndarray:
        """No nan or +inf logit and at least one finite logit."""
        if "logp" not in self._cache:
            self._softmax()
        if self._cache.get("all_proper"):
            return np.ones(self._nat[0].shape[:-1], dtype=bool)
        e = self._nat[0]
        return ~(np.isnan(e) | np.isposinf(e)).any(axis=-1) & np.isfinite(e).any(axis=-1)

    # ------------------------------------------------------------------------------ exp. family
    def sufficient_stats(self, x) -> Nat:
        """u(x) = one-hot(x), shape ``x.shape + (K,)``."""
        x = np.asarray(x)
        return ((x[..., None] == np.arange(self.dim)).astype(float),)

    def expected_stats(self) -> Nat:
        """E[u] = softmax(η)."""
        return (self.probs,)

    def log_partition(self) -> np.ndarray:
        """κ = logsumexp(η) (max-shifted)."""
        return where_proper(_logsumexp(self._nat[0]), self.is_proper(), np.inf)

    def entropy(self) -> np.ndarray:
        """H = −Σ p_k log p_k."""
        if "h" not in self._cache:
            self._softmax()
        return self._cache["h"]

    def logpdf(self, x) -> np.ndarray:
        """log p_x for integer labels x (−inf for anything outside {0, …, K−1})."""
        x = np.asarray(x)
        out_shape = np.broadcast_shapes(x.shape, self.batch_shape)
        xb = np.broadcast_to(x, out_shape)
        if np.issubdtype(xb.dtype, np.integer):
            valid = (xb >= 0) & (xb < self.dim)
        else:
            xf = xb.astype(float)
            with np.errstate(invalid="ignore"):
                valid = (xf == np.floor(xf)) & (xf >= 0) & (xf < self.dim)
        idx = np.where(valid, xb, 0).astype(np.intp)
        lp = np.broadcast_to(self.logits, out_shape + (self.dim,))
        out = np.take_along_axis(lp, idx[..., None], axis=-1)[..., 0]
        return np.where(valid, out, -np.inf)

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Integer labels of shape ``shape + batch_shape`` (Gumbel-max)."""
        size = as_shape(shape) + self._nat[0].shape
        g = as_rng(rng).gumbel(size=size)
        return np.argmax(self._nat[0] + g, axis=-1)

    def kl(self, other: Categorical) -> np.ndarray:
        """KL(q‖p) = Σ_k q_k (log q_k − log p_k)."""
        self._check_same(other)
        q = self.probs
        with np.errstate(invalid="ignore"):
            return np.where(q > 0, q * (self.logits - other.logits), 0.0).sum(axis=-1)
