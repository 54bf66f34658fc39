"""Gamma-distributed (positive) arguments of a user log density (``fg.likelihood``): quadrature and messages.

With q(λ) = Gam(a, b) per row, E[g(λ)] is taken in u = log λ, whose density exp(a u' − e^u')/Γ(a) (u' = u +
log b) is analytic, so that a log λ in log f (a precision's ½ log τ) costs nothing.

* a ≤ 8: the trapezoid rule on n nodes in s, u' = log a + min(s_a, 1)·sinh(s) with s_a = √ψ′(a) (the sinh
  compresses the long left tail exp(a u')), over u' in [ψ(a) − max(36/a, 8s_a), min(ψ(a) + 8s_a,
  log(a + 40 + 12√a))], all but about e⁻³⁰ of the mass; it converges exponentially in n for an analytic
  integrand (a small a, whose left tail is long, needs more nodes).
* a > 8: Gauss–Hermite around u's mean ψ(a) − log b with sd s_a, each weight times the ratio of the
  log-Gamma density to that Gaussian (q(u) is then close to Gaussian, and its tails beyond the nodes hold
  about exp(−√(2na)) of the mass).

The weights are normalised to sum to 1.  Nodes are computed once per distinct shape a.

The derivatives of S = E[g] in (a, b) are covariances with the score of q, on the same nodes:

    ∂S/∂a = E[g·(log λ − E log λ)],   ∂S/∂b = E[g·(E λ − λ)],

and the NCVMP message to λ is the gradient of S in λ's mean parameters μ = (E λ, E log λ) = (a/b, ψ(a) − log b),
∂S/∂μ = J⁻ᵀ ∂S/∂(a, b) with J = ∂μ/∂(a, b) = [[1/b, −a/b²], [ψ′(a), −1/b]] (det (aψ′(a) − 1)/b² > 0).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.special import digamma, gammaln, polygamma

from .kernels import normal_rule

TRAPEZOID_MAX_SHAPE = 8.0  # above, the log-Gamma density is close enough to Gaussian for the ratio rule


def shape_rate(ex: np.ndarray, elog: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) of the Gamma with E[λ] = ex and E[log λ] = elog: log a − ψ(a) = log ex − elog by Newton's method
    from Minka's start, then b = a/ex."""
    s = np.maximum(np.log(ex) - elog, 1e-300)
    a = (3.0 - s + np.sqrt((s - 3.0) ** 2 + 24.0 * s)) / (12.0 * s)
    for _ in range(50):
        step = (np.log(a) - digamma(a) - s) / (1.0 / a - polygamma(1, a))
        a = np.maximum(a - step, 0.5 * a)
        if np.all(np.abs(step) <= 1e-15 * a):
            break
    return a, a / ex


@lru_cache(maxsize=256)
def _unit_rule(a: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes t (n,) and weights (summing to 1) for E_{Gam(a, 1)}[g(t)]."""
    if a <= TRAPEZOID_MAX_SHAPE:
        # u = log t has density exp(a u − eᵘ)/Γ(a): a left tail exp(a u), a doubly exponential right one
        mu, sd = digamma(a), np.sqrt(polygamma(1, a))
        lo, hi = mu - max(36.0 / a, 8.0 * sd), min(mu + 8.0 * sd, np.log(a + 40.0 + 12.0 * np.sqrt(a)))
        c, scale = np.log(a), min(sd, 1.0)  # u = c + scale·sinh(s): the long left tail compressed
        s = np.linspace(np.arcsinh((lo - c) / scale), np.arcsinh((hi - c) / scale), n)
        u = c + scale * np.sinh(s)
        t, w = np.exp(u), np.exp(a * u - np.exp(u) - gammaln(a)) * np.cosh(s)
    else:
        z, wz = normal_rule(n)
        mu, sd = digamma(a), np.sqrt(polygamma(1, a))
        u = mu + sd * z
        log_q = a * u - np.exp(u) - gammaln(a)  # the density of u = log t
        log_n = -0.5 * z * z - np.log(sd) - 0.5 * np.log(2.0 * np.pi)
        t, w = np.exp(u), wz * np.exp(log_q - log_n)
    return t, w / w.sum()


def gamma_nodes(a: np.ndarray, b: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-row nodes λ (R, n) and weights (R, n) of the rule for Gam(a_r, b_r)."""
    vals, inv = np.unique(a, return_inverse=True)
    rules = [_unit_rule(float(v), n) for v in vals]
    t = np.stack([r[0] for r in rules])[inv]
    w = np.stack([r[1] for r in rules])[inv]
    return t / b[:, None], w


def gamma_message(a: np.ndarray, b: np.ndarray, dS_da: np.ndarray, dS_db: np.ndarray) -> tuple:
    """The message (∂S/∂E[λ], ∂S/∂E[log λ]) from ∂S/∂(a, b)."""
    t1 = polygamma(1, a)
    det = (a * t1 - 1.0) / (b * b)
    return ((-dS_da / b - t1 * dS_db) / det, (dS_db / b + a * dS_da / (b * b)) / det)
