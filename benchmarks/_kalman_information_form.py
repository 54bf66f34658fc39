"""The information-form Kalman smoother the library used before its square-root one, kept only so that
``benchmarks/kalman_square_root.py`` can time both in one run (numba, ``cache=True``).  It loses the O(1)
information under the O(Q) entries of the joint precision when the dynamics are nearly deterministic.

The chain x_1..x_L ∈ R^D of one sequence has the joint log-density, up to a constant,

    −½ Σ_t x_tᵀ Λ_t x_t + Σ_{t≥2} x_tᵀ B x_{t−1} + Σ_t h_tᵀ x_t,

a block-tridiagonal precision with diagonal blocks Λ_t = J_t + P₀[t = 1] + Q̄[t ≥ 2] + Ā[t < L]
(J_t, h_t the node potentials of the other factors; P₀ the initial precision; Q̄ = E[Q]; Ā = E[AᵀQA])
and off-diagonal blocks −B, B = E[QA].  Forward elimination (the information filter) gives

    P_1 = Λ_1,  g_1 = h_1;   P_t = Λ_t − B P_{t−1}⁻¹ Bᵀ,  g_t = h_t + B P_{t−1}⁻¹ g_{t−1},

so that x_t | x_{t+1} ~ N(P_t⁻¹(g_t + Bᵀx_{t+1}), P_t⁻¹) and x_L ~ N(P_L⁻¹g_L, P_L⁻¹).  The backward pass
(Rauch–Tung–Striebel) with K_t = P_t⁻¹Bᵀ gives

    μ_t = P_t⁻¹g_t + K_t μ_{t+1},  Σ_t = P_t⁻¹ + K_t Σ_{t+1} K_tᵀ,  Cov(x_{t+1}, x_t) = Σ_{t+1} K_tᵀ,

and the log-normaliser log Z = Σ_t [½ g_tᵀP_t⁻¹g_t − ½ log|P_t| + (D/2) log 2π], with log|Λ| = Σ_t log|P_t|.
O(L·D³) per sequence.  A P_t that is not positive definite is reported by its (sequence, step).
"""

from __future__ import annotations

import numpy as np
from numba import njit

_LOG_2PI = float(np.log(2.0 * np.pi))


@njit(cache=True)
def _chol_inv(a: np.ndarray, out: np.ndarray) -> float:
    """Invert the SPD matrix ``a`` into ``out`` by Cholesky; returns log|a| (nan if not positive definite)."""
    D = a.shape[0]
    L = np.zeros((D, D))
    logdet = 0.0
    for j in range(D):
        s = a[j, j]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        if not s > 0.0:
            return np.nan
        L[j, j] = np.sqrt(s)
        logdet += 2.0 * np.log(L[j, j])
        for i in range(j + 1, D):
            s = 0.5 * (a[i, j] + a[j, i])
            for k in range(j):
                s -= L[i, k] * L[j, k]
            L[i, j] = s / L[j, j]
    # Linv lower-triangular, then out = Linvᵀ Linv
    Li = np.zeros((D, D))
    for j in range(D):
        Li[j, j] = 1.0 / L[j, j]
        for i in range(j + 1, D):
            s = 0.0
            for k in range(j, i):
                s -= L[i, k] * Li[k, j]
            Li[i, j] = s / L[i, i]
    for i in range(D):
        for j in range(i, D):
            s = 0.0
            for k in range(j, D):
                s += Li[k, i] * Li[k, j]
            out[i, j] = s
            out[j, i] = s
    return logdet


@njit(cache=True)
def _forward_step(n, t, L, h, J, P0, h0, Qbar, AQA, B, g, P, BP, Pinv):
    """One step of the forward (information-form) pass of sequence n: g[t] and P (the precision of x_t given
    the observations up to t, before its inverse): P = J_t + (P₀ or E[Q]) + E[AᵀQA] (not at the last step),
    then, past the first step, BP = B P_{t−1}⁻¹, P −= BP Bᵀ, g_t += BP g_{t−1}."""
    D = P.shape[0]
    for i in range(D):
        g[t, i] = h[n, t, i] + (h0[i] if t == 0 else 0.0)
        for j in range(D):
            P[i, j] = J[n, t, i, j] + (P0[i, j] if t == 0 else Qbar[i, j]) + (AQA[i, j] if t < L - 1 else 0.0)
    if t > 0:
        for i in range(D):
            for j in range(D):
                s = 0.0
                for k in range(D):
                    s += B[i, k] * Pinv[t - 1, k, j]
                BP[i, j] = s
        for i in range(D):
            s = 0.0
            for k in range(D):
                s += BP[i, k] * g[t - 1, k]
            g[t, i] += s
            for j in range(D):
                s = 0.0
                for k in range(D):
                    s += BP[i, k] * B[j, k]
                P[i, j] -= s


@njit(cache=True)
def kalman_smooth(h, J, lengths, P0, h0, Qbar, AQA, B):
    """Smoothed moments of N Gaussian chains sharing their parameters (see the module docstring).

    Parameters
    ----------
    h, J : arrays (N, T, D) and (N, T, D, D)
        Node potentials: Σ of the other factors' η₁, and −2 Σ η₂ (their precision).
    lengths : int array (N,)
        Steps that exist per sequence (1 ≤ L_n ≤ T); later steps get zero statistics.
    P0, h0 : (D, D), (D,)
        E[P₀] and E[P₀m₀] of the first step's prior.
    Qbar, AQA, B : (D, D)
        E[Q], E[AᵀQA] and E[QA].

    Returns
    -------
    mean (N, T, D), second (N, T, D, D) = E[x_t x_tᵀ], pair (N, T, D, D) = E[x_t x_{t−1}ᵀ] (0 at t = 0),
    logz (N,), logdet (N,) = log|Λ| of each sequence's joint precision, bad (2,) = (sequence, step) of the
    first P_t that is not positive definite, or (−1, −1).
    """
    N, T, D = h.shape
    mean = np.zeros((N, T, D))
    second = np.zeros((N, T, D, D))
    pair = np.zeros((N, T, D, D))
    logz = np.zeros(N)
    logdet = np.zeros(N)
    bad = np.full(2, -1, dtype=np.int64)
    Pinv = np.zeros((T, D, D))
    g = np.zeros((T, D))
    P = np.zeros((D, D))
    BP = np.zeros((D, D))
    K = np.zeros((D, D))
    S = np.zeros((D, D))
    Snext = np.zeros((D, D))
    KS = np.zeros((D, D))
    for n in range(N):
        L = lengths[n]
        for t in range(L):
            _forward_step(n, t, L, h, J, P0, h0, Qbar, AQA, B, g, P, BP, Pinv)
            ld = _chol_inv(P, Pinv[t])
            if np.isnan(ld):
                if bad[0] < 0:
                    bad[0] = n
                    bad[1] = t
                ld = 0.0
                for i in range(D):
                    for j in range(D):
                        Pinv[t, i, j] = 0.0
            logdet[n] += ld
            q = 0.0
            for i in range(D):
                for j in range(D):
                    q += g[t, i] * Pinv[t, i, j] * g[t, j]
            logz[n] += 0.5 * q - 0.5 * ld + 0.5 * D * _LOG_2PI
        # backward pass
        for t in range(L - 1, -1, -1):
            for i in range(D):
                s = 0.0
                for k in range(D):
                    s += Pinv[t, i, k] * g[t, k]
                mean[n, t, i] = s
            if t == L - 1:
                for i in range(D):
                    for j in range(D):
                        S[i, j] = Pinv[t, i, j]
            else:
                # K = P_t⁻¹Bᵀ; μ_t += K μ_{t+1}; KS = K Σ_{t+1}; Σ_t = P_t⁻¹ + KS Kᵀ
                for i in range(D):
                    for j in range(D):
                        s = 0.0
                        for k in range(D):
                            s += Pinv[t, i, k] * B[j, k]
                        K[i, j] = s
                for i in range(D):
                    s = 0.0
                    for k in range(D):
                        s += K[i, k] * mean[n, t + 1, k]
                    mean[n, t, i] += s
                for i in range(D):
                    for j in range(D):
                        s = 0.0
                        for k in range(D):
                            s += K[i, k] * Snext[k, j]
                        KS[i, j] = s
                for i in range(D):
                    for j in range(D):
                        s = Pinv[t, i, j]
                        for k in range(D):
                            s += KS[i, k] * K[j, k]
                        S[i, j] = s
                # E[x_{t+1} x_tᵀ] = Σ_{t+1} Kᵀ + μ_{t+1}μ_tᵀ = KSᵀ + μ_{t+1}μ_tᵀ
                for i in range(D):
                    for j in range(D):
                        pair[n, t + 1, i, j] = KS[j, i] + mean[n, t + 1, i] * mean[n, t, j]
            for i in range(D):
                for j in range(D):
                    second[n, t, i, j] = S[i, j] + mean[n, t, i] * mean[n, t, j]
                    Snext[i, j] = S[i, j]
    return mean, second, pair, logz, logdet, bad
