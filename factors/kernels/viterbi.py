"""Viterbi for batches of discrete chains: the most probable state path, compiled by numba.

For each sequence n of length L_n, with node log-potentials φ_t(k), an initial log weight log π̃(k) and a
transition log weight log Ã(j, k) (shared by all sequences), the unnormalised chain of ``forward_backward``

    log p̃(z_1..z_L) = log π̃(z_1) + Σ_{t≥2} log Ã(z_{t−1}, z_t) + Σ_t φ_t(z_t)

is maximised over the K^L paths by dynamic programming in log space (Viterbi 1967; Rabiner 1989, §III.B):

    δ_1(k) = log π̃(k) + φ_1(k),   δ_t(k) = max_j [δ_{t−1}(j) + log Ã(j, k)] + φ_t(k),

with the maximising j kept as a back-pointer; the path ends at argmax_k δ_L(k) and is traced back.  Sums
of logs neither under- nor overflow.  Ties go to the lowest state.  Cost O(L·K²) per sequence.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, parallel=True)
def _viterbi(phi, log_pi, log_trans, lengths, path, score):  # pragma: no cover - compiled
    N, T, K = phi.shape
    for n in prange(N):
        L = lengths[n]
        back = np.zeros((L, K), dtype=np.int64)
        delta = np.empty(K)
        new = np.empty(K)
        for k in range(K):
            delta[k] = log_pi[k] + phi[n, 0, k]
        for t in range(1, L):
            for k in range(K):
                best, arg = -np.inf, 0
                for j in range(K):
                    v = delta[j] + log_trans[j, k]
                    if v > best:
                        best, arg = v, j
                new[k] = best + phi[n, t, k]
                back[t, k] = arg
            for k in range(K):
                delta[k] = new[k]
        best, arg = -np.inf, 0
        for k in range(K):
            if delta[k] > best:
                best, arg = delta[k], k
        score[n] = best
        path[n, L - 1] = arg
        for t in range(L - 1, 0, -1):
            arg = back[t, arg]
            path[n, t - 1] = arg
        for t in range(L, T):
            path[n, t] = -1


def viterbi(phi: np.ndarray, log_pi: np.ndarray, log_trans: np.ndarray,
            lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The most probable paths of N chains at once.

    Parameters
    ----------
    phi : (N, T, K) node log-potentials (entries past a sequence's length are ignored).
    log_pi : (K,) initial log weights; ``log_trans`` : (K, K) transition log weights (row = from).
    lengths : (N,) integer lengths, 1 ≤ L_n ≤ T.

    Returns
    -------
    path : (N, T) integer states z* = argmax_z log p̃(z), −1 past each sequence's length;
    score : (N,) max_z log p̃(z) (−∞ when no path has positive weight).
    """
    phi = np.ascontiguousarray(phi, dtype=np.float64)
    N, T, _ = phi.shape
    path = np.empty((N, T), dtype=np.int64)
    score = np.empty(N)
    _viterbi(phi, np.ascontiguousarray(log_pi, dtype=np.float64), np.ascontiguousarray(log_trans, dtype=np.float64),
             np.ascontiguousarray(lengths, dtype=np.int64), path, score)
    return path, score


__all__ = ["viterbi"]
