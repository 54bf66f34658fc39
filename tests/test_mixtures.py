"""models.gaussian_mixture (full and diagonal covariances) and its predictive density."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as st

import factorgraph as fg
from factorgraph import models


def _two_clusters(seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.multivariate_normal([0, 0], [[1, 0.6], [0.6, 1]], 150),
                           rng.multivariate_normal([4, 3], [[0.5, -0.2], [-0.2, 0.3]], 100)])


def _mvn_logpdf(x, mu, lam):
    """log N(x | μ, Λ⁻¹) for x (M, D) against draws μ (S, D), Λ (S, D, D): shape (M, S)."""
    r = x[:, None, :] - mu
    return (0.5 * np.linalg.slogdet(lam)[1] - 0.5 * x.shape[1] * np.log(2 * np.pi)
            - 0.5 * np.einsum("msi,sij,msj->ms", r, lam, r))


def test_full_predictive_is_the_expected_density_under_q():
    X = _two_clusters()
    r = models.gaussian_mixture(X, 2, "full")
    p = models.mixture_predictive(r, "full")
    q, w = r.posterior("theta"), r.posterior("pi").mean()
    mus, lams = q.sample(100_000, rng=1)
    x = np.array([[0.5, 0.2], [3.0, 3.0], [-2.0, 1.0]])
    mc = sum(w[k] * np.exp(_mvn_logpdf(x, mus[:, k], lams[:, k])).mean(1) for k in range(2))
    np.testing.assert_allclose(p.logpdf(x), np.log(mc), atol=5e-3)


def test_diag_predictive_is_the_expected_density_under_q():
    X = _two_clusters()
    r = models.gaussian_mixture(X, 2, "diag")
    p = models.mixture_predictive(r, "diag")
    mu = r.posterior("mu").sample(100_000, rng=2)
    tau = r.posterior("tau").sample(100_000, rng=3)
    w = r.posterior("pi").mean()
    x = np.array([[0.5, 0.2], [3.0, 3.0]])
    dens = np.exp(-0.5 * (x[:, None, None, :] - mu) ** 2 * tau + 0.5 * np.log(tau / (2 * np.pi))).prod(-1).mean(1)
    np.testing.assert_allclose(p.logpdf(x), np.log(dens @ w), atol=5e-3)


def test_one_component_full_mixture_has_the_exact_normal_wishart_evidence():
    X = _two_clusters()
    N, D = X.shape
    r = models.gaussian_mixture(X, 1, "full")
    m0, b0, nu0, V0 = X.mean(0), 1.0, float(D), np.cov(X.T)
    xb = X.mean(0)
    bN, nuN = b0 + N, nu0 + N
    mN = (b0 * m0 + N * xb) / bN
    VN = V0 + (X - xb).T @ (X - xb) + b0 * N / bN * np.outer(xb - m0, xb - m0)
    mu, L = np.zeros(D), np.eye(D)
    inv = np.linalg.inv
    ref = (st.multivariate_normal(mu, inv(L)).logpdf(X).sum()
           + st.multivariate_normal(m0, inv(b0 * L)).logpdf(mu) + st.wishart(nu0, inv(V0)).logpdf(L)
           - st.multivariate_normal(mN, inv(bN * L)).logpdf(mu) - st.wishart(nuN, inv(VN)).logpdf(L))
    assert abs(r.elbo - ref) < 1e-9
    # the predictive of one component is the Student-t of the normal–Wishart posterior; it integrates to 1
    p = models.mixture_predictive(r, "full")
    g = np.linspace(-8, 12, 401)
    grid = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    np.testing.assert_allclose(p.pdf(grid).sum() * (g[1] - g[0]) ** 2, 1.0, atol=2e-3)


@pytest.mark.parametrize("covariance", ["full", "diag"])
def test_evidence_prefers_more_than_one_component(covariance):
    X = _two_clusters(1)
    results = {f"K={K}": models.gaussian_mixture(X, K, covariance) for K in (1, 2)}
    assert fg.compare(results).best() == "K=2"
    assert all(np.all(np.diff(r.elbo_trace) > -1e-8) for r in results.values())


def test_bad_arguments():
    X = _two_clusters()
    with pytest.raises(fg.ModelError, match="covariance must be 'full' or 'diag'"):
        models.gaussian_mixture_model(X, 2, "spherical")
    with pytest.raises(fg.ModelError, match="K must be a positive integer"):
        models.gaussian_mixture_model(X, 0)
    with pytest.raises(fg.ModelError, match="X must be a matrix"):
        models.gaussian_mixture_model(X[:, 0], 2)


def _topics_corpus(n_docs=200, length=60, K=4, V=40, seed=0):
    """The generator of demos/lda_topics.py: K topics of V/K words each (plus leakage), θ_d ~ Dirichlet(0.3)."""
    rng = np.random.default_rng(seed)
    phi = np.full((K, V), 0.02 / V)
    for k in range(K):
        phi[k, (V // K) * k:(V // K) * (k + 1)] += rng.dirichlet(np.full(V // K, 2.0)) * 0.98
    phi /= phi.sum(1, keepdims=True)
    theta = rng.dirichlet(np.full(K, 0.3), n_docs)
    z = np.minimum((rng.random((n_docs, length, 1)) > np.cumsum(theta, 1)[:, None, :]).sum(-1), K - 1)
    return np.minimum((rng.random((n_docs, length, 1)) > np.cumsum(phi[z], -1)).sum(-1), V - 1)


def test_lda_default_start_reaches_the_best_optimum_from_every_seed():
    """One word per label: the selector starts from random near-uniform topics (its update from q(φ_k) =
    Dirichlet(λ_k), λ_kv ~ Gamma(100, 0.01)).  On this corpus the k-means++ start it replaces (every token
    equally far from every prototype but its own word) left seeds 1 and 3 about 1940 nats below the optimum."""
    words = _topics_corpus()
    K, V = 4, 40
    fits = []
    for seed in range(4):
        with fg.Model("lda") as m:
            k, doc, w = fg.plate("k", K), fg.plate("doc", words.shape[0]), fg.plate("w", words.shape[1])
            phi = fg.dirichlet("phi", np.full(V, 0.5), plates=[k])
            theta = fg.dirichlet("theta", np.ones(K), plates=[doc])
            z = fg.categorical("z", theta, plates=[doc, w], categories=k)
            fg.categorical("words", phi[z], plates=[doc, w], observed=words)
        fits.append(fg.infer(m, seed=seed, max_iter=1000, tol=1e-9))
    best = max(f.elbo for f in fits)
    assert all(f.elbo > best - 1e-3 for f in fits), [f.elbo for f in fits]
    assert all(f.n_iter < 200 for f in fits), [f.n_iter for f in fits]


def _three_clusters(seed=0):
    rng = np.random.default_rng(seed)
    return rng.permutation(np.r_[rng.normal(-5, 1, 100), rng.normal(0, 1, 100), rng.normal(5, 1, 100)])


def test_distinct_prior_means_name_the_components():
    """Components with distinct, informative prior means (μ_k ~ N(m0_k, 1), m0 = (5, −5, 0)): z starts from its
    update given the priors, so for every seed component k takes the cluster near m0_k (a k-means++ start
    orders the clusters as the seed falls); one start runs, as every other would repeat it.  With the same
    prior for each component (the default) the start is k-means++, drawn from the seed."""
    x = _three_clusters()
    m0 = np.array([5.0, -5.0, 0.0])
    for seed in (0, 1, 2, 3):
        r = models.mixture("gaussian", 3, x, prior={"m0": m0, "l0": 1.0}, seed=seed)
        assert r.starts == {"z": "priors"}
        np.testing.assert_allclose(r.posterior("mu").mean(), m0, atol=0.3)
    assert any(n.startswith("1 start of n_init=4") for n in r.notes), r.notes
    assert models.mixture("gaussian", 3, x, n_init=1).starts == {"z": "drawn"}


def test_priors_far_from_the_data_name_the_drawn_clusters():
    """Prior means (40, 50, 60) far from clusters at −5, 0 and 5: the update given the priors sends every row
    to the component at 40, so the start is k-means++ with its clusters named after the priors they agree with
    best — the lowest cluster to the lowest prior mean — and the components keep the priors' order."""
    x = _three_clusters()
    for seed in (0, 1, 2):
        r = models.mixture("gaussian", 3, x, prior={"m0": np.array([40.0, 50.0, 60.0]), "l0": 4.0}, seed=seed,
                           n_init=1)
        assert r.starts == {"z": "drawn, named after the priors"}
        assert any("left a component without a row" in n for n in r.notes)
        assert np.all(np.diff(r.posterior("mu").mean()) > 0)


def test_a_bernoulli_selector_between_constant_components_starts_from_them():
    """x_n ~ N(±3, 1) chosen by a Bernoulli s_n (constants gated by fg.select): the components differ, so s starts
    from its update given them, and the fit is the exact posterior of s after one sweep."""
    rng = np.random.default_rng(3)
    truth = rng.random(40) < 0.4
    x = np.where(truth, 3.0, -3.0) + rng.normal(size=40)
    with fg.Model("two-constants") as m:
        n = fg.plate("n", 40)
        s = fg.bernoulli("s", 0.5, plates=[n])
        fg.gaussian("x", fg.select([-3.0, 3.0], s), 1.0, plates=[n], observed=x)
    r = fg.infer(m, seed=0)
    assert r.starts == {"s": "priors"}
    p = r.posterior("s").mean()
    lr = np.exp(-0.5 * (x - 3.0) ** 2) / (np.exp(-0.5 * (x - 3.0) ** 2) + np.exp(-0.5 * (x + 3.0) ** 2))
    np.testing.assert_allclose(p, lr, rtol=1e-12)


def test_gaussian_mixture_keeps_the_best_of_its_starts():
    """n_init=3 returns the best of the single starts from seeds 5, 6 and 7, and a note with their bounds."""
    X = _two_clusters()
    single = [models.gaussian_mixture(X, 3, "full", seed=s, n_init=1).elbo for s in (5, 6, 7)]
    r = models.gaussian_mixture(X, 3, "full", seed=5, n_init=3)
    assert r.elbo == pytest.approx(max(single), abs=1e-8)
    assert any(n.startswith("best of 3 starts (seeds 5…7; ELBOs") for n in r.notes), r.notes
    with pytest.raises(fg.ModelError, match="n_init"):
        models.gaussian_mixture(X, 2, n_init=1.5)
