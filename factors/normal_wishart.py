"""The normal–Wishart block q(μ, Λ) (Bishop 2006 §10.2; BayesPy's GaussianWishart node).

Statistics of the joint variable: u(μ, Λ) = (Λμ, μᵀΛμ, Λ, log|Λ|).

``NORMAL_WISHART`` is the prior N(μ | m₀, (β₀Λ)⁻¹) W(Λ | ν₀, V₀) with constant parameters; its
message to the block is its natural parameters

    (β₀m₀, −β₀/2, −½(V₀ + β₀m₀m₀ᵀ), (ν₀ − D)/2),

and E[log f] = ηᵀE[u] − κ(η) (the block's log-partition at the prior's parameters).

``MV_GAUSSIAN_NORMAL_WISHART`` is the likelihood N(out | μ, Λ⁻¹) of a D-vector whose mean and
precision are the block (μ, Λ):

    E[log f] = −½ tr(E[Λ]E[xxᵀ]) + E[x]ᵀE[Λμ] − ½E[μᵀΛμ] + ½E[log|Λ|] − (D/2) log 2π,

with messages (E[x], −½, −½E[xxᵀ], ½) to the block and (E[Λμ], −½E[Λ]) to out.  Both are per
factor instance, so a gated block θ[z] (the Bayesian Gaussian mixture) is weighted by q(z).
"""

from __future__ import annotations

import numpy as np

from distributions import GaussianWishart, MvGaussian

from .base import LOG_2PI, FactorType, Moments
from .contract import Terms, pair_inner

NORMAL_WISHART = FactorType("NormalWishart", out=GaussianWishart)
MV_GAUSSIAN_NORMAL_WISHART = FactorType("MvGaussianNormalWishart", out=MvGaussian, params=GaussianWishart)


def prior_natural(p: dict) -> tuple:
    """The prior's natural parameters from m₀, β₀, ν₀, V₀ in ``p``."""
    m0, b0, nu, v0 = p["mean"], np.asarray(p["beta"], float), np.asarray(p["dof"], float), p["scale"]
    d = v0.shape[-1]
    bm = b0[..., None] * m0
    return (bm, -0.5 * b0, -0.5 * (v0 + bm[..., :, None] * m0[..., None, :]), 0.5 * (nu - d))


@NORMAL_WISHART.rule("out", "vmp")
def nw_to_out(m: Moments, p: dict) -> tuple:
    eta = prior_natural(p)
    batch = np.broadcast_shapes(*(a.shape[: a.ndim - k] for a, k in zip(eta, (1, 0, 2, 0), strict=True)))
    return tuple(np.broadcast_to(a, batch + a.shape[a.ndim - k:]) for a, k in zip(eta, (1, 0, 2, 0), strict=True))


@NORMAL_WISHART.evidence(kind="exact")
def nw_evidence(m: Moments, p: dict) -> np.ndarray:
    eta = prior_natural(p)
    u = m["out"]
    inner = ((eta[0] * u[0]).sum(-1) + eta[1] * u[1] + (eta[2] * u[2]).sum((-2, -1)) + eta[3] * u[3])
    return inner - p["log_partition"]


@MV_GAUSSIAN_NORMAL_WISHART.rule("params", "vmp")
def mvnw_to_params(m: Moments, p: dict) -> tuple:
    x, xx = m["out"]
    shape = x.shape[:-1]
    return (x, np.full(shape, -0.5), Terms((-0.5, xx)), np.full(shape, 0.5))  # −½ applied after the reduction


@MV_GAUSSIAN_NORMAL_WISHART.rule("out", "vmp")
def mvnw_to_out(m: Moments, p: dict) -> tuple:
    lm, _, lam, _ = m["params"]
    return (lm, -0.5 * lam)


@MV_GAUSSIAN_NORMAL_WISHART.evidence(kind="exact")
def mvnw_evidence(m: Moments, p: dict) -> np.ndarray:
    x, xx = m["out"]
    lm, q, lam, logdet = m["params"]
    D = x.shape[-1]
    return (-0.5 * _trace_of_product(lam, xx) + pair_inner(x, lm, 1) - 0.5 * q + 0.5 * logdet - 0.5 * D * LOG_2PI)


def _trace_of_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """tr(AB) = Σ_ij Aᵀ_ij B_ij of broadcasting batches of D×D matrices, as one matrix product over the
    rows and components (no rows × components × D × D temporary; the transpose is of the smaller one)."""
    if a.size <= b.size:
        return pair_inner(np.swapaxes(a, -1, -2), b, 2)
    return pair_inner(a, np.swapaxes(b, -1, -2), 2)
