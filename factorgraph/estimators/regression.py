"""The regression estimators: ``BayesianLinearRegression``, ``BayesianLogisticRegression`` and
``BayesianSoftmaxRegression`` (see the package docstring)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning as _SklearnConvergenceWarning
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

import factorgraph as fg
from factorgraph import models as _models
from factorgraph.graph import convergence
from factors.kernels import softmax


class ConvergenceWarning(convergence.ConvergenceWarning, _SklearnConvergenceWarning):
    """A fit ended before its stopping rule was met (both a ``fg.ConvergenceWarning`` and scikit-learn's
    ``ConvergenceWarning``)."""


def _run(fit: Any) -> Any:
    """Call ``fit()``, re-emitting the library's convergence warnings as this module's
    ``ConvergenceWarning`` (other warnings pass through unchanged)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fit()
    for w in caught:
        if issubclass(w.category, convergence.ConvergenceWarning):
            warnings.warn(str(w.message), ConvergenceWarning, stacklevel=3)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return result


def _design(X: np.ndarray, fit_intercept: bool) -> np.ndarray:
    return np.hstack([X, np.ones((X.shape[0], 1))]) if fit_intercept else X


class _Fitted:
    """Attributes every estimator here sets from its ``fg.Result``."""

    def _store(self, result: Any) -> None:
        self.result_ = result
        self.evidence_ = float(result.elbo)
        self.evidence_kind_ = result.evidence_kind
        self.n_iter_ = int(result.n_iter)
        self.converged_ = bool(result.converged)


def _encode_labels(est: Any, y: Any) -> np.ndarray:
    check_classification_targets(y)
    est.classes_, codes = np.unique(y, return_inverse=True)
    if len(est.classes_) < 2:
        raise ValueError(f"{type(est).__name__} needs samples of at least 2 classes in the data, but the data "
                         f"contain only one class: {est.classes_[0]!r}")
    return codes.reshape(-1)


# ------------------------------------------------------------------------------------ linear
class BayesianLinearRegression(RegressorMixin, _Fitted, BaseEstimator):
    """Variational Bayesian linear regression (Drugowitsch 2014), ``models.linear_regression``.

    y_n ~ N(wᵀx_n, τ⁻¹), w | τ ~ N(0, (τA)⁻¹), τ ~ Gam(a₀, b₀), A = αI (``ard=True``: diag(α), one α per
    input), α ~ Gam(c₀, d₀).  The predictive at x is a Student-t with mean w_Nᵀx, precision
    (1 + xᵀV_N x)⁻¹ a_N/b_N and 2a_N degrees of freedom; ``predict(X, return_std=True)`` also gives its
    standard deviation (as scikit-learn's ``BayesianRidge``).

    Parameters
    ----------
    ard
        One prior precision α per input (automatic relevance determination) instead of one for all.
    a0, b0, c0, d0
        Gamma shape and rate of the noise precision τ (a₀, b₀) and of the weight precision α (c₀, d₀).
    fit_intercept
        Append a column of ones to X (its weight, under the same prior, is ``intercept_``).
    max_iter, tol
        At most ``max_iter`` passes; ``tol=None`` uses Drugowitsch's rule (the bound changes by less than
        0.001 %), a number iterates until the relative change of the bound is below it.
    init
        Where q(α) starts: "auto", "reference" or "data" (see ``models.linear_regression``).

    Attributes
    ----------
    coef_, intercept_
        Posterior mean of the weights (the intercept is 0.0 when ``fit_intercept=False``).
    evidence_, evidence_kind_
        The variational lower bound on log p(y | X) and what it is ("lower bound").
    n_iter_, converged_, result_
        Passes run, whether the stopping rule was met, the full ``fg.Result``.
    """

    def __init__(self, ard: bool = False, a0: float = 1e-2, b0: float = 1e-4, c0: float = 1e-2,
                 d0: float = 1e-4, fit_intercept: bool = True, max_iter: int = 500, tol: float | None = None,
                 init: str = "auto"):
        self.ard = ard
        self.a0 = a0
        self.b0 = b0
        self.c0 = c0
        self.d0 = d0
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.init = init

    def fit(self, X: Any, y: Any) -> BayesianLinearRegression:
        X, y = validate_data(self, X, y, y_numeric=True, dtype=np.float64)
        Xd = _design(X, self.fit_intercept)
        r = _run(lambda: _models.linear_regression(Xd, y, ard=self.ard, a0=self.a0, b0=self.b0, c0=self.c0,
                                                   d0=self.d0, tol=self.tol, max_iter=self.max_iter,
                                                   init=self.init))
        self._store(r)
        w = r.posterior("w").mean()
        self.coef_ = w[:-1] if self.fit_intercept else w
        self.intercept_ = float(w[-1]) if self.fit_intercept else 0.0
        return self

    def predictive(self, X: Any) -> _models.StudentT:
        """The Student-t posterior predictive at the rows of X (``models.linear_predictive``)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return _models.linear_predictive(self.result_, _design(X, self.fit_intercept))

    def predict(self, X: Any, return_std: bool = False) -> Any:
        """Predictive mean at the rows of X; with ``return_std=True`` also the predictive standard deviation
        (infinite where the Student-t has 2 or fewer degrees of freedom)."""
        t = self.predictive(X)
        return (t.mean, self._std(t)) if return_std else t.mean

    def predict_std(self, X: Any) -> np.ndarray:
        """Predictive standard deviation √(ν/(ν − 2)/λ) of the Student-t at the rows of X."""
        return self._std(self.predictive(X))

    @staticmethod
    def _std(t: _models.StudentT) -> np.ndarray:
        if t.dof <= 2.0:
            return np.full(np.shape(t.mean), np.inf)
        return np.sqrt(t.var())


# ------------------------------------------------------------------------------------ logistic
class BayesianLogisticRegression(ClassifierMixin, _Fitted, BaseEstimator):
    """Variational Bayesian logistic regression for two classes (Drugowitsch 2014),
    ``models.logistic_regression``.

    w ~ N(0, α⁻¹I) (``ard=True``: diag(α)⁻¹), α ~ Gam(a₀, b₀), p(y = classes_[1] | x) = σ(xᵀw).  Any two
    labels work (strings, integers, booleans); for more than two classes use
    ``BayesianSoftmaxRegression``.  ``predict_proba`` is E_q[σ(xᵀw)], exact by quadrature
    (``predict_method="bound"``: Drugowitsch's lower bound instead).

    Parameters
    ----------
    ard, a0, b0
        One α per input instead of one for all; the Gamma shape and rate of α.
    method
        How the likelihood is handled: "quadratic" (Jaakkola–Jordan bound, the author's algorithm),
        "quadrature" or "tilted" (non-conjugate VMP).
    fit_intercept, max_iter, init
        As in ``BayesianLinearRegression``.
    predict_method
        "quadrature" or "bound" (see ``models.logistic_predictive``).

    Attributes
    ----------
    classes_, coef_ (shape (1, n_features)), intercept_ (shape (1,)), evidence_, evidence_kind_, n_iter_,
    converged_, result_
    """

    def __init__(self, ard: bool = False, a0: float = 1e-2, b0: float = 1e-4, method: str = "quadratic",
                 fit_intercept: bool = True, max_iter: int = 500, init: str = "auto",
                 predict_method: str = "quadrature"):
        self.ard = ard
        self.a0 = a0
        self.b0 = b0
        self.method = method
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.init = init
        self.predict_method = predict_method

    def fit(self, X: Any, y: Any) -> BayesianLogisticRegression:
        X, y = validate_data(self, X, y, dtype=np.float64)
        codes = _encode_labels(self, y)
        if len(self.classes_) > 2:
            raise ValueError(f"Only binary classification is supported. BayesianLogisticRegression is for two "
                             f"classes, but y has {len(self.classes_)} ({self.classes_[:5].tolist()}...); use "
                             "BayesianSoftmaxRegression for more")
        Xd = _design(X, self.fit_intercept)
        r = _run(lambda: _models.logistic_regression(Xd, codes == 1, ard=self.ard, a0=self.a0, b0=self.b0,
                                                     method=self.method, max_iter=self.max_iter,
                                                     init=self.init))
        self._store(r)
        w = r.posterior("w").mean()
        self.coef_ = (w[:-1] if self.fit_intercept else w)[None, :]
        self.intercept_ = np.array([w[-1] if self.fit_intercept else 0.0])
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        """Columns p(y = classes_[0] | x), p(y = classes_[1] | x) under q(w)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        p = _models.logistic_predictive(self.result_, _design(X, self.fit_intercept), method=self.predict_method)
        p = np.clip(p, 0.0, 1.0)
        return np.column_stack([1.0 - p, p])

    def predict_log_proba(self, X: Any) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X: Any) -> np.ndarray:
        """The more probable class of each row."""
        check_is_fitted(self)
        return self.classes_[(self.predict_proba(X)[:, 1] > 0.5).astype(int)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False  # two classes; BayesianSoftmaxRegression takes more
        return tags


# ------------------------------------------------------------------------------------ softmax
def _softmax_no_intercept(X: np.ndarray, codes: np.ndarray, K: int, method: str, prior_precision: float,
                          **options: Any) -> Any:
    """``models.softmax_regression`` without the intercepts b_k (for ``fit_intercept=False``)."""


    N, D = X.shape
    with fg.Model("softmax_regression_no_intercept") as m:
        n, k = fg.plate("n", N), fg.plate("k", K)
        W = fg.mv_gaussian("W", mean=0.0, precision=prior_precision, plates=[k], dim=D)
        fg.categorical_softmax("y", logits=fg.inner(X, W, plates=[n]), over=k, observed=codes, method=method)
    options.setdefault("algorithm", fg.NCVMP(damping=0.5 if method == "taylor" else 0.0))
    return fg.infer(m, **options)


class BayesianSoftmaxRegression(ClassifierMixin, _Fitted, BaseEstimator):
    """Variational Bayesian multinomial (softmax) regression (Knowles & Minka 2011),
    ``models.softmax_regression``.

    g_k(x) = w_kᵀx + b_k with W_kd ~ N(0, 1/prior_precision) and b_k likewise, y ~ Categorical(softmax(g)),
    fitted by non-conjugate VMP.  Any labels work (two or more classes).  ``predict_proba`` averages
    softmax(g) over ``n_samples`` draws of the Gaussian scores g under q (seeded by ``random_state``; the
    same draws of the standardised scores serve every row, so a row's probabilities do not depend on
    the other rows predicted with it).

    Parameters
    ----------
    prior_precision
        Precision of the Gaussian prior of every weight and intercept.
    method
        The bound on E[log Σ exp g]: "tilted" (default), "taylor", ... (see ``fg.categorical_softmax``).
    fit_intercept
        Fit the intercepts b_k (with ``False`` the scores are w_kᵀx only).
    max_iter, tol
        Passes of NCVMP and its tolerance (``None``: ``fg.infer``'s default).
    n_samples, random_state
        Monte Carlo draws for ``predict_proba`` and their seed.

    Attributes
    ----------
    classes_, coef_ (shape (n_classes, n_features)), intercept_ (shape (n_classes,)), evidence_,
    evidence_kind_, n_iter_, converged_, result_
    """

    def __init__(self, prior_precision: float = 1.0, method: str = "tilted", fit_intercept: bool = True,
                 max_iter: int = 500, tol: float | None = None, n_samples: int = 2000, random_state: int = 0):
        self.prior_precision = prior_precision
        self.method = method
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.n_samples = n_samples
        self.random_state = random_state

    def fit(self, X: Any, y: Any) -> BayesianSoftmaxRegression:
        X, y = validate_data(self, X, y, dtype=np.float64)
        codes = _encode_labels(self, y)
        K = len(self.classes_)
        options: dict[str, Any] = {"max_iter": self.max_iter}
        if self.tol is not None:
            options["tol"] = self.tol
        if self.fit_intercept:
            r = _run(lambda: _models.softmax_regression(X, codes, K, method=self.method,
                                                        prior_precision=self.prior_precision, **options))
        else:
            r = _run(lambda: _softmax_no_intercept(X, codes, K, self.method, self.prior_precision, **options))
        self._store(r)
        self.coef_ = np.asarray(r.posterior("W").mean())
        self.intercept_ = np.asarray(r.posterior("b").mean()) if self.fit_intercept else np.zeros(K)
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        """p(y = classes_[k] | x) = E_q[softmax(g(x))_k], by Monte Carlo over the Gaussian scores."""

        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        W = self.result_.posterior("W")
        mean = X @ W.mean().T
        var = np.einsum("nd,kde,ne->nk", X, W.cov(), X)
        if self.fit_intercept:
            b = self.result_.posterior("b")
            mean, var = mean + b.mean(), var + b.var()
        z = np.random.default_rng(self.random_state).standard_normal((self.n_samples, 1, len(self.classes_)))
        return softmax(mean + np.sqrt(np.maximum(var, 0.0)) * z).mean(0)

    def predict_log_proba(self, X: Any) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X: Any) -> np.ndarray:
        """The most probable class of each row."""
        check_is_fitted(self)
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


__all__ = ["BayesianLinearRegression", "BayesianLogisticRegression", "BayesianSoftmaxRegression",
           "ConvergenceWarning", "VariationalGaussianMixture"]  # noqa: F822 (the module __getattr__ above)
