"""Pólya-Gamma augmentation of the logistic factor: its Gibbs rule (Polson, Scott & Windle 2013).

For f(s, x) = σ(x)^s (1 − σ(x))^(1−s) = e^{κx} / (2 cosh(x/2)), κ = s − ½, and the identity

    (2 cosh(x/2))⁻¹ = ½ ∫ e^{−ωx²/2} PG(ω | 1, 0) dω,

the pair (x, ω) with ω | x ~ PG(1, x) has p(x | ω, s) ∝ exp(κx − ωx²/2): a Gaussian message with natural
parameters (κ, −ω/2) into the logit x.  So a Gibbs sweep draws ω ~ PG(1, x) at the logit's current value and
sends that message; through ``fg.inner(X, w)`` it reaches w as (Xᵀκ, −½XᵀΩX), and w | ω, s is Gaussian (drawn as
one block).  (Jaakkola and Jordan's quadratic bound sends the same message with ω replaced by its mean
E[ω | x = ξ] = tanh(ξ/2)/(2ξ) = 2λ(ξ).)  The rule is registered under the algorithm ``"gibbs"`` for every method
of the factor; the generator is the chain's, kept in the factor's state as ``"rng"``.  Needs the ``polyagamma``
package (``pip install 'fgvmp[gibbs]'``).
"""

from __future__ import annotations

import numpy as np

from .base import Moments
from .logistic import BERNOULLI_LOGIT


def polya_gamma(b: np.ndarray, c: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Draws ω ~ PG(b, c), elementwise over the broadcast shape of ``b`` and ``c``."""
    try:
        from polyagamma import random_polyagamma
    except ImportError:
        raise ImportError("Gibbs sampling of a logistic factor needs the polyagamma package: pip install "
                          "'fgvmp[gibbs]' (or pip install polyagamma)") from None
    b, c = np.broadcast_arrays(np.asarray(b, float), np.asarray(c, float))
    return np.asarray(random_polyagamma(b, c, random_state=rng), float).reshape(c.shape)


def logit_polya_gamma(m: Moments, p: dict) -> tuple:
    """The Gaussian message (κ, −ω/2) to the logit, ω ~ PG(1, x) at its current value x (point statistics)."""
    s, x = m["out"][0], m["logit"][0]
    shape = np.broadcast_shapes(np.shape(s), np.shape(x))
    omega = polya_gamma(np.ones(shape), np.broadcast_to(x, shape), p["state"]["rng"])
    return (np.broadcast_to(s - 0.5, shape), -0.5 * omega)


for _method in ("quadrature", "tilted", "quadratic"):
    BERNOULLI_LOGIT.rule("logit", "gibbs", _method)(logit_polya_gamma)
