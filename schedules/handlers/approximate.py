"""``fg.approximate``: run a global handler on a plain log density (the papers' synthetic targets), or on a
Gaussian prior times site terms f_n(x_nᵀw) on projections of the weights (``fg.site``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from factorgraph.graph import checks
from factorgraph.graph.nodes import ModelError
from factors.logistic import logit_point
from factors.sites import cauchy_point, laplace_point, probit_point, student_point

from .. import progress as _progress
from .target import BlockTarget, DensityTarget, Site

_SITES = {"logistic": logit_point, "probit": probit_point, "laplace": laplace_point, "cauchy": cauchy_point,
          "student_t": student_point}


def site(kind: str, X: Any, *, labels: Any = None, location: Any = None, scale: float = 1.0,
         dof: float = 3.0) -> Site:
    r"""Site terms Π_n f_n(x_nᵀw) on the projections u = Xw of a weight vector, for ``fg.approximate``.

    Kinds (the factors of the same names in a model, evaluated point-wise):

    * ``"logistic"``: f_n = σ(u_n)^{y_n} σ(−u_n)^{1−y_n}, labels y_n ∈ {0, 1} (default 1: f_n = σ(u_n));
    * ``"probit"``: f_n = Φ(t_n u_n), labels t_n = ±1 (default +1);
    * ``"laplace"``: f_n = exp(−|u_n − μ_n|/s)/(2s);
    * ``"cauchy"``: f_n = s/(π(s² + (u_n − μ_n)²));
    * ``"student_t"``: the Student-t density of u_n − μ_n with ``dof`` degrees of freedom and scale s.

    Parameters
    ----------
    kind : str
    X : array_like, shape (N, D)
        The rows x_n.
    labels : array_like, shape (N,) or scalar, optional
        Observed labels (logistic, probit).
    location : array_like, shape (N,) or scalar, optional
        μ_n (laplace, cauchy, student_t; default 0).
    scale, dof : float
        s > 0 and ν > 0 (location-scale sites).
    """
    if kind not in _SITES:
        raise ModelError(f"site: kind must be one of {sorted(_SITES)}, got {kind!r}")
    X = checks.constant(X, f"site {kind!r}: X")
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ModelError(f"site {kind!r}: X must be a non-empty matrix (N, D), got shape {X.shape}")
    N = X.shape[0]

    def per_row(value: Any, what: str) -> np.ndarray:
        arr = checks.constant(value, f"site {kind!r}: {what}")
        if arr.ndim > 1 or arr.size not in (1, N):
            raise ModelError(f"site {kind!r}: {what} must be a scalar or have one value per row of X ({N}), got "
                             f"shape {arr.shape}")
        return np.broadcast_to(arr, (N,)).astype(float)

    if kind in ("logistic", "probit"):
        if location is not None:
            raise ModelError(f"site {kind!r}: takes labels, not a location")
        y = per_row(1.0 if labels is None else labels, "labels")
        allowed = (0.0, 1.0) if kind == "logistic" else (-1.0, 1.0)
        if not np.all(np.isin(y, allowed)):
            raise ModelError(f"site {kind!r}: labels must be in {allowed}, got {checks._show(y)}")
        return Site(X, _SITES[kind], {"out": (y, y * y)}, {}, name=kind)
    if labels is not None:
        raise ModelError(f"site {kind!r}: takes a location, not labels")
    mu = per_row(0.0 if location is None else location, "location")
    params = {"scale": float(checks.positive(scale, f"site {kind!r}: scale"))}
    if kind == "student_t":
        params["dof"] = float(checks.positive(dof, f"site {kind!r}: dof"))
    return Site(X, _SITES[kind], {"out": (mu, mu * mu)}, params, name=kind)


def _site_target(sites: Any, dim: int, prior: Any) -> BlockTarget:
    sites = list(sites)
    if not sites or not all(isinstance(s, Site) for s in sites):
        raise ModelError("approximate: a list of site terms must hold only objects made by fg.site(...), got "
                         f"{sites!r}")
    for s in sites:
        if s.X.shape[1] != dim:
            raise ModelError(f"approximate: site {s.name!r} has X with {s.X.shape[1]} columns but x0 has {dim} entries")
    if prior is None:
        return BlockTarget(np.zeros(dim), np.zeros((dim, dim)), sites)
    if not isinstance(prior, tuple | list) or len(prior) != 2:
        raise ModelError(f"approximate: prior must be a pair (mean, precision), got {prior!r}")
    mean = checks.constant(prior[0], "approximate: prior mean")
    if mean.ndim > 1 or mean.size not in (1, dim):
        raise ModelError(f"approximate: prior mean must be a scalar or a vector of {dim}, got shape {mean.shape}")
    mean = np.broadcast_to(mean, (dim,)).astype(float)
    lam = checks.constant(prior[1], "approximate: prior precision")
    if lam.ndim <= 1 and lam.size in (1, dim):
        lam = np.diag(np.broadcast_to(checks.positive(lam, "approximate: prior precision"), (dim,)).astype(float))
    elif lam.shape == (dim, dim):
        lam = checks.precision_matrix(lam, "approximate: prior precision")
    else:
        raise ModelError(f"approximate: prior precision must be a scalar, a vector of {dim} or a {dim}×{dim} matrix, "
                         f"got shape {lam.shape}")
    return BlockTarget(lam @ mean, -0.5 * lam, sites)


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


def approximate(log_density: Callable | list, x0: Any, method: Any, grad: Callable | None = None, *,
                vectorized: bool = False, prior: Any = None, progress: bool | None = None) -> Approximation:
    """Approximate the normalised version of an unnormalised density p̃ with a global handler.

    Parameters
    ----------
    log_density
        log p̃. With ``vectorized=False`` (the default) it is called on one point x of shape (D,) and returns
        a scalar; with ``vectorized=True`` it is called on a batch W of shape (S, D) and returns (S,).
        Or a list of site terms made by ``fg.site(...)``: then p̃(w) = N(w | prior) Π_n f_n(x_nᵀw), the
        structure that ``fg.AIKL`` needs in more than a few dimensions (as for a weight vector in a model).
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
    prior
        With site terms only: the Gaussian prior as a pair (mean, precision), the mean a scalar or (D,), the
        precision a scalar, (D,) (diagonal) or (D, D); None (the default) is a flat prior.
    progress
        Progress bars of the handler's stages: ``None`` (default) when stderr is a terminal, ``True``
        always, ``False`` never.

    Examples
    --------
    Bayesian logistic regression with prior N(0, 5I), labels y ∈ {0, 1}::

        r = fg.approximate([fg.site("logistic", X, labels=y)], np.zeros(D), fg.AIKL(), prior=(0.0, 1 / 5))

    Raises
    ------
    ModelError
        If x0 is not a finite vector, ``method`` is not a handler, or ``log_density``/``grad`` return a shape
        that does not match ``vectorized`` at x0.
    """
    if grad is not None and not callable(grad):
        raise ModelError(f"approximate: grad must be a function or None, got {checks._short(grad)}")
    x = np.atleast_1d(checks.constant(x0, "approximate: x0"))
    if x.ndim != 1:
        raise ModelError(f"approximate: x0 must be a finite vector, got {x0!r}")
    if not callable(getattr(method, "fit", None)):
        raise ModelError(f"approximate: method must be a handler such as fg.Laplace(), got {checks._short(method)}")
    if not isinstance(vectorized, bool | np.bool_):
        raise ModelError(f"approximate: vectorized must be True or False, got {vectorized!r}")
    if isinstance(log_density, list | tuple):
        if grad is not None:
            raise ModelError("approximate: site terms bring their own derivatives; grad must be None")
        target = _site_target(log_density, x.shape[0], prior)
    else:
        if prior is not None:
            raise ModelError("approximate: prior= goes with a list of site terms (fg.site); a log density includes "
                             "its prior")
        if not callable(log_density):
            raise ModelError(f"approximate: log_density must be a function or a list of fg.site(...) terms, got "
                             f"{log_density!r}")
        target = DensityTarget(log_density, x.shape[0], grad, vectorized=bool(vectorized))
        for what, call in (("log_density", target._values), ("grad", target._grads if grad is not None else None)):
            if call is None:
                continue
            try:  # the calling convention checked once at x0, before any handler runs
                call(x[None])
            except ModelError:
                raise
            except Exception as err:  # noqa: BLE001 — the user's function failed on the convention we state
                shape = (1, x.shape[0]) if vectorized else x.shape
                other = "vectorized=False" if vectorized else "vectorized=True"
                raise ModelError(f"approximate: {what} raised {type(err).__name__}: {err} when called on an array "
                                 f"of shape {shape} (vectorized={bool(vectorized)}); if it follows the other "
                                 f"convention, pass {other}") from err
        with np.errstate(all="ignore"):
            v0 = np.asarray(target._values(x[None]), dtype=float).reshape(-1)
        if not np.isfinite(v0[0]):
            raise ModelError(f"approximate: log_density(x0) must be one finite number, got {float(v0[0])!r} at "
                             f"x0 = {x.tolist()}")
    with _progress.active(_progress.resolve(progress)):
        fit = method.fit(target, x)
    return Approximation(fit.q, fit.log_evidence, fit.se, fit.kind, repr(method), fit.info)
