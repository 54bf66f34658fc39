"""``fg.infer``: compile a model and run message passing on it."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from factorgraph.graph import checks, convergence
from factorgraph.graph.derived import derived_moments
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import Deterministic, Gate, Indexed, ModelError, Variable
from factorgraph.posterior.predict import FitRecord
from factorgraph.posterior.results import Result, combine_kinds
from factors.base import RuleNotFound

from .algorithms import NCVMP, VMP
from .binding import rebind
from .compile import _feeds_handler, _needs_messages, compile_model
from .engine import run
from .scale_quadrature import ScaleQuadrature

_AUTO = "auto"  # tol/param_tol: chosen from the algorithm (see the docstring)


def infer(model, algorithm: Any = None, *, max_iter: int = 200, tol: Any = _AUTO,
          param_tol: Any = _AUTO, init: dict[str, Any] | None = None,
          schedule: Sequence[str] | None = None, warmup: Sequence[str] = (),
          damping: dict[str, float] | None = None, handlers: dict[str, Any] | None = None,
          callbacks: Sequence[Callable] = (), progress: bool | None = None, seed: int | None = 0,
          data: Any = None) -> Result:
    """Run inference on a model.

    Parameters
    ----------
    model
        An ``fg.Model``.
    algorithm
        ``fg.VMP()``, ``fg.NCVMP()`` or ``fg.SVI(batch_size=..., learning_rate=...)`` (stochastic variational
        inference: ``max_iter`` minibatch steps; see ``fg.SVI``).  By default (None) VMP when every factor
        has a VMP message rule (conjugate factors, and the quadratic bounds of the logistic and softmax factors), NCVMP
        otherwise (non-conjugate factors that no global handler claims); ``Result.algorithm`` and a
        note say which ran and why.
    max_iter
        Maximum number of sweeps over the schedule.  A run that stops before its stopping rule is met
        (``max_iter`` reached, backtracking given up, a handler's optimiser not converged, a callback)
        has ``converged=False`` and emits a ``fg.ConvergenceWarning`` naming the variables that had not
        settled; the same text is in ``Result.warnings``.  With ``tol`` and ``param_tol`` both None the
        run is ``max_iter`` sweeps, and converged if the last one changed no natural parameter by more
        than 1e-8 (relative).
    tol
        Stop when the ELBO changes by at most ``tol·|ELBO|`` between sweeps (None: never); with damped
        factors, by at most ``tol·|ELBO|·(1 − α)``.
        Default ``"auto"``: 1e-9 under VMP (1e-6 with handlers), None under NCVMP (whose ELBO need not be
        monotone).
    param_tol
        Stop when no natural parameter η changed by more than this, relative to 1 + |η|, in a sweep
        (None: never); with damped factors the change is divided by 1 − α (the full step, not the damped
        one), so heavy damping does not pass for convergence.
        Default ``"auto"``: None under VMP, 1e-8 under NCVMP.
    init
        Starting posteriors by variable name (a distribution object, or for a Categorical an
        array of probabilities, for a Dirichlet an array of concentrations); variables given here are
        updated last in each sweep, after a mixture's selectors.
    schedule
        Explicit update order (names of all latent variables); by default variables next to the
        data come first.
    warmup
        Variables updated once, in this order, after initialisation and before the first sweep;
        the ELBO after the warm-up starts the trace.
    damping
        Per-factor damping by factor name (overrides the algorithm's global damping).
    handlers
        Global handlers by variable name, e.g. ``{"w": fg.MVI("lr")}``: the handler takes over the
        weight vector w and the factors on ``fg.inner(X, w)``; the rest of the graph keeps passing
        messages around it (its messages form the block's prior; q(w)'s moments flow back).  A handler
        built with ``learn=`` also learns the block's hyperparameters: ``Result.hyperparameters(name)``.
    callbacks
        Functions ``cb(iteration, elbo, engine)`` called after each sweep; a true return stops the run
        (unconverged, with a ``ConvergenceWarning``), except the string ``"converged"``, which stops it
        as converged (your own stopping rule).
        ``engine.trace`` holds the ELBO history, ending with the current value.
    progress
        Progress bars on standard error (tqdm when installed, else a plain line): the sweeps with the
        ELBO, and the stages of global handlers (MVI iterations, BVI components, AI-KL lattice rounds,
        Laplace hyperparameter search).  ``None`` (default): shown when standard error is a terminal;
        ``True``: always; ``False``: never.
    seed
        Seeds the random responsibilities that break the symmetry of a mixture's selector when no
        ``init`` is given for it (the only randomness in VMP), and SVI's minibatches.
    data
        SVI only: an iterable of batches streamed in place of the model's own rows, each a dict of row
        arrays for the data plate keyed by observed variable name (and, for ``fg.inner`` inputs, by the
        expression's name, or ``"X"`` when there is one); the model built on any rows fixes the shapes and
        ``fg.SVI(n_data=N)`` the rescaling.  The run stops at ``max_iter`` steps or when the stream ends.
    """
    if not isinstance(model, Model):
        raise ModelError(f"infer needs an fg.Model, got {type(model).__name__}")
    if algorithm is not None and not isinstance(getattr(algorithm, "name", None), str):
        raise ModelError(f"algorithm must be fg.VMP(), fg.NCVMP() or fg.SVI(...), got {checks._short(algorithm)}")
    if getattr(algorithm, "name", None) == "svi":
        from .svi import run_svi

        if getattr(model, "sweep_hooks", None):
            raise ModelError(f"model {model.name!r} has sweep hooks (a rotation), which run after VMP/NCVMP sweeps "
                             "only, not under SVI")

        if handlers or schedule is not None or warmup or damping:
            raise ModelError("SVI takes no handlers, schedule, warmup or damping")
        if not (isinstance(tol, str) and tol == _AUTO and isinstance(param_tol, str) and param_tol == _AUTO):
            raise ModelError("SVI has no stopping rule (tol, param_tol): it runs max_iter steps or until the stream "
                             "ends; stop it earlier with a callback")
        _, _, max_iter, seed, progress, init, _, _, _, _, callbacks = _options(
            None, None, max_iter, seed, progress, init, None, (), None, None, callbacks)
        return run_svi(model, algorithm, data, max_iter, init, callbacks, progress, seed)
    if data is not None:
        raise ModelError("data= streams batches to fg.SVI only; other algorithms use the data in the model")
    chosen = ""
    if algorithm is None:
        algorithm, chosen = _default_algorithm(model, handlers)
    if not hasattr(algorithm, "name") or algorithm.name not in ("vmp", "ncvmp"):
        raise ModelError(f"algorithm must be fg.VMP(), fg.NCVMP() or fg.SVI(...), got {algorithm!r}")
    tol, param_tol, max_iter, seed, progress, init, schedule, warmup, damping, handlers, callbacks = _options(
        tol, param_tol, max_iter, seed, progress, init, schedule, warmup, damping, handlers, callbacks)
    if handlers and any(isinstance(h, ScaleQuadrature) for h in handlers.values()):
        from .scale_quadrature import run_scale_quadrature

        return run_scale_quadrature(model, handlers, algorithm, max_iter, _auto(tol, algorithm, handlers),
                                    _auto_param(param_tol, algorithm), init, seed)
    monotone = getattr(algorithm, "monotone", True)
    if tol is _AUTO:  # a handler refits its block each sweep, to its optimiser's tolerance
        tol = (1e-6 if handlers else 1e-9) if monotone else None
    if param_tol is _AUTO:
        param_tol = None if monotone else 1e-8
    from .sharding import find_sharding

    sh = find_sharding(model)
    if sh is not None:
        if getattr(model, "sweep_hooks", None):
            raise ModelError(f"model {model.name!r} has sweep hooks (a rotation), which a sharded (dask) run does "
                             "not apply; give the data as numpy arrays")
        return _infer_sharded(model, algorithm, sh, chosen, max_iter, tol, param_tol, init, schedule, warmup,
                              damping, handlers, callbacks, progress, seed)
    t0 = time.perf_counter()
    key = _compile_key(model, algorithm, schedule, init, damping, handlers)
    cached = model._compiled
    if cached is not None and cached[0] == key:
        c = cached[1]  # the same graph and options: only what the data determine is derived again
        c.handlers = dict(handlers or {})  # the claims depend on which variables are handled, not by what
        rebind(c)
        reused = True
    else:
        model._compiled = None
        c = compile_model(model, algorithm, schedule, init, damping, handlers)
        model._compiled = (key, c)
        reused = False
    compile_time = time.perf_counter() - t0
    warm = []
    for name in warmup:
        v = model.variables.get(name)
        if v is None or not v.is_latent:
            raise ModelError(f"warmup: {name!r} is not a latent variable of model {model.name!r}")
        warm.append(v)
    out = run(c, max_iter, tol, param_tol, dict(init or {}), list(callbacks), progress, seed, warm)
    eng = out["engine"]
    # a block with claimed sites reports their expectation the handler's way; without sites the
    # engine computes every term exactly under the handler's q, which is then an exact ELBO
    kinds = {f.evidence_kind for f in c.factors if f.claimed_by is None} | {
        fit.kind for name, fit in eng.block.items() if c.claimed[name]}
    kind = combine_kinds(kinds)
    elbo_se = float(np.sqrt(sum(fit.site_se**2 for fit in eng.block.values())))
    notes = ([chosen] if chosen else []) + list(out["notes"])
    if any(f.params.get("logdet", 0) is None for f in c.factors):
        notes.append("an improper flat prior contributes no evidence term: the evidence is defined up to a constant")
    clipped = {f.name: f.params["state"]["clipped"] for f in c.factors if f.params["state"].get("clipped")}
    if clipped:
        notes.append(f"messages with negative precision clipped to zero precision (count per factor): {clipped}")
    if c.fused:
        notes.append(f"fused linear-Gaussian factors (cached XᵀX, Xᵀy): {c.fused}")
    if c.grouped:
        notes.append(f"fused grouped linear-Gaussian factors (per-group Gram matrices of the design): {c.grouped}")
    trace = out["elbo_trace"]
    if c.handlers:
        notes.append("handlers: " + ", ".join(f"{k} ← {h!r} (claims {[f.name for f in c.claimed[k]]})"
                                              for k, h in c.handlers.items()))
    hyper = {k: fit.info["hyperparameters"] for k, fit in eng.block.items() if "hyperparameters" in fit.info}
    if hyper:
        notes.append(f"learned hyperparameters (the evidence is at these values): {hyper}")
    dofs = {f.node.edges["out"].name: {"dof": float(f.params["state"].get("dof", f.params["dof"]))}
            for f in c.factors if f.params.get("learn_dof")}  # fg.student_t(..., dof="learn")
    if dofs:
        notes.append(f"learned Student-t degrees of freedom (the evidence is at these values): {dofs}")
        hyper.update(dofs)
    result = Result(model.name, algorithm.name, dict(eng.q), float(trace[-1]), kind, trace, out["n_iter"],
                    out["converged"], out["time"], compile_time, out["warnings"], elbo_se, notes)
    if reused:
        result.notes.append("compiled structure reused from the last fg.infer on this model (set_data or a refit)")
    # for fg.predict: the model and the data of the fit (set_data may replace them later)
    result.fit_record = FitRecord(model, {k: d.value for k, d in model.data.items()}, model.data_version)
    result.joint.update(eng.joint)
    result.model = model
    result.derived = derived_moments(eng.node_stats, model)  # fg.deterministic nodes: exact moments under q
    result.hyper.update(hyper)
    result.scales.update(n for n, v in model.variables.items()
                         if getattr(v, "scale_prior", None) and v.base is None and v.is_latent)
    for text in out["unconverged"]:
        convergence.warn(text)
    return result


def _compile_key(model: Model, algorithm: Any, schedule: Any, init: Any, damping: Any, handlers: Any) -> tuple:
    """What a compiled model depends on besides the data: the graph (its nodes, which variables are latent,
    fully or partly observed) and the options of ``infer`` that shape the compilation (of the handlers,
    which variables they take over)."""
    graph = (tuple(model.plates), len(model.factors), len(model.deterministics), tuple(
        (name, v.is_latent, v.mask is None, v.mask is not None and bool(v.mask.all()),
         getattr(v, "coord_mask", None) is None or bool(np.all(v.coord_mask)))
        for name, v in model.variables.items()))
    return (graph, algorithm, None if schedule is None else tuple(schedule), frozenset(init or ()),
            tuple(sorted((damping or {}).items())), tuple(handlers or ()))


def _infer_sharded(model, algorithm, sh, chosen, max_iter, tol, param_tol, init, schedule, warmup, damping,
                   handlers, callbacks, progress, seed) -> Result:
    """``infer`` over a plate sharded into Dask chunks (schedules.sharded_run, docs/design.md §10)."""
    from .sharded_run import collect_local, run_sharded

    warm = []
    for name in warmup:
        v = model.variables.get(name)
        if v is None or not v.is_latent:
            raise ModelError(f"warmup: {name!r} is not a latent variable of model {model.name!r}")
        warm.append(v)
    out = run_sharded(model, algorithm, sh, max_iter, tol, param_tol, dict(init or {}), schedule, damping,
                      list(callbacks), progress, seed, warm, handlers)
    eng = out["engine"]
    kind = combine_kinds({f.evidence_kind for f in eng.c.factors if f.claimed_by is None} | {
        fit.kind for name, fit in eng.block.items() if eng.c.claimed[name]})
    notes = ([chosen] if chosen else []) + list(out["notes"])
    if eng.c.fused:
        notes.append(f"fused linear-Gaussian factors (cached XᵀX, Xᵀy per chunk): {eng.c.fused}")
    trace = out["elbo_trace"]
    result = Result(model.name, algorithm.name, dict(eng.q), float(trace[-1]), kind, trace, out["n_iter"],
                    out["converged"], out["time"], 0.0, out["warnings"], 0.0, notes)
    result.sharding = out["sharding"]
    result.joint.update(eng.joint)
    result.local.update({n: collect_local(out["backend"], model.variables[n], sh)
                         for n, loc in eng.local.items() if loc})
    result.scales.update(n for n, v in model.variables.items()
                         if getattr(v, "scale_prior", None) and v.base is None and v.is_latent)
    for text in out["unconverged"]:
        convergence.warn(text)
    return result


def _default_algorithm(model: Model, handlers: Any) -> tuple[Any, str]:
    """VMP if every factor that sends messages has a VMP rule for its method, else NCVMP with a note why."""
    handled = set(handlers) if isinstance(handlers, dict) else set()
    lacking = []
    for f in model.factors:
        for edge, arg in f.edges.items():
            target = arg.source if isinstance(arg, Gate) else arg
            if (isinstance(target, Variable | Deterministic | Indexed) and _needs_messages(target)
                    and not _feeds_handler(target, handled, edge, f)):
                try:
                    f.ftype.get_rule(edge, "vmp", f.method)
                except RuleNotFound:
                    lacking.append(f"{f.name} (method {f.method!r})")
                    break
    if not lacking:
        return VMP(), ""
    return NCVMP(), (f"algorithm: fg.NCVMP(), chosen by default because these factors have no VMP rule: "
                     f"{', '.join(lacking)}")


def _names(value: Any, what: str) -> list[str]:
    if value is None or isinstance(value, str | bytes | dict | set) or not hasattr(value, "__iter__"):
        raise ModelError(f"{what} must be a list of variable names, got {checks._short(value)}")
    out = list(value)
    for v in out:
        if not isinstance(v, str):
            raise ModelError(f"{what} must be a list of variable names, got the entry {checks._short(v)}")
    return out


def _by_name(value: Any, what: str) -> dict:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ModelError(f"{what} must be a dict keyed by variable or factor name, got {checks._short(value)}")
    return value


def _options(tol, param_tol, max_iter, seed, progress, init, schedule, warmup, damping, handlers, callbacks):
    """Validate ``infer``'s options at the public boundary (numpy scalar types are accepted)."""
    tols = []
    for label, value in (("tol", tol), ("param_tol", param_tol)):
        if isinstance(value, str) and value == _AUTO:
            tols.append(_AUTO)
        else:
            tols.append(checks.number(value, f"{label} (a number ≥ 0, None or 'auto')", low=0.0, none=True))
    max_iter = checks.integer(max_iter, "max_iter (a positive integer)", low=1)
    seed = checks.seed(seed)
    progress = None if progress is None else checks.flag(progress, "progress")
    init = _by_name(init, "init")
    if schedule is not None:
        schedule = _names(schedule, "schedule")
        if len(set(schedule)) != len(schedule):
            raise ModelError(f"schedule names a variable twice: {list(schedule)}")
    warmup = _names(warmup, "warmup")
    damping = _by_name(damping, "damping")
    if damping is not None:
        damping = {k: checks.number(v, f"damping[{k!r}] (in [0, 1))", low=0.0, high=1.0, high_open=True)
                   for k, v in damping.items()}
    handlers = _by_name(handlers, "handlers")
    if handlers is not None:
        for k, h in handlers.items():
            if not callable(getattr(h, "fit", None)):
                raise ModelError(f"handlers[{k!r}] must be a handler such as fg.Laplace() or fg.MVI('lr'), "
                                 f"got {checks._short(h)}")
    if callbacks is None or isinstance(callbacks, str | bytes | dict) or not hasattr(callbacks, "__iter__"):
        raise ModelError(f"callbacks must be a list of functions cb(iteration, elbo, engine), got "
                         f"{checks._short(callbacks)}")
    callbacks = list(callbacks)
    for cb in callbacks:
        if not callable(cb):
            raise ModelError(f"callbacks must be functions cb(iteration, elbo, engine), got {checks._short(cb)}")
    return (*tols, max_iter, seed, progress, init, schedule, warmup, damping, handlers, callbacks)


def _auto(tol: Any, algorithm: Any, handlers: Any) -> Any:
    """The default tol of a fit without handlers (the ELBO tolerance of the mean-field starting fit)."""
    if isinstance(tol, str) and tol == _AUTO:
        return 1e-9 if getattr(algorithm, "monotone", True) else None
    return tol


def _auto_param(param_tol: Any, algorithm: Any) -> Any:
    if isinstance(param_tol, str) and param_tol == _AUTO:
        return None if getattr(algorithm, "monotone", True) else 1e-8
    return param_tol
