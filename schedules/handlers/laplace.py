"""The Laplace approximation as a global handler (MATH.md §6).

w* = argmax log p̃ by a trust-region Newton method with the analytic (or finite-difference)
Hessian; q = N(w*, (−∇²)⁻¹); the evidence approximation

    log Z ≈ log p̃(w*) + (D/2) log 2π − ½ log det(−∇² log p̃(w*))

is *not* a bound.  On a model block the claimed sites contribute the second-order expansion
Σ_n [log f_n(u*_n) + ½ g″_n(u*_n) x_nᵀΣx_n] of E_q[log f_n], which together with the prior's exact
E_q[log prior] and H[q] gives exactly the formula above when the prior is a fixed Gaussian.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize

from distributions import MvGaussian
from factorgraph.results import APPROXIMATION

LOG_2PI = float(np.log(2.0 * np.pi))


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


class HandlerError(RuntimeError):
    """A handler's optimisation failed (no mode, an indefinite Hessian); the message says which."""


def find_mode(target: Any, x0: np.ndarray, name: str = "Laplace") -> tuple[np.ndarray, np.ndarray, float]:
    """Mode, Hessian at the mode and log p̃ there (trust-region Newton, analytic Hessian if any)."""

    def fun(w):
        v, g = target.logp_grad(w[None])
        return -float(v[0]), -g[0]

    res = optimize.minimize(fun, np.asarray(x0, dtype=float), jac=True, hess=lambda w: -target.hessian(w),
                            method="trust-exact", options={"gtol": 1e-9, "maxiter": 500})
    if not np.all(np.isfinite(res.x)):
        raise HandlerError(f"{name}: the mode search diverged ({res.message})")
    H = target.hessian(res.x)
    return res.x, H, -float(res.fun)


def gaussian_from_hessian(w: np.ndarray, H: np.ndarray, name: str = "Laplace") -> tuple[MvGaussian, float]:
    """q = N(w, (−H)⁻¹) and log det(−H)."""
    try:
        chol = np.linalg.cholesky(-H)
    except np.linalg.LinAlgError:
        raise HandlerError(f"{name}: the Hessian at the mode is not negative definite (eigenvalues "
                           f"{np.linalg.eigvalsh(H).round(6).tolist()}): no Gaussian approximation there") from None
    return MvGaussian(mean=w, precision=-H), 2.0 * float(np.log(np.diag(chol)).sum())


class Laplace:
    """Laplace approximation: the mode and the curvature there (evidence: an approximation)."""

    name = "Laplace"

    def fit(self, target: Any, x0: np.ndarray, warm: dict | None = None) -> BlockFit:
        w, H, logp = find_mode(target, x0 if warm is None else warm.get("mode", x0), self.name)
        q, logdet = gaussian_from_hessian(w, H, self.name)
        D = w.shape[0]
        log_z = logp + 0.5 * D * LOG_2PI - 0.5 * logdet
        entropy = 0.5 * D * (LOG_2PI + 1.0) - 0.5 * logdet
        site = target.laplace_site_term(w, q.cov()) if hasattr(target, "laplace_site_term") else 0.0
        return BlockFit(q, log_z, APPROXIMATION, 0.0, site, 0.0, entropy, {"mode": w})

    def __repr__(self) -> str:
        return "Laplace()"
