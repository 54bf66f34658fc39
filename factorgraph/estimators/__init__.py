"""scikit-learn estimators around the canned regressions of ``factorgraph.models``.

``BayesianLinearRegression`` (a regressor, with a Student-t predictive), ``BayesianLogisticRegression``
(binary) and ``BayesianSoftmaxRegression`` (any number of classes) follow scikit-learn's conventions, so
they work in a ``Pipeline``, in ``GridSearchCV`` and with ``cross_val_score``::

    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from factorgraph.estimators import BayesianLinearRegression

    est = make_pipeline(StandardScaler(), BayesianLinearRegression(ard=True)).fit(X, y)
    mean, std = est.predict(X_new, return_std=True)

After ``fit`` each holds ``evidence_`` (the variational lower bound on log p(y | X), the ELBO of the
canned model), ``evidence_kind_``, ``coef_``, ``intercept_``, ``n_iter_``, ``converged_`` and the full
``result_`` (a ``fg.Result``).  With ``fit_intercept=True`` (default) a column of ones is appended to X
inside, so the intercept gets the same prior as the weights (Drugowitsch 2014); the softmax regression
has its own per-class intercept b_k ~ N(0, 1/prior_precision) (Knowles & Minka 2011).

A fit that ends unconverged warns with ``factorgraph.estimators.ConvergenceWarning``, which is both a
``fg.ConvergenceWarning`` and scikit-learn's ``sklearn.exceptions.ConvergenceWarning``, so the filters
of either library catch it.

scikit-learn is an optional dependency: ``pip install "fgvmp[sklearn]"``.
"""

from factorgraph.estimators.mixture import VariationalGaussianMixture
from factorgraph.estimators.regression import (
    BayesianLinearRegression,
    BayesianLogisticRegression,
    BayesianSoftmaxRegression,
    ConvergenceWarning,
)

__all__ = ["BayesianLinearRegression", "BayesianLogisticRegression", "BayesianSoftmaxRegression", "ConvergenceWarning",
           "VariationalGaussianMixture"]
