r"""A uniform prior on a standard deviation, σ ~ U(0, U), as a factor on the precision λ = σ⁻².

By the change of variables σ = λ^(−1/2) (|dσ/dλ| = ½ λ^(−3/2)),

.. math:: f(\lambda) = \tfrac{1}{2U}\,\lambda^{-3/2}\,[\lambda > c],\qquad c = U^{-2} .

The indicator is the support of the variable's posterior, not a message: a variable made by
``fg.uniform_scale`` has a Gamma truncated to λ > c as its q (:class:`distributions.TruncatedGamma`), so
the Gamma messages of the Gaussian terms that use it multiply into it unchanged.  What remains,
λ^(−3/2), is conjugate: the factor sends the message (0, −3/2) to (λ, log λ) — it adds −3/2 to the
shape's natural parameter a − 1 — under VMP and NCVMP alike, and its evidence term is exact:

.. math:: E_q[\log f] = -\log(2U) - \tfrac32\,E_q[\log\lambda]\qquad(q(\lambda \le c) = 0).
"""

from __future__ import annotations

import numpy as np

from distributions import Gamma

from .base import FactorType, Moments

UNIFORM_SCALE = FactorType("UniformScale", conjugate=True, out=Gamma)


def uniform_scale_params(upper) -> dict:
    """The factor's parameters: the upper bound U, the truncation point c = U⁻² of λ and log(1/(2U))."""
    u = np.asarray(upper, float)
    return {"upper": u, "lower": 1.0 / (u * u), "const": -np.log(2.0 * u)}


@UNIFORM_SCALE.rule("out", "vmp")
def uniform_scale_message(m: Moments, p: dict) -> tuple:
    """(0, −3/2): the Jacobian λ^(−3/2) of σ = λ^(−1/2)."""
    u = np.asarray(p["upper"], float)
    return (np.zeros(u.shape), np.full(u.shape, -1.5))


@UNIFORM_SCALE.evidence(kind="exact")
def uniform_scale_evidence(m: Moments, p: dict) -> np.ndarray:
    """E_q[log f] = −log(2U) − 3/2 E_q[log λ] (q is truncated to λ > U⁻², where the indicator is 1)."""
    return p["const"] - 1.5 * m["out"][1]
