"""IsPositive: a binary b = 1[x > 0] of a Gaussian variable or expression x (Infer.NET's IsPositive factor).

f(b, x) = 1[x > 0] if b else 1[x ≤ 0].  Observed b makes x's posterior a truncated Gaussian; the factor has only
an expectation-propagation rule (E_q[log f] is −∞ under any Gaussian q, so VMP and NCVMP cannot run it).  With
the cavity x ~ N(μ, v), t = 2b − 1 and z = tμ/√v, the tilted distribution 1[t x > 0] N(x; μ, v) has

    Z = Φ(z),  mean = μ + t√v·r,  variance = v(1 − r(z + r)),  r = φ(z)/Φ(z),

computed in log space for large |z| (``factors.kernels.ep_sites``, site code ``SITE_STEP`` with noise 0).  A
win of player 1 over player 2 in TrueSkill is is_positive(perf₁ − perf₂) observed True.

``ep_site_rule`` registers an EP site rule for any factor: ``rule(m, p) -> (log Z, mean, variance)`` of the
tilted distribution given the cavity moments ``m[edge] = (E[d], Var[d])`` of the site's Gaussian edge and the
statistics of its known edges; the rule's ``site(m, p) -> (code, a, c)`` gives the engine's kernels the site's
kind and constants.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from distributions import Bernoulli, Gaussian

from .base import FactorType, Moments
from .kernels.ep_sites import SITE_STEP, tilted_batch

IS_POSITIVE = FactorType("IsPositive", conjugate=False, out=Bernoulli, x=Gaussian)


def ep_site_rule(ftype: FactorType, edge: str, site: Callable[[Moments, dict], tuple],
                 methods: Sequence[str] = ("default",)) -> Callable:
    """Register ``(edge, "ep", method)`` rules computing the tilted moments of a site whose kind and constants
    ``site(m, p) -> (code, a, c)`` returns (``factors.kernels.ep_sites``)."""

    def rule(m: Moments, p: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        mean, var = (np.asarray(x, dtype=float) for x in m[edge])
        code, a, c = site(m, p)
        shape = np.broadcast_shapes(mean.shape, var.shape, np.shape(a))
        flat = [np.ascontiguousarray(np.broadcast_to(x, shape), dtype=float).reshape(-1) for x in (mean, var, a)]
        return tuple(x.reshape(shape) for x in tilted_batch(code, *flat, float(c)))

    rule.site = site
    for method in methods:
        ftype.rule(edge, "ep", method)(rule)
    return rule


def _site(m: Moments, p: dict) -> tuple:
    return SITE_STEP, 2.0 * np.asarray(m["out"][0], dtype=float) - 1.0, 0.0


is_positive_tilted = ep_site_rule(IS_POSITIVE, "x", _site)
