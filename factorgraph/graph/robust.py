"""Robust likelihoods: ``fg.student_t``, a Student-t observation model as a Gaussian–Gamma scale mixture."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distributions import Gamma, Gaussian
from factorgraph.graph import checks
from factorgraph.graph.builder_base import _check_parent, _finish, _var_plates
from factorgraph.graph.gates import select_constant
from factorgraph.graph.model import current_model
from factorgraph.graph.nodes import Deterministic, Gate, Indexed, ModelError, Plate, Variable
from factors.plating import expand
from factors.student_t import STUDENT_T

DEFAULT_DOF = 4.0  # the starting ν of dof="learn"


def _dof(dof: Any, learn_dof: bool, name: str) -> tuple[float, bool]:
    if isinstance(dof, str):
        if dof != "learn":
            raise ModelError(f"{name!r}: dof must be a positive number or \"learn\", got {dof!r}")
        return DEFAULT_DOF, True
    if not isinstance(learn_dof, bool):
        raise ModelError(f"{name!r}: learn_dof must be True or False, got {learn_dof!r}")
    if isinstance(dof, Variable | Deterministic | Indexed | Gate):
        raise ModelError(f"{name!r}: dof must be a positive constant (or \"learn\"), got the variable {dof.name!r}"
                         if hasattr(dof, "name") else f"{name!r}: dof must be a positive constant, got {dof!r}")
    arr = checks.positive(dof, f"{name!r}: dof")
    if arr.ndim:
        raise ModelError(f"{name!r}: dof must be a single positive number, got an array of shape {arr.shape}")
    return float(arr), learn_dof


def student_t(name: str, mean: Any, precision: Any = None, dof: Any = 4.0, *, sd: Any = None,
              learn_dof: bool = False, plates: Sequence[Plate] = (), observed: Any = None,
              mask: Any = None) -> Variable:
    """Observed data with a Student-t likelihood, y_n ~ t_ν(mean_n, precision⁻¹) (robust regression).

    Built as the Gaussian–Gamma scale mixture y_n ~ N(mean_n, (λ_n τ)⁻¹), λ_n ~ Gam(ν/2, ν/2), with one
    latent weight λ_n per row kept by the factor at its optimal q(λ_n) = Gam((ν + 1)/2, ν/2 + ½E[τ]E[(y_n −
    mean_n)²]); VMP on this model is exact mean-field coordinate ascent, and the evidence is the exact
    mean-field bound, the weights' prior and entropy included (Tipping & Lawrence 2005).  Rows far from the
    fit get small E[λ_n] and little say in it.

    Parameters
    ----------
    mean
        A Gaussian variable or expression (e.g. ``fg.inner(X, w) + b``, or an indexed view ``mu[g]``), or a
        gate ``mu[z]`` / ``fg.select(means, z)``: a mixture of t components, with one weight λ_nk per row and
        component (the mean-field bound Σ_k q(z_n = k) E[log f_nk]; the dof must then be a constant).
    precision
        τ: a positive constant (default 1), a Gamma variable, or a gate of either.  Or give ``sd`` instead: a
        positive constant or a scale variable made by ``fg.half_cauchy``, ``fg.half_normal``,
        ``fg.half_student_t`` or ``fg.exponential``.
    dof
        ν > 0, a constant; or ``"learn"`` (start at 4) to learn it.  With ``learn_dof=True`` the given ``dof``
        is the starting value.  A learned ν is a point estimate: each sweep sets it to the maximiser of the
        bound in ν (a bounded 1-D search in log ν over [0.01, 10⁴]), so every update raises the bound.  The
        result reports it: ``result.hyperparameters(name)["dof"]`` and a note.
    observed, mask
        The data (required) and an optional boolean mask (True = observed); missing rows drop out.
    """
    model = current_model(f"student_t {name!r}")
    model.check_name(name)
    nu, learn = _dof(dof, learn_dof, name)
    if sd is not None:
        precision = checks.sd_as_precision(sd, precision, None, name)
    elif precision is None:
        precision = 1.0
    else:
        checks.not_a_scale(precision, name)
    if isinstance(mean, Gate) and isinstance(mean.source, np.ndarray):
        mean = select_constant(mean, name, "mean", checks.constant, 0)
    elif not isinstance(mean, Variable | Deterministic | Indexed | Gate):
        raise ModelError(f"{name!r}: mean must be a Gaussian variable or expression (e.g. fg.inner(X, w) + b), "
                         f"or a gate of one (mu[z]), got {mean!r}")
    else:
        _check_parent(model, mean, name, "mean", (Gaussian,))
    if isinstance(precision, Gate) and isinstance(precision.source, np.ndarray):
        precision = select_constant(precision, name, "precision", checks.positive, 0)
    elif isinstance(precision, Variable | Deterministic | Indexed | Gate):
        _check_parent(model, precision, name, "precision", (Gamma,))
    else:
        precision = checks.positive(precision, f"{name!r}: precision")
    if learn and any(isinstance(a, Gate) for a in (mean, precision)):
        raise ModelError(f"{name!r}: a gated fg.student_t (a mixture of t components) takes a constant dof; "
                         "learn_dof=True is not supported with gates")
    if observed is None:
        raise ModelError(f"{name!r}: fg.student_t needs observed data (observed=...)")
    var = Variable(model, name, Gaussian, _var_plates(model, plates, name, [mean, precision]))
    y, present = checks.observed_array(observed, mask, var.shape, name)
    y = np.where(present, y, 0.0)  # missing rows drop out (weight 0); their value is never read
    params: dict[str, Any] = {"dof": nu, "learn_dof": learn}
    var = _finish(model, var, STUDENT_T, {"mean": mean, "precision": precision}, params, y, None)
    if not np.all(present):
        params["present"] = expand(present.astype(float), [p.index for p in var.plates],
                                   [p.index for p in var.prior.plates], 0)
    return var
