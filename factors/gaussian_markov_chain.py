"""The Gaussian Markov chain (linear-Gaussian state dynamics): a structured factor with an exact q.

    p(x | m₀, P₀, A, Q) = N(x_1 | m₀, P₀⁻¹) Π_{t=2}^{L} N(x_t | A x_{t−1}, Q⁻¹),     x_t ∈ R^D,

with m₀ a Gaussian vector or a constant, P₀ and Q Wishart matrices or constants (``GAUSSIAN_MARKOV_CHAIN``), or
Q = diag(τ) with Gamma precisions τ (``GAUSSIAN_MARKOV_CHAIN_DIAG``; one τ per dimension, or one shared τ),
and A a constant D×D matrix or D Gaussian rows a_i (mean field across rows).  The factor's plates are the
sequence plates; the time plate of x and the row plate of A are consumed as event axes.

With the sums over each sequence S₁₁ = Σ_{t≥2} E[x_t x_tᵀ], S₀₀ = Σ_{t≥2} E[x_{t−1}x_{t−1}ᵀ] and
S₁₀ = Σ_{t≥2} E[x_t x_{t−1}ᵀ], and W = S₁₁ − ĀS₁₀ᵀ − S₁₀Āᵀ + E[AS₀₀Aᵀ], where
E[AS₀₀Aᵀ]_ij = ā_iᵀS₀₀ā_j + δ_ij tr(S₀₀ Cov a_i),

    E[log f] = ½E log|P₀| − ½ tr(P̄₀(E[x_1x_1ᵀ] − x̄_1m̄₀ᵀ − m̄₀x̄_1ᵀ + E[m₀m₀ᵀ]))
               + ½(L − 1) E log|Q| − ½ tr(Q̄ W) − ½ L D log 2π.

The messages are its gradients: to P₀ (−½(…), ½), to m₀ (P̄₀x̄_1, −½P̄₀), to Q (−½W, (L − 1)/2), to τ_d
(−½W_dd, (L − 1)/2), to row a_k (Σ_i Q̄_ki S₁₀[i, :] − S₀₀ Σ_{j≠k} Q̄_kj ā_j, −½Q̄_kk S₀₀).

The factor owns the posterior of x (``structured``): given the node potentials (h_t, J_t) that the other
factors send to x_t, q(x) ∝ exp(E[log f] + Σ_t h_tᵀx_t − ½x_tᵀJ_tx_t) is Gaussian and Markov with
diagonal precision blocks J_t + P̄₀[t = 1] + Q̄[t ≥ 2] + E[AᵀQA][t < L] and off-diagonal blocks −Q̄Ā, where
E[AᵀQA] = ĀᵀQ̄Ā + M, M = Σ_i Q̄_ii Cov a_i: the chain (m̄₀, P̄₀, Ā, Q̄) with the extra potential
exp(−½x_tᵀMx_t) at t < L.  It is found exactly by the square-root Kalman filter and Rauch–Tung–Striebel
smoother (``kernels/kalman.py``, O(L·D³); Beal 2003, ch. 5), which also returns the residual sums about
(m̄₀, Ā) — E₀ = E[(x_1 − m̄₀)(x_1 − m̄₀)ᵀ], W₀ = Σ_t E[η_tη_tᵀ], X = Σ_t E[x_{t−1}η_tᵀ] with η_t = x_t − Āx_{t−1}
— to relative accuracy, and log|Λ| = log|P̄₀| + (L − 1) log|Q̄| + Σ_t log|G_t|.  Its entropy is
½LD(1 + log 2π) − ½ log|Λ|.  The evidence and the messages to P₀ and Q take their residuals from these sums,
re-centred on the current moments (Δ = Ā_q − Ā, d = m̄₀_q − m̄₀, both 0 when q is current):

    E[(x_1 − m₀)(x_1 − m₀)ᵀ] = E₀ + ē₀dᵀ + dē₀ᵀ + ddᵀ + Cov m₀,   W = W₀ + ΔX + XᵀΔᵀ + ΔS₀₀Δᵀ + diag_i tr(S₀₀ Cov a_i),

so that with every parameter a constant the ELBO is the exact log-likelihood to rounding, however nearly
deterministic the dynamics (Q̄ ≫ the other precisions), where differences of second moments would lose it.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from distributions import Gamma, MvGaussian, Wishart
from distributions.gaussian_chain import ChainResiduals, GaussianChain

from .base import FactorType, Moments
from .kernels.kalman import covariance_root, kalman_smooth, sample_chains

_LOG_2PI = float(np.log(2.0 * np.pi))
_EDGES = dict(out=MvGaussian, initial_mean=MvGaussian, initial_precision=Wishart, transition=MvGaussian)
GAUSSIAN_MARKOV_CHAIN = FactorType("GaussianMarkovChain", **_EDGES, noise_precision=Wishart)
GAUSSIAN_MARKOV_CHAIN_DIAG = FactorType("GaussianMarkovChainDiag", **_EDGES, noise_precision=Gamma)


def _valid(T: int, lengths: np.ndarray) -> np.ndarray:
    """True at the steps that exist (t < L_n), shape lengths + (T,)."""
    return np.arange(T) < np.asarray(lengths)[..., None]


def _chain(m: Moments, p: dict) -> GaussianChain:
    """The chain's current q; before it has one, independent steps with the moments in m["out"] (the
    messages are then the gradients of E[log f] under that mean-field q)."""
    q = p["state"].get("q")
    return chain_posterior(m, p, None, independent=True) if q is None else q


def _noise(m: Moments, p: dict) -> tuple[np.ndarray, np.ndarray]:
    """E[Q] (..., D, D) and E[log|Q|] (...)."""
    q1, q2 = m["noise_precision"]
    if p.get("noise") == "diag":  # τ per dimension, the dimension plate consumed as the last axis
        return q1[..., :, None] * np.eye(q1.shape[-1]), q2.sum(-1)
    if p.get("noise") == "shared":  # one τ: Q = τI
        D = p["D"]
        return q1[..., None, None] * np.eye(D), D * q2
    return q1, q2


def _transition(m: Moments) -> tuple[np.ndarray, np.ndarray]:
    """Ā (..., D, D) (rows ā_i) and the row covariances Cov a_i (..., D, D, D)."""
    a1, a2 = m["transition"]
    return a1, a2 - a1[..., :, None] * a1[..., None, :]


def _sums(q: GaussianChain, lengths: np.ndarray) -> tuple:
    """(x̄_1, E[x_1x_1ᵀ], S₁₁, S₀₀, S₁₀, L) of each sequence, steps past its length dropped."""
    mu, m2, pair = q.mean(), q.second, q.pair
    v = _valid(mu.shape[-2], lengths)[..., None, None]
    m2 = np.where(v, m2, 0.0)
    last = np.asarray(lengths)[..., None, None, None] - 1 == np.arange(mu.shape[-2])[:, None, None]
    s11 = m2[..., 1:, :, :].sum(-3)
    s00 = np.where(last, 0.0, m2).sum(-3)
    s10 = np.where(v, pair, 0.0)[..., 1:, :, :].sum(-3)
    return mu[..., 0, :], m2[..., 0, :, :], s11, s00, s10, np.asarray(lengths, dtype=float)


def _aqa(qbar: np.ndarray, abar: np.ndarray, acov: np.ndarray) -> np.ndarray:
    """E[AᵀQA] = ĀᵀQ̄Ā + Σ_i Q̄_ii Cov a_i."""
    diag = np.diagonal(qbar, axis1=-2, axis2=-1)
    return np.swapaxes(abar, -1, -2) @ qbar @ abar + np.einsum("...i,...ijk->...jk", diag, acov)


def _residuals(q: GaussianChain, m: Moments, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(r, W, L): r = E[(x_1 − m₀)(x_1 − m₀)ᵀ] and W = Σ_{t≥2} E[(x_t − Ax_{t−1})(x_t − Ax_{t−1})ᵀ] under q and
    the current moments of m₀ and A, from the chain's residual sums about its own (m̄₀, Ā) (module docstring);
    a chain without them (a starting q) is taken about (0, 0): E₀ = E[x_1x_1ᵀ], W₀ = S₁₁, X = S₁₀ᵀ."""
    x1, xx1, s11, s00, s10, L = _sums(q, lengths)
    abar, acov = _transition(m)
    m01, m02 = m["initial_mean"]
    res = q.residuals
    if res is None:
        anchor_m0, anchor_a, e00, w0, cross = 0.0, 0.0, xx1, s11, np.swapaxes(s10, -1, -2)
    else:
        anchor_m0, anchor_a, e00, w0, cross = res
    d = anchor_m0 - m01
    e0 = x1 - anchor_m0
    c = e0[..., :, None] * d[..., None, :]
    cov_m0 = m02 - m01[..., :, None] * m01[..., None, :]
    r = e00 + c + np.swapaxes(c, -1, -2) + d[..., :, None] * d[..., None, :] + cov_m0
    delta = anchor_a - abar
    dx = delta @ cross
    w = w0 + dx + np.swapaxes(dx, -1, -2) + delta @ s00 @ np.swapaxes(delta, -1, -2)
    w = w + np.einsum("...ij,...kji->...k", s00, acov)[..., :, None] * np.eye(abar.shape[-1])
    return r, w, L


def _rules(ft: FactorType) -> None:
    @ft.rule("initial_mean", "vmp")
    def to_initial_mean(m: Moments, p: dict) -> tuple:
        x1 = _chain(m, p).mean()[..., 0, :]
        P0 = m["initial_precision"][0]
        return np.einsum("...ij,...j->...i", P0, x1), -0.5 * np.broadcast_to(P0, x1.shape + x1.shape[-1:])

    @ft.rule("initial_precision", "vmp")
    def to_initial_precision(m: Moments, p: dict) -> tuple:
        r, _, _ = _residuals(_chain(m, p), m, p["lengths"])
        return -0.5 * r, np.full(r.shape[:-2], 0.5)

    @ft.rule("transition", "vmp")
    def to_transition(m: Moments, p: dict) -> tuple:
        _, _, s11, s00, s10, _ = _sums(_chain(m, p), p["lengths"])
        qbar, _ = _noise(m, p)
        abar, _ = _transition(m)
        D = abar.shape[-1]
        off = qbar * (1.0 - np.eye(D))  # Q̄_kj for j ≠ k
        eta1 = qbar @ s10 - np.einsum("...kj,...jd,...ed->...ke", off, abar, s00)
        eta2 = -0.5 * np.diagonal(qbar, axis1=-2, axis2=-1)[..., :, None, None] * s00[..., None, :, :]
        return eta1, eta2

    @ft.rule("noise_precision", "vmp")
    def to_noise_precision(m: Moments, p: dict) -> tuple:
        _, w, L = _residuals(_chain(m, p), m, p["lengths"])
        if p.get("noise") == "diag":
            return -0.5 * np.diagonal(w, axis1=-2, axis2=-1), np.broadcast_to(0.5 * (L - 1.0)[..., None],
                                                                                w.shape[:-1]).copy()
        if p.get("noise") == "shared":
            return -0.5 * np.trace(w, axis1=-2, axis2=-1), 0.5 * (L - 1.0) * w.shape[-1]
        return -0.5 * w, 0.5 * (L - 1.0)

    @ft.rule("out", "vmp")
    def to_out(m: Moments, p: dict) -> tuple:
        """The mean-field message to each step (what an independent q(x_t) would receive); the chain's own
        update does not use it (its q is exact); it is the gradient of E[log f] when steps are independent."""
        mu = np.asarray(m["out"][0])
        T = mu.shape[-2]
        valid = _valid(T, p["lengths"])
        mu = np.where(valid[..., None], mu, 0.0)
        P0, m0 = m["initial_precision"][0], m["initial_mean"][0]
        qbar, _ = _noise(m, p)
        abar, acov = _transition(m)
        B = qbar @ abar
        aqa = _aqa(qbar, abar, acov)
        last = (np.asarray(p["lengths"])[..., None] - 1 == np.arange(T))
        eta2 = np.where(np.arange(T)[:, None, None] == 0, P0[..., None, :, :], qbar[..., None, :, :])
        eta2 = -0.5 * (eta2 + np.where(last[..., None, None], 0.0, aqa[..., None, :, :]))
        eta1 = np.zeros(np.broadcast_shapes(mu.shape, eta2.shape[:-1]))
        eta1[..., 0, :] += np.einsum("...ij,...j->...i", P0, m0)
        eta1[..., 1:, :] += np.einsum("...ij,...tj->...ti", B, mu[..., :-1, :])
        eta1[..., :-1, :] += np.einsum("...ji,...tj->...ti", B, mu[..., 1:, :])
        eta1 = np.where(valid[..., None], eta1, 0.0)
        eta2 = np.where(valid[..., None, None], eta2, 0.0)
        return eta1, eta2

    @ft.evidence(kind="exact")
    def evidence(m: Moments, p: dict) -> np.ndarray:
        r, w, L = _residuals(_chain(m, p), m, p["lengths"])
        P0, ldP0 = m["initial_precision"]
        qbar, ldQ = _noise(m, p)
        D = r.shape[-1]
        return (0.5 * ldP0 - 0.5 * np.einsum("...ij,...ji->...", P0, r) + 0.5 * (L - 1.0) * ldQ
                - 0.5 * np.einsum("...ij,...ji->...", qbar, w) - 0.5 * L * D * _LOG_2PI)

    ft.structured = chain_posterior


def _shared(a: np.ndarray, event: int) -> np.ndarray:
    """One copy of a parameter statistic shared by every sequence (the factor's plates broadcast)."""
    a = np.asarray(a, dtype=float)
    return a.reshape((-1,) + a.shape[a.ndim - event:])[0] if a.ndim > event else a


def _covariance_root(P: np.ndarray, what: str) -> tuple[np.ndarray, float]:
    """(U, log|P|): U lower triangular with UUᵀ = P⁻¹ (``kernels.kalman.covariance_root``); a P that is not
    positive definite is named."""
    U, logdet = covariance_root(np.ascontiguousarray(P, dtype=float))
    if np.isnan(logdet):
        raise FloatingPointError(f"the chain's {what} {np.asarray(P).tolist()} is not positive definite")
    return U, float(logdet)


def chain_posterior(m: Moments, p: dict, potentials, independent: bool = False) -> GaussianChain:
    """q(x) given the node potentials (η₁ batch + (T, D), η₂ batch + (T, D, D)): the square-root filter and
    RTS smoother over all sequences at once.  ``potentials=None`` gives the prior chain (no other factor), or
    with ``independent`` the q with independent steps and the moments in ``m["out"]``.

    The chain is (m̄₀, P̄₀, Ā, Q̄) with the potentials J_t + M[t < L] (M = Σ_i Q̄_ii Cov a_i); with the kernel's
    Σ_t log|G_t| and log ∫ p(x) Π_t φ_t, log|Λ| = log|P̄₀| + (L − 1) log|Q̄| + Σ_t log|G_t| and
    log Z = log ∫ p(x) Π_t φ_t + ½m̄₀ᵀP̄₀m̄₀ + ½LD log 2π − ½ log|P̄₀| − ½(L − 1) log|Q̄|
    (Z = ∫ exp(−½xᵀΛx + (h + P̄₀m̄₀e₁)ᵀx) dx)."""
    lengths = p["lengths"]
    if potentials is None and independent:
        mu, m2 = (np.asarray(a, dtype=float) for a in m["out"])
        valid = _valid(mu.shape[-2], lengths)
        return GaussianChain.independent(np.where(valid[..., None], mu, 0.0), np.where(valid[..., None, None], m2, 0.0))
    D = p["D"]
    P0 = _shared(m["initial_precision"][0], 2)
    m0 = np.ascontiguousarray(_shared(m["initial_mean"][0], 1))
    qbar = _shared(_noise(m, p)[0], 2)
    abar, acov = (_shared(a, k) for a, k in zip(_transition(m), (2, 3), strict=True))
    abar = np.ascontiguousarray(abar)
    extra = np.ascontiguousarray(np.einsum("i,ijk->jk", np.diagonal(qbar), acov))
    U0, ld0 = _covariance_root(P0, "initial precision E[P₀]")
    UQ, ldq = _covariance_root(qbar, "noise precision E[Q]")
    shape = tuple(p["shape"])  # sequences + (T,)
    if potentials is None:
        h, J = np.zeros(shape + (D,)), np.zeros(shape + (D, D))
    else:
        h = np.broadcast_to(np.asarray(potentials[0], dtype=float), shape + (D,))
        J = -2.0 * np.broadcast_to(np.asarray(potentials[1], dtype=float), shape + (D, D))
        J = 0.5 * (J + np.swapaxes(J, -1, -2))
    batch, T = shape[:-1], shape[-1]
    lens = np.ascontiguousarray(np.broadcast_to(lengths, batch).reshape(-1), dtype=np.int64)
    fh = np.ascontiguousarray(h.reshape((-1, T, D)))
    fJ = np.ascontiguousarray(J.reshape((-1, T, D, D)))
    args = (m0, U0, abar, UQ, extra)
    mean, second, pair, resid, logphi, logdetg, bad = kalman_smooth(fh, fJ, lens, *args)
    if bad[0] >= 0:
        raise FloatingPointError(f"sequence {int(bad[0])}, step {int(bad[1])}: the filtered distribution is "
                                 "improper (a potential of negative precision outweighs what the steps up to it "
                                 "know about the state)")
    logdet = ld0 + (lens - 1.0) * ldq + logdetg
    entropy = 0.5 * lens * D * (1.0 + _LOG_2PI) - 0.5 * logdet
    logz = logphi + 0.5 * m0 @ P0 @ m0 + 0.5 * lens * D * _LOG_2PI - 0.5 * ld0 - 0.5 * (lens - 1.0) * ldq
    residuals = ChainResiduals(m0, abar, *(resid[:, k].reshape(batch + (D, D)) for k in range(3)))
    sampler = partial(_draw_chains, fh, fJ, lens, args, batch, T, D)  # a partial pickles; a closure does not
    return GaussianChain(mean.reshape(batch + (T, D)), second.reshape(batch + (T, D, D)),
                         pair.reshape(batch + (T, D, D)), logz.reshape(batch), entropy.reshape(batch),
                         sampler=sampler, residuals=residuals)


_rules(GAUSSIAN_MARKOV_CHAIN)
_rules(GAUSSIAN_MARKOV_CHAIN_DIAG)


def _draw_chains(fh, fJ, lens, args, batch, T, D, draws: int, rng: np.random.Generator) -> np.ndarray:
    """Joint draws of the state paths, (draws, *batch, T, D)."""
    z = rng.standard_normal((draws,) + fh.shape)
    return sample_chains(fh, fJ, lens, *args, z).reshape((draws, *batch, T, D))
