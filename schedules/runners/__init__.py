"""How ``fg.infer`` runs a fit: every algorithm runs itself.

An algorithm settings object (``fg.VMP()``, ``fg.NCVMP()``, ``fg.SVI(...)``) is a ``Runner``: it has a
``name`` (``Result.algorithm``) and two methods,

* ``admit(model, options) -> RunOptions``: refuse the options it does not take (SVI: handlers, a schedule,
  tolerances; VMP and NCVMP: a stream of batches), before ``fg.infer`` checks them all
  (``RunOptions.validated``), and return the options to check;
* ``run(model, options) -> Result``: fit the model with the checked options.

A global handler whose work wraps whole fits of the rest of the model rather than one block's update within a
sweep (``fg.ScaleQuadrature``: one fit per node of a grid over its variable) has a method
``runner(algorithm) -> Runner``; ``pick_runner`` returns that runner in place of the algorithm.

``fg.infer`` is then: check the model and the algorithm, build the options, let the algorithm admit them,
validate them, pick the runner, run it.  A new algorithm is one module defining such a class; neither
``fg.infer`` nor this package changes.  The runs VMP and NCVMP share live here: ``message_passing`` (which
of the two below), ``in_memory`` (compile, or reuse the last compilation, and sweep) and ``sharded`` (a plate
whose data are Dask arrays).
"""

from __future__ import annotations

from typing import Any, Protocol

from factorgraph.graph.model import Model
from factorgraph.posterior.results import Result

from .options import AUTO, RunOptions


class Runner(Protocol):
    """What ``fg.infer`` asks of an algorithm (see the module docstring)."""

    name: str

    def admit(self, model: Model, options: RunOptions) -> RunOptions:
        """The options refused (``ModelError``) or returned for the general checks."""

    def run(self, model: Model, options: RunOptions) -> Result:
        """The fit of ``model`` with checked ``options``."""


def is_runner(algorithm: Any) -> bool:
    """Whether ``algorithm`` has what ``fg.infer`` calls: a string ``name`` and the methods ``admit`` and ``run``."""
    return (isinstance(getattr(algorithm, "name", None), str) and callable(getattr(algorithm, "admit", None))
            and callable(getattr(algorithm, "run", None)))


def pick_runner(algorithm: Runner, options: RunOptions) -> Runner:
    """The runner of a fit: the runner of the first handler that wraps whole fits (``handler.runner(algorithm)``),
    else the algorithm itself."""
    for handler in (options.handlers or {}).values():
        wrap = getattr(handler, "runner", None)
        if callable(wrap):
            return wrap(algorithm)
    return algorithm


__all__ = ["AUTO", "RunOptions", "Runner", "is_runner", "pick_runner"]
