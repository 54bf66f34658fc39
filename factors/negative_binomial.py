"""Negative binomial (NB2) counts on a Gaussian log-mean x, with an exposure e > 0 and a dispersion φ > 0.

The mean is μ = e·eˣ and Var y = μ + μ²/φ:

    log f = log Γ(y + φ) − log Γ(φ) − log y! + φ log φ + y log μ − (y + φ) log(φ + μ).

Since log(φ + μ) = log φ + softplus(x + c), c = log e − log φ, with q(x) = N(m, v) the expected log-likelihood

    S = E[log f] = log Γ(y + φ) − log Γ(φ) − log y! − y log φ + y(m + log e) − (y + φ)·E[softplus(x + c)]

is the logistic family's expectation (the exact Gauss–Hermite/series kernel ``logistic_expectations``), so the
evidence is exact, and the NCVMP message to x is the gradient of S in x's mean parameters (E[x], E[x²]):

    ∂S/∂m = y − (y + φ)·E[σ(x + c)],   ∂S/∂v = −½(y + φ)·E[σ(x + c)σ(−x − c)].

As φ → ∞ it tends to ``PoissonLog``.  The observed counts carry the statistics (y, log y!); ``dispersion`` and
``log_exposure`` are factor parameters aligned to the factor's plates (or scalars).
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from distributions import Gaussian, Poisson

from .base import FactorType, Moments
from .kernels import log1pexp, logistic_expectations
from .logistic import gradient_message

NEGATIVE_BINOMIAL_LOG = FactorType("NegativeBinomialLog", conjugate=False, out=Poisson, log_mean=Gaussian)


def _shift(p: dict) -> tuple[np.ndarray | float, np.ndarray | float]:
    """(φ, c = log e − log φ)."""
    phi = p["dispersion"]
    return phi, p.get("log_exposure", 0.0) - np.log(phi)


def _constant(y: np.ndarray, log_fact: np.ndarray, p: dict) -> np.ndarray:
    """log Γ(y + φ) − log Γ(φ) − log y! − y log φ + y log e: the part of S free of x."""
    phi = p["dispersion"]
    return gammaln(y + phi) - gammaln(phi) - log_fact - y * np.log(phi) + y * p.get("log_exposure", 0.0)


def _expectations(m: Moments, p: dict):
    ex, ex2 = m["log_mean"]
    _, c = _shift(p)
    return ex, logistic_expectations(ex + c, np.maximum(ex2 - ex * ex, 0.0))


@NEGATIVE_BINOMIAL_LOG.rule("log_mean", "ncvmp")
def negative_binomial_message(m: Moments, p: dict) -> tuple:
    y = m["out"][0]
    mean, (_, e_sig, half_e_sig2) = _expectations(m, p)
    w = y + p["dispersion"]
    return gradient_message(mean, y - w * e_sig, -w * half_e_sig2)


@NEGATIVE_BINOMIAL_LOG.initial("log_mean")
def negative_binomial_first(m: Moments, p: dict) -> tuple:
    """NCVMP's first message: the second-order expansion of log f at x₀ = log((y + ½)/e), where the mean is
    y + ½ (gradient g = y − (y + φ)σ₀, curvature −(y + φ)σ₀(1 − σ₀), σ₀ = (y + ½)/(y + ½ + φ)).  From a
    broad prior the gradient message would overshoot; this Newton step does not change the fixed point."""
    y = m["out"][0]
    phi, c = _shift(p)
    shape = np.broadcast_shapes(np.shape(y), np.shape(c), np.shape(phi), m["log_mean"][0].shape)
    mu0 = y + 0.5
    x0 = np.log(mu0) - p.get("log_exposure", 0.0)
    s0 = mu0 / (mu0 + phi)
    w = y + phi
    prec = w * s0 * (1.0 - s0)
    grad = y - w * s0
    return (np.broadcast_to(prec * x0 + grad, shape), np.broadcast_to(-0.5 * prec, shape))


@NEGATIVE_BINOMIAL_LOG.evidence(kind="exact")
def negative_binomial_evidence(m: Moments, p: dict) -> np.ndarray:
    y, log_fact = m["out"]
    mean, (value, _, _) = _expectations(m, p)
    return _constant(y, log_fact, p) + y * mean - (y + p["dispersion"]) * value


def _rows(a, u: np.ndarray):
    """A factor-space parameter flattened to the rows of u (..., N) of a handler, or kept if it broadcasts."""
    a = np.asarray(a)
    if a.ndim and a.size == u.shape[-1] and a.shape[-1] != u.shape[-1]:
        return a.reshape(-1)
    return a


def negative_binomial_logpdf(y: np.ndarray, x: np.ndarray, phi, log_exposure=0.0) -> np.ndarray:
    """log f(y | x) of NB2 with mean e·eˣ and dispersion φ (vectorised; for pointwise log-likelihoods)."""
    c = log_exposure - np.log(phi)
    return (gammaln(y + phi) - gammaln(phi) - gammaln(y + 1.0) - y * np.log(phi) + y * (x + log_exposure)
            - (y + phi) * log1pexp(x + c))


@NEGATIVE_BINOMIAL_LOG.point("log_mean")
def negative_binomial_point(u: np.ndarray, m: Moments, p: dict, order: int = 2) -> tuple:
    """log f at x = u, (log f)′ = y − (y + φ)σ(u + c), (log f)″ = −(y + φ)σ(u + c)σ(−u − c)."""
    y = m["out"][0]
    phi = _rows(p["dispersion"], u)
    le = _rows(p.get("log_exposure", 0.0), u)
    c = le - np.log(phi)
    sig = 0.5 * (1.0 + np.tanh(0.5 * (u + c)))
    w = y + phi
    return negative_binomial_logpdf(y, u, phi, le), y - w * sig, -w * sig * (1.0 - sig)
