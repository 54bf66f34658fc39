"""Stochastic variational inference (Hoffman, Blei, Wang & Paisley 2013): ``fg.SVI``.

The model splits into global latent variables β (conjugate-exponential: every factor sending them a
message is conjugate) and local latent variables z_n on one data plate of N rows.  Each step t draws a
minibatch B of rows (without replacement within an epoch, seeded), or takes the next streamed batch, and

1. fits the batch's local posteriors q(z_n), n ∈ B, by coordinate ascent (VMP sweeps over the local
   variables only) with the global posteriors held at their current natural parameters λ;
2. forms the intermediate global natural parameters from the engine's own conjugate messages,
   λ̂ = Σ_{f global} m_f + (N/|B|) Σ_{f on the data plate} m_f   (the prior is a global factor);
3. steps λ ← (1 − ρ_t) λ + ρ_t λ̂ with ρ_t = (t + τ₀)^(−κ), κ ∈ (0.5, 1], one global block at a time
   (each λ̂ sees the globals already stepped; with |B| = N and ρ = 1 a step is a VMP sweep).

λ̂ − λ is the natural gradient of the ELBO estimated from the batch (Hoffman et al. 2013, eq. 24), so the
iteration is stochastic natural-gradient ascent and converges to a local optimum of the ELBO under the
Robbins–Monro conditions Σρ_t = ∞, Σρ_t² < ∞.  The running figure is the minibatch-rescaled bound
L̂_B = Σ_{f global} E[log f] + H[q(β)] + (N/|B|)(Σ_{f local} E[log f] + H[q(z_B)]), an unbiased estimate of
the ELBO at (λ, the batch's local optimum), smoothed by an exponential moving average.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from factorgraph.graph import checks, convergence
from factorgraph.graph.derived import derived_moments
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError
from factorgraph.posterior.predict import FitRecord
from factorgraph.posterior.results import LOWER_BOUND, STOCHASTIC, Result

from . import progress as _progress
from .algorithms import VMP
from .compile import compile_model
from .engine import Engine
from .runners.options import AUTO, RunOptions
from .seeding import gathered_selectors
from .svi_batch import batch_arrays, batch_model, check_batch, data_layout, local_step


@dataclass(frozen=True)
class SVI:
    """Stochastic variational inference (Hoffman, Blei, Wang & Paisley 2013, JMLR 14: 1303–1347).

    For models with global conjugate-exponential latent variables β and local latent variables z_n on
    one data plate of N rows.  Step t takes a minibatch B (rows drawn without replacement within an
    epoch, seeded by ``fg.infer(seed=)``, or the next batch of a stream), fits the local posteriors of
    its rows given the current globals, and moves the global natural parameters λ toward

    .. math:: \\hat\\lambda = \\sum_{f\\,\\text{global}} m_f + \\frac{N}{|B|}\\sum_{f \\text{ on the data plate}} m_f,
              \\qquad \\lambda \\leftarrow (1-\\rho_t)\\lambda + \\rho_t\\hat\\lambda,
              \\qquad \\rho_t = (t + \\tau_0)^{-\\kappa},

    where m_f are the engine's conjugate VMP messages to the global (its prior among them); the globals
    are stepped one block at a time (elements of a mean-field vector in turn), each λ̂ seeing the globals
    already stepped, so that |B| = N with ρ = 1 is exactly a VMP sweep.  ``fg.infer``
    runs ``max_iter`` steps; ``Result.elbo_trace`` is the smoothed minibatch-rescaled bound (evidence kind
    "stochastic estimate of a lower bound").  With in-memory data (``exact_elbo=True``, the default) the
    run ends with one full pass: the local posteriors of all N rows are fitted to the final globals and
    ``Result.elbo`` is the exact full-data ELBO (a lower bound); streamed runs report the smoothed estimate.
    ``Result.elbo_estimate`` is the last smoothed estimate and ``Result.elbo_estimates`` every step's
    unsmoothed one.  SVI has no stopping rule: ``Result.converged`` only says the run made its ``max_iter``
    steps, the stream ended, or a callback answered ``"converged"`` (any other true answer stops the run
    unconverged, with a ``ConvergenceWarning``); judge convergence from ``elbo_trace``.  The starting globals
    come from VMP sweeps on one batch with the local terms rescaled (``init=`` may give some or all of them);
    like VMP's random start, a mixture's may lead to a poorer local optimum, so compare a few seeds.

    What fits (anything else is refused with a ``ModelError`` naming the cause): one data plate, whose
    variables are fully observed or fully latent (no missing entries on it); conjugate-exponential globals; no
    global handlers, schedule, warm-up, damping, stopping rule or sweep hooks (rotations); no chain on the
    data plate (its rows must be independent given the globals); indexed views ``x[labels]`` gathered onto
    the data plate (their labels are row data, subsampled with the rows), not along another plate under it;
    no gate whose selector is gathered by labels; no scale used on σ itself (in a sum or product); what varies
    over the rows enters as observed data, ``fg.inner`` inputs, labels or the row constants of sums and
    products (not as a constant on a factor's edge or a polynomial's coefficients).  Each step compiles the
    batch's model: a cost O(graph size), not O(N), that dominates on very small batches.

    Parameters
    ----------
    batch_size
        Rows of the data plate per step, |B| (at most N: the plate's rows in memory, ``n_data`` for a stream,
        whose batches may have any number of rows up to ``n_data``).
    learning_rate
        The step sizes ρ_t, t = 0, 1, ...: a float κ ∈ (0.5, 1] (ρ_t = (t + 1)^(−κ)), a pair (τ₀, κ)
        with τ₀ ≥ 0 (ρ_t = (t + τ₀)^(−κ), capped at 1), or a callable t ↦ ρ_t ∈ (0, 1] (a constant step:
        ``lambda t: 0.05``).
    plate
        Name of the data plate.  By default, among the plates every observed array is on, the one carrying
        the most per-row latent variables (on the plate and on no plate the data lack) when it is also the
        largest; if the two criteria disagree a ModelError asks for ``plate=``.  ``Result.notes[0]`` says
        which plate was used.
    n_data
        N, the notional data size for the rescaling, needed for streamed data (``fg.infer(data=...)``);
        for in-memory data it is the plate size.  A stream's first batch also gives the starting globals.
    local_iter, local_tol
        Local coordinate ascent: at most ``local_iter`` sweeps over the batch's local variables, stopping
        when no natural parameter changes by more than ``local_tol`` (relative).
    smoothing
        Weight of the past in the moving average of the running bound (0: no smoothing).
    exact_elbo
        For in-memory data, end with one full pass that computes the exact ELBO (see above) and the local
        posteriors of every row.  Without it the Result holds the global posteriors only.  A fit of in-memory
        rows keeps its model and data (``result.to_arviz``, ``fg.compare(loo=True)``, ``fg.predict``, and the
        data check of ``fg.compare``); a streamed fit keeps neither (its batches are gone).
    """

    batch_size: int
    learning_rate: Any = (1.0, 0.7)
    plate: str | None = None
    n_data: int | None = None
    local_iter: int = 50
    local_tol: float = 1e-6
    smoothing: float = 0.9
    exact_elbo: bool = True
    name = "svi"
    monotone = False
    damping = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "batch_size", checks.integer(self.batch_size, "SVI: batch_size (a positive "
                                                                                "integer)", low=1))
        object.__setattr__(self, "local_iter", checks.integer(self.local_iter, "SVI: local_iter", low=1))
        object.__setattr__(self, "local_tol", checks.number(self.local_tol, "SVI: local_tol (≥ 0)", low=0.0))
        object.__setattr__(self, "smoothing", checks.number(self.smoothing, "SVI: smoothing (in [0, 1))", low=0.0,
                                                            high=1.0, high_open=True))
        if self.n_data is not None:
            object.__setattr__(self, "n_data", checks.integer(self.n_data, "SVI: n_data (a positive integer)", low=1))
        if self.plate is not None and not isinstance(self.plate, str):
            raise ModelError(f"SVI: plate must be a plate name, got {checks._short(self.plate)}")
        self.step_size(0)  # validates learning_rate

    def admit(self, model: Model, options: RunOptions) -> RunOptions:
        """Refuse what SVI does not take: sweep hooks, handlers, a schedule, warm-up, damping and stopping rules
        (it runs ``max_iter`` steps or until the stream ends); the options it ignores are reset for the checks."""
        if getattr(model, "sweep_hooks", None):
            raise ModelError(f"model {model.name!r} has sweep hooks (a rotation), which run after VMP/NCVMP sweeps "
                             "only, not under SVI")
        if options.handlers or options.schedule is not None or options.warmup or options.damping:
            raise ModelError("SVI takes no handlers, schedule, warmup or damping")
        tol, param_tol = options.tol, options.param_tol
        if not (isinstance(tol, str) and tol == AUTO and isinstance(param_tol, str) and param_tol == AUTO):
            raise ModelError("SVI has no stopping rule (tol, param_tol): it runs max_iter steps or until the stream "
                             "ends; stop it earlier with a callback")
        return replace(options, tol=None, param_tol=None, schedule=None, warmup=(), damping=None, handlers=None)

    def run(self, model: Model, options: RunOptions) -> Result:
        """``fg.infer(model, algorithm=fg.SVI(...), data=...)`` with checked ``options`` (``run_svi``)."""
        return run_svi(model, self, options.data, options.max_iter, options.init, options.callbacks, options.progress,
                       options.seed)

    def step_size(self, t: int) -> float:
        """ρ_t of step t (t = 0, 1, ...)."""
        lr = self.learning_rate
        if callable(lr):
            rho = lr(t)
            try:
                rho = float(rho)
            except (TypeError, ValueError):
                raise ModelError(f"SVI: learning_rate({t}) returned {checks._short(rho)}, not a number") from None
            if not 0.0 < rho <= 1.0:
                raise ModelError(f"SVI: learning_rate({t}) = {rho!r}; step sizes must lie in (0, 1]")
            return rho
        if isinstance(lr, tuple | list) and len(lr) == 2:
            tau0 = checks.number(lr[0], "SVI: learning_rate τ₀ (≥ 0)", low=0.0)
            kappa = lr[1]
        elif isinstance(lr, tuple | list):
            raise ModelError(f"SVI: learning_rate must be κ, (τ₀, κ) or a callable, got {checks._short(lr)}")
        else:
            tau0, kappa = 1.0, lr
        kappa = checks.number(kappa, "SVI: learning_rate κ", low=0.0)
        if not 0.5 < kappa <= 1.0:
            raise ModelError(f"SVI: the forgetting rate κ = {kappa!r} must lie in (0.5, 1] (Robbins–Monro); for a "
                             f"constant step size ρ pass learning_rate=lambda t: ρ")
        return float(min(1.0, (t + tau0) ** -kappa)) if t + tau0 > 0 else 1.0


def run_svi(model: Model, alg: SVI, data: Iterable | None, max_iter: int, init: dict | None,
            callbacks: list[Callable], progress: bool | None, seed: int | None) -> Result:
    """``fg.infer(model, algorithm=fg.SVI(...), data=...)``: the SVI loop and its Result."""
    on_sigma = [v.name for v in model.variables.values() if getattr(v, "base", None) is not None]
    if on_sigma:
        raise ModelError(f"SVI: {on_sigma[0]!r} is a scale used as a term of a sum or product (q over σ itself), "
                         "which SVI does not support yet: use it as an sd=, or fit with fg.VMP()")
    gathered = gathered_selectors(model)
    if gathered:
        raise ModelError(f"SVI: the selector {gathered[0]} of a gate is not supported by SVI yet; fit with fg.VMP()")
    layout = data_layout(model, alg.plate)
    N_mem = layout.plate.size
    stream = data is not None
    if stream:
        if alg.n_data is None:
            raise ModelError("SVI: streamed data (fg.infer(data=...)) needs n_data=, the notional number of rows N "
                             "for the rescaling N/|B|")
        if isinstance(data, dict) or not hasattr(data, "__iter__"):
            raise ModelError(f"SVI: data must be an iterable of batches (dicts of row arrays), got "
                             f"{checks._short(data)}")
        source = iter(data)
        N = alg.n_data
        if alg.batch_size > N:
            raise ModelError(f"SVI: batch_size {alg.batch_size} exceeds n_data={N}, the number of rows the streamed "
                             "batches are drawn from")
        try:
            first = check_batch(model, layout, next(source), 0, N)
        except StopIteration:
            raise ModelError("SVI: the data stream is empty") from None
        source = itertools.chain([None], source)  # the first batch, already checked, is stepped on first
    else:
        if alg.n_data is not None and alg.n_data != N_mem:
            raise ModelError(f"SVI: n_data={alg.n_data} is for streamed data; the model's data plate "
                             f"{layout.plate.name!r} has {N_mem} rows")
        N, first = N_mem, None
        if alg.batch_size > N_mem:
            raise ModelError(f"SVI: batch_size {alg.batch_size} exceeds the {N_mem} rows of the data plate "
                             f"{layout.plate.name!r}")
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    q = _initial_globals(model, layout, init or {}, alg, rng, first)
    trace: list[float] = []
    raw: list[float] = []
    perm, pos = rng.permutation(N_mem), 0
    smooth = None
    it = 0
    stopped = ""
    converged = True
    sizes: set[int] = set()
    with _progress.active(_progress.resolve(progress)):
        bar = _progress.bar(model.name + " (SVI)", max_iter, unit="step", leave=True)
        for it in range(1, max_iter + 1):
            if stream:
                try:
                    batch = next(source)
                except StopIteration:
                    it -= 1
                    stopped = "the data stream ended"
                    break
                arrays, B = first if batch is None else check_batch(model, layout, batch, it - 1, N)
            else:
                if pos + alg.batch_size > N_mem:
                    perm, pos = rng.permutation(N_mem), 0
                rows = np.sort(perm[pos:pos + alg.batch_size])
                pos += alg.batch_size
                arrays, B = batch_arrays(layout, rows), alg.batch_size
            sizes.add(B)
            bm = batch_model(model, layout, arrays, B)
            q, bound, eng = local_step(bm, layout, q, N / B, alg.step_size(it - 1), alg.local_iter, alg.local_tol,
                                       rng)
            raw.append(bound)
            smooth = bound if smooth is None else alg.smoothing * smooth + (1.0 - alg.smoothing) * bound
            trace.append(smooth)
            bar.update(smooth)
            answers = [cb(it, smooth, eng) for cb in callbacks]
            if any(isinstance(a, str) and a == "converged" for a in answers):
                stopped = f"a callback declared the run converged at step {it}"
                break
            if any(answers):
                stopped, converged = f"a callback stopped the run at step {it}", False
                break
        bar.close()
    B_text = (f"{min(sizes)}" if len(sizes) == 1 else f"{min(sizes)}..{max(sizes)}") if sizes else f"{alg.batch_size}"
    notes = [f"SVI on data plate {layout.plate.name!r} (N = {N}, |B| = {B_text}): globals "
             f"{[g.name for g in layout.globals]}, locals {[v.name for v in layout.locals]}; {it} steps"]
    posteriors = dict(q)
    derived: dict = {}
    elbo, kind = (smooth if smooth is not None else float("nan")), STOCHASTIC
    if not stream and alg.exact_elbo:
        full, eng = _full_pass(model, layout, q, alg, rng)
        posteriors = dict(eng.q)
        derived = derived_moments(eng.node_stats, model)  # fg.deterministic nodes: exact moments under the final q
        elbo, kind = full, LOWER_BOUND
        notes.append("Result.elbo is the exact full-data ELBO after one final pass over all rows (local posteriors "
                     f"fitted to the final globals); elbo_trace is the smoothed minibatch estimate (last "
                     f"{smooth:.10g}, a {STOCHASTIC})")
    warnings = [] if converged else [f"{model.name}: not converged ({stopped})"]
    if stopped:
        notes.append(stopped)
    se = 0.0
    if kind == STOCHASTIC and len(raw) > 2:  # the moving average's sd from the recent steps' spread
        a = alg.smoothing
        se = float(np.std(raw[-50:], ddof=1) * np.sqrt((1.0 - a) / (1.0 + a)))
    res = Result(model.name, "svi", posteriors, float(elbo), kind, np.array(trace), it, converged,
                 time.perf_counter() - t0, 0.0, warnings, se, notes)
    res.elbo_estimate = float(smooth) if smooth is not None else float("nan")
    res.elbo_estimates = np.array(raw)
    res.derived = derived
    if not stream:  # fitted to the model's own rows: to_arviz, LOO and fg.predict read the model and its data
        res.model = model
        res.fit_record = FitRecord(model, {k: d.value for k, d in model.data.items()}, model.data_version)
    if not np.isfinite(res.elbo):
        convergence.warn(f"{model.name}: SVI ran no step; no evidence figure")
    for text in warnings:
        convergence.warn(text)
    return res


def _initial_globals(model: Model, layout, init: dict, alg: SVI, rng: np.random.Generator,
                     first: tuple | None) -> dict[str, Any]:
    """Starting q of the globals: ``init`` where given; the rest from VMP sweeps on one batch (a random one
    of the rows in memory, or the stream's first) from the engine's starting local posteriors (random
    responsibilities for selectors, priors otherwise), with full steps (ρ = 1): this breaks the symmetry of
    mixture components and topics as VMP's random start does."""
    glob = {g.name for g in layout.globals}
    for name in init:
        if name not in glob:
            raise ModelError(f"SVI: init gives {name!r}, which is not a global latent variable ({sorted(glob)})")
    N = alg.n_data if first is not None else layout.plate.size
    if first is None:
        B = min(N, alg.batch_size)
        arrays = batch_arrays(layout, np.sort(rng.choice(N, size=B, replace=False)))
    else:
        arrays, B = first
    bm = batch_model(model, layout, arrays, B)
    c = compile_model(bm, VMP(), init=init)
    eng = Engine(c)
    eng.initialise(dict(init), rng)
    q = {g: eng.q[g] for g in glob}
    if set(init) >= glob:
        return q
    # VMP on the first batch with the local terms rescaled by N/|B| (sweeps of a full step, ρ = 1), from the
    # engine's random start: it separates components as full-data VMP does
    for sweep in range(_WARM_SWEEPS):
        new, _, _ = local_step(bm, layout, q, N / B, 1.0, min(sweep, 1), 0.0, rng, engine=eng)
        q = {g: q[g] if g in init else new[g] for g in glob}
    return q


_WARM_SWEEPS = 20  # VMP sweeps on the first batch that give SVI its starting globals


def _full_pass(model: Model, layout, q: dict, alg: SVI, rng: np.random.Generator) -> tuple[float, Engine]:
    """Fit every row's local posteriors to the final globals and return the exact ELBO."""
    c = compile_model(model, VMP())
    eng = Engine(c)
    eng.initialise({}, rng)
    for g in layout.globals:
        eng.set_posterior(model.variables[g.name], q[g.name])
    names = {v.name for v in layout.locals}
    order = [v for v in c.order if v.name in names]
    sweeps = max(alg.local_iter, 200)
    for _ in range(sweeps):
        eng.max_change = 0.0
        for v in order:
            eng.update(v)
        if eng.max_change <= alg.local_tol:
            break
    else:
        if order:
            convergence.warn(f"{model.name}: SVI's final pass: the local posteriors did not settle in {sweeps} sweeps "
                             f"(last relative change {eng.max_change:.3g} > local_tol {alg.local_tol:.3g}); the exact "
                             "ELBO is at these locals")
    return eng.elbo(), eng
