"""Softmax factor: a label y ∈ {0..K−1} (or counts) on K Gaussian scores x (Knowles & Minka 2011 §5).

log f = Σ_k (d_k − 1)x_k − c·lse(x), with d_k − 1 the count of class k and c = d. − K the total
count (one observed label: d − 1 = e_y, c = 1).  With q(x_k) = N(m_k, v_k) every method bounds or
approximates B ≈ E[lse(x)]; S = Σ(d_k − 1)m_k − c·B and the message to x_k is the gradient of S in
x_k's mean parameters: η₂ = −c ∂B/∂v_k, η₁ = (d_k − 1) − c ∂B/∂m_k − 2m_k η₂.

``"tilted"`` (Knowles & Minka eq. 12), ``"log"`` (Blei & Lafferty), ``"quadratic"`` (Bouchard),
``"bohning"`` and ``"adaptive"`` (per data point the tighter of quadratic and tilted) are upper
bounds on E[lse], so the ELBO term is a lower bound; ``"taylor"`` is a second-order expansion, not a
bound: its evidence is labelled an approximation, and its message holds the expansion point fixed
(precision c·s_k(1 − s_k), precision·mean (d_k − 1) − c·s_k + c·s_k(1 − s_k)m_k with s = softmax(m)),
so it is not the gradient of the value it reports.  The scores' plate over classes is consumed as the
factor's event axis (length K).  To a latent label the factor sends E[x_k] − B (log-probabilities
up to a constant).
"""

from __future__ import annotations

import numpy as np

from distributions import Categorical, Gaussian

from .base import DiagPlusOuter, FactorType, Moments, same_stats
from .kernels import (
    adaptive_softmax_bound,
    bohning_softmax_bound,
    bouchard_softmax_bound,
    categorical_logit_value_grad,
    log_softmax_bound,
    softmax,
    taylor_softmax_approx,
    tilted_softmax_bound,
)
from .logistic import gradient_message

CATEGORICAL_SOFTMAX = FactorType("CategoricalSoftmax", conjugate=False, out=Categorical, logits=Gaussian)

BOUNDS = {
    "tilted": tilted_softmax_bound,
    "log": log_softmax_bound,
    "quadratic": bouchard_softmax_bound,
    "bohning": bohning_softmax_bound,
    "taylor": taylor_softmax_approx,
    "adaptive": adaptive_softmax_bound,
}


# Bounds quadratic in the logits once their variational parameters are set (Bouchard's α, ξ; Böhning's
# expansion point) at their optimum for the current q: the gradient message is then the conjugate VMP
# message of that quadratic, and VMP (a coordinate ascent that re-optimises them) needs no other rule.
QUADRATIC = ("quadratic", "bohning")


def _mv(m: Moments) -> tuple[np.ndarray, np.ndarray]:
    ex, ex2 = m["logits"]
    return ex, np.maximum(ex2 - ex * ex, 0.0)


def _bound(m: Moments, p: dict, method: str) -> tuple:
    """(mean, var, bound output) at the logits' current moments, reused while they are the same arrays:
    the ELBO after a sweep and the first message of the next sweep see the same moments."""
    stats = m["logits"]
    state = p.setdefault("state", {})
    hit = state.get("bound")
    if hit is not None and same_stats(hit[0], stats):
        return hit[1]
    mean, var = _mv(m)
    if method == "tilted" and hit is not None:  # start from the last optimal a: a few Newton steps
        out = (mean, var, tilted_softmax_bound(mean, var, a0=hit[1][2][3]))
    else:
        out = (mean, var, BOUNDS[method](mean, var))
    state["bound"] = (stats, out)
    return out


def _counts(m: Moments, p: dict) -> tuple[np.ndarray, np.ndarray]:
    """(d − 1, c): class counts (a one-hot label, or observed counts) and their total per data point."""
    d1 = m["out"][0]
    return d1, d1.sum(-1)


def _register(method: str) -> None:
    def to_logits(m: Moments, p: dict) -> tuple:
        mean, _, (_, dm, dv, *_) = _bound(m, p, method)
        if method == "taylor":  # the expansion point is held fixed (docs/maths.md §5): ∂B/∂m = softmax(m)
            dm = softmax(mean)
        d1, c = _counts(m, p)
        return gradient_message(mean, d1 - c[..., None] * dm, -c[..., None] * dv)

    def evidence(m: Moments, p: dict) -> np.ndarray:
        mean, _, (value, *_) = _bound(m, p, method)
        d1, c = _counts(m, p)
        return (d1 * mean).sum(-1) - c * value

    def to_out(m: Moments, p: dict) -> tuple:
        # d − 1 enters linearly and c = Σ(d_k − 1): ∂S/∂(d_k − 1) = m_k − B
        mean, _, (value, *_) = _bound(m, p, method)
        return (mean - value[..., None],)

    to_logits.__name__ = f"softmax_{method}"
    CATEGORICAL_SOFTMAX.rule("logits", "ncvmp", method)(to_logits)
    if method in QUADRATIC:
        CATEGORICAL_SOFTMAX.rule("logits", "vmp", method)(to_logits)
    CATEGORICAL_SOFTMAX.rule("out", "vmp", method)(to_out)
    CATEGORICAL_SOFTMAX.evidence(method, kind="approximation" if method == "taylor" else "bound")(evidence)


for _method in BOUNDS:
    _register(_method)


@CATEGORICAL_SOFTMAX.point("logits")
def softmax_point(u: np.ndarray, m: Moments, p: dict, order: int = 2) -> tuple:
    """At logits u (..., K): log f = Σ_k d_k u_k − c·lse(u), gradient d − c·softmax(u), Hessian
    −c(diag(s) − ssᵀ) (``order`` 2 only, kept factored: ``DiagPlusOuter(−c·s, √c·s)``), with d the counts
    (one-hot label) and c their total."""
    d = m["out"][0]
    if order < 2 and u.ndim == 3 and np.ndim(d) <= 2:  # many sampled weight matrices: one fused pass
        return (*categorical_logit_value_grad(u, d), None)
    c = d.sum(-1)
    top = u.max(-1, keepdims=True)
    e = np.exp(u - top)
    tot = e.sum(-1)
    s = e / tot[..., None]
    lse = np.log(tot) + top[..., 0]
    hess = DiagPlusOuter(-c[..., None] * s, np.sqrt(c)[..., None] * s) if order > 1 else None
    return (d * u).sum(-1) - c * lse, d - c[..., None] * s, hess
