"""``result.summary()``: a pandas table of the posterior mean, sd and a central credible interval per scalar.

Intervals are the exact quantiles of q where its marginals have closed-form quantiles (scipy.stats'
``ppf``): Gaussian, Gamma, Beta, the Gaussian marginals of a multivariate Gaussian or of a Gaussian Markov
chain, and the Student-t and Gamma marginals of a normal–gamma block.  Other posteriors (mixtures, Dirichlet,
Categorical, the affine-independent families of AI-KL) take their interval from draws of q; their mean and sd
still come from q's moments where q has them.  The default probability 0.94 follows ArviZ's summaries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats

from distributions import (
    Beta,
    Categorical,
    Gamma,
    Gaussian,
    GaussianGamma,
    GridDensity,
    InverseSqrtGamma,
    MvGaussian,
    TiltedScale,
)
from distributions.gaussian_chain import GaussianChain
from distributions.gaussian_rows import GaussianRows

if TYPE_CHECKING:
    from .results import Result


def _names(name: str, shape: tuple[int, ...], labels: tuple = ()) -> list[str]:
    """Row labels name[i, j, ...]; ``labels[a]``, where given, names the entries of axis a (a plate's coords)."""
    if not shape:
        return [name]

    def entry(a: int, i: int) -> str:
        return str(labels[a][i]) if a < len(labels) and labels[a] is not None else str(i)

    return [f"{name}[{', '.join(entry(a, i) for a, i in enumerate(ix))}]" for ix in np.ndindex(*shape)]


def _plate_labels(result: Result, name: str) -> tuple:
    """The names of the entries of each plate of variable ``name`` (the model's ``coords``, e.g. the group names of
    ``models.hierarchical_regression``; None for a plate without), as ``to_arviz`` labels them."""
    model = getattr(result, "model", None)
    coords = getattr(model, "coords", None) or {}
    v = getattr(model, "variables", {}).get(name) if model is not None else None
    if v is None or not coords:
        return ()
    return tuple(coords.get(p.name) for p in v.plates)


def _exact(q: Any) -> list[tuple[str, Any, Any, Any]] | None:
    """(suffix, mean, sd, frozen scipy distribution) for q's marginals, or None when not closed-form."""
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


def summary(result: Result, prob: float = 0.94, draws: int = 4000, seed: int | None = 0) -> Any:
    """The posterior summary table of a fit: see ``Result.summary``."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("result.summary() needs pandas: pip install 'fgvmp[after]' (or pip install pandas)") \
            from None
    if not (isinstance(prob, float | int) and 0.0 < prob < 1.0):
        raise ValueError(f"summary: prob must lie in (0, 1), got {prob!r}")
    lo, hi = (1.0 - prob) / 2.0, (1.0 + prob) / 2.0
    cols = ["mean", "sd", f"{100 * lo:g}%", f"{100 * hi:g}%", "exact"]
    rows: list[list[Any]] = []
    index: list[str] = []
    sampled: dict[str, np.ndarray] | None = None
    for name in [*result.posteriors, *result.derived]:  # fg.deterministic nodes: exact moments, intervals by draws
        q = result.posterior(name)  # scale variables (fg.half_cauchy, ...) on the σ scale
        parts = _exact(q)
        if parts is not None:
            for suffix, m, s, dist in parts:
                m = np.asarray(m, float)
                lower = np.broadcast_to(dist.ppf(lo), m.shape)
                upper = np.broadcast_to(dist.ppf(hi), m.shape)
                s = np.broadcast_to(s, m.shape)
                index += _names(name + suffix, m.shape, _plate_labels(result, name))
                rows += [[a, b, c, d, True] for a, b, c, d in zip(m.ravel(), s.ravel(), lower.ravel(), upper.ravel(),
                                                                  strict=True)]
            continue
        if sampled is None:
            sampled = result.sample(draws, seed)
        x = np.asarray(sampled[name], float)
        if isinstance(q, Categorical):  # labels → one-hot: the rows are the probabilities q(z = k)
            x = (x[..., None] == np.arange(q.event_shape[0])).astype(float)
        try:
            m, s = np.asarray(q.mean(), float), np.asarray(q.std(), float)
        except (NotImplementedError, AttributeError):
            m, s = x.mean(0), x.std(0, ddof=1)
        m = np.broadcast_to(m, x.shape[1:])
        s = np.broadcast_to(s, x.shape[1:])
        lower, upper = np.quantile(x, [lo, hi], axis=0)
        index += _names(name, m.shape, _plate_labels(result, name))
        rows += [[a, b, c, d, False] for a, b, c, d in zip(m.ravel(), s.ravel(), lower.ravel(), upper.ravel(),
                                                           strict=True)]
    return pd.DataFrame(rows, index=pd.Index(index, name="variable"), columns=cols)
