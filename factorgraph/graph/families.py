"""Builders of the over-dispersed and zero-inflated count families: ``fg.negative_binomial`` and
``fg.zero_inflated_poisson``.

Both put a Gaussian log-mean (a variable or an expression such as ``fg.inner(X, w) + b``) under observed counts;
run them with ``fg.NCVMP`` (or a global handler on the weights).  Exposures and the families' constants are
validated against the counts here and stored as factor parameters aligned with the factor's plates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distributions import Beta, Gamma, Poisson
from factorgraph.graph import checks
from factorgraph.graph.builder_base import _finish, _plates, _var_plates
from factorgraph.graph.counts import (
    _exposure,
    _gaussian_node,
    _observed_counts,
    _per_row,
    _random_or_const,
    _to_factor,
)
from factorgraph.graph.gates import source_plates
from factorgraph.graph.model import current_model
from factorgraph.graph.nodes import ModelError, Plate, Variable
from factors.negative_binomial import NEGATIVE_BINOMIAL_LOG
from factors.negative_binomial_gamma import NEGATIVE_BINOMIAL_LOG_GAMMA
from factors.zero_inflated import ZERO_INFLATED_POISSON_LOG, ZERO_INFLATED_POISSON_LOG_BETA
from factors.zero_inflated_gamma import ZERO_INFLATED_POISSON, ZERO_INFLATED_POISSON_BETA


def _count_variable(model, name: str, log_mean: Any, edge: str, plates: Sequence[Plate],
                    other: Any = None) -> tuple[Any, Variable]:
    log_mean = _gaussian_node(model, log_mean, name, edge)
    extra = source_plates(other) if other is not None else []
    vplates = model.sorted_plates([*_plates(model, plates, name), *source_plates(log_mean), *extra])
    return log_mean, Variable(model, name, Poisson, vplates)


def negative_binomial(name: str, log_mean: Any, dispersion: Any, exposure: Any = None, *,
                      plates: Sequence[Plate] = (), observed: Any = None, mask: Any = None) -> Variable:
    """Observed counts y ~ NB2 with mean μ = exposure · exp(log_mean) and Var y = μ + μ²/φ, φ = ``dispersion``.

    ``log_mean`` is a Gaussian variable or expression; ``dispersion`` a positive constant (a scalar or one per
    observation; large φ approaches the Poisson) or a Gamma variable (φ learned: its expectations by quadrature
    in log space, exact to rounding, its message the NCVMP gradient in the Gamma statistics); ``exposure``
    (default 1) a positive constant per observation.
    Run with ``fg.NCVMP``.

    log f = log Γ(y + φ) − log Γ(φ) − log y! + φ log φ + y log μ − (y + φ) log(φ + μ).  With q(log_mean) = N(m, v)
    the expectation reduces to E[softplus(x + log e − log φ)], computed exactly (the logistic kernels), so the
    evidence is exact and the messages are its exact gradients.
    """
    model = current_model(f"negative_binomial {name!r}")
    model.check_name(name)
    gamma = _random_or_const(model, dispersion, name, "dispersion", Gamma)
    log_mean, var = _count_variable(model, name, log_mean, "log_mean", plates, gamma)
    if gamma is not None:  # a random dispersion: E over its Gamma q by quadrature in log space
        y, mask = _observed_counts(observed, mask, var.shape, name)
        e = _exposure(exposure, var.shape, name)
        params: dict[str, Any] = {"state": {}}
        var = _finish(model, var, NEGATIVE_BINOMIAL_LOG_GAMMA, {"log_mean": log_mean, "dispersion": gamma}, params,
                      y, mask)
        if e is not None:
            params["log_exposure"] = _to_factor(var, np.log(e))
        var.prior.method = "default"
        return var
    phi = _per_row(checks.positive(dispersion, f"{name!r}: dispersion"), var.shape, name, "dispersion")
    if not np.all(np.isfinite(phi)):
        raise ModelError(f"{name!r}: dispersion must be finite (use fg.poisson_log for φ = ∞), got "
                         f"{checks._item(phi[~np.isfinite(phi)].ravel()[0])!r}")
    y, mask = _observed_counts(observed, mask, var.shape, name)
    e = _exposure(exposure, var.shape, name)
    params = {}
    var = _finish(model, var, NEGATIVE_BINOMIAL_LOG, {"log_mean": log_mean}, params, y, mask)
    params["dispersion"] = _to_factor(var, np.array(phi, dtype=float))
    if e is not None:
        params["log_exposure"] = _to_factor(var, np.log(e))
    var.prior.method = "default"
    return var


def zero_inflated_poisson(name: str, *, log_rate: Any = None, rate: Any = None, zero_prob: Any,
                          exposure: Any = None, plates: Sequence[Plate] = (), observed: Any = None,
                          mask: Any = None) -> Variable:
    """Observed counts y from a zero-inflated Poisson: y = 0 with probability p = ``zero_prob``, else
    y ~ Poisson(exposure · λ).

    The rate is ``log_rate`` (λ = exp(log_rate), a Gaussian variable or expression) or ``rate`` (a Gamma variable,
    or one indexed by group labels).  ``zero_prob`` is a constant in [0, 1] (a scalar or one per observation) or a Beta
    variable.  Run with ``fg.NCVMP``.

    log f = log(p + (1 − p)e^(−μ)) for y = 0 and log(1 − p) + y log μ − μ − log y! for y > 0, μ = e·λ.  The
    positive counts' expectation is closed-form; with a constant p the zeros' is by quadrature (exact to
    rounding), with a Beta p it is Jensen's bound over the two ways to make a zero, maximised (conjugate in p;
    the evidence is then a lower bound).
    """
    model = current_model(f"zero_inflated_poisson {name!r}")
    model.check_name(name)
    if (rate is None) == (log_rate is None):
        raise ModelError(f"{name!r}: give the rate as rate= (a Gamma variable) or as log_rate= (a Gaussian expression, "
                         f"λ = exp(log_rate)), one of them; got rate={rate!r}, log_rate={log_rate!r}")
    beta = _random_or_const(model, zero_prob, name, "zero_prob", Beta)
    if rate is not None:
        return _zero_inflated_gamma(model, name, rate, zero_prob, beta, exposure, plates, observed, mask)
    log_rate, var = _count_variable(model, name, log_rate, "log_rate", plates, beta)
    if beta is not None:  # a Beta zero probability: its plates join the variable's
        y, mask = _observed_counts(observed, mask, var.shape, name)
        e = _exposure(exposure, var.shape, name)
        params: dict[str, Any] = {}
        var = _finish(model, var, ZERO_INFLATED_POISSON_LOG_BETA, {"log_rate": log_rate, "zero_prob": beta}, params,
                      y, mask)
        if e is not None:
            params["log_exposure"] = _to_factor(var, np.log(e))
        var.prior.method = "default"
        return var
    p, y, mask = _zero_prob_and_counts(zero_prob, var, name, observed, mask)
    e = _exposure(exposure, var.shape, name)
    params = {}
    var = _finish(model, var, ZERO_INFLATED_POISSON_LOG, {"log_rate": log_rate}, params, y, mask)
    params["zero_prob"] = _to_factor(var, np.array(p, dtype=float))
    if e is not None:
        params["log_exposure"] = _to_factor(var, np.log(e))
    var.prior.method = "default"
    return var


def _zero_prob_and_counts(zero_prob: Any, var: Variable, name: str, observed: Any, mask: Any) -> tuple:
    """A constant zero probability in [0, 1] per row, and the checked counts (none positive where p = 1)."""
    p = _per_row(checks.constant(zero_prob, f"{name!r}: zero_prob"), var.shape, name, "zero_prob")
    bad = ~((p >= 0.0) & (p <= 1.0))
    if np.any(bad):
        raise ModelError(f"{name!r}: zero_prob must lie in [0, 1], got {checks._item(p[bad].ravel()[0])!r}")
    y, mask = _observed_counts(observed, mask, var.shape, name)
    impossible = (y > 0) & (p == 1.0)
    if np.any(impossible):
        i = tuple(int(j) for j in np.argwhere(impossible)[0])
        raise ModelError(f"{name!r}: zero_prob = 1 at index {i} makes the observed count "
                         f"{checks._item(y[i])!r} impossible")
    return p, y, mask


def _zero_inflated_gamma(model, name: str, rate: Any, zero_prob: Any, beta: Any, exposure: Any,
                         plates: Sequence[Plate], observed: Any, mask: Any) -> Variable:
    """``fg.zero_inflated_poisson(rate=λ)`` with λ a Gamma variable (or an indexed view of one)."""
    checks.not_a_scale(rate, name, "rate")
    lam = _random_or_const(model, rate, name, "rate", Gamma)
    if lam is None:
        raise ModelError(f"{name!r}: rate must be a Gamma variable (or give log_rate=), got {rate!r}")
    var = Variable(model, name, Poisson, _var_plates(model, plates, name, [lam] + ([beta] if beta is not None else [])))
    if beta is not None:
        y, mask = _observed_counts(observed, mask, var.shape, name)
        ftype, edges, p = ZERO_INFLATED_POISSON_BETA, {"rate": lam, "zero_prob": beta}, None
    else:
        p, y, mask = _zero_prob_and_counts(zero_prob, var, name, observed, mask)
        ftype, edges = ZERO_INFLATED_POISSON, {"rate": lam}
    e = _exposure(exposure, var.shape, name)
    params: dict[str, Any] = {}
    var = _finish(model, var, ftype, edges, params, y, mask)
    if p is not None:
        params["zero_prob"] = _to_factor(var, np.array(p, dtype=float))
    if e is not None:
        params["log_exposure"] = _to_factor(var, np.log(e))
    var.prior.method = "default"
    return var
