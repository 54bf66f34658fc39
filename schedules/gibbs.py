"""``fg.Gibbs(...)``: Gibbs sampling on the model's graph, run by ``fg.infer`` like any algorithm.

Each sweep draws every latent variable in turn from its full conditional given the current values of all
the others.  On a conjugate edge that conditional is in the variable's own family, with natural parameters

    η_v | rest = η_prior(v) + Σ_{f ∋ v} m_{f→v}(x_rest),

the sum of the VMP messages into v evaluated with every neighbour at a point: VMP's message is the gradient of
E_q[log f] in v's expected statistics, and under point masses q(x_j) = δ(x_j − x_j⁽ᵗ⁾) E_q[log f] = log f, so
the message is exactly the log-conditional's coefficient on v's statistics (``schedules.gibbs_sampler``).  A
variable is drawn jointly over its plate (the entries are conditionally independent given the rest), a
vector (mv_gaussian) as one block, a hidden Markov chain by forward filtering backward sampling, and the
coupled coefficients of a mean-field inner product one at a time.  A Gaussian variable with non-conjugate
children (log-link Poisson, logit-link binomial, probit and robust sites) moves by elliptical slice sampling
(``schedules.gibbs_slice``).  A positive scale with a half-normal, half-Cauchy, half-t, exponential or uniform
prior (``fg.half_cauchy`` etc.) moves by univariate slice sampling in log σ, every entry of a plated scale at once
(``schedules.gibbs_scale``); its draws are reported as σ.  A logistic factor is made conjugate by
Pólya-Gamma augmentation (``factors.polya_gamma``: its "gibbs" rule draws ω ~ PG(1, x) and sends the Gaussian
message (s − ½, −ω/2)).  This module holds the settings object
and the check that every factor of the model has such a conditional.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

import numpy as np

from distributions import Bernoulli, Beta, Categorical, Dirichlet, Gamma, Gaussian, MvGaussian, Wishart
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import Deterministic, Gate, ModelError, Variable
from factorgraph.posterior.results import Result
from factors import (
    BERNOULLI,
    BERNOULLI_LOGIT,
    BETA,
    BINOMIAL,
    CATEGORICAL,
    DIRICHLET,
    GAMMA,
    GAUSSIAN,
    MARKOV_CHAIN,
    MULTINOMIAL,
    MV_GAUSSIAN,
    MV_GAUSSIAN_FIXED,
    MV_GAUSSIAN_WISHART,
    POISSON,
    SCALE_PRIORS,
    SLICED,
    WISHART,
)

from .gibbs_sampler import run_gibbs
from .runners.options import RunOptions

# the factor types whose VMP messages at point values are their exact full conditionals (conjugate pairs)
CONDITIONAL = {GAUSSIAN, GAMMA, BETA, BERNOULLI, DIRICHLET, CATEGORICAL, MV_GAUSSIAN, MV_GAUSSIAN_FIXED,
               MV_GAUSSIAN_WISHART, WISHART, POISSON, BINOMIAL, MULTINOMIAL, MARKOV_CHAIN}
# the factor types whose full conditionals come from an augmentation, and the package each one needs
AUGMENTED = {BERNOULLI_LOGIT: "polyagamma"}
# deterministic nodes that are linear in each parent given the others (their pulled-back messages stay exact)
LINEAR_OPS = {"sum", "product", "inner", "dot"}
# latent families a conditional can be drawn in
DRAWABLE = (Gaussian, MvGaussian, Gamma, Beta, Dirichlet, Categorical, Bernoulli, Wishart)


def _positive(value: Any, what: str) -> int:
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer) or value < 1:
        raise ModelError(f"Gibbs: {what} must be a positive integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Gibbs:
    """Gibbs sampling: ``chains`` Markov chains, each sweep drawing every latent variable from its full
    conditional (see the module docstring for the conditionals).

    Parameters
    ----------
    draws
        Draws kept per chain (after burn-in and thinning).
    burn
        Sweeps discarded at the start of each chain.
    chains
        Independent chains, each started from a draw of the prior-based starting posteriors; their
        agreement gives the R-hat and effective sample sizes of ``result.summary()``.
    thin
        Keep every ``thin``-th sweep after burn-in (the run is ``burn + draws·thin`` sweeps per chain).
    seed
        An integer ≥ 0 (default: ``fg.infer``'s ``seed``).  Chain c draws from the c-th child of
        ``numpy.random.SeedSequence(seed).spawn(chains)``, so a chain's draws depend only on the seed and its
        index, not on how many chains run.

    Notes
    -----
    ``fg.infer``'s ``init`` (starting posteriors to draw the starting state from) and ``schedule`` (the order of
    the draws in a sweep) apply; ``max_iter``, ``tol`` and ``param_tol`` do not (the run is ``burn + draws·thin``
    sweeps per chain), and ``handlers``, ``damping``, ``warmup``, ``callbacks`` and ``data`` are refused.

    The result (``fg.GibbsResult``) holds the draws per chain; ``result.posterior(name)`` is their empirical
    distribution.  There is no evidence figure, so ``fg.compare`` refuses a Gibbs fit.  A fit whose R-hat of some
    scalar exceeds 1.01, or whose bulk ESS falls below 400, warns, naming the variables.
    """

    draws: int = 1000
    burn: int = 500
    chains: int = 4
    thin: int = 1
    seed: int | None = None
    name = "gibbs"
    damping = 0.0
    monotone = False

    def __post_init__(self) -> None:
        for what in ("draws", "burn", "chains", "thin"):
            object.__setattr__(self, what, _positive(getattr(self, what), what))
        if self.seed is not None:
            if isinstance(self.seed, bool | np.bool_) or not isinstance(self.seed, int | np.integer) or self.seed < 0:
                raise ModelError(f"Gibbs: seed must be an integer ≥ 0, got {self.seed!r}")
            object.__setattr__(self, "seed", int(self.seed))

    def admit(self, model: Model, options: RunOptions) -> RunOptions:
        """Refuse what Gibbs sampling does not take (handlers, damping, a stream of batches, warm-up) and a model
        with a factor or a variable that has no conditional to draw from."""
        for what in ("handlers", "damping", "data", "callbacks"):
            if getattr(options, what):
                raise ModelError(f"Gibbs: {what}= is not used by Gibbs sampling; leave it out")
        if options.warmup:
            raise ModelError("Gibbs: warmup= is not used by Gibbs sampling (burn= discards the first sweeps)")
        check_conditionals(model)
        return options

    def run(self, model: Model, options: RunOptions) -> Result:
        """The chains of ``model`` (``schedules.gibbs_sampler.run_gibbs``)."""
        return run_gibbs(model, self, options)


def _needs(package: str, factor: str) -> None:
    """The package an augmentation draws with, or an error naming the factor and what to install."""
    if importlib.util.find_spec(package) is None:
        raise ModelError(f"Gibbs: factor {factor!r} is sampled by Pólya-Gamma augmentation, which needs the {package} "
                         "package: pip install 'fgvmp[gibbs]'")


def _sliceable(f: Any) -> None:
    """A non-conjugate likelihood is sampled through its Gaussian argument by elliptical slice sampling: its
    evidence must be exact at a point (log f itself), its output observed, its argument's parents Gaussian."""
    if f.ftype.get_evidence(f.method)[1] != "exact":
        raise ModelError(f"Gibbs: factor {f.name!r} ({f.ftype.name}) with method {f.method!r} evaluates a bound, not "
                         "its log-density; use its exact method (the default) for Gibbs sampling")
    out = f.edges["out"]
    if isinstance(out, Variable) and out.is_latent:
        raise ModelError(f"Gibbs: factor {f.name!r} ({f.ftype.name}) has a latent output {out.name!r}; Gibbs sampling "
                         "takes it with observed data only")
    arg = f.edges[SLICED[f.ftype]]
    arg = arg.source if isinstance(arg, Gate) else arg
    parents = [arg] if isinstance(arg, Variable) else arg.stochastic_parents() if hasattr(
        arg, "stochastic_parents") else []
    for p in parents:
        if p.is_latent and p.family not in (Gaussian, MvGaussian):
            raise ModelError(f"Gibbs: factor {f.name!r} ({f.ftype.name}) reads {p.name!r} ({p.family.__name__}) "
                             "non-conjugately; elliptical slice sampling takes Gaussian variables only")


def check_conditionals(model: Model) -> None:
    """Every factor of ``model`` must be a conjugate pair with a full conditional to draw from, every latent
    variable of a drawable family, and every deterministic node linear in each parent; otherwise a
    ``ModelError`` names what is not."""
    for f in model.factors:
        if f.ftype in AUGMENTED:
            _needs(AUGMENTED[f.ftype], f.name)
            continue
        if f.ftype in SLICED:
            _sliceable(f)
            continue
        if f.ftype in SCALE_PRIORS:  # a positive scale's prior: slice sampling in log σ (schedules.gibbs_scale)
            continue
        if f.ftype not in CONDITIONAL or f.method != "default":
            how = "" if f.method == "default" else f" with method {f.method!r}"
            takes = ", ".join(sorted(t.name for t in CONDITIONAL))
            raise ModelError(f"Gibbs: factor {f.name!r} ({f.ftype.name}{how}) has no full conditional to draw "
                             f"from; Gibbs sampling takes conjugate factors ({takes}); fit this model with fg.VMP() "
                             "or fg.NCVMP()")
    for v in model.variables.values():
        if not v.is_latent:
            continue
        scale = v.prior is not None and v.prior.ftype in SCALE_PRIORS
        if v.family not in DRAWABLE or (not scale and (v.lower is not None or v.base is not None)):
            kind = ("a lower-bounded rate" if v.lower is not None else "a scale with a non-conjugate prior"
                    if v.base is not None else v.family.__name__)
            raise ModelError(f"Gibbs: variable {v.name!r} ({kind}) has no conditional Gibbs sampling can draw from")
    for d in getattr(model, "deterministics", []):
        if isinstance(d, Deterministic) and d.op.name not in LINEAR_OPS:
            raise ModelError(f"Gibbs: deterministic node {d.name!r} ({d.op.name}) is not linear in its parents, so "
                             "its parents have no conjugate conditional")


__all__ = ["CONDITIONAL", "Gibbs", "check_conditionals"]
