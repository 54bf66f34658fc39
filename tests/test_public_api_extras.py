"""The public pieces the demos need: site terms for ``fg.approximate`` (``fg.site``, ``prior=``),
``fg.projection_log_expectation``, and the softmax bounds with their Monte Carlo reference
(``fg.softmax_bound``, ``fg.expected_log_sum_exp``)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import log_expit, logsumexp

import factorgraph as fg


def _logistic(seed=3, N=40, D=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    y = (rng.random(N) < 1 / (1 + np.exp(-X @ np.array([1.0, -2.0, 0.5])))).astype(float)
    return X, y


def test_site_terms_match_the_same_block_in_a_model():
    """Laplace on prior N(0, 2I) × logistic sites equals fg.infer with a Laplace handler on the same model."""
    X, y = _logistic()
    with fg.Model("logistic") as m:
        n = fg.plate("n", len(y))
        w = fg.mv_gaussian("w", mean=0.0, precision=0.5, dim=3)
        fg.bernoulli_logit("y", logit=fg.inner(X, w, plates=[n]), observed=y, method="quadrature")
    ref = fg.infer(m, handlers={"w": fg.Laplace()})
    r = fg.approximate([fg.site("logistic", X, labels=y)], np.zeros(3), fg.Laplace(), prior=(0.0, 0.5))
    np.testing.assert_allclose(r.posterior.mean(), ref.posterior("w").mean(), atol=1e-8)
    np.testing.assert_allclose(r.posterior.cov(), ref.posterior("w").cov(), atol=1e-8)
    assert r.elbo == pytest.approx(ref.elbo, abs=1e-6)
    # the same target as a plain log density (a vector prior mean and a full precision matrix)
    def logp(W):
        W = np.atleast_2d(W)
        u = W @ X.T
        return (stats.multivariate_normal(np.zeros(3), 2 * np.eye(3)).logpdf(W)
                + (y * u + log_expit(-u)).sum(1))

    plain = fg.approximate(logp, np.zeros(3), fg.Laplace(), vectorized=True)
    full = fg.approximate([fg.site("logistic", X, labels=y)], np.zeros(3), fg.Laplace(),
                          prior=(np.zeros(3), 0.5 * np.eye(3)))
    np.testing.assert_allclose(plain.posterior.mean(), full.posterior.mean(), atol=1e-6)
    assert plain.elbo == pytest.approx(full.elbo, abs=1e-6)


def test_laplace_sites_under_a_flat_prior_with_aikl():
    """A flat prior with Laplace sites on w itself and on Kw (the sparse robust kernel regression set-up): the
    AI bound dominates the Gaussian one, and both lie below log Z computed on a grid."""
    rng = np.random.default_rng(0)
    K = np.array([[1.0, 0.3], [0.3, 1.0], [0.5, -0.2]])
    yy = K @ np.array([0.5, -0.3]) + 0.1 * rng.normal(size=3)
    sites = [fg.site("laplace", np.eye(2), scale=0.5), fg.site("laplace", K, location=yy, scale=0.3)]
    r = fg.approximate(sites, np.zeros(2), fg.AIKL(base="gen_normal", theta=1.5, learn_theta=False))
    g = np.linspace(-4, 4, 801)
    W = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    lp = (-np.log(1.0) - np.abs(W).sum(1) / 0.5 - 2 * np.log(2 * 0.5)
          - np.abs(yy[None] - W @ K.T).sum(1) / 0.3 - 3 * np.log(2 * 0.3))
    log_z = logsumexp(lp) + 2 * np.log(g[1] - g[0])
    assert r.info["gaussian_bound"] - 1e-3 <= r.elbo <= log_z + 1e-3
    # fg.projection_log_expectation: log E_q[f(xᵀw)] per row, here for the Gaussian stage against sampling
    q = r.info["gaussian"]
    ple = fg.projection_log_expectation(q, K, lambda U: -np.abs(U - yy[:, None]))
    draws = q.sample(200_000, np.random.default_rng(1)) @ K.T
    np.testing.assert_allclose(ple, np.log(np.exp(-np.abs(draws - yy)).mean(0)), atol=5e-3)


def test_site_and_site_terms_reject_bad_input_by_name():
    X = np.ones((4, 2))
    with pytest.raises(fg.ModelError, match="kind must be one of"):
        fg.site("gaussian", X)
    with pytest.raises(fg.ModelError, match="matrix"):
        fg.site("logistic", np.ones(3))
    with pytest.raises(fg.ModelError, match="labels must be in"):
        fg.site("logistic", X, labels=[0, 1, 2, 1])
    with pytest.raises(fg.ModelError, match="labels must be in"):
        fg.site("probit", X, labels=[0, 1, 1, 1])
    with pytest.raises(fg.ModelError, match="one value per row"):
        fg.site("laplace", X, location=[1.0, 2.0])
    with pytest.raises(fg.ModelError, match="scale"):
        fg.site("cauchy", X, scale=-1.0)
    with pytest.raises(fg.ModelError, match="not labels"):
        fg.site("laplace", X, labels=1.0)
    with pytest.raises(fg.ModelError, match="not a location"):
        fg.site("logistic", X, location=1.0)
    s = fg.site("student_t", X, dof=4.0)
    with pytest.raises(fg.ModelError, match="3 entries"):
        fg.approximate([s], np.zeros(3), fg.Laplace())
    with pytest.raises(fg.ModelError, match="pair"):
        fg.approximate([s], np.zeros(2), fg.Laplace(), prior=1.0)
    with pytest.raises(fg.ModelError, match="precision"):
        fg.approximate([s], np.zeros(2), fg.Laplace(), prior=(0.0, np.ones((3, 3))))
    with pytest.raises(fg.ModelError, match="fg.site"):
        fg.approximate([s, "x"], np.zeros(2), fg.Laplace())
    with pytest.raises(fg.ModelError, match="prior= goes with"):
        fg.approximate(lambda w: 0.0, np.zeros(2), fg.Laplace(), prior=(0.0, 1.0))
    with pytest.raises(fg.ModelError, match="grad must be None"):
        fg.approximate([s], np.zeros(2), fg.Laplace(), grad=lambda w: w)


def test_softmax_bounds_bound_the_monte_carlo_reference():
    rng = np.random.default_rng(0)
    m, v = rng.normal(size=(6, 5)), np.full((6, 5), 0.8)
    est, se = fg.expected_log_sum_exp(m, v, n_samples=40_000, seed=1)
    assert est.shape == se.shape == (6,) and np.all(se > 0) and np.all(se < 1e-2)
    plain = logsumexp(m[:, None] + np.sqrt(v)[:, None] * rng.normal(size=(6, 200_000, 5)), axis=-1).mean(1)
    np.testing.assert_allclose(est, plain, atol=0.01)
    for method in ("tilted", "log", "quadratic", "bohning", "adaptive"):
        b = fg.softmax_bound(m, v, method)
        assert b.shape == (6,) and np.all(b >= est - 4 * se), method
    assert np.all(fg.softmax_bound(m, v, "tilted") <= fg.softmax_bound(m, v, "log") + 1e-12)
    # a single row and broadcasting of a scalar variance
    one, _ = fg.expected_log_sum_exp(m[0], 0.8, n_samples=1000, seed=np.random.default_rng(2))
    assert one.shape == () and np.isfinite(one)
    with pytest.raises(fg.ModelError, match="method must be one of"):
        fg.softmax_bound(m, v, "probit")
    with pytest.raises(fg.ModelError, match="var"):
        fg.softmax_bound(m, -v)
    with pytest.raises(fg.ModelError, match="K ≥ 2"):
        fg.softmax_bound([1.0], [1.0])
    with pytest.raises(fg.ModelError, match="seed"):
        fg.expected_log_sum_exp(m, v, seed=-1)
    with pytest.raises(fg.ModelError, match="n_samples"):
        fg.expected_log_sum_exp(m, v, n_samples=0)
