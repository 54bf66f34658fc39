"""Forward–backward for batches of discrete chains (Rabiner 1989, scaled form), compiled by numba.

For each sequence n of length L_n, with node potentials φ_t(k) (log scale), an initial log weight
log π̃(k) and a transition log weight log Ã(j, k) (shared by all sequences), the unnormalised chain

    p̃(z_1..z_L) = π̃(z_1) Π_t Ã(z_{t−1}, z_t) Π_t exp φ_t(z_t)

has normaliser Z_n.  The kernel returns the smoothed marginals γ_t(k), the pairwise expected counts
Σ_t ξ_t(j, k) summed over the steps of each sequence, and log Z_n.  Each step's potentials are shifted
by their maximum and each forward vector is normalised (its scale c_t kept), so nothing under- or
overflows: log Z = Σ_t (log c_t + max_k φ_t(k)).  Cost O(L·K²) per sequence.  Steps t ≥ L_n get
γ_t = 0.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True)
def _forward_filter(phi_n, log_pi, trans, L, alpha, b, scale):  # pragma: no cover - compiled
    """Scaled forward pass of one sequence: fills the normalised α_t, the shifted emission weights
    b_t(k) = exp(φ_t(k) − max_k φ_t(k)) and the scales c_t; returns log Z (−∞ if no path is possible)."""
    K = phi_n.shape[1]
    total = 0.0
    for t in range(L):
        m = -np.inf
        for k in range(K):
            v = phi_n[t, k] + (log_pi[k] if t == 0 else 0.0)
            if v > m:
                m = v
        if m == -np.inf:
            m = 0.0
        for k in range(K):
            v = phi_n[t, k] + (log_pi[k] if t == 0 else 0.0)
            b[t, k] = np.exp(v - m)
        s = 0.0
        for k in range(K):
            if t == 0:
                a = b[0, k]
            else:
                a = 0.0
                for j in range(K):
                    a += alpha[t - 1, j] * trans[j, k]
                a *= b[t, k]
            alpha[t, k] = a
            s += a
        if s <= 0.0:  # every state impossible: log Z = −∞
            total = -np.inf
            s = 1.0
        for k in range(K):
            alpha[t, k] /= s
        scale[t] = s
        total += np.log(s) + m
    return total


@njit(cache=True, parallel=True)
def _forward_backward(phi, log_pi, trans, lengths, gamma, xi, logz):  # pragma: no cover - compiled
    N, T, K = phi.shape
    for n in prange(N):
        L = lengths[n]
        alpha = np.zeros((L, K))
        b = np.zeros((L, K))
        scale = np.zeros(L)
        total = _forward_filter(phi[n], log_pi, trans, L, alpha, b, scale)
        logz[n] = total
        beta = np.ones(K)
        nxt = np.zeros(K)
        for k in range(K):
            gamma[n, L - 1, k] = alpha[L - 1, k]
        for t in range(L - 1, 0, -1):
            for k in range(K):
                nxt[k] = b[t, k] * beta[k] / scale[t]
            for j in range(K):
                aj = alpha[t - 1, j]
                acc = 0.0
                for k in range(K):
                    w = trans[j, k] * nxt[k]
                    xi[n, j, k] += aj * w
                    acc += w
                beta[j] = acc
            for k in range(K):
                gamma[n, t - 1, k] = alpha[t - 1, k] * beta[k]


def forward_backward(phi: np.ndarray, log_pi: np.ndarray, log_trans: np.ndarray,
                     lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Smoothed marginals, summed pairwise counts and log-normalisers of N chains at once.

    Parameters
    ----------
    phi : (N, T, K) node log-potentials (entries past a sequence's length are ignored).
    log_pi : (K,) initial log weights; ``log_trans`` : (K, K) transition log weights (row = from).
    lengths : (N,) integer lengths, 1 ≤ L_n ≤ T.

    Returns
    -------
    gamma : (N, T, K) with γ_t(k) = q(z_t = k) (zero past the length); xi : (N, K, K) with
    Σ_{t≥2} q(z_{t−1} = j, z_t = k); logz : (N,) log Σ_z p̃(z).
    """
    phi = np.ascontiguousarray(phi, dtype=np.float64)
    N, T, K = phi.shape
    gamma = np.zeros((N, T, K))
    xi = np.zeros((N, K, K))
    logz = np.zeros(N)
    _forward_backward(phi, np.ascontiguousarray(log_pi, dtype=np.float64),
                      np.ascontiguousarray(np.exp(log_trans), dtype=np.float64),
                      np.ascontiguousarray(lengths, dtype=np.int64), gamma, xi, logz)
    return gamma, xi, logz


@njit(cache=True, parallel=True)
def _chain_log_normalisers(phi, log_pi, trans, lengths, logz):  # pragma: no cover - compiled
    S, N, T, K = phi.shape
    for i in prange(S * N):
        s, n = i // N, i % N
        L = lengths[n]
        alpha = np.zeros((L, K))
        b = np.zeros((L, K))
        scale = np.zeros(L)
        logz[s, n] = _forward_filter(phi[s, n], log_pi[s], trans[s], L, alpha, b, scale)


def chain_log_normalisers(phi: np.ndarray, log_pi: np.ndarray, trans: np.ndarray,
                          lengths: np.ndarray) -> np.ndarray:
    """log Z of N chains under S parameter draws at once (the forward filter alone).

    ``phi``: (S, N, T, K) node log-potentials; ``log_pi``: (S, K) initial log weights; ``trans``: (S, K, K)
    transition weights (not logs; row = from); ``lengths``: (N,).  Returns (S, N): with φ the emission
    log-likelihoods and (π, A) a draw, log Z_n = log p(y_n | θ), the likelihood of sequence n with its
    labels summed out.
    """
    phi = np.ascontiguousarray(phi, dtype=np.float64)
    S, N = phi.shape[:2]
    logz = np.zeros((S, N))
    _chain_log_normalisers(phi, np.ascontiguousarray(log_pi, dtype=np.float64),
                           np.ascontiguousarray(trans, dtype=np.float64),
                           np.ascontiguousarray(lengths, dtype=np.int64), logz)
    return logz


@njit(cache=True, parallel=True)
def _backward_sample(phi, log_pi, trans, lengths, u, out):  # pragma: no cover - compiled
    S = u.shape[0]
    N, T, K = phi.shape
    for n in prange(N):
        L = lengths[n]
        alpha = np.zeros((L, K))
        _forward_filter(phi[n], log_pi, trans, L, alpha, np.zeros((L, K)), np.zeros(L))
        w = np.zeros(K)
        for d in range(S):
            for t in range(T - 1, L - 1, -1):
                out[d, n, t] = -1
            nxt = -1
            for t in range(L - 1, -1, -1):
                tot = 0.0
                for k in range(K):
                    w[k] = alpha[t, k] * (trans[k, nxt] if nxt >= 0 else 1.0)
                    tot += w[k]
                r = u[d, n, t] * tot
                acc = 0.0
                pick = K - 1
                for k in range(K):
                    acc += w[k]
                    if r < acc:
                        pick = k
                        break
                out[d, n, t] = pick
                nxt = pick


def sample_chains(phi: np.ndarray, log_pi: np.ndarray, log_trans: np.ndarray, lengths: np.ndarray,
                  draws: int, rng: np.random.Generator) -> np.ndarray:
    """Joint draws of N chains from p̃(z) ∝ π̃(z_1) Π_t Ã(z_{t−1}, z_t) Π_t exp φ_t(z_t) (forward filtering,
    backward sampling: z_L ~ α_L, then z_t | z_{t+1} ∝ α_t(j) Ã(j, z_{t+1}); Carter & Kohn 1994).

    Returns integer labels of shape (draws, N, T), −1 past each sequence's length.  Cost O(N·L·K²) for
    the filter plus O(draws·N·L·K) for the draws.
    """
    phi = np.ascontiguousarray(phi, dtype=np.float64)
    N, T, K = phi.shape
    out = np.empty((draws, N, T), dtype=np.int64)
    u = rng.random((draws, N, T))
    _backward_sample(phi, np.ascontiguousarray(log_pi, dtype=np.float64),
                     np.ascontiguousarray(np.exp(log_trans), dtype=np.float64),
                     np.ascontiguousarray(lengths, dtype=np.int64), u, out)
    return out


@njit(cache=True, parallel=True)
def _forward_sample(pi, trans, lengths, u, out):  # pragma: no cover - compiled
    S, N, T = u.shape
    K = pi.shape[1]
    for d in prange(S):
        for n in range(N):
            L = lengths[n]
            prev = -1
            for t in range(T):
                if t >= L:
                    out[d, n, t] = -1
                    continue
                r = u[d, n, t]
                acc = 0.0
                pick = K - 1
                for k in range(K):
                    acc += pi[d, k] if prev < 0 else trans[d, prev, k]
                    if r < acc:
                        pick = k
                        break
                out[d, n, t] = pick
                prev = pick


def forward_sample_chains(pi: np.ndarray, trans: np.ndarray, lengths: np.ndarray, T: int,
                          rng: np.random.Generator) -> np.ndarray:
    """Draws of N Markov chains from the model itself: z_1 ~ π^(d), z_t ~ A^(d)[z_{t−1}], one (π, A) per
    draw d, over T steps.  ``pi``: (draws, K); ``trans``: (draws, K, K) row-stochastic; returns labels
    (draws, N, T) with −1 past each sequence's length."""
    pi = np.ascontiguousarray(pi, dtype=np.float64)
    trans = np.ascontiguousarray(trans, dtype=np.float64)
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    S, N = pi.shape[0], lengths.shape[0]
    out = np.empty((S, N, T), dtype=np.int64)
    _forward_sample(pi, trans, lengths, rng.random((S, N, T)), out)
    return out
