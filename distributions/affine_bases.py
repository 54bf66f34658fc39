r"""The univariate base families of an affine independent density (Challis & Barber 2012, docs/maths.md §9).

Each base is standardised to unit variance where a shape parameter allows, so that the covariance
A diag(Var v) Aᵀ of w = Av + b is that of A and the Gaussian is the special case named below:

=================  =========================================================  ===================
name               density of v (θ the shape parameter)                       Gaussian at
=================  =========================================================  ===================
``gaussian``       φ(v)                                                       (always)
``skew_normal``    2φ(v)Φ(θv), θ ∈ R the skewness (not centred: mean δ√(2/π))  θ = 0
``gen_normal``     β/(2sΓ(1/β)) exp(−|v/s|^β), s² = Γ(1/β)/Γ(3/β), θ = β > 0   β = 2
``student_t``      t_ν(v/c)/c, c² = (ν − 2)/ν, θ = ν > 2                       ν → ∞
``logistic``       e^{−z}/(c(1 + e^{−z})²), z = v/c, c = √3/π                  (never)
=================  =========================================================  ===================

``BASES`` holds one instance of each by name and ``get_base`` looks one up (the interface is
``distributions.affine_base_density.BaseDensity``).
"""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln, log_ndtr, polygamma, zeta

from .affine_base_density import BaseDensity

_LOG_2PI = float(np.log(2.0 * np.pi))
_SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))


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
