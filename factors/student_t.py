"""Student-t likelihood as a Gaussian–Gamma scale mixture (robust regression), exact under VMP.

    y_n ~ N(μ_n, (λ_n τ)⁻¹),   λ_n ~ Gam(ν/2, ν/2),

with a latent weight λ_n per row, a Gaussian mean μ_n and a Gamma (or constant) precision τ; integrating
λ_n out gives y_n ~ t_ν(μ_n, τ⁻¹).  Under the mean-field q(μ) q(τ) Π q(λ_n) (Tipping & Lawrence 2005;
Svensén & Bishop 2005) the optimal weight factor given the rest is

    q(λ_n) = Gam(a, b_n),   a = (ν + 1)/2,   b_n = ν/2 + A_n,   A_n = ½E[τ]E[(y_n − μ_n)²],

and the factor keeps q(λ_n) at that optimum (the weights are local to the factor: there is one per row and
nothing else touches them).  Its E[log f] is then the exact mean-field bound of the row's terms, λ's prior
and entropy included, maximised over q(λ_n):

    E[log f]_n = max_q(λ) E[½log λ + ½log τ − ½log 2π − λA_n + log Gam(λ; ν/2, ν/2) − log q(λ)]
               = ½(E[log τ] − log 2π) + log Γ(a) − log Γ(ν/2) + (ν/2)log(ν/2) − a·log b_n.

By the envelope theorem its gradients are the VMP messages at that q(λ), with E[λ_n] = a/b_n:

    to μ: (E[λ]E[τ]y, −½E[λ]E[τ]);     to τ (statistics (τ, log τ)): (−½E[λ]E[(y − μ)²], ½).

Each message is therefore a coordinate-ascent step on the full bound (λ's update, then the target's).

Learning ν (``learn_dof``): before each message the factor sets ν to the maximiser of Σ_n E[log f]_n in ν
(equivalently, of Σ_n E[log Gam(λ_n; ν/2, ν/2)] jointly with q(λ)), a bounded Brent search in log ν on
[``DOF_BOUNDS``]; the step is kept only if it does not lower the bound, so every update raises it.  The
current ν is ``state["dof"]``.

Parameters (``p``): ``dof`` (ν, or its initial value when learned), ``learn_dof``, ``present`` (1 for
observed rows, 0 for missing ones, which drop out; aligned to the factor's plates) and ``state``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from distributions import Gamma, Gaussian

from .base import LOG_2PI, FactorType, Moments

STUDENT_T = FactorType("StudentT", out=Gaussian, mean=Gaussian, precision=Gamma)

DOF_BOUNDS = (1e-2, 1e4)  # the range a learned ν is searched in


def _half_sq_dev(m: Moments) -> np.ndarray:
    """A_n = ½E[τ]E[(y − μ)²]."""
    y, mu, tau = m["out"], m["mean"], m["precision"]
    return 0.5 * tau[0] * (y[1] - 2.0 * y[0] * mu[0] + mu[1])


def _present(p: dict) -> np.ndarray | float:
    return p.get("present", 1.0)


def _dof_terms(nu: float, A: np.ndarray) -> np.ndarray:
    """log Γ((ν+1)/2) − log Γ(ν/2) + (ν/2)log(ν/2) − ((ν+1)/2)log(ν/2 + A), elementwise."""
    return gammaln(0.5 * (nu + 1.0)) - gammaln(0.5 * nu) + 0.5 * nu * np.log(0.5 * nu) \
        - 0.5 * (nu + 1.0) * np.log(0.5 * nu + A)


def learn_dof(A: np.ndarray, present, nu0: float) -> float:
    """The ν in ``DOF_BOUNDS`` maximising Σ_n present_n·[E[log f]_n terms in ν], or ν₀ if that is no better."""
    A = np.asarray(A, dtype=float)
    w = np.broadcast_to(present, np.broadcast_shapes(np.shape(present), A.shape))
    A = np.broadcast_to(A, w.shape)

    def neg(log_nu: float) -> float:
        return -float(np.sum(w * _dof_terms(float(np.exp(log_nu)), A)))

    from scipy.optimize import minimize_scalar  # scipy.optimize is slow to import: only when ν is learnt

    lo, hi = np.log(DOF_BOUNDS[0]), np.log(DOF_BOUNDS[1])
    res = minimize_scalar(neg, bounds=(lo, hi), method="bounded", options={"xatol": 1e-10})
    cand = float(np.exp(res.x))
    return cand if neg(res.x) <= neg(np.log(nu0)) else nu0


def current_dof(m: Moments, p: dict, update: bool = True) -> float:
    """ν for this call: the constant, or (``learn_dof``) the bound-raising point update from the current one."""
    state = p["state"] if "state" in p else {}
    nu = float(state.get("dof", p["dof"]))
    if p.get("learn_dof") and update:
        nu = learn_dof(_half_sq_dev(m), _present(p), nu)
        state["dof"] = nu
    return nu


def weights(m: Moments, p: dict, nu: float | None = None) -> np.ndarray:
    """E[λ_n] = (ν + 1)/(ν + 2A_n) under the optimal q(λ_n)."""
    nu = current_dof(m, p, update=False) if nu is None else nu
    return (nu + 1.0) / (nu + 2.0 * _half_sq_dev(m))


@STUDENT_T.rule("mean", "vmp")
def student_t_to_mean(m: Moments, p: dict) -> tuple:
    lam_tau = _present(p) * weights(m, p, current_dof(m, p)) * m["precision"][0]
    return (lam_tau * m["out"][0], -0.5 * lam_tau)


@STUDENT_T.rule("precision", "vmp")
def student_t_to_precision(m: Moments, p: dict) -> tuple:
    y, mu = m["out"], m["mean"]
    pres = _present(p)
    lam = weights(m, p, current_dof(m, p))
    d = pres * lam * (y[1] - 2.0 * y[0] * mu[0] + mu[1])
    return (-0.5 * d, 0.5 * np.broadcast_to(pres, d.shape))


@STUDENT_T.evidence(kind="exact")
def student_t_evidence(m: Moments, p: dict) -> np.ndarray:
    nu = current_dof(m, p, update=False)
    val = 0.5 * (m["precision"][1] - LOG_2PI) + _dof_terms(nu, _half_sq_dev(m))
    return _present(p) * val
