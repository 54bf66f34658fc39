"""The builder API: ``fg.plate``, ``fg.gaussian``, ``fg.gamma``, ``fg.mv_gaussian``, ``fg.gaussian_gamma``.

Each builder creates a random variable and the factor that is its prior (edge ``out``), with
parents that are constants, other variables, deterministic expressions or gates.  Everything is
validated here, when the model is built, so errors name the variable and the offending value.  What the
builders share is in ``builder_base``; the discrete variables (``fg.bernoulli``, ``fg.categorical``, their
priors) are built in ``discrete``, a Wishart precision or a normal–Wishart mean of ``fg.mv_gaussian`` in
``covariance``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distributions import (
    Gamma,
    Gaussian,
    GaussianGamma,
    MvGaussian,
)
from factorgraph.graph import checks
from factorgraph.graph import covariance as _cov  # a Wishart precision or a normal–Wishart mean
from factorgraph.graph.builder_base import _check_parent, _finish, _parent_plates, _plates, _scalar_arg, _var_plates
from factorgraph.graph.gates import constant_param, is_random, param_gates, select_constant
from factorgraph.graph.heteroscedastic import is_lognormal, log_sd_gaussian
from factorgraph.graph.model import Model, current_model
from factorgraph.graph.nodes import (
    Deterministic,
    FactorNode,
    Gate,
    ModelError,
    Plate,
    PrecisionOf,
    Variable,
)
from factors.data_products import cached_gram, cached_yty, computed
from factors.gamma import GAMMA
from factors.gaussian import GAUSSIAN
from factors.mv_gaussian import MV_GAUSSIAN, MV_GAUSSIAN_FIXED
from factors.normal_gamma import NORMAL_GAMMA, NORMAL_GAMMA_REGRESSION


class _EventDim:
    """A variable's vector dimension, read when the model is compiled (it may be inferred from the
    variable's neighbours after the builder returns).  A class, not a closure, so models pickle."""

    def __init__(self, var: Variable) -> None:
        self.var = var

    def __call__(self) -> int:
        return self.var.event_shape[0]


def plate(name: str, size: int) -> Plate:
    """Declare a plate (a named replication axis of the given size) in the active model."""
    return current_model(f"plate {name!r}").add_plate(name, size)


# ------------------------------------------------------------------------------------ builders
def gaussian(name: str, mean: Any = 0.0, precision: Any = None, *, variance: Any = None, sd: Any = None,
             plates: Sequence[Plate] = (), observed: Any = None, mask: Any = None, log_sd: Any = None) -> Variable:
    """A scalar Gaussian variable x ~ N(mean, precision⁻¹).

    ``mean`` may be a constant, a Gaussian variable, a deterministic expression (``fg.inner``, sums,
    products) or a gate (``mus[z]``); ``precision`` a positive constant, a Gamma variable or a gate
    (or ``w.tau`` of a normal–gamma ``w`` whose ``inner`` is the mean); ``variance`` may be given
    instead of a constant precision, and ``sd`` instead of either: a positive constant or a scale
    variable (``fg.half_cauchy`` and the like), x ~ N(mean, sd²).  Precision defaults to 1.

    The precision is 1/σ², not the σ of PyMC or scipy: a constant given by position (``fg.gaussian("x", 0, 10)``)
    warns with the σ it stands for; name it (``precision=``, ``variance=`` or ``sd=``).

    ``log_sd`` (instead of the others) makes the noise heteroscedastic: x ~ N(mean, exp(2·log_sd)) with
    ``log_sd`` a Gaussian variable or expression, run with ``fg.NCVMP`` (exact E[log f]:
    E[e^(−2s)] = exp(−2E[s] + 2Var[s])).
    """
    model = current_model(f"gaussian {name!r}")
    model.check_name(name)
    if log_sd is not None or is_lognormal(sd):  # a random log sd, or a log-normal sd (its log space)
        return log_sd_gaussian(model, name, mean, sd if log_sd is None else log_sd,
                               {"precision": precision, "variance": variance, "sd": sd if log_sd is not None else None},
                               plates, observed, mask)
    if sd is not None:
        precision = checks.sd_as_precision(sd, precision, variance, name)
    elif precision is None:
        precision = 1.0
    else:
        checks.not_a_scale(precision, name)
    if variance is not None and isinstance(variance, Gate) and isinstance(variance.source, np.ndarray):
        what = f"{name!r}: variance (selected by {variance.selector.name!r})"
        precision = Gate(1.0 / checks.positive(variance.source, what), variance.selector, variance.plate)
    elif variance is not None:
        precision = 1.0 / checks.positive(variance, f"{name!r}: variance")
    if isinstance(precision, PrecisionOf):
        return _normal_gamma_regression(model, name, mean, precision.variable, plates, observed, mask)
    mean = _scalar_arg(model, mean, name, "mean", (Gaussian,))
    precision = _scalar_arg(model, precision, name, "precision", (Gamma,), positive=True)
    if isinstance(mean, Deterministic) and mean.op.name == "inner" and \
            mean.parents["w"].family is GaussianGamma:
        raise ModelError(f"{name!r}: the mean is inner(X, {mean.parents['w'].name!r}) of a normal-gamma "
                         f"block, so the precision must be {mean.parents['w'].name!r}.tau")
    vplates = _var_plates(model, plates, name, [mean, precision])
    var = Variable(model, name, Gaussian, vplates)
    return _finish(model, var, GAUSSIAN, {"mean": mean, "precision": precision}, {}, observed, mask)


def gamma(name: str, shape: Any = 1.0, rate: Any = 1.0, *, plates: Sequence[Plate] = (),
          observed: Any = None, mask: Any = None) -> Variable:
    """A Gamma variable x ~ Gam(shape, rate) (density ∝ x^(shape−1) e^(−rate·x)); ``rate`` may be a
    Gamma variable."""
    model = current_model(f"gamma {name!r}")
    model.check_name(name)
    a = constant_param(shape, name, "shape", checks.positive)
    checks.not_a_scale(rate, name, "rate")
    rate = _scalar_arg(model, rate, name, "rate", (Gamma,), positive=True)
    vplates = _var_plates(model, plates, name, [rate, *param_gates({"a": a})])
    var = Variable(model, name, Gamma, vplates)
    if not isinstance(a, Gate):
        checks.fits(a.shape, var.shape, f"{name!r}: shape")
    if observed is not None:
        vals, m = checks.observed_array(observed, mask, var.shape, name)
        if np.any(vals[m] <= 0):
            raise ModelError(f"observed data of Gamma variable {name!r} must be positive, got "
                             f"{vals[m][vals[m] <= 0][0].item()!r}")
    return _finish(model, var, GAMMA, {"rate": rate}, {"shape": a}, observed, mask)


def _selected_precisions(g: Gate, name: str) -> Gate:
    """``precision=fg.select(values, z)`` of an ``mv_gaussian``: K positive scalars, K positive vectors (diagonal
    precisions) or K positive definite matrices, one per category (a flat prior cannot be selected)."""
    if not isinstance(g.source, np.ndarray):
        raise ModelError(f"{name!r}: precision {g.source.name!r}[{g.selector.name!r}] must be a Gamma or Wishart "
                         f"variable, or constants selected with fg.select(values, {g.selector.name!r})")
    vals = checks.constant(g.source, f"{name!r}: precision (selected by {g.selector.name!r})")
    what = f"{name!r}: precision of category"
    if vals.ndim == 3:
        for k, mat in enumerate(vals):
            checks.precision_matrix(mat, f"{what} {k}")
            if not mat.any():
                raise ModelError(f"{what} {k} is 0: a flat prior cannot be selected")
    elif vals.ndim in (1, 2):
        checks.positive(vals, f"{name!r}: precision (selected by {g.selector.name!r})")
    else:
        raise ModelError(f"{name!r}: fg.select values for precision must have shape (K,), (K, D) or (K, D, D), "
                         f"got {vals.shape}")
    return Gate(np.asarray(vals, float), g.selector, g.plate)


def mv_gaussian(name: str, mean: Any = 0.0, precision: Any = None, *, covariance: Any = None,
                plates: Sequence[Plate] = (), dim: int | None = None, observed: Any = None,
                sd: Any = None, mask: Any = None) -> Variable:
    """A D-vector w ~ N(mean, Λ⁻¹) with full-covariance posterior.

    ``precision`` may also be a Wishart variable ``L`` (see ``fg.wishart``) or a gated ``L[z]``; ``mean``
    may be a normal–Wishart block ``theta`` or ``theta[z]`` (see ``fg.gaussian_wishart``), which then
    gives the precision too.

    ``precision``: a positive scalar (Λ = λI), a vector (diagonal), a D×D matrix, 0 (an improper
    flat prior), a scalar Gamma variable α (Λ = αI) or a Gamma variable plated over a plate of size
    D (ARD: Λ = diag(α)), also gated (``alpha[z]``) or gathered by labels (``alpha[g]``), or a pair ``(α, c)``
    of such a Gamma α (not gated) and T positive constants c: Λ = diag(α, c), α for the first D − T coordinates
    (ARD over a plate of size D − T, or one α for all) and c for the last T (a latent vector only; Bayesian
    PCA's loadings with their column's mean, ``models.pca``).  D comes
    from ``dim``, ``mean``, ``precision`` or, failing those, from the first ``fg.inner`` that uses the
    variable.  ``sd`` may replace ``precision``: a positive scalar or
    vector (Λ = diag(sd⁻²)), or a scale variable σ (``fg.half_cauchy`` and the like; Λ = σ⁻²I, or ARD when σ
    is plated over a plate of size D).  ``mask`` (True = observed) marks missing observations, by row
    (plate-shaped) or by coordinate (plates + (D,)); they drop out of the likelihood (a partly observed row
    keeps its observed coordinates' marginal density).  Under a Wishart precision or a normal–Wishart mean
    that density is not Wishart-conjugate, and the model runs NCVMP (``factors.mv_gaussian_wishart_missing``).
    """
    if _cov.uses_wishart(mean, precision):
        if covariance is not None or sd is not None:
            raise ModelError(f"{name!r}: a Wishart precision or normal–Wishart mean gives the covariance; do not "
                             "pass covariance= or sd=")
        return _cov.mv_gaussian_wishart(name, mean, precision, plates, dim, observed, mask)
    model = current_model(f"mv_gaussian {name!r}")
    model.check_name(name)
    tail = None  # Λ = diag(α, c): the constant precisions c of the last coordinates
    if isinstance(precision, tuple) and len(precision) == 2 and isinstance(precision[0], Variable):
        precision, tail = precision[0], np.atleast_1d(checks.positive(precision[1], f"{name!r}: c of precision=(α, c)"))
        if tail.ndim != 1 or observed is not None or sd is not None or covariance is not None:
            raise ModelError(f"{name!r}: precision=(α, c) takes a Gamma α and a vector c of constant precisions, for "
                             "a latent vector (no observed=, sd= or covariance=)")
    if sd is not None:
        precision = checks.sd_as_precision(sd, precision, covariance, name, "covariance")
    elif precision is None:
        precision = 1.0
    else:
        checks.not_a_scale(precision, name)
    vplates = _plates(model, plates, name)
    dims = set() if dim is None else {checks.positive_int(dim, f"{name!r}: dim")}
    consumed: dict[str, Plate] = {}
    params: dict[str, Any] = {}
    if is_random(mean):
        _check_parent(model, mean, name, "mean", (MvGaussian,))
        dims.add((mean.source if isinstance(mean, Gate) else mean).event_shape[0])
    elif isinstance(mean, Gate):
        mean = select_constant(mean, name, "mean", checks.constant, 1, True)
        dims.add(mean.source.shape[-1])
    else:
        mean = checks.constant(mean, f"{name!r}: mean")
        if mean.ndim:
            dims.add(mean.shape[-1])
    if covariance is not None:
        cov = checks.constant(covariance, f"{name!r}: covariance")
        if cov.ndim == 2:
            if not cov.any():
                raise ModelError(f"{name!r}: a covariance matrix must be positive definite, got all zeros")
            precision = np.linalg.inv(checks.precision_matrix(cov, f"{name!r}: covariance"))
        elif cov.ndim > 2:
            raise ModelError(f"{name!r}: covariance must be a scalar, vector or matrix, got shape {cov.shape}")
        else:
            precision = 1.0 / checks.positive(cov, f"{name!r}: covariance")
    if is_random(precision):
        _check_parent(model, precision, name, "precision", (Gamma,))
        if isinstance(precision, Gate):  # alpha[z]: the source's plates but the category plate
            extra = [p for p in precision.source.plates if p not in vplates and p is not precision.plate
                     and p not in precision.selector.plates]
        else:  # a Gamma variable, or one gathered by labels (alpha[g], an Indexed node on the rows' plate)
            extra = [p for p in precision.plates if p not in vplates]
        if len(extra) > 1:
            raise ModelError(f"{name!r}: precision {precision.name!r} has plates {[p.name for p in extra]} "
                             "beyond the variable's; at most one (the ARD plate over components) is allowed")
        ard = bool(extra)
        if ard:
            consumed["precision"] = extra[0]
            dims.add(extra[0].size + (0 if tail is None else tail.size))
        ftype, edges = MV_GAUSSIAN, {"mean": mean, "precision": precision}
        params = {"ard": ard} if tail is None else {"ard": ard, "tail": tail}
    else:
        lam = constant_param(precision, name, "precision", checks.constant) if not isinstance(
            precision, Gate) else _selected_precisions(precision, name)
        if isinstance(lam, Gate):  # fg.select(values, z): one scalar, vector or matrix per category
            if lam.source.ndim >= 2:
                dims.add(lam.source.shape[-1])
        elif lam.ndim < 2:
            lam = checks.nonnegative(lam, f"{name!r}: precision")
        if isinstance(lam, Gate):
            pass
        elif lam.ndim == 2:
            checks.precision_matrix(lam, f"{name!r}: precision matrix")
            dims.add(lam.shape[0])
        elif lam.ndim == 1:
            if lam.any() and not lam.all():
                raise ModelError(f"{name!r}: a diagonal precision must be all positive (or all 0 for a flat "
                                 f"prior), got {checks._show(lam)}")
            dims.add(lam.shape[0])
        elif lam.ndim > 2:
            raise ModelError(f"{name!r}: precision must be a scalar, vector or matrix, got shape {lam.shape}")
        ftype, edges = MV_GAUSSIAN_FIXED, {"mean": mean}
        params = {"precision_raw": lam}
    if len(dims) > 1:
        raise ModelError(f"{name!r}: inconsistent dimensions {sorted(dims)} from dim, mean and precision")
    D = dims.pop() if dims else None
    if tail is not None and (D is None or D <= tail.size):
        raise ModelError(f"{name!r}: precision=(α, c) with {tail.size} constant(s) needs a dimension above "
                         f"{tail.size} (give dim= or a mean vector), got {D}")
    var = Variable(model, name, MvGaussian, model.sorted_plates([*vplates, *(p for p in _parent_plates(
        [x for x in (mean, precision) if is_random(x)]) if p not in consumed.values())]), (D,))
    params["D"] = _EventDim(var)
    if mask is None or observed is None or np.ndim(mask) != len(var.plates) + 1:
        return _finish(model, var, ftype, edges, params, observed, mask, consumed)
    # a per-coordinate mask (plates + (D,)): rows with any coordinate observed, plus var.coord_mask
    m = checks.mask_array(mask, np.shape(observed), name)
    obs = np.where(m, np.asarray(observed, float), 0.0)
    _finish(model, var, ftype, edges, params, obs, m.any(-1), consumed)
    var.coord_mask = m
    var.value = np.where(m, var.value, np.nan)
    return var


def gaussian_gamma(name: str, mean: Any = 0.0, precision: Any = 1.0, *, shape: Any = 1e-2,
                   rate: Any = 1e-4, dim: int | None = None) -> Variable:
    """A joint normal–gamma block (w, τ): w | τ ~ N(mean, (τA)⁻¹), τ ~ Gam(shape, rate).

    ``precision`` gives A: a positive scalar or vector, a scalar Gamma variable (A = αI) or a Gamma
    plated over a plate of size D (ARD).  Use ``w.tau`` as the noise precision of a likelihood
    ``fg.gaussian("y", mean=fg.inner(X, w), precision=w.tau, ...)``; the posterior q(w, τ) is joint
    (Drugowitsch 2014 §2; BayesPy's GaussianGamma).
    """
    model = current_model(f"gaussian_gamma {name!r}")
    model.check_name(name)
    a0 = checks.positive_number(shape, f"{name!r}: shape")
    b0 = checks.positive_number(rate, f"{name!r}: rate")
    mu0 = checks.constant(mean, f"{name!r}: mean")
    if mu0.ndim > 1:
        raise ModelError(f"{name!r}: mean must be a scalar or a vector, got shape {mu0.shape}")
    dims = set() if dim is None else {checks.positive_int(dim, f"{name!r}: dim")}
    if mu0.ndim:
        dims.add(mu0.shape[-1])
    consumed: dict[str, Plate] = {}
    ard = False
    if isinstance(precision, Variable):
        _check_parent(model, precision, name, "precision", (Gamma,))
        if len(precision.plates) > 1:
            raise ModelError(f"{name!r}: precision {precision.name!r} may have at most one plate (ARD)")
        if precision.plates:
            ard = True
            consumed["precision"] = precision.plates[0]
            dims.add(precision.plates[0].size)
    else:
        precision = checks.positive(precision, f"{name!r}: precision")
        if precision.ndim > 1:
            raise ModelError(f"{name!r}: precision must be a scalar or a vector, got shape {precision.shape}")
        if precision.ndim == 1:
            dims.add(precision.shape[0])
            ard = True
    if len(dims) > 1:
        raise ModelError(f"{name!r}: inconsistent dimensions {sorted(dims)} from dim, mean and precision")
    var = Variable(model, name, GaussianGamma, (), (dims.pop() if dims else None,))
    params = {"D": _EventDim(var), "mean_raw": mu0, "shape": a0, "rate": b0, "ard": ard}
    return _finish(model, var, NORMAL_GAMMA, {"precision": precision}, params, None, None, consumed)


def _normal_gamma_regression(model: Model, name: str, mean: Any, w: Variable, plates: Sequence[Plate],
                             observed: Any, mask: Any) -> Variable:
    if not (isinstance(mean, Deterministic) and mean.op.name == "inner" and mean.parents["w"] is w):
        raise ModelError(f"{name!r}: precision {w.name!r}.tau needs mean=fg.inner(X, {w.name!r}, plates=...)")
    if observed is None:
        raise ModelError(f"{name!r}: a normal-gamma regression likelihood needs observed data")
    vplates = _var_plates(model, plates, name, [mean])
    var = Variable(model, name, Gaussian, vplates)
    y, m = checks.observed_array(observed, mask, var.shape, name)
    yv = y.reshape(-1)
    rows = int(np.prod(mean.params["X"].shape[:-1]))
    if rows != yv.shape[0]:
        raise ModelError(f"{name!r}: {yv.shape[0]} observations but X has {rows} rows")
    var.value, var.mask = y, m
    if m.all():
        xtx, xty = cached_gram(mean.params, yv)
        yty, n_obs = cached_yty(mean.params, yv), yv.shape[0]
    else:  # missing responses drop out of the likelihood: the statistics of the observed rows only
        seen = m.reshape(-1)
        Xo = mean.params["X"].reshape(rows, -1)[seen]
        yv = yv[seen]
        xtx, xty, yty, n_obs = computed(Xo.T @ Xo, Xo.T @ yv, yv @ yv, seen.sum())  # dask: one pass
        yty, n_obs = float(yty), int(n_obs)
    params = {"xtx": xtx, "xty": xty, "yty": yty, "n": n_obs}
    factor = FactorNode(NORMAL_GAMMA_REGRESSION, f"NormalGammaRegression({name})", {"w": w}, (),
                        "default", params)
    var.prior = factor
    model.add_variable(var)
    model.add_factor(factor)
    return var
