"""Inference results and model comparison."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .nodes import ModelError

# what an evidence figure is (docs/maths.md §2)
LOWER_BOUND = "lower bound"
LATTICE_BOUND = "lower bound up to lattice error"
APPROXIMATION = "approximation"
ESTIMATE = "Monte Carlo estimate of a lower bound"


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
    # a sharded fit (dask data, docs/design.md §10): how the plate was cut (plate, rows, chunks, chunk_rows,
    # backend, workers, bytes_per_sweep, retries), and the names of the variables on the sharded plate, whose
    # posteriors stay with their chunks until ``posterior`` collects one
    sharding: dict[str, Any] | None = None
    local: dict[str, Any] = field(default_factory=dict)  # name -> function collecting its posterior

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
        try:
            q = self.posteriors[name]
        except KeyError:
            raise KeyError(f"no posterior for {name!r}; latent variables are "
                           f"{sorted([*self.posteriors, *self.local])}") from None
        if name in self.scales:
            from distributions import InverseSqrtGamma

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
        q.  A normal–gamma block ``w`` gives ``"w"`` and ``"w.tau"`` drawn jointly.
        """
        from .sampling import sample_posterior

        return sample_posterior(self, draws, seed)

    def summary(self, prob: float = 0.94, draws: int = 4000, seed: int | None = 0) -> Any:
        """A pandas DataFrame of the posterior mean, sd and central ``prob`` credible interval per scalar.

        Rows are named like ``"w[0]"``, ``"tau"``, ``"mu[3]"``.  Intervals are exact (quantiles of q)
        where q has closed-form quantiles (Gaussian, Gamma, Beta, the marginals of a multivariate
        Gaussian), else computed from ``draws`` draws of q; the ``exact`` column says which.  Needs
        pandas (``pip install fgvmp[after]``).
        """
        from .summary import summary

        return summary(self, prob, draws, seed)

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

    def __str__(self) -> str:
        w = max(5, *(len(n) for n in self.names))
        kw = max(4, *(len(k) for k in self.kinds))
        se = self.elbo_se if self.elbo_se is not None and np.any(self.elbo_se > 0) else None
        sec = f"  {'± se':>10}" if se is not None else ""
        lines = [f"{'model':<{w}}  {'evidence':>14}{sec}  {'kind':<{kw}}  {'log BF':>10}  {'P(model)':>9}"]
        for i in np.argsort(-self.evidence):
            sei = f"  {se[i]:10.4f}" if se is not None else ""
            lines.append(f"{self.names[i]:<{w}}  {self.evidence[i]:14.6f}{sei}  {self.kinds[i]:<{kw}}  "
                         f"{self.log_bayes_factor[i]:10.4f}  {self.probability[i]:9.4f}")
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)

    __repr__ = __str__

    def best(self) -> str:
        return self.names[int(np.argmax(self.evidence))]


def compare(results: dict[str, Result]) -> Comparison:
    """Compare models by their evidence.

    Log Bayes factors are taken against the best model and posterior model probabilities assume
    a uniform prior over the models.  Figures of different kinds (a bound against an approximation)
    are not like with like: the table says so.
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
    close = [f"{names[best]} and {names[i]} differ by less than 2 se ({ev[best] - ev[i]:.3g} < "
             f"2 × {np.hypot(se[best], se[i]):.3g}), within the Monte Carlo error of the figures"
             for best in [int(np.argmax(ev))] for i in range(len(names))
             if i != best and np.hypot(se[best], se[i]) > 0 and ev[best] - ev[i] < 2.0 * np.hypot(se[best], se[i])]
    if close:
        note = "\n".join(filter(None, [note, *(f"note: {c}" for c in close)]))
    return Comparison(names, ev, kinds, lbf, p, note, se)
