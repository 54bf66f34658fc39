"""Multivariate Gaussian factor N(out | mean, Λ⁻¹) for a D-vector.

With S = E[(x − μ)(x − μ)ᵀ] = E[xxᵀ] − E[x]E[μ]ᵀ − E[μ]E[x]ᵀ + E[μμᵀ]:

    E[log f] = ½E[log|Λ|] − (D/2) log 2π − ½ tr(E[Λ] S).

Two precision forms:

* ``MV_GAUSSIAN``: Λ = α·I (α a scalar Gamma) or Λ = diag(α) (ARD: α a Gamma plated over a plate
  of size D, consumed as the event axis).  To α: (−½ tr S, D/2) or per component (−½ S_dd, ½).
* ``MV_GAUSSIAN_FIXED``: a constant matrix Λ (``p["precision"]``, with ``p["logdet"]``), including
  the improper flat prior Λ = 0, whose evidence term is taken as 0 (flat density 1).

Messages to out and to mean: (E[Λ]E[other], −½E[Λ]).

Missing coordinates of an observed ``out`` (``p["observed_coords"]``, m ∈ {0, 1}^D per row) are
marginalised: with Λ = αI or diag(α) the density of the observed coordinates has Λ_o = diag(m ∘ α), so
S_dd, log α_d and the count D are taken over the observed coordinates only (n_o = Σ m_d).  A constant Λ
gets the per-row marginal precision (``p["precision"]`` per row, ``p["logdet"]``, ``p["n_obs"]``).
"""

from __future__ import annotations

import numpy as np

from distributions import Gamma, MvGaussian

from .base import LOG_2PI, FactorType, Moments

MV_GAUSSIAN = FactorType("MvGaussian", out=MvGaussian, mean=MvGaussian, precision=Gamma)
MV_GAUSSIAN_FIXED = FactorType("MvGaussianFixedPrecision", out=MvGaussian, mean=MvGaussian)


def _scatter(m: Moments) -> np.ndarray:
    x, mu = m["out"], m["mean"]
    cross = x[0][..., :, None] * mu[0][..., None, :]
    return x[1] - cross - np.swapaxes(cross, -1, -2) + mu[1]


def _lam(m: Moments, p: dict) -> np.ndarray:
    """E[Λ] as a (…, D, D) matrix."""
    a = m["precision"][0]
    diag = a if p["ard"] else a[..., None]
    obs = p.get("observed_coords")
    if obs is not None:
        diag = diag * obs
    return diag[..., :, None] * np.eye(p["D"]) if diag.shape[-1] == p["D"] else diag[..., None] * np.eye(p["D"])


def _message(lam: np.ndarray, other_mean: np.ndarray) -> tuple:
    return (np.einsum("...ij,...j->...i", lam, other_mean), -0.5 * lam)


@MV_GAUSSIAN.rule("out", "vmp")
def mv_to_out(m: Moments, p: dict) -> tuple:
    return _message(_lam(m, p), m["mean"][0])


@MV_GAUSSIAN.rule("mean", "vmp")
def mv_to_mean(m: Moments, p: dict) -> tuple:
    return _message(_lam(m, p), m["out"][0])


@MV_GAUSSIAN.rule("precision", "vmp")
def mv_to_precision(m: Moments, p: dict) -> tuple:
    s = _scatter(m)
    obs = p.get("observed_coords")
    d = np.diagonal(s, axis1=-2, axis2=-1)
    if obs is not None:
        d = d * obs
        if p["ard"]:
            return (-0.5 * d, 0.5 * np.broadcast_to(obs, d.shape))
        return (-0.5 * d.sum(-1), 0.5 * np.broadcast_to(obs, d.shape).sum(-1))
    if p["ard"]:
        return (-0.5 * d, np.full_like(d, 0.5))
    t = np.trace(s, axis1=-2, axis2=-1)
    return (-0.5 * t, np.full_like(t, 0.5 * p["D"]))


@MV_GAUSSIAN.evidence(kind="exact")
def mv_evidence(m: Moments, p: dict) -> np.ndarray:
    a, loga = m["precision"]
    s = _scatter(m)
    D = p["D"]
    obs = p.get("observed_coords")
    if obs is not None:
        d = np.diagonal(s, axis1=-2, axis2=-1) * obs
        n = obs.sum(-1)
        if p["ard"]:
            return 0.5 * (obs * loga).sum(-1) - 0.5 * n * LOG_2PI - 0.5 * (a * d).sum(-1)
        return 0.5 * n * loga - 0.5 * n * LOG_2PI - 0.5 * a * d.sum(-1)
    if p["ard"]:
        return 0.5 * loga.sum(-1) - 0.5 * D * LOG_2PI - 0.5 * (a * np.diagonal(s, axis1=-2, axis2=-1)).sum(-1)
    return 0.5 * D * loga - 0.5 * D * LOG_2PI - 0.5 * a * np.trace(s, axis1=-2, axis2=-1)


@MV_GAUSSIAN_FIXED.rule("out", "vmp")
def mvf_to_out(m: Moments, p: dict) -> tuple:
    return _message(p["precision"], m["mean"][0])


@MV_GAUSSIAN_FIXED.rule("mean", "vmp")
def mvf_to_mean(m: Moments, p: dict) -> tuple:
    return _message(p["precision"], m["out"][0])


@MV_GAUSSIAN_FIXED.evidence(kind="exact")
def mvf_evidence(m: Moments, p: dict) -> np.ndarray:
    if p["logdet"] is None:  # improper flat prior: density 1, no evidence term
        return np.zeros(m["out"][0].shape[:-1])
    s = _scatter(m)
    D = p.get("n_obs", p["D"])
    return 0.5 * p["logdet"] - 0.5 * D * LOG_2PI - 0.5 * np.einsum("...ij,...ji->...", p["precision"], s)
