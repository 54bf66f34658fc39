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


def approximate(log_density: Callable, x0: Any, method: Any, grad: Callable | None = None) -> Approximation:
    """Approximate the normalised version of an unnormalised density p̃ with a global handler.

    Parameters
    ----------
    log_density
        log p̃(x) for one point x of shape (D,), or for a batch (S, D) returning (S,).
    x0
        A starting point (D,).
    method
        A handler: ``fg.Laplace()``, ``fg.MVI(kind)``, ``fg.VIDiag()``.
    grad
        ∇ log p̃ (same calling convention); central differences when None.
    """
    x = np.atleast_1d(np.asarray(x0, dtype=float))
    if x.ndim != 1 or not np.all(np.isfinite(x)):
        raise ModelError(f"approximate: x0 must be a finite vector, got {x0!r}")
    if not hasattr(method, "fit"):
        raise ModelError(f"approximate: method must be a handler such as fg.Laplace(), got {method!r}")
    fit = method.fit(DensityTarget(log_density, x.shape[0], grad), x)
    return Approximation(fit.q, fit.log_evidence, fit.se, fit.kind, repr(method), fit.info)
