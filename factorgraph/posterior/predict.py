"""``fg.predict``: the posterior predictive of a fit's observed variables, at its data or at new data.

The predictive of an observed variable y at data D* is

    p(y* | D*, D) = ∫ p(y* | θ, D*) q(θ) dθ,

with q the fit's posterior approximation.  It is drawn by composition: θ⁽ˢ⁾ ~ q (``result.sample``, joint
where q is joint: a normal–gamma block, a global handler's Gaussian, a class-plated weight matrix), then
y*⁽ˢ⁾ ~ p(y | θ⁽ˢ⁾, D*) by the forward sampler of ``fg.sample_prior`` (one draw function per factor type,
non-conjugate ones included), the data nodes holding D*.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distributions import Categorical, GaussianGamma, GaussianWishart
from factorgraph.graph.data import swapped
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import Deterministic, Gate, Indexed, ModelError, Variable
from factorgraph.graph.resizing import data_plates, observed_roles
from factorgraph.posterior.fitted_data import without_data
from factorgraph.posterior.samplers.forward import Forward, check_draws, check_seed
from factorgraph.posterior.sampling import sample_posterior
from factors.onehot import OneHot


class FitRecord:
    """What ``fg.predict`` needs from a fit besides q: its model and the data it was fitted to.

    Kept on the result as ``result.fit_record``; it pickles empty (a model holds closures and compiled
    rules), so a result that went through pickle keeps its posteriors but cannot predict."""

    def __init__(self, model: Any = None, data: dict[str, Any] | None = None, version: int = 0) -> None:
        self.model, self.data, self.version = model, dict(data or {}), version

    def __reduce__(self) -> tuple:
        return (FitRecord, ())

    def __repr__(self) -> str:
        return f"FitRecord({getattr(self.model, 'name', None)!r})"


def predict(result: Any, data: dict[str, Any] | None = None, draws: int = 1000,
            seed: int | None = 0) -> dict[str, np.ndarray]:
    """Draws from the posterior predictive of the observed variables of a fit, at new data or at its own.

    Parameters
    ----------
    result
        A ``fg.Result`` of ``fg.infer`` in this session (any algorithm, global handlers included) fitted to
        data in memory: a fit by ``fg.SVI`` on streamed batches or a sharded fit on dask data keeps no model to
        draw from, and a Result loaded from a pickle keeps its posteriors but not its model.
    data
        New values of data nodes (``fg.data``) by name, e.g. ``{"X": X_new}``; a plate the data span may
        take a new size: every input on it (the X of ``fg.inner``, group labels, an exposure or a number
        of trials declared with ``fg.data``) must then be given too, never the observed values being
        predicted.  ``None`` (default): the data of the fit (posterior predictive replication).
    draws
        Number of joint draws S.
    seed
        Seed of the random generator (``None``: fresh entropy).

    Returns
    -------
    dict
        For each observed variable that is a leaf (no factor or expression uses it): draws of shape
        ``(draws, *plates, *event)`` from

            p(y* | D*, D) ≈ (1/S) Σ_s p(y* | θ⁽ˢ⁾, ℓ⁽ˢ⁾, D*),   θ⁽ˢ⁾ ~ q(θ),

        (Categorical variables as integer labels, ``fg.probit`` labels as ±1).

    Notes
    -----
    * Global latent variables θ (on no plate of the given data) are drawn from q, jointly where q is
      joint; the expressions on them (``fg.inner(X, w)``, sums) are evaluated on the new data.
    * Local latent variables ℓ on a plate of the given data (mixture labels, per-row effects) are new
      rows: they are drawn from their prior given the draws of θ, ℓ⁽ˢ⁾ ~ p(ℓ | θ⁽ˢ⁾), not from q of the fitted
      rows.  Without ``data`` every latent variable is drawn from q, so the draws replicate the fitted
      data (y_rep for posterior predictive checks).
    * An observed variable that other factors use (an observed covariate or selector) is an input: it is
      held at its data.  The observed values of the variables being predicted need not be given.
    * Leaves are then drawn from their factors, y⁽ˢ⁾ ~ p(y | pa(y)⁽ˢ⁾) (Bernoulli-logit, softmax, Poisson-log,
      binomial, Gaussian, Student-t sites, ... as in ``fg.sample_prior``).  The per-row weights λ_n of
      ``fg.student_t`` belong to its likelihood (they are not latent variables of the model): they are
      drawn from Gam(ν/2, ν/2), with a learned ν taken from ``result.hyper``, so y⁽ˢ⁾ is Student-t given θ⁽ˢ⁾.
    * Leaves with missing entries are drawn in full: the missing entries are imputed from the predictive.

    The model keeps its data: the new values hold only while the draws are made.
    """
    record = getattr(result, "fit_record", None)
    model = getattr(record, "model", None)
    if not isinstance(model, Model):
        if record is not None:  # the record pickles empty
            raise ModelError("predict needs the model of the fit, which a Result loaded from a pickle does not keep "
                             "(it keeps the posteriors): predict in the session that fitted it")
        if getattr(result, "posteriors", None) is None:
            raise ModelError(f"predict needs a fg.Result of fg.infer, got {type(result).__name__}")
        raise ModelError(f"predict needs the model and the data of the fit: {without_data(result)}")
    S = check_draws(draws, "predict")
    seed = check_seed(seed, "predict")
    if data is not None and not isinstance(data, dict):
        raise ModelError(f"predict: data must be a dict of data-node name -> array, got {type(data).__name__}")
    data = dict(data or {})
    for name in data:
        if name not in model.data:
            raise ModelError(f"predict: model {model.name!r} has no data node {name!r}; its data nodes are "
                             f"{sorted(model.data)}")
    leaves = _leaves(model)
    fitted = record.data
    # the new data, on top of the data of the fit where set_data has replaced them since; the observed
    # values of the leaves need not be given
    values = dict(data)
    if model.data_version != record.version:
        leaf_data = _leaf_data(model, leaves)
        values.update({k: v for k, v in fitted.items() if k not in values and k not in leaf_data})
    local = data_plates(model, data)
    rng = np.random.default_rng(seed)
    post_seed, fwd_seed = rng.integers(2**63, size=2)
    post = sample_posterior(result, S, int(post_seed))
    with swapped(model, values, frozenset(v.name for v in leaves), caller="predict"):
        fwd = Forward(model, S, np.random.default_rng(int(fwd_seed)))
        fwd.hyper = dict(getattr(result, "hyper", {}))
        for v in model.variables.values():
            if v in leaves:
                fwd.variable(v)
            elif v.is_latent and v.name in post and not set(v.plates) & local:
                _from_q(fwd, v, post, result)
            elif v.is_latent:
                if v.name not in post and not set(v.plates) & local:
                    raise ModelError(f"predict: the latent {v.name!r} has no posterior in the result")
                fwd.variable(v)
            else:
                _held(fwd, v)
        return {v.name: fwd.out[v.name] for v in leaves}


def _from_q(fwd: Forward, v: Variable, post: dict[str, np.ndarray], result: Any) -> None:
    fwd.out[v.name] = post[v.name]
    if v.family is GaussianGamma:
        fwd.out[f"{v.name}.tau"] = post[f"{v.name}.tau"]
    if v.family is GaussianWishart:
        fwd.out[f"{v.name}.precision"] = post[f"{v.name}.precision"]
    if v.name in getattr(result, "scales", ()):  # σ of fg.half_cauchy and kin; parents use σ⁻²
        fwd.precision[v.name] = post[v.name] ** -2.0


def _held(fwd: Forward, v: Variable) -> None:
    """An observed input: its data, as the sampler represents it, on every draw."""
    x = v.value
    if isinstance(x, OneHot):
        x = np.maximum(x.labels, 0)
    elif v.family is Categorical:
        x = np.argmax(np.nan_to_num(x), axis=-1)
    fwd.out[v.name] = np.broadcast_to(x, (fwd.S, *x.shape)).copy()


def _leaves(model: Any) -> list[Variable]:
    """Observed (or partly observed) variables that no factor or expression uses: the predicted ones."""
    used: set[int] = set()
    for f in model.factors:
        for edge, a in f.edges.items():
            if edge == "out":
                continue
            for node in _targets(a):
                used.add(id(node))
        for a in f.params.values():
            if isinstance(a, Gate):
                used.add(id(a.selector))
    for d in model.deterministics:
        for a in d.parents.values():
            for node in _targets(a):
                used.add(id(node))
    return [v for v in model.variables.values() if v.mask is not None and id(v) not in used]


def _targets(a: Any) -> list[Any]:
    out = []
    if isinstance(a, Gate):
        out.append(a.selector)
        a = a.source
    while isinstance(a, Indexed):
        a = a.source
    if isinstance(a, Variable | Deterministic):
        out.append(a)
    if hasattr(a, "variable"):  # w.tau
        out.append(a.variable)
    return out


def _leaf_data(model: Any, leaves: list[Variable]) -> set[str]:
    """The data nodes read only as the observed values (or mask) of ``leaves``."""
    return {d.name for d in model.data.values() if d.uses and all(
        isinstance(u, Variable) and u in leaves and d.name in observed_roles(u) for u in d.uses)}


__all__ = ["FitRecord", "predict"]
