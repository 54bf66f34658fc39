"""Multivariate Gaussian factor N(out | mean, Λ⁻¹) for a D-vector.

With S = E[(x − μ)(x − μ)ᵀ] = E[xxᵀ] − E[x]E[μ]ᵀ − E[μ]E[x]ᵀ + E[μμᵀ]:

    E[log f] = ½E[log|Λ|] − (D/2) log 2π − ½ tr(E[Λ] S).

Two precision forms:

* ``MV_GAUSSIAN``: Λ = α·I (α a scalar Gamma) or Λ = diag(α) (ARD: α a Gamma plated over a plate
  of size D, consumed as the event axis).  To α: (−½ tr S, D/2) or per component (−½ S_dd, ½).
* ``MV_GAUSSIAN_FIXED``: a constant matrix Λ (``p["precision"]``, with ``p["logdet"]``), including
  the improper flat prior Λ = 0, whose evidence term is taken as 0 (flat density 1).

Messages to out and to mean: (E[Λ]E[other], −½E[Λ]).

With a diagonal Λ only the diagonal of S enters, S_dd = E[x_d²] − 2E[x_d]E[μ_d] + E[μ_d²], and the full D × D
scatter is never formed.  When the data and the mean sit on different plates (a mixture: x_n on the rows,
μ_k on the components) the sums over d of products of a row's and a component's moments are matrix products
(``factors.contract``), and Λ E[x] is kept factored, so no rows × components × D array is formed either.

With ``p["tail"]`` = c (T constants) the precision is Λ = diag(α, c): α (ARD, or one α) covers the first
K = D − T coordinates and the constants the last T (the loadings and mean of Bayesian PCA, one joint vector):
E[log|Λ|] = Σ_{k≤K} E[log α_k] + Σ_t log c_t, and α's message counts the first K coordinates only.

Missing coordinates of an observed ``out`` (``p["observed_coords"]``, m ∈ {0, 1}^D per row) are
marginalised: with Λ = αI or diag(α) the density of the observed coordinates has Λ_o = diag(m ∘ α), so
S_dd, log α_d and the count D are taken over the observed coordinates only (n_o = Σ m_d).  A constant Λ
gets the per-row marginal precision (``p["precision"]`` per row, ``p["logdet"]``, ``p["n_obs"]``).
"""

from __future__ import annotations

import numpy as np

from distributions import Gamma, MvGaussian

from .base import LOG_2PI, FactorType, Moments
from .contract import disjoint, lazy_sum, pair_inner, plate_product

MV_GAUSSIAN = FactorType("MvGaussian", out=MvGaussian, mean=MvGaussian, precision=Gamma)
MV_GAUSSIAN_FIXED = FactorType("MvGaussianFixedPrecision", out=MvGaussian, mean=MvGaussian)


def _scatter(m: Moments) -> np.ndarray:
    x, mu = m["out"], m["mean"]
    cross = x[0][..., :, None] * mu[0][..., None, :]
    return x[1] - cross - np.swapaxes(cross, -1, -2) + mu[1]


def _diagonals(m: Moments) -> tuple:
    """E[x], diag E[xxᵀ], E[μ], diag E[μμᵀ]."""
    x, mu = m["out"], m["mean"]
    return x[0], np.diagonal(x[1], axis1=-2, axis2=-1), mu[0], np.diagonal(mu[1], axis1=-2, axis2=-1)


def _scatter_diag(m: Moments) -> np.ndarray:
    """S_dd = E[x_d²] − 2E[x_d]E[μ_d] + E[μ_d²], formed."""
    x0, x1d, m0, m1d = _diagonals(m)
    return x1d - 2.0 * x0 * m0 + m1d


def _tail_diag(m: Moments, p: dict) -> np.ndarray:
    """diag E[Λ] = (E[α] (K of them, or one repeated), c), shape (…, D), for Λ = diag(α, c)."""
    a, c = m["precision"][0], p["tail"]
    K = p["D"] - c.size
    head = a if p["ard"] else np.broadcast_to(np.asarray(a)[..., None], np.shape(a) + (K,))
    return np.concatenate([head, np.broadcast_to(c, head.shape[:-1] + c.shape)], axis=-1)


def _tail_rules(m: Moments, p: dict, edge: str) -> tuple:
    """The messages and E[log f] of the factor with Λ = diag(α, c) (``edge`` "evidence" for E[log f])."""
    c = p["tail"]
    K = p["D"] - c.size
    lam = _tail_diag(m, p)
    if edge in ("out", "mean"):
        other = m["mean" if edge == "out" else "out"][0]
        return (lam * other, -0.5 * lam[..., :, None] * np.eye(p["D"]))
    x0, x1d, m0, m1d = _diagonals(m)
    sdd = x1d - 2.0 * x0 * m0 + m1d  # S_dd
    if edge == "precision":
        if p["ard"]:
            return (-0.5 * sdd[..., :K], np.full(sdd.shape[:-1] + (K,), 0.5))
        return (-0.5 * sdd[..., :K].sum(-1), np.full(sdd.shape[:-1], 0.5 * K))
    loga = m["precision"][1]
    logdet = (loga.sum(-1) if p["ard"] else K * loga) + np.log(c).sum()
    return 0.5 * logdet - 0.5 * p["D"] * LOG_2PI - 0.5 * (lam * sdd).sum(-1)


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


def _diag_message(m: Moments, p: dict, other: np.ndarray) -> tuple:
    """(E[Λ]E[other], −½E[Λ]) for a diagonal E[Λ] = diag(a): the first part a ∘ E[other], kept factored."""
    if p.get("observed_coords") is not None:  # Λ per row: formed
        return _message(_lam(m, p), other)
    a = m["precision"][0]
    diag = a if p["ard"] else a[..., None]
    return (plate_product(diag, other), -0.5 * _lam(m, p))


@MV_GAUSSIAN.rule("out", "vmp")
def mv_to_out(m: Moments, p: dict) -> tuple:
    if p.get("tail") is not None:
        return _tail_rules(m, p, "out")
    return _diag_message(m, p, m["mean"][0])


@MV_GAUSSIAN.rule("mean", "vmp")
def mv_to_mean(m: Moments, p: dict) -> tuple:
    if p.get("tail") is not None:
        return _tail_rules(m, p, "mean")
    return _diag_message(m, p, m["out"][0])


@MV_GAUSSIAN.rule("precision", "vmp")
def mv_to_precision(m: Moments, p: dict) -> tuple:
    if p.get("tail") is not None:
        return _tail_rules(m, p, "precision")
    obs = p.get("observed_coords")
    if obs is not None:
        d = _scatter_diag(m) * obs
        if p["ard"]:
            return (-0.5 * d, 0.5 * np.broadcast_to(obs, d.shape))
        return (-0.5 * d.sum(-1), 0.5 * np.broadcast_to(obs, d.shape).sum(-1))
    x0, x1d, m0, m1d = _diagonals(m)
    plates = np.broadcast_shapes(x0.shape, m0.shape)[:-1]
    one = (1,) * len(plates)  # the same for every instance: a singleton axis
    if p["ard"]:  # −½S_dd = E[x_d]E[μ_d] − ½E[x_d²] − ½E[μ_d²]
        d = lazy_sum(plate_product(x0, m0), -0.5 * x1d, -0.5 * m1d) if disjoint(x0, m0) else -0.5 * (
            x1d - 2.0 * x0 * m0 + m1d)
        return (d, np.full(one + (p["D"],), 0.5))
    t = pair_inner(x0, m0, 1) - 0.5 * x1d.sum(-1) - 0.5 * m1d.sum(-1)  # −½ tr S
    return (t, np.full(one, 0.5 * p["D"]))


@MV_GAUSSIAN.evidence(kind="exact")
def mv_evidence(m: Moments, p: dict) -> np.ndarray:
    if p.get("tail") is not None:
        return _tail_rules(m, p, "evidence")
    a, loga = m["precision"]
    D = p["D"]
    obs = p.get("observed_coords")
    if obs is not None:
        d = _scatter_diag(m) * obs
        n = obs.sum(-1)
        if p["ard"]:
            return 0.5 * (obs * loga).sum(-1) - 0.5 * n * LOG_2PI - 0.5 * (a * d).sum(-1)
        return 0.5 * n * loga - 0.5 * n * LOG_2PI - 0.5 * a * d.sum(-1)
    x0, x1d, m0, m1d = _diagonals(m)
    if p["ard"]:  # Σ_d a_d S_dd, each sum over d of a row's and a component's moments one matrix product
        quad = pair_inner(x1d, a, 1) - 2.0 * pair_inner(x0, a * m0, 1) + (a * m1d).sum(-1)
        return 0.5 * loga.sum(-1) - 0.5 * D * LOG_2PI - 0.5 * quad
    tr = x1d.sum(-1) - 2.0 * pair_inner(x0, m0, 1) + m1d.sum(-1)
    return 0.5 * D * loga - 0.5 * D * LOG_2PI - 0.5 * a * tr


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
