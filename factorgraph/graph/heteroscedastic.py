"""``fg.gaussian(name, mean=..., log_sd=s)``: a Gaussian whose log standard deviation is a Gaussian variable or
expression (heteroscedastic regression: ``log_sd=fg.inner(X, v) + c``), or whose ``sd=`` is a log-normal variable
(``fg.lognormal``); and ``fg.lognormal`` itself.  Run with ``fg.NCVMP``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distributions import Gamma, Gaussian, LogNormal
from factorgraph.graph import checks
from factorgraph.graph.builder_base import _finish, _scalar_arg, _var_plates
from factorgraph.graph.gates import is_random
from factorgraph.graph.model import Model, current_model
from factorgraph.graph.nodes import Gate, Indexed, ModelError, Plate, Variable
from factors.heteroscedastic import GAUSSIAN_LOG_SD, GAUSSIAN_LOGNORMAL_SD
from factors.lognormal import LOGNORMAL


def log_sd_gaussian(model: Model, name: str, mean: Any, log_sd: Any, others: dict[str, Any],
                    plates: Sequence[Plate], observed: Any, mask: Any) -> Variable:
    """x ~ N(mean, exp(2·log_sd)); ``others`` are the builder's precision/variance/sd, which must be unset.
    A log-normal ``log_sd`` is the standard deviation itself (given as ``sd=``): x ~ N(mean, σ²).

    E[log f] = −½ log 2π − E[s] − ½E[(x − μ)²]·exp(−2E[s] + 2Var[s]), exact; the messages to x and μ are
    conjugate, the one to s the NCVMP gradient message (docs/maths.md §20)."""
    given = [k for k, v in others.items() if v is not None]
    if given:
        raise ModelError(f"{name!r}: log_sd= sets the noise; do not also give {', '.join(given)}=")
    if not is_random(log_sd):
        raise ModelError(f"{name!r}: log_sd must be a Gaussian variable or expression, got {log_sd!r} (for a "
                         "constant noise scale give sd=)")
    mean = _scalar_arg(model, mean, name, "mean", (Gaussian,))
    ftype = GAUSSIAN_LOGNORMAL_SD if is_lognormal(log_sd) else GAUSSIAN_LOG_SD
    log_sd = _scalar_arg(model, log_sd, name, "log_sd", (LogNormal,) if is_lognormal(log_sd) else (Gaussian,))
    var = Variable(model, name, Gaussian, _var_plates(model, plates, name, [mean, log_sd]))
    var = _finish(model, var, ftype, {"mean": mean, "log_sd": log_sd}, {}, observed, mask)
    var.prior.method = "default"
    return var


def is_lognormal(x: Any) -> bool:
    """Whether ``x`` is a log-normal variable (or an indexed view of one): a random ``sd=`` in log space."""
    node = x.source if isinstance(x, Indexed | Gate) else x
    return isinstance(node, Variable) and node.family is LogNormal


def lognormal(name: str, mu: Any = 0.0, sd: Any = None, *, precision: Any = None, plates: Sequence[Plate] = (),
              observed: Any = None, mask: Any = None) -> Variable:
    """A positive variable x with log x ~ N(mu, sd²) (or precision τ = 1/sd²).

    ``mu`` is a constant or a Gaussian variable or expression; ``sd`` a positive constant, or ``precision`` a
    positive constant or a Gamma variable (default sd = 1).  The factor is conjugate in log space: q(x) is
    log-normal, with exact evidence −E[log x] + ½(E[log τ] − log 2π) − ½E[τ]E[(log x − μ)²].  Use it as the
    noise scale of a Gaussian, ``fg.gaussian("y", mean=..., sd=x)`` (then x's q is updated by NCVMP in log space:
    run with ``fg.NCVMP``), or as a likelihood for positive observed data (``observed=``; values must be > 0).
    """
    model = current_model(f"lognormal {name!r}")
    model.check_name(name)
    if sd is not None and precision is not None:
        raise ModelError(f"{name!r}: give sd= or precision=, not both")
    if sd is not None:
        if is_random(sd):
            raise ModelError(f"{name!r}: sd must be a positive constant (for a random one give precision= a Gamma "
                             f"variable), got {sd!r}")
        precision = 1.0 / checks.positive(sd, f"{name!r}: sd") ** 2
    elif precision is None:
        precision = 1.0
    mu = _scalar_arg(model, mu, name, "mu", (Gaussian,))
    precision = _scalar_arg(model, precision, name, "precision", (Gamma,), positive=True)
    var = Variable(model, name, LogNormal, _var_plates(model, plates, name, [mu, precision]))
    if observed is not None:
        vals, m = checks.observed_array(observed, mask, var.shape, name)
        bad = m & ~(vals > 0)
        if np.any(bad):
            raise ModelError(f"observed data of log-normal variable {name!r} must be positive, got "
                             f"{checks._item(vals[bad].ravel()[0])!r}")
    return _finish(model, var, LOGNORMAL, {"mu": mu, "precision": precision}, {}, observed, mask)
