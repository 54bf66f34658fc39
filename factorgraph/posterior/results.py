"""Inference results and model comparison."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distributions import InverseSqrtGamma
from factorgraph.graph.derived import DerivedPosterior
from factorgraph.posterior.arviz_io import to_arviz
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
# fg.EP's log Z_EP: an approximation of log p(D), neither a bound nor exact
EP_APPROXIMATION = "EP approximation"


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
    starts
        How each mixture selector without an ``init`` started: ``"priors"`` (its update given its
        components' distinct priors, the same for every seed), ``"drawn"`` (from the seed) or ``"drawn,
        named after the priors"``.
    data_digest
        A digest of the observed data of the fit, by observed variable (``fg.compare`` refuses fits of
        different data); None when the data were streamed.
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
    # how each mixture selector without an init started (message passing): "priors" (its update given its
    # components' distinct priors: the same start for every seed), "drawn" (from the seed: k-means++, random
    # topics or Dirichlet rows) or "drawn, named after the priors"
    starts: dict[str, str] = field(default_factory=dict)
    # variables a global handler fitted (name -> the handler's class name): their q is that handler's, not mean field
    handled: dict[str, str] = field(default_factory=dict)
    # the fitted model (for to_arviz's observed data and log-likelihoods); set by fg.infer on data in memory (VMP,
    # NCVMP, their handlers, ScaleQuadrature, SVI on the model's rows), None for SVI on streamed batches and for a
    # sharded fit (fitted_data.without_data says why)
    model: Any = field(default=None, repr=False, compare=False)
    # what the fit was fitted to: observed variable name -> digest of its data (fitted_data.observed_digest), set
    # by fg.infer; None when not recorded (SVI on streamed batches).  fg.compare refuses fits of different data
    data_digest: dict[str, str] | None = field(default=None, repr=False)

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

    def summary(self, prob: float = 0.94, draws: int = 4000, seed: int | None = 0, var_names: Any = None) -> Any:
        """A pandas DataFrame of the posterior mean, sd and central ``prob`` credible interval per scalar.

        Rows are named like ``"w[0]"``, ``"tau"``, ``"mu[3]"``; a plate's entries by the model's ``coords``
        (group names), a weight vector's by the columns of a pandas DataFrame X given to ``fg.inner(X, w)`` or a
        canned regression (``"w[age]"``).  A label z (Categorical, a step of a hidden Markov chain, a Bernoulli)
        gives one row per category k: its indicator 1[z = k], mean q(z = k).  Intervals are exact (quantiles of
        q) where q has closed-form marginal quantiles (Gaussian, Gamma, Beta, Dirichlet rows as Beta(a_k, Σa −
        a_k), label indicators as Bernoulli(q(z = k)), the marginals of a multivariate Gaussian, of a
        Gaussian chain and of a normal–gamma block, scales σ), else computed from ``draws`` draws of q; the
        ``exact`` column says which.  ``var_names``: the variables to show (a name or a list; ``"w.tau"`` for
        a normal–gamma block's precision alone).  By default every variable is shown except per-row latent
        variables (on plates of the observed data only: mixture labels, chain states, per-row effects)
        that would fill more than 100 rows; ``table.attrs["notes"]`` names those left out.

        The intervals are those of q, the fit's approximate posterior: mean field (a product over the
        variables and the blocks the model declares) unless a global handler or a joint block holds the
        variables.  Where the posterior couples variables strongly, a hierarchical scale and the effects it
        scales above all, mean-field intervals are too narrow (docs: "How far is my fit?");
        ``table.attrs["intervals"]`` says this for the fit at hand.  Needs pandas
        (``pip install fgvmp[after]``).
        """
        return summary(self, prob, draws, seed, var_names)

    def to_arviz(self, draws: int = 1000, seed: int | None = 0, prior: bool = False,
                 posterior_predictive: bool = False, chains: int = 4) -> Any:
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
        chains
            The S draws are split into this many chains of S/chains consecutive draws each (``draws`` must be
            a multiple of it).  They are independent draws of q either way; the split gives ArviZ's
            diagnostics chains to compare, so ``az.summary`` shows R-hat ≈ 1 and ESS ≈ S (the Monte Carlo
            error of the draws) instead of warning that one chain cannot be checked.

        Returns
        -------
        arviz.InferenceData
            ``posterior``: S independent draws from q as ``chains`` chains, variables named as in the model (a
            normal–gamma block ``w`` adds ``"w.tau"``), dims named after the plates and event axes
            ``<name>_dim_<i>`` (a Dirichlet's categories: its Categoricals' category plate), coords 0..size−1 (or
            the model's ``coords``: group names, the columns of a DataFrame X of ``fg.inner``);
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
        ``az.summary`` describe Monte Carlo error only (R-hat ≈ 1, ESS ≈ S), not convergence of the fit;
        judge that from ``result.converged`` and ``elbo_trace``.  Save with
        ``idata.to_netcdf(path)`` and load with ``az.from_netcdf(path)``.  Needs ``pip install 'fgvmp[after]'``,
        and the fit's model and data: a fit by ``fg.SVI`` on streamed batches, or a sharded fit on dask data,
        is refused with the reason.
        """
        return to_arviz(self, draws, seed, prior, posterior_predictive, chains)

    @property
    def time_per_iter(self) -> float:
        return self.time / max(self.n_iter, 1)

    def __repr__(self) -> str:
        conv = "converged" if self.converged else "not converged"
        return (f"Result({self.model_name!r}, {self.algorithm}: evidence {self.elbo:.10g} ({self.evidence_kind}), "
                f"{self.n_iter} iterations, {conv}, {self.time:.3g} s)")
