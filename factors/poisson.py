"""Poisson factors on observed counts y with an exposure e > 0 (rate e·λ):

``Poisson`` — conjugate, with a Gamma (or constant, or gated) rate λ:
    E[log f] = y(log e + E[log λ]) − e·E[λ] − log y!;
    to λ, in the Gamma statistics (λ, log λ): (−e, y).

``PoissonLog`` — a Gaussian log-rate x (log λ = x), non-conjugate.  With q(x) = N(m, v),
    S = E[log f] = y·m − e·exp(m + v/2) − log y! + y log e
is closed-form, and the NCVMP message is its gradient in x's mean parameters (E[x], E[x²]) (Knowles &
Minka 2011): with ∂S/∂m = y − e·exp(m + v/2), ∂S/∂v = −½e·exp(m + v/2),
    η₂ = ∂S/∂v,   η₁ = ∂S/∂m − 2m ∂S/∂v.

The observed counts carry the statistics (y, log y!); the log-exposure is the factor parameter
``log_exposure`` (aligned to the factor's plates, or a scalar).
"""

from __future__ import annotations

import numpy as np

from distributions import Gamma, Gaussian, Poisson

from .base import FactorType, Moments
from .contract import lazy_sum, plate_product
from .logistic import gradient_message

POISSON = FactorType("Poisson", out=Poisson, rate=Gamma)
POISSON_LOG = FactorType("PoissonLog", conjugate=False, out=Poisson, log_rate=Gaussian)


def _log_exposure(p: dict) -> np.ndarray | float:
    return p.get("log_exposure", 0.0)


@POISSON.rule("rate", "vmp")
def poisson_to_rate(m: Moments, p: dict) -> tuple:
    y = m["out"][0]
    le = _log_exposure(p)
    # not broadcast to the rate's plates: a singleton axis stands for a value repeated along its plate, and a
    # gated rate's weighted sum over rows is then a matrix product, never a rows × components array
    return (np.asarray(-np.exp(le), dtype=float), np.asarray(y, dtype=float))


@POISSON.evidence(kind="exact")
def poisson_evidence(m: Moments, p: dict) -> np.ndarray:
    y, log_fact = m["out"]
    lam, log_lam = m["rate"]
    le = _log_exposure(p)
    # kept factored where the rows and a gate's components sit on different plates (factors.contract)
    return lazy_sum(plate_product(y, log_lam), plate_product(-np.exp(le), lam), y * le - log_fact)


def _mv(m: Moments) -> tuple[np.ndarray, np.ndarray]:
    ex, ex2 = m["log_rate"]
    return ex, np.maximum(ex2 - ex * ex, 0.0)


def _expected_rate(m: Moments, p: dict) -> tuple[np.ndarray, np.ndarray]:
    """(E[x], e·E[exp x] = e·exp(m + v/2)) elementwise."""
    mean, var = _mv(m)
    with np.errstate(over="ignore"):
        return mean, np.exp(mean + 0.5 * var + _log_exposure(p))


@POISSON_LOG.rule("log_rate", "ncvmp")
def poisson_log_message(m: Moments, p: dict) -> tuple:
    mean, rate = _expected_rate(m, p)
    return gradient_message(mean, m["out"][0] - rate, -0.5 * rate)


@POISSON_LOG.initial("log_rate")
def poisson_log_first(m: Moments, p: dict) -> tuple:
    """NCVMP's first message: the second-order expansion of log f = y·x − e·eˣ at its data-driven point
    x₀ = log((y + ½)/e) (precision y + ½, precision·mean (y + ½)x₀ − ½).  From a broad prior the gradient
    message would need exp(m + v/2) at large variances and overshoot; this Newton step needs neither
    and does not change the fixed point."""
    y = m["out"][0]
    le = _log_exposure(p)
    shape = np.broadcast_shapes(y.shape, np.shape(le), m["log_rate"][0].shape)
    prec = np.broadcast_to(y + 0.5, shape)
    x0 = np.log(prec) - le
    return (prec * x0 - 0.5, -0.5 * prec)


@POISSON_LOG.evidence(kind="exact")
def poisson_log_evidence(m: Moments, p: dict) -> np.ndarray:
    y, log_fact = m["out"]
    mean, rate = _expected_rate(m, p)
    return y * (mean + _log_exposure(p)) - rate - log_fact


def _rows(a, u: np.ndarray):
    """A factor-space parameter flattened to the rows of u (..., N) of a handler, or kept if it broadcasts."""
    a = np.asarray(a)
    if a.ndim and a.size == u.shape[-1] and a.shape[-1] != u.shape[-1]:
        return a.reshape(-1)
    return a


@POISSON_LOG.point("log_rate")
def poisson_log_point(u: np.ndarray, m: Moments, p: dict, order: int = 2) -> tuple:
    """log f = y·u − e·eᵘ − log y! + y log e, (log f)′ = y − e·eᵘ, (log f)″ = −e·eᵘ."""
    y, log_fact = m["out"]
    le = _rows(_log_exposure(p), u)
    with np.errstate(over="ignore"):
        rate = np.exp(u + le)
    return y * (u + le) - rate - log_fact, y - rate, -rate
