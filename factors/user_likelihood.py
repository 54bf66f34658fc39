"""A factor from the user's log density: ``fg.likelihood`` (observed data) and ``fg.potential`` (a free term).

The user gives ``log f(y, θ₁, …, θ_k)`` as a vectorised function; up to 3 of its arguments are random: Gaussian
under q (the edges ``x0 …``, each with per-row moments m_j, v_j) or Gamma (the edges ``p0 …``,
``factors.user_positive``), independent of each other under q (the builder refuses two that share a variable);
the rest are constants (in the factor parameters).  With z_j standard normal and η_j = m_j + √v_j z_j,

    S = E_q[log f] ≈ Σ_g w_g log f(y, η(z_g))

over the tensor-product Gauss–Hermite grid (n nodes per Gaussian argument), and the NCVMP message to x_j
is the gradient of S in x_j's mean parameters (E[x_j], E[x_j²]) (Knowles & Minka 2011), from Bonnet's and
Price's identities on the same nodes (exact for the true S; on the rule, accurate as the rule is):

    ∂S/∂m_j = E[log f · z_j]/√v_j,   ∂S/∂v_j = ½E[log f · (z_j² − 1)]/v_j,
    η₂ = ∂S/∂v_j,   η₁ = ∂S/∂m_j − 2m_j ∂S/∂v_j.

The node count n (per argument, the same for all) is chosen on the first call: the smallest n of 3, 4, 6, 8,
12, 16, … whose S and derivatives agree with those at 2n to 10⁻¹⁰(1 + their size) in every row; it is chosen
again only when the largest standard deviation of some argument (of log λ for a Gamma one) has changed by
more than a factor 2 since (the prior's broad q needs more nodes than the posterior's).  A numba log density
(``@vectorize`` or ``@njit``) is summed in one fused parallel pass (``kernels.user_quadrature``).  A fixed
``order`` skips the choice.  The evidence term is then exact to that accuracy.

A row's message may have a negative precision (∂S/∂v_j > 0 where log f is not concave in that argument); it
is sent as it is, since only the sum of the rows' messages and the prior must be
proper (clipping each row's, as the site factors do, would move the fixed point away from a stationary point
of the ELBO); an improper sum is an error of the update, which backtracking retries damped.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
from scipy.special import polygamma

from distributions import Gamma, Gaussian

from .base import FactorType, Moments, same_stats
from .kernels import normal_rule
from .kernels.user_quadrature import array_function, fused_sums, scalar_function
from .logistic import gradient_message
from .user_positive import gamma_message, gamma_nodes, shape_rate

MAX_ARGS = 3
TOL = 1e-10
_LADDER = (3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
# largest nodes per argument of the compared rule 2n (numpy's rule reproduces the normal moments to 1e-15 at 128
# nodes, and fails above about 200)
_MAX_NODES = {1: 128, 2: 64, 3: 32}
_CHUNK = 1 << 22  # values of log f per block of rows (32 MB)

USER_LIKELIHOOD = tuple(
    FactorType(f"UserLikelihood{k}", conjugate=False, out=Gaussian, **{f"x{j}": Gaussian for j in range(k)})
    for k in range(1, MAX_ARGS + 1))
# k Gaussian and m ≥ 1 Gamma arguments, k + m ≤ 3
USER_LIKELIHOOD_POSITIVE = {
    (k, m): FactorType(f"UserLikelihood{k}p{m}", conjugate=False, out=Gaussian,
                       **{f"x{j}": Gaussian for j in range(k)}, **{f"p{i}": Gamma for i in range(m)})
    for m in range(1, MAX_ARGS + 1) for k in range(0, MAX_ARGS + 1 - m)}


class LogDensityError(ValueError):
    """The user's log density returned something other than a finite array of the grid's shape."""


@lru_cache(maxsize=64)
def grid(n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Tensor Gauss–Hermite grid for k standard normals: nodes (n^k, k) and the matrix (n^k, 1 + 2k) of
    weights w, w z_j and ½ w (z_j² − 1), so that one product with log f gives the value and its sums."""
    z, w = normal_rule(n)
    zs = np.stack(np.meshgrid(*([z] * k), indexing="ij"), -1).reshape(-1, k)
    ws = np.prod(np.stack(np.meshgrid(*([w] * k), indexing="ij"), -1).reshape(-1, k), axis=1)
    cols = [ws] + [ws * zs[:, j] for j in range(k)] + [0.5 * ws * (zs[:, j] ** 2 - 1.0) for j in range(k)]
    zs, W = np.ascontiguousarray(zs), np.ascontiguousarray(np.stack(cols, 1))
    zs.setflags(write=False)
    W.setflags(write=False)
    return zs, W


def _raise_bad(p: dict, at: dict, r: int, value: float, shape: tuple) -> None:
    """The error for a non-finite log f at row r with arguments ``at``: the likelihood, the row and the values."""
    what = "NaN" if np.isnan(value) else ("+inf" if value > 0 else "-inf (zero density)")
    idx = tuple(int(i) for i in np.unravel_index(r, shape)) if shape else ()
    vals = ", ".join(f"{k} = {float(v):.6g}" for k, v in at.items())
    raise LogDensityError(f"{p['what']}: the log density is {what} at a quadrature node, {p['what']} at row {idx}: "
                          f"{vals}; it must be finite wherever q puts mass (the Gaussian arguments range over the "
                          "whole real line: map a positive parameter through exp inside the log density)")


def _at(p: dict, y, gauss: dict, consts: dict, r: int) -> dict:
    """The arguments of row r, y first, by name (``gauss``: the random arguments' values at the node)."""
    at = {} if y is None else {"y": y[r]}
    at.update(gauss)
    at.update({c: (a[r] if a.ndim else a) for c, a in consts.items()})
    return at


def _check_shape(p: dict, L: Any, shape: tuple) -> np.ndarray:
    L = np.asarray(L, dtype=float)
    if L.shape != shape:
        raise LogDensityError(
            f"{p['what']}: the log density returned shape {L.shape} where its arguments broadcast to {shape} "
            f"(rows × quadrature nodes); it must be vectorised elementwise over y and {', '.join(p['params'])} "
            "(numpy broadcasting) and return one value per element")
    return L


def _evaluate(p: dict, y: np.ndarray | None, mean: list, sd: list, consts: dict, n: int,
              shape: tuple, ab: list = ()) -> np.ndarray:
    """(R, 1 + 2k) sums Σ_g W_g· log f over the grid with n nodes per argument (log f less its value at the
    central node in the derivative sums: Σ w z and Σ w (z² − 1) vanish, so the sums are unchanged, and a large
    log f no longer swamps them by rounding when q is narrow).  ``ab``: the Gamma arguments' (shape, rate)."""
    if ab:
        return _evaluate_positive(p, y, mean, sd, list(ab), consts, n, shape)
    k = len(mean)
    Z, W = grid(n, k)
    R, G = mean[0].shape[0], Z.shape[0]
    centre = int(np.argmax(W[:, 0]))
    fn, names = p["logpdf"][0], p["gaussian"]
    if p.get("compiled") is not None:  # a numba log density: one fused parallel pass
        C = np.stack([np.broadcast_to(consts[c], (R,)) for c in consts]) if consts else np.empty((0, R))
        spec = tuple(f"g{names.index(a)}" if a in names else f"c{list(consts).index(a)}" for a in p["argnames"])
        out, bad = fused_sums(p["compiled"][0], spec, y, np.stack(mean), np.stack(sd), C, Z, W, centre)
        rows = np.flatnonzero(bad >= 0)
        if rows.size:
            r = int(rows[0])
            g = int(bad[r])
            kw = {name: mean[j][r] + sd[j][r] * Z[g, j] for j, name in enumerate(names)}
            kw.update({c: (a[r] if a.ndim else a) for c, a in consts.items()})
            with np.errstate(all="ignore"):
                val = fn(*([y[r]] if y is not None else []), *[kw[a] for a in p["argnames"]])
            _raise_bad(p, _at(p, y, {a: kw[a] for a in names}, consts, r), r, float(val), shape)
        return out
    out = np.empty((R, 1 + 2 * k))
    step = max(1, _CHUNK // G)
    for lo in range(0, R, step):
        sl = slice(lo, min(R, lo + step))
        kw = {name: mean[j][sl, None] + sd[j][sl, None] * Z[:, j] for j, name in enumerate(names)}
        kw.update({c: (a[sl, None] if a.ndim else a) for c, a in consts.items()})
        args = [kw[a] for a in p["argnames"]]  # positionally: a ufunc takes no keywords
        with np.errstate(all="ignore"):
            L = fn(y[sl, None], *args) if y is not None else fn(*args)
        L = _check_shape(p, L, (sl.stop - lo, G))
        part = out[sl]
        with np.errstate(all="ignore"):  # a non-finite log f is reported below
            part[:, 0] = L @ W[:, 0]
            part[:, 1:] = (L - L[:, centre, None]) @ W[:, 1:]
        if not np.isfinite(part).all():  # a non-finite log f makes its row's sums non-finite
            r, g = np.argwhere(~np.isfinite(L))[0]
            _raise_bad(p, _at(p, y, {a: kw[a][r, g] for a in names}, consts, lo + int(r)), lo + int(r),
                       float(L[r, g]), shape)
    return out


def _evaluate_positive(p: dict, y, mean: list, sd: list, ab: list, consts: dict, n: int, shape: tuple) -> np.ndarray:
    """The sums with Gamma arguments too: per-row weights on the tensor grid of the Gaussian rule (n nodes)
    and each Gamma's rule (``user_positive``); columns E, the Gaussian sums, then ∂S/∂a_i, ∂S/∂b_i.  log f is
    centred on its row's mean in the derivative sums (each score has mean 0 on the rule)."""
    k, m = len(mean), len(ab)
    z, w = normal_rule(n)
    vals, wts = [], []
    for j in range(k):
        vals.append(mean[j][:, None] + sd[j][:, None] * z)
        wts.append(np.broadcast_to(w, (mean[j].size, n)))
    extra = []
    for a, b in ab:
        lam, wl = gamma_nodes(a, b, n)
        vals.append(lam)
        wts.append(wl)
        loglam = np.log(lam)
        extra.append((loglam - (wl * loglam).sum(1, keepdims=True), (wl * lam).sum(1, keepdims=True) - lam))
    K = k + m
    idx = np.indices((n,) * K).reshape(K, -1)
    R, G = vals[0].shape[0], idx.shape[1]
    names = (*p["gaussian"], *p["positive"])
    out = np.empty((R, 1 + 2 * K))
    step = max(1, _CHUNK // G)
    for lo in range(0, R, step):
        sl = slice(lo, min(R, lo + step))
        kw = {name: vals[q][sl][:, idx[q]] for q, name in enumerate(names)}
        kw.update({c: (a[sl, None] if a.ndim else a) for c, a in consts.items()})
        W = np.prod([wts[q][sl][:, idx[q]] for q in range(K)], axis=0)
        with np.errstate(all="ignore"):
            L = _check_shape(p, p["logpdf"][0](*([y[sl, None]] if y is not None else []),
                                               *[kw[a] for a in p["argnames"]]), (sl.stop - lo, G))
            E = (W * L).sum(1)
            WL = W * (L - E[:, None])
            part = out[sl]
            part[:, 0] = E
            for j in range(k):
                zj = z[idx[j]]
                part[:, 1 + j] = WL @ zj
                part[:, 1 + k + j] = WL @ (0.5 * (zj * zj - 1.0))
            for i, (sa, sb) in enumerate(extra):
                q = k + i
                part[:, 1 + 2 * k + i] = (WL * sa[sl][:, idx[q]]).sum(1)
                part[:, 1 + 2 * k + m + i] = (WL * sb[sl][:, idx[q]]).sum(1)
        if not np.isfinite(part).all():
            r, g = np.argwhere(~np.isfinite(L))[0]
            _raise_bad(p, _at(p, y, {a: kw[a][r, g] for a in names}, consts, lo + int(r)), lo + int(r),
                       float(L[r, g]), shape)
    return out


def _derived(sums: np.ndarray, sd: list) -> np.ndarray:
    """(S, ∂S/∂m_j, ∂S/∂v_j) per row from the sums."""
    k = len(sd)
    out = sums.copy()
    for j in range(k):
        out[:, 1 + j] /= sd[j]
        out[:, 1 + k + j] /= sd[j] * sd[j]
    return out


def _accurate(a: np.ndarray, b: np.ndarray, sd: list) -> bool:
    """Whether S and its derivatives agree to TOL relative to 1 + their size."""
    a, b = _derived(a, sd), _derived(b, sd)
    return bool(np.all(np.abs(a - b) <= TOL * (1.0 + np.abs(b))))


def search_ladder(ladder: list[int], ok: Any, previous: int | None) -> int | None:
    """The index of the order to use: from the previous order (or the ladder's first), walk down while the
    smaller rule is still accurate (``ok(i)``), else up to the first accurate one; None if none is."""
    i = 0 if previous is None else max([0] + [j for j, n in enumerate(ladder) if n <= previous])
    if ok(i):
        while i > 0 and ok(i - 1):
            i -= 1
        return i
    return next((j for j in range(i + 1, len(ladder)) if ok(j)), None)


def _choose(p: dict, y, mean, sd, consts, shape, first: bool, ab: list,
            previous: int | None = None) -> tuple[int, np.ndarray, bool]:
    """The smallest order of the ladder that agrees with twice as many nodes, its sums and whether it did.

    The search starts at the previous order (or the ladder's first) and walks down while the smaller rule is
    still accurate, else up; the evaluations are shared between the steps.  The first choice sees the prior's
    q; if the largest rule is not accurate there, it is chosen again on the next call (q is then narrower).
    A later failure keeps the largest rule and records its error (the difference from the next smaller rule)
    in the state, which the result reports with a warning."""
    ladder = [n for n in _LADDER if 2 * n <= _MAX_NODES[len(mean) + len(ab)]]
    sums: dict[int, np.ndarray] = {}

    def at(n: int) -> np.ndarray:
        if n not in sums:
            sums[n] = _evaluate(p, y, mean, sd, consts, n, shape, ab)
        return sums[n]

    def ok(i: int) -> bool:
        return _accurate(at(ladder[i]), at(2 * ladder[i]), sd)

    j = search_ladder(ladder, ok, previous)
    if j is not None:
        p["state"].pop("quadrature_error", None)
        return ladder[j], sums[ladder[j]], True
    top = 2 * ladder[-1]
    if first:
        return top, sums[top], False
    p["state"]["quadrature_error"] = float(np.max(np.abs(_derived(sums[top], sd) - _derived(sums[top // 2], sd))))
    return top, sums[top], True


def expectations(m: Moments, p: dict) -> tuple[tuple, list, list, list, np.ndarray]:
    """(shape, means, variances, Gamma (shape, rate) pairs, sums (R, 1 + 2k + 2m)) at the current moments,
    cached while they are unchanged."""
    k, npos = len(p["gaussian"]), len(p.get("positive", ()))
    stats = [m[f"x{j}"] for j in range(k)] + [m[f"p{i}"] for i in range(npos)]
    state = p["state"]
    hit = state.get("sums")
    if hit is not None and all(same_stats(a, b) for a, b in zip(hit[0], stats, strict=True)):
        return hit[1]
    y = m["out"][0] if p["observed"] else None
    consts = p["consts"]
    shape = np.broadcast_shapes(*(s[0].shape for s in stats), *((y.shape,) if y is not None else ()),
                                *(np.shape(a) for a in consts.values()))
    mean = [np.broadcast_to(s[0], shape).ravel() for s in stats[:k]]
    var = [np.maximum(np.broadcast_to(s[1], shape).ravel() - mu * mu, 1e-300) for s, mu in zip(stats, mean,
                                                                                              strict=False)]
    sd = [np.sqrt(v) for v in var]
    ab = [shape_rate(np.broadcast_to(s[0], shape).ravel(), np.broadcast_to(s[1], shape).ravel()) for s in stats[k:]]
    if y is not None:
        y = np.broadcast_to(y, shape).ravel()
        if "fill" in p:  # missing rows (weighted 0 by the engine) get a valid value
            y = np.where(np.isnan(y), p["fill"], y)
    cons = {c: (np.broadcast_to(a, shape).ravel() if np.ndim(a) else np.asarray(a, dtype=float))
            for c, a in consts.items()}
    # the widths that set the order: each Gaussian's sd, each Gamma's sd of log λ
    widest = np.array([float(s.max()) for s in sd] + [float(np.sqrt(polygamma(1, a)).max()) for a, _ in ab])
    if p.get("order") is not None:
        sums = _evaluate(p, y, mean, sd, cons, p["order"], shape, ab)
    else:
        chosen = state.get("order")
        if chosen is None or np.any(widest > 2.0 * chosen[1]) or np.any(widest < 0.5 * chosen[1]):
            n, sums, ok = _choose(p, y, mean, sd, cons, shape, chosen is None, ab,
                                  None if chosen is None else chosen[0])
            state["order"] = (n, widest if ok else np.full_like(widest, np.inf))
        else:
            sums = _evaluate(p, y, mean, sd, cons, chosen[0], shape, ab)
    out = (shape, mean, var, ab, sums)
    state["sums"] = (stats, out)
    return out


def _to(j: int):
    def message(m: Moments, p: dict) -> tuple:
        shape, mean, var, _, sums = expectations(m, p)
        k = len(mean)
        dm = sums[:, 1 + j] / np.sqrt(var[j])
        dv = sums[:, 1 + k + j] / var[j]
        return tuple(a.reshape(shape) for a in gradient_message(mean[j], dm, dv))

    message.__name__ = f"user_likelihood_to_x{j}"
    message.__doc__ = f"NCVMP message to the Gaussian argument x{j}: the gradient of E[log f] (module docstring)."
    return message


def _to_positive(i: int):
    def message(m: Moments, p: dict) -> tuple:
        shape, mean, _, ab, sums = expectations(m, p)
        k, npos = len(mean), len(ab)
        a, b = ab[i]
        msg = gamma_message(a, b, sums[:, 1 + 2 * k + i], sums[:, 1 + 2 * k + npos + i])
        return tuple(x.reshape(shape) for x in msg)

    message.__name__ = f"user_likelihood_to_p{i}"
    message.__doc__ = (f"NCVMP message to the Gamma argument p{i}: the gradient of E[log f] in (E[λ], E[log λ]) "
                       "(factors.user_positive).")
    return message


def evidence(m: Moments, p: dict) -> np.ndarray:
    """E_q[log f] per factor instance, by the rule of the chosen order."""
    shape, _, _, _, sums = expectations(m, p)
    return sums[:, 0].reshape(shape)


# "default": every Gaussian argument is Gaussian under q (affine in the variables); "moments": some argument is
# a product of random variables, taken as the Gaussian with its exact mean and variance (an approximation)
for _ft in (*USER_LIKELIHOOD, *USER_LIKELIHOOD_POSITIVE.values()):
    for _method, _kind in (("default", "exact"), ("moments", "approximation")):
        for _e in _ft.edges:
            if _e != "out":
                _ft.rule(_e, "ncvmp", _method)(_to(int(_e[1:])) if _e[0] == "x" else _to_positive(int(_e[1:])))
        _ft.evidence(_method, kind=_kind)(evidence)


def _flat(a: np.ndarray, n: int) -> np.ndarray:
    """A factor-space array as one value per row of a handler's u (..., n), or as it is if it broadcasts."""
    a = np.asarray(a, dtype=float)
    return a.reshape(-1) if a.ndim and a.size == n else a


@USER_LIKELIHOOD[0].point("x0")
def user_point(u: np.ndarray, m: Moments, p: dict, order: int = 2) -> tuple:
    """log f at values u of its one Gaussian argument (for handlers: Laplace, MVI, ...), with (log f)′ and
    (log f)″ by central differences with step h = 10⁻⁴·max(1, |u|) (errors about 10⁻⁸ relative: the
    handlers' optimisers and samplers need no more); a non-finite value is reported as in the sweeps."""
    n = u.shape[-1]
    y = None
    if p["observed"]:
        y = _flat(m["out"][0], n)
        if "fill" in p:
            y = np.where(np.isnan(y), p["fill"], y)
    consts = {c: _flat(a, n) for c, a in p["consts"].items()}
    name = p["gaussian"][0]
    fn = p["logpdf"][0]

    def f(x):
        kw = {name: x, **consts}
        with np.errstate(all="ignore"):
            out = fn(*([y] if y is not None else []), *[kw[a] for a in p["argnames"]])
        return np.broadcast_to(np.asarray(out, dtype=float), x.shape)

    h = 1e-4 * np.maximum(1.0, np.abs(u))
    f0, fp, fm = f(u), f(u + h), f(u - h)
    for vals, at in ((f0, u), (fp, u + h), (fm, u - h)):
        if not np.isfinite(vals).all():
            idx = np.argwhere(~np.isfinite(vals))[0]
            r = int(idx[-1])
            pt = {} if y is None else {"y": y[r] if np.ndim(y) else y}
            pt[name] = at[tuple(idx)]
            pt.update({c: (a[r] if a.ndim else a) for c, a in consts.items()})
            vals_bad = float(vals[tuple(idx)])
            _raise_bad(p, pt, r, vals_bad, (n,))
    return f0, (fp - fm) / (2.0 * h), (fp - 2.0 * f0 + fm) / (h * h)


def user_type(k: int, m: int) -> FactorType:
    """The factor type with k Gaussian and m Gamma arguments."""
    return USER_LIKELIHOOD[k - 1] if m == 0 else USER_LIKELIHOOD_POSITIVE[(k, m)]


def user_params(logpdf: Any, what: str, gaussian: tuple[str, ...], consts: dict[str, Any], observed: bool,
                order: int | None, argnames: tuple[str, ...] | None = None,
                positive: tuple[str, ...] = ()) -> dict[str, Any]:
    """The factor parameters of a user likelihood (the rules read these keys).  The log density is kept in a
    tuple: the compiler calls a callable parameter to get its value.  ``argnames``: the order in which the
    log density takes its parameters after y (default: the Gaussian ones, then the constants)."""
    names = (*gaussian, *positive, *consts)
    compiled = None if positive else scalar_function(logpdf)
    return {"compiled": None if compiled is None else (compiled,), "logpdf": (array_function(logpdf),), "what": what,
            "gaussian": tuple(gaussian), "consts": dict(consts), "observed": observed, "order": order,
            "params": names, "argnames": tuple(argnames or names), "positive": tuple(positive)}
