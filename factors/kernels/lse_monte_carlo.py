r"""Monte Carlo reference for ``E[lse(x)]``, ``x_k ~ N(m_k, v_k)`` independent: antithetic pairs with the
second-order Taylor polynomial at ``m`` as a control variate.

For δ = √v ⊙ ε, ε ~ N(0, I), and s = softmax(m) the residual

    r(ε) = ½[lse(m + δ) + lse(m − δ)] − lse(m) − ½ δᵀ(diag(s) − s sᵀ)δ

has mean E[lse(x)] − (lse(m) + ½ Σ_k v_k s_k(1 − s_k)), the Taylor value being known in closed form, so the
estimator's error shrinks like v² rather than like √v.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .softmax_bounds import taylor_softmax_approx


@njit(cache=True, parallel=True)
def _residual_sums(eps, m, sd, s, out):
    """Add, per row q of m, the sum and the sum of squares of r(ε) over the rows ε of ``eps`` to out[q]."""
    n, k = eps.shape
    for q in prange(m.shape[0]):
        mx = -math.inf
        for j in range(k):
            mx = max(mx, m[q, j])
        tot = 0.0
        for j in range(k):
            tot += math.exp(m[q, j] - mx)
        lse0 = mx + math.log(tot)
        s1 = 0.0
        s2 = 0.0
        for i in range(n):
            hp = -math.inf
            hm = -math.inf
            for j in range(k):
                d = sd[q, j] * eps[i, j]
                hp = max(hp, m[q, j] + d)
                hm = max(hm, m[q, j] - d)
            sp = 0.0
            sm = 0.0
            quad = 0.0
            lin = 0.0
            for j in range(k):
                d = sd[q, j] * eps[i, j]
                sp += math.exp(m[q, j] + d - hp)
                sm += math.exp(m[q, j] - d - hm)
                quad += s[q, j] * d * d
                lin += s[q, j] * d
            r = 0.5 * (hp + math.log(sp) + hm + math.log(sm)) - lse0 - 0.5 * (quad - lin * lin)
            s1 += r
            s2 += r * r
        out[q, 0] += s1
        out[q, 1] += s2


def lse_expectation_mc(m: np.ndarray, v: np.ndarray, n_samples: int, rng: np.random.Generator,
                       chunk: int = 5000) -> tuple[np.ndarray, np.ndarray]:
    """E[lse(x)] per row of (m, v) (shape (Q, K)) and its Monte Carlo standard error, from ``n_samples``
    evaluations of lse (n_samples/2 antithetic pairs; the same draws ε serve every row)."""
    m = np.ascontiguousarray(m, dtype=float)
    v = np.ascontiguousarray(np.broadcast_to(v, m.shape), dtype=float)
    q, k = m.shape
    sd = np.sqrt(v)
    s = np.exp(m - m.max(1, keepdims=True))
    s /= s.sum(1, keepdims=True)
    sums = np.zeros((q, 2))
    n_pairs = max(n_samples // 2, 2)
    done = 0
    while done < n_pairs:
        c = min(chunk, n_pairs - done)
        _residual_sums(rng.standard_normal((c, k)), m, sd, s, sums)
        done += c
    mean = sums[:, 0] / n_pairs
    var = np.maximum(sums[:, 1] / n_pairs - mean**2, 0.0)
    return taylor_softmax_approx(m, v)[0] + mean, np.sqrt(var / (n_pairs - 1))
