"""A user log density whose Gaussian arguments share variables: the joint expectation under their correlation.

When the arguments θ_j (k = 2 or 3 of them) are affine in common Gaussian leaves ℓ (a variable, an indexed view
``a[g]``, any Gaussian node used in both), θ_j = Σ_ℓ c_jℓ ℓ + (terms of their own), they are jointly Gaussian
under q with per-row covariance Σ: Σ_jj = v_j (each argument's own variance, from its edge ``x_j``) and

    Σ_jl = Σ_ℓ c_jℓ c_lℓ Var(ℓ)   (j ≠ l; the leaves are edges ``s_i`` of the factor, the c's constants).

With Σ = L Lᵀ (Cholesky, per row) and θ = m + L z on the tensor Gauss–Hermite grid, S = E[log f] and, by
Bonnet's and Price's theorems in several dimensions,

    ∂S/∂m = L⁻ᵀ E[log f · z],   ∂S/∂Σ = ½ L⁻ᵀ E[log f · (z zᵀ − I)] L⁻¹ =: M.

Each ``x_j`` gets the gradient message of (m_j, v_j = Σ_jj) with the cross terms held fixed, (∂S/∂m_j −
2m_j M_jj, M_jj); each leaf the gradient of the cross terms in its own statistics, with d = Σ_{j<l} 2M_jl c_jℓ
c_lℓ = ∂S/∂Var(ℓ): (−2E[ℓ]·d, d).  Together they are the gradient of S in every variable's mean parameters
(the x_j messages reach the leaves through the expressions' own pullbacks, which carry the c_jℓ² Var(ℓ) parts
of Σ_jj).  The order is chosen as in ``user_likelihood`` (S, ∂S/∂m and M compared at n and 2n).
"""

from __future__ import annotations

import numpy as np

from distributions import Gaussian

from .base import FactorType, Moments, same_stats
from .kernels import normal_rule
from .logistic import gradient_message
from .user_likelihood import (
    _LADDER,
    _MAX_NODES,
    TOL,
    LogDensityError,
    _at,
    _check_shape,
    _raise_bad,
    search_ladder,
)

USER_LIKELIHOOD_SHARED = {
    (k, s): FactorType(f"UserLikelihood{k}s{s}", conjugate=False, out=Gaussian,
                       **{f"x{j}": Gaussian for j in range(k)}, **{f"s{i}": Gaussian for i in range(s)})
    for k in (2, 3) for s in (1, 2, 3)}
_CHUNK = 1 << 22


def _pairs(k: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(k) for j in range(i, k)]


def _evaluate(p: dict, y, mean: np.ndarray, L: np.ndarray, consts: dict, n: int, shape: tuple) -> np.ndarray:
    """(R, 1 + k + k(k+1)/2) sums: Σ w log f, Σ w log f z_i, Σ w log f (z_i z_j − δ_ij) (i ≤ j)."""
    R, k = mean.shape
    z, w = normal_rule(n)
    Z = np.stack(np.meshgrid(*([z] * k), indexing="ij"), -1).reshape(-1, k)
    wg = np.prod(np.stack(np.meshgrid(*([w] * k), indexing="ij"), -1).reshape(-1, k), axis=1)
    cols = [wg * Z[:, i] for i in range(k)] + [wg * (Z[:, i] * Z[:, j] - (i == j)) for i, j in _pairs(k)]
    Wd = np.stack(cols, 1)
    G = Z.shape[0]
    centre = int(np.argmax(wg))
    names = p["gaussian"]
    out = np.empty((R, 1 + Wd.shape[1]))
    step = max(1, _CHUNK // G)
    for lo in range(0, R, step):
        sl = slice(lo, min(R, lo + step))
        X = mean[sl, :, None] + np.einsum("rji,gi->rjg", L[sl], Z)  # (rows, k, nodes)
        kw = {name: X[:, j] for j, name in enumerate(names)}
        kw.update({c: (a[sl, None] if a.ndim else a) for c, a in consts.items()})
        with np.errstate(all="ignore"):
            F = _check_shape(p, p["logpdf"][0](*([y[sl, None]] if y is not None else []),
                                               *[kw[a] for a in p["argnames"]]), (sl.stop - lo, G))
            part = out[sl]
            part[:, 0] = F @ wg
            part[:, 1:] = (F - F[:, centre, None]) @ Wd
        if not np.isfinite(part).all():
            r, g = np.argwhere(~np.isfinite(F))[0]
            _raise_bad(p, _at(p, y, {a: kw[a][r, g] for a in names}, consts, lo + int(r)), lo + int(r),
                       float(F[r, g]), shape)
    return out


def _derived(sums: np.ndarray, Linv: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(S, ∂S/∂m (R, k), M = ∂S/∂Σ (R, k, k)) from the sums."""
    k = Linv.shape[-1]
    a = sums[:, 1:1 + k]
    B = np.zeros((sums.shape[0], k, k))
    for c, (i, j) in enumerate(_pairs(k)):
        B[:, i, j] = B[:, j, i] = sums[:, 1 + k + c]
    g = np.einsum("rij,ri->rj", Linv, a)
    M = 0.5 * np.einsum("rij,rik,rkl->rjl", Linv, B, Linv)
    return sums[:, 0], g, M


def _flat(d: tuple) -> np.ndarray:
    S, g, M = d
    return np.concatenate([S[:, None], g, M.reshape(M.shape[0], -1)], 1)


def _choose(p: dict, y, mean, L, Linv, consts, shape, previous: int | None) -> tuple[int, np.ndarray, bool]:
    k = mean.shape[1]
    ladder = [n for n in _LADDER if 2 * n <= _MAX_NODES[k]]
    sums: dict[int, np.ndarray] = {}

    def at(n: int) -> np.ndarray:
        if n not in sums:
            sums[n] = _evaluate(p, y, mean, L, consts, n, shape)
        return sums[n]

    def ok(i: int) -> bool:
        a, b = _flat(_derived(at(ladder[i]), Linv)), _flat(_derived(at(2 * ladder[i]), Linv))
        return bool(np.all(np.abs(a - b) <= TOL * (1.0 + np.abs(b))))

    j = search_ladder(ladder, ok, previous)
    if j is not None:
        p["state"].pop("quadrature_error", None)
        return ladder[j], sums[ladder[j]], True
    top = 2 * ladder[-1]
    p["state"]["quadrature_error"] = float(np.max(np.abs(_flat(_derived(sums[top], Linv))
                                                         - _flat(_derived(sums[top // 2], Linv)))))
    return top, sums[top], previous is not None


def expectations(m: Moments, p: dict) -> tuple:
    """(shape, means (R, k), leaf means, Σ's factors, the derived (S, ∂S/∂m, M)), cached."""
    k, nl = len(p["gaussian"]), len(p["shared"])
    stats = [m[f"x{j}"] for j in range(k)] + [m[f"s{i}"] for i in range(nl)]
    state = p["state"]
    hit = state.get("sums")
    if hit is not None and all(same_stats(a, b) for a, b in zip(hit[0], stats, strict=True)):
        return hit[1]
    y = m["out"][0] if p["observed"] else None
    consts = p["consts"]
    coefs = [c for leaf in p["shared"] for c in leaf.values()]
    shape = np.broadcast_shapes(*(s[0].shape for s in stats), *((y.shape,) if y is not None else ()),
                                *(np.shape(a) for a in consts.values()), *(np.shape(c) for c in coefs))
    flat = [tuple(np.broadcast_to(a, shape).ravel() for a in s) for s in stats]
    mean = np.stack([f[0] for f in flat[:k]], 1)
    R = mean.shape[0]
    Sig = np.zeros((R, k, k))
    for j in range(k):
        Sig[:, j, j] = np.maximum(flat[j][1] - flat[j][0] ** 2, 1e-300)
    leaf_mean = [f[0] for f in flat[k:]]
    for i, leaf in enumerate(p["shared"]):
        var = np.maximum(flat[k + i][1] - flat[k + i][0] ** 2, 0.0)
        for j in leaf:
            for l2 in leaf:
                if j < l2:
                    c = np.broadcast_to(leaf[j] * leaf[l2], shape).ravel() * var
                    Sig[:, j, l2] += c
                    Sig[:, l2, j] += c
    try:
        L = np.linalg.cholesky(Sig)
    except np.linalg.LinAlgError:
        raise LogDensityError(f"{p['what']}: the parameters {list(p['gaussian'])} are perfectly correlated under q in "
                              "some row (their covariance is singular): write the log density in fewer of them"
                              ) from None
    Linv = np.linalg.inv(L)
    if y is not None:
        y = np.broadcast_to(y, shape).ravel()
        if "fill" in p:
            y = np.where(np.isnan(y), p["fill"], y)
    cons = {c: (np.broadcast_to(a, shape).ravel() if np.ndim(a) else np.asarray(a, dtype=float))
            for c, a in consts.items()}
    widest = np.sqrt(np.array([float(Sig[:, j, j].max()) for j in range(k)]))
    if p.get("order") is not None:
        sums = _evaluate(p, y, mean, L, cons, p["order"], shape)
    else:
        chosen = state.get("order")
        if chosen is None or np.any(widest > 2.0 * chosen[1]) or np.any(widest < 0.5 * chosen[1]):
            n, sums, ok = _choose(p, y, mean, L, Linv, cons, shape, None if chosen is None else chosen[0])
            state["order"] = (n, widest if ok else np.full_like(widest, np.inf))
        else:
            sums = _evaluate(p, y, mean, L, cons, chosen[0], shape)
    out = (shape, mean, leaf_mean, _derived(sums, Linv))
    state["sums"] = (stats, out)
    return out


def _to(j: int):
    def message(m: Moments, p: dict) -> tuple:
        shape, mean, _, (_, g, M) = expectations(m, p)
        return tuple(a.reshape(shape) for a in gradient_message(mean[:, j], g[:, j], M[:, j, j]))

    message.__name__ = f"user_shared_to_x{j}"
    message.__doc__ = f"NCVMP message to the argument x{j}, the cross-covariances held fixed (module docstring)."
    return message


def _to_leaf(i: int):
    def message(m: Moments, p: dict) -> tuple:
        shape, _, leaf_mean, (_, _, M) = expectations(m, p)
        leaf = p["shared"][i]
        d = np.zeros(M.shape[0])
        for j in leaf:
            for l2 in leaf:
                if j < l2:
                    d += 2.0 * M[:, j, l2] * np.broadcast_to(leaf[j] * leaf[l2], shape).ravel()
        return ((-2.0 * leaf_mean[i] * d).reshape(shape), d.reshape(shape))

    message.__name__ = f"user_shared_to_s{i}"
    message.__doc__ = f"NCVMP message to the shared leaf s{i}: the gradient of the cross terms (module docstring)."
    return message


def evidence(m: Moments, p: dict) -> np.ndarray:
    """E_q[log f] per factor instance under the arguments' joint Gaussian."""
    shape, _, _, (S, _, _) = expectations(m, p)
    return S.reshape(shape)


for _ft in USER_LIKELIHOOD_SHARED.values():
    for _method, _kind in (("default", "exact"), ("moments", "approximation")):
        for _e in _ft.edges:
            if _e != "out":
                _ft.rule(_e, "ncvmp", _method)(_to(int(_e[1:])) if _e[0] == "x" else _to_leaf(int(_e[1:])))
        _ft.evidence(_method, kind=_kind)(evidence)
