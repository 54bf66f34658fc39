"""Per-row Gaussian posteriors of latent scores with missing entries (``factors.factor_analysis``), one small K×K
problem per row: numpy's batched ``linalg`` calls pay a per-matrix overhead many times the K³/3 flops of a
10×10 Cholesky, so the loop over rows runs here, compiled.

For each row n, with P_n symmetric positive definite (K, K) and h_n (K,):  L_n L_nᵀ = P_n (Cholesky),
Σ_n = P_n⁻¹ = L_n⁻ᵀL_n⁻¹, m_n = Σ_n h_n, and log|Σ_n| = −2Σ_k log L_n,kk.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def _cholesky_into(A: np.ndarray, L: np.ndarray) -> bool:
    K = A.shape[0]
    for j in range(K):
        s = A[j, j]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        if not s > 0.0:
            return False
        d = math.sqrt(s)
        L[j, j] = d
        for i in range(j + 1, K):
            t = A[i, j]
            for k in range(j):
                t -= L[i, k] * L[j, k]
            L[i, j] = t / d
    return True


@njit(cache=True)
def row_posteriors(P: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(Σ (N, K, K), m (N, K), log|Σ_n| (N,), index of the first row whose P_n is not positive definite or −1)."""
    N, K = h.shape
    cov = np.empty((N, K, K))
    mean = np.empty((N, K))
    logdet = np.empty(N)
    L = np.zeros((K, K))
    Li = np.zeros((K, K))
    for n in range(N):
        L[:] = 0.0
        if not _cholesky_into(P[n], L):
            return cov, mean, logdet, n
        ld = 0.0
        for k in range(K):
            ld -= 2.0 * math.log(L[k, k])
        logdet[n] = ld
        # L⁻¹ (lower triangular) by forward substitution
        Li[:] = 0.0
        for j in range(K):
            Li[j, j] = 1.0 / L[j, j]
            for i in range(j + 1, K):
                t = 0.0
                for k in range(j, i):
                    t -= L[i, k] * Li[k, j]
                Li[i, j] = t / L[i, i]
        # Σ = L⁻ᵀ L⁻¹ (symmetric: fill both triangles from one)
        for i in range(K):
            for j in range(i + 1):
                t = 0.0
                for k in range(i, K):
                    t += Li[k, i] * Li[k, j]
                cov[n, i, j] = t
                cov[n, j, i] = t
        for i in range(K):
            t = 0.0
            for j in range(K):
                t += cov[n, i, j] * h[n, j]
            mean[n, i] = t
    return cov, mean, logdet, -1


@njit(cache=True)
def logdets(S: np.ndarray) -> tuple[np.ndarray, int]:
    """log|S_n| of a batch (N, K, K) of symmetric positive definite matrices (Cholesky), and the index of the
    first that is not positive definite or −1."""
    N, K = S.shape[0], S.shape[1]
    out = np.empty(N)
    L = np.zeros((K, K))
    for n in range(N):
        L[:] = 0.0
        if not _cholesky_into(S[n], L):
            return out, n
        ld = 0.0
        for k in range(K):
            ld += 2.0 * math.log(L[k, k])
        out[n] = ld
    return out, -1
