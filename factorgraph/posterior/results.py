"""Inference results and model comparison."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distributions import InverseSqrtGamma
from factorgraph.graph.derived import DerivedPosterior
from factorgraph.graph.nodes import ModelError
from factorgraph.posterior.arviz_io import _import_arviz, to_arviz
from factorgraph.posterior.paths import viterbi
from factorgraph.posterior.sampling import sample_posterior
from factorgraph.posterior.summary import summary

# what an evidence figure is (docs/maths.md §2)
LOWER_BOUND = "lower bound"
LATTICE_BOUND = "lower bound up to lattice error"
APPROXIMATION = "approximation"
ESTIMATE = "Monte Carlo estimate of a lower bound"
# SVI's running figure: the minibatch-rescaled bound, smoothed (an unbiased estimate of the ELBO at the
# batch's local optimum, not a bound itself, and noisy by subsampling rather than by Monte Carlo draws)
STOCHASTIC = "stochastic estimate of a lower bound"


def combine_kinds(kinds: set[str]) -> str:
    """What a sum of evidence terms of the given kinds is: a bound only if every term is exact or a
    bound; an estimate of a bound if some terms are Monte Carlo estimates of bounds; else an
    approximation.  ("exact" and "bound" are the factor-level kinds.)"""
    bounds = {"exact", "bound", LOWER_BOUND}
    if kinds <= bounds:
        return LOWER_BOUND
    if kinds <= bounds | {LATTICE_BOUND}:
        return LATTICE_BOUND
    if kinds <= bounds | {LATTICE_BOUND, ESTIMATE}:
        return ESTIMATE
    if kinds <= bounds | {LATTICE_BOUND, ESTIMATE, STOCHASTIC}:
        return STOCHASTIC
    return APPROXIMATION


@dataclass
class Result:
    """The outcome of ``fg.infer``.

    Attributes
    ----------
    elbo
        The final evidence figure (for VMP, the ELBO: a lower bound on log p(D)).
    evidence_kind
        What ``elbo`` is: "lower bound", "approximation", ... (see docs/maths.md §2).
    elbo_trace
        The ELBO after every iteration.
    n_iter, converged, time
        Iterations run, whether the stopping rule was met, wall-clock seconds (including
        initialisation, excluding compilation).
    hyper
        Hyperparameters learned by global handlers (``learn=``), by handled variable; see
        ``hyperparameters``.
    """

    model_name: str
    algorithm: str
    posteriors: dict[str, Any]
    elbo: float
    evidence_kind: str
    elbo_trace: np.ndarray
    n_iter: int
    converged: bool
    time: float
    compile_time: float = 0.0
    warnings: list[str] = field(default_factory=list)
    elbo_se: float = 0.0
    notes: list[str] = field(default_factory=list)
    # joint posteriors of class-plated weight matrices handled as one block (posteriors hold their
    # per-class marginals)
    joint: dict[str, Any] = field(default_factory=dict)
    hyper: dict[str, dict[str, Any]] = field(default_factory=dict)
    # scales made by fg.half_cauchy and the like: ``posteriors`` holds their Gamma over σ⁻², ``posterior``
    # reports them on the σ scale
    scales: set[str] = field(default_factory=set)
    # fg.SVI: the last smoothed minibatch-rescaled bound and the unsmoothed one of every step (Result.elbo
    # is then the exact full-data ELBO of the final pass when the data were in memory)
    elbo_estimate: float | None = None
    elbo_estimates: np.ndarray | None = None
    # a sharded fit (dask data, docs/design.md §10): how the plate was cut (plate, rows, chunks, chunk_rows,
    # backend, workers, bytes_per_sweep, retries), and the names of the variables on the sharded plate, whose
    # posteriors stay with their chunks until ``posterior`` collects one
    sharding: dict[str, Any] | None = None
    local: dict[str, Any] = field(default_factory=dict)  # name -> function collecting its posterior
    # fg.deterministic nodes: name -> (E_q[y], Var_q[y]) over the node's plates (factorgraph/graph/derived.py)
    derived: dict[str, tuple] = field(default_factory=dict)
    # the fitted model (for to_arviz's observed data and log-likelihoods); set by fg.infer
    model: Any = field(default=None, repr=False, compare=False)

    def hyperparameters(self, name: str) -> dict[str, Any]:
        """Hyperparameters the handler of ``name`` learned (``fg.MVI("lr", learn=("prior_precision", "scale"))``).

        ``"prior_precision"``: the learned α·c of an isotropic prior precision αI (for any other constant
        precision Λ₀, ``"prior_precision_multiplier"``: c in cΛ₀); ``"scale"``: the learned scale of each
        claimed site, by factor name.  The posteriors and the evidence of the result are at these values.
        """
        try:
            return self.hyper[name]
        except KeyError:
            raise KeyError(f"no learned hyperparameters for {name!r}; blocks with learned hyperparameters: "
                           f"{sorted(self.hyper)}") from None

    def posterior(self, name: str) -> Any:
        """The posterior distribution object of a latent variable.

        For a scale σ made by ``fg.half_normal``, ``fg.half_cauchy``, ``fg.half_student_t`` or
        ``fg.exponential`` this is an ``InverseSqrtGamma`` over σ (mean, var, std, interval, ppf, cdf,
        logpdf, sample); its ``.precision`` is the Gamma over σ⁻² that inference works with (also in
        ``posteriors[name]``).
        """
        if name in self.local and name not in self.posteriors:  # a sharded plate's local variable: collected now
            self.posteriors[name] = self.local[name]()
        if name in self.derived:
            node = self.model.tracked[name]
            return DerivedPosterior(name, *self.derived[name], tuple(p.name for p in node.plates))
        try:
            q = self.posteriors[name]
        except KeyError:
            raise KeyError(f"no posterior for {name!r}; latent variables are "
                           f"{sorted([*self.posteriors, *self.local])}") from None
        if name in self.scales:
            return InverseSqrtGamma(q)
        return q

    @property
    def evidence(self) -> float:
        return self.elbo

    def sample(self, draws: int = 1000, seed: int | None = 0) -> dict[str, np.ndarray]:
        """Draws from the posterior approximation q, by latent variable name.

        Arrays have shape ``(draws, *plates, *event)``.  Draws are joint where q is joint: a full-covariance
        Gaussian block draws whole vectors, and class-plated weights handled as one block (``joint``) draw
        all classes together from their joint q; distinct variables are independent under the mean-field
        q.  A normal–gamma block ``w`` gives ``"w"`` and ``"w.tau"`` drawn jointly; a normal–Wishart block
        ``theta`` gives its means ``"theta"`` and precision matrices ``"theta.precision"`` drawn jointly.
        """
        return sample_posterior(self, draws, seed)

    def viterbi(self, name: str, return_log_prob: bool = False) -> Any:
        """The most probable state path z* = argmax_z q(z) of the hidden Markov chain ``name``
        (``fg.markov_chain``), per sequence: integer states of shape ``(*sequence plates, T)``, −1 past a
        sequence's length; with ``return_log_prob`` also log q(z*).  See ``factorgraph.posterior.paths``."""
        return viterbi(self, name, return_log_prob)

    def summary(self, prob: float = 0.94, draws: int = 4000, seed: int | None = 0) -> Any:
        """A pandas DataFrame of the posterior mean, sd and central ``prob`` credible interval per scalar.

        Rows are named like ``"w[0]"``, ``"tau"``, ``"mu[3]"``.  Intervals are exact (quantiles of q)
        where q has closed-form quantiles (Gaussian, Gamma, Beta, the marginals of a multivariate
        Gaussian), else computed from ``draws`` draws of q; the ``exact`` column says which.  Needs
        pandas (``pip install fgvmp[after]``).
        """
        return summary(self, prob, draws, seed)

    def to_arviz(self, draws: int = 1000, seed: int | None = 0, prior: bool = False,
                 posterior_predictive: bool = False) -> Any:
        """The fit as an ``arviz.InferenceData``, for ArviZ's summaries, plots, LOO and WAIC.

        Parameters
        ----------
        draws
            Number of draws S from q (``result.sample``).
        seed
            Seed of the draws (of q and, with ``prior=True``, of the prior).
        prior
            Also add ``prior`` (latent variables) and ``prior_predictive`` (observed variables) groups of
            ``draws`` forward draws (``fg.sample_prior``).
        posterior_predictive
            Also add a ``posterior_predictive`` group: ``draws`` replicates of the observed variables that are
            leaves, y⁽ˢ⁾ ~ p(y | θ⁽ˢ⁾) with θ⁽ˢ⁾ ~ q (``fg.predict(result, draws=draws, seed=seed)``), for
            posterior predictive checks (``az.plot_ppc``).

        Returns
        -------
        arviz.InferenceData
            ``posterior``: one chain of S independent draws from q, variables named as in the model (a
            normal–gamma block ``w`` adds ``"w.tau"``), dims named after the plates and event axes
            ``<name>_dim_<i>`` (a Dirichlet's categories: its Categoricals' category plate), coords 0..size−1;
            ``observed_data``: the observed variables, NaN where missing; ``log_likelihood``: log p(y_i | θ⁽ˢ⁾)
            per observation and draw (``factorgraph.posterior.loglik``): with the observation's plates as dims, a
            mixture's rows marginalised over their label, and for a variable with missing entries only its
            observed entries, along ``<name>_observed`` (coordinate: the entry's flat index).

        Notes
        -----
        ``az.loo(idata)`` then estimates elpd = Σ_i log p(y_i | y_−i) by Pareto-smoothed importance sampling
        of the draws from q with weights 1/p(y_i | θ) (Vehtari, Gelman & Gabry 2017); it treats q as the
        posterior, so it scores the model *as fitted by this approximation*.  With several observed variables
        name one (``az.loo(idata, var_name="y")``).  The draws are independent: R-hat and ESS of
        ``az.summary`` describe Monte Carlo error only, not convergence of the fit.  Save with
        ``idata.to_netcdf(path)`` and load with ``az.from_netcdf(path)``.  Needs ``pip install 'fgvmp[after]'``.
        """
        return to_arviz(self, draws, seed, prior, posterior_predictive)

    @property
    def time_per_iter(self) -> float:
        return self.time / max(self.n_iter, 1)

    def __repr__(self) -> str:
        conv = "converged" if self.converged else "not converged"
        return (f"Result({self.model_name!r}, {self.algorithm}: evidence {self.elbo:.10g} ({self.evidence_kind}), "
                f"{self.n_iter} iterations, {conv}, {self.time:.3g} s)")


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
            seed: int | None = 0) -> Comparison:
    """Compare models by their evidence and, optionally, by PSIS-LOO.

    Parameters
    ----------
    results
        Fits by model name.
    loo
        ``True``: add the columns ``elpd_loo`` (Σ_i log p(y_i | y_−i) estimated by Pareto-smoothed
        importance sampling of ``loo_draws`` draws of each q, ``az.loo`` on ``result.to_arviz()``), its
        standard error, ``p_loo`` and ``dse``, the standard error of each model's elpd difference from the
        best model by LOO (paired over the observations: √N·sd_i(elpd_i − elpd_i^best); NaN for a model
        whose observations differ in number).  A model with
        several observed variables needs the one to score: ``loo="y"``.  Needs ArviZ (``fgvmp[after]``).
    loo_draws, seed
        Draws of q for LOO, and their seed.

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
    if not isinstance(results, dict):
        raise ModelError(f"compare needs a dict of results by model name, e.g. {{'a': fg.infer(m1), 'b': "
                         f"fg.infer(m2)}}, got {type(results).__name__}")
    if not results:
        raise ModelError("compare needs at least one result")
    for n, r in results.items():
        if not isinstance(r, Result):
            raise ModelError(f"compare: results[{n!r}] must be a Result of fg.infer, got {type(r).__name__} "
                             f"{r!r:.60}")
        if not np.isfinite(r.elbo):
            raise ModelError(f"compare: the evidence of {n!r} is {r.elbo!r}, not a finite number")
    names = [str(n) for n in results]
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
    out = Comparison(names, ev, kinds, lbf, p, note, se)
    if loo is not False:
        _add_loo(out, list(results.values()), loo, loo_draws, seed)
    return out


def _add_loo(c: Comparison, results: list[Result], loo: bool | str, draws: int, seed: int | None) -> None:
    """The LOO columns of ``fg.compare(..., loo=...)``."""
    az = _import_arviz()
    if not (loo is True or isinstance(loo, str)):
        raise ModelError(f"compare: loo must be True, False or the name of the observed variable to score, got {loo!r}")
    var = loo if isinstance(loo, str) else None
    pointwise, est, se, p_loo, bad = [], [], [], [], []
    for name, r in zip(c.names, results, strict=True):
        idata = r.to_arviz(draws, seed)
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
