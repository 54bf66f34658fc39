r"""Log-likelihoods of logits and their gradients in one pass, for handlers that evaluate a site at many
sampled weight vectors (S draws × N data points).

Bernoulli with label s ∈ {0, 1} at logit u: log f = s·u − log(1 + eᵘ), ∂ log f/∂u = s − σ(u), from one
exp(−|u|) per point.  Categorical with counts d (a one-hot label), c = Σ_k d_k, at logits u:

.. math:: \log f = \sum_k d_k u_k - c\,\operatorname{lse}(u), \qquad
          \partial_{u_k}\log f = d_k - c\,\mathrm{softmax}(u)_k.

Numpy would make several temporaries of the full (S, N[, K]) array and two transcendental passes.  The
exponentials (and log1p) are the call-free ones of ``vector_math``, whose loops vectorise: about 5× faster
than ``math.exp``/``math.log1p`` per element here.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .vector_math import exp_nonpositive, log1p_unit


@njit(cache=True, parallel=True)
def _value_grad(u, d, val, grad):  # u (S, N, K) any layout, d (N, K)
    S, N, K = u.shape
    for s in prange(S):
        a = np.empty(N * K)  # u − max_k u for one draw, and its exp (separate: in place does not vectorise)
        e = np.empty(N * K)
        work = np.empty(N * K, dtype=np.int64)
        top = np.empty(N)
        for n in range(N):
            t = u[s, n, 0]
            for k in range(1, K):
                t = max(t, u[s, n, k])
            top[n] = t
            for k in range(K):
                a[n * K + k] = u[s, n, k] - t
        exp_nonpositive(a, e, work)
        for n in range(N):
            tot = 0.0
            lin = 0.0
            c = 0.0
            for k in range(K):
                tot += e[n * K + k]
                lin += d[n, k] * u[s, n, k]
                c += d[n, k]
            val[s, n] = lin - c * (top[n] + math.log(tot))
            scale = c / tot
            for k in range(K):
                grad[s, n, k] = d[n, k] - scale * e[n * K + k]


def categorical_logit_value_grad(u: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(log f, ∂ log f/∂u)`` at logits ``u`` of shape (S, N, K) for counts ``d`` of shape (N, K)."""
    u = np.asarray(u, dtype=np.float64)
    d = np.ascontiguousarray(np.broadcast_to(np.asarray(d, dtype=np.float64), u.shape[1:]))
    val = np.empty(u.shape[:2])
    grad = np.empty_like(u)  # u's memory order: a class-major view of the logits gives a class-major gradient
    _value_grad(u, d, val, grad)
    return val, grad


@njit(cache=True, parallel=True)
def _bernoulli_value_grad(u, s, val, grad):  # u (S, N), s (N,)
    S, N = u.shape
    for i in prange(S):
        a = np.empty(N)  # −|u| for one draw, and exp(−|u|) (separate: in place does not vectorise)
        e = np.empty(N)
        work = np.empty(N, dtype=np.int64)
        for n in range(N):
            a[n] = -abs(u[i, n])
        exp_nonpositive(a, e, work)
        for n in range(N):
            x = u[i, n]
            r = 1.0 / (1.0 + e[n])
            sig = r if x >= 0.0 else e[n] * r
            val[i, n] = s[n] * x - (max(x, 0.0) + log1p_unit(e[n]))
            grad[i, n] = s[n] - sig


def bernoulli_logit_value_grad(u: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(log f, ∂ log f/∂u)`` at logits ``u`` of shape (S, N) for labels ``s`` of shape (N,)."""
    u = np.asarray(u, dtype=np.float64)
    s = np.ascontiguousarray(np.broadcast_to(np.asarray(s, dtype=np.float64), u.shape[1:]))
    val = np.empty(u.shape)
    grad = np.empty(u.shape)
    _bernoulli_value_grad(u, s, val, grad)
    return val, grad
