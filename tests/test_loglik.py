"""Pointwise log-likelihoods (factorgraph.posterior.loglik) against scipy.stats at fixed parameter draws, per
factor type."""

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit, logsumexp, softmax

import factorgraph as fg
from factorgraph.posterior.loglik import pointwise_log_likelihood

S, N = 3, 5
rng = np.random.default_rng(7)


def _ll(m, draws, name):
    out = pointwise_log_likelihood(m, draws)[name]
    assert out.shape[0] == S
    return out


def test_gaussian_with_gamma_precision_and_missing_entries():
    y = rng.normal(size=N)
    mask = np.array([True, True, False, True, True])
    with fg.Model() as m:
        n = fg.plate("n", N)
        mu = fg.gaussian("mu", 0.0, precision=1.0)
        tau = fg.gamma("tau", 2.0, 1.0)
        fg.gaussian("y", mu, precision=tau, plates=[n], observed=y, mask=mask)
    d = {"mu": rng.normal(size=S), "tau": rng.gamma(2.0, size=S)}
    ll = _ll(m, d, "y")
    ref = stats.norm.logpdf(y, d["mu"][:, None], d["tau"][:, None] ** -0.5)
    np.testing.assert_allclose(ll[:, mask], ref[:, mask], rtol=1e-12)
    assert np.all(np.isnan(ll[:, ~mask]))


def test_gaussian_with_a_scale_prior_and_an_indexed_mean():
    g = np.array([0, 1, 1, 0, 1])
    y = rng.normal(size=N)
    with fg.Model() as m:
        n, c = fg.plate("n", N), fg.plate("c", 2)
        a = fg.gaussian("a", 0.0, precision=1.0, plates=[c])
        sigma = fg.half_cauchy("sigma", 1.0)
        fg.gaussian("y", a[g], sd=sigma, plates=[n], observed=y)
    d = {"a": rng.normal(size=(S, 2)), "sigma": rng.gamma(2.0, size=S)}
    ref = stats.norm.logpdf(y, d["a"][:, g], d["sigma"][:, None])
    np.testing.assert_allclose(_ll(m, d, "y"), ref, rtol=1e-12)


def test_normal_gamma_regression():
    X = rng.normal(size=(N, 2))
    y = rng.normal(size=N)
    with fg.Model() as m:
        n = fg.plate("n", N)
        w = fg.gaussian_gamma("w", np.zeros(2), 1.0, shape=2.0, rate=1.0)
        fg.gaussian("y", fg.inner(X, w, plates=[n]), precision=w.tau, plates=[n], observed=y)
    d = {"w": rng.normal(size=(S, 2)), "w.tau": rng.gamma(2.0, size=S)}
    ref = stats.norm.logpdf(y, d["w"] @ X.T, d["w.tau"][:, None] ** -0.5)
    np.testing.assert_allclose(_ll(m, d, "y"), ref, rtol=1e-12)


def test_student_t():
    y = rng.normal(size=N) * 3
    with fg.Model() as m:
        n = fg.plate("n", N)
        mu = fg.gaussian("mu", 0.0, precision=1.0)
        tau = fg.gamma("tau", 2.0, 1.0)
        fg.student_t("y", mu, tau, dof=3.5, plates=[n], observed=y)
    d = {"mu": rng.normal(size=S), "tau": rng.gamma(2.0, size=S)}
    ref = stats.t.logpdf(y, 3.5, d["mu"][:, None], d["tau"][:, None] ** -0.5)
    np.testing.assert_allclose(_ll(m, d, "y"), ref, rtol=1e-12)
    # a learned ν (result.hyper) is the one used
    ref = stats.t.logpdf(y, 1.7, d["mu"][:, None], d["tau"][:, None] ** -0.5)
    np.testing.assert_allclose(pointwise_log_likelihood(m, d, {"y": {"dof": 1.7}})["y"], ref, rtol=1e-12)


@pytest.mark.parametrize("precision", ["matrix", "gamma"])
def test_mv_gaussian(precision):
    D = 3
    y = rng.normal(size=(N, D))
    L = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 1.5]])
    with fg.Model() as m:
        n = fg.plate("n", N)
        mu = fg.mv_gaussian("mu", np.zeros(D), precision=np.eye(D))
        if precision == "matrix":
            fg.mv_gaussian("y", mu, precision=L, plates=[n], observed=y)
        else:
            a = fg.gamma("a", 2.0, 1.0)
            fg.mv_gaussian("y", mu, precision=a, plates=[n], observed=y)
    d = {"mu": rng.normal(size=(S, D)), "a": rng.gamma(2.0, size=S)}
    ll = _ll(m, d, "y")
    for s in range(S):
        cov = np.linalg.inv(L) if precision == "matrix" else np.eye(D) / d["a"][s]
        np.testing.assert_allclose(ll[s], stats.multivariate_normal.logpdf(y, d["mu"][s], cov), rtol=1e-12)


def test_mv_gaussian_with_a_constant_mean_and_a_gamma_precision():
    """A constant mean gives residuals without a draw axis; the Gamma precision's draws still broadcast."""
    D = 3
    y = rng.normal(size=(N, D))
    with fg.Model() as m:
        n = fg.plate("n", N)
        a = fg.gamma("a", 2.0, 1.0)
        fg.mv_gaussian("y", np.ones(D), precision=a, plates=[n], observed=y)
    d = {"a": rng.gamma(2.0, size=S)}
    ll = _ll(m, d, "y")
    for s in range(S):
        ref = stats.multivariate_normal.logpdf(y, np.ones(D), np.eye(D) / d["a"][s])
        np.testing.assert_allclose(ll[s], ref, rtol=1e-12)


def test_bernoulli_and_bernoulli_logit():
    y = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    X = rng.normal(size=(N, 2))
    with fg.Model() as m:
        n = fg.plate("n", N)
        p = fg.beta("p", 2.0, 2.0)
        fg.bernoulli("b", p, plates=[n], observed=y)
        w = fg.mv_gaussian("w", np.zeros(2), precision=np.eye(2))
        fg.bernoulli_logit("c", fg.inner(X, w, plates=[n]), observed=2 * y - 1)  # ±1 labels
    d = {"p": rng.beta(2.0, 2.0, size=S), "w": rng.normal(size=(S, 2))}
    out = pointwise_log_likelihood(m, d)
    np.testing.assert_allclose(out["b"], stats.bernoulli.logpmf(y, d["p"][:, None]), rtol=1e-12)
    np.testing.assert_allclose(out["c"], stats.bernoulli.logpmf(y, expit(d["w"] @ X.T)), rtol=1e-10)


def test_probit_and_sites():
    y = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    loc = rng.normal(size=N)
    with fg.Model() as m:
        n = fg.plate("n", N)
        x = fg.gaussian("x", 0.0, precision=1.0, plates=[n])
        fg.probit("s", x, observed=y)
        fg.laplace_site("la", x, loc, scale=0.7)
        fg.cauchy_site("ca", x, loc, scale=0.4)
        fg.student_t_site("st", x, loc, scale=0.5, dof=2.5)
    d = {"x": rng.normal(size=(S, N))}
    out = pointwise_log_likelihood(m, d)
    np.testing.assert_allclose(out["s"], stats.norm.logcdf((2 * y - 1) * d["x"]), rtol=1e-12)
    np.testing.assert_allclose(out["la"], stats.laplace.logpdf(loc, d["x"], 0.7), rtol=1e-12)
    np.testing.assert_allclose(out["ca"], stats.cauchy.logpdf(loc, d["x"], 0.4), rtol=1e-12)
    np.testing.assert_allclose(out["st"], stats.t.logpdf(loc, 2.5, d["x"], 0.5), rtol=1e-12)
    learned = pointwise_log_likelihood(m, d, {"x": {"scale": {m["la"].prior.name: 1.3}}})
    np.testing.assert_allclose(learned["la"], stats.laplace.logpdf(loc, d["x"], 1.3), rtol=1e-12)
    np.testing.assert_allclose(learned["ca"], out["ca"], rtol=1e-12)


def test_categorical_and_categorical_softmax():
    K = 3
    y = np.array([0, 2, 1, 2, 2])
    X = rng.normal(size=(N, 2))
    with fg.Model() as m:
        n, k = fg.plate("n", N), fg.plate("k", K)
        pi = fg.dirichlet("pi", np.ones(K))
        fg.categorical("z", pi, plates=[n], observed=y)
        W = fg.mv_gaussian("W", np.zeros(2), precision=np.eye(2), plates=[k])
        fg.categorical_softmax("c", fg.inner(X, W, plates=[n]), over=k, observed=y)
    d = {"pi": rng.dirichlet(np.ones(K), size=S), "W": rng.normal(size=(S, K, 2))}
    out = pointwise_log_likelihood(m, d)
    np.testing.assert_allclose(out["z"], np.log(d["pi"][:, y]), rtol=1e-12)
    p = softmax(np.einsum("nd,skd->snk", X, d["W"]), axis=-1)
    np.testing.assert_allclose(out["c"], np.log(np.take_along_axis(p, y[None, :, None], -1)[..., 0]), rtol=1e-10)


def test_poisson_and_poisson_log_with_exposure():
    y = np.array([0.0, 3.0, 1.0, 7.0, 2.0])
    e = np.array([1.0, 2.0, 0.5, 3.0, 1.0])
    X = rng.normal(size=(N, 2))
    with fg.Model() as m:
        n = fg.plate("n", N)
        lam = fg.gamma("lam", 2.0, 1.0)
        fg.poisson("p", lam, exposure=e, plates=[n], observed=y)
        w = fg.mv_gaussian("w", np.zeros(2), precision=np.eye(2))
        fg.poisson_log("q", fg.inner(X, w, plates=[n]), exposure=e, observed=y)
    d = {"lam": rng.gamma(2.0, size=S), "w": rng.normal(size=(S, 2))}
    out = pointwise_log_likelihood(m, d)
    np.testing.assert_allclose(out["p"], stats.poisson.logpmf(y, e * d["lam"][:, None]), rtol=1e-12)
    np.testing.assert_allclose(out["q"], stats.poisson.logpmf(y, e * np.exp(d["w"] @ X.T)), rtol=1e-10)


def test_binomial_and_binomial_logit():
    n_tr = np.array([3, 5, 1, 8, 2])
    y = np.array([1.0, 5.0, 0.0, 4.0, 2.0])
    X = rng.normal(size=(N, 2))
    with fg.Model() as m:
        n = fg.plate("n", N)
        p = fg.beta("p", 2.0, 2.0)
        fg.binomial("b", n_tr, p, plates=[n], observed=y)
        w = fg.mv_gaussian("w", np.zeros(2), precision=np.eye(2))
        fg.binomial_logit("c", n_tr, fg.inner(X, w, plates=[n]), observed=y)
    d = {"p": rng.beta(2.0, 2.0, size=S), "w": rng.normal(size=(S, 2))}
    out = pointwise_log_likelihood(m, d)
    np.testing.assert_allclose(out["b"], stats.binom.logpmf(y, n_tr, d["p"][:, None]), rtol=1e-12)
    np.testing.assert_allclose(out["c"], stats.binom.logpmf(y, n_tr, expit(d["w"] @ X.T)), rtol=1e-10)


def test_multinomial():
    y = np.array([[1, 0, 2], [0, 3, 0], [1, 1, 1], [2, 0, 1], [0, 0, 3]], float)
    with fg.Model() as m:
        n = fg.plate("n", N)
        pi = fg.dirichlet("pi", np.ones(3))
        fg.multinomial("y", 3, pi, plates=[n], observed=y)
    d = {"pi": rng.dirichlet(np.ones(3), size=S)}
    ll = _ll(m, d, "y")
    for s in range(S):
        np.testing.assert_allclose(ll[s], stats.multinomial.logpmf(y, 3, d["pi"][s]), rtol=1e-12)


def test_gated_mixture_marginalises_each_rows_label():
    K = 2
    y = rng.normal(size=(N, 2)) * 3
    with fg.Model() as m:
        n, k, j = fg.plate("n", N), fg.plate("k", K), fg.plate("j", 2)
        pi = fg.dirichlet("pi", np.ones(K))
        mus = fg.gaussian("mus", 0.0, precision=0.1, plates=[k])
        taus = fg.gamma("taus", 2.0, 1.0, plates=[k])
        z = fg.categorical("z", pi, plates=[n], categories=k)
        fg.gaussian("y", mus[z], precision=taus[z], plates=[n, j], observed=y)  # two coordinates share a row's label
    d = {"pi": rng.dirichlet(np.ones(K), size=S), "mus": rng.normal(size=(S, K)),
         "taus": rng.gamma(2.0, size=(S, K)), "z": rng.integers(0, K, size=(S, N))}
    ll = _ll(m, d, "y")
    assert ll.shape == (S, N)  # one entry per row: the selector's plates
    comp = stats.norm.logpdf(y[None, :, :, None], d["mus"][:, None, None, :],
                             d["taus"][:, None, None, :] ** -0.5).sum(2)  # (S, N, K)
    ref = logsumexp(comp + np.log(d["pi"])[:, None, :], axis=-1)
    np.testing.assert_allclose(ll, ref, rtol=1e-12)


@pytest.mark.parametrize("ard", [False, True])
def test_gated_gamma_precision_of_an_mv_gaussian_mixture(ard):
    """mv_gaussian(mu[z], alpha[z]): Λ = α_k I, or diag(α_k) with alpha plated over (k, d) (ARD)."""
    K, D = 2, 3
    y = rng.normal(size=(N, D))
    with fg.Model() as m:
        n, k, dp = fg.plate("n", N), fg.plate("k", K), fg.plate("d", D)
        pi = fg.dirichlet("pi", np.ones(K))
        z = fg.categorical("z", pi, plates=[n], categories=k)
        mu = fg.mv_gaussian("mu", np.zeros(D), precision=0.1, plates=[k])
        alpha = fg.gamma("alpha", 2.0, 1.0, plates=[k, dp] if ard else [k])
        fg.mv_gaussian("y", mu[z], precision=alpha[z], plates=[n], observed=y)
    d = {"pi": rng.dirichlet(np.ones(K), size=S), "mu": rng.normal(size=(S, K, D)),
         "alpha": rng.gamma(2.0, size=(S, K, D) if ard else (S, K)), "z": rng.integers(0, K, size=(S, N))}
    ll = _ll(m, d, "y")
    a = d["alpha"] if ard else np.repeat(d["alpha"][..., None], D, -1)
    comp = np.stack([[stats.multivariate_normal.logpdf(y, d["mu"][s, j], np.diag(1.0 / a[s, j])) for j in range(K)]
                     for s in range(S)], 0)  # (S, K, N)
    np.testing.assert_allclose(ll, logsumexp(comp + np.log(d["pi"])[:, :, None], axis=1), rtol=1e-12)


def test_an_observed_selector_keeps_its_one_term():
    y = rng.normal(size=N)
    lab = np.array([0, 1, 1, 0, 1])
    with fg.Model() as m:
        n, k = fg.plate("n", N), fg.plate("k", 2)
        pi = fg.dirichlet("pi", np.ones(2))
        mus = fg.gaussian("mus", 0.0, precision=0.1, plates=[k])
        z = fg.categorical("z", pi, plates=[n], categories=k, observed=lab)
        fg.gaussian("y", mus[z], precision=1.0, plates=[n], observed=y)
    d = {"pi": rng.dirichlet(np.ones(2), size=S), "mus": rng.normal(size=(S, 2))}
    out = pointwise_log_likelihood(m, d)
    np.testing.assert_allclose(out["y"], stats.norm.logpdf(y, d["mus"][:, lab], 1.0), rtol=1e-12)
    np.testing.assert_allclose(out["z"], np.log(d["pi"][:, lab]), rtol=1e-12)


def test_an_unsupported_observed_factor_is_named_with_the_supported_ones():
    with fg.Model() as m:
        n = fg.plate("n", N)
        b = fg.gamma("b", 1.0, 1.0)
        fg.gamma("g", 2.0, b, plates=[n], observed=np.ones(N))
    with pytest.raises(fg.ModelError, match=r"no log density for the observed Gamma factor of 'g'.*'Bernoulli'"):
        pointwise_log_likelihood(m, {"b": np.ones(S)})


def test_full_covariance_mixture_with_a_normal_wishart_block():
    from factorgraph.models.gaussian_mixtures import gaussian_mixture_model

    K, D = 2, 2
    X = rng.normal(size=(N, D))
    m = gaussian_mixture_model(X, K, "full")
    A = rng.normal(size=(S, K, D, D))
    lam = A @ np.swapaxes(A, -1, -2) + np.eye(D)
    d = {"pi": rng.dirichlet(np.ones(K), size=S), "theta": rng.normal(size=(S, K, D)), "theta.precision": lam,
         "z": rng.integers(0, K, size=(S, N))}
    ll = _ll(m, d, "x")
    comp = np.stack([[stats.multivariate_normal.logpdf(X, d["theta"][s, k], np.linalg.inv(lam[s, k]))
                      for k in range(K)] for s in range(S)], 0)  # (S, K, N)
    ref = logsumexp(comp + np.log(d["pi"])[:, :, None], axis=1)
    np.testing.assert_allclose(ll, ref, rtol=1e-10)


def test_result_sample_of_a_normal_wishart_block_is_joint():
    from factorgraph.models.gaussian_mixtures import gaussian_mixture

    X = np.r_[rng.normal(-2, 1, (20, 2)), rng.normal(2, 0.5, (20, 2))]
    r = gaussian_mixture(X, 2, "full")
    d = r.sample(50, 1)
    assert d["theta"].shape == (50, 2, 2) and d["theta.precision"].shape == (50, 2, 2, 2)
    np.testing.assert_allclose(d["theta.precision"], np.swapaxes(d["theta.precision"], -1, -2))


def test_hidden_markov_model_sequences_sum_their_label_paths():
    import itertools

    K, T = 2, 4
    y = np.array([[0.0, 3.0, 5.0, 1.0], [2.0, 2.0, 0.0, 0.0]])
    lengths = np.array([4, 3])
    with fg.Model("hmm") as m:
        n, t, k = fg.plate("seq", 2), fg.plate("t", T), fg.plate("k", K)
        pi = fg.dirichlet("pi", np.ones(K))
        A = fg.dirichlet("A", np.ones(K), plates=[k])
        lam = fg.gamma("lam", 1.0, 1.0, plates=[k])
        z = fg.markov_chain("z", initial=pi, transition=A, plates=[n, t], lengths=lengths)
        mask = np.arange(T)[None, :] < lengths[:, None]
        mask[0, 1] = False  # a missing step: no emission there
        fg.poisson("y", lam[z], plates=[n, t], observed=y, mask=mask)
    d = {"pi": rng.dirichlet(np.ones(K), size=S), "A": rng.dirichlet(np.ones(K), size=(S, K)),
         "lam": rng.gamma(2.0, 2.0, size=(S, K)), "z": rng.integers(0, K, size=(S, 2, T))}
    ll = _ll(m, d, "y")
    assert ll.shape == (S, 2)  # one entry per sequence
    ref = np.zeros((S, 2))
    for s in range(S):
        for i in range(2):
            L = lengths[i]
            paths = []
            for path in itertools.product(range(K), repeat=L):
                lp = np.log(d["pi"][s, path[0]]) + sum(np.log(d["A"][s, path[j - 1], path[j]]) for j in range(1, L))
                lp += sum(stats.poisson.logpmf(y[i, j], d["lam"][s, path[j]]) for j in range(L) if mask[i, j])
                paths.append(lp)
            ref[s, i] = logsumexp(paths)
    np.testing.assert_allclose(ll, ref, rtol=1e-10)
    from factorgraph.posterior.loglik import observed_plates

    assert [p.name for p in observed_plates(m, "y")] == ["seq"]


def test_a_nan_log_likelihood_is_named_not_passed_on():
    with fg.Model() as m:
        n = fg.plate("n", N)
        tau = fg.gamma("tau", 2.0, 1.0)
        fg.gaussian("y", 0.0, precision=tau, plates=[n], observed=np.zeros(N))
    with pytest.raises(fg.ModelError, match=r"log p\(y\[0\] \| θ\) is NaN at draw 1 \(5 entries"):
        with np.errstate(invalid="ignore"):
            pointwise_log_likelihood(m, {"tau": np.array([1.0, -1.0, 2.0])})
