"""The normal–gamma block q(w, τ) (Drugowitsch 2014, §2; BayesPy's GaussianGamma node).

Statistics of the joint variable: u(w, τ) = (τw, τwwᵀ, τ, log τ).

``NORMAL_GAMMA`` is the prior  N(w | μ₀, (τA)⁻¹) Gam(τ | a₀, b₀),  A = α·I or diag(α):

    log f = −½ tr(A τwwᵀ) + μ₀ᵀA τw − ½ μ₀ᵀAμ₀ τ + (D/2) log τ + ½ log|A| − (D/2) log 2π
            + a₀ log b₀ − log Γ(a₀) + (a₀ − 1) log τ − b₀ τ,

so the message to (w, τ) is (E[A]μ₀, −½E[A], −½μ₀ᵀE[A]μ₀ − b₀, D/2 + a₀ − 1), and with
T = E[τ(w − μ₀)(w − μ₀)ᵀ] the message to α is (−½ tr T, D/2), or (−½ T_dd, ½) per component (ARD).

``NORMAL_GAMMA_REGRESSION`` is the likelihood Π_n N(y_n | x_nᵀw, τ⁻¹) of observed (X, y), through
the cached data products XᵀX, Xᵀy, yᵀy:

    E[log f] = (N/2)(E[log τ] − log 2π) − ½(yᵀy E[τ] − 2(Xᵀy)ᵀE[τw] + tr(XᵀX E[τwwᵀ])),

whose message (Xᵀy, −½XᵀX, −½yᵀy, N/2) does not depend on q at all.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from distributions import Gamma, GaussianGamma

from .base import LOG_2PI, FactorType, Moments

NORMAL_GAMMA = FactorType("NormalGamma", out=GaussianGamma, precision=Gamma)
NORMAL_GAMMA_REGRESSION = FactorType("NormalGammaRegression", w=GaussianGamma)


def _prec_diag(m: Moments, p: dict) -> tuple[np.ndarray, np.ndarray]:
    """E[A] diagonal (…, D) and E[log|A|] (…)."""
    a, loga = m["precision"]
    D = p["D"]
    if p["ard"]:
        return a, loga.sum(-1)
    return np.broadcast_to(a[..., None], a.shape + (D,)), D * loga


def _scatter(m: Moments, mu0: np.ndarray) -> np.ndarray:
    tw, tww, t, _ = m["out"]
    cross = tw[..., :, None] * mu0[..., None, :]
    return tww - cross - np.swapaxes(cross, -1, -2) + t[..., None, None] * mu0[..., :, None] * mu0[..., None, :]


@NORMAL_GAMMA.rule("out", "vmp")
def ng_to_out(m: Moments, p: dict) -> tuple:
    ad, _ = _prec_diag(m, p)
    mu0, D = p["mean"], p["D"]
    lam = ad[..., :, None] * np.eye(D)
    return (ad * mu0, -0.5 * lam, -0.5 * (ad * mu0 * mu0).sum(-1) - p["rate"],
            np.full(ad.shape[:-1], 0.5 * D + p["shape"] - 1.0))


@NORMAL_GAMMA.rule("precision", "vmp")
def ng_to_precision(m: Moments, p: dict) -> tuple:
    t = _scatter(m, p["mean"])
    if p["ard"]:
        d = np.diagonal(t, axis1=-2, axis2=-1)
        return (-0.5 * d, np.full_like(d, 0.5))
    tr = np.trace(t, axis1=-2, axis2=-1)
    return (-0.5 * tr, np.full_like(tr, 0.5 * p["D"]))


@NORMAL_GAMMA.evidence(kind="exact")
def ng_evidence(m: Moments, p: dict) -> np.ndarray:
    ad, logdet_a = _prec_diag(m, p)
    _, _, t, logt = m["out"]
    D, a0, b0 = p["D"], p["shape"], p["rate"]
    quad = (ad * np.diagonal(_scatter(m, p["mean"]), axis1=-2, axis2=-1)).sum(-1)
    return (-0.5 * quad + 0.5 * D * logt + 0.5 * logdet_a - 0.5 * D * LOG_2PI
            + a0 * np.log(b0) - gammaln(a0) + (a0 - 1.0) * logt - b0 * t)


@NORMAL_GAMMA_REGRESSION.rule("w", "vmp")
def ngr_to_w(m: Moments, p: dict) -> tuple:
    return (p["xty"], -0.5 * p["xtx"], np.asarray(-0.5 * p["yty"]), np.asarray(0.5 * p["n"]))


@NORMAL_GAMMA_REGRESSION.evidence(kind="exact")
def ngr_evidence(m: Moments, p: dict) -> np.ndarray:
    tw, tww, t, logt = m["w"]
    sse = p["yty"] * t - 2.0 * (p["xty"] * tw).sum(-1) + np.einsum("ij,...ji->...", p["xtx"], tww)
    return 0.5 * p["n"] * (logt - LOG_2PI) - 0.5 * sse
