"""``fg.agreement(result, reference)``: how far a fit's posterior means and spreads are from a sampler's.

For every scalar θ_i of the latent variables the two share, the table gives the fit's mean m_i and sd s_i, the
reference's m_i^ref and s_i^ref, the standardised distance |m_i − m_i^ref| / s_i^ref, the sd ratio s_i / s_i^ref
(below 1: the fit is too narrow, the usual failing of mean field) and the Monte Carlo standard error of the
reference mean, mcse_i = s_i^ref / √ESS_i (ESS by ArviZ, over the reference's chains), which says how much of a
small distance is the reference's own noise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from factorgraph.graph.nodes import ModelError
from factorgraph.posterior.arviz_io import _import_arviz
from factorgraph.posterior.empirical import GibbsResult, _flat
from factorgraph.posterior.results import Result


def _reference_draws(reference: Any) -> dict[str, np.ndarray]:
    """Variable name -> (chains, draws, *shape) from a Gibbs result or an ``arviz.InferenceData``."""
    if isinstance(reference, GibbsResult):
        return {n: np.asarray(x, float) for n, x in reference.draws.items()}
    post = getattr(reference, "posterior", None)
    if post is not None and hasattr(post, "data_vars"):
        return {str(n): np.asarray(post[n].values, float) for n in post.data_vars}
    raise ModelError(f"agreement: the reference must be a Gibbs result (fg.infer(model, algorithm=fg.Gibbs())) or an "
                     f"arviz.InferenceData with a posterior group, got {type(reference).__name__}")


def reference_draws(reference: Any) -> dict[str, np.ndarray]:
    """A sampler's draws by variable name, each ``(chains, draws, *shape)``, from a Gibbs result or an
    ``arviz.InferenceData`` with a posterior group (the references ``agreement`` takes)."""
    return _reference_draws(reference)


def _fit_moments(result: Any, name: str, shape: tuple, draws: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The fit's mean and sd of variable ``name`` per scalar, of the shape of the reference's draws: the
    posterior's own moments where they have that shape, else from ``draws`` draws of the fit."""
    if isinstance(result, GibbsResult):
        q = result.posterior(name)
        return q.mean(), q.std()
    q = result.posterior(name)
    try:
        mean, var = np.asarray(q.mean(), float), np.asarray(q.var(), float)
        if mean.shape == shape and var.shape == shape:
            return mean, np.sqrt(var)
    except (AttributeError, NotImplementedError, ValueError):
        pass
    x = np.asarray(result.sample(draws, seed)[name], float)
    return x.mean(0), x.std(0, ddof=1)


def agreement(result: Result, reference: Any, draws: int = 4000, seed: int = 0) -> Any:
    """A pandas DataFrame comparing ``result``'s posterior with a sampler's, one row per scalar ``name[i, j]``.

    Parameters
    ----------
    result
        Any fit (``fg.infer``): VMP, NCVMP, a handler's, SVI, or another Gibbs run.
    reference
        A Gibbs result or an ``arviz.InferenceData`` (e.g. from PyMC or Stan) whose posterior group holds draws
        of variables named as in the model, dims ``(chain, draw, *plates, *event)``.
    draws, seed
        Draws of ``result`` used where its posterior has no closed-form mean and variance of the reference's
        shape (a label's draws are its integer values).

    Returns
    -------
    pandas.DataFrame
        Columns ``mean``, ``sd`` (the fit's), ``mean_ref``, ``sd_ref``, ``z`` = |mean − mean_ref| / sd_ref,
        ``sd_ratio`` = sd / sd_ref, ``mcse_ref`` = sd_ref / √ESS (the Monte Carlo standard error of mean_ref,
        ESS of the mean by ArviZ) and ``variable``.  Variables of only one side are left out and named in
        ``table.attrs["left_out"]``.
    """
    import pandas as pd
    az = _import_arviz()
    if not isinstance(result, Result):
        raise ModelError(f"agreement: result must be a Result of fg.infer, got {type(result).__name__}")
    ref = _reference_draws(reference)
    latent = set(result.draws) if isinstance(result, GibbsResult) else set(result.posteriors) | set(result.local)
    shared = [n for n in ref if n in latent]
    if not shared:
        raise ModelError(f"agreement: the reference has no draws of the fit's latent variables {sorted(latent)}; it "
                         f"has {sorted(ref)}")
    rows, index = [], []
    for name in shared:
        x = ref[name]
        if x.ndim < 2:
            raise ModelError(f"agreement: the reference's draws of {name!r} must have dims (chain, draw, ...), got "
                             f"shape {x.shape}")
        mean, sd = _fit_moments(result, name, x.shape[2:], draws, seed)
        fm, fs = _flat(name, np.broadcast_to(mean, x.shape[2:])[None, None]), _flat(
            name, np.broadcast_to(sd, x.shape[2:])[None, None])
        for label, y in _flat(name, x).items():
            m_ref, s_ref = float(y.mean()), float(y.std(ddof=1))
            ess = float(az.ess(y, method="mean")) if s_ref > 0 else float(y.size)
            m, s = float(fm[label].squeeze()), float(fs[label].squeeze())
            with np.errstate(divide="ignore", invalid="ignore"):
                z, ratio = abs(m - m_ref) / s_ref, s / s_ref
            rows.append((m, s, m_ref, s_ref, z, ratio, s_ref / np.sqrt(ess), name))
            index.append(label)
    table = pd.DataFrame(rows, index=index, columns=["mean", "sd", "mean_ref", "sd_ref", "z", "sd_ratio", "mcse_ref",
                                                     "variable"])
    table.attrs["left_out"] = sorted(set(ref) ^ latent)
    return table


__all__ = ["agreement", "reference_draws"]
