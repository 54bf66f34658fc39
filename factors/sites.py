"""Site potentials f(y − μ) on a Gaussian projection y (docs/maths.md §6): Laplace, Cauchy, Student-t, probit.

With q(y) = N(m, v), S = E[log f] and the NCVMP message to y is the gradient of S in y's mean
parameters: η₂ = ∂S/∂v, η₁ = ∂S/∂m − 2m∂S/∂v.  The edge ``out`` carries the observed location μ
(an observation, or 0 for a sparsity prior); the Gaussian edge is ``x``.

* Laplace f = (2τ)⁻¹exp(−|y − μ|/τ), in closed form with δ = m − μ, σ = √v:
  E|y − μ| = 2σφ(δ/σ) + δ(2Φ(δ/σ) − 1), ∂/∂m = 2Φ(δ/σ) − 1, ∂/∂v = φ(δ/σ)/σ.  Always proper.
* Cauchy (scale γ) and Student-t (scale s, ν degrees of freedom) by a sinh-substitution trapezoid
  rule that resolves both the site's peak and q at any ratio of their widths; the probit
  (f = Φ(t·y), the label t = ±1 observed on ``out``) by Gauss–Hermite (64 nodes), with the
  derivatives of the quadrature sum itself.
* Cauchy and Student-t are not log-concave: ∂S/∂v can be positive, which would make the message's
  precision negative.  Such a message is clipped to zero precision (a flat message in x's second
  moment, its gradient in the mean kept); the factor counts the clipped messages in its state and
  the result says so.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln, log_ndtr, ndtr

from distributions import Gaussian

from .base import FactorType, Moments
from .is_positive import ep_site_rule
from .kernels import normal_rule
from .kernels.ep_sites import SITE_STEP
from .logistic import gradient_message

LAPLACE_SITE = FactorType("LaplaceSite", conjugate=False, out=Gaussian, x=Gaussian)
CAUCHY_SITE = FactorType("CauchySite", conjugate=False, out=Gaussian, x=Gaussian)
STUDENT_T_SITE = FactorType("StudentTSite", conjugate=False, out=Gaussian, x=Gaussian)
PROBIT = FactorType("Probit", conjugate=False, out=Gaussian, x=Gaussian)

_Z, _W = normal_rule(64)
_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


def _delta(m: Moments) -> tuple[np.ndarray, np.ndarray]:
    ex, ex2 = m["x"]
    return ex - m["out"][0], np.maximum(ex2 - ex * ex, 1e-300)


def _message(m: Moments, dS_dm: np.ndarray, dS_dv: np.ndarray, p: dict) -> tuple:
    bad = dS_dv > 0.0
    if np.any(bad):
        p["state"]["clipped"] = p["state"].get("clipped", 0) + int(np.count_nonzero(bad))
        dS_dv = np.where(bad, 0.0, dS_dv)
    return gradient_message(m["x"][0], dS_dm, dS_dv)


# ------------------------------------------------------------------------------------ Laplace
def _laplace(m: Moments, p: dict):
    d, v = _delta(m)
    s = np.sqrt(v)
    z = d / s
    pdf = np.exp(-0.5 * z * z - _LOG_SQRT_2PI)
    cdf2 = 2.0 * ndtr(z) - 1.0
    tau = p["scale"]
    value = -np.log(2.0 * tau) - (2.0 * s * pdf + d * cdf2) / tau
    return value, -cdf2 / tau, -pdf / (s * tau)


@LAPLACE_SITE.rule("x", "ncvmp")
def laplace_to_x(m: Moments, p: dict) -> tuple:
    _, dm, dv = _laplace(m, p)
    return _message(m, dm, dv, p)


@LAPLACE_SITE.evidence(kind="exact")
def laplace_evidence(m: Moments, p: dict) -> np.ndarray:
    return _laplace(m, p)[0]


# ------------------------------------------------------------------------------------ quadrature sites
def _quadrature(m: Moments, p: dict, g):
    """Σ w g, and its exact derivatives in (m, v): Σ w g′ and Σ w g′ z / (2√v).

    ``g(u, p, t)`` gets the points and the probit's sign t (observed on ``out``)."""
    ex, ex2 = m["x"]
    d, v, t = ex, np.maximum(ex2 - ex * ex, 1e-300), m["out"][0][..., None]
    s = np.sqrt(v)[..., None]
    u = d[..., None] + s * _Z
    val, der = g(u, p, t)
    return val @ _W, der @ _W, (der * _Z) @ _W / (2.0 * s[..., 0])


_N_SINH = 200  # trapezoid nodes in s; the integrand is analytic, so the error falls exponentially


def _heavy_tailed(m: Moments, p: dict, g):
    """E[g(y − μ)], E[g′], ½E[g″] for a site peaked at μ with width ``scale`` and heavy tails.

    Gauss–Hermite misses the peak once √v ≫ scale, so substitute y − μ = scale·sinh(s), which spreads
    the peak and compresses the tails, and apply the trapezoid rule in s over ±12 standard deviations
    of q (exponentially accurate for these analytic integrands at any ratio √v/scale).
    """
    d, v = _delta(m)
    sd = np.sqrt(v)
    sc = p["scale"]
    lo = np.arcsinh((d - 12.0 * sd) / sc)[..., None]
    hi = np.arcsinh((d + 12.0 * sd) / sc)[..., None]
    frac = np.linspace(0.0, 1.0, _N_SINH)
    sgrid = lo + (hi - lo) * frac
    u = sc * np.sinh(sgrid)  # y − μ at the nodes
    dens = np.exp(-0.5 * ((u - d[..., None]) / sd[..., None]) ** 2 - _LOG_SQRT_2PI) / sd[..., None]
    wts = dens * sc * np.cosh(sgrid) * (hi - lo) / (_N_SINH - 1)
    wts[..., 0] *= 0.5
    wts[..., -1] *= 0.5
    val, der, der2 = g(u, p)
    return (val * wts).sum(-1), (der * wts).sum(-1), 0.5 * (der2 * wts).sum(-1)


def _cauchy(u: np.ndarray, p: dict):
    """log f, (log f)′, (log f)″ of the Cauchy density with scale γ."""
    gam = p["scale"]
    r = u / gam
    q = 1.0 + r * r
    return -np.log(np.pi * gam) - np.log1p(r * r), -2.0 * r / (gam * q), -2.0 * (1.0 - r * r) / (gam * gam * q * q)


def _student(u: np.ndarray, p: dict):
    """log f, (log f)′, (log f)″ of the Student-t density with ν degrees of freedom and scale s."""
    nu, sc = p["dof"], p["scale"]
    r = u / sc
    q = nu + r * r
    c = gammaln((nu + 1) / 2) - gammaln(nu / 2) - 0.5 * np.log(nu * np.pi * sc * sc)
    return (c - 0.5 * (nu + 1) * np.log1p(r * r / nu), -(nu + 1) * r / (sc * q),
            -(nu + 1) * (nu - r * r) / (sc * sc * q * q))


def _probit(u: np.ndarray, p: dict, t: np.ndarray):
    tu = t * u
    lg = log_ndtr(tu)  # f = Φ(t·y), t = ±1
    return lg, t * np.exp(-0.5 * tu * tu - _LOG_SQRT_2PI - lg)


def _register(ftype: FactorType, expectation, g) -> None:
    def to_x(m: Moments, p: dict) -> tuple:
        _, dm, dv = expectation(m, p, g)
        return _message(m, dm, dv, p)

    def evidence(m: Moments, p: dict) -> np.ndarray:
        return expectation(m, p, g)[0]

    ftype.rule("x", "ncvmp")(to_x)
    ftype.evidence(kind="exact")(evidence)


_register(CAUCHY_SITE, _heavy_tailed, _cauchy)
_register(STUDENT_T_SITE, _heavy_tailed, _student)
_register(PROBIT, _quadrature, _probit)


@LAPLACE_SITE.point("x")
def laplace_point(u: np.ndarray, m: Moments, p: dict, order: int = 2) -> tuple:
    """log f, its derivative, and 0 for the second derivative (the kink at the location has none)."""
    tau, d = p["scale"], u - m["out"][0]
    return -np.log(2.0 * tau) - np.abs(d) / tau, -np.sign(d) / tau, np.zeros_like(d)


@CAUCHY_SITE.point("x")
def cauchy_point(u: np.ndarray, m: Moments, p: dict, order: int = 2) -> tuple:
    return _cauchy(u - m["out"][0], p)


@STUDENT_T_SITE.point("x")
def student_point(u: np.ndarray, m: Moments, p: dict, order: int = 2) -> tuple:
    return _student(u - m["out"][0], p)


@PROBIT.point("x")
def probit_point(u: np.ndarray, m: Moments, p: dict, order: int = 2) -> tuple:
    t = m["out"][0]
    tu = t * u
    lg = log_ndtr(tu)
    d1 = t * np.exp(-0.5 * tu * tu - _LOG_SQRT_2PI - lg)
    return lg, d1, -d1 * (tu * t + d1)  # d/du [t φ(tu)/Φ(tu)] = −t²·tu·r − r², r = (log f)′


def _probit_ep_site(m: Moments, p: dict) -> tuple:
    """EP: Φ(t·x) = P(t(x + ε) > 0), ε ~ N(0, 1): a step site with noise variance 1, t = ±1 observed on ``out``."""
    return SITE_STEP, m["out"][0], 1.0


probit_ep = ep_site_rule(PROBIT, "x", _probit_ep_site)
