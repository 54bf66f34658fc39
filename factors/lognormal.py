"""Log-normal factor LogN(out | μ, τ⁻¹): log out ~ N(μ, τ⁻¹), with constant or random (Gaussian) μ and constant
or random (Gamma) precision τ.  In the log-normal statistics (l, l²), l = log out, it is the Gaussian factor
of l plus the Jacobian −l:

    E[log f] = −E[l] + ½(E[log τ] − log 2π) − ½E[τ]·(E[l²] − 2E[l]E[μ] + E[μ²]),

conjugate in every edge: to out (l, l²): (E[τ]E[μ] − 1, −½E[τ]); to μ: (E[τ]E[l], −½E[τ]); to τ (τ, log τ):
(−½E[(l − μ)²], ½).  An observed positive x enters through (log x, log² x).
"""

from __future__ import annotations

import numpy as np

from distributions import Gamma, Gaussian, LogNormal

from .base import LOG_2PI, FactorType, Moments

LOGNORMAL = FactorType("LogNormal", out=LogNormal, mu=Gaussian, precision=Gamma)


def _sq_dev(m: Moments) -> np.ndarray:
    lx, mu = m["out"], m["mu"]
    return lx[1] - 2.0 * lx[0] * mu[0] + mu[1]


@LOGNORMAL.rule("out", "vmp")
def lognormal_to_out(m: Moments, p: dict) -> tuple:
    tau = m["precision"][0]
    return (tau * m["mu"][0] - 1.0, -0.5 * tau)


@LOGNORMAL.rule("mu", "vmp")
def lognormal_to_mu(m: Moments, p: dict) -> tuple:
    tau = m["precision"][0]
    return (tau * m["out"][0], -0.5 * tau)


@LOGNORMAL.rule("precision", "vmp")
def lognormal_to_precision(m: Moments, p: dict) -> tuple:
    d = -0.5 * _sq_dev(m)
    return (d, np.full(np.shape(d), 0.5))


@LOGNORMAL.evidence(kind="exact")
def lognormal_evidence(m: Moments, p: dict) -> np.ndarray:
    tau = m["precision"]
    return -m["out"][0] + 0.5 * (tau[1] - LOG_2PI) - 0.5 * tau[0] * _sq_dev(m)


def lognormal_logpdf(x: np.ndarray, mu: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """log LogN(x | μ, τ⁻¹) (vectorised; for pointwise log-likelihoods)."""
    lx = np.log(x)
    return -lx + 0.5 * (np.log(tau) - LOG_2PI) - 0.5 * tau * (lx - mu) ** 2
