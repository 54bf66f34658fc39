"""Multivariate Gaussian factor N(out | mean, Λ⁻¹) with a Wishart precision matrix Λ.

With S = E[(x − μ)(x − μ)ᵀ] = E[xxᵀ] − E[x]E[μ]ᵀ − E[μ]E[x]ᵀ + E[μμᵀ]:

    E[log f] = ½E[log|Λ|] − (D/2) log 2π − ½ tr(E[Λ] S).

Messages: to out and to mean (E[Λ]E[other], −½E[Λ]); to the precision, in the Wishart statistics
(Λ, log|Λ|), (−½S, ½).  Every message and the evidence are per factor instance, so a gated
precision Λ[z] (a Gaussian mixture with full covariances) is weighted by q(z) like any other factor.
"""

from __future__ import annotations

import numpy as np

from distributions import MvGaussian, Wishart

from .base import LOG_2PI, FactorType, Moments

MV_GAUSSIAN_WISHART = FactorType("MvGaussianWishart", out=MvGaussian, mean=MvGaussian, precision=Wishart)


def _scatter(m: Moments) -> np.ndarray:
    x, mu = m["out"], m["mean"]
    cross = x[0][..., :, None] * mu[0][..., None, :]
    return x[1] - cross - np.swapaxes(cross, -1, -2) + mu[1]


@MV_GAUSSIAN_WISHART.rule("out", "vmp")
def mvw_to_out(m: Moments, p: dict) -> tuple:
    lam = m["precision"][0]
    return (np.einsum("...ij,...j->...i", lam, m["mean"][0]), -0.5 * lam)


@MV_GAUSSIAN_WISHART.rule("mean", "vmp")
def mvw_to_mean(m: Moments, p: dict) -> tuple:
    lam = m["precision"][0]
    return (np.einsum("...ij,...j->...i", lam, m["out"][0]), -0.5 * lam)


@MV_GAUSSIAN_WISHART.rule("precision", "vmp")
def mvw_to_precision(m: Moments, p: dict) -> tuple:
    s = _scatter(m)
    return (-0.5 * s, np.full(s.shape[:-2], 0.5))


@MV_GAUSSIAN_WISHART.evidence(kind="exact")
def mvw_evidence(m: Moments, p: dict) -> np.ndarray:
    lam, logdet = m["precision"]
    s = _scatter(m)
    D = s.shape[-1]
    return 0.5 * logdet - 0.5 * D * LOG_2PI - 0.5 * np.einsum("...ij,...ji->...", lam, s)
