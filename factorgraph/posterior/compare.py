"""``fg.compare``: models side by side by their evidence and, optionally, by PSIS-LOO.

The evidence p(D | m) ranks models m of the *same* data D; every ``Result`` of ``fg.infer`` records a digest
of the observed data it was fitted to (``Result.data_digest``, ``factorgraph.posterior.fitted_data``), and
``compare`` refuses fits whose data differ unless told ``same_data=False``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from factorgraph.graph import checks
from factorgraph.graph.nodes import ModelError
from factorgraph.posterior.arviz_io import _import_arviz
from factorgraph.posterior.fitted_data import different_data, without_data
from factorgraph.posterior.results import EP_APPROXIMATION, LOWER_BOUND, STOCHASTIC, Result
from factorgraph.posterior.samplers import check_seed

# PSIS fits a generalised Pareto distribution to the largest ⌈S/5⌉ importance ratios (fewer for large S) and
# needs at least 5 of them: S ≥ 21 draws
LOO_MIN_DRAWS = 21


@dataclass
class Comparison:
    """Table of evidence figures, log Bayes factors and posterior model probabilities."""

    names: list[str]
    evidence: np.ndarray
    kinds: list[str]
    log_bayes_factor: np.ndarray  # against the best model
    probability: np.ndarray  # posterior model probabilities under a uniform model prior
    note: str = ""
    elbo_se: np.ndarray | None = None  # Monte Carlo standard error of each figure (0: computed exactly)
    # PSIS-LOO (fg.compare(..., loo=True)): elpd_loo, its standard error, the effective number of parameters
    # p_loo and the standard error of each model's elpd difference from the best by LOO (paired over rows)
    elpd_loo: np.ndarray | None = None
    elpd_loo_se: np.ndarray | None = None
    p_loo: np.ndarray | None = None
    elpd_diff_se: np.ndarray | None = None

    def __str__(self) -> str:
        w = max(5, *(len(n) for n in self.names))
        kw = max(4, *(len(k) for k in self.kinds))
        se = self.elbo_se if self.elbo_se is not None and np.any(self.elbo_se > 0) else None
        sec = f"  {'± se':>10}" if se is not None else ""
        lo = self.elpd_loo is not None
        loc = f"  {'elpd_loo':>11}  {'± se':>8}  {'p_loo':>7}  {'dse':>7}" if lo else ""
        lines = [f"{'model':<{w}}  {'evidence':>14}{sec}  {'kind':<{kw}}  {'log BF':>10}  {'P(model)':>9}{loc}"]
        for i in np.argsort(-self.evidence):
            sei = f"  {se[i]:10.4f}" if se is not None else ""
            loi = (f"  {self.elpd_loo[i]:11.4f}  {self.elpd_loo_se[i]:8.4f}  {self.p_loo[i]:7.3f}  "
                   f"{self.elpd_diff_se[i]:7.3f}" if lo else "")
            lines.append(f"{self.names[i]:<{w}}  {self.evidence[i]:14.6f}{sei}  {self.kinds[i]:<{kw}}  "
                         f"{self.log_bayes_factor[i]:10.4f}  {self.probability[i]:9.4f}{loi}")
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)

    __repr__ = __str__

    def best(self) -> str:
        return self.names[int(np.argmax(self.evidence))]


def compare(results: dict[str, Result], loo: bool | str = False, *, loo_draws: int = 1000,
            seed: int | None = 0, same_data: bool = True) -> Comparison:
    """Compare models by their evidence and, optionally, by PSIS-LOO.

    Parameters
    ----------
    results
        Fits by model name.
    loo
        ``True``: add the columns ``elpd_loo`` (Σ_i log p(y_i | y_−i) estimated by Pareto-smoothed
        importance sampling of ``loo_draws`` draws of each q: ``az.loo`` on ``result.to_arviz(loo_draws, seed,
        chains=1)``, one chain of independent draws, whose relative efficiency is 1), its
        standard error, ``p_loo`` and ``dse``, the standard error of each model's elpd difference from the
        best model by LOO (paired over the observations: √N·sd_i(elpd_i − elpd_i^best); NaN for a model
        whose observations differ in number).  A model with
        several observed variables needs the one to score: ``loo="y"``.  Needs ArviZ (``fgvmp[after]``).
    loo_draws, seed
        Draws of q for LOO (at least 21: PSIS fits a generalised Pareto distribution to the largest fifth of the
        importance ratios, at least 5 of them), and their seed.
    same_data
        ``True`` (default): refuse fits made on different observed data.  Every ``Result`` of ``fg.infer``
        records a digest of the data of its observed variables (values and missing entries, by variable
        name; ``Result.data_digest``); the evidence p(D | m) of models fitted to different D (y against
        log y, or half of y) are not on one scale, so their Bayes factors mean nothing.  ``False``: compare
        them anyway (the note says the data were not checked).  Fits whose data were not recorded (SVI on
        streamed batches, a Result built by hand) cannot be checked: the note says which.

    Returns
    -------
    Comparison
        Evidence, kinds, log Bayes factors against the best model, posterior model probabilities under a
        uniform prior over the models, the evidence's Monte Carlo standard errors, and with ``loo`` the LOO
        figures (``elpd_loo``, ``elpd_loo_se``, ``p_loo``, ``elpd_diff_se``; else None).

    Notes
    -----
    Figures of different kinds (a bound against an approximation) are not like with like: the note says
    so.  The evidence scores the prior and the likelihood together; elpd_loo scores predictions of held-out
    observations under the (approximate) posterior, so the two can rank models differently.  The LOO
    columns treat q as the posterior; Pareto k above 0.7 for some rows (reported in the note) makes a
    model's elpd_loo unreliable.
    """
    seed = check_seed(seed, "compare")
    same_data = checks.flag(same_data, "compare: same_data")
    if isinstance(loo, np.bool_):
        loo = bool(loo)
    if loo is not False:
        if not (loo is True or isinstance(loo, str)):
            raise ModelError(f"compare: loo must be True, False or the name of the observed variable to score, got "
                             f"{checks._short(loo)}")
        loo_draws = checks.integer(loo_draws, "compare: loo_draws (PSIS smooths the largest fifth of the importance "
                                   "ratios and needs 5 of them)", low=LOO_MIN_DRAWS)
    if not isinstance(results, dict):
        raise ModelError(f"compare needs a dict of results by model name, e.g. {{'a': fg.infer(m1), 'b': "
                         f"fg.infer(m2)}}, got {type(results).__name__}")
    if not results:
        raise ModelError("compare needs at least one result")
    for n, r in results.items():
        if not isinstance(r, Result):
            raise ModelError(f"compare: results[{n!r}] must be a Result of fg.infer, got {type(r).__name__} "
                             f"{r!r:.60}")
        if r.algorithm == "gibbs":
            raise ModelError(f"compare: {n!r} is a Gibbs fit, which has no evidence figure to compare; compare its "
                             "posterior with another fit's by fg.agreement(fit, reference)")
        if not np.isfinite(r.elbo):
            raise ModelError(f"compare: the evidence of {n!r} is {r.elbo!r}, not a finite number")
    names = [str(n) for n in results]
    unchecked = _check_same_data(results) if same_data else []
    ev = np.array([r.elbo for r in results.values()], dtype=float)
    se = np.array([float(getattr(r, "elbo_se", 0.0) or 0.0) for r in results.values()])
    kinds = [r.evidence_kind for r in results.values()]
    lbf = ev - ev.max()
    p = np.exp(lbf)
    p /= p.sum()
    note = ""
    if len(set(kinds)) > 1:
        note = ("note: the evidence figures are of different kinds (" + ", ".join(sorted(set(kinds))) +
                "), so the Bayes factors compare unlike quantities")
    elif kinds[0] == LOWER_BOUND:
        note = ("note: lower bounds; their difference estimates a log Bayes factor only if the bounds are "
                "equally tight")
    if EP_APPROXIMATION in kinds and len(set(kinds)) > 1:
        ep_note = ("note: EP's log Z_EP is an approximation of the log evidence, neither a bound nor exact; set "
                   "beside lower bounds it is not like with like (their difference is not a log Bayes factor)")
        warnings.warn(ep_note, UserWarning, stacklevel=2)
        note = "\n".join(filter(None, [note, ep_note]))
    if STOCHASTIC in kinds:
        note = "\n".join(filter(None, [note, (
            "note: stochastic estimates (SVI's smoothed minibatch bound) are noisy estimates of lower bounds, not "
            "bounds; their se is the spread of the minibatch estimates; compare exact ELBOs where you can "
            "(SVI on in-memory data reports one)")]))
    close = [f"{names[best]} and {names[i]} differ by less than 2 se ({ev[best] - ev[i]:.3g} < "
             f"2 × {np.hypot(se[best], se[i]):.3g}), within the Monte Carlo error of the figures"
             for best in [int(np.argmax(ev))] for i in range(len(names))
             if i != best and np.hypot(se[best], se[i]) > 0 and ev[best] - ev[i] < 2.0 * np.hypot(se[best], se[i])]
    if close:
        note = "\n".join(filter(None, [note, *(f"note: {c}" for c in close)]))
    if not same_data:
        note = "\n".join(filter(None, [note, "note: same_data=False: the fits' data were not checked to be the same"]))
    elif unchecked and len(results) > 1:
        note = "\n".join(filter(None, [note, f"note: the data of {unchecked} were not recorded (streamed batches, "
                                              "or a Result not made by fg.infer): not checked to be the others'"]))
    out = Comparison(names, ev, kinds, lbf, p, note, se)
    if loo is not False:
        _add_loo(out, list(results.values()), loo, loo_draws, seed)
    return out


def _check_same_data(results: dict[str, Result]) -> list[str]:
    """Refuse fits of different observed data (``fitted_data.different_data``); return the names of those whose
    data were not recorded."""
    digests = {str(n): getattr(r, "data_digest", None) for n, r in results.items()}  # (pickled before it existed)
    differ = different_data(digests)
    if differ:
        raise ModelError("compare: the results were fitted to different data, so their evidence figures are not on "
                         "one scale (p(D | model) compares models of the same data D): " + "; ".join(differ) +
                         ".  Pass same_data=False to compare them anyway")
    return [n for n, d in digests.items() if d is None]


def _add_loo(c: Comparison, results: list[Result], loo: bool | str, draws: int, seed: int | None) -> None:
    """The LOO columns of ``fg.compare(..., loo=...)``."""
    az = _import_arviz()
    var = loo if isinstance(loo, str) else None
    pointwise, est, se, p_loo, bad = [], [], [], [], []
    for name, r in zip(c.names, results, strict=True):
        if r.model is None:
            raise ModelError(f"compare: LOO scores each fit's own data, and {name!r} has none: {without_data(r)}")
    for name, r in zip(c.names, results, strict=True):
        idata = r.to_arviz(draws, seed, chains=1)  # independent draws: relative efficiency 1, any number of them
        lls = list(idata.log_likelihood.data_vars)
        if var is None and len(lls) > 1:
            raise ModelError(f"compare: {name!r} has several observed variables {lls}; name the one to score, "
                             f"e.g. loo={lls[0]!r}")
        if var is not None and var not in lls:
            raise ModelError(f"compare: {name!r} has no observed variable {var!r}; it has {lls}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # high Pareto k: reported in the note below
            res = az.loo(idata, var_name=var, pointwise=True)
        pointwise.append(np.asarray(res.loo_i.values, float).ravel())
        est.append(float(res.elpd_loo))
        se.append(float(res.se))
        p_loo.append(float(res.p_loo))
        k = int(np.sum(np.asarray(res.pareto_k.values) > 0.7))
        if k:
            bad.append(f"{name!r} ({k} of {res.n_data_points})")
    best = int(np.argmax(est))
    dse = np.full(len(est), np.nan)
    for i, pw in enumerate(pointwise):
        if pw.shape == pointwise[best].shape:
            dse[i] = np.sqrt(pw.size) * np.std(pw - pointwise[best], ddof=1) if pw.size > 1 else 0.0
    c.elpd_loo, c.elpd_loo_se, c.p_loo, c.elpd_diff_se = np.array(est), np.array(se), np.array(p_loo), dse
    notes = [c.note] if c.note else []
    notes.append(f"note: elpd_loo by PSIS-LOO on {draws} draws of each q; best by LOO: {c.names[best]}; dse is the "
                 "standard error of each elpd difference from it")
    if bad:
        notes.append("note: Pareto k > 0.7 (elpd_loo unreliable) for " + ", ".join(bad))
    c.note = "\n".join(notes)


__all__ = ["LOO_MIN_DRAWS", "Comparison", "compare"]
