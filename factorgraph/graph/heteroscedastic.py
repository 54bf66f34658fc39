"""``fg.gaussian(name, mean=..., log_sd=s)``: a Gaussian whose log standard deviation is a Gaussian variable or
expression (heteroscedastic regression: ``log_sd=fg.inner(X, v) + c``).  Run with ``fg.NCVMP``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from distributions import Gaussian
from factorgraph.graph.builder_base import _finish, _scalar_arg, _var_plates
from factorgraph.graph.gates import is_random
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError, Plate, Variable
from factors.heteroscedastic import GAUSSIAN_LOG_SD


def log_sd_gaussian(model: Model, name: str, mean: Any, log_sd: Any, others: dict[str, Any],
                    plates: Sequence[Plate], observed: Any, mask: Any) -> Variable:
    """x ~ N(mean, exp(2·log_sd)); ``others`` are the builder's precision/variance/sd, which must be unset.

    E[log f] = −½ log 2π − E[s] − ½E[(x − μ)²]·exp(−2E[s] + 2Var[s]), exact; the messages to x and μ are
    conjugate, the one to s the NCVMP gradient message (docs/maths.md §17)."""
    given = [k for k, v in others.items() if v is not None]
    if given:
        raise ModelError(f"{name!r}: log_sd= sets the noise; do not also give {', '.join(given)}=")
    if not is_random(log_sd):
        raise ModelError(f"{name!r}: log_sd must be a Gaussian variable or expression, got {log_sd!r} (for a "
                         "constant noise scale give sd=)")
    mean = _scalar_arg(model, mean, name, "mean", (Gaussian,))
    log_sd = _scalar_arg(model, log_sd, name, "log_sd", (Gaussian,))
    var = Variable(model, name, Gaussian, _var_plates(model, plates, name, [mean, log_sd]))
    var = _finish(model, var, GAUSSIAN_LOG_SD, {"mean": mean, "log_sd": log_sd}, {}, observed, mask)
    var.prior.method = "default"
    return var
