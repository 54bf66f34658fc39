"""Ordered outcomes y ∈ {0, …, K−1} on a Gaussian latent η with constant sorted cutpoints c₁ < … < c_{K−1}:
P(y = k | η) = F(c_{k+1} − η) − F(c_k − η), with c₀ = −∞, c_K = +∞, F the logistic σ or the normal Φ.
Write hi = c_{y+1}, lo = c_y for the observed category.

``OrderedLogistic``: since σ(a) − σ(b) = σ(a)σ(−b)(1 − e^(b−a)),

    log f = −softplus(η − hi) − softplus(lo − η) + log(1 − e^(lo − hi)),

(a term with an infinite cutpoint is 0), so with q(η) = N(m, v) S = E[log f] is two of the logistic family's
exact expectations (``logistic_expectations``, at means m − hi and lo − m), with

    ∂S/∂m = −E[σ(η − hi)] + E[σ(lo − η)],   ∂S/∂v = −½E[σσ′(η − hi)] − ½E[σσ′(lo − η)]:

exact evidence, closed-form NCVMP messages.

``OrderedProbit``: g(η) = log(Φ(hi − η) − Φ(lo − η)) (log-concave), S = E[g], ∂S/∂m = E[g′], ∂S/∂v = ½E[g″],
by the sinh-substituted trapezoid rule centred on the interval (``kernels.sinh_trapezoid_expectation``), exact
to rounding; the evidence is labelled exact.

The observed category is carried on ``out`` as a number (statistics (y, y²)); the parameter ``cuts`` is the
extended cutpoint vector (−∞, c₁, …, c_{K−1}, +∞).  The message to η is the gradient of S in η's mean parameters
(E[η], E[η²]).
"""

from __future__ import annotations

import numpy as np
from scipy.special import log_ndtr

from distributions import Gaussian

from .base import FactorType, Moments
from .kernels import log1pexp, logistic_expectations, sinh_trapezoid_expectation
from .logistic import gradient_message

ORDERED_LOGISTIC = FactorType("OrderedLogistic", conjugate=False, out=Gaussian, eta=Gaussian)
ORDERED_PROBIT = FactorType("OrderedProbit", conjugate=False, out=Gaussian, eta=Gaussian)

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


def interval(y: np.ndarray, cuts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) = (c_y, c_{y+1}) of each observed category y, from the extended cutpoints."""
    k = np.asarray(y).astype(np.intp)
    return cuts[k], cuts[k + 1]


def _finite(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ok = np.isfinite(a)
    return ok, np.where(ok, a, 0.0)


def _log_gap(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """log(1 − e^(lo − hi)), 0 where a cutpoint is infinite."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(lo) & np.isfinite(hi), np.log(-np.expm1(np.where(np.isfinite(lo - hi),
                                                                                      lo - hi, -1.0))), 0.0)


def _logistic_terms(m: Moments, p: dict):
    ex, ex2 = m["eta"]
    var = np.maximum(ex2 - ex * ex, 0.0)
    lo, hi = interval(m["out"][0], p["cuts"])
    ok_hi, hi_f = _finite(hi)
    ok_lo, lo_f = _finite(lo)
    a_val, a_dm, a_dv = logistic_expectations(ex - hi_f, var)  # E[softplus(η − hi)]
    b_val, b_dm, b_dv = logistic_expectations(lo_f - ex, var)  # E[softplus(lo − η)]
    value = -np.where(ok_hi, a_val, 0.0) - np.where(ok_lo, b_val, 0.0) + _log_gap(lo, hi)
    dm = -np.where(ok_hi, a_dm, 0.0) + np.where(ok_lo, b_dm, 0.0)
    dv = -np.where(ok_hi, a_dv, 0.0) - np.where(ok_lo, b_dv, 0.0)
    return ex, value, dm, dv


@ORDERED_LOGISTIC.rule("eta", "ncvmp")
def ordered_logistic_message(m: Moments, p: dict) -> tuple:
    ex, _, dm, dv = _logistic_terms(m, p)
    return gradient_message(ex, dm, dv)


@ORDERED_LOGISTIC.evidence(kind="exact")
def ordered_logistic_evidence(m: Moments, p: dict) -> np.ndarray:
    return _logistic_terms(m, p)[1]


def ordered_logistic_log_density(u: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple:
    """log f(η = u) and its first two derivatives in u."""
    ok_hi, hi_f = _finite(hi)
    ok_lo, lo_f = _finite(lo)
    s_hi = 0.5 * (1.0 + np.tanh(0.5 * (u - hi_f)))  # σ(u − hi)
    s_lo = 0.5 * (1.0 + np.tanh(0.5 * (lo_f - u)))  # σ(lo − u)
    val = -np.where(ok_hi, log1pexp(u - hi_f), 0.0) - np.where(ok_lo, log1pexp(lo_f - u), 0.0) + _log_gap(lo, hi)
    d1 = -np.where(ok_hi, s_hi, 0.0) + np.where(ok_lo, s_lo, 0.0)
    d2 = -np.where(ok_hi, s_hi * (1.0 - s_hi), 0.0) - np.where(ok_lo, s_lo * (1.0 - s_lo), 0.0)
    return val, d1, d2


def ordered_probit_log_density(u: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple:
    """g(u) = log(Φ(hi − u) − Φ(lo − u)) and its first two derivatives in u, stable in both tails: the interval
    (a, b) = (lo − u, hi − u) is reflected to (−b, −a) where a > 0, so that Φ(b) − Φ(a) = Φ(b)(1 − Φ(a)/Φ(b))
    is taken where the larger term is at least ½."""
    a, b = lo - u, hi - u
    flip = a > 0.0
    a2, b2 = np.where(flip, -b, a), np.where(flip, -a, b)
    lb, la = log_ndtr(b2), log_ndtr(a2)
    with np.errstate(divide="ignore"):
        g = lb + np.log(-np.expm1(la - lb))
    with np.errstate(over="ignore", invalid="ignore"):
        pa = np.where(np.isfinite(a), np.exp(-0.5 * a * a - _LOG_SQRT_2PI - g), 0.0)  # φ(a)/f
        pb = np.where(np.isfinite(b), np.exp(-0.5 * b * b - _LOG_SQRT_2PI - g), 0.0)  # φ(b)/f
        ta = np.where(np.isfinite(a), a * pa, 0.0)
        tb = np.where(np.isfinite(b), b * pb, 0.0)
    d1 = pa - pb  # d/du: (−φ(b) + φ(a))/f
    d2 = ta - tb - d1 * d1  # d/du of (φ(a) − φ(b))/f with a′ = b′ = −1: (aφ(a) − bφ(b))/f − d1²
    return g, d1, d2


def _probit_terms(m: Moments, p: dict):
    ex, ex2 = m["eta"]
    var = np.maximum(ex2 - ex * ex, 0.0)
    lo, hi = interval(m["out"][0], p["cuts"])
    centre = np.where(np.isfinite(lo) & np.isfinite(hi), 0.5 * (np.where(np.isfinite(lo), lo, 0.0)
                                                                  + np.where(np.isfinite(hi), hi, 0.0)),
                      np.where(np.isfinite(lo), lo, np.where(np.isfinite(hi), hi, 0.0)))
    val, dm, dv = sinh_trapezoid_expectation(lambda u: ordered_probit_log_density(u, lo[..., None], hi[..., None]),
                                             ex, var, centre, 1.0, 200)
    return ex, val, dm, dv


@ORDERED_PROBIT.rule("eta", "ncvmp")
def ordered_probit_message(m: Moments, p: dict) -> tuple:
    ex, _, dm, dv = _probit_terms(m, p)
    return gradient_message(ex, dm, dv)


@ORDERED_PROBIT.evidence(kind="exact")
def ordered_probit_evidence(m: Moments, p: dict) -> np.ndarray:
    return _probit_terms(m, p)[1]


@ORDERED_LOGISTIC.point("eta")
def ordered_logistic_point(u: np.ndarray, m: Moments, p: dict, order: int = 2) -> tuple:
    lo, hi = interval(m["out"][0], p["cuts"])
    return ordered_logistic_log_density(u, lo, hi)


@ORDERED_PROBIT.point("eta")
def ordered_probit_point(u: np.ndarray, m: Moments, p: dict, order: int = 2) -> tuple:
    lo, hi = interval(m["out"][0], p["cuts"])
    return ordered_probit_log_density(u, lo, hi)
