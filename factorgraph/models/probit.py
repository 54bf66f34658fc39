"""Bayesian probit regression fitted by expectation propagation (Minka 2001; Rasmussen & Williams 2006 §3.6).

w ~ N(0, α⁻¹I) with a known prior precision α, y_n ∈ {0, 1} with P(y_n = 1 | w) = Φ(x_nᵀw).  EP keeps one
Gaussian site per row on s_n = x_nᵀw and matches the moments of the tilted distributions Φ(t_n s) N(s; m, v)
(t_n = 2y_n − 1) in closed form; q(w) is a full-covariance Gaussian and ``Result.elbo`` is log Z_EP.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from factorgraph.graph import checks
from factorgraph.graph.builders import mv_gaussian, plate
from factorgraph.graph.expressions import feature_names, inner, label_features
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError
from factorgraph.graph.nonconjugate import probit
from factorgraph.posterior.results import Result
from schedules import EP, infer


def probit_regression_model(X: Any, y: Any, prior_precision: float = 1.0) -> Model:
    """The model of ``probit_regression``: w ~ N(0, α⁻¹I), P(y_n = 1) = Φ(x_nᵀw) (add a column of ones to X
    for an intercept)."""
    Xa = checks.constant(X, "X")
    if Xa.ndim != 2:
        raise ModelError(f"X must be a matrix (N, D), got shape {Xa.shape}")
    N, D = Xa.shape
    alpha = checks.positive_number(prior_precision, "prior_precision")
    with Model("probit_regression") as m:
        n = plate("n", N)
        w = mv_gaussian("w", mean=np.zeros(D), precision=alpha * np.eye(D))
        probit("y", inner(Xa, w, plates=[n]), observed=y)
    label_features(m, feature_names(X), "w_dim_0")
    return m


def probit_regression(X: Any, y: Any, prior_precision: float = 1.0, *, algorithm: Any = None,
                      **infer_options: Any) -> Result:
    """Bayesian probit regression, by expectation propagation unless ``algorithm`` says otherwise.

    Parameters
    ----------
    X
        Inputs (N, D); add a column of ones for an intercept.
    y
        Labels as bool, {0, 1} or {−1, +1}.
    prior_precision
        α of the prior w ~ N(0, α⁻¹I).
    algorithm
        ``fg.EP()`` by default (sequential over the rows); ``fg.EP(parallel=True)``, or ``fg.NCVMP()`` for the
        variational fit by quadrature.  Other options go to ``fg.infer``.

    Returns
    -------
    Result
        ``posterior("w")`` is q(w), a full-covariance Gaussian; ``elbo`` the log evidence approximation
        (log Z_EP under EP, a lower bound under NCVMP).
    """
    m = probit_regression_model(X, y, prior_precision)
    return infer(m, algorithm=EP() if algorithm is None else algorithm, **infer_options)
