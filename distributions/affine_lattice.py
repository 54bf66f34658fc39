r"""Site marginals of an affine independent density by the lattice (Challis & Barber 2012, docs/maths.md §9).

For a projection y = xᵀw = αᵀv + β (α = Aᵀx, β = bᵀx) write y = β′ + Σ_d u_d with
u_d = α_d(v_d − E v_d) and β′ = β + Σ_d α_d E v_d.  Each u_d is discretised on the common lattice
l_k = kΔ, k = −h..h, by normalised point values

.. math::

    \pi_{dk} = q_v(l_k/\alpha_d + E v_d) \Big/ \sum_j q_v(l_j/\alpha_d + E v_d),

(the trapezoid rule, exponentially accurate for a smooth base once Δ resolves α_d·sd(v_d); a
component narrower than the lattice collapses gracefully to a point mass), and the pmf of y − β′ is
the convolution ρ = irfft(Π_d rfft(π_d)) on an M-point circular lattice (M ≥ D·2h + 1 for the exact
linear convolution of the paper; M = 4h by default, which aliases only mass beyond ±2hΔ, i.e.
beyond twice the component half-span, which is negligible at the spans used here).  Centring each
component on its mean puts the mode of a symmetric base on the central node (the paper's footnote 5)
and makes a vanishing α_d harmless.  The generalised normal's cusp |v|^β at that node would limit the
trapezoid rule to O(Δ^{β+1}); its leading error term is removed by a centre-node weight e^κ
(``affine_bases.GenNormalBase.cusp_correction``).  A component narrower than Δ is under-dispersed by
point samples; each component is therefore convolved with a 3-point kernel that restores its exact
variance (``variance_fix``), so that a sum of many narrow components keeps the right spread.
"""

from __future__ import annotations

import numpy as np
from scipy import fft as sfft

from .affine_base_density import BaseDensity


def component_lattice(base: BaseDensity, alpha: np.ndarray, theta: np.ndarray, step: np.ndarray, half: int,
                      scores: int = 0):
    r"""Normalised point-sampled pmfs of u_d = α_d(v_d − E v_d) on l_k = kΔ, k = −h..h.

    Parameters
    ----------
    alpha : (..., D)
        Projection coefficients α = Aᵀx per site.
    theta : (D,)
        Base parameters.
    step : (...,)
        Lattice spacing Δ per site.
    half : int
        h; the lattice has 2h + 1 points.
    scores : int
        1: also return ∂ log q_v(v_k)/∂α_d; 2: and ∂ log q_v(v_k)/∂θ_d (v_k = l_k/α_d + E v_d), for the
        gradient ∂π_k/∂φ = π_k(s_k − Σ_j π_j s_j).

    Returns
    -------
    pi : (..., D, 2h + 1)
    s_alpha, s_theta : (..., D, 2h + 1), only with ``scores`` (``s_theta`` None unless ``scores`` = 2)
        A component with |α_d| below 1e-9Δ is a point mass at 0 with zero scores.
    """
    alpha = np.asarray(alpha, dtype=float)
    step = np.asarray(step, dtype=float)
    k = np.arange(-half, half + 1, dtype=float)
    tiny = np.abs(alpha) < 1e-9 * step[..., None]
    a = np.where(tiny, 1.0, alpha)
    delta = step[..., None] / a  # signed spacing in v
    out = base.grid(k, delta, theta, scores)
    lq = out[0] if scores else out
    cusp = base.cusp_correction(np.asarray(theta, dtype=float), np.abs(delta))
    if cusp is not None:
        lq[..., half] += cusp[0]
    lq = lq - lq.max(axis=-1, keepdims=True)
    pi = np.exp(lq)
    pi /= pi.sum(axis=-1, keepdims=True)
    point = np.zeros(2 * half + 1)
    point[half] = 1.0
    pi = np.where(tiny[..., None], point, pi)
    if not scores:
        return pi
    _, g_delta, g_theta = out
    s_alpha = g_delta * (-delta / a)[..., None]  # δ = Δ/α: ∂δ/∂α = −δ/α
    if cusp is not None:  # δ = Δ/α: ∂κ/∂α = −(∂κ/∂log δ)/α
        s_alpha[..., half] += -cusp[2] / a
        if g_theta is not None:
            g_theta[..., half] += cusp[1]
    s_alpha = np.where(tiny[..., None], 0.0, s_alpha)
    if g_theta is not None:
        g_theta = np.where(tiny[..., None], 0.0, g_theta)
    return pi, s_alpha, g_theta


def embed(pi: np.ndarray, M: int) -> np.ndarray:
    """Place pmfs on k = −h..h (last axis) into a circular array of length M (index k mod M)."""
    half = (pi.shape[-1] - 1) // 2
    out = np.zeros(pi.shape[:-1] + (M,))
    out[..., : half + 1] = pi[..., half:]
    out[..., M - half:] = pi[..., :half]
    return out


def offsets(M: int) -> np.ndarray:
    """Lattice offsets of the circular sum lattice: 0, 1, …, M/2 − 1, −M/2, …, −1."""
    j = np.arange(M)
    return np.where(j < M // 2, j, j - M).astype(float)


def fft_length(n_comp: int, half: int, pad: int | None) -> int:
    """M: ``pad``·2h (circular, default 2), or the exact linear length ≥ n_comp·2h + 1 when None,
    rounded up to a fast FFT size."""
    need = n_comp * 2 * half + 1 if pad is None else max(int(pad) * 2 * half, 2 * half + 1)
    return int(sfft.next_fast_len(need, real=True))


def variance_fix(pi: np.ndarray, step: np.ndarray, var_true: np.ndarray) -> tuple[np.ndarray, ...]:
    r"""Weight p of the 3-point kernel (p/2, 1 − p, p/2) that restores each component's exact variance.

    A component narrower than the lattice spacing is under-dispersed by its normalised point samples (at
    sd = Δ/2 the lattice variance is 0.21Δ² instead of 0.25Δ²; the deficit never exceeds ≈ 0.09Δ²), and in a
    sum of many such components the deficits add up.  Convolving the component with the kernel adds exactly
    pΔ² to its variance and keeps its mean and mass, so p = (V_true − V_lat)/Δ², clipped to [0, 1]
    (≈ 0 for a resolved component).  In Fourier space the kernel is 1 − p(1 − cos ω).

    Returns p (..., D), the lattice moments μ = Σπl, m₂ = Σπl² and the mask where 0 < p < 1.
    """
    half = (pi.shape[-1] - 1) // 2
    lk = np.asarray(step, dtype=float)[..., None, None] * np.arange(-half, half + 1)
    mu = (pi * lk).sum(-1)
    m2 = (pi * lk * lk).sum(-1)
    raw = (var_true - (m2 - mu * mu)) / np.asarray(step, dtype=float)[..., None] ** 2
    return np.clip(raw, 0.0, 1.0), mu, m2, (raw > 0.0) & (raw < 1.0)


def kernel_ft(p: np.ndarray, M: int) -> np.ndarray:
    """rfft of the 3-point kernel (p/2, 1 − p, p/2) on the M-lattice: 1 − p(1 − cos 2πj/M)."""
    w = 1.0 - np.cos(2.0 * np.pi * np.arange(M // 2 + 1) / M)
    return 1.0 - p[..., None] * w


def convolve(pi: np.ndarray, M: int, p: np.ndarray | None = None) -> np.ndarray:
    """pmf of the sum of the independent components (axis −2) on the circular M-lattice, each component
    first convolved with its variance-restoring kernel of weight ``p`` (``variance_fix``) if given."""
    F = sfft.rfft(embed(pi, M), axis=-1)
    if p is not None:
        F = F * kernel_ft(p, M)
    return sfft.irfft(F.prod(axis=-2), M, axis=-1)


def component_support(base: BaseDensity, alpha: np.ndarray, theta: np.ndarray, step: np.ndarray, half: int,
                      margin: float = 1.5) -> np.ndarray:
    r"""Per site, the number of lattice steps a component needs: ⌈margin·max_d W(θ_d)|α_nd|sd(v_d)/Δ_n⌉ ≤ h.

    In a sum of many comparable components each one spans a fraction of the sum's lattice, so its pmf
    is evaluated on k = −h′..h′ only (the margin leaves room for α to grow while a lattice is frozen)."""
    sd = np.sqrt(base.var(theta))
    need = (np.abs(alpha) * sd * base.half_width(theta)).max(-1, initial=0.0) / np.asarray(step, dtype=float)
    return np.minimum(half, np.ceil(margin * need).astype(int) + 1)


def lattice_step(base: BaseDensity, alpha: np.ndarray, theta: np.ndarray, half: int) -> np.ndarray:
    r"""Δ_n = H_n/h with the half-span H_n = max(6.5σ_y, max_d W(θ_d)|α_nd|sd(v_d)), σ_y² = Σ_d α_nd² Var v_d."""
    sd = np.sqrt(base.var(theta))
    sig_y = np.sqrt(((alpha * sd) ** 2).sum(-1))
    span = np.maximum(6.5 * sig_y, (np.abs(alpha) * sd * base.half_width(theta)).max(-1, initial=0.0))
    return np.where(span > 0, span, 1.0) / half
