r"""Fused factor analysis: latent scores with their prior and the Gaussian likelihood of a product of random vectors.

The engine substitutes this factor for two (``schedules.fusion``): the prior z_n ~ N(m₀, Λ₀⁻¹) of latent scores
z_n ∈ R^K (n = 1..N) that nothing else uses, and a Gaussian likelihood of observed x_nd whose mean is
``fg.inner(z, w)`` (optionally with an intercept) with loadings w_d (d = 1..D):

    x_nd ~ N(w̃_dᵀz̃_n, τ_d⁻¹),   z̃_n = (z_n, 1) and w̃_d = (w_d, μ_d) with an intercept, else z_n and w_d,

with τ one Gamma per column d or one shared, and O_nd = 1 where x_nd is observed (missing entries drop out of
the likelihood).  With J the length of w̃ and the sums over the observed rows

    S_d = Σ_n O_nd E[z̃_n z̃_nᵀ],   (XZ)_d = Σ_n O_nd x_nd E[z̃_n],   E[SSE_d] = Σ_n O_nd x_nd² − 2E[w̃_d]ᵀ(XZ)_d
          + tr(E[w̃_d w̃_dᵀ] S_d),

(one S for every column when nothing is missing), the messages and the evidence are

    to w̃_d:  (E[τ_d](XZ)_d, −½E[τ_d]S_d),      to τ_d:  (−½E[SSE_d], ½Σ_n O_nd)  (summed over d for one τ),
    E[log f] = Σ_d [½(Σ_n O_nd)(E[log τ_d] − log 2π) − ½E[τ_d]E[SSE_d]] + Σ_n E[log N(z_n | m₀, Λ₀⁻¹)].

The factor owns q(z) (``structured``): given q(w̃) and q(τ) the scores are independent Gaussians,

    Λ_n = Λ₀ + Σ_d O_nd E[τ_d] E[w_d w_dᵀ],   Λ_n E[z_n] = Λ₀m₀ + Σ_d O_nd E[τ_d](x_nd E[w_d] − E[w_d μ_d])

(Winn & Bishop 2005; the E[w_d μ_d] term with an intercept), kept as ``distributions.GaussianRows``: with every
entry observed Λ_n is one K × K matrix for all rows, the means are affine in the rows (E[z_n] = Aᵀx_n + c) and
S, XZ come from the centred Gram matrix cached at compile time (``_gram_sums``, docs/maths.md §12), so a sweep
makes one O(NDK) pass over X, costs O(NDK + D²K + DJ³) and forms no N × K × K array; with missing entries each
row has its own Λ_n (one compiled Cholesky per row, ``kernels.rows``) and the sums are taken over the rows.  This is
Bayesian PCA's blocked VMP (Bishop 1999) written as a factor; its other blocks (q(w̃), q(α), q(τ)) are the
engine's ordinary updates.  The rotation speed-up (``schedules.rotation``) moves q(z) and q(w̃) between sweeps.
"""

from __future__ import annotations

import numpy as np

from distributions import Gamma, MvGaussian
from distributions.gaussian_rows import GaussianRows

from .base import LOG_2PI, FactorType, Moments
from .kernels.rows import row_posteriors
from .linear_gaussian import sums_to_precision

FACTOR_ANALYSIS = FactorType("FactorAnalysis", out=MvGaussian, loadings=MvGaussian, precision=Gamma)


def _scores(m: Moments, p: dict) -> tuple[np.ndarray, np.ndarray, bool]:
    """(E[z_n] (N, K), Cov(z_n): (K, K) shared or (N, K, K), shared) of the factor's q(z), or before it has one
    (a direct call of the rules) of the moments in m["out"]."""
    q = p["state"].get("q")
    if q is not None:
        return q.mean(), q.shared_cov(), q.shared
    mean, second = (np.asarray(a, dtype=float) for a in m["out"])
    return mean, second - mean[:, :, None] * mean[:, None, :], False


def _tau(m: Moments, p: dict) -> tuple[np.ndarray, np.ndarray]:
    """(E[τ_d], E[log τ_d]), one per column (D,)."""
    t, logt = m["precision"]
    D = p["X"].shape[1]
    return np.broadcast_to(t, (D,)), np.broadcast_to(logt, (D,))


def _loadings(m: Moments) -> tuple[np.ndarray, np.ndarray]:
    """(E[w̃_d] (D, J), E[w̃_d w̃_dᵀ] (D, J, J))."""
    return m["loadings"]


def _sums(m: Moments, p: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(S: (J, J) with nothing missing, else S_d (D, J, J); XZ (D, J); Σ_n E[z̃_n z̃_nᵀ] (J, J); Σ_n E[z̃_n] (J,))
    of the current q(z), computed once per q."""
    q = p["state"].get("q")
    hit = p["state"].get("sums")
    if q is not None and hit is not None and hit[0] is q:
        return hit[1]
    X, M, intercept = p["X"], p["mask"], p["intercept"]
    Zm, Zc, shared = _scores(m, p)
    N, K = Zm.shape
    J = K + int(intercept)
    if M is None and shared:
        S = np.empty((J, J))
        S[:K, :K] = N * Zc + Zm.T @ Zm
        XZ = np.empty((X.shape[1], J))
        XZ[:, :K] = X.T @ Zm
        zsum = np.ones(N) @ Zm
        if intercept:
            S[:K, K] = S[K, :K] = zsum
            S[K, K] = N
            XZ[:, K] = p["colsum"]
        out = (S, XZ, S, _tilde(zsum, N, intercept))
    else:
        Zt = np.empty((N, J))
        Zt[:, :K] = Zm
        if intercept:
            Zt[:, K] = 1.0
        Ezz = Zt[:, :, None] * Zt[:, None, :]
        Ezz[:, :K, :K] += Zc
        Sall = Ezz.sum(0)
        S = Sall if M is None else (M.T @ Ezz.reshape(N, -1)).reshape(-1, J, J)
        out = (S, X.T @ Zt, Sall, np.ones(N) @ Zt)
    if q is not None:
        p["state"]["sums"] = (q, out)
    return out


def _tilde(zsum: np.ndarray, N: int, intercept: bool) -> np.ndarray:
    """Σ_n z̃_n: Σ_n z_n, then N with an intercept."""
    return np.append(zsum, float(N)) if intercept else zsum


def rows_sums(p: dict) -> tuple[np.ndarray, np.ndarray]:
    """(Σ_n E[z̃_n z̃_nᵀ] (J, J), Σ_n E[z̃_n] (J,)) of the factor's own q(z) (the rotation's statistics)."""
    _, _, Sall, zsum = _sums({}, p)
    return Sall, zsum


def _sse(m: Moments, p: dict) -> np.ndarray:
    """E[SSE_d] over the observed entries of each column (D,)."""
    S, XZ, _, _ = _sums(m, p)
    mean, eww = _loadings(m)
    quad = np.einsum("djk,dkj->d", eww, S) if S.ndim == 3 else np.einsum("djk,kj->d", eww, S)
    return p["xx"] - 2.0 * np.einsum("dj,dj->d", mean, XZ) + quad


def _conditional(m: Moments, p: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(h, Λ, B, g) of every row's q(z_n) ∝ exp(hᵀz − ½zᵀΛz): h = XB + g (N, K) (B = E[τ_d]E[w_d] (D, K), g the
    part that does not depend on the row, (K,), or per row with missing entries) and Λ (K, K) when nothing is
    missing, else (N, K, K)."""
    X, M, K = p["X"], p["mask"], p["K"]
    t, _ = _tau(m, p)
    mean, eww = _loadings(m)
    B = t[:, None] * mean[:, :K]
    h = X @ B
    g = np.zeros(K) if p["prior_shift"] is None else p["prior_shift"]
    if M is None:
        P = p["prior_precision"] + np.einsum("d,dkl->kl", t, eww[:, :K, :K])
        if p["intercept"]:
            g = g - t @ eww[:, :K, K]
    else:
        Mt = M * t
        P = (Mt @ np.ascontiguousarray(eww[:, :K, :K]).reshape(-1, K * K)).reshape(-1, K, K)  # one GEMM
        P += p["prior_precision"]
        if p["intercept"]:
            g = g - Mt @ eww[:, :K, K]
    if p["intercept"] or p["prior_shift"] is not None:
        h += g
    return h, P, B, g


def _gram_sums(p: dict, Zc: np.ndarray, A: np.ndarray, c: np.ndarray) -> tuple:
    """``_sums`` of rows with means z_n = Aᵀx_n + c (all observed), from the centred Gram matrix G = X_cᵀX_c and
    the column means x̄ (X = X_c + 1x̄ᵀ), without a pass over the rows: with e = Aᵀx̄ + c,

        Σ_n z_nz_nᵀ = AᵀGA + N eeᵀ,   Σ_n z_n = N e,   Xᵀ[z_n] = GA + N x̄eᵀ."""
    G, xbar, N, K = p["gram"], p["colmean"], p["X"].shape[0], p["K"]
    J = K + int(p["intercept"])
    e = xbar @ A + c
    GA = G @ A
    S = np.empty((J, J))
    S[:K, :K] = N * Zc + A.T @ GA + N * np.outer(e, e)
    XZ = np.empty((G.shape[0], J))
    XZ[:, :K] = GA + N * np.outer(xbar, e)
    if p["intercept"]:
        S[:K, K] = S[K, :K] = N * e
        S[K, K] = N
        XZ[:, K] = p["colsum"]
    return S, XZ, S, _tilde(N * e, N, p["intercept"])


def moved_sums(p: dict, q_old: GaussianRows, q_new: GaussianRows, T: np.ndarray) -> None:
    """When q(z) moves by z̃ → Tz̃ (a rotation or translation of the scores, ``schedules.rotation``): the factor's
    sums of q_old, if it holds them, become those of q_new (S → TSTᵀ, XZ → XZ Tᵀ), without a pass over the rows."""
    hit = p["state"].get("sums")
    if hit is None or hit[0] is not q_old:
        return
    S, XZ, Sall, zsum = hit[1]
    moved = (T @ S @ T.T if S.ndim == 2 else np.einsum("ij,djk,lk->dil", T, S, T), XZ @ T.T, T @ Sall @ T.T,
             T @ zsum)
    p["state"]["sums"] = (q_new, moved)


def rows_posterior(m: Moments, p: dict, potentials) -> GaussianRows:
    """q(z) given q(w̃) and q(τ) (the module docstring); ``potentials=None`` gives the prior rows (the start).
    The scores have no other factor (the fusion's condition), so the potentials are zero and not read.  With
    every entry observed the sums over the rows come from the centred Gram matrix (``_gram_sums``): a sweep
    makes one pass over X."""
    if potentials is None:
        return GaussianRows.standard(p["X"].shape[0], p["prior_mean"], p["prior_precision"])
    h, P, B, g = _conditional(m, p)
    if P.ndim == 2:
        Zc = np.linalg.inv(P)
        q = GaussianRows(h @ Zc, Zc, P, np.linalg.slogdet(Zc)[1], shift=h)
        if p["mask"] is None:
            p["state"]["sums"] = (q, _gram_sums(p, Zc, B @ Zc, g @ Zc))
    else:
        Zc, Zm, logdet, bad = row_posteriors(P, h)
        if bad >= 0:
            raise FloatingPointError(f"the precision of q(z_n) of row {bad} is not positive definite (numerical "
                                     "trouble: check the data scale)")
        q = GaussianRows(Zm, Zc, P, logdet, shift=h)
    p["state"]["q"] = q
    return q


@FACTOR_ANALYSIS.rule("out", "vmp")
def fa_to_out(m: Moments, p: dict) -> tuple:
    """The message to the scores (their prior included): (h, −½Λ) of ``_conditional``; the engine does not use
    it (the factor owns q(z)), it is E[log f]'s gradient in E[z_n], E[z_nz_nᵀ]."""
    h, P, _, _ = _conditional(m, p)
    return h, -0.5 * (P[None] if P.ndim == 2 else P)


@FACTOR_ANALYSIS.rule("loadings", "vmp")
def fa_to_loadings(m: Moments, p: dict) -> tuple:
    t, _ = _tau(m, p)
    S, XZ, _, _ = _sums(m, p)
    return t[:, None] * XZ, -0.5 * t[:, None, None] * S


@FACTOR_ANALYSIS.rule("precision", "vmp")
def fa_to_precision(m: Moments, p: dict) -> tuple:
    sse, n = _sse(m, p), p["count"]
    return sums_to_precision(sse.sum(), n.sum()) if p["shared_noise"] else sums_to_precision(sse, n)


@FACTOR_ANALYSIS.evidence(kind="exact")
def fa_evidence(m: Moments, p: dict) -> np.ndarray:
    t, logt = _tau(m, p)
    lik = (0.5 * p["count"] * (logt - LOG_2PI) - 0.5 * t * _sse(m, p)).sum()
    N, K = p["X"].shape[0], p["K"]
    lam, m0 = p["prior_precision"], p["prior_mean"]
    _, _, Sall, zsum = _sums(m, p)
    s1 = zsum[:K]
    scatter = Sall[:K, :K] - np.outer(m0, s1) - np.outer(s1, m0) + N * np.outer(m0, m0)
    prior = N * (0.5 * p["prior_logdet"] - 0.5 * K * LOG_2PI) - 0.5 * np.einsum("kl,lk->", lam, scatter)
    return np.asarray(lik + prior)


FACTOR_ANALYSIS.structured = rows_posterior

__all__ = ["FACTOR_ANALYSIS", "moved_sums", "rows_posterior", "rows_sums"]
