r"""Lattice site expectations for AI-KL (docs/maths.md §9): values and exact gradients, vectorised over sites.

Three kernels, each returning the expectations E_n = E_q[g_n(y_n)] of the site log-potentials g_n on
the projections y_n = x_nᵀw = α_nᵀv + β_n (α_n = Aᵀx_n, β_n = bᵀx_n) and their derivatives:

* ``fft_terms`` — any base: y_n − β′_n is the sum of the D centred components u_d = α_d(v_d − E v_d)
  (β′_n = β_n + α_nᵀE v), whose lattice pmfs π_d (``distributions.affine_lattice.component_lattice``)
  are convolved by the FFT: ρ = irfft(Π_d rfft(π_d)), E = Σ_j ρ_j g(β′ + o_jΔ).  The derivative of E in
  any parameter φ of component d is

  .. math::

      \frac{\partial E}{\partial\varphi} = \sum_k \frac{\partial\pi_{dk}}{\partial\varphi}\,c_{dk},\qquad
      c_{dk} = \sum_j g_j\, r_d[j - k],\quad r_d = \mathop{\ast}_{d'\neq d}\pi_{d'},

  the cross-correlation of g with the convolution of the other components: c_d = irfft(ĝ·conj(R̂_d)),
  R̂_d = Π_{d′≠d} F̂_{d′} (exclusive prefix × suffix products, no division).  With the normalised
  π_dk = q_k/Σq, ∂π_dk/∂φ = π_dk(s_k − Σ_j π_dj s_j) and Σ_k π_dk c_dk = E, so
  ∂E/∂φ = Σ_k π_dk s_dk (c_dk − E), where s_dk = ∂ log q_v(v_k)/∂φ (v_k = l_k/α_d + E v_d).
  This is the exact gradient of the lattice objective at a fixed lattice; by an integration by parts it
  is the lattice form of the paper's first-moment-weighted expression
  ∂E/∂α_d = E[g′(y) v_d] = ∫ g′(y) d_d(y) dy (``first_moment_gradient`` computes that one, for checks).
  The mean shift adds E v_d·∂E/∂β′ to ∂E/∂α_d and α_d·∂E v_d/∂θ_d·∂E/∂β′ to ∂E/∂θ_d, with
  ∂E/∂β′ = Σ_j ρ_j g′(β′ + o_jΔ).  Cost per site: O(D·M log M) with M = 2K by default (circular
  lattice), O(D²K log DK) with the exact zero padding of the paper.
  Two refinements keep the same structure.  (i) Each component is convolved with the 3-point kernel
  (p_d/2, 1 − p_d, p_d/2) of ``variance_fix`` (restoring the variance of a component narrower than Δ):
  F̂_d → F̂_d·(1 − p_d(1 − cos ω)); c_d is then correlated with the kernel, and p_d (a function of α_d,
  θ_d through the lattice variance) adds (∂E/∂p_d)(∂p_d/∂φ), ∂E/∂p_d = Σ_k π_dk(½(c̃_{k−1} + c̃_{k+1}) − c̃_k).
  (ii) A kinked site (the Laplace site) gets the Euler–Maclaurin correction of ``add_kink_correction``
  folded into g, which lowers its lattice error from O(Δ²) to O(Δ³).
* ``gauss_terms`` — Gaussian base: y_n ~ N(β_n, σ_n²), σ_n = ‖α_n‖, needs no convolution:
  ρ_k ∝ exp(−l_k²/2σ²) on l_k = kΔ, ∂E/∂σ = Σ_k ρ_k (l_k²/σ³)(g_k − E), ∂E/∂α = (∂E/∂σ) α/σ
  (with the same kink correction).
* ``tensor_terms`` — a plain log density (no sites, D ≤ 3): E_q[f(Av + b)] on the tensor product of
  the per-component lattices in v-space, with ∂/∂A = Σ_i P_i ∇f(w_i) v_iᵀ, ∂/∂b = Σ_i P_i ∇f(w_i).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import fft as sfft

from distributions.affine_base_density import BaseDensity
from distributions.affine_lattice import component_lattice, embed, kernel_ft, offsets, variance_fix
from factors.sites import laplace_point

SiteFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass
class SiteGroup:
    """Sites sharing one projection matrix: g(Y) → (log f, (log f)′) at Y of shape (N, M), and, for a
    site with a kink (a jump J_n of (log f)′ at y*_n, e.g. the Laplace site), ``kink`` = (y*, J)."""

    X: np.ndarray  # (N, D)
    g: SiteFn
    kink: tuple[np.ndarray, np.ndarray] | None = None

    @classmethod
    def from_site(cls, site) -> SiteGroup:
        """Wrap a ``Site`` (whose pointwise rule takes u of shape (..., N))."""
        X = np.asarray(site.X, dtype=float)

        def g(Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            f, f1, _ = site.point(Y.T, site.moments, site.params)
            return (np.broadcast_to(f, Y.T.shape).T, np.broadcast_to(f1, Y.T.shape).T)

        kink = None
        if site.point is laplace_point:  # (log f)′ jumps by −2/τ at the location
            n = X.shape[0]
            loc = np.broadcast_to(np.asarray(site.moments["out"][0], dtype=float), (n,))
            kink = (loc, np.broadcast_to(-2.0 / np.asarray(site.params["scale"], dtype=float), (n,)))
        return cls(X, g, kink)


def add_kink_correction(G: np.ndarray, G1: np.ndarray, kink, origin: np.ndarray, step: np.ndarray,
                        index_of) -> None:
    r"""Fold the Euler–Maclaurin correction of a kink into the lattice values of g (in place).

    For F = p·g with a jump J·p(y*) in F′ at y* = y_j + tΔ (t ∈ [0, 1)), the lattice sum exceeds the
    integral by −Jp(y*)Δ²B₂(t)/2, B₂(t) = t² − t + 1/6 (the periodic Bernoulli polynomial).  With
    ρ_j ≈ Δp(y_j), adding c_j = (JΔ/2)B₂(t)(1 − t) and c_{j+1} = (JΔ/2)B₂(t)t to g restores the integral
    up to O(Δ³), and keeps E = Σ_j ρ_j g_j linear in ρ (so the cross-correlation gradients apply); the
    motion of the lattice past the kink adds −(∂c/∂t)/Δ to g′ (∂t/∂β′ = −1/Δ).

    ``origin`` (N,) is the lattice position of index offset 0 and ``index_of(offset)`` maps integer
    offsets to array columns (None where the offset is off the lattice).
    """
    loc, jump = kink
    pos = (loc - origin) / step
    j0 = np.floor(pos)
    t = pos - j0
    b2 = t * t - t + 1.0 / 6.0
    scale = 0.5 * jump * step
    c0, c1 = scale * b2 * (1.0 - t), scale * b2 * t
    d0 = scale * ((2.0 * t - 1.0) * (1.0 - t) - b2)
    d1 = scale * ((2.0 * t - 1.0) * t + b2)
    rows = np.arange(len(loc))
    for off, c, d in ((0, c0, d0), (1, c1, d1)):
        col = index_of(j0.astype(int) + off)
        ok = col >= 0
        G[rows[ok], col[ok]] += c[ok]
        G1[rows[ok], col[ok]] -= d[ok] / step[ok]


def _window(C: np.ndarray, half: int) -> np.ndarray:
    """Entries k = −h..h of circular arrays (last axis)."""
    M = C.shape[-1]
    return np.concatenate([C[..., M - half:], C[..., : half + 1]], axis=-1)


def fft_terms(base: BaseDensity, X: np.ndarray, g: SiteFn, A: np.ndarray, b: np.ndarray, theta: np.ndarray,
              step: np.ndarray, half: int, M: int, grad: bool = True, grad_theta: bool = True,
              support: np.ndarray | None = None, kink=None, chunk: int = 2_000_000) -> dict:
    r"""Site expectations E_n and their gradients by the FFT lattice (see the module docstring).

    Parameters
    ----------
    base, theta
        Base family and its parameters (D,).
    X : (N, D)
        Projection vectors; ``g`` the site log-potentials.
    A, b
        q's affine map.
    step : (N,)
        Frozen lattice spacings Δ_n; ``half`` = h (2h + 1 points per component), ``M`` the FFT length.

    grad_theta
        Also ∂E/∂θ (skip it when θ is fixed).
    support : (N,) ints, optional
        Frozen per-site component half-supports h′_n ≤ h (``component_support``); a chunk of sites is
        evaluated on k = −max h′..max h′.  Default: h for every site.
    kink : (y*, J), optional
        Kinks of the site functions, corrected by ``add_kink_correction``.

    Returns
    -------
    dict with ``E`` (N,), and with ``grad``: ``dalpha`` (N, D), ``dbeta`` (N,), ``dtheta`` (N, D).
    """
    N, D = X.shape
    alpha = X @ A
    m = base.mean(theta)
    beta_p = X @ b + alpha @ m
    Y = beta_p[:, None] + step[:, None] * offsets(M)
    G, G1 = (np.array(a, dtype=float) for a in g(Y))
    if kink is not None:
        add_kink_correction(G, G1, kink, beta_p, step, lambda o: np.where(np.abs(o) < M // 2 - 1, o % M, -1))
    E = np.empty(N)
    out = {"E": E}
    if grad:
        dalpha, dbeta, dtheta = np.empty((N, D)), np.empty(N), np.empty((N, D))
        out.update(dalpha=dalpha, dbeta=dbeta, dtheta=dtheta)
        dm = base.dmean(theta)
    support = np.full(N, half) if support is None else np.asarray(support)
    order = np.argsort(support, kind="stable")  # chunks of similar supports
    var_v, dvar_v = base.var(theta), base.dvar(theta)
    n_chunk = max(1, chunk // (D * M))
    for i in range(0, N, n_chunk):
        sl = order[i:i + n_chunk]
        hh = int(support[sl].max())
        if grad:
            pi, sa, st = component_lattice(base, alpha[sl], theta, step[sl], hh, scores=2 if grad_theta else 1)
        else:
            pi = component_lattice(base, alpha[sl], theta, step[sl], hh)
        a = alpha[sl]
        p, mu, m2, active = variance_fix(pi, step[sl], a * a * var_v)
        Kf = kernel_ft(p, M)
        F = sfft.rfft(embed(pi, M), axis=-1) * Kf  # (n, D, M/2+1), variance-restored components
        rho = sfft.irfft(F.prod(axis=1), M, axis=-1)  # (n, M)
        e = (rho * G[sl]).sum(-1)
        E[sl] = e
        if not grad:
            continue
        db = (rho * G1[sl]).sum(-1)
        ones = np.ones_like(F[:, :1])
        pre = np.concatenate([ones, np.cumprod(F[:, :-1], axis=1)], axis=1)
        suf = np.concatenate([np.cumprod(F[:, :0:-1], axis=1)[:, ::-1], ones], axis=1)
        R = pre * suf
        Gh = sfft.rfft(G[sl], axis=-1)
        ct = _window(sfft.irfft(Gh[:, None, :] * np.conj(R), M, axis=-1), hh + 1)  # (n, D, 2h′+3)
        mid = ct[..., 1:-1]
        side = 0.5 * (ct[..., :-2] + ct[..., 2:])
        pp = p[..., None]
        c = (1.0 - pp) * mid + pp * side  # correlation with the kernel applied to component d
        dE_dp = (pi * (side - mid)).sum(-1)
        w = pi * (c - e[:, None, None])
        lk = step[sl][:, None, None] * np.arange(-hh, hh + 1)
        # ∂V_lat/∂φ = Σ_k π s (l² − m₂) − 2μ Σ_k π s (l − μ); p = (V_true − V_lat)/Δ² where 0 < p < 1
        u = pi * (lk * lk - m2[..., None] - 2.0 * mu[..., None] * (lk - mu[..., None]))
        g_p = np.where(active, dE_dp, 0.0) / step[sl][:, None] ** 2
        dbeta[sl] = db
        dalpha[sl] = (w * sa).sum(-1) + m * db[:, None] + g_p * (2.0 * a * var_v - (u * sa).sum(-1))
        dth = a * dm * db[:, None] + g_p * a * a * dvar_v
        if st is not None:
            dth = dth + (w * st).sum(-1) - g_p * (u * st).sum(-1)
        dtheta[sl] = dth
    return out


def gauss_terms(X: np.ndarray, g: SiteFn, C: np.ndarray, b: np.ndarray, step: np.ndarray, half: int,
                grad: bool = True, kink=None) -> dict:
    r"""Site expectations under q = N(b, CCᵀ): y_n ~ N(x_nᵀb, ‖Cᵀx_n‖²) on its own lattice.

    Returns ``E`` (N,) and with ``grad`` ``dalpha`` (N, D) (α_n = Cᵀx_n) and ``dbeta`` (N,).
    """
    alpha = X @ C
    sigma = np.sqrt((alpha * alpha).sum(-1))
    ok = sigma > 0
    sig = np.where(ok, sigma, 1.0)[:, None]
    lk = step[:, None] * np.arange(-half, half + 1, dtype=float)
    G, G1 = (np.array(a, dtype=float) for a in g((X @ b)[:, None] + lk))
    if kink is not None:
        add_kink_correction(G, G1, kink, X @ b, step, lambda o: np.where(np.abs(o) < half, o + half, -1))
    lr = -0.5 * (lk / sig) ** 2
    rho = np.exp(lr - lr.max(-1, keepdims=True))
    rho /= rho.sum(-1, keepdims=True)
    rho = np.where(ok[:, None], rho, (np.arange(-half, half + 1) == 0).astype(float))
    E = (rho * G).sum(-1)
    out = {"E": E}
    if grad:
        dsig = (rho * (lk * lk / sig**3) * (G - E[:, None])).sum(-1)
        out["dalpha"] = np.where(ok[:, None], dsig[:, None] * alpha / sig, 0.0)
        out["dbeta"] = (rho * G1).sum(-1)
    return out


def tensor_grid(base: BaseDensity, theta: np.ndarray, step: np.ndarray, half: int, scores: bool = False):
    r"""Per-component v-lattices v_dk = E v_d + kδ_d, k = −h..h, with normalised weights π_dk ∝ q_v(v_dk).

    Returns the nodes (D, 2h+1), the weights and, with ``scores``, ∂ log q_v(v_dk)/∂θ_d including the
    move of the nodes with E v_d (θ).
    """
    k = np.arange(-half, half + 1, dtype=float)
    th = np.asarray(theta, dtype=float)[:, None]
    v = base.mean(theta)[:, None] + step[:, None] * k
    lq = base.logpdf(v, th)
    cusp = base.cusp_correction(np.asarray(theta, dtype=float), np.asarray(step, dtype=float))
    if cusp is not None:
        lq[:, half] += cusp[0]
    pi = np.exp(lq - lq.max(-1, keepdims=True))
    pi /= pi.sum(-1, keepdims=True)
    if not scores:
        return v, pi
    s = base.dlogpdf(v, th) + base.score(v, th) * base.dmean(theta)[:, None]
    if cusp is not None:  # the frozen step does not move with θ here
        s[:, half] += cusp[1]
    return v, pi, s


def tensor_terms(base: BaseDensity, logp_grad: Callable, A: np.ndarray, b: np.ndarray, theta: np.ndarray,
                 step: np.ndarray, half: int, grad: bool = True) -> dict:
    r"""E_q[f(w)] for a plain log density f on the tensor v-lattice, with ∂/∂A, ∂/∂b, ∂/∂θ.

    ``logp_grad(W)`` returns (f, ∇f) at the rows of W.  ∂/∂θ_d = Σ_i P_i s_{d,k_d(i)}(f_i − E)
    + ∂E v_d/∂θ_d·(Aᵀ ∂E/∂b)_d.
    """
    D = A.shape[0]
    n = 2 * half + 1
    if grad:
        v, pi, s = tensor_grid(base, theta, step, half, scores=True)
    else:
        v, pi = tensor_grid(base, theta, step, half)
    idx = np.indices((n,) * D).reshape(D, -1)  # (D, n^D)
    V = v[np.arange(D)[:, None], idx].T  # (n^D, D)
    P = np.prod(pi[np.arange(D)[:, None], idx], axis=0)
    W = V @ A.T + b
    f, gf = logp_grad(W)
    E = float(P @ f)
    out = {"E": E}
    if grad:
        Pg = P[:, None] * gf
        db = Pg.sum(0)
        out["dA"] = Pg.T @ V
        out["db"] = db
        S = s[np.arange(D)[:, None], idx]  # (D, n^D)
        out["dtheta"] = S @ (P * (f - E)) + base.dmean(theta) * (A.T @ db)
    return out


def first_moment_gradient(base: BaseDensity, x: np.ndarray, g1: Callable, A: np.ndarray, b: np.ndarray,
                          theta: np.ndarray, step: float, half: int, M: int) -> np.ndarray:
    r"""The paper's form ∂E[g(xᵀw)]/∂α_d = ∫ g′(y) d_d(y) dy, d_d the convolution of the v_d-weighted
    component d with the others (one site; for checking ``fft_terms`` on smooth sites and resolved
    components: it has neither the variance-restoring kernel nor the kink correction).  Returns (D,)."""
    alpha = x @ A
    m = base.mean(theta)
    pi = component_lattice(base, alpha[None], theta, np.array([step]), half)[0]  # (D, 2h+1)
    lk = step * np.arange(-half, half + 1)
    a = np.where(alpha == 0, 1.0, alpha)
    weighted = pi * (lk[None] / a[:, None] + m[:, None])  # v_d q(v_d) on the lattice of u_d
    F = sfft.rfft(embed(pi, M), axis=-1)
    Fw = sfft.rfft(embed(weighted, M), axis=-1)
    y = x @ b + alpha @ m + step * offsets(M)
    gp = g1(y)
    out = np.empty(len(alpha))
    for d in range(len(alpha)):
        prod = np.prod(np.delete(F, d, axis=0), axis=0) * Fw[d]
        out[d] = sfft.irfft(prod, M) @ gp
    return out
