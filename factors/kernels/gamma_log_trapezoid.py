r"""Expectations under a Gamma q(φ) = Gam(a, b) by the trapezoid rule in log space, and the NCVMP message of such an
expectation to φ's statistics (φ, log φ).

In t = log φ − log(a/b) q's density is ∝ exp(−a(eᵗ − 1 − t)), unimodal at 0 with curvature a.  ``gamma_log_nodes``
spreads nodes over where it exceeds e^(−60) of its peak (edges by Newton's method), in steps of 0.3 of its width
min(1, 1/√a) (the widest row sets the count), and returns the normalised trapezoid weights; for integrands
analytic in t the rule is exact to rounding.

``gamma_regression_message``: the gradient of E[h] in (E[φ], E[log φ]) written as the regression of h on the
statistics (Knowles & Minka 2011; as ``scale_quadrature``): with R = log φ − E[log φ] − (b/a)(φ − a/b), which is
uncorrelated with φ, and h′ = dh/d log φ,

.. math:: β = \mathrm{Cov}(h, R)/(ψ′(a) − 1/a),\qquad α = (b/a)(E[h′] − β),

α the coefficient of φ and β that of log φ (Stein's identity gives Cov(h, φ) = E[h′]/b).
"""

from __future__ import annotations

import numpy as np

from .scale_quadrature import a_trigamma_minus_one, log_minus_digamma

_STEP = 0.3
_MAX_NODES = 4000
_LEVEL = 60.0


def _edge(a: np.ndarray, sign: float) -> np.ndarray:
    """The t of sign ``sign`` where a(eᵗ − 1 − t) = ``_LEVEL`` (q's density e^(−60) of its peak), by Newton's
    method from the large-a (quadratic) and small-a (linear or logarithmic) asymptotes."""
    if sign > 0:
        t = np.maximum(np.sqrt(2.0 * _LEVEL / a), np.log1p(_LEVEL / a) + 1.0)
    else:
        t = -np.minimum(np.sqrt(2.0 * _LEVEL / a), 1.0 + _LEVEL / a)
    for _ in range(30):
        f = a * (np.expm1(t) - t) - _LEVEL
        t = t - f / (a * np.expm1(t))
    return t


def gamma_log_nodes(a: np.ndarray, step: float = _STEP) -> tuple[np.ndarray, np.ndarray]:
    """Trapezoid nodes t (…, n) in t = log φ − log(a/b) and normalised weights of q's density there."""
    lo, hi = _edge(a, -1.0)[..., None], _edge(a, 1.0)[..., None]
    a = a[..., None]
    # a step of 0.3 of q's width in t (1/√a, at most 1): h varies on scales of order one in t and q's density
    # (analytic, but growing off the real axis) must be resolved; the widest row sets the number of nodes
    n = int(np.clip(np.ceil(np.max((hi - lo) / (step * np.minimum(1.0, 1.0 / np.sqrt(a))), initial=1.0)), 32,
                    _MAX_NODES))
    t = lo + (hi - lo) * np.linspace(0.0, 1.0, n)
    logw = -a * (np.expm1(t) - t)
    w = np.exp(logw - logw.max(-1, keepdims=True))
    w[..., 0] *= 0.5
    w[..., -1] *= 0.5
    return t, w / w.sum(-1, keepdims=True)


def gamma_regression_message(h: np.ndarray, h1: np.ndarray, t: np.ndarray, w: np.ndarray, a: np.ndarray,
                             b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(α, β): ∂E[h]/∂E[φ] and ∂E[h]/∂E[log φ] from h and h′ = dh/d log φ at the nodes ``t`` with weights ``w``."""
    e_h = (h * w).sum(-1)
    r = t + log_minus_digamma(a)[..., None] - np.expm1(t)  # R at the nodes
    beta = ((h - e_h[..., None]) * r * w).sum(-1) * a / a_trigamma_minus_one(a)
    return (b / a) * ((h1 * w).sum(-1) - beta), beta
