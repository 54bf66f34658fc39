"""Priors on standard deviations, as people write them in Stan and PyMC.

``fg.half_normal``, ``fg.half_cauchy``, ``fg.half_student_t`` and ``fg.exponential`` create a positive
scale σ (optionally plated).  Use it as the ``sd=`` of a Gaussian::

    with fg.Model("eight schools") as m:
        j = fg.plate("school", 8)
        mu = fg.gaussian("mu", 0.0, sd=5.0)
        tau = fg.half_cauchy("tau", scale=5.0)
        theta = fg.gaussian("theta", mean=mu, sd=tau, plates=[j])
        fg.gaussian("y", mean=theta, sd=sigma, plates=[j], observed=y)
    r = fg.infer(m, fg.NCVMP())
    r.posterior("tau")            # a distribution over σ: mean, sd, interval, sample, logpdf, ...
    r.posterior("tau").precision  # the Gamma over the precision τ⁻² that inference works with

Internally the variable is a Gamma over the precision σ⁻², so every Gaussian factor that uses it stays
conjugate; the prior's own term is non-conjugate and runs under NCVMP (Knowles & Minka 2011) with an exact
quadrature of its expected log density (see ``factors.scale_priors``).  The evidence stays a lower bound.

Used as a term of a sum or product instead — the non-centred parametrisation ``theta = mu + tau * eta`` — the
variable becomes one over σ itself (``scale_terms.on_sigma``): its q is the prior tilted by the Gaussian
messages of the terms, q(σ) ∝ p(σ) exp(η₁σ + η₂σ²) (``distributions.TiltedScale``), the exact mean-field
update, so such models run under plain VMP with an exact evidence term.  A scale is either an ``sd=`` or such
a term, not both.

``fg.uniform_scale("sigma", upper=U)`` is σ ~ U(0, U).  Under any Gamma over σ⁻² its expected log prior would
be −∞ (the Gamma puts mass on σ > U), so its variable's posterior is a Gamma truncated to σ⁻² > U⁻²
(``distributions.TruncatedGamma``); the Gaussian terms' Gamma messages multiply into it unchanged and the
prior's remaining term λ^(−3/2) is conjugate, so it runs under VMP as well, with an exact evidence term
(see ``factors.uniform_scale``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distributions import Gamma
from factorgraph.graph import checks
from factorgraph.graph.builder_base import _finish, _plates
from factorgraph.graph.model import current_model
from factorgraph.graph.nodes import ModelError, Plate, Variable
from factors.scale_priors import SCALE_PRIOR, scale_prior_params
from factors.uniform_scale import UNIFORM_SCALE, uniform_scale_params

SCALE_BUILDERS = ("fg.half_normal", "fg.half_cauchy", "fg.half_student_t", "fg.exponential", "fg.uniform_scale")


def _scale_variable(kind: str, name: str, plates: Sequence[Plate], params: dict, **arrays) -> Variable:
    model = current_model(f"{kind} {name!r}")
    model.check_name(name)
    var = Variable(model, name, Gamma, _plates(model, plates, name))
    for label, arr in arrays.items():
        checks.fits(arr.shape, var.shape, f"{name!r}: {label}")
    var.scale_prior = kind
    return _finish(model, var, SCALE_PRIOR, {}, params, None, None)


def half_normal(name: str, scale: Any = 1.0, *, plates: Sequence[Plate] = ()) -> Variable:
    """A standard deviation σ ~ half-normal(scale): p(σ) = √(2/π)/s · exp(−σ²/(2s²)), σ > 0.

    Needs a posterior Gamma(a, b) over σ⁻² with a > 1 (otherwise E[σ²] is infinite and so is the
    evidence term); in practice at least two observations or groups inform σ.
    """
    s = checks.positive(scale, f"{name!r}: scale")
    return _scale_variable("half_normal", name, plates, scale_prior_params("half_normal", scale=s), scale=s)


def half_cauchy(name: str, scale: Any = 1.0, *, plates: Sequence[Plate] = ()) -> Variable:
    """A standard deviation σ ~ half-Cauchy(0, scale): p(σ) = 2/(π s (1 + σ²/s²)), σ > 0 (Gelman 2006)."""
    s = checks.positive(scale, f"{name!r}: scale")
    return _scale_variable("half_cauchy", name, plates, scale_prior_params("half_t", scale=s, dof=1.0), scale=s)


def half_student_t(name: str, dof: Any, scale: Any = 1.0, *, plates: Sequence[Plate] = ()) -> Variable:
    """A standard deviation σ ~ half-Student-t(dof ν, scale s), σ > 0:
    p(σ) = 2 Γ((ν+1)/2) / (Γ(ν/2) √(νπ) s) · (1 + σ²/(ν s²))^(−(ν+1)/2)."""
    try:
        huge = bool(np.any(np.abs(np.asarray(dof, dtype=float)) > 1e150))
    except (TypeError, ValueError, OverflowError):
        huge = False  # not a number, or an int beyond float: checks.positive says so
    if huge:
        raise ModelError(f"{name!r}: dof={dof!r} is too large for float64 arithmetic (its square overflows); far "
                         f"below that, from about 1e16, the half-Student-t equals a half-normal to double precision: "
                         f"use fg.half_normal({name!r}, scale=...)")
    nu = checks.positive(dof, f"{name!r}: dof")
    s = checks.positive(scale, f"{name!r}: scale")
    return _scale_variable("half_student_t", name, plates, scale_prior_params("half_t", scale=s, dof=nu),
                           scale=s, dof=nu)


def exponential(name: str, rate: Any = 1.0, *, plates: Sequence[Plate] = ()) -> Variable:
    """A standard deviation σ ~ Exponential(rate λ): p(σ) = λ e^(−λσ), σ > 0 (mean 1/λ).

    Needs a posterior Gamma(a, b) over σ⁻² with a > ½ (otherwise E[σ] is infinite).
    """
    lam = checks.positive(rate, f"{name!r}: rate")
    return _scale_variable("exponential", name, plates, scale_prior_params("exponential", rate=lam), rate=lam)


def uniform_scale(name: str, upper: Any, *, plates: Sequence[Plate] = ()) -> Variable:
    """A standard deviation σ ~ Uniform(0, upper): p(σ) = 1/upper on 0 < σ < upper (Gelman 2006).

    On the precision λ = σ⁻² this is p(λ) = ½ upper⁻¹ λ^(−3/2) on λ > upper⁻², zero below, so the posterior
    q(λ) is a Gamma truncated to λ > upper⁻² (``distributions.TruncatedGamma``; ``result.posterior(name)``
    reports it on the σ scale, an ``InverseSqrtGamma`` whose σ lies in (0, upper)).  The prior's term is
    conjugate (it adds −3/2 to the shape's natural parameter) and its evidence term exact.
    """
    u = checks.positive(upper, f"{name!r}: upper")
    model = current_model(f"uniform_scale {name!r}")
    model.check_name(name)
    var = Variable(model, name, Gamma, _plates(model, plates, name))
    checks.fits(u.shape, var.shape, f"{name!r}: upper")
    var.scale_prior = "uniform"
    params = uniform_scale_params(u)
    var.lower = np.broadcast_to(params["lower"], var.shape).copy()
    return _finish(model, var, UNIFORM_SCALE, {}, params, None, None)
