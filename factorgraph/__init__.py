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

from distributions import GaussianMixture, MvGaussian
from factorgraph.graph import data as _data
from factorgraph.graph.arguments import checked as _checked
from factorgraph.graph.bounds import expected_log_sum_exp, softmax_bound
from factorgraph.graph.builders import gamma, gaussian, gaussian_gamma, mv_gaussian, plate
from factorgraph.graph.convergence import ConvergenceWarning
from factorgraph.graph.counts import binomial, binomial_logit, multinomial, multinomial_softmax, poisson, poisson_log
from factorgraph.graph.covariance import gaussian_wishart, wishart
from factorgraph.graph.derived import deterministic
from factorgraph.graph.discrete import bernoulli, beta, categorical, dirichlet
from factorgraph.graph.expressions import dot, select
from factorgraph.graph.families import negative_binomial, zero_inflated_poisson
from factorgraph.graph.heteroscedastic import lognormal
from factorgraph.graph.indexing import index
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError, Plate, Variable
from factorgraph.graph.nonconjugate import (
    bernoulli_logit,
    categorical_softmax,
    cauchy_site,
    is_positive,
    laplace_site,
    probit,
    student_t_site,
)
from factorgraph.graph.ordinal import ordered_logistic, ordered_probit
from factorgraph.graph.robust import student_t
from factorgraph.graph.scales import exponential, half_cauchy, half_normal, half_student_t, uniform_scale
from factorgraph.graph.sequences import markov_chain
from factorgraph.graph.state_space import gaussian_markov_chain
from factorgraph.graph.user_likelihood import likelihood, potential
from factorgraph.posterior.agreement import agreement
from factorgraph.posterior.compare import Comparison, compare
from factorgraph.posterior.empirical import EmpiricalPosterior, GibbsResult
from factorgraph.posterior.predict import predict
from factorgraph.posterior.results import Result
from factorgraph.posterior.sampling import sample_prior

# data nodes (fg.data) are accepted by every public builder, which records its call for model.set_data
data = _data.data
inner = _data.inner
(bernoulli, beta, categorical, dirichlet, gamma, gaussian, gaussian_gamma, mv_gaussian, binomial, binomial_logit,
 multinomial, multinomial_softmax, poisson, poisson_log, gaussian_wishart, wishart, bernoulli_logit,
 categorical_softmax, cauchy_site, laplace_site, probit, student_t_site, student_t, exponential, half_cauchy,
 half_normal, half_student_t, uniform_scale, markov_chain) = map(_data.recorded, (
    bernoulli, beta, categorical, dirichlet, gamma, gaussian, gaussian_gamma, mv_gaussian, binomial, binomial_logit,
    multinomial, multinomial_softmax, poisson, poisson_log, gaussian_wishart, wishart, bernoulli_logit,
    categorical_softmax, cauchy_site, laplace_site, probit, student_t_site, student_t, exponential, half_cauchy,
    half_normal, half_student_t, uniform_scale, markov_chain))
negative_binomial, zero_inflated_poisson = map(_data.recorded, (negative_binomial, zero_inflated_poisson))
ordered_logistic, ordered_probit = map(_data.recorded, (ordered_logistic, ordered_probit))
lognormal = _data.recorded(lognormal)
gaussian_markov_chain = _checked(gaussian_markov_chain)  # its arguments checked as the recorded builders' are
likelihood, potential = map(_data.recorded, (likelihood, potential))

_LAZY = {name: "schedules" for name in
         ("infer", "VMP", "NCVMP", "SVI", "InferenceError", "Laplace", "MVI", "VIDiag", "approximate", "BVI", "AIKL")}
# site terms for fg.approximate, and the handler that integrates a scale out
_LAZY.update({"site": "schedules", "projection_log_expectation": "schedules", "ScaleQuadrature": "schedules"})
_LAZY.update({"Gibbs": "schedules"})
_LAZY.update({"EP": "schedules"})  # expectation propagation


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in ("models", "plots"):  # plots imports matplotlib only when it draws
        import importlib

        return importlib.import_module(f"factorgraph.{name}")
    raise AttributeError(f"module 'factorgraph' has no attribute {name!r}")


__all__ = ["Comparison", "Model", "ModelError", "Plate", "Result", "Variable", "bernoulli", "bernoulli_logit",
           "beta", "categorical_softmax", "cauchy_site", "laplace_site", "probit", "student_t_site",
           "categorical", "compare", "dirichlet", "gamma", "gaussian", "gaussian_gamma", "infer", "inner",
           "mv_gaussian", "plate", "select", "InferenceError", "Laplace", "MVI", "NCVMP", "SVI", "VIDiag", "VMP",
           "approximate", "models", "AIKL", "BVI", "index",
           "binomial", "binomial_logit", "multinomial", "multinomial_softmax", "poisson", "poisson_log"]
__all__ += ["exponential", "half_cauchy", "half_normal", "half_student_t", "uniform_scale"]
__all__ += ["ConvergenceWarning", "SVI", "ScaleQuadrature"]
__all__ += ["GaussianMixture", "MvGaussian", "expected_log_sum_exp", "softmax_bound", "site",
            "projection_log_expectation"]
__all__ += ["markov_chain", "gaussian_markov_chain"]
__all__ += ["dot", "deterministic"]
__all__ += ["sample_prior"]
__all__ += ["data", "predict"]
__all__ += ["student_t"]
__all__ += ["plots"]
__all__ += ["likelihood", "potential"]
__all__ += ["negative_binomial", "zero_inflated_poisson"]
__all__ += ["ordered_logistic", "ordered_probit"]
__all__ += ["lognormal"]


def __dir__() -> list[str]:
    """The public API (the lazily imported names included), not the submodules and import leftovers."""
    return sorted({*__all__, "__version__", "__doc__", "__name__", "__file__", "__path__"})


def _version() -> str:
    """The version in pyproject.toml beside the package (a source tree, where an editable install's metadata
    may be stale), else the installed distribution's."""
    from importlib import metadata
    from pathlib import Path

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    try:
        import tomllib

        with open(pyproject, "rb") as fh:
            return str(tomllib.load(fh)["project"]["version"])
    except (ImportError, OSError, KeyError, ValueError):
        pass
    try:
        return metadata.version("fgvmp")
    except metadata.PackageNotFoundError:
        return "0+unknown"


__version__ = _version()
__all__ += ["gaussian_wishart", "wishart"]
__all__ += ["Gibbs", "GibbsResult", "EmpiricalPosterior", "agreement"]
__all__ += ["EP", "is_positive"]
is_positive = _data.recorded(is_positive)
