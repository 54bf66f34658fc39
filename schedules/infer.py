"""``fg.infer``: compile a model and run message passing on it."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from factorgraph.nodes import ModelError
from factorgraph.results import LOWER_BOUND, Result

from .algorithms import VMP
from .compiled import compile_model
from .engine import run


def infer(model, algorithm: Any = None, *, max_iter: int = 200, tol: float | None = 1e-9,
          param_tol: float | None = None, init: dict[str, Any] | None = None,
          schedule: Sequence[str] | None = None, damping: dict[str, float] | None = None,
          callbacks: Sequence[Callable] = (), progress: bool = False, seed: int | None = 0) -> Result:
    """Run inference on a model.

    Parameters
    ----------
    model
        An ``fg.Model``.
    algorithm
        ``fg.VMP()`` (default).
    max_iter
        Maximum number of sweeps over the schedule.
    tol
        Stop when the ELBO changes by at most ``tol·|ELBO|`` between sweeps (None: never).
    param_tol
        Stop when no natural parameter changed by more than this in a sweep (None: never).
    init
        Starting posteriors by variable name (a distribution object, or for a Categorical an
        array of probabilities); variables given here are updated last in each sweep.
    schedule
        Explicit update order (names of all latent variables); by default variables next to the
        data come first.
    damping
        Per-factor damping by factor name (overrides the algorithm's global damping).
    callbacks
        Functions ``cb(iteration, elbo, engine)`` called after each sweep; a true return stops.
    progress
        Print the iteration and the ELBO to stderr.
    seed
        Seeds the random responsibilities that break the symmetry of a mixture's selector when no
        ``init`` is given for it (the only randomness in VMP).
    """
    algorithm = algorithm or VMP()
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        raise ModelError(f"max_iter must be a positive integer, got {max_iter!r}")
    t0 = time.perf_counter()
    c = compile_model(model, algorithm, schedule, init, damping)
    compile_time = time.perf_counter() - t0
    out = run(c, max_iter, tol, param_tol, dict(init or {}), list(callbacks), progress, seed)
    eng = out["engine"]
    kinds = {f.evidence_kind for f in c.factors}
    kind = LOWER_BOUND if kinds <= {"exact", "bound"} else "approximation"
    notes = []
    if any(f.params.get("logdet", 0) is None for f in c.factors):
        notes.append("an improper flat prior contributes no evidence term: the evidence is defined up to a constant")
    if c.fused:
        notes.append(f"fused linear-Gaussian factors (cached XᵀX, Xᵀy): {c.fused}")
    trace = out["elbo_trace"]
    return Result(model.name, algorithm.name, dict(eng.q), float(trace[-1]), kind, trace, out["n_iter"],
                  out["converged"], out["time"], compile_time, out["warnings"], 0.0, notes)
