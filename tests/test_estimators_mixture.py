"""VariationalGaussianMixture (factorgraph.estimators): scikit-learn's own estimator checks, Pipeline,
GridSearchCV, and agreement with models.gaussian_mixture and with scikit-learn's BayesianGaussianMixture."""

import warnings

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from factorgraph import models
from factorgraph.estimators import VariationalGaussianMixture


@parametrize_with_checks([VariationalGaussianMixture(), VariationalGaussianMixture(3, "full"),
                          VariationalGaussianMixture(2, "diag")])
def test_sklearn_check(estimator, check):
    check(estimator)


def _blobs(N=150, seed=0):
    rng = np.random.default_rng(seed)
    centres = np.array([[-4.0, 0.0], [4.0, 0.0], [0.0, 5.0]])
    lab = rng.integers(0, 3, N)
    cov = np.array([[1.0, 0.6], [0.6, 0.8]])
    return centres[lab] + rng.normal(size=(N, 2)) @ np.linalg.cholesky(cov).T, lab


@pytest.mark.parametrize("ct", ["full", "diag"])
def test_matches_the_canned_model_and_predicts_the_clusters(ct):
    X, lab = _blobs()
    gm = VariationalGaussianMixture(3, ct, random_state=1).fit(X)
    r = models.gaussian_mixture(X, 3, ct, seed=1, n_init=1, scale=np.cov(X.T) + 1e-6 * np.eye(2))
    assert gm.evidence_ == pytest.approx(r.elbo, rel=1e-12)
    np.testing.assert_allclose(gm.weights_, r.posterior("pi").mean(), rtol=1e-12)
    pred = models.mixture_predictive(r, ct)
    np.testing.assert_allclose(gm.score_samples(X), pred.logpdf(X), rtol=1e-12)
    assert gm.score(X) == pytest.approx(pred.logpdf(X).mean(), rel=1e-12)
    # the labels recover the clusters up to a permutation
    z = gm.predict(X)
    agree = max(np.mean(z == perm[lab]) for perm in map(np.array, __import__("itertools").permutations(range(3))))
    assert agree > 0.97
    p = gm.predict_proba(X)
    np.testing.assert_allclose(p.sum(1), 1.0)
    assert np.array_equal(p.argmax(1), z)
    assert gm.fit_predict(X).tolist() == z.tolist()
    if ct == "full":
        np.testing.assert_allclose(gm.covariances_ @ gm.precisions_, np.broadcast_to(np.eye(2), (3, 2, 2)),
                                   atol=1e-10)


def test_full_covariance_matches_sklearn_bayesian_gaussian_mixture():
    """Same model and priors: from its own starts each finds the three clusters; the means agree closely
    (both run to a tight tolerance, so they reach the same fixed point from their different starts)."""
    from sklearn.mixture import BayesianGaussianMixture

    X, _ = _blobs(300, seed=2)
    gm = VariationalGaussianMixture(3, "full", tol=1e-14, max_iter=5000).fit(X)
    sk = BayesianGaussianMixture(n_components=3, weight_concentration_prior_type="dirichlet_distribution",
                                 weight_concentration_prior=1.0, mean_precision_prior=1.0, reg_covar=0.0,
                                 covariance_prior=np.cov(X.T), degrees_of_freedom_prior=2.0, tol=1e-10,
                                 max_iter=1000, random_state=0).fit(X)
    order = [int(np.argmin(np.linalg.norm(sk.means_ - m, axis=1))) for m in gm.means_]
    assert sorted(order) == [0, 1, 2]
    np.testing.assert_allclose(gm.means_, sk.means_[order], atol=1e-6)
    np.testing.assert_allclose(gm.weights_, sk.weights_[order], atol=1e-6)
    np.testing.assert_allclose(gm.precisions_, sk.precisions_[order], rtol=1e-6)


def test_pipeline_and_grid_search_pick_the_number_of_components():
    X, _ = _blobs(240, seed=3)
    X = X * [1e3, 1e-2]
    pipe = make_pipeline(StandardScaler(), VariationalGaussianMixture())
    grid = GridSearchCV(pipe, {"variationalgaussianmixture__n_components": [1, 3],
                               "variationalgaussianmixture__covariance_type": ["full", "diag"]}, cv=3).fit(X)
    assert grid.best_params_["variationalgaussianmixture__n_components"] == 3
    assert grid.best_params_["variationalgaussianmixture__covariance_type"] == "full"  # the clusters are tilted


def test_evidence_prefers_the_true_number_of_components():
    X, _ = _blobs(200, seed=4)
    ev = {K: VariationalGaussianMixture(K, n_init=3).fit(X).evidence_ for K in (1, 2, 3)}
    assert ev[3] > ev[2] > ev[1]


def test_singular_data_covariance_is_regularised():
    """Fewer rows than features and a constant feature: the default V₀ gets reg_covar·I."""
    rng = np.random.default_rng(5)
    X = np.c_[rng.normal(size=(6, 8)), np.ones(6)]
    gm = VariationalGaussianMixture(2, random_state=0).fit(X)
    assert np.isfinite(gm.evidence_) and np.all(np.isfinite(gm.score_samples(X)))
    assert np.isfinite(VariationalGaussianMixture(2, "diag").fit(X).evidence_)
    with pytest.raises(ValueError, match="'theta'.*positive definite"):
        VariationalGaussianMixture(2, reg_covar=0.0).fit(X)


def test_bad_parameters_are_refused():
    X, _ = _blobs(20)
    with pytest.raises(ValueError, match="covariance_type"):
        VariationalGaussianMixture(2, "spherical").fit(X)
    with pytest.raises(ValueError, match="n_components"):
        VariationalGaussianMixture(0).fit(X)
    with pytest.raises(ValueError, match="n_components"):
        VariationalGaussianMixture(21).fit(X)


def test_diag_density_far_from_every_component_is_finite():
    """Far from every component the per-axis density of the "diag" predictive underflows in float64; summed in
    log space it stays finite (it was log 0 = −inf, with a divide-by-zero warning, e.g. in the integrals over a
    missing coordinate below), decreases with the distance, and the responsibilities stay a distribution."""
    X, _ = _blobs(120, 3)
    gm = VariationalGaussianMixture(3, "diag", random_state=2).fit(X)
    far = np.array([[0.0, 0.0], [30.0, 0.0], [300.0, 0.0], [3000.0, -3000.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lp = gm.score_samples(far)
        proba = gm.predict_proba(far)
    assert np.all(np.isfinite(lp)) and np.all(np.diff(lp) < 0)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("ct", ["full", "diag"])
def test_nan_entries_are_missing_values(ct):
    """NaN entries are marginalised: fit equals models.gaussian_mixture with the NaN mask; a partly observed
    row's predictive density is the integral of the complete-row density over its missing coordinate
    (scipy.integrate.quad); a row with nothing observed has density 1; inf is still refused."""
    from scipy import integrate

    X, _ = _blobs(120, 3)
    X = np.c_[X, X[:, 0] - X[:, 1] + np.random.default_rng(3).normal(size=len(X))]
    Xn = X.copy()
    Xn[np.random.default_rng(4).uniform(size=X.shape) < 0.15] = np.nan
    gm = VariationalGaussianMixture(3, ct, random_state=2).fit(Xn)
    seen = ~np.isnan(Xn)
    from factorgraph.models.gaussian_mixtures import _observed_covariance

    ref = models.gaussian_mixture(Xn, 3, ct, seed=2, n_init=1, mask=seen,
                                  scale=_observed_covariance(np.where(seen, Xn, 0.0), seen, "full") + 1e-6 * np.eye(3))
    assert gm.evidence_ == ref.elbo and gm.converged_
    row = X[7].copy()
    for d in range(3):
        part = row.copy()
        part[d] = np.nan

        def dens(t, d=d):
            full = row.copy()
            full[d] = t
            return np.exp(gm.score_samples(full[None])[0])

        want = np.log(integrate.quad(dens, -np.inf, np.inf, epsabs=0, epsrel=1e-11, limit=200)[0])
        np.testing.assert_allclose(gm.score_samples(part[None])[0], want, rtol=1e-8)
    assert gm.score_samples(np.full((1, 3), np.nan))[0] == 0.0
    np.testing.assert_allclose(gm.predict_proba(np.full((2, 3), np.nan)), np.tile(gm.weights_, (2, 1)), rtol=1e-12)
    with pytest.raises(ValueError, match="(?i)inf"):
        gm.score_samples(np.array([[np.inf, 0.0, 0.0]]))
