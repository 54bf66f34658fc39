"""The message-passing engine: the posteriors, their initialisation and the iteration loop.

Each latent variable's posterior is the product of the messages of every factor around it (its
prior included): natural parameters add (``schedules.messages``; the update, ``schedules.updates``).
After every sweep the ELBO Σ_f E[log f] + Σ_i H[q_i] is evaluated (``schedules.evidence``); a sweep that
lowers it may be undone and retried damped (``schedules.backtracking``).  ``run`` iterates until the
ELBO or the natural parameters settle, under the thread policy of ``schedules.blas``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from distributions import Bernoulli, Categorical, Dirichlet, Gamma, Gaussian, MvGaussian, TiltedScale, TruncatedGamma
from distributions.base import Distribution
from factorgraph.graph import checks
from factorgraph.graph.convergence import oscillation, unsettled
from factorgraph.graph.nodes import Deterministic, Gate, Indexed, ModelError, Variable

from . import progress as _progress
from .acceleration import Acceleration, accelerator
from .backtracking import _RELAX_AFTER, Backtracking, _undamped_share
from .blas import sweep_threads
from .compiled import CFactor, Compiled
from .errors import InferenceError
from .evidence import Evidence
from .seeding import agreement, categorical_init, prior_led, prior_names, supported
from .updates import PosteriorUpdates, _from_natural


class Engine(PosteriorUpdates, Evidence, Backtracking):
    """The state of one run: posteriors ``q`` and their statistics, caches, damping memory, the ELBO trace.

    Its methods come from its parts: statistics and messages (``MessagePassing``), updates
    (``PosteriorUpdates``), the ELBO (``Evidence``) and undo/retry (``Backtracking``); here, the state and
    the starting posteriors.
    """

    def __init__(self, c: Compiled) -> None:
        self.c = c
        self.q: dict[str, Any] = {}
        self.stats: dict[str, tuple] = {}
        self.version: dict[str, int] = {}
        self._det_cache: dict[int, tuple] = {}
        self._ev_cache: dict[str, tuple] = {}  # factor -> (its neighbours' versions, E[log f])
        self._obs_stats: dict[Any, tuple] = {}  # observed variable name, or (deterministic id, role) of a constant
        self._last: dict[tuple[str, str, str], tuple] = {}
        self._updating = ""  # the variable whose update is being computed
        # backtracking damps a retried sweep toward the messages of the last accepted one
        self._keep_last = bool(getattr(c.algorithm, "backtracking", False))
        self.max_change = 0.0
        self.changes: dict[str, float] = {}  # variable -> its max relative change of η in the current sweep
        self.raised: dict[str, float] = {}  # factor -> the highest damping backtracking raised it to
        self.abandoned = 0  # the sweep at which adaptive backtracking stood down (0: it did not)
        self.trace: list[float] = []
        self.block: dict[str, Any] = {}  # handled variable -> its handler's last BlockFit
        self.joint: dict[str, Any] = {}  # class-plated handled variable -> joint q over all its weights
        for v in c.model.variables.values():
            if v.mask is not None and not v.is_latent:
                self.version[v.name] = 0  # statistics of data are computed when first read
        # variables whose prior factor owns their posterior (a Markov chain): variable name -> factor
        self.structured = {f.node.edges["out"].name: f for f in c.factors if f.node.ftype.structured is not None}
        # how each mixture selector without an init started: "priors" (its update given the components'
        # distinct priors, the same for every seed), "drawn" (k-means++, random topics or Dirichlet rows,
        # drawn from the seed) or "drawn, named after the priors" (the update left a component without a row)
        self.starts: dict[str, str] = {}

    # ------------------------------------------------------------------------------ initialisation
    def initialise(self, init: dict[str, Any], rng: np.random.Generator, fallback: bool = True) -> None:
        """The starting posteriors: ``init``'s, else each variable's prior (``start_parameters``), the mixture
        selectors (``start_selectors``), the variables whose prior a selector gates, the chains, and last the
        selectors whose components have distinct priors (``start_from_priors``; ``fallback=False``, a chunk of a
        sharded plate: without the check, which needs all rows)."""
        selectors, waiting = self.start_parameters(init)
        led = self.start_selectors(selectors, rng)
        for v in waiting:
            self._start_variable(v, ready=True)
        for name, f in self.structured.items():
            if name not in {v.name for v in led}:
                self._update_structured(self.c.model.variables[name], f, start=True)
        self.start_from_priors(led, rng, fallback)
        self._updating = ""
        self._last.clear()  # the first sweep damps toward nothing, as from any other start
        self.max_change = 0.0
        self.changes = {}

    def start_parameters(self, init: dict[str, Any]) -> tuple[list[Variable], list[Variable]]:
        """Start the latent variables given in ``init``, and those whose start needs no selector, in the model's
        order: from the prior (``_start_variable``).  Returns the mixture selectors (and categorical chains)
        left to start and the variables waiting for them (a prior gated by a selector, or reading a variable
        that waits), each in the model's order."""
        model = self.c.model
        for name in init:
            if name not in model.variables or not model.variables[name].is_latent:
                raise ModelError(f"init: {name!r} is not a latent variable of model {model.name!r}")
        selectors, waiting = [], []
        for v in model.variables.values():
            if not v.is_latent or v.name in self.c.dropped:
                continue
            if v.name in init:
                self.set_posterior(v, _coerce_init(v, init[v.name]))
            elif (v.family is Categorical and (id(v) in self.c.selector_factors or v.name in self.structured)
                  or v.family is Bernoulli and id(v) in self.c.selector_factors):
                selectors.append(v)
            elif not self._start_variable(v, ready=False):
                waiting.append(v)
        return selectors, waiting

    def _start_variable(self, v: Variable, ready: bool) -> bool:
        """Start ``v`` from its prior (``_default_init`` where that is improper; a scale or a lower-bounded
        rate as noted; a continuous chain later, from its prior chain).  Unless ``ready``, a prior gated by a
        selector, or reading a latent variable with no start yet, leaves ``v`` waiting (returns False)."""
        if v.lower is not None:  # its prior alone (a Pareto law over λ) has E[λ] = ∞: start at E[λ] = 4c
            self.set_posterior(v, TruncatedGamma(shape=1.0, rate=1.0 / (3.0 * v.lower), lower=v.lower))
        elif v.base is not None:  # a scale on σ: its prior times exp(−σ²/(2s₀²)) at the prior's scale s₀
            s0 = next(f for f in self.c.factors if f.node is v.prior).params["s0"]
            kernel = (np.zeros(v.shape), -0.5 / np.broadcast_to(s0, v.shape) ** 2)
            self.set_posterior(v, TiltedScale.from_natural(*kernel, prior=v.base))
        elif v.name not in self.structured:  # a continuous chain starts from its prior chain, in ``initialise``
            prior = next(f for f in self.c.factors if f.node is v.prior)
            if not ready and not self._prior_ready(prior):
                return False
            q = v.family.from_natural(*self._prior_natural(v, prior))
            ok = np.asarray(q.is_proper())
            if v.mask is not None:
                ok = ok | v.mask
            if not np.all(ok):
                q = _default_init(v)
            self.set_posterior(v, q)
        return True

    def _prior_ready(self, prior: CFactor) -> bool:
        """Whether a prior factor's message can be formed now: no gate, and every latent variable it reads
        has a start."""
        if prior.gate is not None:
            return False
        for name, a in prior.node.edges.items():
            if name == "out":
                continue
            if isinstance(a, Gate):
                return False
            parents = [a] if isinstance(a, Variable) else a.stochastic_parents() if isinstance(
                a, Deterministic | Indexed) else []
            if any(p.is_latent and p.name not in self.c.dropped and p.name not in self.q for p in parents):
                return False
        return True

    def prior_led(self, v: Variable) -> bool:
        """Whether selector ``v`` starts from its update given the components' starting posteriors (distinct,
        informative priors: ``seeding.prior_led``) rather than from a random draw."""
        return prior_led(v, self.c.selector_factors.get(id(v), []), self.q)

    def start_selectors(self, selectors: list[Variable], rng: np.random.Generator) -> list[Variable]:
        """Start the mixture selectors, in order: one whose components are told apart by their starting
        posteriors (``prior_led``) at uniform responsibilities for now (returned: ``start_from_priors`` starts
        it once every other variable has its start), the others from ``categorical_init``'s draw from
        ``rng``."""
        led = []
        for v in selectors:
            if self.prior_led(v):
                K = v.event_shape[0] if v.event_shape else 2
                r = np.full(v.shape + (K,), 1.0 / K)
                led.append(v)
            else:
                r = categorical_init(v, self.c.selector_factors.get(id(v), []), rng)
                self.starts[v.name] = "drawn"
            self._set_start(v, r)
        return led

    def start_from_priors(self, led: list[Variable], rng: np.random.Generator, fallback: bool = True) -> None:
        """Start each selector of ``led`` from its update given the components' starting posteriors (their
        priors): each row mostly to the component whose prior explains it best.  If that leaves a component
        the most probable label of no row (the data lie far from every prior), and ``fallback``, start it from
        ``categorical_init``'s draw from ``rng`` instead, its clusters named after the priors (``prior_names``:
        the matching that agrees best with the priors' scores) unless some labels are observed."""
        for v in led:
            r = self.prior_start(v)
            if not fallback or supported(r):
                self.starts[v.name] = "priors"
                continue
            r = categorical_init(v, self.c.selector_factors.get(id(v), []), rng)
            self.starts[v.name] = "drawn"
            if v.mask is None or not v.mask.any():
                r = r[..., prior_names(agreement(r, self.prior_scores(v)))]
                self.starts[v.name] = "drawn, named after the priors"
            self._set_start(v, r)
            if v.name in self.structured:
                self._update_structured(v, self.structured[v.name], start=True)

    def _set_start(self, v: Variable, r: np.ndarray) -> None:
        self.set_posterior(v, Categorical(probs=r) if v.family is Categorical else Bernoulli(probs=r[..., 1]))

    def prior_start(self, v: Variable) -> np.ndarray:
        """Set q(v) to selector ``v``'s update given the other posteriors (a chain: by forward–backward);
        returns its responsibilities (elements × K; a chain's smoothed marginals)."""
        self.update(v)
        r = np.asarray(self.q[v.name].mean())
        return r if v.family is Categorical else np.stack([1.0 - r, r], axis=-1)

    def prior_scores(self, v: Variable) -> np.ndarray:
        """s_nk = E[log p(x_n | θ_k)] summed over the factors ``v`` gates, under the other posteriors
        (elements × K)."""
        s = self.selector_total(v)
        return s if v.family is Categorical else np.stack([np.zeros_like(s), s], axis=-1)

    def _prior_natural(self, v: Variable, prior: CFactor) -> tuple:
        zero = v.family._zero_natural(v.shape, v.event_shape)
        m = self.factor_message(prior, "out")
        return tuple(z + a for z, a in zip(zero, m, strict=True))


def start_notes(starts: dict[str, str]) -> list[str]:
    """Notes on the selectors whose components have distinct priors, from how they started (``Engine.starts``)."""
    notes = []
    for name, how in starts.items():
        if how == "priors":
            notes.append(f"{name!r} started from its update given its components, whose priors (or fixed values) tell "
                         "them apart: each row mostly to the component that explains it best, the same start for "
                         "every seed")
        elif how == "drawn, named after the priors":
            notes.append(f"{name!r}: its update given its components' distinct priors left a component without a "
                         "row, so it started from a draw (k-means++ on the data, from the seed) whose clusters are "
                         "named after the priors they agree with best")
    return notes


def _default_init(v: Variable):
    """Proper starting point for a variable whose prior is improper (flat): N(0, 1), N(0, I), Gam(1, 1)."""
    if v.family is Gaussian:
        return Gaussian(mean=np.zeros(v.shape), var=np.ones(v.shape))
    if v.family is MvGaussian:
        D = v.event_shape[0]
        return MvGaussian(mean=np.zeros(v.shape + (D,)), cov=np.broadcast_to(np.eye(D), v.shape + (D, D)))
    if v.family is Gamma:
        return Gamma(shape=np.ones(v.shape), rate=np.ones(v.shape))
    raise InferenceError(f"cannot initialise {v.name!r}: its prior is improper; pass init={{{v.name!r}: ...}}")


def _coerce_init(v: Variable, value: Any):
    if v.lower is not None and isinstance(value, Gamma | TruncatedGamma):  # the variable's truncation applies
        value = _from_natural(v, tuple(np.broadcast_to(n, v.shape) for n in value.natural))
    if v.base is not None and isinstance(value, Gaussian | TiltedScale):  # a scale on σ: the prior is its base
        value = _from_natural(v, tuple(np.broadcast_to(n, v.shape) for n in value.natural))
    if isinstance(value, v.family | TruncatedGamma | TiltedScale):
        if value.batch_shape != v.shape:
            raise ModelError(f"init of {v.name!r} has batch shape {value.batch_shape}, expected {v.shape}")
        return value
    if v.family is Categorical:
        r = np.asarray(value, dtype=float)
        if r.shape != v.shape + v.event_shape or np.any(r < 0) or not np.allclose(r.sum(-1), 1.0):
            raise ModelError(f"init of {v.name!r} must be probabilities of shape {v.shape + v.event_shape} "
                             "with rows summing to 1")
        return Categorical(probs=r)
    if v.family is Dirichlet and not isinstance(value, Distribution):
        a = np.asarray(value, dtype=float)
        if a.shape != v.shape + v.event_shape or not np.all(np.isfinite(a)) or np.any(a <= 0):
            raise ModelError(f"init of {v.name!r} must be positive finite concentrations of shape "
                             f"{v.shape + v.event_shape}, got {checks._show(a)}")
        return Dirichlet(a)
    raise ModelError(f"init of {v.name!r} must be a {v.family.__name__} distribution, got {type(value).__name__}")


def run(c: Compiled, max_iter: int, tol: float | None, param_tol: float | None, init: dict,
        callbacks: list, progress: bool | None, seed: int | None, warmup: list[Variable]) -> dict[str, Any]:
    """Iterate the schedule until convergence; returns the pieces of a Result."""
    eng = Engine(c)
    t0 = time.perf_counter()
    eng.initialise(init, np.random.default_rng(seed))
    trace: list[float] = []
    eng.trace = trace  # callbacks may read the ELBO history (the current value is last)
    notes: list[str] = start_notes(eng.starts)
    if warmup:
        for v in warmup:
            eng.update(v)
        trace.append(eng.elbo())
    warnings: list[str] = []
    # a handled block that is the only latent variable sees the same messages every sweep: its first
    # fit is the fixed point (a second one would only move it within its optimiser's tolerance)
    single_block = len(c.order) == 1 and c.order[0].name in c.handlers
    accel, off = accelerator(c, eng.structured)
    with _progress.active(_progress.resolve(progress)):
        progress = _progress.bar(c.model.name, max_iter, unit="sweep", leave=True)
        with sweep_threads(c):
            it, converged, reason = _iterate(c, eng, trace, max_iter, tol, param_tol, callbacks, progress,
                                             single_block, warnings, accel)
        progress.close()
    if accel is not None:
        if accel.note(eng.abandoned):
            notes.append(accel.note(eng.abandoned))
    elif off:
        notes.append(off)
    if eng.raised:
        final = {f.name: f.damping for f in c.factors if f.name in eng.raised}
        notes.append(f"backtracking raised damping to {eng.raised}" + (
            f" (at the end: {final})" if final != eng.raised else ""))
    if eng.abandoned:
        notes.append(f"adaptive backtracking stood down at iteration {eng.abandoned}: the ELBO fell there whatever "
                     "the damping, so the run went on as plain NCVMP at the initial damping")
    unconverged = []
    if not converged:
        unconverged.append(_unconverged_text(c, eng, trace, it, reason, tol, param_tol))
    for name, fit in eng.block.items():
        if fit.info.get("converged") is False:
            converged = False
            unconverged.append(f"{c.model.name}: the last fit of {name!r} by {c.handlers[name]!r} did not converge "
                               f"(its optimiser stopped after {fit.info.get('iterations', '?')} iterations); "
                               f"{name!r} has not settled")
    warnings += unconverged
    elapsed = time.perf_counter() - t0
    return {"engine": eng, "elbo_trace": np.array(trace), "n_iter": it, "converged": converged,
            "time": elapsed, "warnings": warnings, "notes": notes, "unconverged": unconverged}


def _iterate(c: Compiled, eng: Engine, trace: list, max_iter: int, tol: float | None, param_tol: float | None,
             callbacks: list, progress: Any, single_block: bool, warnings: list[str],
             accel: Acceleration | None = None) -> tuple[int, bool, str]:
    """The sweeps of ``run``: (iterations, converged, why it stopped if not converged).

    Under NCVMP's backtracking (``True``, or ``"adaptive"``, the default) a sweep that lowers the ELBO by
    more than round-off (and the Monte Carlo noise of handled blocks) is undone and retried with the damping
    of the unclaimed non-conjugate factors raised (α ← (1 + α)/2).  ``"adaptive"`` lowers it again
    (α ← 2α − 1, never below the initial damping) after ``_RELAX_AFTER`` accepted sweeps in a row; if the
    lower damping fails (the ELBO falls, or, near a fixed point where the ELBO is flat, the parameter changes
    grow in two sweeps running: an unstable update) the damping goes back up and the next attempt waits
    twice as long.  If the ELBO falls whatever the damping (the fall is then not the messages' doing),
    ``True`` stops at the last accepted state and ``"adaptive"`` stands down: the run goes on as plain
    NCVMP at the initial damping.

    With ``accel`` (``schedules.acceleration``, ``accelerate=True``) every accepted sweep is recorded and,
    before a sweep that ascends (VMP, or NCVMP under backtracking), the state may move to an extrapolation of
    the last sweeps whose ELBO is no lower; a sweep from it that lowers the ELBO undoes it before any damping
    is raised.
    """
    converged = gave_up = False
    reason = ""
    mode = getattr(c.algorithm, "backtracking", False)
    active = [f for f in c.factors if f.claimed_by is None]
    # adaptive backtracking acts through the damping of unclaimed non-conjugate factors, and only where the
    # ELBO is an objective (every term exact or a bound: an approximation's fixed point need not maximise it)
    guard = mode is True or (mode == "adaptive" and any(not f.node.ftype.conjugate for f in active)
                             and all(f.evidence_kind in ("exact", "bound") for f in active))
    ascent = c.algorithm.monotone or all(f.node.ftype.conjugate for f in active)
    streak, need, probe = 0, _RELAX_AFTER, 0  # probe: sweeps left to watch a lowered damping
    changes: list[float] = []
    it = 0
    for it in range(1, max_iter + 1):
        # an extrapolation needs sweeps that ascend; ``jumped``: the state before an accepted one
        jumped = accel.before_sweep(eng, trace[-1] if trace else None, ascent or guard) if accel else None
        snapshot = eng.snapshot() if guard and trace else None
        retried = False
        while True:
            eng.max_change = 0.0
            eng.changes = {}
            try:
                for v in c.order:
                    eng.update(v)
                for hook in getattr(c.model, "sweep_hooks", ()):
                    hook(eng)
                L = eng.elbo(allow_minus_inf=snapshot is not None)  # −inf: a fall like any other, retried damped
            except InferenceError:
                if snapshot is None:
                    raise
                L = -np.inf  # an update left some q improper: undone and retried damped, like a fall
            if snapshot is None:
                break
            noise = float(np.sqrt(sum(fit.site_se**2 for fit in eng.block.values())))
            if np.isfinite(L) and L >= trace[-1] - 1e-12 * max(1.0, abs(L)) - 3.0 * noise:
                break
            if jumped is not None:  # the sweep from an extrapolated state fell: undo the extrapolation first
                eng.restore(jumped)
                accel.undo(eng)
                snapshot, jumped = eng.snapshot(), None
                continue
            retried = True
            raised = eng.raise_damping()
            if not raised or (mode == "adaptive" and min(
                    (f.damping for f in c.factors if not f.node.ftype.conjugate and f.claimed_by is None),
                    default=1.0) > 1.0 - 1e-6):
                if mode == "adaptive":
                    # the fall is not the damped messages' doing (a bound's own variational parameters, say):
                    # adaptive backtracking stands down; the run goes on as plain NCVMP at the initial damping
                    eng.restore(snapshot)
                    for f in c.factors:
                        f.damping = f.initial_damping
                    eng.abandoned, guard, snapshot = it, False, None
                    continue
                reason = (f"backtracking could not stop the ELBO from decreasing at iteration {it} (it fell to "
                          f"{L:.10g} from {trace[-1]:.10g} with the damping of every non-conjugate factor at 1); "
                          "stopped at the last accepted state")
                warnings.append(f"iteration {it}: backtracking could not stop the ELBO from decreasing; "
                                "stopped at the last accepted state")
                eng.restore(snapshot)
                gave_up = True
                break
            eng.restore(snapshot)
        if gave_up:
            break
        if accel is not None:
            accel.after_sweep(eng)
        if mode == "adaptive" and snapshot is not None:
            changes.append(eng.max_change)
            if probe and (retried or changes[-1] > changes[-2] > changes[-3]):
                if not retried:
                    eng.raise_damping()  # the lowered damping is unstable: back up, without undoing the sweep
                need, probe = 2 * need, 0
            elif probe:
                probe = probe - 1
            streak = 0 if retried else streak + 1
            if streak >= need and eng.raised and any(f.damping > f.initial_damping for f in c.factors):
                eng.relax_damping()
                streak, probe = 0, need
                changes = [np.inf, np.inf, eng.max_change]
        if trace and c.algorithm.monotone and L < trace[-1] - 1e-9 * max(1.0, abs(L)):
            warnings.append(f"iteration {it}: the ELBO decreased by {trace[-1] - L:.3g}")
        delta = abs(L - trace[-1]) if trace else np.inf
        trace.append(L)
        progress.update(L)
        stop = said_converged = False
        for cb in callbacks:
            answer = cb(it, L, eng)
            if isinstance(answer, str) and answer == "converged":
                said_converged = True
            stop = bool(answer) or stop
        share = _undamped_share(c)  # a damped update moves q only (1 − α) of the way: judge the full step
        if tol is not None and delta <= tol * max(abs(L), 1e-300) * share:
            converged = True
        if param_tol is not None and it > 1 and eng.max_change <= param_tol * share:
            converged = True
        if single_block or said_converged:
            converged = True
        if converged:
            break
        if stop:
            reason = f"a callback stopped the run at iteration {it}"
            break
    else:
        # with no stopping rule (tol and param_tol None) the run is a fixed number of sweeps: it converged if
        # the last one moved no natural parameter by more than 1e-8 relative (the full, undamped step)
        if tol is None and param_tol is None and it > 1 and eng.max_change <= 1e-8 * share:
            converged = True
        else:
            reason = f"max_iter reached: {max_iter} sweeps"
    return it, converged, reason


def _unconverged_text(c: Compiled, eng: Engine, trace: list, it: int, reason: str, tol: float | None,
                      param_tol: float | None) -> str:
    """The ConvergenceWarning of a run that stopped unconverged: why, and which variables had not settled."""

    text = f"{c.model.name}: not converged ({reason})"
    if eng.changes:
        threshold = param_tol if param_tol is not None else 1e-8
        share = _undamped_share(c)
        if share < 1.0:  # a damped sweep moves q only (1 − α) of the way: report the full step
            text += (f"; not settled (max relative change of the natural parameters in the last sweep, divided by "
                     f"1 − α for damping α up to {1.0 - share:.8g}): "
                     + unsettled({k: v / share for k, v in eng.changes.items()}, threshold))
        else:
            text += ("; not settled (max relative change of the natural parameters in the last sweep): "
                     + unsettled(eng.changes, threshold))
    if len(trace) > 1:
        text += f"; last ELBO change {trace[-1] - trace[-2]:.3g}"
        if tol is not None:
            text += f" (tol {tol:.3g}·|ELBO|)"
    cycle = oscillation(trace)
    if cycle:
        text += "; " + cycle
    if c.algorithm.name == "ncvmp" and not getattr(c.algorithm, "backtracking", False):
        text += "; try fg.NCVMP() (adaptive backtracking), damping= or a larger max_iter"
    else:
        text += "; try a larger max_iter" + (" or damping=" if c.algorithm.name == "ncvmp" else "")
    return text


__all__ = ["Engine", "InferenceError", "run"]
