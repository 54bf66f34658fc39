"""Poisson regression with a log link and exposures: a canned model over ``fg.poisson_log``."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from factorgraph.graph import checks
from factorgraph.graph.builders import gamma, mv_gaussian, plate
from factorgraph.graph.counts import poisson_log
from factorgraph.graph.expressions import feature_names, inner, label_features
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError
from factorgraph.models.regression import _new_inputs, _posterior, _regression_data
from factorgraph.posterior.results import Result
from schedules import NCVMP, infer


# ------------------------------------------------------------------------------------ Poisson
class CountPredictive(NamedTuple):
    """Predictive distribution of counts: its ``mean`` and ``var`` per row."""

    mean: np.ndarray
    var: np.ndarray


def _exposure_vector(exposure: Any, N: int, what: str) -> np.ndarray | None:
    if exposure is None:
        return None
    e = np.broadcast_to(checks.positive(exposure, what), (N,)) if np.ndim(exposure) == 0 else \
        checks.positive(exposure, what).reshape(-1)
    if e.shape != (N,):
        raise ModelError(f"{what} must have one entry per row ({N}), got shape {np.shape(exposure)}")
    return e


def poisson_regression_model(X: Any, y: Any, exposure: Any = None, ard: bool = False, a0: float = 1e-2,
                             b0: float = 1e-4) -> Model:
    """The model of ``poisson_regression``: w ~ N(0, α⁻¹I) (or diag(α)⁻¹ with ARD), α ~ Gam(a₀, b₀),
    y_n ~ Poisson(e_n exp(x_nᵀw))."""

    Xa, ya = _regression_data(X, y)
    N, D = Xa.shape
    e = _exposure_vector(exposure, N, "exposure")
    with Model("poisson_regression" + ("_ard" if ard else "")) as m:
        n, d = plate("n", N), plate("d", D)
        alpha = gamma("alpha", shape=a0, rate=b0, plates=[d] if ard else [])
        w = mv_gaussian("w", mean=0.0, precision=alpha, dim=D)
        poisson_log("y", inner(Xa, w, plates=[n]), exposure=e, plates=[n], observed=ya)
    label_features(m, feature_names(X), "w_dim_0", "d")
    return m


def poisson_regression(X: Any, y: Any, exposure: Any = None, ard: bool = False, a0: float = 1e-2,
                       b0: float = 1e-4, *, max_iter: int = 500, **infer_options: Any) -> Result:
    """Variational Bayesian Poisson regression with a log link and exposures.

    y_n ~ Poisson(e_n exp(x_nᵀw)), w ~ N(0, α⁻¹I) (``ard=True``: N(0, diag(α)⁻¹), one α per input),
    α ~ Gam(a₀, b₀).  The posterior is q(w)q(α) with a full-covariance Gaussian q(w), fitted by NCVMP
    (Knowles & Minka 2011): E_q[log p(y_n | w)] = y_n m_n − e_n exp(m_n + v_n/2) − log y_n! + y_n log e_n with
    m_n = x_nᵀE[w], v_n = x_nᵀCov[w]x_n is closed-form, so each message is an exact gradient and the
    ELBO is exact for the Gaussian family.  Include a column of ones in X for an intercept; give
    ``exposure`` (e.g. time at risk) to model rates per unit exposure (the offset log e_n).
    Options (``algorithm``, ``tol``, ``handlers``, ...) go to ``fg.infer``.

    Returns
    -------
    Result
        ``posterior("w")`` is the MvGaussian q(w), ``posterior("alpha")`` q(α); predict with
        ``poisson_predictive``.
    """

    m = poisson_regression_model(X, y, exposure, ard, a0, b0)
    infer_options.setdefault("algorithm", NCVMP())
    return infer(m, max_iter=max_iter, **infer_options)


def poisson_predictive(result: Result, X_new: Any, exposure: Any = None) -> CountPredictive:
    """Predictive mean and variance of counts at new inputs under q(w) of a Poisson regression.

    With η = xᵀw ~ N(μ, s²) under q(w) and rate λ = e·exp(η) (lognormal): E[y] = E[λ] = e·exp(μ + s²/2),
    Var[y] = E[λ] + Var[λ] = E[λ] + E[λ]²(exp(s²) − 1).
    """
    q = _posterior(result, "w")
    mu, V = q.mean(), q.cov()
    Xn = _new_inputs(X_new, mu.shape[-1])
    e = _exposure_vector(exposure, len(Xn), "exposure")
    s2 = np.einsum("nd,de,ne->n", Xn, V, Xn)
    log_mean = Xn @ mu + 0.5 * s2 + (0.0 if e is None else np.log(e))
    mean = np.exp(log_mean)
    return CountPredictive(mean, mean + mean * mean * np.expm1(s2))
