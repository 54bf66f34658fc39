"""``RunOptions``: the options of ``fg.infer`` as one value, and their checks at the public boundary."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from factorgraph.graph import checks
from factorgraph.graph.nodes import ModelError

AUTO = "auto"  # tol/param_tol: chosen from the algorithm (``RunOptions.resolved``)


@dataclass(frozen=True)
class RunOptions:
    """The options of one fit, as ``fg.infer`` takes them (its docstring describes each).

    ``fg.infer`` builds them from its arguments, lets the algorithm refuse what it does not take
    (``admit``), checks them (``validated``) and hands them to the runner; a runner that fits other
    models on the way (``fg.ScaleQuadrature``'s fits at each node, SVI's batches) derives theirs with
    ``dataclasses.replace``.

    Attributes
    ----------
    max_iter
        Sweeps (steps for SVI) at most.
    tol, param_tol
        The stopping rules on the ELBO and on the natural parameters: a number ≥ 0, None (never) or
        ``"auto"`` (``resolved`` picks them from the algorithm).
    init, schedule, warmup, damping, handlers
        Starting posteriors, update order, warm-up updates, per-factor damping and global handlers, by
        variable or factor name.
    callbacks
        Functions ``cb(iteration, elbo, engine)`` called after each sweep.
    progress
        Progress bars: None (when standard error is a terminal), True or False.
    seed
        The seed of the run's randomness.
    data
        Batches streamed to SVI (None for every other algorithm).
    note
        Why the algorithm was chosen when ``fg.infer`` was given none (empty otherwise); the runner puts
        it first in ``Result.notes``.
    """

    max_iter: int = 200
    tol: Any = AUTO
    param_tol: Any = AUTO
    init: dict[str, Any] | None = None
    schedule: Sequence[str] | None = None
    warmup: Sequence[str] = ()
    damping: dict[str, float] | None = None
    handlers: dict[str, Any] | None = None
    callbacks: Sequence[Callable] = ()
    progress: bool | None = None
    seed: int | None = 0
    data: Any = None
    note: str = ""

    def validated(self) -> RunOptions:
        """The options checked (numpy scalar types are accepted): a ``ModelError`` names the first bad one."""
        tols = []
        for label, value in (("tol", self.tol), ("param_tol", self.param_tol)):
            if isinstance(value, str) and value == AUTO:
                tols.append(AUTO)
            else:
                tols.append(checks.number(value, f"{label} (a number ≥ 0, None or 'auto')", low=0.0, none=True))
        max_iter = checks.integer(self.max_iter, "max_iter (a positive integer)", low=1)
        seed = checks.seed(self.seed)
        progress = None if self.progress is None else checks.flag(self.progress, "progress")
        init = _by_name(self.init, "init")
        schedule = self.schedule
        if schedule is not None:
            schedule = _names(schedule, "schedule")
            if len(set(schedule)) != len(schedule):
                raise ModelError(f"schedule names a variable twice: {list(schedule)}")
        warmup = _names(self.warmup, "warmup")
        damping = _by_name(self.damping, "damping")
        if damping is not None:
            damping = {k: checks.number(v, f"damping[{k!r}] (in [0, 1))", low=0.0, high=1.0, high_open=True)
                       for k, v in damping.items()}
        handlers = _by_name(self.handlers, "handlers")
        if handlers is not None:
            for k, h in handlers.items():
                if not callable(getattr(h, "fit", None)):
                    raise ModelError(f"handlers[{k!r}] must be a handler such as fg.Laplace() or fg.MVI('lr'), "
                                     f"got {checks._short(h)}")
        callbacks = self.callbacks
        if callbacks is None or isinstance(callbacks, str | bytes | dict) or not hasattr(callbacks, "__iter__"):
            raise ModelError(f"callbacks must be a list of functions cb(iteration, elbo, engine), got "
                             f"{checks._short(callbacks)}")
        callbacks = list(callbacks)
        for cb in callbacks:
            if not callable(cb):
                raise ModelError(f"callbacks must be functions cb(iteration, elbo, engine), got {checks._short(cb)}")
        return replace(self, tol=tols[0], param_tol=tols[1], max_iter=max_iter, seed=seed, progress=progress,
                       init=init, schedule=schedule, warmup=warmup, damping=damping, handlers=handlers,
                       callbacks=callbacks)

    def resolved(self, algorithm: Any, handled: bool | None = None) -> RunOptions:
        """The options with ``"auto"`` tolerances chosen from the algorithm.

        A monotone algorithm (VMP: the ELBO rises every sweep) stops on the ELBO, tol = 1e-9, or 1e-6 when
        ``handled`` (by default: when handlers are given; a handler refits its block each sweep, to its
        optimiser's tolerance), and not on the parameters; a non-monotone one (NCVMP) on the parameters,
        param_tol = 1e-8, and not on the ELBO.
        """
        monotone = getattr(algorithm, "monotone", True)
        handled = bool(self.handlers) if handled is None else handled
        tol, param_tol = self.tol, self.param_tol
        if isinstance(tol, str) and tol == AUTO:
            tol = (1e-6 if handled else 1e-9) if monotone else None
        if isinstance(param_tol, str) and param_tol == AUTO:
            param_tol = None if monotone else 1e-8
        return replace(self, tol=tol, param_tol=param_tol)


def _names(value: Any, what: str) -> list[str]:
    if value is None or isinstance(value, str | bytes | dict | set) or not hasattr(value, "__iter__"):
        raise ModelError(f"{what} must be a list of variable names, got {checks._short(value)}")
    out = list(value)
    for v in out:
        if not isinstance(v, str):
            raise ModelError(f"{what} must be a list of variable names, got the entry {checks._short(v)}")
    return out


def _by_name(value: Any, what: str) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ModelError(f"{what} must be a dict keyed by variable or factor name, got {checks._short(value)}")
    return value
