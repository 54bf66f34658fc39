r"""Affine independent densities (Challis & Barber 2012, docs/maths.md §9) and their univariate bases.

A D-vector w = Av + b, with A invertible and the components of v independent, v_d ~ q_v(· | θ_d):

.. math::

    q(w) = |\det A|^{-1} \prod_d q_v\big([A^{-1}(w - b)]_d \,\big|\, \theta_d\big),\qquad
    H[q] = \log|\det A| + \sum_d H[q_v(\cdot|\theta_d)].

Bases (each standardised to unit variance where a shape parameter allows, so that the covariance
A diag(Var v) Aᵀ is that of A and the Gaussian is the special case named below):

=================  =========================================================  ===================
name               density of v (θ the shape parameter)                       Gaussian at
=================  =========================================================  ===================
``gaussian``       φ(v)                                                       (always)
``skew_normal``    2φ(v)Φ(θv), θ ∈ R the skewness (not centred: mean δ√(2/π))  θ = 0
``gen_normal``     β/(2sΓ(1/β)) exp(−|v/s|^β), s² = Γ(1/β)/Γ(3/β), θ = β > 0   β = 2
``student_t``      t_ν(v/c)/c, c² = (ν − 2)/ν, θ = ν > 2                       ν → ∞
``logistic``       e^{−z}/(c(1 + e^{−z})²), z = v/c, c = √3/π                  (never)
=================  =========================================================  ===================

Site marginals by the lattice (docs/maths.md §9).  For a projection y = xᵀw = αᵀv + β (α = Aᵀx,
β = bᵀx) write y = β′ + Σ_d u_d with u_d = α_d(v_d − E v_d) and β′ = β + Σ_d α_d E v_d.  Each u_d is
discretised on the common lattice l_k = kΔ, k = −h..h, by normalised point values

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
(``GenNormalBase.cusp_correction``).  A component narrower than Δ is under-dispersed by point samples;
each component is therefore convolved with a 3-point kernel that restores its exact variance
(``variance_fix``), so that a sum of many narrow components keeps the right spread.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np
from scipy import fft as sfft
from scipy.special import digamma, gammaln, log_ndtr, polygamma, zeta

from .base import Distribution, RngLike, Shape, as_rng, as_shape, describe

_LOG_2PI = float(np.log(2.0 * np.pi))
_SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))


# ========================================================================================= bases
class BaseDensity(ABC):
    r"""A univariate base family q_v(v | θ) with at most one shape parameter θ per component.

    Every method is vectorised: ``theta`` broadcasts against ``v``.  The optimiser works with an
    unconstrained ρ (``to_free`` / ``from_free``, with dθ/dρ from ``dtheta_dfree``).
    """

    name: ClassVar[str] = ""
    n_params: ClassVar[int] = 0  # 0: no shape parameter (θ is ignored), 1: one per component
    gaussian_theta: ClassVar[float | None] = None  # θ at which the base is N(0, 1), if any
    default_theta: ClassVar[float] = 0.0  # the default of ``AffineIndependent`` (the Gaussian member if any)
    start_theta: ClassVar[float] = 0.0  # where an optimiser starts θ (see ``SkewNormalBase``)

    # --- parameter transforms ------------------------------------------------------------------
    def check(self, theta: np.ndarray) -> None:
        """Raise ValueError if θ is outside the family's parameter space (here: any θ; a family with a
        constrained shape parameter overrides this)."""
        return None

    def to_free(self, theta: np.ndarray) -> np.ndarray:
        return np.asarray(theta, dtype=float)

    def from_free(self, rho: np.ndarray) -> np.ndarray:
        return np.asarray(rho, dtype=float)

    def dtheta_dfree(self, rho: np.ndarray) -> np.ndarray:
        return np.ones_like(np.asarray(rho, dtype=float))

    #: box on the free parameter ρ for an optimiser (keeps the lattice and special functions sane)
    free_bounds: ClassVar[tuple[float | None, float | None]] = (None, None)

    # --- density -------------------------------------------------------------------------------
    @abstractmethod
    def logpdf(self, v: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """log q_v(v | θ)."""

    @abstractmethod
    def score(self, v: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """∂ log q_v(v | θ)/∂v (0 at a cusp of a symmetric base)."""

    def dlogpdf(self, v: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """∂ log q_v(v | θ)/∂θ (0 without a shape parameter)."""
        return np.zeros(np.broadcast_shapes(np.shape(v), np.shape(theta)))

    @abstractmethod
    def sample(self, theta: np.ndarray, shape: Shape, rng: np.random.Generator) -> np.ndarray:
        """Draws of v of the given shape."""

    # --- moments and entropy -------------------------------------------------------------------
    def mean(self, theta: np.ndarray) -> np.ndarray:
        return np.zeros(np.shape(theta))

    def dmean(self, theta: np.ndarray) -> np.ndarray:
        return np.zeros(np.shape(theta))

    def var(self, theta: np.ndarray) -> np.ndarray:
        return np.ones(np.shape(theta))

    def dvar(self, theta: np.ndarray) -> np.ndarray:
        return np.zeros(np.shape(theta))

    @abstractmethod
    def entropy(self, theta: np.ndarray) -> np.ndarray:
        """H[q_v(· | θ)] per component."""

    def dentropy(self, theta: np.ndarray) -> np.ndarray:
        return np.zeros(np.shape(theta))

    def half_width(self, theta: np.ndarray) -> np.ndarray:
        """A half-width (in units of v's standard deviation) outside which the mass is negligible (≲ 1e-10)."""
        return np.full(np.shape(theta), 6.5)

    def grid(self, k: np.ndarray, delta: np.ndarray, theta: np.ndarray, scores: int = 0):
        r"""log q_v at the nodes v = E v + kδ of a uniform grid, and optionally its derivatives.

        Parameters
        ----------
        k : (K,)
            Integer offsets.
        delta : (..., D)
            Signed spacings in v (δ = Δ/α for a component u = α(v − E v) on a lattice of spacing Δ).
        theta : (D,)
            Base parameters.
        scores : int
            0: log q only; 1: also ∂ log q/∂δ = k·score(v); 2: also ∂ log q(v_k)/∂θ at fixed δ (the nodes
            move with E v(θ)).

        Returns
        -------
        lq, and with ``scores`` g_delta, g_theta (None unless ``scores`` = 2), each (..., D, K).
        """
        th = np.asarray(theta, dtype=float)[:, None]
        v = self.mean(theta)[:, None] + np.asarray(delta, dtype=float)[..., None] * k
        lq = self.logpdf(v, th)
        if not scores:
            return lq
        sc = self.score(v, th)
        g_theta = self.dlogpdf(v, th) + sc * self.dmean(theta)[:, None] if scores > 1 else None
        return lq, sc * k, g_theta

    def cusp_correction(self, theta: np.ndarray, delta: np.ndarray) -> tuple[np.ndarray, ...] | None:
        """(κ, ∂κ/∂θ, ∂κ/∂log δ) of the centre-node log-weight correction for a density with a cusp at its
        mean (see ``GenNormalBase``) at v-spacings δ; None for a smooth base."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class GaussianBase(BaseDensity):
    r"""v ~ N(0, 1): log q = −v²/2 − ½ log 2π, H = ½ log 2πe (the Gaussian KL family)."""

    name = "gaussian"
    gaussian_theta = 0.0

    def logpdf(self, v, theta):
        v = np.asarray(v, dtype=float)
        return -0.5 * v * v - 0.5 * _LOG_2PI + 0.0 * np.asarray(theta)

    def score(self, v, theta):
        return -np.asarray(v, dtype=float) + 0.0 * np.asarray(theta)

    def sample(self, theta, shape, rng):
        return rng.standard_normal(shape)

    def entropy(self, theta):
        return np.full(np.shape(theta), 0.5 * (_LOG_2PI + 1.0))

    def grid(self, k, delta, theta, scores=0):
        kd = np.asarray(delta, dtype=float)[..., None] * k
        lq = -0.5 * kd * kd
        if not scores:
            return lq
        return lq, -kd * k, (np.zeros_like(lq) if scores > 1 else None)


class SkewNormalBase(BaseDensity):
    r"""Skew-normal q(v | θ) = 2φ(v)Φ(θv).

    With δ = θ/√(1 + θ²): E v = δ√(2/π), Var v = 1 − 2δ²/π, E v² = 1, so

    .. math::

        H = \tfrac12\log 2\pi + \tfrac12 - \log 2 - E_q[\log\Phi(\theta v)],\qquad
        \frac{dH}{d\theta} = -\int 2\varphi(v)\,v\,\varphi(\theta v)\,[\log\Phi(\theta v) + 1]\,dv,

    both by the trapezoid rule on v ∈ [−10, 10] (4001 nodes: exponentially accurate for |θ| ≲ 100).
    θ is unconstrained; θ = 0 is N(0, 1).  At θ = 0, ∂q/∂θ = 2φ(0)vφ(v), so by Stein's lemma a skew
    direction is to first order a shift of the mean: at a Gaussian KL optimum ∂B/∂θ = 0 and an
    optimiser must start off θ = 0 (``start_theta`` = 0.5).
    """

    name = "skew_normal"
    n_params = 1
    gaussian_theta = 0.0
    default_theta = 0.0
    start_theta = 0.5
    free_bounds = (-10.0, 10.0)  # |θ| = 10 is within 0.5% of the half-normal limit (δ = 0.995)
    _grid = np.linspace(-10.0, 10.0, 4001)

    def logpdf(self, v, theta):
        v = np.asarray(v, dtype=float)
        return np.log(2.0) - 0.5 * v * v - 0.5 * _LOG_2PI + log_ndtr(theta * v)

    def _mills(self, z):
        """φ(z)/Φ(z), stable for z → −∞."""
        return np.exp(-0.5 * z * z - 0.5 * _LOG_2PI - log_ndtr(z))

    def score(self, v, theta):
        v = np.asarray(v, dtype=float)
        return -v + theta * self._mills(theta * v)

    def dlogpdf(self, v, theta):
        v = np.asarray(v, dtype=float)
        return v * self._mills(theta * v)

    def sample(self, theta, shape, rng):
        delta = theta / np.sqrt(1.0 + theta * theta)
        z0, z1 = np.abs(rng.standard_normal(shape)), rng.standard_normal(shape)
        return delta * z0 + np.sqrt(1.0 - delta * delta) * z1

    def mean(self, theta):
        theta = np.asarray(theta, dtype=float)
        return _SQRT_2_OVER_PI * theta / np.sqrt(1.0 + theta * theta)

    def dmean(self, theta):
        theta = np.asarray(theta, dtype=float)
        return _SQRT_2_OVER_PI * (1.0 + theta * theta) ** -1.5

    def var(self, theta):
        return 1.0 - self.mean(theta) ** 2

    def dvar(self, theta):
        return -2.0 * self.mean(theta) * self.dmean(theta)

    def _integrals(self, theta):
        a = np.abs(np.asarray(theta, dtype=float))[..., None]
        v = self._grid
        dv = v[1] - v[0]
        av = a * v
        lphi = -0.5 * v * v - 0.5 * _LOG_2PI
        lcdf = log_ndtr(av)
        w = np.full(v.shape, dv)
        w[0] = w[-1] = 0.5 * dv
        e_log = (2.0 * np.exp(lphi + lcdf) * lcdf) @ w
        de = (2.0 * np.exp(lphi) * v * np.exp(-0.5 * av * av - 0.5 * _LOG_2PI) * (lcdf + 1.0)) @ w
        return e_log, de

    def entropy(self, theta):
        e_log, _ = self._integrals(theta)
        return 0.5 * _LOG_2PI + 0.5 - np.log(2.0) - e_log

    def dentropy(self, theta):
        _, de = self._integrals(theta)
        return -de * np.sign(theta)

    def half_width(self, theta):
        # the long tail is that of 2φ(v) whatever θ: reach 6.5 beyond 0, in units of sd(v)
        return (np.abs(self.mean(theta)) + 6.5) / np.sqrt(self.var(theta))


class GenNormalBase(BaseDensity):
    r"""Generalised normal with shape β = θ > 0, standardised to unit variance:

    .. math::

        \log q = \log\beta - \log 2 - \log s - \log\Gamma(1/\beta) - |v/s|^\beta,\quad
        s^2 = \Gamma(1/\beta)/\Gamma(3/\beta),\quad
        H = 1/\beta + \log 2 + \log s + \log\Gamma(1/\beta) - \log\beta.

    β = 2 is N(0, 1), β = 1 the Laplace, β → ∞ the uniform.  Free parameter ρ = log β.
    """

    name = "gen_normal"
    n_params = 1
    gaussian_theta = 2.0
    default_theta = 2.0
    start_theta = 2.0
    free_bounds = (float(np.log(0.3)), float(np.log(50.0)))

    def check(self, theta):
        if np.any(~(np.asarray(theta) > 0)):
            raise ValueError(f"gen_normal: the shape β must be positive, got {theta!r}")

    def to_free(self, theta):
        return np.log(theta)

    def from_free(self, rho):
        return np.exp(rho)

    def dtheta_dfree(self, rho):
        return np.exp(rho)

    @staticmethod
    def _log_s(beta):
        return 0.5 * (gammaln(1.0 / beta) - gammaln(3.0 / beta))

    @staticmethod
    def _dlog_s(beta):
        return 0.5 * (3.0 * digamma(3.0 / beta) - digamma(1.0 / beta)) / (beta * beta)

    def logpdf(self, v, beta):
        beta = np.asarray(beta, dtype=float)
        ls = self._log_s(beta)
        r = np.abs(np.asarray(v, dtype=float)) * np.exp(-ls)
        return np.log(beta) - np.log(2.0) - ls - gammaln(1.0 / beta) - r**beta

    def score(self, v, beta):
        v = np.asarray(v, dtype=float)
        beta = np.asarray(beta, dtype=float)
        s = np.exp(self._log_s(beta))
        r = np.abs(v) / s
        with np.errstate(divide="ignore", invalid="ignore"):
            out = -beta * r ** (beta - 1.0) * np.sign(v) / s
        return np.where(v == 0.0, 0.0, out)

    def dlogpdf(self, v, beta):
        beta = np.asarray(beta, dtype=float)
        ls, dls = self._log_s(beta), self._dlog_s(beta)
        r = np.abs(np.asarray(v, dtype=float)) * np.exp(-ls)
        with np.errstate(divide="ignore", invalid="ignore"):
            tail = np.where(r > 0.0, r**beta * (np.log(np.where(r > 0, r, 1.0)) - beta * dls), 0.0)
        return 1.0 / beta - dls + digamma(1.0 / beta) / (beta * beta) - tail

    def sample(self, theta, shape, rng):
        beta = np.broadcast_to(np.asarray(theta, dtype=float), shape)
        g = rng.gamma(1.0 / beta)
        sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
        return sign * np.exp(self._log_s(beta)) * g ** (1.0 / beta)

    def entropy(self, beta):
        beta = np.asarray(beta, dtype=float)
        return 1.0 / beta + np.log(2.0) + self._log_s(beta) + gammaln(1.0 / beta) - np.log(beta)

    def dentropy(self, beta):
        beta = np.asarray(beta, dtype=float)
        return -1.0 / beta**2 + self._dlog_s(beta) - digamma(1.0 / beta) / beta**2 - 1.0 / beta

    def half_width(self, beta):
        beta = np.asarray(beta, dtype=float)
        return np.clip(np.exp(self._log_s(beta)) * 30.0 ** (1.0 / beta), 6.5, 25.0)

    def grid(self, k, delta, beta, scores=0):
        r"""Fused evaluation on v = kδ (E v = 0): with log r = log|k| + log|δ| − log s and p = r^β (one
        exponential per node), log q = c − p, ∂/∂δ = −βp/δ, ∂/∂β = c′ − p(log r − β ∂log s/∂β)."""
        beta = np.asarray(beta, dtype=float)
        delta = np.asarray(delta, dtype=float)
        ls = self._log_s(beta)
        k = np.asarray(k, dtype=float)
        nz = k != 0
        logk = np.log(np.where(nz, np.abs(k), 1.0))
        logr = logk + (np.log(np.abs(delta)) - ls)[..., None]
        p = np.where(nz, np.exp(beta[:, None] * logr), 0.0)
        lq = (np.log(beta) - np.log(2.0) - ls - gammaln(1.0 / beta))[:, None] - p
        if not scores:
            return lq
        g_delta = -beta[:, None] * p / delta[..., None]
        if scores < 2:
            return lq, g_delta, None
        dls = self._dlog_s(beta)
        c1 = 1.0 / beta - dls + digamma(1.0 / beta) / (beta * beta)
        return lq, g_delta, c1[:, None] - p * (logr - (beta * dls)[:, None])

    def cusp_correction(self, beta, delta):
        r"""Centre-node correction of the trapezoid rule for the cusp |v/s|^β at v = 0.

        Near 0, q(v) = q(0)(1 − |v/s|^β + …); by Navot's extension of the Euler–Maclaurin formula the
        trapezoid sum δΣ_k q(kδ)h(kδ) exceeds ∫qh by −2ζ(−β)q(0)h(0)s^{−β}δ^{β+1} + O(δ^{2β+1}), so the
        centre weight is multiplied by e^κ with κ = 2ζ(−β)r^β, r = δ/s (= 0 for β = 2, 4, …).  The expansion
        holds for a resolved component only: the correction is faded out as κ = 2ζ(−β)r^β e^{−r⁴} (r ≤ 0.3
        keeps > 99% of it; an unresolved component, r ≳ 1, is left a plain point-sampled pmf).

        Returns κ, ∂κ/∂β at fixed δ, and ∂κ/∂log δ.
        """
        beta = np.asarray(beta, dtype=float)
        ls, dls = self._log_s(beta), self._dlog_s(beta)
        z = zeta(-beta)
        dz = (zeta(-beta + 1e-5) - zeta(-beta - 1e-5)) / 2e-5  # d/dx ζ(x) at x = −β
        logr = np.log(np.maximum(delta, 1e-300)) - ls
        r4 = np.exp(4.0 * logr)
        p = np.exp(beta * logr - r4)
        kappa = 2.0 * z * p
        dkappa_dbeta = -2.0 * dz * p + kappa * (logr - beta * dls + 4.0 * r4 * dls)
        return kappa, dkappa_dbeta, kappa * (beta - 4.0 * r4)


class StudentTBase(BaseDensity):
    r"""Student-t with ν = θ > 2 degrees of freedom, standardised to unit variance (scale
    c = √((ν − 2)/ν)):

    .. math::

        \log q = \log\Gamma(\tfrac{\nu+1}2) - \log\Gamma(\tfrac\nu2) - \tfrac12\log\pi(\nu-2)
                 - \tfrac{\nu+1}2\log\big(1 + \tfrac{v^2}{\nu-2}\big),\\
        H = \tfrac{\nu+1}2\big[\psi(\tfrac{\nu+1}2) - \psi(\tfrac\nu2)\big] + \tfrac12\log(\nu-2)
            + \log B(\tfrac\nu2, \tfrac12).

    ν → ∞ is N(0, 1).  Free parameter ρ = log(ν − 2).  The tails are polynomial: the lattice
    truncates them at 20 standard deviations (mass ≈ 20^(−ν) is lost).
    """

    name = "student_t"
    n_params = 1
    default_theta = 30.0
    start_theta = 30.0
    free_bounds = (float(np.log(0.05)), float(np.log(1e4)))

    def check(self, theta):
        if np.any(~(np.asarray(theta) > 2)):
            raise ValueError(f"student_t: the degrees of freedom must exceed 2 (finite variance), got {theta!r}")

    def to_free(self, theta):
        return np.log(np.asarray(theta, dtype=float) - 2.0)

    def from_free(self, rho):
        return 2.0 + np.exp(rho)

    def dtheta_dfree(self, rho):
        return np.exp(rho)

    def logpdf(self, v, nu):
        nu = np.asarray(nu, dtype=float)
        v = np.asarray(v, dtype=float)
        return (gammaln(0.5 * (nu + 1)) - gammaln(0.5 * nu) - 0.5 * np.log(np.pi * (nu - 2))
                - 0.5 * (nu + 1) * np.log1p(v * v / (nu - 2)))

    def score(self, v, nu):
        v = np.asarray(v, dtype=float)
        return -(nu + 1) * v / (nu - 2 + v * v)

    def dlogpdf(self, v, nu):
        nu = np.asarray(nu, dtype=float)
        v2 = np.asarray(v, dtype=float) ** 2
        return (0.5 * digamma(0.5 * (nu + 1)) - 0.5 * digamma(0.5 * nu) - 0.5 / (nu - 2)
                - 0.5 * np.log1p(v2 / (nu - 2)) + 0.5 * (nu + 1) * v2 / ((nu - 2) * (nu - 2 + v2)))

    def sample(self, theta, shape, rng):
        nu = np.broadcast_to(np.asarray(theta, dtype=float), shape)
        return np.sqrt((nu - 2) / nu) * rng.standard_t(nu)

    def entropy(self, nu):
        nu = np.asarray(nu, dtype=float)
        lbeta = gammaln(0.5 * nu) + gammaln(0.5) - gammaln(0.5 * (nu + 1))
        return 0.5 * (nu + 1) * (digamma(0.5 * (nu + 1)) - digamma(0.5 * nu)) + 0.5 * np.log(nu - 2) + lbeta

    def dentropy(self, nu):
        nu = np.asarray(nu, dtype=float)
        return 0.25 * (nu + 1) * (polygamma(1, 0.5 * (nu + 1)) - polygamma(1, 0.5 * nu)) + 0.5 / (nu - 2)

    def half_width(self, theta):
        return np.full(np.shape(theta), 20.0)


class LogisticBase(BaseDensity):
    r"""Logistic, standardised to unit variance (scale c = √3/π, no shape parameter):
    log q = −|z| − 2 log(1 + e^{−|z|}) − log c, z = v/c;  H = 2 + log c."""

    name = "logistic"
    _c = float(np.sqrt(3.0) / np.pi)

    def logpdf(self, v, theta):
        z = np.abs(np.asarray(v, dtype=float)) / self._c
        return -z - 2.0 * np.log1p(np.exp(-z)) - np.log(self._c) + 0.0 * np.asarray(theta)

    def score(self, v, theta):
        return -np.tanh(0.5 * np.asarray(v, dtype=float) / self._c) / self._c + 0.0 * np.asarray(theta)

    def sample(self, theta, shape, rng):
        return rng.logistic(0.0, self._c, shape)

    def entropy(self, theta):
        return np.full(np.shape(theta), 2.0 + np.log(self._c))

    def half_width(self, theta):
        return np.full(np.shape(theta), 12.5)


BASES: dict[str, BaseDensity] = {b.name: b for b in (GaussianBase(), SkewNormalBase(), GenNormalBase(),
                                                      StudentTBase(), LogisticBase())}


def get_base(base: str | BaseDensity) -> BaseDensity:
    """The base family by name (``gaussian``, ``skew_normal``, ``gen_normal``, ``student_t``,
    ``logistic``) or an instance."""
    if isinstance(base, BaseDensity):
        return base
    if base not in BASES:
        raise ValueError(f"unknown base {base!r}; choose one of {sorted(BASES)}")
    return BASES[base]


# ========================================================================================= lattice
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


# ========================================================================================= q(w)
class AffineIndependent(Distribution):
    r"""w = Av + b with independent v_d ~ q_v(· | θ_d) (Challis & Barber 2012).

    .. math::

        \log q(w) = -\log|\det A| + \sum_d \log q_v([A^{-1}(w-b)]_d | \theta_d),\qquad
        E[w] = A\,E[v] + b,\quad \mathrm{Cov}[w] = A\,\mathrm{diag}(\mathrm{Var}\,v)A^\top,\\
        H[q] = \log|\det A| + \sum_d H[q_v(\cdot|\theta_d)].

    Parameters
    ----------
    A : (D, D) array
        Invertible mixing matrix.
    b : (D,) array
        Offset.
    base : str or BaseDensity
        ``"gaussian"``, ``"skew_normal"``, ``"gen_normal"``, ``"student_t"`` or ``"logistic"``.
    theta : array_like, optional
        Shape parameter per component (a scalar broadcasts); default the base's (Gaussian) default.

    Notes
    -----
    Not an exponential family: ``expected_stats()`` returns (E[w], E[wwᵀ]) for the engine, and the
    entropy is exact (closed form, or a 1-D quadrature for the skew-normal base).  Single (unbatched)
    distribution: ``batch_shape`` is ().
    """

    __slots__ = ("_A", "_b", "_base", "_theta")

    def __init__(self, A, b, base: str | BaseDensity = "gaussian", theta=None) -> None:
        A = np.asarray(A, dtype=float)
        b = np.asarray(b, dtype=float)
        if A.ndim != 2 or A.shape[0] != A.shape[1]:
            raise ValueError(f"AffineIndependent: A must be a square matrix, got shape {A.shape}")
        D = A.shape[0]
        if b.shape != (D,):
            raise ValueError(f"AffineIndependent: b must have shape ({D},), got {b.shape}")
        if not (np.all(np.isfinite(A)) and np.all(np.isfinite(b))):
            raise ValueError("AffineIndependent: A and b must be finite")
        sign, logdet = np.linalg.slogdet(A)
        if sign == 0 or not np.isfinite(logdet):
            raise ValueError("AffineIndependent: A must be invertible")
        self._base = get_base(base)
        th = np.full(D, self._base.default_theta) if theta is None else np.broadcast_to(
            np.asarray(theta, dtype=float), (D,)).copy()
        self._base.check(th)
        self._A, self._b, self._theta = A, b, th

    # ------------------------------------------------------------------------------ parameters
    @property
    def A(self) -> np.ndarray:
        return self._A

    @property
    def b(self) -> np.ndarray:
        return self._b

    @property
    def base(self) -> BaseDensity:
        return self._base

    @property
    def theta(self) -> np.ndarray:
        return self._theta

    @property
    def dim(self) -> int:
        return self._A.shape[0]

    @property
    def batch_shape(self) -> Shape:
        return ()

    @property
    def event_shape(self) -> Shape:
        return (self.dim,)

    # ------------------------------------------------------------------------------ moments
    def base_mean(self) -> np.ndarray:
        """E[v_d]."""
        return self._base.mean(self._theta)

    def base_var(self) -> np.ndarray:
        """Var[v_d]."""
        return self._base.var(self._theta)

    def mean(self) -> np.ndarray:
        """E[w] = A E[v] + b."""
        return self._A @ self.base_mean() + self._b

    def cov(self) -> np.ndarray:
        """Cov[w] = A diag(Var v) Aᵀ."""
        return (self._A * self.base_var()) @ self._A.T

    def var(self) -> np.ndarray:
        return np.diag(self.cov()).copy()

    def expected_stats(self) -> tuple[np.ndarray, np.ndarray]:
        """(E[w], E[wwᵀ]) — what the engine passes to the rest of the graph."""
        m = self.mean()
        return m, self.cov() + np.outer(m, m)

    def entropy(self) -> float:
        """H[q] = log|det A| + Σ_d H[q_v(·|θ_d)] (exact)."""
        return float(np.linalg.slogdet(self._A)[1] + self._base.entropy(self._theta).sum())

    # ------------------------------------------------------------------------------ density
    def logpdf(self, x) -> np.ndarray:
        """log q(w) for w of shape (..., D)."""
        x = np.asarray(x, dtype=float)
        v = np.linalg.solve(self._A, (x - self._b).reshape(-1, self.dim).T).T
        lq = self._base.logpdf(v, self._theta).sum(-1) - np.linalg.slogdet(self._A)[1]
        return lq.reshape(x.shape[:-1])

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Draws w = Av + b of shape ``shape + (D,)``."""
        shape = as_shape(shape)
        rng = as_rng(rng)
        v = self._base.sample(self._theta, shape + (self.dim,), rng)
        return v @ self._A.T + self._b

    def to_gaussian(self):
        """The Gaussian with the same mean and covariance."""
        from .mv_gaussian import MvGaussian

        return MvGaussian(mean=self.mean(), cov=self.cov())

    # ------------------------------------------------------------------------------ projections
    def projection_lattice(self, X, n_lattice: int = 256, pad: int | None = 2,
                           chunk: int = 4_000_000) -> tuple[np.ndarray, np.ndarray]:
        r"""Lattice marginals of the projections y_n = x_nᵀw (docs/maths.md §9).

        Parameters
        ----------
        X : (N, D)
            Projection vectors.
        n_lattice : int
            K = 2h: lattice intervals across each component's span ±W·σ_y (W from the base's tails).
        pad : int or None
            FFT length M = pad·K (circular), or None for the exact linear convolution (M ≥ D·K + 1).

        Returns
        -------
        y : (N, M)
            Lattice points β′_n + o_jΔ_n.
        pmf : (N, M)
            Their probabilities ρ_nj (Σ_j ρ_nj = 1).
        """
        X = np.atleast_2d(np.asarray(X, dtype=float))
        alpha = X @ self._A
        beta = X @ self.mean()
        half = n_lattice // 2
        step = lattice_step(self._base, alpha, self._theta, half)
        M = fft_length(self.dim, half, pad)
        n_chunk = max(1, chunk // (self.dim * M))
        var = alpha**2 * self.base_var()
        parts = []
        for i in range(0, len(X), n_chunk):
            sl = slice(i, i + n_chunk)
            pi = component_lattice(self._base, alpha[sl], self._theta, step[sl], half)
            parts.append(convolve(pi, M, variance_fix(pi, step[sl], var[sl])[0]))
        rho = np.concatenate(parts)
        return beta[:, None] + step[:, None] * offsets(M), rho

    def __repr__(self) -> str:
        return describe(self, ("base", "A", "b", "theta"))


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
