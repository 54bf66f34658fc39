"""Scale-free stopping tests shared by the handlers.

A handler's optimiser stops on tests that do not depend on the units of the weights or on the size of the
objective's terms:

* distances are measured in posterior standard deviations, by the Newton decrement
  λ² = gᵀ(−∇²F)⁻¹g (exact Hessian, or an optimiser's approximation of its inverse), or by the gradient in
  coordinates whitened by a Gaussian approximation of the posterior;
* gains are compared with the rounding level of the objective, ``ROUNDING`` × the magnitude of its terms
  (``value_rounding``): a sum of terms of 1e7 that cancel to 30 is known to ~1e-9 nats, and a step that
  gains less than that cannot be judged by the values.  An optimum is then reached when the gain still to
  be had, ½λ², is below that level (``settled``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

SD_TOL = 1e-9  # a mode: the Newton decrement, in posterior sd, at most this
ROUNDING = 64.0 * np.finfo(float).eps  # relative rounding error of a sum of many terms (pairwise summation)


def value_rounding(target: Any, w: np.ndarray, value: float) -> float:
    """The rounding level of log p̃ at w: ``ROUNDING`` × the magnitude of its terms (``target.magnitude``,
    when the target knows its terms; else |log p̃(w)|)."""
    mag = target.magnitude(w) if hasattr(target, "magnitude") else abs(value)
    return ROUNDING * max(float(mag), abs(float(value)))


def decrement(res: Any) -> float:
    """λ² = gᵀH̃⁻¹g at the end of a scipy L-BFGS run (H̃⁻¹ its inverse-Hessian approximation; |g|² without
    one): twice the gain its quadratic model still expects."""
    g = np.asarray(res.jac, dtype=float)
    inv = getattr(res, "hess_inv", None)
    if inv is None:
        return float(g @ g)
    Hg = inv.matvec(g) if hasattr(inv, "matvec") else np.asarray(inv) @ g
    return float(g @ Hg) if float(g @ Hg) >= 0.0 else float(g @ g)


def settled(res: Any, gtol: float, noise: float) -> bool:
    """Whether a scipy L-BFGS run reached its optimum: the largest gradient component (in whitened
    coordinates: posterior sd) is at most ``gtol``, or the gain its model still expects, ½λ², is below the
    objective's rounding level ``noise`` (the values cannot resolve a further step)."""
    g = np.asarray(res.jac, dtype=float)
    return bool(np.max(np.abs(g), initial=0.0) <= gtol or 0.5 * decrement(res) <= noise)
