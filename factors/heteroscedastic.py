"""Heteroscedastic Gaussian N(y | μ, e^(2s)) with a Gaussian log standard deviation s (a variable or an expression
such as ``fg.inner(X, v) + c``):

    log f = −½ log 2π − s − ½ (y − μ)² e^(−2s).

Under a mean-field q, with W = E[e^(−2s)] = exp(−2m_s + 2v_s) (the Gaussian's moment generating function) and
Q = E[(y − μ)²] = E[y²] − 2E[y]E[μ] + E[μ²],

    S = E[log f] = −½ log 2π − m_s − ½ Q W,

in closed form (exact evidence).  Messages: to y and to μ, conjugate given W: (W·E[·], −½W) (VMP, as the
Gaussian factor's with precision W); to s, the NCVMP gradient message in (E[s], E[s²]) with
∂S/∂m_s = −1 + QW, ∂S/∂v_s = −QW.

``GaussianLogNormalSd`` is the same factor with a log-normal standard deviation σ = e^s on the edge ``log_sd``:
its statistics (log σ, log² σ) are s's (E[s], E[s²]), so the expectations and messages are the same, and the
message is a log-normal natural parameter (NCVMP in log space).
"""

from __future__ import annotations

import numpy as np

from distributions import Gaussian, LogNormal

from .base import LOG_2PI, FactorType, Moments
from .logistic import gradient_message

GAUSSIAN_LOG_SD = FactorType("GaussianLogSd", conjugate=False, out=Gaussian, mean=Gaussian, log_sd=Gaussian)
GAUSSIAN_LOGNORMAL_SD = FactorType("GaussianLogNormalSd", conjugate=False, out=Gaussian, mean=Gaussian,
                                   log_sd=LogNormal)


def _w(m: Moments) -> tuple[np.ndarray, np.ndarray]:
    """(E[s], W = E[e^(−2s)])."""
    ex, ex2 = m["log_sd"]
    var = np.maximum(ex2 - ex * ex, 0.0)
    with np.errstate(over="ignore"):
        return ex, np.exp(-2.0 * ex + 2.0 * var)


def _q(m: Moments) -> np.ndarray:
    x, mu = m["out"], m["mean"]
    return x[1] - 2.0 * x[0] * mu[0] + mu[1]


@GAUSSIAN_LOGNORMAL_SD.rule("out", "vmp")
@GAUSSIAN_LOG_SD.rule("out", "vmp")
def log_sd_to_out(m: Moments, p: dict) -> tuple:
    _, w = _w(m)
    return (w * m["mean"][0], -0.5 * w)


@GAUSSIAN_LOGNORMAL_SD.rule("mean", "vmp")
@GAUSSIAN_LOG_SD.rule("mean", "vmp")
def log_sd_to_mean(m: Moments, p: dict) -> tuple:
    _, w = _w(m)
    return (w * m["out"][0], -0.5 * w)


@GAUSSIAN_LOGNORMAL_SD.rule("log_sd", "ncvmp")
@GAUSSIAN_LOG_SD.rule("log_sd", "ncvmp")
def log_sd_to_log_sd(m: Moments, p: dict) -> tuple:
    ex, w = _w(m)
    qw = _q(m) * w
    return gradient_message(ex, -1.0 + qw, -qw)


@GAUSSIAN_LOGNORMAL_SD.evidence(kind="exact")
@GAUSSIAN_LOG_SD.evidence(kind="exact")
def log_sd_evidence(m: Moments, p: dict) -> np.ndarray:
    ex, w = _w(m)
    return -0.5 * LOG_2PI - ex - 0.5 * _q(m) * w


@GAUSSIAN_LOG_SD.point("log_sd")
def log_sd_point(u: np.ndarray, m: Moments, p: dict, order: int = 2) -> tuple:
    """log f at s = u: −½ log 2π − u − ½Q e^(−2u); derivatives −1 + Q e^(−2u) and −2Q e^(−2u)."""
    qe = _q(m) * np.exp(-2.0 * u)
    return -0.5 * LOG_2PI - u - 0.5 * qe, -1.0 + qe, -2.0 * qe
