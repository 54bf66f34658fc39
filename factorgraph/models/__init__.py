"""Canned models, built only with the public builder API and fitted with ``fg.infer``.

Each ``*_model`` function returns the ``fg.Model``; the function without the suffix builds it, runs
``fg.infer`` and returns the ``Result``; the ``*_predictive`` functions read a fitted Result.  One module per
kind of model:

- ``regression``: linear (Drugowitsch 2014) and logistic regression, and test predictive densities;
- ``softmax``: multinomial regression; ``poisson``: Poisson regression with exposures;
- ``hierarchical``: multilevel regression; ``mixtures`` and ``gaussian_mixtures``: mixture models;
- ``hidden_markov``: hidden Markov models; ``state_space``: local-level and linear state-space models;
- ``bayesian_pca``: Bayesian PCA.
"""

from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError
from factorgraph.models.bayesian_pca import PCAResult, pca, pca_model
from factorgraph.models.gaussian_mixtures import (
    MixturePredictive,
    gaussian_mixture,
    gaussian_mixture_model,
    mixture_predictive,
)
from factorgraph.models.hidden_markov import hmm, hmm_model
from factorgraph.models.hierarchical import (
    hierarchical_predictive,
    hierarchical_regression,
    hierarchical_regression_model,
)
from factorgraph.models.mixtures import mixture, mixture_model
from factorgraph.models.poisson import CountPredictive, poisson_predictive, poisson_regression, poisson_regression_model
from factorgraph.models.probit import probit_regression, probit_regression_model
from factorgraph.models.regression import (
    LIKELIHOODS,
    StudentT,
    linear_predictive,
    linear_regression,
    linear_regression_model,
    logistic_predictive,
    logistic_regression,
    logistic_regression_model,
    predictive_log_density,
)
from factorgraph.models.softmax import softmax_predictive, softmax_regression, softmax_regression_model
from factorgraph.models.state_space import (
    StatePredictive,
    linear_state_space,
    linear_state_space_model,
    local_level,
    local_level_model,
    state_space_predictive,
)
from factorgraph.posterior.results import Result

__all__ = [
    "CountPredictive", "LIKELIHOODS", "MixturePredictive", "Model", "ModelError", "PCAResult", "Result",
    "StatePredictive", "StudentT", "gaussian_mixture", "gaussian_mixture_model", "hierarchical_predictive",
    "hierarchical_regression", "hierarchical_regression_model", "hmm", "hmm_model", "linear_predictive",
    "linear_regression", "linear_regression_model", "linear_state_space", "linear_state_space_model",
    "local_level", "local_level_model", "logistic_predictive", "logistic_regression", "logistic_regression_model",
    "mixture", "mixture_model", "mixture_predictive", "pca", "pca_model", "poisson_predictive", "poisson_regression",
    "poisson_regression_model", "predictive_log_density", "softmax_predictive", "softmax_regression",
    "softmax_regression_model", "state_space_predictive",
]
__all__ += ["probit_regression", "probit_regression_model"]
