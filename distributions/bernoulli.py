"""Bernoulli distribution on {0, 1}, batched, stored by its logit."""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from ._checks import _describe, exactly_one, in_unit_interval
from .base import ExponentialFamily, Nat, RngLike, Shape, as_rng, as_shape, where_proper
from .categorical import LOG_TINY


def log1pexp(x: np.ndarray) -> np.ndarray:
    """log(1 + eˣ), stable for large |x|."""
    return np.logaddexp(0.0, x)


class Bernoulli(ExponentialFamily):
    r"""Bernoulli distribution q(x = 1) = p on {0, 1}, batched over leading axes.

    .. math::

        \log q(x) = x\eta - \log(1 + e^{\eta}),\qquad \eta = \operatorname{logit} p = \log\frac{p}{1-p}

    Sufficient statistic u(x) = x, natural parameter η = logit p, base measure 1,

    .. math::

        \kappa = \log(1 + e^\eta),\qquad E[u] = \sigma(\eta) = p,\qquad
        H = -p\log p - (1-p)\log(1-p) = \kappa - \eta p.

    Parameters
    ----------
    probs : array_like, optional
        p ∈ [0, 1].
    logits : array_like, optional
        logit p (no nan).  Give exactly one of the two.

    Notes
    -----
    p = 0 or 1 (logit ∓inf) is stored as the logit ∓708 (p within 1e-307 of the bound) so that the
    message algebra never produces nan.  The flat message η = 0 is the proper p = ½.
    """

    event_ndims = (0,)
    __slots__ = ()
    _repr_fields = ("probs",)

    def __init__(self, probs=None, logits=None) -> None:
        owner = "Bernoulli"
        if exactly_one(owner, probs=probs, logits=logits) == "probs":
            p = in_unit_interval(owner, "probs", probs)
            with np.errstate(divide="ignore"):
                log_p = np.log(p)
                log_q = np.log1p(-p)
            eta = np.maximum(log_p, LOG_TINY) - np.maximum(log_q, LOG_TINY)
        else:
            try:
                eta = np.asarray(logits, dtype=float)
            except (TypeError, ValueError) as err:
                raise ValueError(f"{owner}: logits must be numeric, got {logits!r}") from err
            bad = np.isnan(eta)
            if bad.any():
                raise ValueError(f"{owner}: logits must not be nan, got {_describe(eta, bad)}")
            eta = np.clip(eta, LOG_TINY, -LOG_TINY)
        super().__init__(eta)

    # ------------------------------------------------------------------------------ parameters
    @property
    def logits(self) -> np.ndarray:
        """η = logit p."""
        return self._nat[0]

    @property
    def probs(self) -> np.ndarray:
        """p = σ(η)."""
        return expit(self._nat[0])

    def mean(self) -> np.ndarray:
        """p."""
        return self.probs

    def var(self) -> np.ndarray:
        """p(1 − p) = σ(η)σ(−η)."""
        return expit(self._nat[0]) * expit(-self._nat[0])

    def is_proper(self) -> np.ndarray:
        """η not nan (±inf is a point mass, still a distribution)."""
        return ~np.isnan(self._nat[0])

    # ------------------------------------------------------------------------------ exp. family
    def sufficient_stats(self, x) -> Nat:
        """u(x) = x."""
        return (np.asarray(x, dtype=float),)

    def expected_stats(self) -> Nat:
        """E[u] = σ(η)."""
        return (self.probs,)

    def log_partition(self) -> np.ndarray:
        """κ = log(1 + e^η), computed stably."""
        return where_proper(log1pexp(self._nat[0]), self.is_proper(), np.inf)

    def entropy(self) -> np.ndarray:
        """H = log(1 + e^η) − η σ(η)."""
        e = self._nat[0]
        with np.errstate(invalid="ignore"):
            h = log1pexp(e) - np.where(np.isinf(e), 0.0, e * expit(e))
        return np.where(np.isinf(e), 0.0, h)

    def logpdf(self, x) -> np.ndarray:
        """log p for x = 1, log(1 − p) for x = 0 (−log(1 + e^{∓η})), −inf elsewhere."""
        x = np.asarray(x, dtype=float)
        e = self._nat[0]
        lp = np.where(x == 1, -log1pexp(-e), -log1pexp(e))
        return np.where((x == 0) | (x == 1), lp, -np.inf)

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Integer draws in {0, 1} of shape ``shape + batch_shape``."""
        size = as_shape(shape) + self.batch_shape
        return (as_rng(rng).random(size) < self.probs).astype(np.int64)

    def kl(self, other: Bernoulli) -> np.ndarray:
        """KL(q‖p) = (η_q − η_p)σ(η_q) − κ(η_q) + κ(η_p)."""
        self._check_same(other)
        eq, ep = self._nat[0], other._nat[0]
        return (eq - ep) * expit(eq) - log1pexp(eq) + log1pexp(ep)
