"""The Laplace approximation as a global handler (docs/maths.md §7).

w* = argmax log p̃ by a trust-region Newton method with the analytic (or finite-difference)
Hessian; q = N(w*, (−∇²)⁻¹); the evidence approximation

    log Z ≈ log p̃(w*) + (D/2) log 2π − ½ log det(−∇² log p̃(w*))

is *not* a bound.  On a model block the claimed sites contribute the second-order expansion
Σ_n [log f_n(u*_n) + ½ g″_n(u*_n) x_nᵀΣx_n] of E_q[log f_n], which together with the prior's exact
E_q[log prior] and H[q] gives exactly the formula above when the prior is a fixed Gaussian.

With ``learn=`` the hyperparameters h (``hyper.py``) maximise the evidence approximation, the mode
recomputed at each h (``laplace_hyper``); q, the evidence and the block's terms are those at the optimum.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import linalg, optimize

from distributions import MvGaussian
from factorgraph.posterior.results import APPROXIMATION

from .. import progress
from .hyper import Hyper, learn_names
from .stopping import SD_TOL, settled, value_rounding

LOG_2PI = float(np.log(2.0 * np.pi))
_HYPER_GTOL = 1e-9  # the evidence's gradient in log-hyperparameters (nats per e-fold) of a converged search


@dataclass
class BlockFit:
    """What a handler returns: the posterior, the target's evidence figure, and the block terms."""

    q: Any
    log_evidence: float  # of the whole target (prior × sites)
    kind: str
    se: float  # its Monte Carlo standard error (0 when not an estimate)
    site_term: float  # estimate of Σ_n E_q[log f_n] (the claimed factors' part of the ELBO)
    site_se: float
    entropy: float
    info: dict = field(default_factory=dict)
    # with a learned prior precision multiplier c: E_q[log N(w | m₀, (cΛ₀)⁻¹)] − E_q[log N(w | m₀, Λ₀⁻¹)], added to
    # the prior factor's term, which the engine evaluates at the model's Λ₀
    prior_shift: float = 0.0


class HandlerError(RuntimeError):
    """A handler's optimisation failed (no mode, an indefinite Hessian); the message says which."""


def find_mode(target: Any, x0: np.ndarray, name: str = "Laplace") -> tuple[np.ndarray, np.ndarray, float]:
    """Mode, Hessian at the mode and log p̃ there.

    Newton's method with a backtracking (Armijo) line search while −∇² log p̃ is positive definite, the
    usual case (log-concave sites under a proper prior): one Hessian and one Cholesky factorisation per
    step, and the last Hessian is the one at the mode.  Where it is not (or the line search fails), a
    trust-region Newton method (scipy's ``trust-exact``) takes over, and Newton's method finishes from
    where it stops.

    The stopping tests are scale-free.  The Newton decrement λ² = gᵀ(−H)⁻¹g is the squared distance to
    the mode in posterior standard deviations and ½λ² the gain in log p̃ still to be had; the search stops
    when λ ≤ ``SD_TOL``.  Where ½λ² is below the rounding level of log p̃ (``value_rounding``: terms of
    1e7 that cancel to 30 are known to ~1e-9, and a warm start from the previous mode of a block lies that
    close to the new one) the values cannot judge a step, so full Newton steps follow the gradient alone
    while they shrink λ; when they no longer do, the gradient is at its rounding floor and the point is the
    mode to the precision the arithmetic allows.  Raises ``HandlerError`` only when no step can be found
    with λ above those levels.
    """

    def fun(w):
        v, g = target.logp_grad(w[None])
        return float(v[0]), g[0]

    w = np.asarray(x0, dtype=float).copy()
    v, g = fun(w)
    if not (np.isfinite(v) and np.all(np.isfinite(g))):
        raise HandlerError(f"{name}: log p̃ or its gradient is not finite at the starting point")
    w, v, g, H, how, lam = _newton(target, fun, w, v, g, name)
    if how == "mode":
        return w, H, v
    scale = np.sqrt(np.abs(np.diag(H)))
    scale = scale[scale > 0]
    gtol = SD_TOL * float(scale.min() if scale.size else 1.0)  # ‖g‖ ≤ SD_TOL/sd in the widest coordinate
    res = optimize.minimize(lambda x: tuple(-a for a in fun(x)), w, jac=True, hess=lambda x: -target.hessian(x),
                            method="trust-exact", options={"gtol": gtol, "maxiter": 500})
    if not np.all(np.isfinite(res.x)):
        raise HandlerError(f"{name}: the mode search diverged ({res.message})")
    v, g = fun(res.x)
    w, v, g, H, how, lam = _newton(target, fun, res.x, v, g, name)
    if how != "stalled":  # at an indefinite Hessian gaussian_from_hessian says there is no Gaussian approximation
        return w, H, v
    raise HandlerError(f"{name}: the mode search stopped ({res.message}) with a gradient of {np.max(np.abs(g)):.3g}, "
                       f"{lam:.3g} posterior standard deviations from the mode, where its quadratic model still gains "
                       f"{0.5 * lam**2:.3g} nats (the rounding level of log p̃ is {value_rounding(target, w, v):.2g})")


def _newton(target: Any, fun: Any, w: np.ndarray, v: float, g: np.ndarray, name: str, max_iter: int = 100):
    """Newton's method of ``find_mode`` from w: (w, log p̃, gradient, Hessian, how, λ) with ``how``
    "mode" (λ ≤ SD_TOL, or at the rounding floor), "indefinite" (−H is not positive definite at w) or
    "stalled" (no step gains what log p̃ can resolve)."""
    lam_prev = lam = np.inf  # λ before the last full step taken below the values' resolution
    scatter = 0.0  # the largest departure of log p̃ from its quadratic model seen along very short steps
    for _ in range(max_iter):
        H = target.hessian(w)
        if not np.all(np.isfinite(H)):
            raise HandlerError(f"{name}: the Hessian of log p̃ is not finite at {w}")
        try:
            chol = linalg.cho_factor(-H, lower=True)
        except linalg.LinAlgError:
            return w, v, g, H, "indefinite", lam
        step = linalg.cho_solve(chol, g)
        slope = float(g @ step)  # the Newton decrement λ², ≥ 0
        lam = float(np.sqrt(max(slope, 0.0)))
        if lam <= SD_TOL:
            return w, v, g, H, "mode", lam
        if 0.5 * slope <= max(value_rounding(target, w, v), scatter):
            # the gain still to be had is below what the values resolve: full Newton steps, judged by λ alone
            if lam > 0.5 * lam_prev:
                return w, v, g, H, "mode", lam  # λ no longer shrinks: the gradient's rounding floor
            w_new = w + step
            v_new, g_new = fun(w_new)
            if not (np.isfinite(v_new) and np.all(np.isfinite(g_new))):
                return w, v, g, H, "mode", lam
            lam_prev, w, v, g = lam, w_new, v_new, g_new
            continue
        t = 1.0
        while t >= 1e-10:
            w_new = w + t * step
            v_new, g_new = fun(w_new)
            if np.isfinite(v_new) and np.all(np.isfinite(g_new)) and v_new >= v + 1e-4 * t * slope:
                break
            if t <= 1e-3 and np.isfinite(v_new):  # along a short step log p̃ is its quadratic model to ~t³
                scatter = max(scatter, abs(v_new - v - t * (1.0 - 0.5 * t) * slope))
            t *= 0.5
        else:
            if 0.5 * slope <= scatter:
                continue  # the values scatter by more than the gain: their rounding was underestimated
            return w, v, g, H, "stalled", lam
        w, v, g = w_new, v_new, g_new
    return w, v, g, H, "stalled", lam


def gaussian_from_hessian(w: np.ndarray, H: np.ndarray, name: str = "Laplace") -> tuple[MvGaussian, float]:
    """q = N(w, (−H)⁻¹) and log det(−H)."""
    try:
        chol = np.linalg.cholesky(-H)
    except np.linalg.LinAlgError:
        raise HandlerError(f"{name}: the Hessian at the mode is not negative definite (eigenvalues "
                           f"{np.linalg.eigvalsh(H).round(6).tolist()}): no Gaussian approximation there") from None
    return MvGaussian(mean=w, precision=-H), 2.0 * float(np.log(np.diag(chol)).sum())


def laplace_evidence(hyper: Hyper, h: np.ndarray, w0: np.ndarray, name: str = "Laplace"
                     ) -> tuple[float, np.ndarray, np.ndarray]:
    """Laplace's evidence approximation at the log-hyperparameters h, its gradient in h, and the mode.

    L(h) = log p̃(w*_h; h) + ½D log 2π − ½ log det H̄,  H̄ = −∇² log p̃(w*_h; h),  Σ = H̄⁻¹,

        dL/dh_k = ∂log p̃/∂h_k − ½ tr(Σ dH̄/dh_k),   dw*/dh_k = Σ ∂∇log p̃/∂h_k

    (∂log p̃/∂h analytic; ∇log p̃ = 0 at the mode, so w*'s motion enters only through H̄).  The total
    derivative dH̄/dh_k along (dw*/dh_k, e_k) and ∂∇log p̃/∂h_k are central differences (exact ones would
    need third derivatives of every site).  Raises ``HandlerError`` when there is no Gaussian approximation.
    """
    t = hyper.at(h)
    w, H, logp = find_mode(t, w0, name)
    try:
        chol = np.linalg.cholesky(-H)
    except np.linalg.LinAlgError:
        raise HandlerError(f"{name}: the Hessian at the mode is not negative definite at the hyperparameters "
                           f"{hyper.report(h)}") from None
    sigma = linalg.cho_solve((chol, True), np.eye(len(w)))
    grad = hyper.value_grads(t, w, h)[2][0]
    eps = 1e-4
    for k, e in enumerate(eps * np.eye(len(h))):
        up, dn = hyper.at(h + e), hyper.at(h - e)
        dw = sigma @ (up.logp_grad(w)[1][0] - dn.logp_grad(w)[1][0]) / (2.0 * eps)
        dH = (dn.hessian(w - eps * dw) - up.hessian(w + eps * dw)) / (2.0 * eps)  # dH̄/dh_k
        grad[k] -= 0.5 * float(np.sum(sigma * dH))
    return logp + 0.5 * len(w) * LOG_2PI - float(np.log(np.diag(chol)).sum()), grad, w


def laplace_hyper(hyper: Hyper, h0: np.ndarray, w0: np.ndarray, name: str = "Laplace", report: dict | None = None
                  ) -> tuple[np.ndarray, Any, np.ndarray, np.ndarray, float]:
    """Maximise ``laplace_evidence`` over h by L-BFGS from h0, each mode search started at the last mode.

    Returns (h, the target at h, the mode, the Hessian there, log p̃ there).  ``report``, if given, receives
    ``converged`` (L-BFGS met its tests, or the gain it still expects is below the evidence's rounding level:
    ``stopping.settled``) and ``iterations``.
    """
    last = {"w": np.asarray(w0, dtype=float)}

    def neg(h: np.ndarray) -> tuple[float, np.ndarray]:
        try:  # a trial h far out (a scale of 0 or ∞) gives non-finite values, detected as a HandlerError
            with np.errstate(all="ignore"):
                value, grad, last["w"] = laplace_evidence(hyper, h, last["w"], name)
        except HandlerError:
            return np.inf, np.zeros_like(h)  # no Gaussian approximation at this h: the line search backs off
        if not (np.isfinite(value) and np.all(np.isfinite(grad))):
            return np.inf, np.zeros_like(h)
        return -value, -grad

    bar = progress.bar(f"{name} hyperparameter search", 500, unit="iter")
    res = optimize.minimize(neg, np.asarray(h0, dtype=float), jac=True, method="L-BFGS-B",
                            options={"maxiter": 500, "ftol": 1e-15, "gtol": _HYPER_GTOL}, callback=bar.callback)
    bar.close()
    if not np.isfinite(res.fun):
        raise HandlerError(f"{name}: no hyperparameters with a Gaussian approximation at the mode were found "
                           f"from {hyper.report(h0)} ({res.message})")
    t = hyper.at(res.x)
    w, H, logp = find_mode(t, last["w"], name)
    if report is not None:
        report["converged"] = bool(res.success) or settled(res, _HYPER_GTOL, value_rounding(t, w, -float(res.fun)))
        report["iterations"] = int(res.nit)
    return res.x, t, w, H, logp


class Laplace:
    """Laplace approximation: the mode and the curvature there (evidence: an approximation).

    Parameters
    ----------
    learn
        Hyperparameters to learn with the block: ``"prior_precision"`` (a multiplier of the block's constant
        prior precision) and/or ``"scale"`` (the scales of its claimed Laplace, Cauchy and Student-t sites);
        they maximise the evidence approximation (``laplace_hyper``).  Default: none.  The learned values are
        in ``BlockFit.info["hyperparameters"]`` and ``Result.hyperparameters(name)``.
    """

    name = "Laplace"

    def __init__(self, learn: str | Iterable[str] = ()) -> None:
        self.learn = learn_names(learn, self.name)

    def fit(self, target: Any, x0: np.ndarray, warm: dict | None = None) -> BlockFit:
        warm = warm or {}
        hyper, info = None, {}
        if self.learn:
            hyper = Hyper(target, self.learn, self.name)
            search: dict = {}
            h, target, w, H, logp = laplace_hyper(hyper, hyper.start(warm), warm.get("mode", x0), self.name, search)
            info = {**hyper.info(h), **search}
        else:
            w, H, logp = find_mode(target, warm.get("mode", x0), self.name)
        q, logdet = gaussian_from_hessian(w, H, self.name)
        D = w.shape[0]
        log_z = logp + 0.5 * D * LOG_2PI - 0.5 * logdet
        entropy = 0.5 * D * (LOG_2PI + 1.0) - 0.5 * logdet
        site = target.laplace_site_term(w, q.cov()) if hasattr(target, "laplace_site_term") else 0.0
        shift = hyper.prior_shift(h, w, q.cov()) if hyper is not None else 0.0
        return BlockFit(q, log_z, APPROXIMATION, 0.0, site, 0.0, entropy, {"mode": w, **info}, shift)

    def __repr__(self) -> str:
        return f"Laplace(learn={self.learn})" if self.learn else "Laplace()"
