"""Multivariate Gaussian factor N(out | mean, Λ⁻¹) with a Wishart precision matrix Λ.

With S = E[(x − μ)(x − μ)ᵀ] = E[xxᵀ] − E[x]E[μ]ᵀ − E[μ]E[x]ᵀ + E[μμᵀ]:

    E[log f] = ½E[log|Λ|] − (D/2) log 2π − ½ tr(E[Λ] S).

Messages: to out and to mean (E[Λ]E[other], −½E[Λ]); to the precision, in the Wishart statistics
(Λ, log|Λ|), (−½S, ½).  Every message and the evidence are per factor instance, so a gated
precision Λ[z] (a Gaussian mixture with full covariances) is weighted by q(z) like any other factor.
The scatter S and the products Λx are passed on in factored form (``factors.contract.Terms``) and
tr(ΛS) is a sum of three batched matrix products, so rows × components × D × D arrays are never formed.
"""

from __future__ import annotations

import numpy as np

from distributions import MvGaussian, Wishart

from .base import LOG_2PI, FactorType, Moments
from .contract import Terms, pair_inner

MV_GAUSSIAN_WISHART = FactorType("MvGaussianWishart", out=MvGaussian, mean=MvGaussian, precision=Wishart)


def _scatter(m: Moments) -> Terms:
    """S = E[xxᵀ] − E[x]E[μ]ᵀ − E[μ]E[x]ᵀ + E[μμᵀ], as factored terms (never formed over rows × components)."""
    x, mu = m["out"], m["mean"]
    return Terms((1.0, x[1]), (-1.0, "outer", x[0], mu[0]), (-1.0, "outer", mu[0], x[0]), (1.0, mu[1]))


def _matvec(lam: np.ndarray, v: np.ndarray) -> Terms | np.ndarray:
    """Λv: formed when it is no larger than v, else kept factored for the reduction."""
    shape = np.broadcast_shapes(lam.shape[:-2], v.shape[:-1])
    if int(np.prod(shape)) <= int(np.prod(v.shape[:-1])):
        return np.einsum("...ij,...j->...i", lam, v)
    return Terms((1.0, "matvec", lam, v))


def _trace_scatter(lam: np.ndarray, m: Moments) -> np.ndarray:
    """tr(Λ S) per factor instance = tr(Λ E[xxᵀ]) − 2 E[x]ᵀΛE[μ] + tr(Λ E[μμᵀ]), each by ``pair_inner``
    (tr(AB) = Σ_ij Aᵀ_ij B_ij; the transpose is taken of the smaller operand)."""
    x, mu = m["out"], m["mean"]

    def tr(a, b):
        return pair_inner(np.swapaxes(a, -1, -2), b, 2) if a.size <= b.size else pair_inner(
            a, np.swapaxes(b, -1, -2), 2)

    # the cross terms tr(Λ(xμᵀ + μxᵀ)) = xᵀ(Λ + Λᵀ)μ, through whichever of (Λ + Λᵀ)μ, (Λ + Λᵀ)x is smaller
    sym = lam + np.swapaxes(lam, -1, -2)
    s_mu = np.broadcast_shapes(lam.shape[:-2], mu[0].shape[:-1])
    s_x = np.broadcast_shapes(lam.shape[:-2], x[0].shape[:-1])
    if int(np.prod(s_mu)) <= int(np.prod(s_x)):
        cross = pair_inner(x[0], np.einsum("...ij,...j->...i", sym, mu[0]), 1)
    else:
        cross = pair_inner(mu[0], np.einsum("...ij,...j->...i", sym, x[0]), 1)
    return tr(lam, x[1]) - cross + tr(lam, mu[1])


@MV_GAUSSIAN_WISHART.rule("out", "vmp")
def mvw_to_out(m: Moments, p: dict) -> tuple:
    lam = m["precision"][0]
    return (_matvec(lam, m["mean"][0]), -0.5 * lam)


@MV_GAUSSIAN_WISHART.rule("mean", "vmp")
def mvw_to_mean(m: Moments, p: dict) -> tuple:
    lam = m["precision"][0]
    return (_matvec(lam, m["out"][0]), -0.5 * lam)


@MV_GAUSSIAN_WISHART.rule("precision", "vmp")
def mvw_to_precision(m: Moments, p: dict) -> tuple:
    shape = np.broadcast_shapes(m["out"][0].shape[:-1], m["mean"][0].shape[:-1])
    return (_scatter(m).scaled(-0.5), np.full(shape, 0.5))


@MV_GAUSSIAN_WISHART.evidence(kind="exact")
def mvw_evidence(m: Moments, p: dict) -> np.ndarray:
    lam, logdet = m["precision"]
    D = lam.shape[-1]
    return 0.5 * logdet - 0.5 * D * LOG_2PI - 0.5 * _trace_scatter(lam, m)
