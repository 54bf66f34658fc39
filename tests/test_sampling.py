"""fg.sample_prior (forward draws, against analytic prior moments) and result.sample (against q's moments)."""

import numpy as np
import pytest

import factorgraph as fg

S = 40_000


def _close(draws, value, sd, k=5.0):
    """A Monte Carlo mean within k standard errors of its expectation."""
    assert abs(np.mean(draws) - value) < k * sd / np.sqrt(len(draws)), (np.mean(draws), value)


def test_prior_moments_of_a_hierarchical_gaussian():
    with fg.Model("gm") as m:
        n = fg.plate("n", 4)
        mu = fg.gaussian("mu", mean=1.0, precision=4.0)
        tau = fg.gamma("tau", shape=3.0, rate=2.0)
        fg.gaussian("x", mean=mu, precision=tau, plates=[n], observed=np.zeros(4))
    d = fg.sample_prior(m, S, seed=1)
    assert d["mu"].shape == (S,) and d["tau"].shape == (S,) and d["x"].shape == (S, 4)
    _close(d["mu"], 1.0, 0.5)
    np.testing.assert_allclose(d["mu"].var(), 0.25, rtol=0.03)
    _close(d["tau"], 1.5, np.sqrt(0.75))
    np.testing.assert_allclose(d["tau"].var(), 3 / 4, rtol=0.05)
    # x = mu + noise of precision tau: Var x = 1/4 + E[1/tau] = 1/4 + rate/(shape − 1) = 1.25
    _close(d["x"][:, 2], 1.0, np.sqrt(1.25))
    np.testing.assert_allclose(d["x"].var(0), 1.25, rtol=0.06)
    # the observations share mu: Cov(x_i, x_j) = Var mu
    np.testing.assert_allclose(np.cov(d["x"][:, 0], d["x"][:, 1])[0, 1], 0.25, atol=0.03)
    # the data are ignored, and the seed fixes the draws
    np.testing.assert_array_equal(fg.sample_prior(m, 10, seed=3)["x"], fg.sample_prior(m, 10, seed=3)["x"])


def test_prior_of_a_regression_evaluates_the_inner_product():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5, 2))
    with fg.Model("lr") as m:
        n = fg.plate("n", 5)
        w = fg.mv_gaussian("w", mean=np.array([1.0, -1.0]), precision=np.array([[2.0, 0.5], [0.5, 1.0]]))
        eta = fg.inner(X, w, plates=[n])
        fg.gaussian("y", mean=eta, precision=4.0, plates=[n], observed=np.zeros(5))
    d = fg.sample_prior(m, S, seed=2)
    cov = np.linalg.inv([[2.0, 0.5], [0.5, 1.0]])
    assert d["w"].shape == (S, 2)
    np.testing.assert_allclose(np.cov(d["w"].T), cov, atol=0.03)
    np.testing.assert_allclose(d[eta.name], d["w"] @ X.T)
    np.testing.assert_allclose(d["y"].mean(0), X @ [1.0, -1.0], atol=0.05)
    np.testing.assert_allclose(d["y"].var(0), np.einsum("nd,de,ne->n", X, cov, X) + 0.25, rtol=0.05)


def test_prior_of_a_mixture_respects_the_gate():
    with fg.Model("mix") as m:
        n, k = fg.plate("n", 3), fg.plate("k", 2)
        pi = fg.dirichlet("pi", np.array([2.0, 6.0]))
        mus = fg.gaussian("mus", mean=np.array([-5.0, 5.0]), precision=100.0, plates=[k])
        z = fg.categorical("z", pi, plates=[n])
        fg.gaussian("x", mean=mus[z], precision=1.0, plates=[n], observed=np.zeros(3))
    d = fg.sample_prior(m, S, seed=3)
    assert d["z"].shape == (S, 3) and d["pi"].shape == (S, 2) and d["mus"].shape == (S, 2)
    _close(d["pi"][:, 1], 0.75, np.sqrt(0.75 * 0.25 / 9))  # Beta(6, 2) marginal
    _close(d["z"].ravel(), 0.75, np.sqrt(0.75 * 0.25))  # P(z = 1) = E[pi_1]
    sel = np.take_along_axis(d["mus"], d["z"], axis=1)  # the chosen component's mean, per draw and row
    resid = d["x"] - sel
    _close(resid.ravel(), 0.0, 1.0)
    np.testing.assert_allclose(resid.var(), 1.0, rtol=0.03)


def test_prior_of_an_indexed_hierarchy():
    county = np.array([0, 0, 1, 2, 2, 2])
    with fg.Model("h") as m:
        n, c = fg.plate("n", 6), fg.plate("c", 3)
        a = fg.gaussian("a", mean=0.0, precision=1.0, plates=[c])
        b = fg.gaussian("b", mean=0.0, precision=1.0)
        fg.gaussian("y", mean=a[county] + 2.0 * b, precision=100.0, plates=[n], observed=np.zeros(6))
    d = fg.sample_prior(m, S, seed=4)
    resid = d["y"] - d["a"][:, county] - 2.0 * d["b"][:, None]
    np.testing.assert_allclose(resid.std(), 0.1, rtol=0.03)
    C = np.cov(d["y"].T)  # rows of one county share a: Cov = 1 + 4 Var b; different counties: 4 Var b
    assert C[0, 1] == pytest.approx(5.0, rel=0.05) and C[0, 2] == pytest.approx(4.0, rel=0.05)


def test_prior_of_count_and_binary_likelihoods():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(4, 2)) * 0.3
    with fg.Model("counts") as m:
        n = fg.plate("n", 4)
        lam = fg.gamma("lam", shape=4.0, rate=2.0)
        fg.poisson("k", rate=lam, plates=[n], observed=np.ones(4))
        p = fg.beta("p", 2.0, 3.0)
        fg.bernoulli("s", probs=p, plates=[n], observed=np.ones(4))
        w = fg.mv_gaussian("w", 0.0, precision=1.0, dim=2)
        fg.bernoulli_logit("t", logit=fg.inner(X, w, plates=[n]), observed=np.ones(4))
    d = fg.sample_prior(m, S, seed=5)
    _close(d["k"].ravel(), 2.0, np.sqrt(2.0 + 1.0))  # E = E[λ] = 2; Var = E[λ] + Var λ = 3
    np.testing.assert_allclose(d["k"].var(), 3.0, rtol=0.05)
    _close(d["s"].ravel(), 0.4, np.sqrt(0.24))
    np.testing.assert_allclose(np.corrcoef(d["s"][:, 0], d["s"][:, 1])[0, 1], 0.04 / 0.24 * 1 / 1, atol=0.02)
    _close(d["t"].ravel(), 0.5, 0.5)  # a symmetric logit: P(t = 1) = 1/2
    assert set(np.unique(d["t"])) == {0.0, 1.0}


def test_prior_of_a_normal_gamma_regression():
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    with fg.Model("ng") as m:
        n = fg.plate("n", 3)
        w = fg.gaussian_gamma("w", mean=0.0, precision=1.0, shape=6.0, rate=5.0, dim=2)
        fg.gaussian("y", mean=fg.inner(X, w, plates=[n]), precision=w.tau, plates=[n], observed=np.zeros(3))
    d = fg.sample_prior(m, S, seed=6)
    _close(d["w.tau"], 1.2, np.sqrt(6 / 25))
    # w | τ ~ N(0, (τI)⁻¹): Var w = E[1/τ] = rate/(shape − 1) = 1;  y | τ ~ N(0, (xᵀx + 1)/τ)
    np.testing.assert_allclose(d["w"].var(0), 1.0, rtol=0.05)
    np.testing.assert_allclose(d["y"].var(0), (np.sum(X**2, 1) + 1.0) * 1.0, rtol=0.05)


def test_unknown_draws_are_rejected():
    with fg.Model("g") as m:
        fg.gaussian("x")
    with pytest.raises(fg.ModelError, match="draws"):
        fg.sample_prior(m, 0)


# ------------------------------------------------------------------------------------ posterior draws
def test_posterior_draws_match_q():
    rng = np.random.default_rng(0)
    data = rng.normal(2.0, 0.5, size=30)
    X = rng.normal(size=(30, 3))
    with fg.Model("post") as m:
        n = fg.plate("n", 30)
        mu = fg.gaussian("mu", mean=0.0, precision=1e-2)
        tau = fg.gamma("tau", shape=1.0, rate=1.0)
        fg.gaussian("x", mean=mu, precision=tau, plates=[n], observed=data)
        w = fg.mv_gaussian("w", 0.0, precision=1.0, dim=3)
        fg.gaussian("y", mean=fg.inner(X, w, plates=[n]), precision=tau, plates=[n], observed=X @ [1.0, 0.5, -1.0])
    r = fg.infer(m)
    d = r.sample(S, seed=1)
    assert set(d) == {"mu", "tau", "w"}
    for name in ("mu", "tau"):
        q = r.posterior(name)
        _close(d[name], float(q.mean()), float(q.std()))
        np.testing.assert_allclose(d[name].var(), q.var(), rtol=0.05)
    qw = r.posterior("w")
    assert d["w"].shape == (S, 3)
    np.testing.assert_allclose(d["w"].mean(0), qw.mean(), atol=5 * np.sqrt(qw.var().max() / S))
    np.testing.assert_allclose(np.cov(d["w"].T), qw.cov(), atol=0.05 * np.abs(qw.cov()).max())


def test_posterior_draws_are_joint_for_a_class_plated_block():
    rng = np.random.default_rng(7)
    N, D, K = 60, 2, 3
    X = np.c_[np.ones(N), rng.normal(size=N)]
    y = np.argmax(X @ rng.normal(size=(D, K)) * 2 + rng.gumbel(size=(N, K)), axis=1)
    with fg.Model("multiclass") as m:
        n, k = fg.plate("n", N), fg.plate("k", K)
        W = fg.mv_gaussian("W", mean=0.0, precision=1.0, plates=[k], dim=D)
        fg.categorical_softmax("y", logits=fg.inner(X, W, plates=[n]), over=k, observed=y)
    r = fg.infer(m, handlers={"W": fg.MVI("lr", n_samples=200)})
    d = r.sample(20_000, seed=2)
    assert d["W"].shape == (20_000, K, D)
    flat = d["W"].reshape(20_000, K * D)
    C = r.joint["W"].cov()
    np.testing.assert_allclose(np.cov(flat.T), C, atol=0.05 * np.abs(C).max())
    # the cross-class blocks are not zero: the draws are joint, not per-class marginals
    assert np.abs(C[:D, D:]).max() > 0.1 * np.abs(C).max()


def test_prior_and_posterior_of_scale_priors():
    y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
    sigma = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
    with fg.Model("eight schools") as m:
        j = fg.plate("school", 8)
        mu = fg.gaussian("mu", 0.0, sd=5.0)
        tau = fg.half_normal("tau", scale=5.0)
        theta = fg.gaussian("theta", mean=mu, sd=tau, plates=[j])
        fg.gaussian("y", mean=theta, sd=sigma, plates=[j], observed=y)
    d = fg.sample_prior(m, S, seed=8)
    # σ ~ half-normal(5): E σ = 5√(2/π), E σ² = 25; theta − mu has variance E σ² = 25
    _close(d["tau"], 5 * np.sqrt(2 / np.pi), 5 * np.sqrt(1 - 2 / np.pi))
    np.testing.assert_allclose((d["theta"] - d["mu"][:, None]).var(), 25.0, rtol=0.05)
    np.testing.assert_allclose(d["y"].var(0), 25.0 + 25.0 + sigma**2, rtol=0.06)
    r = fg.infer(m, fg.NCVMP())
    q = r.posterior("tau")
    post = r.sample(S, seed=9)["tau"]
    _close(post, float(q.mean()), float(q.std()))
    t = r.summary()
    assert t.loc["tau", "exact"]
    np.testing.assert_allclose(t.loc["tau", ["3%", "97%"]].to_numpy(float), np.quantile(post, [0.03, 0.97]),
                               rtol=0.03)


def test_prior_with_a_bernoulli_selector_and_selected_constants():
    with fg.Model("spike") as m:
        n, k = fg.plate("n", 3), fg.plate("k", 2)
        on = fg.bernoulli("on", 0.3, plates=[n])
        mus = fg.gaussian("mus", mean=np.array([0.0, 10.0]), precision=1e4, plates=[k])
        fg.gaussian("x", mean=mus[on], precision=fg.select(np.array([100.0, 1.0]), on), plates=[n],
                    observed=np.zeros(3))
    d = fg.sample_prior(m, S, seed=10)
    on_ = d["on"].astype(bool)
    _close(on_.ravel(), 0.3, np.sqrt(0.21))
    np.testing.assert_allclose(d["x"][~on_].std(), 0.1, rtol=0.05)  # off: N(0, 1/100)
    np.testing.assert_allclose(d["x"][on_].mean(), 10.0, atol=0.05)  # on: N(10, 1)
    np.testing.assert_allclose(d["x"][on_].std(), 1.0, rtol=0.05)


def test_wishart_and_normal_wishart_forward_draws_have_their_moments():
    V = np.array([[2.0, 0.5], [0.5, 1.0]])  # inverse scale: E[Λ] = ν V⁻¹
    nu, S = 6.0, 40000
    with fg.Model("wishart") as m:
        n = fg.plate("n", 3)
        L = fg.wishart("L", dof=nu, scale=V)
        fg.mv_gaussian("x", mean=np.zeros(2), precision=L, plates=[n])
        theta = fg.gaussian_wishart("theta", mean=np.array([1.0, -1.0]), beta=2.0, dof=nu, scale=V)
        fg.mv_gaussian("y", mean=theta, plates=[n])
    d = fg.sample_prior(m, draws=S, seed=0)
    assert d["L"].shape == (S, 2, 2) and d["x"].shape == (S, 3, 2) and d["theta.precision"].shape == (S, 2, 2)
    lam = nu * np.linalg.inv(V)
    # Var Λ_ij = ν(Σ_ij² + Σ_ii Σ_jj) with Σ = V⁻¹ = E[Λ]/ν
    se = np.sqrt((lam**2 + np.outer(np.diag(lam), np.diag(lam))) / nu / S)
    assert np.all(np.abs(d["L"].mean(0) - lam) < 4 * se)
    assert np.all(np.abs(d["theta.precision"].mean(0) - lam) < 4 * se)
    # x | Λ ~ N(0, Λ⁻¹): Cov x = E[Λ⁻¹] = V / (ν − D − 1); μ ~ N(m₀, (β Λ)⁻¹) has mean m₀
    cov = np.einsum("sni,snj->ij", d["x"], d["x"]) / (3 * S)
    np.testing.assert_allclose(cov, V / (nu - 3.0), atol=0.03)
    np.testing.assert_allclose(d["theta"].mean(0), [1.0, -1.0], atol=4 * np.sqrt(0.5 * 0.5 / S))
    # y | θ ~ N(μ, Λ⁻¹): Cov y = Cov μ + E[Λ⁻¹] = (1/β + 1)·V/(ν − D − 1)
    yc = d["y"] - d["y"].mean((0, 1))
    np.testing.assert_allclose(np.einsum("sni,snj->ij", yc, yc) / (3 * S), 1.5 * V / (nu - 3.0), atol=0.05)
