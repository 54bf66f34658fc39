r"""Lattice site expectations for AI-KL (MATH.md §8): values and exact gradients, vectorised over sites.

Three kernels, each returning the expectations E_n = E_q[g_n(y_n)] of the site log-potentials g_n on
the projections y_n = x_nᵀw = α_nᵀv + β_n (α_n = Aᵀx_n, β_n = bᵀx_n) and their derivatives:

* ``fft_terms`` — any base: y_n − β′_n is the sum of the D centred components u_d = α_d(v_d − E v_d)
  (β′_n = β_n + α_nᵀE v), whose lattice pmfs π_d (``distributions.affine_independent.component_lattice``)
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
* ``gauss_terms`` — Gaussian base: y_n ~ N(β_n, σ_n²), σ_n = ‖α_n‖, needs no convolution:
  ρ_k ∝ exp(−l_k²/2σ²) on l_k = kΔ, ∂E/∂σ = Σ_k ρ_k (l_k²/σ³)(g_k − E), ∂E/∂α = (∂E/∂σ) α/σ.
* ``tensor_terms`` — a plain log density (no sites, D ≤ 3): E_q[f(Av + b)] on the tensor product of
  the per-component lattices in v-space, with ∂/∂A = Σ_i P_i ∇f(w_i) v_iᵀ, ∂/∂b = Σ_i P_i ∇f(w_i).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import fft as sfft

from distributions.affine_independent import BaseDensity, component_lattice, embed, offsets

SiteFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass
class SiteGroup:
    """Sites sharing one projection matrix: g(Y) → (log f, (log f)′) at Y of shape (N, M)."""

    X: np.ndarray  # (N, D)
    g: SiteFn

    @classmethod
    def from_site(cls, site) -> SiteGroup:
        """Wrap a ``Site`` (whose pointwise rule takes u of shape (..., N))."""

        def g(Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            f, f1, _ = site.point(Y.T, site.moments, site.params)
            return (np.broadcast_to(f, Y.T.shape).T, np.broadcast_to(f1, Y.T.shape).T)

        return cls(np.asarray(site.X, dtype=float), g)


def _window(C: np.ndarray, half: int) -> np.ndarray:
    """Entries k = −h..h of circular arrays (last axis)."""
    M = C.shape[-1]
    return np.concatenate([C[..., M - half:], C[..., : half + 1]], axis=-1)


def fft_terms(base: BaseDensity, X: np.ndarray, g: SiteFn, A: np.ndarray, b: np.ndarray, theta: np.ndarray,
              step: np.ndarray, half: int, M: int, grad: bool = True, chunk: int = 3_000_000) -> dict:
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

    Returns
    -------
    dict with ``E`` (N,), and with ``grad``: ``dalpha`` (N, D), ``dbeta`` (N,), ``dtheta`` (N, D).
    """
    N, D = X.shape
    alpha = X @ A
    m = base.mean(theta)
    beta_p = X @ b + alpha @ m
    Y = beta_p[:, None] + step[:, None] * offsets(M)
    G, G1 = g(Y)
    E = np.empty(N)
    out = {"E": E}
    if grad:
        dalpha, dbeta, dtheta = np.empty((N, D)), np.empty(N), np.empty((N, D))
        out.update(dalpha=dalpha, dbeta=dbeta, dtheta=dtheta)
        dm = base.dmean(theta)
    n_chunk = max(1, chunk // (D * M))
    for i in range(0, N, n_chunk):
        sl = slice(i, min(N, i + n_chunk))
        if grad:
            pi, sa, st = component_lattice(base, alpha[sl], theta, step[sl], half, scores=True)
        else:
            pi = component_lattice(base, alpha[sl], theta, step[sl], half)
        F = sfft.rfft(embed(pi, M), axis=-1)  # (n, D, M/2+1)
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
        c = _window(sfft.irfft(Gh[:, None, :] * np.conj(R), M, axis=-1), half)  # (n, D, 2h+1)
        w = pi * (c - e[:, None, None])
        dbeta[sl] = db
        dalpha[sl] = (w * sa).sum(-1) + m * db[:, None]
        dtheta[sl] = (w * st).sum(-1) + alpha[sl] * dm * db[:, None]
    return out


def gauss_terms(X: np.ndarray, g: SiteFn, C: np.ndarray, b: np.ndarray, step: np.ndarray, half: int,
                grad: bool = True) -> dict:
    r"""Site expectations under q = N(b, CCᵀ): y_n ~ N(x_nᵀb, ‖Cᵀx_n‖²) on its own lattice.

    Returns ``E`` (N,) and with ``grad`` ``dalpha`` (N, D) (α_n = Cᵀx_n) and ``dbeta`` (N,).
    """
    alpha = X @ C
    sigma = np.sqrt((alpha * alpha).sum(-1))
    ok = sigma > 0
    sig = np.where(ok, sigma, 1.0)[:, None]
    lk = step[:, None] * np.arange(-half, half + 1, dtype=float)
    G, G1 = g((X @ b)[:, None] + lk)
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
    pi = np.exp(lq - lq.max(-1, keepdims=True))
    pi /= pi.sum(-1, keepdims=True)
    if not scores:
        return v, pi
    s = base.dlogpdf(v, th) + base.score(v, th) * base.dmean(theta)[:, None]
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
    component d with the others (one site; for checking ``fft_terms``).  Returns (D,)."""
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
