"""Plots of fits with matplotlib (``pip install 'fgvmp[demos]'``): ELBO traces, evidence comparisons, marginals.

Each function draws on the given Axes (or a new figure) and returns what it drew on, so a caller can
style, save or test it; nothing is shown or saved here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from factorgraph.graph.nodes import ModelError
from factorgraph.posterior.agreement import reference_draws
from factorgraph.posterior.compare import Comparison, compare
from factorgraph.posterior.results import Result
from factorgraph.posterior.summary import _exact


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("factorgraph.plots needs matplotlib: pip install 'fgvmp[demos]'") from None
    return plt


def _axes(ax):
    if ax is not None:
        return ax
    _, ax = _pyplot().subplots(figsize=(6, 4))
    return ax


def elbo_trace(results: Result | Mapping[str, Result], ax: Any = None, *, relative: bool = False) -> Any:
    """The evidence figure (ELBO) after every iteration, one line per fit.

    Parameters
    ----------
    results
        One ``fg.infer`` result, or a dict of them by name (one labelled line each).
    ax
        Matplotlib Axes to draw on (default: a new figure's).
    relative
        Plot ``elbo_final − elbo_t`` on a log axis instead (the distance still to go; zero at the end is
        left out), which shows the rate of convergence.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes; line i has x = 1..n_iter and y = the trace (``result.elbo_trace``).
    """
    items = {"": results} if isinstance(results, Result) else dict(results)
    for n, r in items.items():
        if not isinstance(r, Result):
            raise ModelError(f"elbo_trace: {n or 'results'!r} must be a Result of fg.infer, got {type(r).__name__}")
    ax = _axes(ax)
    for name, r in items.items():
        t = np.asarray(r.elbo_trace, float)
        x = np.arange(1, t.size + 1)
        if relative:
            gap = t[-1] - t
            keep = gap > 0
            ax.semilogy(x[keep], gap[keep], marker=".", label=name or None)
        else:
            ax.plot(x, t, marker=".", label=name or None)
    ax.set_xlabel("iteration")
    ax.set_ylabel("ELBO(final) − ELBO" if relative else "ELBO")
    if len(items) > 1 or "" not in items:
        ax.legend()
    return ax


def evidence_comparison(comparison: Comparison | Mapping[str, Result], ax: Any = None, *, k: float = 2.0,
                        relative: bool = False, loo: bool = False) -> Any:
    """A bar chart of the models' evidence figures, with ± k standard errors where a figure carries one.

    Parameters
    ----------
    comparison
        An ``fg.compare`` table, or a dict of results by name (compared here).
    ax
        Matplotlib Axes to draw on (default: a new figure's).
    k
        Half-width of the error bars in standard errors (``result.elbo_se``; figures computed exactly
        have none).  Default 2, the width ``fg.compare`` uses to call two figures indistinguishable.
    relative
        Plot log Bayes factors against the best model (evidence − best evidence) instead of the evidence.
    loo
        Plot PSIS-LOO's elpd_loo (± k of its standard errors) instead: the comparison must have its LOO columns
        (``fg.compare(..., loo=True)``), or, given results, they are computed here.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes: bar i (in the table's order) has height evidence_i (or its log Bayes factor; or elpd_loo_i,
        or its difference from the best) and an error bar of half-width k·se_i (absent where se_i = 0; for
        the LOO differences the paired se, ``dse``).  Bars of figures of another kind than the first
        (a bound against an approximation) are hatched.
    """
    c = comparison if isinstance(comparison, Comparison) else compare(dict(comparison), loo=loo)
    if loo and c.elpd_loo is None:
        raise ModelError("evidence_comparison(loo=True) needs a comparison with LOO columns: "
                         "fg.compare(results, loo=True)")
    ax = _axes(ax)
    if loo:
        h = c.elpd_loo - c.elpd_loo.max() if relative else c.elpd_loo
        se = np.asarray(c.elpd_diff_se if relative else c.elpd_loo_se, float)
        se = np.nan_to_num(se)
    else:
        h = c.log_bayes_factor if relative else c.evidence
        se = np.zeros(len(c.names)) if c.elbo_se is None else np.asarray(c.elbo_se, float)
    bars = ax.bar(c.names, h, color="C0")
    for b, kind in zip(bars, c.kinds, strict=True):
        if not loo and kind != c.kinds[0]:  # unlike evidence figures
            b.set_hatch("//")
    has = se > 0
    if np.any(has):
        x = np.arange(len(c.names))[has]
        ax.errorbar(x, h[has], yerr=k * se[has], fmt="none", ecolor="k", capsize=4,
                    label=f"± {k:g} se")
        ax.legend()
    if loo:
        ax.set_ylabel("elpd_loo − best (± k dse)" if relative else "elpd_loo (nats)")
        ax.set_title("PSIS-LOO")
        return ax
    ax.set_ylabel("log Bayes factor against the best" if relative else "evidence (nats)")
    ax.set_title(", ".join(sorted(set(c.kinds))))
    return ax


_ITEM = re.compile(r"^(?P<name>[^\[]+)(\[(?P<index>[0-9, ]+)\])?$")


def _scalars(result: Result, names: Sequence[str]) -> list[tuple[str, str, tuple[int, ...]]]:
    """(label, variable, index) for every scalar the names ask for ("theta" → theta[0], theta[1], ...)."""
    out = []
    for n in names:
        m = _ITEM.match(n)
        if m is None or m["name"] not in result.posteriors:
            raise ModelError(f"posterior_marginals: {n!r} is not a latent variable (or one entry of one, like "
                             f"'theta[3]'); latent variables are {sorted(result.posteriors)}")
        var = m["name"]
        q = result.posterior(var)
        shape = tuple(getattr(q, "batch_shape", ())) + tuple(getattr(q, "event_shape", ()))
        if m["index"] is not None:
            ix = tuple(int(i) for i in m["index"].split(","))
            out.append((n, var, ix))
        elif shape:
            out += [(f"{var}[{', '.join(map(str, ix))}]", var, ix) for ix in np.ndindex(*shape)]
        else:
            out.append((var, var, ()))
    return out


def _reference(reference: Mapping[str, Any] | None, label: str, var: str, ix: tuple[int, ...],
               shape: tuple[int, ...]) -> Any:
    """The reference for one scalar: given under its label as it is, or under its variable's name, indexed:
    an array ``(*shape, 2)`` or a pair of arrays of ``shape`` is (mean, sd) per entry, an array ``(S, *shape)``
    draws; a function of x under the variable's name must return densities ``(len(x), *shape)``."""
    if not reference:
        return None
    if label in reference:
        r = reference[label]
        if callable(r):
            return r
        arr = np.asarray(r, float)
        return (float(arr[0]), float(arr[1])) if arr.shape == (2,) else arr.ravel()
    if var not in reference:
        return None
    r = reference[var]
    if callable(r):
        return r if not shape else (lambda x: np.asarray(r(x))[(slice(None), *ix)])
    if isinstance(r, tuple) and len(r) == 2 and np.shape(r[0]) == shape:
        return (float(np.asarray(r[0])[ix]), float(np.asarray(r[1])[ix]))
    arr = np.asarray(r, float)
    if arr.shape == shape + (2,):
        return (float(arr[ix][0]), float(arr[ix][1]))
    if arr.shape[1:] == shape:
        return arr[(slice(None), *ix)]
    raise ModelError(f"posterior_marginals: the reference for {var!r} has shape {arr.shape}; expected draws "
                     f"{('S', *shape)}, (mean, sd) pairs {(*shape, 2)} or a density function")


def posterior_marginals(result: Result, names: Sequence[str] | str, reference: Mapping[str, Any] | None = None,
                        ax: Any = None, *, draws: int = 4000, seed: int | None = 0,
                        reference_label: str = "reference") -> Any:
    """q's marginal densities of the named scalars, each against an optional reference.

    Parameters
    ----------
    result
        A fit of ``fg.infer``.
    names
        Latent variables (every entry: ``"theta"``) or single entries (``"theta[3]"``, ``"W[1, 0]"``).
    reference
        By entry label or variable name: draws (an array ``(S,)``, or ``(S, *shape)`` for a variable: drawn as
        a histogram), a ``(mean, sd)`` pair (a Gaussian curve; for a variable a pair of arrays, or an array
        ``(*shape, 2)``), or a density function of x (a curve).
    ax
        A sequence of Axes, one per scalar (default: a new figure with a grid of them).
    draws, seed
        Draws of q for marginals without a closed form (a kernel density estimate of them).
    reference_label
        Legend label of the reference.

    Returns
    -------
    matplotlib.figure.Figure
        The figure; its Axes hold, in order, one panel per scalar with q's density as the first line (label
        ``"q"``) and the reference as a second line or as histogram bars.
    """
    from scipy import stats


    plt = _pyplot()
    items = _scalars(result, [names] if isinstance(names, str) else list(names))
    if ax is None:
        cols = min(4, len(items))
        rows = -(-len(items) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
        axes = list(axes.ravel())
        for extra in axes[len(items):]:
            extra.set_visible(False)
    else:
        axes = list(np.ravel(ax))
        if len(axes) < len(items):
            raise ModelError(f"posterior_marginals: {len(items)} panels asked for, {len(axes)} Axes given")
        fig = axes[0].figure
    sampled: dict[str, np.ndarray] | None = None
    for a, (label, var, ix) in zip(axes, items, strict=False):
        q = result.posterior(var)
        parts = _exact(q)
        if parts is not None and hasattr(parts[0][3], "pdf"):  # closed-form marginal
            _, mean, sd, dist = parts[0]
            shape = np.shape(mean)
            m, s = float(np.asarray(mean)[ix]), float(np.broadcast_to(sd, shape)[ix])
            lo, hi = m - 4.0 * s, m + 4.0 * s

            def pdf(x, d=dist, i=ix):  # the frozen distribution is batched over the variable's entries
                return np.asarray(d.pdf(x.reshape(-1, *(1,) * len(i))))[(slice(None), *i)] if i else d.pdf(x)
        else:  # a kernel density estimate of draws of q
            if sampled is None:
                sampled = result.sample(draws, seed)
            xs = np.asarray(sampled[var], float)
            shape = xs.shape[1:]
            x = xs[(slice(None), *ix)]
            pdf = stats.gaussian_kde(x)
            lo, hi = np.quantile(x, [0.001, 0.999])
        ref = _reference(reference, label, var, ix, tuple(shape))
        if isinstance(ref, tuple):
            lo, hi = min(lo, ref[0] - 4.0 * ref[1]), max(hi, ref[0] + 4.0 * ref[1])
        elif ref is not None and not callable(ref):
            lo, hi = min(lo, np.quantile(ref, 0.001)), max(hi, np.quantile(ref, 0.999))
        grid = np.linspace(lo, hi, 400)
        a.plot(grid, pdf(grid), color="C0", label="q")
        if ref is not None:
            _draw_reference(a, grid, ref, reference_label)
        a.set_title(label)
        a.set_yticks([])
    axes[0].legend(fontsize=8)
    return fig


def _draw_reference(a, grid: np.ndarray, ref: Any, label: str) -> None:
    from scipy import stats

    if callable(ref):
        a.plot(grid, ref(grid), color="C1", ls="--", label=label)
    elif isinstance(ref, tuple):
        a.plot(grid, stats.norm.pdf(grid, float(ref[0]), float(ref[1])), color="C1", ls="--", label=label)
    else:
        a.hist(np.asarray(ref, float), bins=40, density=True, color="C1", alpha=0.4, label=label)


def agreement_marginals(result: Result, reference: Any, names: Sequence[str] | str | None = None, ax: Any = None, *,
                        draws: int = 4000, seed: int | None = 0) -> Any:
    """The picture of ``fg.agreement``: each of the fit's marginal densities over the histogram of a sampler's
    draws of the same scalar.

    Parameters
    ----------
    result
        A fit of ``fg.infer`` (VMP, NCVMP, a handler's, ...).
    reference
        A Gibbs result (``fg.infer(model, algorithm=fg.Gibbs())``) or an ``arviz.InferenceData`` whose posterior
        group holds draws named as the model's variables, dims ``(chain, draw, *shape)``.
    names
        Variables or single entries (``"theta[3]"``) to draw (default: every latent variable of the fit that the
        reference has draws of).
    ax, draws, seed
        As in ``posterior_marginals``.

    Returns
    -------
    matplotlib.figure.Figure
        One panel per scalar: q's density as the first line (label ``"q"``), the draws (all chains pooled) as
        histogram bars normalised to a density (label ``"draws"``).
    """
    ref = reference_draws(reference)
    if names is None:
        latent = set(result.posteriors) | set(getattr(result, "local", {}))
        names = [n for n in ref if n in latent]
        if not names:
            raise ModelError(f"agreement_marginals: the reference has no draws of the fit's latent variables "
                             f"{sorted(latent)}; it has {sorted(ref)}")
    names = [names] if isinstance(names, str) else list(names)
    stems = {re.sub(r"\[.*$", "", n) for n in names}
    missing = sorted(s for s in stems if s not in ref)
    if missing:
        raise ModelError(f"agreement_marginals: the reference has no draws of {missing}; it has {sorted(ref)}")
    pooled = {s: ref[s].reshape((-1,) + ref[s].shape[2:]) for s in stems}
    return posterior_marginals(result, names, reference=pooled, ax=ax, draws=draws, seed=seed,
                               reference_label="draws")


__all__ = ["agreement_marginals", "elbo_trace", "evidence_comparison", "posterior_marginals"]

