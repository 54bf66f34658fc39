r"""Fused grouped linear-Gaussian likelihood: varying intercepts and slopes on per-group sums.

The engine substitutes this factor for a Gaussian factor with a fully observed output whose mean is
linear in Gaussian coefficients, at least one of them gathered by integer labels g(n) (``fg.index``):

    y_n ~ N(r_nᵀ z_{g(n)}, τ⁻¹),    e.g.  mean = a[g] + b[g]·x + fg.inner(X, w) + mu

where z_g stacks every coefficient the rows of group g see, grouped ones (``a[g]``, ``b[g]``, the
columns of ``fg.inner(X, s[g])``, a vector ``v[g]``) and global ones (``w``, ``mu``, shared by every
group), and r_n the constants that multiply them (1, x_n, X_n).  The rows enter only through per-group
sums computed once, M_g = Σ_{g(n)=g} r_n r_nᵀ, b_g = Σ r_n y_n, q_g = Σ y_n², c_g = #{n : g(n) = g}, so
an iteration costs O(G Z²) for Z coefficients, whatever N.  The factor lives on the group plate.

Each edge carries a block J of the coordinates of z: a scalar Gaussian, plated or not (``s0``…, mean
field within the block: its coordinates are independent scalars), or an MvGaussian (``v0``, ``v1``:
full covariance within the block).  Blocks are independent under q, so with E = E[z] and

    E[SSE_g] = q_g − 2b_gᵀE + EᵀM_gE + Σ_J tr(M_g,JJ (E[z_J z_Jᵀ] − E_J E_Jᵀ))

(the trace over the diagonal only for a scalar block, whose second statistic is E[z_j²]):

    E[log f_g] = (c_g/2)(E[log τ] − log 2π) − ½E[τ] E[SSE_g],
    to block J:  (E[τ]·(b_g − M_gE + M_g,JJ E_J)_J,  −½E[τ] M_g,JJ)  (for a scalar block, M_g,JJ's diagonal in both:
                 each coordinate removes only its own term),
    to τ:        (−½E[SSE_g], c_g/2).

A global block's message is the sum of its per-group messages (the engine reduces over the group plate).
The static parameters are ``M``, ``b``, ``q``, ``count`` and ``layout``: one (edge, start, size, full)
per block, giving where the block sits in z.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from distributions import Gamma, Gaussian, MvGaussian

from .base import FactorType, Moments
from .linear_gaussian import sums_evidence, sums_to_precision

SCALAR_SLOTS = tuple(f"s{k}" for k in range(6))
VECTOR_SLOTS = ("v0", "v1")
GROUPED_LINEAR_GAUSSIAN = FactorType("GroupedLinearGaussian", precision=Gamma,
                                     **{s: Gaussian for s in SCALAR_SLOTS}, **{s: MvGaussian for s in VECTOR_SLOTS})


@njit(cache=True)
def _group_grams(labels, R, y, n_groups):
    """M[g] = Σ r_n r_nᵀ, b[g] = Σ r_n y_n, q[g] = Σ y_n² and c[g] over the rows n with labels[n] = g,
    in one pass over the rows."""
    Z = R.shape[1]
    M = np.zeros((n_groups, Z, Z))
    b = np.zeros((n_groups, Z))
    q = np.zeros(n_groups)
    c = np.zeros(n_groups)
    for n in range(R.shape[0]):
        g = labels[n]
        yn = y[n]
        q[g] += yn * yn
        c[g] += 1.0
        for j in range(Z):
            rj = R[n, j]
            b[g, j] += rj * yn
            for k in range(j, Z):
                M[g, j, k] += rj * R[n, k]
    for g in range(n_groups):
        for j in range(Z):
            for k in range(j):
                M[g, j, k] = M[g, k, j]
    return M, b, q, c


def grouped_linear_stats(labels: np.ndarray, R: np.ndarray, y: np.ndarray, n_groups: int,
                         layout: tuple) -> dict:
    """The factor's parameters from the design R (rows × Z coefficients, columns in ``layout`` order), the
    observed outputs y and the group labels of the rows."""
    if not labels.shape[0] == R.shape[0] == y.shape[0]:
        raise ValueError(f"grouped linear-Gaussian factor: {labels.shape[0]} labels, {R.shape[0]} design rows and "
                         f"{y.shape[0]} outputs")
    M, b, q, c = _group_grams(np.ascontiguousarray(labels, dtype=np.int64), np.ascontiguousarray(R, dtype=float),
                              np.ascontiguousarray(y, dtype=float), int(n_groups))
    return {"M": M, "b": b, "q": q, "count": c, "layout": tuple(layout)}


def _blocks(m: Moments, p: dict) -> tuple[np.ndarray, list]:
    """E[z] on the groups (G, Z) and each block's (slice, full, E_J, second statistic) broadcast to the groups."""
    G, Z = p["b"].shape
    ez = np.empty((G, Z))
    out = []
    for edge, start, size, full in p["layout"]:
        s1, s2 = m[edge]
        J = slice(start, start + size)
        if full:
            e1 = np.broadcast_to(s1, (G, size))
            e2 = np.broadcast_to(s2, (G, size, size))
        else:  # a scalar block: (G,) for one coefficient per group, (G, D) for a consumed plate
            e1 = np.broadcast_to(np.reshape(s1, np.shape(s1)[:1] + (-1,)) if np.ndim(s1) else s1, (G, size))
            e2 = np.broadcast_to(np.reshape(s2, np.shape(s2)[:1] + (-1,)) if np.ndim(s2) else s2, (G, size))
        ez[:, J] = e1
        out.append((J, full, e1, e2))
    return ez, out


def _sse(m: Moments, p: dict) -> np.ndarray:
    M = p["M"]
    ez, blocks = _blocks(m, p)
    me = np.einsum("gjk,gk->gj", M, ez)
    sse = p["q"] - 2.0 * np.einsum("gj,gj->g", p["b"], ez) + np.einsum("gj,gj->g", ez, me)
    for J, full, e1, e2 in blocks:
        mjj = M[:, J, J]
        if full:
            sse = sse + np.einsum("gjk,gkj->g", mjj, e2 - e1[:, :, None] * e1[:, None, :])
        else:
            sse = sse + np.einsum("gjj,gj->g", mjj, e2 - e1 * e1)
    return sse


def _to_block(edge: str):
    def rule(m: Moments, p: dict) -> tuple:
        tau = np.reshape(m["precision"][0], np.shape(m["precision"][0]) + (1,))
        M = p["M"]
        ez, blocks = _blocks(m, p)
        k = next(i for i, b in enumerate(p["layout"]) if b[0] == edge)
        J, full, e1, _ = blocks[k]
        mjj = M[:, J, J]
        lin = p["b"][:, J] - np.einsum("gjk,gk->gj", M[:, J, :], ez)
        if full:  # the block's own coordinates are taken out together
            return (tau * (lin + np.einsum("gjk,gk->gj", mjj, e1)), -0.5 * tau[..., None] * mjj)
        diag = np.einsum("gjj->gj", mjj)  # mean field within the block: each coordinate's own term only
        prec = -0.5 * tau * diag
        lin = tau * (lin + diag * e1)
        size = p["layout"][k][2]
        if size == 1 and np.ndim(m[edge][0]) < 2:  # one coefficient per group: the edge has no event axis
            return (lin[:, 0], prec[:, 0])
        return (lin, prec)

    return rule


for _slot in SCALAR_SLOTS + VECTOR_SLOTS:
    GROUPED_LINEAR_GAUSSIAN.rule(_slot, "vmp")(_to_block(_slot))


@GROUPED_LINEAR_GAUSSIAN.rule("precision", "vmp")
def grouped_linear_to_precision(m: Moments, p: dict) -> tuple:
    return sums_to_precision(_sse(m, p), p["count"])


@GROUPED_LINEAR_GAUSSIAN.evidence(kind="exact")
def grouped_linear_evidence(m: Moments, p: dict) -> np.ndarray:
    return sums_evidence(m["precision"], _sse(m, p), p["count"])
