"""scikit-learn estimators (factorgraph.estimators): scikit-learn's own estimator checks, Pipeline,
GridSearchCV, and agreement with the canned models they wrap."""

import warnings

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import factorgraph as fg
from factorgraph import models
from factorgraph.estimators import (
    BayesianLinearRegression,
    BayesianLogisticRegression,
    BayesianSoftmaxRegression,
)


@parametrize_with_checks([BayesianLinearRegression(), BayesianLinearRegression(ard=True),
                          BayesianLogisticRegression(), BayesianSoftmaxRegression()])
def test_sklearn_check(estimator, check):
    check(estimator)


def _regression(N=60, D=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    y = X @ np.array([1.0, -2.0, 0.5])[:D] + 3.0 + 0.3 * rng.normal(size=N)
    return X, y


def test_linear_matches_canned_model():
    X, y = _regression()
    est = BayesianLinearRegression(ard=True).fit(X, y)
    Xd = np.hstack([X, np.ones((len(X), 1))])
    r = models.linear_regression(Xd, y, ard=True)
    assert est.evidence_ == pytest.approx(r.elbo, rel=1e-12)
    assert est.evidence_kind_ == r.evidence_kind == "lower bound"
    X_new = np.random.default_rng(1).normal(size=(7, 3))
    t = models.linear_predictive(r, np.hstack([X_new, np.ones((7, 1))]))
    mean, std = est.predict(X_new, return_std=True)
    np.testing.assert_allclose(mean, t.mean, rtol=1e-12)
    np.testing.assert_allclose(std, np.sqrt(t.dof / (t.dof - 2) / t.precision), rtol=1e-12)
    np.testing.assert_allclose(est.predict_std(X_new), std, rtol=1e-12)
    np.testing.assert_allclose(est.coef_, [1.0, -2.0, 0.5], atol=0.2)
    assert est.intercept_ == pytest.approx(3.0, abs=0.2)
    assert est.converged_ and est.n_iter_ >= 1


def test_linear_predictive_std_is_calibrated():
    # the predictive sd covers fresh noise: about 68 % of new targets lie within one sd of the mean
    X, y = _regression(N=400, seed=2)
    Xt, yt = _regression(N=2000, seed=3)
    mean, std = BayesianLinearRegression().fit(X, y).predict(Xt, return_std=True)
    assert 0.64 < np.mean(np.abs(yt - mean) < std) < 0.72


def test_logistic_string_labels_and_canned_model():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 2))
    y = np.where(X @ [2.0, -1.0] + 0.5 + 0.5 * rng.normal(size=80) > 0, "yes", "no")
    est = BayesianLogisticRegression().fit(X, y)
    assert list(est.classes_) == ["no", "yes"]
    Xd = np.hstack([X, np.ones((80, 1))])
    r = models.logistic_regression(Xd, y == "yes")
    assert est.evidence_ == pytest.approx(r.elbo, rel=1e-12)
    P = est.predict_proba(X)
    np.testing.assert_allclose(P[:, 1], models.logistic_predictive(r, Xd), rtol=1e-12)
    np.testing.assert_allclose(P.sum(1), 1.0)
    assert est.score(X, y) > 0.85
    assert set(est.predict(X)) <= {"no", "yes"}


def test_logistic_refuses_three_classes():
    X = np.random.default_rng(0).normal(size=(9, 2))
    with pytest.raises(ValueError, match="BayesianSoftmaxRegression"):
        BayesianLogisticRegression().fit(X, np.repeat([0, 1, 2], 3))


def test_softmax_three_classes_matches_canned_model():
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 3.0], [3.0, -1.0], [-3.0, -1.0]])
    codes = np.repeat([0, 1, 2], 30)
    X = centres[codes] + rng.normal(size=(90, 2))
    labels = np.array(["a", "b", "c"])[codes]
    est = BayesianSoftmaxRegression().fit(X, labels)
    r = models.softmax_regression(X, codes, 3)
    assert est.evidence_ == pytest.approx(r.elbo, rel=1e-10)
    np.testing.assert_allclose(est.coef_, r.posterior("W").mean(), rtol=1e-10)
    P = est.predict_proba(X[:10])
    np.testing.assert_allclose(P, models.softmax_predictive(r, X[:10], n_samples=20000), atol=0.02)
    np.testing.assert_allclose(P.sum(1), 1.0)
    assert est.score(X, labels) > 0.9


def test_pipeline_and_grid_search():
    X, y = _regression(N=80, D=3)
    X = X * [1e3, 1e-2, 1.0]
    pipe = make_pipeline(StandardScaler(), BayesianLinearRegression())
    grid = GridSearchCV(pipe, {"bayesianlinearregression__ard": [False, True]}, cv=3).fit(X, y)
    assert grid.best_score_ > 0.9
    assert set(grid.cv_results_["param_bayesianlinearregression__ard"]) == {False, True}
    rng = np.random.default_rng(4)
    Xc = rng.normal(size=(60, 2))
    yc = (Xc[:, 0] + 0.5 * rng.normal(size=60) > 0).astype(int)  # not separable
    gs = GridSearchCV(make_pipeline(StandardScaler(), BayesianLogisticRegression()), {
        "bayesianlogisticregression__ard": [False, True]}, cv=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", fg.ConvergenceWarning)  # standardised inputs: every fit converges
        gs.fit(Xc, yc)
    assert gs.best_score_ > 0.85


def test_unconverged_fit_warns_as_both_convergence_warnings():
    from sklearn.exceptions import ConvergenceWarning

    X, y = _regression()
    with pytest.warns(ConvergenceWarning) as record:
        BayesianSoftmaxRegression(max_iter=1).fit(X, (y > 3).astype(int) + (y > 5))
    assert any(issubclass(w.category, fg.ConvergenceWarning) for w in record)
