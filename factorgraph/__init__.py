"""Declarative Bayesian models as factor graphs, solved by message passing.

``import factorgraph as fg`` gives the whole user API::

    with fg.Model("gaussian-mean") as m:
        n = fg.plate("n", 10)
        mu = fg.gaussian("mu", mean=0.0, precision=1e-2)
        tau = fg.gamma("tau", shape=1.0, rate=1.0)
        fg.gaussian("x", mean=mu, precision=tau, plates=[n], observed=data)
    r = fg.infer(m)

The engine (``schedules``) sits to the right of this package in the import order, so its names
(``infer``, ``VMP``, ...) are re-exported lazily.
"""

from __future__ import annotations

from typing import Any

from distributions import GaussianMixture, MvGaussian

from .bounds import expected_log_sum_exp, softmax_bound
from .builders import (
    bernoulli,
    beta,
    categorical,
    dirichlet,
    gamma,
    gaussian,
    gaussian_gamma,
    mv_gaussian,
    plate,
)
from .convergence import ConvergenceWarning
from .counts import binomial, binomial_logit, multinomial, multinomial_softmax, poisson, poisson_log
from .covariance import gaussian_wishart, wishart
from .expressions import inner, select
from .indexing import index
from .model import Model
from .nodes import ModelError, Plate, Variable
from .nonconjugate import (
    bernoulli_logit,
    categorical_softmax,
    cauchy_site,
    laplace_site,
    probit,
    student_t_site,
)
from .results import Comparison, Result, compare
from .scales import exponential, half_cauchy, half_normal, half_student_t

_LAZY = {name: "schedules" for name in
         ("infer", "VMP", "NCVMP", "InferenceError", "Laplace", "MVI", "VIDiag", "approximate", "BVI", "AIKL")}
_LAZY.update({"site": "schedules", "projection_log_expectation": "schedules"})  # site terms for fg.approximate


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    if name == "models":
        import importlib

        return importlib.import_module("factorgraph.models")
    raise AttributeError(f"module 'factorgraph' has no attribute {name!r}")


__all__ = ["Comparison", "Model", "ModelError", "Plate", "Result", "Variable", "bernoulli", "bernoulli_logit",
           "beta", "categorical_softmax", "cauchy_site", "laplace_site", "probit", "student_t_site",
           "categorical", "compare", "dirichlet", "gamma", "gaussian", "gaussian_gamma", "infer", "inner",
           "mv_gaussian", "plate", "select", "InferenceError", "Laplace", "MVI", "NCVMP", "VIDiag", "VMP",
           "approximate", "models", "AIKL", "BVI", "index",
           "binomial", "binomial_logit", "multinomial", "multinomial_softmax", "poisson", "poisson_log"]
__all__ += ["exponential", "half_cauchy", "half_normal", "half_student_t"]
__all__ += ["ConvergenceWarning"]
__all__ += ["GaussianMixture", "MvGaussian", "expected_log_sum_exp", "softmax_bound", "site",
            "projection_log_expectation"]
__all__ += ["gaussian_wishart", "wishart"]
