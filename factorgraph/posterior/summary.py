"""``result.summary()``: a pandas table of the posterior mean, sd and a central credible interval per scalar.

Intervals are the exact quantiles of q where its marginals have closed-form quantiles (scipy.stats'
``ppf``): Gaussian, Gamma, Beta, the Beta(a_k, Σa − a_k) marginals of a Dirichlet, the Gaussian marginals of a
multivariate Gaussian or of a Gaussian Markov chain, the Student-t and Gamma marginals of a normal–gamma block,
and the 0/1 indicators 1[z = k] of a discrete label (Bernoulli(q(z = k)): of a Categorical, of each step of a
hidden Markov chain, of a Bernoulli variable).  Other posteriors (mixtures, Wishart matrices, the
affine-independent families of AI-KL) take their interval from draws of q; their mean and sd still come from
q's moments where q has them.  The default probability 0.94 follows ArviZ's summaries.

By default per-row latent variables (on plates of the observed data only: labels z_n, per-row effects, the
states of a chain) that would fill more than ``PER_ROW_LIMIT`` rows are left out; the table's
``attrs["notes"]`` says which, and ``var_names=`` selects variables by name.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distributions import (
    Bernoulli,
    Beta,
    Categorical,
    Dirichlet,
    Gamma,
    Gaussian,
    GaussianGamma,
    GridDensity,
    InverseSqrtGamma,
    MvGaussian,
    TiltedScale,
)
from distributions.categorical_chain import CategoricalChain
from distributions.gaussian_chain import GaussianChain
from distributions.gaussian_rows import GaussianRows
from factorgraph.graph import checks
from factorgraph.graph.nodes import ModelError
from factorgraph.posterior.samplers import check_draws, check_seed

PER_ROW_LIMIT = 100  # table rows above which a per-row latent variable is left out of the default summary


def _names(name: str, shape: tuple[int, ...], labels: tuple = ()) -> list[str]:
    """Row labels name[i, j, ...]; ``labels[a]``, where given, names the entries of axis a (a plate's coords)."""
    if not shape:
        return [name]

    def entry(a: int, i: int) -> str:
        return str(labels[a][i]) if a < len(labels) and labels[a] is not None else str(i)

    return [f"{name}[{', '.join(entry(a, i) for a, i in enumerate(ix))}]" for ix in np.ndindex(*shape)]


def _labels(result: Any, name: str, ndim: int) -> tuple:
    """The names of the entries of each axis of variable ``name``, as ``to_arviz`` labels them: a plate's by the
    model's ``coords`` (e.g. the group names of ``models.hierarchical_regression``), an event axis's by
    ``coords["<name>_dim_<i>"]`` (the columns of a DataFrame X in ``fg.inner(X, w)``); None where there are none."""
    model = getattr(result, "model", None)
    coords = getattr(model, "coords", None) or {}
    if not coords:
        return ()
    base = name.rsplit(".", 1)[0] if name not in model.variables else name
    node = model.variables.get(base) or getattr(model, "tracked", {}).get(base)
    if node is None or base != name:
        return ()
    plates = [coords.get(p.name) for p in node.plates]
    return tuple(plates + [coords.get(f"{name}_dim_{i}") for i in range(ndim - len(plates))])


def _indicators(p: Any) -> tuple[Any, Any, Any]:
    from scipy import stats  # scipy.stats is slow to import: loaded when a summary is asked for

    """Mean, sd and distribution of the 0/1 indicators 1[z = k] of a label with probabilities p: Bernoulli(p)."""
    p = np.clip(np.asarray(p, float), 0.0, 1.0)
    return p, np.sqrt(p * (1.0 - p)), stats.bernoulli(p)


def _exact(q: Any) -> list[tuple[str, Any, Any, Any]] | None:
    """(suffix, mean, sd, frozen scipy distribution) for q's marginals, or None when not closed-form."""
    from scipy import stats  # scipy.stats is slow to import: loaded when a summary is asked for

    if isinstance(q, Gaussian):
        m, s = q.mean(), q.std()
        return [("", m, s, stats.norm(m, s))]
    if isinstance(q, MvGaussian | GaussianChain | GaussianRows):  # a chain's one-step marginals are Gaussian
        m, s = q.mean(), np.sqrt(q.var())
        return [("", m, s, stats.norm(m, s))]
    if isinstance(q, Gamma):
        return [("", q.mean(), q.std(), stats.gamma(q.shape, scale=q.scale))]
    if isinstance(q, Beta):
        return [("", q.mean(), q.std(), stats.beta(q.alpha, q.beta))]
    if isinstance(q, Dirichlet):  # π_k ~ Beta(a_k, Σa − a_k)
        a = np.asarray(q.concentration, float)
        b = np.broadcast_to(a.sum(-1, keepdims=True), a.shape) - a
        dist = stats.beta(a, b)
        return [("", dist.mean(), dist.std(), dist)]
    if isinstance(q, Categorical | CategoricalChain):  # 1[z = k] ~ Bernoulli(q(z = k)), per step of a chain
        return [("", *_indicators(q.mean()))]
    if isinstance(q, Bernoulli):
        return [("", *_indicators(q.mean()))]
    if isinstance(q, GaussianGamma):  # w_i ~ Student-t(2a, μ_i, (b/a)·V_ii); τ ~ Gam(a, b)
        a, b = q.shape, q.rate
        V = np.diagonal(q.scale_matrix, axis1=-2, axis2=-1)
        scale = np.sqrt(b / a)[..., None] * np.sqrt(V)
        t = stats.t(2.0 * a[..., None], loc=q.mean(), scale=scale)
        tau = q.tau
        return [("", q.mean(), np.sqrt(q.var()), t), (".tau", tau.mean(), tau.std(), stats.gamma(a, scale=1.0 / b))]
    if isinstance(q, GridDensity):  # fg.ScaleQuadrature's σ: quantiles inverted in closed form on the grid
        return [("", q.mean(), q.std(), _Transformed(q.ppf))]
    if isinstance(q, TiltedScale):  # quantiles by Newton's method on its exact (quadrature) cdf
        return [("", q.mean(), q.std(), _Transformed(q.ppf))]
    if isinstance(q, InverseSqrtGamma):  # σ = τ^(−1/2), τ ~ Gam(a, b): σ's p-quantile is τ's (1 − p)-quantile^(−1/2)
        return [("", q.mean(), q.std(), _Transformed(q.ppf))]
    return None


class _Transformed:
    """A quantile function in the shape of a frozen scipy distribution (``ppf`` only)."""

    def __init__(self, ppf) -> None:
        self.ppf = ppf


def _present(q: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Which entries exist: all, except the steps past a sequence's length in a hidden Markov chain (their
    marginals are all zero)."""
    if isinstance(q, CategoricalChain):
        return np.broadcast_to(np.asarray(q.marginals).sum(-1, keepdims=True) > 0, shape)
    return np.ones(shape, bool)


def _per_row(result: Any, name: str) -> bool:
    """Whether variable ``name`` is a per-row latent: on plates, all of them plates of one observed variable (the
    labels z_n of a mixture, the states of a chain, per-row effects; not μ_k of a mixture nor group effects)."""
    model = getattr(result, "model", None)
    if model is None:
        return False
    node = model.variables.get(name) or getattr(model, "tracked", {}).get(name)
    if node is None or not node.plates:
        return False
    return any(v.mask is not None and set(node.plates) <= set(v.plates) for v in model.variables.values())


def _selected(result: Any, var_names: Any) -> tuple[list[str], set[str] | None, list[str]]:
    """The variables to summarise, the row names asked for (None: all of theirs), and the notes on what the
    default left out."""
    every = [*result.posteriors, *result.derived]  # fg.deterministic nodes: exact moments, intervals by draws
    if var_names is not None:
        names = [var_names] if isinstance(var_names, str) else var_names
        if not isinstance(names, list | tuple) or not names or not all(isinstance(n, str) for n in names):
            raise ModelError(f"summary: var_names must be a variable name or a list of them, got "
                             f"{checks._short(var_names)}")
        known = set(every) | {f"{n}.tau" for n in every}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ModelError(f"summary: no posterior for {unknown}; the variables are {every}")
        return [n for n in every if n in names or f"{n}.tau" in names], set(names), []
    out, left = [], []
    for name in every:
        if not _per_row(result, name):
            out.append(name)
            continue
        q = result.posterior(name)
        size = int(np.prod(tuple(q.batch_shape) + tuple(getattr(q, "event_shape", ()))))  # its rows in the table
        if size > PER_ROW_LIMIT:
            left.append(f"{name!r} ({size} rows)")
        else:
            out.append(name)
    notes = [f"left out per-row latent variables of more than {PER_ROW_LIMIT} rows: {', '.join(left)}; name them "
             "in var_names= to include them"] if left else []
    return out, None, notes


def summary(result: Any, prob: float = 0.94, draws: int = 4000, seed: int | None = 0, var_names: Any = None) -> Any:
    """The posterior summary table of a fit: see ``Result.summary``."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("result.summary() needs pandas: pip install 'fgvmp[after]' (or pip install pandas)") \
            from None
    prob = checks.number(prob, "summary: prob (in (0, 1))", low=0.0, high=1.0, low_open=True, high_open=True)
    draws = check_draws(draws, "summary")
    seed = check_seed(seed, "summary")
    names, wanted, notes = _selected(result, var_names)
    lo, hi = (1.0 - prob) / 2.0, (1.0 + prob) / 2.0
    cols = ["mean", "sd", f"{100 * lo:g}%", f"{100 * hi:g}%", "exact"]
    rows: list[list[Any]] = []
    index: list[str] = []

    def add(label: str, m: Any, s: Any, lower: Any, upper: Any, exact: bool, keep: np.ndarray) -> None:
        m = np.asarray(m, float)
        cells = [np.broadcast_to(np.asarray(a, float), m.shape)[keep] for a in (m, s, lower, upper)]
        index.extend(np.asarray(_names(label, m.shape, _labels(result, label, m.ndim)), dtype=object)
                     .reshape(m.shape)[keep].tolist() if m.shape else [label])
        rows.extend([a, b, c, d, exact] for a, b, c, d in zip(*cells, strict=True))

    sampled: dict[str, np.ndarray] | None = None
    for name in names:
        q = result.posterior(name)  # scale variables (fg.half_cauchy, ...) on the σ scale
        parts = _exact(q)
        if parts is not None:
            for suffix, m, s, dist in parts:
                if wanted is not None and name + suffix not in wanted and name not in wanted:
                    continue
                shape = np.shape(m)
                add(name + suffix, m, s, dist.ppf(lo), dist.ppf(hi), True, _present(q, shape))
            continue
        if sampled is None:
            sampled = result.sample(draws, seed)
        x = np.asarray(sampled[name], float)
        try:
            m, s = np.asarray(q.mean(), float), np.asarray(q.std(), float)
        except (NotImplementedError, AttributeError):
            m = s = None
        if m is not None and m.ndim == x.ndim and x.shape[1:] == m.shape[:-1]:  # labels → one-hot: q(z = k)
            x = (x[..., None] == np.arange(m.shape[-1])).astype(float)
        if m is None:
            m, s = x.mean(0), x.std(0, ddof=1)
        lower, upper = np.quantile(x, [lo, hi], axis=0)
        add(name, np.broadcast_to(m, x.shape[1:]), s, lower, upper, False, np.ones(x.shape[1:], bool))
    table = pd.DataFrame(rows, index=pd.Index(index, name="variable"), columns=cols)
    table.attrs["notes"] = notes
    table.attrs["intervals"] = intervals_source(result)
    return table


def intervals_source(result: Any) -> str:
    """Where a fit's intervals come from: q, mean field over the variables and the blocks the fit kept joint."""
    held = {**{name: "a joint block" for name in getattr(result, "joint", {})}, **getattr(result, "handled", {})}
    quadrature = getattr(result, "quadrature", None)
    if quadrature:
        held[quadrature["variable"]] = "integrated out by quadrature"
    kept = ("; kept jointly: " + ", ".join(f"{n!r} ({how})" for n, how in sorted(held.items()))) if held else ""
    return (f"intervals are quantiles of q, the fit's approximate posterior ({result.algorithm}): mean field, a "
            f"product over the variables and the blocks the model declares{kept}. Where the posterior couples "
            "variables strongly (a hierarchical scale and the effects it scales) mean-field intervals are too "
            "narrow; see the docs page 'How far is my fit?'")
