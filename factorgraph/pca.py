"""Bayesian PCA / factor analysis with ARD (Bishop 1999) by blocked VMP, with the rotation speed-up.

Model, for rows x_n ∈ R^D (n = 1..N) and K latent components::

    z_n ~ N(0, I_K),   w_d ~ N(0, diag(α)⁻¹) (row d of W, a K-vector),   μ_d ~ N(0, β₀⁻¹),
    α_k ~ Gam(a₀, b₀) (ARD; one shared α without ARD),   τ_d ~ Gam(a₀, b₀) (one τ with noise="isotropic"),
    x_nd ~ N(w_dᵀz_n + μ_d, τ_d⁻¹).

Factorisation q = Π_n q(z_n) Π_d q(w̃_d) q(α) q(τ), with w̃_d = (w_d, μ_d) a joint (K+1)-Gaussian (full
covariance) and z̃_n = (z_n, 1).  Each block is updated in closed form (Winn & Bishop 2005), all vectorised:

* q(z_n) = N(m_n, Σ_z):  Σ_z⁻¹ = I + Σ_d E[τ_d] E[w_d w_dᵀ],  m_n = Σ_z Σ_d E[τ_d](x_nd E[w_d] − E[w_d μ_d])
  (one Σ_z for all rows; the means are one (N, D)·(D, K) product).
* q(w̃_d) = N(m̃_d, Σ̃_d):  Σ̃_d⁻¹ = diag(E[α], β₀) + E[τ_d] S̃,  m̃_d = Σ̃_d E[τ_d] Σ_n x_nd E[z̃_n], with
  S̃ = Σ_n E[z̃_n z̃_nᵀ] (a batch of D (K+1)×(K+1) solves).
* q(α_k) = Gam(a₀ + D/2, b₀ + ½Σ_d E[w_dk²]);  q(τ_d) = Gam(a₀ + N/2, b₀ + ½E[SSE_d]) with
  E[SSE_d] = Σ_n x_nd² − 2m̃_dᵀ Σ_n x_nd E[z̃_n] + tr(E[w̃_d w̃_dᵀ] S̃).

A sweep costs O(NDK + DK³).  The ELBO (exact for this q) is

    L = Σ_d [N/2 (E[log τ_d] − log 2π) − ½E[τ_d]E[SSE_d]] − Σ_n KL(q(z_n) ‖ N(0, I))
        + Σ_d (E[log p(w̃_d | α)] + H[q(w̃_d)]) − KL(q(α) ‖ p(α)) − KL(q(τ) ‖ p(τ)).

Missing entries (NaN in X, ``mask=``) are marginalised exactly: with O_nd = 1 where x_nd is observed, each
sum over d in q(z_n) and over n in q(w̃_d) and E[SSE_d] runs over the observed entries only, so each row has
its own Σ_n (one batched Cholesky), each column its own S̃_d = Σ_n O_nd E[z̃_n z̃_nᵀ], and N in q(τ) and L is
the count of observed entries (docs/maths.md §12).

With ``rotate=True`` every sweep ends with the rotation z → Rz, w → R⁻ᵀw of ``factorgraph.rotation``
(Luttinen & Ilin 2010), which never lowers L and lets ARD switch unused components off in far fewer
sweeps.  With missing entries and a mean it is preceded by the closed-form translation z → z + c,
μ_d → μ_d − cᵀw_d (``rotation.optimal_translation``), which removes the slow mode coupling z̄ and μ.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from scipy.special import digamma, gammaln

from factors.kernels.rows import logdets, row_posteriors
from schedules.rotation import ard_term, gaussian_term, optimal_rotation, optimal_translation

from . import checks, convergence
from .nodes import ModelError
from .pca_result import PCAResult

_LOG_2PI = float(np.log(2.0 * np.pi))


def _gamma_kl(a: Any, b: Any, a0: float, b0: float) -> np.ndarray:
    """KL(Gam(a, b) ‖ Gam(a₀, b₀)) (shape, rate)."""
    return ((a - a0) * digamma(a) - gammaln(a) + gammaln(a0) + a0 * (np.log(b) - np.log(b0))
            + a * (b0 - b) / b)


class _State:
    """The variational parameters of the blocked scheme and their expected statistics."""

    def __init__(self, X: np.ndarray, K: int, mean: bool, iso: bool, ard: bool, a0: float, b0: float,
                 beta0: float, W0: np.ndarray, M: np.ndarray | None = None) -> None:
        """``M`` (N, D) bool, True = observed, selects the missing-data path (per-row Cov(z_n), per-column S̃_d);
        None = complete data (one common Cov(z) and one S̃).  The entries of X where M is False are ignored."""
        N, D = X.shape
        self.missing = M is not None
        if self.missing:
            self.M = M.astype(float)
            X = np.where(M, X, 0.0)
            self.cnt = self.M.sum(0)  # observed entries per column
        else:
            self.cnt = np.full(D, float(N))
        self.X, self.N, self.D, self.K, self.J = X, N, D, K, K + int(mean)
        self.mean, self.iso, self.ard, self.a0, self.b0, self.beta0 = mean, iso, ard, a0, b0, beta0
        self.xx = np.einsum("nd,nd->d", X, X)
        self.colsum = X.sum(0)
        self.Wm = np.zeros((D, self.J))
        self.Wm[:, :K] = W0
        if mean:
            self.Wm[:, K] = self.colsum / self.cnt
        self.Wc = np.zeros((D, self.J, self.J))  # point-mass start
        ntau = 1 if iso else D
        self.tau_a, self.tau_b = np.full(ntau, a0), np.full(ntau, b0)
        self.al_a, self.al_b = np.full(K, a0), np.full(K, b0)
        self.Zm = np.zeros((N, K))
        self.Zc = np.broadcast_to(np.eye(K), (N, K, K)).copy() if self.missing else np.eye(K)

    # expectations
    def tau(self) -> np.ndarray:
        return np.broadcast_to(self.tau_a / self.tau_b, (self.D,))

    def alpha(self) -> np.ndarray:
        return self.al_a / self.al_b

    def eww(self) -> np.ndarray:
        return self.Wc + self.Wm[:, :, None] * self.Wm[:, None, :]

    def z_stats(self) -> None:
        """S̃ = Σ_n E[z̃z̃ᵀ] and XᵀE[Z̃] (D, J); with missing data also S̃_d = Σ_n M_nd E[z̃_n z̃_nᵀ] (D, J, J)."""
        N, K = self.N, self.K
        if self.missing:
            Zt = np.empty((N, self.J))
            Zt[:, :K] = self.Zm
            if self.mean:
                Zt[:, K] = 1.0
            Ezz = Zt[:, :, None] * Zt[:, None, :]
            Ezz[:, :K, :K] += self.Zc
            self.Sall = Ezz.sum(0)
            self.S = (self.M.T @ Ezz.reshape(N, -1)).reshape(self.D, self.J, self.J)
            self.XZ = self.X.T @ Zt
            return
        S = np.empty((self.J, self.J))
        S[:K, :K] = N * self.Zc + self.Zm.T @ self.Zm
        XZ = np.empty((self.D, self.J))
        XZ[:, :K] = self.X.T @ self.Zm
        if self.mean:
            s = self.Zm.sum(0)
            S[:K, K] = S[K, :K] = s
            S[K, K] = N
            XZ[:, K] = self.colsum
        self.S, self.XZ = S, XZ

    # updates
    def update_z(self) -> None:
        K, tau = self.K, self.tau()
        eww = self.eww()
        if self.missing:
            # Σ_n⁻¹ = I + Σ_d M_nd E[τ_d] E[w_d w_dᵀ]: one batched Cholesky over the rows
            Mt = self.M * tau
            P = (Mt @ np.ascontiguousarray(eww[:, :K, :K]).reshape(self.D, K * K)).reshape(-1, K, K)  # one GEMM
            P[:, np.arange(K), np.arange(K)] += 1.0
            h = self.X @ (tau[:, None] * self.Wm[:, :K])
            if self.mean:
                h -= Mt @ eww[:, :K, K]
            self.Zc, self.Zm, _, bad = row_posteriors(P, h)
            if bad >= 0:
                raise FloatingPointError(f"pca: the precision of q(z_n) of row {bad} is not positive definite "
                                         "(numerical trouble: check the data scale)")
            self.z_stats()
            return
        self.Zc = np.linalg.inv(np.eye(K) + np.einsum("d,dkl->kl", tau, eww[:, :K, :K]))
        h = self.X @ (tau[:, None] * self.Wm[:, :K])
        if self.mean:
            h -= tau @ eww[:, :K, K]
        self.Zm = h @ self.Zc
        self.z_stats()

    def update_w(self) -> None:
        prior = np.empty(self.J)
        prior[:self.K] = self.alpha()
        if self.mean:
            prior[self.K] = self.beta0
        tau = self.tau()
        P = tau[:, None, None] * self.S + np.diag(prior)
        L = np.linalg.cholesky(P)
        Linv = np.linalg.inv(L)
        self.Wc = np.einsum("dji,djk->dik", Linv, Linv)
        self.Wm = np.einsum("dij,dj->di", self.Wc, tau[:, None] * self.XZ)
        self.logdet_wc = -2.0 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(1)

    def update_alpha(self) -> None:
        K, D = self.K, self.D
        sq = np.einsum("dkk->k", self.eww()[:, :K, :K])
        if self.ard:
            self.al_a, self.al_b = np.full(K, self.a0 + 0.5 * D), self.b0 + 0.5 * sq
        else:
            self.al_a, self.al_b = np.full(K, self.a0 + 0.5 * D * K), np.full(K, self.b0 + 0.5 * sq.sum())

    def sse(self) -> np.ndarray:
        """E[Σ_{n observed} (x_nd − w̃_dᵀz̃_n)²] (D,)."""
        quad = (np.einsum("djk,dkj->d", self.eww(), self.S) if self.missing
                else np.einsum("djk,kj->d", self.eww(), self.S))
        return self.xx - 2.0 * np.einsum("dj,dj->d", self.Wm, self.XZ) + quad

    def update_tau(self) -> None:
        s = self.sse()
        if self.iso:
            self.tau_a, self.tau_b = np.array([self.a0 + 0.5 * self.cnt.sum()]), np.array([self.b0 + 0.5 * s.sum()])
        else:
            self.tau_a, self.tau_b = self.a0 + 0.5 * self.cnt, self.b0 + 0.5 * s

    def translate(self) -> float:
        """Apply the bound-maximising translation z → z + c, μ_d → μ_d − cᵀw_d (``rotation.optimal_translation``);
        returns the gain.  Used with missing data and a mean, where it removes a slow mode of the sweeps."""
        K, J = self.K, self.J
        eww = self.eww()
        c, gain = optimal_translation(self.Zm.sum(0), self.N, eww[:, :K, :K].sum(0), eww[:, :K, K].sum(0),
                                      self.beta0)
        if gain <= 0.0:
            return 0.0
        T = np.eye(J)  # acts on z̃ = (z, 1)
        T[:K, K] = c
        V = np.eye(J)  # = T⁻ᵀ, acts on w̃ = (w, μ)
        V[K, :K] = -c
        self.Zm = self.Zm + c
        self.S, self.XZ = T @ self.S @ T.T, self.XZ @ T.T
        if self.missing:
            self.Sall = T @ self.Sall @ T.T
        self.Wm, self.Wc = self.Wm @ V.T, V @ self.Wc @ V.T
        return gain

    def rotate(self) -> float:
        """Apply the bound-maximising rotation (z → Rz, w → R⁻ᵀw) and refit q(α); returns the gain."""
        K = self.K
        A_W = self.eww()[:, :K, :K].sum(0)
        A_Z = self.Sall[:K, :K] if self.missing else self.S[:K, :K]
        terms = [gaussian_term(A_Z, self.N), ard_term(A_W, self.D, self.a0, self.b0, shared=not self.ard)]
        R, gain = optimal_rotation(terms, K)
        if gain == 0.0:
            return 0.0
        T = np.eye(self.J)  # acts on z̃ = (z, 1)
        T[:K, :K] = R
        U = np.eye(self.J)  # acts on w̃ = (w, μ)
        U[:K, :K] = np.linalg.inv(R).T
        self.Zm, self.Zc = self.Zm @ R.T, R @ self.Zc @ R.T  # (the product broadcasts over the rows' Cov(z_n))
        self.S, self.XZ = T @ self.S @ T.T, self.XZ @ T.T
        if self.missing:
            self.Sall = T @ self.Sall @ T.T
        self.Wm, self.Wc = self.Wm @ U.T, U @ self.Wc @ U.T
        self.logdet_wc = self.logdet_wc - 2.0 * np.linalg.slogdet(R)[1]
        self.update_alpha()
        return gain

    def elbo(self) -> float:
        N, D, K = self.N, self.D, self.K
        a, b = self.tau_a, self.tau_b
        etau, elogtau = a / b, digamma(a) - np.log(b)
        s = self.sse()
        lik = (0.5 * self.cnt * (np.broadcast_to(elogtau, (D,)) - _LOG_2PI)
               - 0.5 * np.broadcast_to(etau, (D,)) * s).sum()
        if self.missing:
            ld, bad = logdets(self.Zc)
            if bad >= 0:
                return -np.inf  # (a non-positive-definite Cov(z_n): refused by the caller as a non-finite bound)
            kl_z = 0.5 * (np.trace(self.Sall[:K, :K]) - N * K - ld.sum())
        else:
            kl_z = 0.5 * (np.trace(self.S[:K, :K]) - N * K - N * np.linalg.slogdet(self.Zc)[1])
        aa, ab = self.al_a, self.al_b
        ealpha, elogalpha = aa / ab, digamma(aa) - np.log(ab)
        eww = self.eww()
        sq = np.einsum("dkk->k", eww[:, :K, :K])
        logp_w = 0.5 * D * elogalpha.sum() - 0.5 * D * K * _LOG_2PI - 0.5 * (ealpha * sq).sum()
        if self.mean:
            logp_w += 0.5 * D * (np.log(self.beta0) - _LOG_2PI) - 0.5 * self.beta0 * eww[:, K, K].sum()
        h_w = 0.5 * self.logdet_wc.sum() + 0.5 * D * self.J * (1.0 + _LOG_2PI)
        kl_alpha = _gamma_kl(aa, ab, self.a0, self.b0).sum() if self.ard else _gamma_kl(aa[0], ab[0], self.a0, self.b0)
        kl_tau = _gamma_kl(a, b, self.a0, self.b0).sum()
        return float(lik - kl_z + logp_w + h_w - kl_alpha - kl_tau)


def _observed(X: Any, mask: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """X as a float (N, D) matrix and its mask (True = observed; None when every entry is): NaN entries, the
    entries where ``mask`` is False and those a ``numpy.ma`` array masks are missing."""
    Xa, hidden = checks.as_float_array(X, "pca: X")
    if Xa.ndim != 2:
        raise ModelError(f"pca: X must be a matrix (N, D), got shape {Xa.shape}")
    N, D = Xa.shape
    if N < 2 or D < 1:
        raise ModelError(f"pca: X must have at least 2 rows and 1 column, got shape {Xa.shape}")
    M = checks.mask_array(mask, Xa.shape, "X") & ~np.isnan(Xa)
    if hidden is not None:
        M &= ~hidden
    checks.constant(Xa[M], "pca: X (its observed entries)")  # finite (±inf is not "missing"), not huge
    if M.all():
        return Xa, None
    empty = np.flatnonzero(~M.any(0))
    if empty.size:
        raise ModelError(f"pca: column(s) {empty[:10].tolist()} of X have no observed entry; nothing can be learnt "
                         "about their loadings and noise: drop them")
    return np.where(M, Xa, 0.0), M


def _check(X: Any, mask: Any, n_components: Any, noise: str, init: Any, seed: Any
           ) -> tuple[np.ndarray, np.ndarray | None, int, np.ndarray]:
    Xa, M = _observed(X, mask)
    N, D = Xa.shape
    if isinstance(n_components, bool) or not isinstance(n_components, int | np.integer):
        raise ModelError(f"pca: n_components must be an integer, got {n_components!r}")
    K = int(n_components)
    if not 1 <= K <= D:
        raise ModelError(f"pca: n_components must be between 1 and D = {D} (the columns of X), got {K}")
    if noise not in ("diagonal", "isotropic"):
        raise ModelError(f"pca: noise must be 'diagonal' (factor analysis) or 'isotropic' (PPCA), got {noise!r}")
    if isinstance(init, str):
        if init != "random":
            raise ModelError(f"pca: init must be 'random' or a (D, K) = ({D}, {K}) array of loadings, got {init!r}")
        W0 = np.random.default_rng(seed).standard_normal((D, K))
    else:
        W0 = checks.constant(init, "pca: init")
        if W0.shape != (D, K):
            raise ModelError(f"pca: init loadings must have shape (D, K) = ({D}, {K}), got {W0.shape}")
    return Xa, M, K, W0


def pca(X: Any, n_components: int, ard: bool = True, *, rotate: bool = True, noise: str = "diagonal",
        mask: Any = None, mean: bool = True, max_iter: int = 1000, tol: float = 1e-7, shape: float = 1e-3,
        rate: float = 1e-3, mean_precision: float = 1e-6, init: Any = "random", seed: int | None = 0,
        scale: bool = True) -> PCAResult:
    """Bayesian PCA (Bishop 1999): x_n ~ N(W z_n + μ, diag(τ)⁻¹), ARD on W's columns, fitted by blocked VMP.

    Parameters
    ----------
    X
        Data (N, D), one row per observation.  NaN marks a missing entry (so do a ``numpy.ma`` array's mask
        and ``mask``); missing entries are marginalised exactly: every update and the bound use only the
        observed entries, and each row gets its own Cov(z_n).  A row with no observed entry keeps
        q(z_n) = N(0, I); a column with none is refused.
    n_components
        K, the number of latent components (1 ≤ K ≤ D); with ARD an upper bound, unneeded ones are switched off.
    ard
        One precision α_k per column of W (Bishop's ARD); False: one shared α.
    rotate
        End each sweep with the bound-maximising rotation of the latent space (Luttinen & Ilin 2010); with
        missing entries and ``mean``, preceded by the bound-maximising translation of z and μ.
    noise
        "diagonal" (τ_d per column: factor analysis) or "isotropic" (one τ: probabilistic PCA).
    mask
        Optional (N, D) bool array, True = observed (combined with the NaNs of X).
    mean
        Learn a mean μ_d per column (prior N(0, ``mean_precision``⁻¹)), jointly with w_d.
    max_iter, tol
        At most ``max_iter`` sweeps; stop when the bound changes by less than ``tol`` × (1 + |L|).
    shape, rate
        a₀, b₀ of the Gamma priors on α and τ.
    init, seed
        "random" (loadings' means N(0, 1) in the units of X / s, drawn with ``seed``) or a (D, K) array of
        initial loading means (in the units of X); q(W) starts as a point mass, q(α) and q(τ) at their priors,
        and the first update is q(z).
    scale
        Fit X / s with s the root mean square of the (centred, with ``mean``) entries of X, so that the Gamma
        priors (their rates b₀ carry the units of w² and x²) act alike whatever the units of X; the results
        are reported in the units of X and the bound is that of X (L(X / s) − ND log s).  ``False``: the
        priors apply to X as given (as in BayesPy; tests/test_pca.py compares the two this way).

    Returns
    -------
    PCAResult
    """
    Xa, M, K, W0 = _check(X, mask, n_components, noise, init, seed)
    t0 = time.perf_counter()
    if M is None:
        Xc = Xa - Xa.mean(0)
        total = float(np.einsum("nd,nd->", Xc, Xc) / len(Xa))
        s = float(np.sqrt(np.mean((Xc if mean else Xa) ** 2))) if scale else 1.0
    else:  # over the observed entries: column means and variances, and the root mean square
        cnt = M.sum(0)
        Xc = np.where(M, Xa - Xa.sum(0) / cnt, 0.0)
        total = float((np.einsum("nd,nd->d", Xc, Xc) / cnt).sum())
        s = float(np.sqrt(np.sum((Xc if mean else Xa) ** 2) / M.sum())) if scale else 1.0
    if s == 0.0:
        raise ModelError("pca: X is constant (every column has zero variance)")
    if not isinstance(init, str):
        W0 = W0 / s
    st = _State(Xa / s if s != 1.0 else Xa, K, mean, noise == "isotropic", ard, shape, rate, mean_precision, W0, M)
    trace: list[float] = []
    converged = False
    warns: list[str] = []
    for _ in range(max_iter):
        st.update_z()
        st.update_w()
        st.update_alpha()
        st.update_tau()
        if rotate:
            if st.missing and mean:
                st.translate()
            st.rotate()
        L = st.elbo()
        if not np.isfinite(L):
            raise FloatingPointError(f"pca: the bound became {L} after sweep {len(trace) + 1} (check the data scale)")
        trace.append(L)
        if len(trace) > 1 and abs(trace[-1] - trace[-2]) <= tol * (1.0 + abs(L)):
            converged = True
            break
    if not converged:
        text = (f"pca: not converged after {max_iter} sweeps (last bound change "
                f"{trace[-1] - trace[-2] if len(trace) > 1 else float('nan'):.3g}); raise max_iter")
        warns.append(text)
        convergence.warn(text)
    # back to the units of X: w, μ scale by s, their precisions by s⁻²; the density of X gains −ND log s
    jac = (Xa.size if M is None else M.sum()) * np.log(s)
    return PCAResult(
        loadings=s * st.Wm[:, :K], loadings_cov=s**2 * st.Wc[:, :K, :K], latent_mean=st.Zm,
        latent_cov=st.Zc, mean=s * st.Wm[:, K] if mean else np.zeros(st.D),
        noise_precision=st.tau_a / st.tau_b / s**2, ard_precision=st.alpha() / s**2, elbo=trace[-1] - jac,
        elbo_trace=np.array(trace) - jac, n_iter=len(trace), converged=converged, time=time.perf_counter() - t0,
        total_variance=total, rotate=rotate, warnings=warns, _mean_cov=s**2 * _joint_cov(st),
        _noise_ab=(st.tau_a, st.tau_b * s**2), observed=M, _X=Xa)


def _joint_cov(st: _State) -> np.ndarray:
    """Cov(w_d, μ_d) as (D, K+1, K+1) (μ's row and column zero without a mean)."""
    if st.mean:
        return st.Wc.copy()
    out = np.zeros((st.D, st.K + 1, st.K + 1))
    out[:, :st.K, :st.K] = st.Wc
    return out


__all__ = ["PCAResult", "pca"]
