"""``fg.approximate``: run a global handler on a plain log density (the papers' synthetic targets)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from factorgraph.nodes import ModelError

from .target import DensityTarget


@dataclass
class Approximation:
    """Result of ``fg.approximate``: the posterior approximation and its evidence figure.

    ``elbo`` is what the method reports for log Z: the Laplace evidence approximation, or an ELBO
    estimated on fresh samples with standard error ``elbo_se``; ``kind`` says which.
    """

    posterior: Any
    elbo: float
    elbo_se: float
    kind: str
    method: str
    info: dict = field(default_factory=dict)


def approximate(log_density: Callable, x0: Any, method: Any, grad: Callable | None = None, *,
                vectorized: bool = False) -> Approximation:
    """Approximate the normalised version of an unnormalised density p̃ with a global handler.

    Parameters
    ----------
    log_density
        log p̃. With ``vectorized=False`` (the default) it is called on one point x of shape (D,) and returns
        a scalar; with ``vectorized=True`` it is called on a batch W of shape (S, D) and returns (S,).
    x0
        A starting point (D,).
    method
        A handler: ``fg.Laplace()``, ``fg.MVI(kind)``, ``fg.VIDiag()``, ``fg.BVI()``, ``fg.AIKL()``.
    grad
        ∇ log p̃ in the same convention ((D,) for one point, (S, D) for a batch); central differences when
        None.
    vectorized
        Whether ``log_density`` and ``grad`` take a batch of points. Nothing is guessed from output shapes: a
        function that returns the wrong shape for the stated convention raises ModelError saying so.

    Raises
    ------
    ModelError
        If x0 is not a finite vector, ``method`` is not a handler, or ``log_density``/``grad`` return a shape
        that does not match ``vectorized`` at x0.
    """
    x = np.atleast_1d(np.asarray(x0, dtype=float))
    if x.ndim != 1 or not np.all(np.isfinite(x)):
        raise ModelError(f"approximate: x0 must be a finite vector, got {x0!r}")
    if not hasattr(method, "fit"):
        raise ModelError(f"approximate: method must be a handler such as fg.Laplace(), got {method!r}")
    if not isinstance(vectorized, bool | np.bool_):
        raise ModelError(f"approximate: vectorized must be True or False, got {vectorized!r}")
    target = DensityTarget(log_density, x.shape[0], grad, vectorized=bool(vectorized))
    target._values(x[None])  # the calling convention checked once at x0, before any handler runs
    if grad is not None:
        target._grads(x[None])
    fit = method.fit(target, x)
    return Approximation(fit.q, fit.log_evidence, fit.se, fit.kind, repr(method), fit.info)
