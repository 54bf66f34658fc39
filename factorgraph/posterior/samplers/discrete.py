"""Forward samplers of probabilities and labels: Beta, Dirichlet, Bernoulli, Categorical and their link variants.

* ``Beta``: p ~ Beta(α, β).  ``Dirichlet``: p = g / Σ_k g_k with g_k ~ Gam(α_k, 1).
* ``Bernoulli``: y = 1[u < p], u ~ U(0, 1); ``BernoulliLogit`` the same at p = σ(x) = ½(1 + tanh(x/2)).
* ``Probit``: y = sign(x + ε), ε ~ N(0, 1) (labels ±1, as stored).  ``IsPositive``: b = 1[x > 0].
* ``Categorical``: z = argmax_k (log p_k + g_k), g_k ~ Gumbel(0, 1) (the Gumbel-max draw of z ~ p);
  ``CategoricalSoftmax`` the same at log p_k = x_k + const (the softmax logits).
"""

from __future__ import annotations

import numpy as np

from factorgraph.graph.nodes import FactorNode, Plate, Variable
from factorgraph.posterior.samplers.forward import Forward, param, sampler, softmax_logits


@sampler("Beta")
def _beta(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    a = np.broadcast_to(param(s, v, f, "alpha", frame), full)
    b = np.broadcast_to(param(s, v, f, "beta", frame), full)
    s.put(v, s.rng.beta(a, b), full)


def _bernoulli_probs(s: Forward, v: Variable, p: np.ndarray, full: tuple[int, ...]) -> None:
    s.put(v, (s.rng.random(full) < np.broadcast_to(p, full)).astype(float), full)


@sampler("Bernoulli")
def _bernoulli(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    _bernoulli_probs(s, v, s.arg(f.edges["probs"], frame, v.name), full)


@sampler("BernoulliLogit")
def _bernoulli_logit(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    x = s.arg(f.edges["logit"], frame, v.name)
    _bernoulli_probs(s, v, 0.5 * (1.0 + np.tanh(0.5 * x)), full)


@sampler("Probit")
def _probit(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    x = np.broadcast_to(s.arg(f.edges["x"], frame, v.name), full)
    s.put(v, np.where(x + s.rng.standard_normal(full) > 0, 1.0, -1.0), full)  # labels ±1, as stored


def _dirichlet_draw(rng: np.random.Generator, alpha: np.ndarray) -> np.ndarray:
    g = rng.gamma(alpha)
    return g / g.sum(-1, keepdims=True)


@sampler("Dirichlet")
def _dirichlet(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    alpha = np.broadcast_to(param(s, v, f, "concentration", frame), full + v.event_shape)
    s.put(v, _dirichlet_draw(s.rng, alpha), full)


def _labels_from_logp(rng: np.random.Generator, logp: np.ndarray, full: tuple[int, ...]) -> np.ndarray:
    logp = np.broadcast_to(logp, full + logp.shape[-1:])
    return np.argmax(logp + rng.gumbel(size=logp.shape), axis=-1)


@sampler("Categorical")
def _categorical(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    p = s.arg(f.edges["probs"], frame, v.name)
    with np.errstate(divide="ignore"):
        s.put(v, _labels_from_logp(s.rng, np.log(p), full), full)


@sampler("CategoricalSoftmax")
def _categorical_softmax(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...],
                         full: tuple[int, ...]) -> None:
    s.put(v, _labels_from_logp(s.rng, softmax_logits(s, v, f, frame, "logits"), full), full)


@sampler("IsPositive")
def _is_positive(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    """``fg.is_positive``: b = 1[x > 0], a function of its Gaussian x (no noise of its own)."""
    x = np.broadcast_to(s.arg(f.edges["x"], frame, v.name), full)
    s.put(v, (x > 0).astype(float), full)
