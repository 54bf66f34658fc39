"""Sampling: forward (ancestral) draws from a model's prior and draws from a fitted posterior.

``fg.sample_prior(model, draws, seed)`` walks the model in the order its variables were declared
(every parent is declared before its children), draws each variable given its parents' draws, and
evaluates the deterministic nodes on the way; observed variables are drawn too (their data are
ignored), which gives the prior predictive.  ``result.sample(draws, seed)`` draws from the posterior
approximation q, jointly where q is joint.  The draw of one variable from its prior factor is the
sampler of the factor's family (``factorgraph.posterior.samplers``).

Every array has the draws as its first axis, then the node's plates (in the model's declaration
order), then its event axes: ``(draws, *plates, *event)``.  Categorical variables are integer labels.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distributions import GaussianGamma, GaussianWishart
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError
from factorgraph.posterior.samplers import Forward, check_draws, check_seed


# ---------------------------------------------------------------------- public API
def sample_prior(model: Model, draws: int = 1000, seed: int | None = 0) -> dict[str, np.ndarray]:
    """Forward (ancestral) draws of every variable of a model from its prior, observed ones included.

    Parameters
    ----------
    model
        An ``fg.Model``.
    draws
        Number of joint draws S.
    seed
        Seed of the random generator (``None``: fresh entropy).

    Returns
    -------
    dict
        Variable name → array of shape ``(draws, *plates, *event)``, in the model's declaration order,
        with the deterministic nodes (``fg.inner``, sums, products) evaluated on the draws.  A
        normal–gamma block ``w`` gives ``"w"`` and its precision ``"w.tau"``; a scale made by
        ``fg.half_cauchy`` and the like gives σ; Categorical variables are integer labels; labels of
        ``fg.probit`` are ±1.  Observed variables are drawn afresh (the prior predictive), ignoring their
        data; a multinomial keeps its observed numbers of trials.

    Notes
    -----
    Each variable is drawn from its prior factor given its parents' draws: p(x) = Π_i p(x_i | pa(x_i))
    (ancestral sampling), gates (``x[z]``) selecting by the drawn labels and indexed views (``x[idx]``)
    gathering by their labels.  Site potentials (``fg.laplace_site`` and kin) are drawn as the
    observation model they define: location = x + noise.
    """
    if not isinstance(model, Model):
        raise ModelError(f"sample_prior needs an fg.Model, got {type(model).__name__}")
    S = check_draws(draws, "sample_prior")
    seed = check_seed(seed, "sample_prior")
    fwd = Forward(model, S, np.random.default_rng(seed))
    for v in model.variables.values():
        fwd.variable(v)
    for d in model.deterministics:
        fwd.value(d)
    return fwd.out


def sample_posterior(result: Any, draws: int = 1000, seed: int | None = 0) -> dict[str, np.ndarray]:
    """Draws from the posterior approximation q of a fit (``result.sample``); see ``Result.sample``."""
    S = check_draws(draws, "result.sample")
    seed = check_seed(seed, "result.sample")
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    quad = getattr(result, "quadrature", None)
    if quad is not None:  # fg.ScaleQuadrature: a node per draw, then σ at the node and the rest from q_node
        nodes = rng.choice(quad["weights"].size, size=S, p=quad["weights"])
        for name, q in result.posteriors.items():
            out[name] = np.exp(quad["u"][nodes]) if name == quad["variable"] else q.sample_at(nodes, rng)
        return _with_tracked(result, out, S, rng)
    for name in result.posteriors:
        q = result.posterior(name)  # scale variables (fg.half_cauchy, ...) on the σ scale
        joint = result.joint.get(name)
        if joint is not None:  # class-plated weights handled as one block: q over the stacked vector
            shape = q.batch_shape + q.event_shape
            out[name] = np.asarray(joint.sample(S, rng)).reshape((S, *shape))
            continue
        x = q.sample(S, rng)
        if isinstance(q, GaussianGamma):
            out[name], out[f"{name}.tau"] = (np.asarray(a) for a in x)
        elif isinstance(q, GaussianWishart):  # joint (μ, Λ): the mean under the name, Λ as "<name>.precision"
            out[name], out[f"{name}.precision"] = (np.asarray(a) for a in x)
        else:
            out[name] = np.asarray(x)
    return _with_tracked(result, out, S, rng)


def _with_tracked(result: Any, out: dict[str, np.ndarray], S: int, rng: np.random.Generator) -> dict:
    """Add the draws of the model's named deterministic nodes (``fg.deterministic``), evaluated on the joint
    draws of q (fully observed variables at their data)."""
    model = result.model
    tracked = getattr(model, "tracked", {}) if model is not None else {}
    if not tracked:
        return out
    fw = Forward(model, S, rng)
    fw.out.update(out)
    for v in model.variables.values():
        if v.name not in fw.out and v.mask is not None and not v.is_latent:
            fw.out[v.name] = np.broadcast_to(np.asarray(v.value, dtype=float), (S, *np.shape(v.value)))
    for name, d in tracked.items():
        try:
            out[name] = np.asarray(fw.value(d))
        except ModelError as e:
            raise ModelError(f"result.sample: the deterministic node {name!r} cannot be drawn from this fit ({e})") \
                from None
    return out


__all__ = ["sample_prior", "sample_posterior"]
