"""Exact smoothing of a Gaussian Markov chain in square-root covariance form (numba, ``cache=True``).

One sequence of L steps x_1..x_L ∈ R^D is written through its standardised disturbances ξ ~ N(0, I):

    x_1 = m₀ + U₀ξ₀,   x_{t+1} = A x_t + η_t,  η_t = U_Q ξ_t,   U₀U₀ᵀ = P₀⁻¹,  U_QU_Qᵀ = Q⁻¹,

and q(x) ∝ p(x) Π_t φ_t(x_t) with node potentials φ_t(x) = exp(h_tᵀx − ½xᵀJ_t x) (J_t also carries the
chain's own quadratic term M for t < L, ``extra``).  Only square roots of covariances are propagated, and
every covariance is a product or a sum of positive semi-definite terms, never the difference of two nearly
equal ones: that keeps nearly deterministic dynamics (Q⁻¹ → 0) and very precise potentials exact to
rounding, where the information form loses the O(1) information under the O(Q) entries of the joint
precision.

Forward (the filter).  With the predicted N(a_t, U_tU_tᵀ) (a_1 = m₀, U_1 = U₀),

    G_t = I + U_tᵀJ_tU_t = L_GL_Gᵀ,  U_t^f = U_tL_G⁻ᵀ,  a_t^f = a_t + U_t^fU_t^fᵀ(h_t − J_ta_t),
    log ∫ N(x | a_t, U_tU_tᵀ) φ_t(x) dx = h_tᵀa_t − ½a_tᵀJ_ta_t + ½|U_t^fᵀ(h_t − J_ta_t)|² − ½ log|G_t|,

and the pre-array of (x_{t+1}, x_t, η_t) in terms of (ξ for x_t given the potentials up to t, ξ_t) is
brought to lower-trapezoidal form by Householder reflections from the right (an LQ factorisation Θ):

    [A U_t^f   U_Q]       [R₁₁   0 ]
    [  U_t^f    0 ] Θᵀ =  [R₂₁  R₂₂]         R₁₁ = U_{t+1},  a_{t+1} = A a_t^f.
    [   0      U_Q]       [R₃₁  R₃₂]

Backward (the smoother).  With x_{t+1} ~ N(μ_{t+1}, SSᵀ), ẑ = R₁₁⁻¹(μ_{t+1} − a_{t+1}) and Ŝ = R₁₁⁻¹S,

    μ_t = a_t^f + R₂₁ẑ,   E[η_t] = R₃₁ẑ,   Cov(x_t) = R₂₁ŜŜᵀR₂₁ᵀ + R₂₂R₂₂ᵀ,   Cov(x_{t+1}, x_t) = SŜᵀR₂₁ᵀ,
    Cov(η_t) = R₃₁ŜŜᵀR₃₁ᵀ + R₃₂R₃₂ᵀ,   Cov(x_t, η_t) = R₂₁ŜŜᵀR₃₁ᵀ + R₂₂R₃₂ᵀ,

and the square root of Cov(x_t) is the LQ factor of [R₂₁Ŝ, R₂₂].  The disturbance moments give the
residual sums E₀ = E[(x_1 − m₀)(x_1 − m₀)ᵀ], W = Σ_t E[η_tη_tᵀ] and X = Σ_t E[x_tη_tᵀ] to relative
accuracy, and log|Λ| = log|P₀| + (L − 1) log|Q| + Σ_t log|G_t| (Λ the joint precision of q).
O(L·D³) per sequence.  A G_t that is not positive definite (a potential of negative precision that
outweighs what the earlier steps know) is reported by its (sequence, step).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _cholesky(a: np.ndarray, out: np.ndarray) -> float:
    """Lower Cholesky factor of the SPD ``a`` (its lower triangle) into ``out``; returns log|a| (nan if ``a`` is
    not positive definite)."""
    D = a.shape[0]
    logdet = 0.0
    for j in range(D):
        for i in range(j):
            out[i, j] = 0.0
        s = a[j, j]
        for k in range(j):
            s -= out[j, k] * out[j, k]
        if not s > 0.0:
            return np.nan
        out[j, j] = np.sqrt(s)
        logdet += 2.0 * np.log(out[j, j])
        for i in range(j + 1, D):
            s = a[i, j]
            for k in range(j):
                s -= out[i, k] * out[j, k]
            out[i, j] = s / out[j, j]
    return logdet


@njit(cache=True)
def covariance_root(P: np.ndarray) -> tuple[np.ndarray, float]:
    """(U, log|P|) for an SPD precision P: U lower triangular with UUᵀ = P⁻¹ (so UᵀPU = I to rounding), from
    the upper-triangular factor P = VVᵀ (Cholesky in reverse order) as U = V⁻ᵀ; log|P| is nan if P is not
    positive definite."""
    D = P.shape[0]
    V = np.zeros((D, D))
    logdet = 0.0
    for j in range(D - 1, -1, -1):
        s = P[j, j]
        for k in range(j + 1, D):
            s -= V[j, k] * V[j, k]
        if not s > 0.0:
            return np.zeros((D, D)), np.nan
        V[j, j] = np.sqrt(s)
        logdet += 2.0 * np.log(V[j, j])
        for i in range(j):
            s = 0.5 * (P[i, j] + P[j, i])
            for k in range(j + 1, D):
                s -= V[i, k] * V[j, k]
            V[i, j] = s / V[j, j]
    U = np.zeros((D, D))  # U = V⁻ᵀ: solve V W = I (W upper triangular), U = Wᵀ
    for c in range(D):
        for i in range(c, -1, -1):
            s = 1.0 if i == c else 0.0
            for k in range(i + 1, c + 1):
                s -= V[i, k] * U[c, k]
            U[c, i] = s / V[i, i]
    return U, logdet


@njit(cache=True)
def _lq(M: np.ndarray, rows: int, kend: int, band: int) -> None:
    """Householder reflections from the right: for k < kend, zero M[k, k+1:] and make M[k, k] ≥ 0, applying
    each reflection to the rows k..rows−1 (rows above k are already zero from column k on).  Row k is taken
    to be zero past column band + k (``band`` = the number of columns when it has no such structure; D for
    the pre-array, whose U_Q is lower triangular, a structure the reflections keep).  Each row of the result
    is the same row of M times one orthogonal matrix (row-wise backward stable)."""
    cols = M.shape[1]
    for k in range(kend):
        cend = min(cols, band + k + 1)
        alpha = 0.0
        for j in range(k, cend):
            alpha += M[k, j] * M[k, j]
        alpha = np.sqrt(alpha)
        if alpha == 0.0:
            continue
        x0 = M[k, k]
        beta = -alpha if x0 >= 0.0 else alpha  # the new M[k, k]; v = x − βe_k has no cancellation
        v0 = x0 - beta
        scale = -1.0 / (beta * v0)  # 2 / vᵀv
        for i in range(k + 1, rows):
            s = M[i, k] * v0
            for j in range(k + 1, cend):
                s += M[i, j] * M[k, j]
            s *= scale
            M[i, k] -= s * v0
            for j in range(k + 1, cend):
                M[i, j] -= s * M[k, j]
        M[k, k] = beta
        for j in range(k + 1, cend):
            M[k, j] = 0.0
        if beta < 0.0:  # flip the column's sign (another orthogonal factor) for a positive diagonal
            for i in range(k, rows):
                M[i, k] = -M[i, k]


@njit(cache=True)
def _pre_array(M: np.ndarray, A: np.ndarray, Uf: np.ndarray, UQ: np.ndarray, rows: int) -> None:
    """Fill the first ``rows`` (D, 2D or 3D) rows of the pre-array [[AUᶠ, U_Q], [Uᶠ, 0], [0, U_Q]] (U_Q lower
    triangular) and factor it."""
    D = A.shape[0]
    for i in range(D):
        for j in range(D):
            s = 0.0
            for k in range(D):
                s += A[i, k] * Uf[k, j]
            M[i, j] = s
            M[i, D + j] = UQ[i, j]
    if rows > D:
        for i in range(D):
            for j in range(D):
                M[D + i, j] = Uf[i, j]
                M[D + i, D + j] = 0.0
                M[2 * D + i, j] = 0.0
                M[2 * D + i, D + j] = UQ[i, j]
    _lq(M, rows, D, D)


@njit(cache=True)
def _filter(n, L, h, J, m0, U0, A, UQ, extra, a, af, Uf, dm0, U, Jt, JU, G, LG, r, w, M):
    """The forward pass of sequence n (module docstring): fills the predicted means a, the filtered means af and
    square roots Uf, and dm0 = a_1^f − m₀; returns (the first step whose G_t is not positive definite, or −1,
    Σ_t log ∫ N(x | a_t, U_tU_tᵀ) φ_t(x) dx, Σ_t log|G_t|)."""
    D = m0.shape[0]
    logphi = 0.0
    logdetg = 0.0
    for i in range(D):
        a[0, i] = m0[i]
        for j in range(D):
            U[i, j] = U0[i, j]
    for t in range(L):
        for i in range(D):
            for j in range(D):
                Jt[i, j] = J[n, t, i, j] + (extra[i, j] if t < L - 1 else 0.0)
        for i in range(D):
            for j in range(D):
                s = 0.0
                for k in range(D):
                    s += Jt[i, k] * U[k, j]
                JU[i, j] = s
        for i in range(D):
            for j in range(i + 1):
                s = 1.0 if i == j else 0.0
                for k in range(D):
                    s += U[k, i] * JU[k, j]
                G[i, j] = s
        ld = _cholesky(G, LG)
        if np.isnan(ld):
            return t, logphi, logdetg
        logdetg += ld
        for i in range(D):  # Uᶠ = U L_G⁻ᵀ, row by row: L_G (row i of Uᶠ)ᵀ = (row i of U)ᵀ
            for j in range(D):
                s = U[i, j]
                for k in range(j):
                    s -= LG[j, k] * Uf[t, i, k]
                Uf[t, i, j] = s / LG[j, j]
        quad = 0.0
        lin = 0.0
        for i in range(D):
            s = h[n, t, i]
            for k in range(D):
                s -= Jt[i, k] * a[t, k]
            r[i] = s
            lin += h[n, t, i] * a[t, i]
            for k in range(D):
                quad += a[t, i] * Jt[i, k] * a[t, k]
        ww = 0.0
        for j in range(D):
            s = 0.0
            for k in range(D):
                s += Uf[t, k, j] * r[k]
            w[j] = s
            ww += s * s
        for i in range(D):
            s = 0.0
            for k in range(D):
                s += Uf[t, i, k] * w[k]
            af[t, i] = a[t, i] + s
            if t == 0:
                dm0[i] = s
        logphi += lin - 0.5 * quad + 0.5 * ww - 0.5 * ld
        if t < L - 1:
            _pre_array(M, A, Uf[t], UQ, D)
            for i in range(D):
                s = 0.0
                for k in range(D):
                    s += A[i, k] * af[t, k]
                a[t + 1, i] = s
                for j in range(D):
                    U[i, j] = M[i, j]
    return -1, logphi, logdetg


@njit(cache=True)
def _lower_solve(R: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """out = R⁻¹b for the lower-triangular top-left D×D block of R and a D×K ``b``."""
    D, K = out.shape
    for c in range(K):
        for i in range(D):
            s = b[i, c]
            for k in range(i):
                s -= R[i, k] * out[k, c]
            out[i, c] = s / R[i, i]


@njit(cache=True)
def _second(S: np.ndarray, mean: np.ndarray, second: np.ndarray, n: int, t: int) -> None:
    """second[n, t] = SSᵀ + μ_tμ_tᵀ (symmetric: the lower triangle, mirrored)."""
    D = S.shape[0]
    for i in range(D):
        for j in range(i + 1):
            v = mean[n, t, i] * mean[n, t, j]
            for k in range(D):
                v += S[i, k] * S[j, k]
            second[n, t, i, j] = v
            second[n, t, j, i] = v


@njit(cache=True)
def kalman_smooth(h, J, lengths, m0, U0, A, UQ, extra):
    """Smoothed moments and residual sums of N Gaussian chains sharing their parameters (module docstring).

    Parameters
    ----------
    h, J : arrays (N, T, D) and (N, T, D, D)
        Node potentials: Σ of the other factors' η₁, and −2 Σ η₂ (their precision).
    lengths : int array (N,)
        Steps that exist per sequence (1 ≤ L_n ≤ T); later steps get zero statistics.
    m0, U0 : (D,), (D, D)
        The initial mean and a square root of the initial covariance P₀⁻¹ = U₀U₀ᵀ.
    A, UQ : (D, D)
        The transition and the lower-triangular square root of the noise covariance Q⁻¹ = U_QU_Qᵀ.
    extra : (D, D)
        A positive semi-definite precision added to every step but the last (E[AᵀQA] − ĀᵀQ̄Ā for a random A).

    Returns
    -------
    mean (N, T, D), second (N, T, D, D) = E[x_t x_tᵀ], pair (N, T, D, D) = E[x_t x_{t−1}ᵀ] (0 at t = 0),
    resid (N, 3, D, D) = (E₀, W, X): E[(x_1 − m₀)(x_1 − m₀)ᵀ], Σ_t E[η_tη_tᵀ], Σ_t E[x_tη_tᵀ] with
    η_t = x_{t+1} − A x_t; logphi (N,) = log ∫ p(x) Π_t φ_t(x_t) dx; logdetg (N,) = Σ_t log|G_t|;
    bad (2,) = (sequence, step) of the first G_t that is not positive definite, or (−1, −1).
    """
    N, T, D = h.shape
    mean = np.zeros((N, T, D))
    second = np.zeros((N, T, D, D))
    pair = np.zeros((N, T, D, D))
    resid = np.zeros((N, 3, D, D))
    logphi = np.zeros(N)
    logdetg = np.zeros(N)
    bad = np.full(2, -1, dtype=np.int64)
    a = np.zeros((T, D))
    af = np.zeros((T, D))
    Uf = np.zeros((T, D, D))
    dm0 = np.zeros(D)
    U = np.zeros((D, D))
    Jt = np.zeros((D, D))
    JU = np.zeros((D, D))
    G = np.zeros((D, D))
    LG = np.zeros((D, D))
    r = np.zeros(D)
    w = np.zeros(D)
    M = np.zeros((3 * D, 2 * D))
    S = np.zeros((D, D))
    Sh = np.zeros((D, D))
    B1 = np.zeros((D, D))
    B2 = np.zeros((D, D))
    N2 = np.zeros((D, 2 * D))
    dz = np.zeros((D, 1))
    z = np.zeros((D, 1))
    eta = np.zeros(D)
    e0 = np.zeros(D)
    for n in range(N):
        L = lengths[n]
        bt, lp, ldg = _filter(n, L, h, J, m0, U0, A, UQ, extra, a, af, Uf, dm0, U, Jt, JU, G, LG, r, w, M)
        if bt >= 0:
            if bad[0] < 0:
                bad[0] = n
                bad[1] = bt
            continue
        logphi[n] = lp
        logdetg[n] = ldg
        t = L - 1
        for i in range(D):
            mean[n, t, i] = af[t, i]
            e0[i] = dm0[i]
            for j in range(D):
                S[i, j] = Uf[t, i, j]
        for t in range(L - 2, -1, -1):
            _pre_array(M, A, Uf[t], UQ, 3 * D)
            for i in range(D):
                dz[i, 0] = mean[n, t + 1, i] - a[t + 1, i]
            _lower_solve(M, dz, z)
            _lower_solve(M, S, Sh)
            for i in range(D):
                s1 = af[t, i]
                s2 = 0.0
                for k in range(D):
                    s1 += M[D + i, k] * z[k, 0]
                    s2 += M[2 * D + i, k] * z[k, 0]
                mean[n, t, i] = s1
                eta[i] = s2
                for j in range(D):
                    b1 = 0.0
                    b2 = 0.0
                    for k in range(D):
                        b1 += M[D + i, k] * Sh[k, j]
                        b2 += M[2 * D + i, k] * Sh[k, j]
                    B1[i, j] = b1
                    B2[i, j] = b2
            if t == 0:
                for i in range(D):
                    for k in range(D):
                        e0[i] += M[D + i, k] * z[k, 0]
            for i in range(D):
                for j in range(D):
                    c = 0.0  # Cov(x_{t+1}, x_t) = S B₁ᵀ
                    xe = 0.0  # Cov(x_t, η_t) = B₁B₂ᵀ + R₂₂R₃₂ᵀ
                    for k in range(D):
                        c += S[i, k] * B1[j, k]
                        xe += B1[i, k] * B2[j, k] + M[D + i, D + k] * M[2 * D + j, D + k]
                    pair[n, t + 1, i, j] = c + mean[n, t + 1, i] * mean[n, t, j]
                    resid[n, 2, i, j] += xe + mean[n, t, i] * eta[j]
                    N2[i, j] = B1[i, j]
                    N2[i, D + j] = M[D + i, D + j]
                for j in range(i + 1):
                    we = eta[i] * eta[j]  # Cov(η_t) = B₂B₂ᵀ + R₃₂R₃₂ᵀ, plus E[η_t]E[η_t]ᵀ
                    for k in range(D):
                        we += B2[i, k] * B2[j, k] + M[2 * D + i, D + k] * M[2 * D + j, D + k]
                    resid[n, 1, i, j] += we
                    if j < i:
                        resid[n, 1, j, i] += we
            _lq(N2, D, D, 2 * D)
            _second(S, mean, second, n, t + 1)  # S is still the square root of Cov(x_{t+1})
            for i in range(D):
                for j in range(D):
                    S[i, j] = N2[i, j]
        _second(S, mean, second, n, 0)
        for i in range(D):
            for j in range(D):
                v = e0[i] * e0[j]  # E₀ = Cov(x_1) + ē₀ē₀ᵀ, the covariance from its square root (no difference)
                for k in range(D):
                    v += S[i, k] * S[j, k]
                resid[n, 0, i, j] = v
    return mean, second, pair, resid, logphi, logdetg, bad


@njit(cache=True)
def sample_chains(h, J, lengths, m0, U0, A, UQ, extra, z):
    """Joint draws by forward filtering, backward sampling: ``z`` (S, N, T, D) standard normal draws are turned
    into draws of x (S, N, T, D) (zero past each sequence's length): x_L = a_L^f + U_L^f z_L and
    x_t = a_t^f + R₂₁R₁₁⁻¹(x_{t+1} − a_{t+1}) + R₂₂z_t."""
    S_, N, T, D = z.shape
    out = np.zeros(z.shape)
    a = np.zeros((T, D))
    af = np.zeros((T, D))
    Uf = np.zeros((T, D, D))
    gain = np.zeros((T, D, D))
    cond = np.zeros((T, D, D))
    dm0 = np.zeros(D)
    U = np.zeros((D, D))
    Jt = np.zeros((D, D))
    JU = np.zeros((D, D))
    G = np.zeros((D, D))
    LG = np.zeros((D, D))
    r = np.zeros(D)
    w = np.zeros(D)
    M = np.zeros((3 * D, 2 * D))
    R21t = np.zeros((D, D))
    for n in range(N):
        L = lengths[n]
        bt, _, _ = _filter(n, L, h, J, m0, U0, A, UQ, extra, a, af, Uf, dm0, U, Jt, JU, G, LG, r, w, M)
        if bt >= 0:
            continue
        for t in range(L - 1):
            _pre_array(M, A, Uf[t], UQ, 2 * D)
            # gain = R₂₁R₁₁⁻¹: solve R₁₁ᵀ gainᵀ = R₂₁ᵀ (R₁₁ᵀ upper triangular)
            for i in range(D):
                for j in range(D):
                    R21t[i, j] = M[D + j, i]
            for c in range(D):
                for i in range(D - 1, -1, -1):
                    s = R21t[i, c]
                    for k in range(i + 1, D):
                        s -= M[k, i] * gain[t, c, k]
                    gain[t, c, i] = s / M[i, i]
                for j in range(D):
                    cond[t, c, j] = M[D + c, D + j]
        for s_ in range(S_):
            t = L - 1
            for i in range(D):
                v = af[t, i]
                for k in range(D):
                    v += Uf[t, i, k] * z[s_, n, t, k]
                out[s_, n, t, i] = v
            for t in range(L - 2, -1, -1):
                for i in range(D):
                    v = af[t, i]
                    for k in range(D):
                        v += gain[t, i, k] * (out[s_, n, t + 1, k] - a[t + 1, k]) + cond[t, i, k] * z[s_, n, t, k]
                    out[s_, n, t, i] = v
    return out


@njit(cache=True)
def forward_sample(m0, L0, A, LQ, lengths, z):
    """Ancestral draws of chains: x_1 = m₀ + L₀z_1, x_t = A x_{t−1} + L_Q z_t, one (m₀, L₀, A, L_Q) per draw
    (L₀, L_Q lower Cholesky factors of the covariances P₀⁻¹, Q⁻¹); ``z`` (S, N, T, D) standard normal; zero past
    each sequence's length."""
    S, N, T, D = z.shape
    out = np.zeros(z.shape)
    for s in range(S):
        for n in range(N):
            for t in range(lengths[n]):
                for i in range(D):
                    v = m0[s, i] if t == 0 else 0.0
                    if t > 0:
                        for k in range(D):
                            v += A[s, i, k] * out[s, n, t - 1, k]
                    for k in range(i + 1):
                        v += (L0[s, i, k] if t == 0 else LQ[s, i, k]) * z[s, n, t, k]
                    out[s, n, t, i] = v
    return out
