"""Hierarchical (multilevel) linear regression with varying intercepts and slopes (Gelman & Hill 2007).

    y_n ~ N(α_{g(n)} + x_nᵀβ_{g(n)}, τ⁻¹)                       (varying intercepts and slopes)
    α_g ~ N(μ_α, τ_α⁻¹),  β_gd ~ N(μ_βd, τ_βd⁻¹)               (partial pooling)
    μ_α, μ_βd ~ N(0, λ₀⁻¹),  τ_α, τ_βd, τ ~ Gam(a₀, b₀)

An effect that does not vary is shared by all groups (α ~ N(0, λ₀⁻¹); β ~ N(0, λ₀⁻¹I) with a full
covariance posterior); ``pooling="none"`` gives each group's effects independent N(0, λ₀⁻¹) priors
instead of a learned population.  Varying slopes are mean field over the columns of X (updated one
column at a time, so each step is coordinate ascent).

``scale_prior="half_normal"`` (or ``"half_cauchy"``, ``"exponential"``) puts that prior on the population sds
σ_α = τ_α^(−1/2), σ_βd instead of a Gamma on the precisions; ``parametrisation="non_centred"`` then writes the
varying intercepts as α_g = μ_α + σ_α·η_g, η_g ~ N(0, 1), and ``integrate_scale=True`` integrates σ_α out by
quadrature (``fg.ScaleQuadrature``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distributions import Gaussian
from factorgraph.graph import checks
from factorgraph.graph.builders import gamma, gaussian, mv_gaussian, plate
from factorgraph.graph.derived import deterministic
from factorgraph.graph.expressions import feature_names, inner, label_features
from factorgraph.graph.indexing import _labels, index
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError
from factorgraph.graph.scales import exponential, half_cauchy, half_normal
from factorgraph.posterior.results import Result
from schedules import ScaleQuadrature, infer

VARYING = ("intercept", "slope")
POOLING = ("partial", "none")
# a prior on a population sd σ with scale s (the exponential's rate is 1/s, its mean s)
SCALE_PRIORS = {"half_normal": half_normal, "half_cauchy": half_cauchy,
                "exponential": lambda name, scale, plates=(): exponential(name, 1.0 / scale, plates=plates)}
PARAMETRISATIONS = ("centred", "non_centred")


def _scale_options(scale_prior: Any, scale: Any, parametrisation: Any, v: tuple[str, ...], pooling: str) -> float:
    """Check the population-scale options; the scale s of the sd prior."""
    if scale_prior is not None and (not isinstance(scale_prior, str) or scale_prior not in SCALE_PRIORS):
        raise ModelError(f"scale_prior must be None (Gamma priors on the precisions) or one of {sorted(SCALE_PRIORS)}, "
                         f"got {scale_prior!r}")
    if not isinstance(parametrisation, str) or parametrisation not in PARAMETRISATIONS:
        raise ModelError(f"parametrisation must be one of {PARAMETRISATIONS}, got {parametrisation!r}")
    if parametrisation == "non_centred":
        if scale_prior is None:
            raise ModelError("parametrisation='non_centred' needs a scale_prior (e.g. scale_prior='half_normal'): the "
                             "intercepts are then μ + σ·η with σ that prior's sd")
        if "intercept" not in v or pooling != "partial":
            raise ModelError("parametrisation='non_centred' applies to varying intercepts with partial pooling; "
                             f"here varying={v!r}, pooling={pooling!r}")
    return checks.positive_number(scale, "scale")


def _varying(varying: Any) -> tuple[str, ...]:
    if not isinstance(varying, str | list | tuple):
        raise ModelError(f"varying must be a tuple drawn from {VARYING} (each at most once), got {varying!r}")
    v = (varying,) if isinstance(varying, str) else tuple(varying)
    bad = [x for x in v if not isinstance(x, str) or x not in VARYING]
    if bad or len(set(v)) != len(v):
        raise ModelError(f"varying must be a tuple drawn from {VARYING} (each at most once), got {varying!r}")
    return v


def hierarchical_regression_model(X: Any, y: Any, groups: Any, varying: Any = ("intercept",), *,
                                  n_groups: int | None = None, pooling: str = "partial",
                                  prior_precision: float = 1e-2, a0: float = 1.0, b0: float = 1.0,
                                  scale_prior: str | None = None, scale: float = 1.0,
                                  parametrisation: str = "centred", name: str | None = None) -> Model:
    """The model of ``hierarchical_regression`` (for ``fg.infer`` or ``fg.compare``).

    Variables: ``intercept`` (plated over the groups if it varies), ``slope`` (groups × columns if
    slopes vary, else a D-vector), their population ``intercept_mean``, ``intercept_precision``,
    ``slope_mean``, ``slope_precision`` (with partial pooling) and ``noise_precision``.  With a
    ``scale_prior`` the population sds ``intercept_sd``, ``slope_sd`` replace the precisions; non-centred,
    ``intercept_raw`` holds η and ``intercept`` is the named quantity μ_α + σ_α·η_g.
    """
    v = _varying(varying)
    if not isinstance(pooling, str) or pooling not in POOLING:
        raise ModelError(f"pooling must be one of {POOLING}, got {pooling!r}")
    s = _scale_options(scale_prior, scale, parametrisation, v, pooling)
    ya, hidden = checks.as_float_array(y, "y")
    ya = ya.reshape(-1)
    present = np.isfinite(ya) & (True if hidden is None else ~np.asarray(hidden).reshape(-1))
    if np.any(np.isinf(ya)):
        raise ModelError(f"y must be finite or NaN (missing), got {checks._item(ya[np.isinf(ya)][0])!r}")
    N = ya.shape[0]
    if X is None:
        Xa = np.zeros((N, 0))
    else:
        Xa = checks.constant(X, "X")
        Xa = Xa[:, None] if Xa.ndim == 1 else Xa
        if Xa.ndim != 2 or Xa.shape[0] != N:
            raise ModelError(f"X must be a matrix with one row per observation ({N}), got shape {Xa.shape}")
    D = Xa.shape[1]
    if "slope" in v and D == 0:
        raise ModelError("varying slopes need X with at least one column")
    g_lab, G, names = _groups(groups, n_groups)
    if g_lab.shape[0] != N:
        raise ModelError(f"groups has {g_lab.shape[0]} labels but y has {N} observations")
    lam = checks.positive_number(prior_precision, "prior_precision")
    kinds = "+".join(v) if v else "complete pooling"
    with Model(name or f"hierarchical_regression ({kinds}{', no pooling' if pooling == 'none' and v else ''})") as m:
        n, g = plate("n", N), plate("groups", G)
        d = plate("columns", D) if D else None

        def effect(stem: str, plates: list) -> Any:
            if pooling == "none":
                return gaussian(stem, mean=0.0, precision=lam, plates=[g, *plates])
            mean = gaussian(f"{stem}_mean", mean=0.0, precision=lam, plates=plates)
            if scale_prior is None:
                prec = gamma(f"{stem}_precision", shape=a0, rate=b0, plates=plates)
                return gaussian(stem, mean=mean, precision=prec, plates=[g, *plates])
            sd = SCALE_PRIORS[scale_prior](f"{stem}_sd", s, plates=plates)
            return gaussian(stem, mean=mean, sd=sd, plates=[g, *plates])

        if "intercept" in v and parametrisation == "non_centred":
            mean = gaussian("intercept_mean", mean=0.0, precision=lam)
            sd = SCALE_PRIORS[scale_prior]("intercept_sd", s)
            raw = gaussian("intercept_raw", mean=0.0, precision=1.0, plates=[g])
            deterministic("intercept", mean + sd * raw)  # reported per group; the likelihood reads raw[g]
            terms = [mean + sd * index(raw, g_lab, plate=n)]
        elif "intercept" in v:
            terms = [index(effect("intercept", []), g_lab, plate=n)]
        else:
            terms = [gaussian("intercept", mean=0.0, precision=lam)]
        if D and "slope" in v:
            terms.append(inner(Xa, index(effect("slope", [d]), g_lab, plate=n, along=g), plates=[n]))
        elif D:
            terms.append(inner(Xa, mv_gaussian("slope", mean=0.0, precision=lam, dim=D), plates=[n]))
        tau = gamma("noise_precision", shape=a0, rate=b0)
        mean = terms[0]
        for t in terms[1:]:
            mean = mean + t
        if present.all():
            gaussian("y", mean=mean, precision=tau, plates=[n], observed=ya)
        else:  # missing outcomes drop out of the likelihood (the fit of the other rows)
            gaussian("y", mean=mean, precision=tau, plates=[n], observed=np.where(present, ya, 0.0), mask=present)
    if names is not None:
        m.coords["groups"] = names
    label_features(m, feature_names(X), "columns", "slope_dim_0")
    return m


def _named(arr: np.ndarray) -> bool:
    """Whether group labels are names (strings) rather than integer codes."""
    return arr.dtype.kind in "US" or (arr.dtype == object and any(isinstance(v, str | bytes) for v in arr.ravel()))


def _groups(groups: Any, n_groups: Any) -> tuple[np.ndarray, int, np.ndarray | None]:
    """The group of each row as an integer code, the number of groups G and, for named groups, the names of
    codes 0..G−1 (sorted; None for integer codes)."""
    try:
        arr = np.asarray(np.ma.getdata(groups) if np.ma.isMaskedArray(groups) else groups)
    except (TypeError, ValueError):  # ragged: _labels says so
        arr = np.zeros(0)
    if arr.ndim == 1 and arr.size and _named(arr) and not np.ma.is_masked(groups):
        if n_groups is not None:
            raise ModelError(f"n_groups={n_groups!r} applies to integer group codes; the groups here are named "
                             f"(e.g. {arr[0].item()!r}), one group per distinct name, so leave n_groups out (or give "
                             "integer codes in 0..n_groups−1 to keep groups that have no rows)")
        absent = np.frompyfunc(lambda v: v is None or (isinstance(v, float) and v != v), 1, 1)(arr).astype(bool)
        if absent.any():
            rows = np.flatnonzero(absent)
            raise ModelError(f"groups: row(s) {checks._short(rows.tolist())} have no group name "
                             f"({arr[rows[0]]!r}); every row needs a group: drop those rows or name their group")
        try:
            names, codes = np.unique(arr, return_inverse=True)
        except TypeError:
            raise ModelError("groups must be integer codes or names (strings), not a mix of both; got "
                             f"{checks._short(arr.tolist())}") from None
        return codes.reshape(-1).astype(np.int64), len(names), names
    if n_groups is None:
        numeric = arr.size and arr.dtype != bool and np.issubdtype(arr.dtype, np.number) and np.all(np.isfinite(arr))
        G = int(np.max(arr)) + 1 if numeric and np.max(arr) >= 0 else 1
    else:
        G = checks.positive_int(n_groups, "n_groups")
    return _labels("groups", groups, G), G, None


def hierarchical_regression(X: Any, y: Any, groups: Any, varying: Any = ("intercept",), *,
                            n_groups: int | None = None, pooling: str = "partial", prior_precision: float = 1e-2,
                            a0: float = 1.0, b0: float = 1.0, scale_prior: str | None = None, scale: float = 1.0,
                            parametrisation: str = "centred", integrate_scale: bool = False,
                            **infer_options: Any) -> Result:
    """Varying-intercept (and optionally varying-slope) linear regression, fitted by VMP.

    The posterior is mean field: the population scales are independent of the group effects they scale,
    so with few groups, or groups that say little, the intervals of the effects and of the population mean
    are too narrow and the scale's posterior too confident (docs/pages/how-far.md shows how far on radon and
    eight schools).  Three options reduce that gap: ``scale_prior="half_normal"`` (a proper prior on the sd,
    as in Stan and PyMC); ``parametrisation="non_centred"`` (α_g = μ_α + σ_α·η_g), under which mean field is
    far closer to the exact posterior when the data per group are weak; and ``integrate_scale=True``, which
    integrates σ_α out by quadrature (``fg.ScaleQuadrature``: one fit of the rest per grid node, so slower,
    but q(σ_α, rest) = q(σ_α) q(rest | σ_α) keeps their dependence).  Use them when the group-level
    uncertainty matters (few groups, small groups, a population sd near 0); with many well-measured groups the
    centred mean field is accurate and fastest.

    Parameters
    ----------
    X
        Inputs, shape (N, D) (a vector is one column; None for none).  Do not include a column of ones:
        the intercept is part of the model.
    y
        Outcomes, length N; NaN (or a masked entry of a ``numpy.ma`` array) is missing: that row drops out of
        the likelihood, exactly as if it were not there.
    groups
        The group of each row: an integer code in 0..G−1 (groups may be ragged; a group without rows keeps
        its population prior), or a name (strings, e.g. county names).  Named groups are coded in sorted
        order, as by ``np.unique(groups, return_inverse=True)``: element k of ``intercept`` (and row k of
        ``slope``) is the k-th name, and ``result.model.coords["groups"]`` holds the names (``to_arviz``
        labels the groups with them; ``hierarchical_predictive`` takes the names).
    varying
        Which effects vary by group: ``("intercept",)``, ``("intercept", "slope")``, ``("slope",)``, or
        ``()`` (complete pooling: one regression for all groups).
    n_groups
        G, when some groups have no rows (default: ``max(groups) + 1``; integer codes only).
    pooling
        ``"partial"`` (the group effects share a learned population mean and precision) or ``"none"``
        (independent N(0, 1/prior_precision) group effects).
    prior_precision, a0, b0
        λ₀ of the Gaussian priors on population means and shared effects; shape and rate of the Gamma
        priors on every precision.
    scale_prior, scale
        None (Gamma(a0, b0) priors on the population precisions), or ``"half_normal"``, ``"half_cauchy"``,
        ``"exponential"``: that prior, with scale ``scale`` (the exponential's mean), on the population sds,
        named ``intercept_sd`` and ``slope_sd``.
    parametrisation
        ``"centred"`` (α_g ~ N(μ_α, σ_α²)) or ``"non_centred"`` (α_g = μ_α + σ_α·η_g, η_g ~ N(0, 1); needs a
        ``scale_prior``; varying intercepts with partial pooling).
    integrate_scale
        Integrate ``intercept_sd`` out by ``fg.ScaleQuadrature`` (needs a ``scale_prior`` and varying
        intercepts with partial pooling).
    infer_options
        Passed to ``fg.infer`` (default ``max_iter=1000``).

    Returns
    -------
    Result
        Posteriors ``intercept``, ``slope``, ``noise_precision`` and the population parameters; the
        ELBO is a lower bound on log p(y), comparable across pooling choices with ``fg.compare``.
        ``hierarchical_predictive`` gives predictions for new rows.
    """

    m = hierarchical_regression_model(X, y, groups, varying, n_groups=n_groups, pooling=pooling,
                                      prior_precision=prior_precision, a0=a0, b0=b0, scale_prior=scale_prior,
                                      scale=scale, parametrisation=parametrisation)
    infer_options.setdefault("max_iter", 1000)
    if not isinstance(integrate_scale, bool | np.bool_):
        raise ModelError(f"integrate_scale must be True or False, got {integrate_scale!r}")
    if integrate_scale:
        if scale_prior is None or "intercept" not in _varying(varying) or pooling != "partial":
            raise ModelError("integrate_scale=True integrates the intercepts' population sd out: it needs a "
                             "scale_prior (e.g. 'half_normal') and varying intercepts with partial pooling")
        handlers = dict(infer_options.pop("handlers", None) or {})
        handlers.setdefault("intercept_sd", ScaleQuadrature())
        infer_options["handlers"] = handlers
    return infer(m, **infer_options)


def hierarchical_predictive(result: Result, X_new: Any, groups_new: Any):
    """Gaussian approximation of the posterior predictive of new rows in known groups.

    Mean E[α_g] + x_nᵀE[β_g]; variance Var[α_g] + x_nᵀCov[β_g]x_n + E[1/τ] (noise), from the mean-field
    posterior (the Student-t tails of the noise are moment-matched).  ``groups_new`` are integer codes, or
    names when the model was fitted with named groups.
    """

    a, b, tau = result.posterior("intercept"), result.posteriors.get("slope"), result.posterior("noise_precision")
    if a.batch_shape:
        G = a.batch_shape[0]
    elif b is not None and len(b.batch_shape) == 2:
        G = b.batch_shape[0]
    else:  # complete pooling: the groups do not matter
        G = np.iinfo(np.int64).max
    names = getattr(result.model, "coords", {}).get("groups") if result.model is not None else None
    lab = _labels("groups_new", groups_new, G) if names is None else _codes(groups_new, names)
    am, av = np.asarray(a.mean()), np.asarray(a.var())
    mean = am[lab] if am.ndim else np.full(lab.shape, float(am))
    var = av[lab] if av.ndim else np.full(lab.shape, float(av))
    if b is not None:
        Xn = checks.constant(X_new, "X_new")
        Xn = Xn[:, None] if Xn.ndim == 1 else Xn
        if Xn.shape[0] != lab.shape[0]:
            raise ModelError(f"X_new has {Xn.shape[0]} rows but groups_new has {lab.shape[0]} labels")
        if len(b.batch_shape) == 2:  # varying slopes, mean field over columns
            mean = mean + np.sum(Xn * b.mean()[lab], axis=1)
            var = var + np.sum(Xn**2 * b.var()[lab], axis=1)
        else:
            mean = mean + Xn @ b.mean()
            var = var + np.einsum("nd,de,ne->n", Xn, b.cov(), Xn)
    return Gaussian(mean=mean, var=var + _noise_variance(tau))


def _noise_variance(tau: Any) -> float:
    """E[1/τ] under q(τ): b/(a − 1) for a Gamma(a, b) with a > 1 (else 1/E[τ]); the weighted average over the
    nodes of a quadrature mixture (a fit with the scale integrated out)."""
    if hasattr(tau, "components"):
        return float(sum(w * _noise_variance(q) for w, q in zip(tau.weights, tau.components, strict=True)))
    shape, rate = float(tau.shape), float(tau.rate)
    return rate / (shape - 1.0) if shape > 1.0 else 1.0 / float(tau.mean())


def _codes(groups_new: Any, names: np.ndarray) -> np.ndarray:
    """The codes of named groups (``names`` sorted, as ``np.unique`` gives them); an unknown name is an error."""
    try:
        arr = np.asarray(groups_new)
    except (TypeError, ValueError):
        arr = np.zeros((0, 0))
    if np.ma.is_masked(groups_new) or arr.ndim != 1 or not _named(arr):
        raise ModelError(f"groups_new must be a 1-D array of the group names the model was fitted with "
                         f"({checks._short(names.tolist())}), got {checks._short(groups_new)}")
    codes = np.searchsorted(names, arr)
    known = (codes < len(names)) & (names[np.minimum(codes, len(names) - 1)] == arr)
    if not np.all(known):
        i = int(np.argmin(known))
        raise ModelError(f"groups_new: group {arr[i].item()!r} (at position {i}) is not one the model was fitted with "
                         f"({checks._short(names.tolist())}); a new group has no fitted effect")
    return codes.astype(np.int64)

