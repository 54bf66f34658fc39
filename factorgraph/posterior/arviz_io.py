"""``result.to_arviz()``: a fit as an ``arviz.InferenceData`` (posterior draws, data, pointwise log-likelihoods).

The posterior group holds independent draws from the variational posterior q, split into chains (4 by
default) only so that ArviZ's diagnostics have chains to compare: R-hat ≈ 1 and ESS ≈ the number of draws
check the Monte Carlo draws, and say nothing about convergence of the fit; the
log_likelihood group holds log p(y_i | θ⁽ˢ⁾) at those draws (``factorgraph.posterior.loglik``), so ``az.loo`` and
``az.waic`` estimate the expected log predictive density of the model under q.  Save and load with
ArviZ's netCDF (``idata.to_netcdf(path)``, ``az.from_netcdf(path)``).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from distributions import Categorical
from factorgraph.graph import checks
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError, Variable
from factorgraph.posterior.fitted_data import without_data
from factorgraph.posterior.loglik import labels, observed_plates, pointwise_log_likelihood, present_entries
from factorgraph.posterior.predict import predict
from factorgraph.posterior.samplers import check_draws, check_seed
from factorgraph.posterior.sampling import sample_prior
from factors.onehot import OneHot


def _import_arviz():
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # ArviZ's notice of its coming refactor
            import arviz as az
    except ImportError:
        raise ImportError("to_arviz needs ArviZ: pip install 'fgvmp[after]' (or pip install arviz)") from None
    return az


def _event_dims(model: Model, name: str, v: Variable | None, ndim: int) -> list[str]:
    """Names of a variable's event axes: the plate its components index where the model says so (a
    Dirichlet's categories are its Categoricals' category plate), else ``<name>_dim_<i>``."""
    if v is not None and ndim == 1:
        for z in model.variables.values():
            if z.prior is not None and z.prior.ftype.name == "Categorical" and z.prior.edges.get("probs") is v \
                    and z.category_plate is not None and z.category_plate.size == v.event_shape[0]:
                return [z.category_plate.name]
    return [f"{name}_dim_{i}" for i in range(ndim)]


def _dims(model: Model, name: str, arr_ndim: int, lead: int) -> list[str]:
    """Dims of an array (``lead`` leading axes excluded) of variable ``name`` (or ``"w.tau"``, or a named
    deterministic node: its plates)."""
    if name in getattr(model, "tracked", {}):
        return [p.name for p in model.tracked[name].plates]
    base = name.rsplit(".", 1)[0] if name not in model.variables else name
    v = model.variables.get(base)
    if base != name and name.endswith(".tau"):  # the precision of a normal–gamma block: one scalar per draw
        return []
    if base != name:  # a normal–Wishart block's precision matrices: its plates, then D × D
        plates = [p.name for p in v.plates]
        return plates + [f"{name}_dim_{i}" for i in range(arr_ndim - lead - len(plates))]
    plates = [p.name for p in v.plates] if v is not None else []
    return plates + _event_dims(model, name, v, arr_ndim - lead - len(plates))


def _chains(x: np.ndarray, chains: int) -> np.ndarray:
    """S draws (S, ...) as ``chains`` chains of S/chains consecutive draws, (chains, S/chains, ...)."""
    return x.reshape(chains, x.shape[0] // chains, *x.shape[1:])


def _group(model: Model, draws: dict[str, np.ndarray], names: list[str], chains: int) -> tuple[dict, dict]:
    data, dims = {}, {}
    for n in names:
        x = np.asarray(draws[n])
        data[n] = _chains(x, chains)
        dims[n] = _dims(model, n, x.ndim, 1)
    return data, dims


def _log_likelihood(model: Model, draws: dict[str, np.ndarray], hyper: dict, chains: int
                    ) -> tuple[dict, dict, dict]:
    """Pointwise log-likelihoods (chain, draw, *rows); variables with missing entries keep only their
    observed ones, along one dim ``<name>_observed`` whose coordinate is the flat index of the entry."""
    ll = pointwise_log_likelihood(model, draws, hyper)
    data, dims, coords = {}, {}, {}
    for n, x in ll.items():
        plates = [p.name for p in observed_plates(model, n)]
        keep = ~np.isnan(x[0])
        if keep.all():
            data[n], dims[n] = _chains(x, chains), plates
            continue
        flat = np.flatnonzero(keep.ravel())
        data[n] = _chains(x.reshape(x.shape[0], -1)[:, flat], chains)
        dims[n] = [f"{n}_observed"]
        coords[f"{n}_observed"] = flat
    return data, dims, coords


def to_arviz(result: Any, draws: int = 1000, seed: int | None = 0, prior: bool = False,
             posterior_predictive: bool = False, chains: int = 4) -> Any:
    """The fit as an ``arviz.InferenceData``: see ``Result.to_arviz``."""
    draws = check_draws(draws, "to_arviz")
    chains = checks.integer(chains, "to_arviz: chains", low=1)
    if draws % chains:
        lower, upper = draws - draws % chains, draws - draws % chains + chains
        raise ModelError(f"to_arviz: {draws} draws do not split into {chains} chains of equal length; pass draws="
                         f"{upper}" + (f" or {lower}" if lower else "") + f" (a multiple of chains={chains}), or "
                         "chains=1")
    seed = check_seed(seed, "to_arviz")
    prior = checks.flag(prior, "to_arviz: prior")
    posterior_predictive = checks.flag(posterior_predictive, "to_arviz: posterior_predictive")
    az = _import_arviz()
    model = result.model
    if model is None:
        raise ModelError(f"to_arviz needs the model and the data of the fit: {without_data(result)}")
    post = result.sample(draws, seed)
    tracked = getattr(model, "tracked", {})
    names = [n for n in post if n in model.variables or n.rsplit(".", 1)[0] in model.variables or n in tracked]
    posterior, dims = _group(model, post, names, chains)
    observed = [v for v in model.variables.values() if v.mask is not None and np.any(v.mask)]
    obs_data = {}
    for v in observed:
        seen = present_entries(v)
        if isinstance(v.value, OneHot):  # class labels: the data are labels, as the posterior's draws are
            y = labels(v).astype(float)
        else:
            y = np.asarray(v.value, float)
        if v.family is Categorical and y.ndim > len(v.shape) and np.all(np.isin(y[seen], (0.0, 1.0))) and np.all(
                y[seen].sum(-1) == 1):
            y = labels(v).astype(float)  # stored one-hot; the data are labels, as the posterior's draws are
        m = seen.reshape(v.shape + (1,) * (y.ndim - len(v.shape)))
        obs_data[v.name] = np.where(m, y, np.nan)
        dims.setdefault(v.name, _dims(model, v.name, y.ndim, 0))
    try:
        loglik, ll_dims, coords = _log_likelihood(model, post, result.hyper, chains)
    except ModelError as e:
        absent = [n for n, v in model.variables.items() if v.is_latent and n not in post]
        if not absent:
            raise
        svi = ("; a fit by fg.SVI(exact_elbo=False) keeps only its global posteriors (the default exact_elbo=True "
               "fits every row's local ones in a final pass)") if result.algorithm == "svi" else ""
        raise ModelError(f"to_arviz: the log-likelihood needs draws of latent variables this Result has no posterior "
                         f"for, among {absent} ({e}){svi}") from None
    groups: dict[str, Any] = {"posterior": posterior, "observed_data": obs_data, "log_likelihood": loglik}
    if prior:
        pri = sample_prior(model, draws, seed)
        lat = [n for n in pri if (n in model.variables and n not in obs_data) or n.endswith(".tau")]
        groups["prior"], _ = _group(model, pri, lat, chains)
        groups["prior_predictive"], _ = _group(model, pri, [v.name for v in observed], chains)
    if posterior_predictive:
        rep = predict(result, None, draws, seed)  # replicates of the fitted data, y⁽ˢ⁾ ~ p(y | θ⁽ˢ⁾)
        groups["posterior_predictive"], _ = _group(model, rep, [n for n in rep if n in obs_data], chains)
    named = getattr(model, "coords", {})  # e.g. the group names of models.hierarchical_regression
    for p in model.plates.values():
        coords[p.name] = np.asarray(named[p.name]) if p.name in named else np.arange(p.size)
    used = {d for ds in dims.values() for d in ds}
    coords.update({k: np.asarray(v) for k, v in named.items() if k in used and k not in coords})  # X's columns
    attrs = {"inference_library": "fgvmp", "model": model.name, "algorithm": result.algorithm,
             "evidence": float(result.elbo), "evidence_kind": result.evidence_kind,
             "draws_from": f"the variational posterior q ({draws} independent draws, split into {chains} chains)"}
    # a log-likelihood variable's dims can differ from its data's (mixture rows, observed entries only)
    idata = az.from_dict(**{g: d for g, d in groups.items() if g != "log_likelihood"}, dims=dims, coords=coords,
                         attrs=attrs)
    ll = az.from_dict(log_likelihood=loglik, dims=ll_dims, coords=coords, attrs=attrs)
    idata.extend(ll)
    return idata


__all__ = ["to_arviz"]
