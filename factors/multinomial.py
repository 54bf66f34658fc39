"""Multinomial factors on observed count vectors y (Σ_k y_k = n), statistics (y, log n! − Σ log y_k!):

``Multinomial`` — conjugate, with a Dirichlet (or constant, or gated) probability vector π:
    E[log f] = log n! − Σ_k log y_k! + Σ_k y_k E[log π_k];  to π: y.

``MultinomialSoftmax`` — π = softmax(x) of Gaussian scores x over a class plate (non-conjugate):
    log f = log n! − Σ_k log y_k! + Σ_k y_k x_k − n·lse(x).
It is the count form of the softmax factor (Knowles & Minka 2011 §5.2) plus the multinomial
coefficient, so its messages to the scores are the softmax factor's, for each of its bounds
(``"tilted"``, ``"log"``, ``"quadratic"``, ``"bohning"``, ``"adaptive"``; ``"taylor"`` an approximation).
"""

from __future__ import annotations

import numpy as np

from distributions import Dirichlet, Gaussian, Multinomial

from .base import FactorType, Moments
from .contract import pair_inner
from .softmax import BOUNDS, CATEGORICAL_SOFTMAX, QUADRATIC, softmax_point

MULTINOMIAL = FactorType("Multinomial", out=Multinomial, probs=Dirichlet)
MULTINOMIAL_SOFTMAX = FactorType("MultinomialSoftmax", conjugate=False, out=Multinomial, logits=Gaussian)


@MULTINOMIAL.rule("probs", "vmp")
def multinomial_to_probs(m: Moments, p: dict) -> tuple:
    return (np.asarray(m["out"][0], dtype=float),)  # not broadcast to the probabilities' plates


@MULTINOMIAL.evidence(kind="exact")
def multinomial_evidence(m: Moments, p: dict) -> np.ndarray:
    y, log_coef = m["out"]
    return log_coef + pair_inner(y, m["probs"][0], 1)


def _register(method: str) -> None:
    softmax_evidence, kind = CATEGORICAL_SOFTMAX.get_evidence(method)

    def evidence(m: Moments, p: dict) -> np.ndarray:
        return m["out"][1] + softmax_evidence(m, p)

    to_logits = CATEGORICAL_SOFTMAX.get_rule("logits", "ncvmp", method)
    MULTINOMIAL_SOFTMAX.rule("logits", "ncvmp", method)(to_logits)
    if method in QUADRATIC:
        MULTINOMIAL_SOFTMAX.rule("logits", "vmp", method)(to_logits)
    MULTINOMIAL_SOFTMAX.evidence(method, kind=kind)(evidence)


for _method in BOUNDS:
    _register(_method)


@MULTINOMIAL_SOFTMAX.point("logits")
def multinomial_softmax_point(u: np.ndarray, m: Moments, p: dict, order: int = 2) -> tuple:
    """At scores u (..., K): log f = log n! − Σ log y_k! + Σ_k y_k u_k − n·lse(u); the derivatives are the
    softmax factor's (gradient y − n·softmax(u), Hessian −n(diag s − ssᵀ))."""
    value, grad, hess = softmax_point(u, m, p, order)
    return value + m["out"][1], grad, hess
