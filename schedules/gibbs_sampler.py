"""The Gibbs chains: full conditionals from the VMP rules at point values, drawn plate by plate.

A chain's state is one value x_v per latent variable, held in the engine as the statistics of a point mass,
u(x_v) (x and x² for a Gaussian, x and log x for a Gamma, log p for a Dirichlet, one-hot labels for a
Categorical: ``factors.base.point_stats``).  With every neighbour at a point the engine's message sum
η_v = Σ_f m_{f→v} is the natural parameter of p(v | rest) on a conjugate edge (``schedules.gibbs``); the
update draws x_v from that member of v's family, over all of v's plates at once (its entries are independent
given the rest).  Exceptions:

* a hidden Markov chain z (``fg.markov_chain``): its node potentials φ_t(k) = Σ_f log f(z_t = k | rest) and the
  drawn π, A give p(z | rest) ∝ π(z_1) Π_t A(z_{t−1}, z_t) Π_t exp φ_t(z_t), drawn jointly per sequence by
  forward filtering backward sampling (``factors.kernels.forward_backward.sample_chains``);
* the coefficients of a mean-field inner product, coupled through the sum Σ_d x_d w_d: one element at a time;
* partly observed variables keep their observed entries.

Each chain has its own generator, ``default_rng(SeedSequence(seed).spawn(chains)[c])``: chain c's draws are the
same whether 1 or 10 chains are run.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from distributions import Beta, Categorical, Dirichlet, Gamma
from distributions.categorical_chain import CategoricalChain
from distributions.point_mass import PointMass
from factorgraph.graph import convergence
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import Variable
from factorgraph.posterior.empirical import EmpiricalPosterior, GibbsResult, diagnostics, flagged
from factorgraph.posterior.predict import FitRecord
from factors import BERNOULLI_LOGIT
from factors.base import one_hot, point_stats
from factors.kernels.forward_backward import sample_chains

from .compile import compile_model
from .compiled import Compiled
from .engine import Engine
from .errors import InferenceError
from .gibbs_scale import ScaleSteps
from .gibbs_slice import SliceSteps
from .messages import _Moments

AUGMENTED = (BERNOULLI_LOGIT,)  # factor types whose "gibbs" rule draws auxiliary variables (factors/polya_gamma.py)
_TINY = np.finfo(float).tiny  # draws of a Gamma, Beta or Dirichlet that underflow to 0 (or a Beta to 1) are kept here


class _GibbsRules:
    """What compiling asks of an algorithm: the rules to resolve (a factor's "gibbs" rule, else its VMP rule) and
    the global damping (none)."""

    name = "gibbs"
    damping = 0.0


class GibbsChain(ScaleSteps, SliceSteps, Engine):
    """One Markov chain: the engine's statistics hold the point values of the current state.

    Parameters
    ----------
    c
        The model compiled with the Gibbs rules (``_GibbsRules``).
    rng
        The chain's generator.
    """

    def __init__(self, c: Compiled, rng: np.random.Generator) -> None:
        super().__init__(c)
        self.rng = rng
        self.values: dict[str, np.ndarray] = {}
        for f in c.factors:  # an augmented factor's rule draws its auxiliary variables from the chain's generator
            if f.node.ftype in AUGMENTED:
                f.params.setdefault("state", {})["rng"] = rng
        # Gaussian variables with non-conjugate children: drawn by elliptical slice sampling
        self.sliced = {v.name: fs for v in c.order if (fs := self.slice_factors(v))}
        # positive scales with a non-conjugate prior (fg.half_cauchy, ...): slice sampling in log σ
        self.scales = {v.name: h for v in c.order if (h := self.scale_prior(v)) is not None}

    # ------------------------------------------------------------------------------ the state
    def set_point(self, v: Variable, x: np.ndarray) -> None:
        """Set v's value to ``x`` (its observed entries kept) and its statistics to u(x)."""
        x = np.asarray(x)
        if v.family is Categorical:
            K = v.event_shape[0]
            if v.mask is not None:
                x = np.where(v.mask, np.argmax(np.nan_to_num(np.asarray(v.value, float)), -1), x)
            s = (one_hot(x, K),)
        else:
            if v.mask is not None:
                m = v.mask.reshape(v.mask.shape + (1,) * (x.ndim - v.mask.ndim))
                x = np.where(m, np.nan_to_num(np.asarray(v.value, float)), x)
            s = point_stats(v.family, x)
        for a in s:
            if not np.all(np.isfinite(a)):
                raise InferenceError(f"Gibbs: the draw of {v.name!r} has non-finite statistics (values in "
                                     f"[{np.min(x):.3g}, {np.max(x):.3g}]): the model may be improper")
        self.values[v.name] = x
        self.q[v.name] = PointMass(x, len(v.event_shape) if v.family is not Categorical else 0)
        self.stats[v.name] = s
        self.version[v.name] = self.version.get(v.name, 0) + 1

    def start(self, init: dict[str, Any]) -> None:
        """The starting state: the engine's starting posteriors (the priors, ``init``, the mixture selectors'
        random responsibilities), then in schedule order a draw from each (a Markov chain: its conditional
        given the others' starting statistics)."""
        self.initialise(dict(init), self.rng)
        for v in self.c.order:
            if v.name in self.structured:
                self.step(v)
            else:
                self.set_point(v, self._clip(v, self.q[v.name].sample(rng=self.rng)))

    # ------------------------------------------------------------------------------ one sweep
    def sweep(self) -> None:
        """Draw every latent variable from its full conditional, in schedule order."""
        for v in self.c.order:
            self.step(v)

    def step(self, v: Variable) -> None:
        """Draw v from p(v | rest): one draw over its plates, a Markov chain by FFBS, coupled coefficients one
        element at a time."""
        self._updating = v.name
        if v.name in self.structured:
            self._draw_chain(v)
            return
        if v.name in self.sliced:
            self.slice_step(v, self.sliced[v.name])
            return
        if v.name in self.scales:
            self.scale_step(v, self.scales[v.name])
            return
        plate = self.c.sequential.get(v.name)
        if plate is None:
            self.set_point(v, self.draw(v, self.natural_sum(v)))
            return
        axis = [p.index for p in v.plates].index(plate.index)
        for j in range(plate.size):  # each element's conditional depends on the others' current values
            x = np.array(self.values[v.name])
            idx = (slice(None),) * axis + (j,)
            x[idx] = self.draw(v, self.natural_sum(v))[idx]
            self.set_point(v, x)

    def conditional(self, v: Variable) -> Any:
        """The full conditional p(v | rest) at the current state (not for a Markov chain's labels)."""
        return self._proper(v, self.natural_sum(v))

    def draw(self, v: Variable, nat: tuple) -> np.ndarray:
        """One draw from the member of v's family with natural parameters ``nat``."""
        q = self._proper(v, nat)
        return self._clip(v, q.sample(rng=self.rng))

    def _proper(self, v: Variable, nat: tuple) -> Any:
        q = v.family.from_natural(*nat)
        proper = np.asarray(q.is_proper())
        if v.mask is not None:
            proper = proper | v.mask
        if not np.all(proper):
            lo = ", ".join(f"[{np.min(a):.3g}, {np.max(a):.3g}]" for a in nat)
            raise InferenceError(f"Gibbs: the conditional of {v.name!r} is improper (natural parameters {lo}); "
                                 "check that it has a proper prior")
        return q

    @staticmethod
    def _clip(v: Variable, x: np.ndarray) -> np.ndarray:
        """Keep a draw on the open support where the statistics need it (log x, log p)."""
        if v.family is Gamma:
            return np.maximum(x, _TINY)
        if v.family is Beta:
            return np.clip(x, _TINY, 1.0 - np.finfo(float).epsneg)
        if v.family is Dirichlet:
            x = np.maximum(x, _TINY)
            return x / x.sum(-1, keepdims=True)
        return x

    def _draw_chain(self, v: Variable) -> None:
        """A hidden Markov chain's labels from p(z | rest), jointly per sequence (FFBS)."""
        f = self.structured[v.name]
        K = v.event_shape[0]
        pot = np.zeros(v.shape + (K,))
        for cons in self.c.consumers.get(id(v), []):
            if cons.factor is not f:
                pot = pot + self.consumer_message(cons)[0]
        if id(v) in self.c.selector_factors:
            pot = pot + self.selector_total(v)
        m = _Moments(self, f)
        lpi, la = np.asarray(m["initial"][0]), np.asarray(m["transition"][0])
        batch, T = pot.shape[:-2], pot.shape[-2]
        lengths = np.broadcast_to(f.params["lengths"], batch).reshape(-1)
        z = sample_chains(pot.reshape((-1, T, K)), lpi.reshape(-1, K)[0], la.reshape(-1, K, K)[0], lengths, 1,
                          self.rng)[0].reshape(batch + (T,))
        g = one_hot(z, K)  # zero rows past a sequence's length (label −1)
        q = CategoricalChain.independent(g)  # a point path: its pair counts are the transition counts
        f.params["state"]["q"] = q
        self.values[v.name] = z
        self.q[v.name] = q
        self.stats[v.name] = (g,)
        self.version[v.name] = self.version.get(v.name, 0) + 1


def chain_seeds(seed: int | None, chains: int) -> list[np.random.SeedSequence]:
    """One seed sequence per chain, spawned from ``seed``: chain c's is the same for any number of chains."""
    return np.random.SeedSequence(seed).spawn(chains)


def run_chain(c: Compiled, seq: np.random.SeedSequence, init: dict[str, Any], burn: int, draws: int,
              thin: int) -> dict[str, np.ndarray]:
    """One chain: ``burn`` sweeps discarded, then ``draws`` kept, one every ``thin`` sweeps; returns the draws
    by variable name, shape ``(draws, *shape)``."""
    chain = GibbsChain(c, np.random.default_rng(seq))
    chain.start(init)
    for _ in range(burn):
        chain.sweep()
    kept: dict[str, list] = {v.name: [] for v in c.order}
    for _ in range(draws):
        for _ in range(thin):
            chain.sweep()
        for v in c.order:
            kept[v.name].append(chain.reported(v))
    return {n: np.stack(x) for n, x in kept.items()}


def run_gibbs(model: Model, algorithm: Any, options: Any) -> GibbsResult:
    """Run ``algorithm.chains`` chains of Gibbs sampling on ``model`` and collect them in a ``GibbsResult``;
    warns (``fg.ConvergenceWarning``) naming the variables whose R-hat exceeds 1.01 or bulk ESS is below 400."""
    t0 = time.perf_counter()
    c = compile_model(model, _GibbsRules(), options.schedule, options.init, None, None)
    compile_time = time.perf_counter() - t0
    seed = algorithm.seed if algorithm.seed is not None else options.seed
    seqs = chain_seeds(seed, algorithm.chains)
    t1 = time.perf_counter()
    runs = [run_chain(c, s, options.init or {}, algorithm.burn, algorithm.draws, algorithm.thin) for s in seqs]
    elapsed = time.perf_counter() - t1
    drawn = [v for v in model.variables.values() if any(v is u for u in c.order)]  # in the model's order
    draws = {v.name: np.stack([r[v.name] for r in runs]) for v in drawn}
    posteriors = {v.name: EmpiricalPosterior(v.name, draws[v.name],
                                             0 if v.family is Categorical else len(v.event_shape)) for v in drawn}
    sweeps = algorithm.burn + algorithm.draws * algorithm.thin
    notes = [f"Gibbs sampling: {algorithm.chains} chains of {sweeps} sweeps ({algorithm.burn} burn-in, every "
             f"{algorithm.thin}-th kept: {algorithm.draws} draws each), seed {seed}"]
    notes += _how_drawn(c)
    if options.note:
        notes.insert(0, options.note)
    warnings, bad = [], flagged(diagnostics(draws))
    if bad:
        warnings.append(f"Gibbs: the chains have not mixed for {', '.join(bad)} (R-hat above 1.01 or bulk ESS below "
                        "400): run longer chains (more draws or burn-in) or thin less")
    result = GibbsResult(model.name, algorithm.name, posteriors, float("nan"),
                         "none: Gibbs sampling gives no evidence figure", np.array([]), sweeps, not bad, elapsed,
                         compile_time, warnings, 0.0, notes, draws=draws, seeds=seqs)
    result.fit_record = FitRecord(model, {k: d.value for k, d in model.data.items()}, model.data_version)
    result.model = model
    for text in warnings:
        convergence.warn(text)
    return result


def _how_drawn(c: Compiled) -> list[str]:
    """Notes naming the variables not drawn in one piece from a conditional of their family."""
    probe = GibbsChain(c, np.random.default_rng(0))
    kinds = {"forward filtering backward sampling": sorted(probe.structured),
             "elliptical slice sampling": sorted(probe.sliced),
             "slice sampling in log σ (positive scales, reported as σ)": sorted(probe.scales),
             "one element at a time (coupled through a mean-field inner product)": sorted(c.sequential),
             "Pólya-Gamma augmentation": sorted(f.name for f in c.factors if f.node.ftype in AUGMENTED)}
    return [f"drawn by {how}: {names}" if "augmentation" not in how else f"factors sampled by {how}: {names}"
            for how, names in kinds.items() if names]


__all__ = ["GibbsChain", "chain_seeds", "run_chain", "run_gibbs"]
