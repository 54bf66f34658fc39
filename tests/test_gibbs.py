"""fg.Gibbs against closed-form posteriors, its conditionals against direct formulas, FFBS against
forward–backward, determinism across chain counts, bad input."""

from __future__ import annotations

import warnings

import arviz as az
import numpy as np
import pytest
from scipy import stats

import factorgraph as fg
from schedules.compile import compile_model
from schedules.gibbs_sampler import GibbsChain, _GibbsRules, chain_seeds

GIBBS = dict(draws=1000, burn=200, chains=4, seed=3)


def _within(result, name, mean, var, k=4.0):
    """Every scalar's sample mean within k MC standard errors (sd/√ESS) of ``mean``, and its sample variance within
    k MC standard errors of ``var`` (those of the mean of the squared deviations (x − x̄)²)."""
    x = np.asarray(result.draws[name], float)
    flat = x.reshape(x.shape[:2] + (-1,))
    mean, var = np.broadcast_to(mean, x.shape[2:]).reshape(-1), np.broadcast_to(var, x.shape[2:]).reshape(-1)
    for i in range(flat.shape[-1]):
        y = flat[..., i]
        se_mean = y.std() / np.sqrt(float(az.ess(y, method="mean")))
        d2 = (y - y.mean()) ** 2
        se_var = d2.std() / np.sqrt(float(az.ess(d2, method="mean")))
        assert abs(y.mean() - mean[i]) <= k * se_mean, (name, i, y.mean(), mean[i], se_mean)
        assert abs(y.var(ddof=1) - var[i]) <= k * se_var, (name, i, y.var(), var[i], se_var)


def _normal_gamma_model(y, m0=0.0, p0=0.1, a0=2.0, b0=1.0):
    with fg.Model("mean-precision") as m:
        n = fg.plate("n", len(y))
        mu = fg.gaussian("mu", m0, precision=p0)
        tau = fg.gamma("tau", a0, b0)
        fg.gaussian("y", mu, precision=tau, plates=[n], observed=y)
    return m


def test_gaussian_mean_and_gamma_precision_match_quadrature():
    """μ ~ N(0, 10), τ ~ Gam(2, 1), y_i ~ N(μ, 1/τ): the posterior moments of μ and τ by quadrature on a fine grid."""
    y = np.random.default_rng(0).normal(1.0, 0.7, 15)
    r = fg.infer(_normal_gamma_model(y), algorithm=fg.Gibbs(**GIBBS))
    mu = np.linspace(-1.0, 3.0, 801)[:, None]
    tau = np.linspace(1e-3, 8.0, 1601)[None, :]
    logp = (stats.norm.logpdf(mu, 0.0, np.sqrt(10.0)) + stats.gamma.logpdf(tau, 2.0, scale=1.0)
            + 0.5 * len(y) * np.log(tau) - 0.5 * tau * ((y[:, None, None] - mu) ** 2).sum(0))
    w = np.exp(logp - logp.max())
    w /= w.sum()
    for name, g in (("mu", mu), ("tau", tau)):
        m1 = float((w * g).sum())
        _within(r, name, m1, float((w * g**2).sum()) - m1**2)


def test_beta_bernoulli():
    y = (np.random.default_rng(1).random(40) < 0.3).astype(float)
    with fg.Model("beta-bernoulli") as m:
        n = fg.plate("n", len(y))
        p = fg.beta("p", 2.0, 3.0)
        fg.bernoulli("y", p, plates=[n], observed=y)
    r = fg.infer(m, algorithm=fg.Gibbs(**GIBBS))
    post = stats.beta(2.0 + y.sum(), 3.0 + len(y) - y.sum())
    _within(r, "p", post.mean(), post.var())


def test_dirichlet_categorical():
    alpha = np.array([1.0, 2.0, 0.5, 1.5])
    z = np.random.default_rng(2).integers(0, 4, 30)
    with fg.Model("dirichlet-categorical") as m:
        n = fg.plate("n", len(z))
        pi = fg.dirichlet("pi", alpha)
        fg.categorical("z", pi, plates=[n], observed=z)
    r = fg.infer(m, algorithm=fg.Gibbs(**GIBBS))
    a = alpha + np.bincount(z, minlength=4)
    _within(r, "pi", a / a.sum(), a * (a.sum() - a) / (a.sum() ** 2 * (a.sum() + 1)))


def test_count_likelihoods():
    """Poisson–Gamma, binomial–Beta and multinomial–Dirichlet: the conjugate posteriors' means and variances."""
    rng = np.random.default_rng(10)
    y, k, c = rng.poisson(3.0, 25), rng.binomial(8, 0.3, 25), rng.multinomial(6, [0.2, 0.3, 0.5], 25)
    with fg.Model("counts") as m:
        n = fg.plate("n", 25)
        lam, p, pi = fg.gamma("lam", 2.0, 1.0), fg.beta("p", 1.0, 2.0), fg.dirichlet("pi", np.ones(3))
        fg.poisson("y", lam, plates=[n], observed=y)
        fg.binomial("k", 8, p, plates=[n], observed=k)
        fg.multinomial("c", 6, pi, plates=[n], observed=c)
    r = fg.infer(m, algorithm=fg.Gibbs(draws=1000, burn=50, chains=2, seed=0))
    post = stats.gamma(2.0 + y.sum(), scale=1 / (1.0 + 25))
    _within(r, "lam", post.mean(), post.var())
    post = stats.beta(1.0 + k.sum(), 2.0 + 8 * 25 - k.sum())
    _within(r, "p", post.mean(), post.var())
    a = 1.0 + c.sum(0)
    _within(r, "pi", a / a.sum(), a * (a.sum() - a) / (a.sum() ** 2 * (a.sum() + 1)))


def test_wishart_precision_known_mean():
    """Λ ~ W(ν, V⁻¹) (V the inverse scale), x_n ~ N(m, Λ⁻¹) with m known: Λ | x ~ W(ν + N, (V + S)⁻¹),
    S = Σ (x_n − m)(x_n − m)ᵀ, with E[Λ] = (ν + N)Σ and Var(Λ_ij) = (ν + N)(Σ_ij² + Σ_ii Σ_jj), Σ = (V + S)⁻¹."""
    rng = np.random.default_rng(11)
    m0 = np.array([1.0, -1.0])
    X = rng.multivariate_normal(m0, [[1.0, 0.5], [0.5, 2.0]], 40)
    with fg.Model("wishart") as m:
        n = fg.plate("n", 40)
        L = fg.wishart("L", dof=3.0, scale=np.eye(2))
        fg.mv_gaussian("x", m0, precision=L, plates=[n], observed=X)
    r = fg.infer(m, algorithm=fg.Gibbs(draws=1000, burn=50, chains=2, seed=0))
    sig = np.linalg.inv(np.eye(2) + (X - m0).T @ (X - m0))
    nu = 3.0 + 40
    _within(r, "L", nu * sig, nu * (sig**2 + np.outer(np.diag(sig), np.diag(sig))))


def _hierarchical(G=5, R=4, seed=4):
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(G), R)
    y = rng.normal(rng.normal(1.0, 1.0, G)[g], 0.8)
    with fg.Model("hierarchical") as m:
        groups, n = fg.plate("g", G), fg.plate("n", G * R)
        mu = fg.gaussian("mu", 0.0, precision=0.01)
        theta = fg.gaussian("theta", mu, precision=1.0, plates=[groups])
        fg.gaussian("y", fg.index(theta, g, plate=n), precision=1 / 0.64, plates=[n], observed=y)
    return m, g, y


def test_gaussian_hierarchical_known_scales():
    """(μ, θ) jointly Gaussian: the posterior precision Λ = prior + likelihood, mean Λ⁻¹ b."""
    m, g, y = _hierarchical()
    G = g.max() + 1
    r = fg.infer(m, algorithm=fg.Gibbs(**GIBBS))
    lam = np.zeros((G + 1, G + 1))
    lam[0, 0] = 0.01 + G * 1.0
    lam[0, 1:] = lam[1:, 0] = -1.0
    lam[1:, 1:] = np.diag(1.0 + np.bincount(g) / 0.64)
    b = np.concatenate([[0.0], np.bincount(g, weights=y) / 0.64])
    cov = np.linalg.inv(lam)
    mean = cov @ b
    _within(r, "mu", mean[0], cov[0, 0])
    _within(r, "theta", mean[1:], np.diag(cov)[1:])


def _regression(seed=5, N=30, D=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    y = X @ np.array([1.0, -0.5, 0.3]) + rng.normal(0.0, 0.5, N)
    with fg.Model("regression") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", np.zeros(D), precision=np.eye(D))
        tau = fg.gamma("tau", 2.0, 0.5)
        fg.gaussian("y", fg.inner(X, w, plates=[n]), precision=tau, plates=[n], observed=y)
    return m, X, y


def test_conditionals_equal_direct_formulas():
    """With the neighbours fixed, each conditional's natural parameters are the textbook ones: w | τ is
    N(Λ⁻¹τXᵀy, Λ⁻¹) with Λ = I + τXᵀX (η = (τXᵀy, −½Λ)); τ | w is Gam(a₀ + N/2, b₀ + ½‖y − Xw‖²); θ_g | μ, y is
    Gaussian with precision 1 + n_g/σ² and η₁ = μ + Σ y/σ²; μ | θ has precision p₀ + G and η₁ = Σ θ_g."""
    m, X, y = _regression()
    c = compile_model(m, _GibbsRules())
    chain = GibbsChain(c, np.random.default_rng(0))
    chain.start({})
    wv, tv = m.variables["w"], m.variables["tau"]
    w0, t0 = np.array([0.3, 0.1, -0.2]), 1.7
    chain.set_point(wv, w0)
    chain.set_point(tv, np.array(t0))
    eta1, eta2 = chain.conditional(wv).natural
    np.testing.assert_allclose(eta1, t0 * X.T @ y, rtol=1e-10)
    np.testing.assert_allclose(eta2, -0.5 * (np.eye(3) + t0 * X.T @ X), rtol=1e-10)
    q = chain.conditional(tv)
    np.testing.assert_allclose([q.shape, q.rate], [2.0 + len(y) / 2, 0.5 + 0.5 * np.sum((y - X @ w0) ** 2)],
                               rtol=1e-10)

    m, g, y = _hierarchical()
    c = compile_model(m, _GibbsRules())
    chain = GibbsChain(c, np.random.default_rng(0))
    chain.start({})
    mu, theta = m.variables["mu"], m.variables["theta"]
    th = np.linspace(-1.0, 1.0, 5)
    chain.set_point(mu, np.array(0.4))
    chain.set_point(theta, th)
    e1, e2 = chain.conditional(theta).natural
    np.testing.assert_allclose(e1, 0.4 + np.bincount(g, weights=y) / 0.64, rtol=1e-10)
    np.testing.assert_allclose(e2, -0.5 * (1.0 + np.bincount(g) / 0.64), rtol=1e-10)
    e1, e2 = chain.conditional(mu).natural
    np.testing.assert_allclose([e1, e2], [th.sum(), -0.5 * (0.01 + 5)], rtol=1e-10, atol=1e-12)


def test_mixture_conditionals_equal_direct_formulas():
    """A Gaussian mixture through gates, x_n ~ N(m_{z_n}, 1/τ_{z_n}), z_n ~ Cat(π), π ~ Dir(α), m_k ~ N(0, 1/p₀),
    τ_k ~ Gam(a₀, b₀), with the neighbours fixed: π | z = Dir(α + n_k); z_n | rest has log-odds
    log π_k + ½ log τ_k − ½τ_k (x_n − m_k)²; m_k | rest has precision p₀ + τ_k n_k and η₁ = τ_k Σ_{z_n=k} x_n;
    τ_k | rest = Gam(a₀ + n_k/2, b₀ + ½ Σ_{z_n=k} (x_n − m_k)²)."""
    rng = np.random.default_rng(13)
    x = rng.normal(size=12)
    alpha = np.array([1.0, 2.0, 3.0])
    with fg.Model("mixture-conditionals") as m:
        n, k = fg.plate("n", 12), fg.plate("k", 3)
        pi = fg.dirichlet("pi", alpha)
        mus = fg.gaussian("mus", 0.0, precision=0.5, plates=[k])
        taus = fg.gamma("taus", 2.0, 1.5, plates=[k])
        z = fg.categorical("z", pi, plates=[n])
        fg.gaussian("x", mus[z], precision=taus[z], plates=[n], observed=x)
    chain = GibbsChain(compile_model(m, _GibbsRules()), np.random.default_rng(0))
    chain.start({})
    V = m.variables
    p0, m0, t0 = np.array([0.2, 0.3, 0.5]), np.array([-1.0, 0.0, 1.5]), np.array([0.5, 1.0, 2.0])
    z0 = rng.integers(0, 3, 12)
    for name, value in (("pi", p0), ("mus", m0), ("taus", t0), ("z", z0)):
        chain.set_point(V[name], value)
    counts = np.bincount(z0, minlength=3)
    np.testing.assert_allclose(chain.conditional(V["pi"]).natural[0], alpha + counts - 1, rtol=1e-12)
    logits = np.log(p0) + 0.5 * np.log(t0) - 0.5 * t0 * (x[:, None] - m0) ** 2
    got = chain.conditional(V["z"]).natural[0]
    np.testing.assert_allclose(got - got[:, :1], logits - logits[:, :1], rtol=1e-10, atol=1e-12)
    e1, e2 = chain.conditional(V["mus"]).natural
    np.testing.assert_allclose(e1, t0 * np.bincount(z0, weights=x, minlength=3), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(e2, -0.5 * (0.5 + t0 * counts), rtol=1e-10)
    q = chain.conditional(V["taus"])
    np.testing.assert_allclose(q.shape, 2.0 + counts / 2, rtol=1e-12)
    np.testing.assert_allclose(q.rate, 1.5 + 0.5 * np.bincount(z0, weights=(x - m0[z0]) ** 2, minlength=3), rtol=1e-10)


def test_regression_block_update_known_noise():
    """w ~ N(0, I), y ~ N(Xw, 1/τ) with τ = 4 known: w | y = N(SτXᵀy, S), S = (I + τXᵀX)⁻¹, drawn as one block
    (so its draws are independent and carry the posterior correlations)."""
    rng = np.random.default_rng(9)
    X = rng.normal(size=(30, 3)) + np.array([2.0, 0.0, 0.0])  # correlated columns: strong posterior correlation
    y = X @ np.array([1.0, -0.5, 0.3]) + rng.normal(0.0, 0.5, 30)
    with fg.Model("regression-known-noise") as m:
        n = fg.plate("n", 30)
        w = fg.mv_gaussian("w", np.zeros(3), precision=np.eye(3))
        fg.gaussian("y", fg.inner(X, w, plates=[n]), precision=4.0, plates=[n], observed=y)
    r = fg.infer(m, algorithm=fg.Gibbs(draws=1000, burn=10, chains=2, seed=2))
    S = np.linalg.inv(np.eye(3) + 4.0 * X.T @ X)
    _within(r, "w", S @ (4.0 * X.T @ y), np.diag(S))
    corr = r.posterior("w").cov() / np.sqrt(np.outer(np.diag(S), np.diag(S)))
    np.testing.assert_allclose(corr, S / np.sqrt(np.outer(np.diag(S), np.diag(S))), atol=4 / np.sqrt(2000))
    d = r.diagnostics()
    assert (d["r_hat"] < 1.01).all() and (d["ess_bulk"] > 1500).all()


def test_mean_field_coefficients_drawn_one_at_a_time():
    """Scalar coefficients w_d on a plate inside fg.inner share every likelihood factor: each is drawn given the
    others' newest values, and the chain targets the same N(SτXᵀy, S) as the block draw."""
    rng = np.random.default_rng(9)
    X = rng.normal(size=(30, 3)) + np.array([2.0, 0.0, 0.0])
    y = X @ np.array([1.0, -0.5, 0.3]) + rng.normal(0.0, 0.5, 30)
    with fg.Model("coefficients") as m:
        n, d = fg.plate("n", 30), fg.plate("d", 3)
        w = fg.gaussian("w", 0.0, precision=1.0, plates=[d])
        fg.gaussian("y", fg.inner(X, w, plates=[n]), precision=4.0, plates=[n], observed=y)
    r = fg.infer(m, algorithm=fg.Gibbs(draws=1500, burn=100, chains=2, seed=2))
    S = np.linalg.inv(np.eye(3) + 4.0 * X.T @ X)
    _within(r, "w", S @ (4.0 * X.T @ y), np.diag(S))


def test_mixture_labels_and_weights_match_enumeration():
    """x_n ~ N(m_{z_n}, 1) with known means, z_n ~ Categorical(π), π ~ Dirichlet(1, 1): by enumerating the 2⁶
    labellings, p(z | x) ∝ B(1 + n₀, 1 + n₁) Π_n N(x_n; m_{z_n}, 1), and E[π | x] = Σ_z p(z | x) (1 + n_k)/(2 + N)."""
    import itertools

    from scipy.special import betaln

    x = np.array([-1.5, -0.3, 0.2, 0.4, 1.1, 2.0])
    means = np.array([-1.0, 1.0])
    with fg.Model("mixture") as m:
        n = fg.plate("n", len(x))
        pi = fg.dirichlet("pi", np.ones(2))
        z = fg.categorical("z", pi, plates=[n])
        fg.gaussian("x", fg.select(means, z), precision=1.0, plates=[n], observed=x)
    r = fg.infer(m, algorithm=fg.Gibbs(draws=2000, burn=100, chains=2, seed=4))
    labels = np.array(list(itertools.product([0, 1], repeat=len(x))))
    n1 = labels.sum(1)
    logp = betaln(1 + len(x) - n1, 1 + n1) + stats.norm.logpdf(x, means[labels], 1.0).sum(1)
    p = np.exp(logp - logp.max())
    p /= p.sum()
    mean1 = (p * (1 + n1) / (2 + len(x))).sum()
    second = (p * (1 + n1) * (2 + n1) / ((2 + len(x)) * (3 + len(x)))).sum()
    _within(r, "pi", np.array([1 - mean1, mean1]), second - mean1**2)
    q = (p[:, None] * labels).sum(0)
    _within(r, "z", q, q * (1 - q))


def _fixed_hmm(seed=6, N=3, T=25, K=3):
    rng = np.random.default_rng(seed)
    pi, A = rng.dirichlet(np.ones(K)), rng.dirichlet(np.ones(K) * 2, size=K)
    mu, tau = rng.normal(0.0, 1.5, K), rng.uniform(0.5, 2.0, K)
    z = np.zeros((N, T), int)
    for i in range(N):
        z[i, 0] = rng.choice(K, p=pi)
        for t in range(1, T):
            z[i, t] = rng.choice(K, p=A[z[i, t - 1]])
    y = rng.normal(mu[z], 1 / np.sqrt(tau[z]))
    with fg.Model("hmm") as m:
        n, t = fg.plate("n", N), fg.plate("t", T)
        zz = fg.markov_chain("z", initial=pi, transition=A, plates=[n, t])
        fg.gaussian("y", mean=fg.select(mu, zz), precision=fg.select(tau, zz), plates=[n, t], observed=y)
    return m


def test_ffbs_marginals_match_forward_backward():
    """With π, A and the emissions fixed, every sweep draws the paths exactly from p(z | y) by FFBS: the label
    frequencies match the forward–backward smoothed marginals within 4 binomial standard errors."""
    m = _fixed_hmm()
    exact = np.asarray(fg.infer(m).posterior("z").mean())
    r = fg.infer(m, algorithm=fg.Gibbs(draws=1000, burn=1, chains=2, seed=0))
    z = r.draws["z"].reshape((-1,) + exact.shape[:-1])
    freq = (z[..., None] == np.arange(exact.shape[-1])).mean(0)
    se = np.sqrt(np.maximum(exact * (1 - exact), 1e-4) / z.shape[0])
    assert np.all(np.abs(freq - exact) <= 4 * se + 1e-9)


def test_same_seed_same_draws_whatever_the_number_of_chains():
    m = _normal_gamma_model(np.random.default_rng(7).normal(size=10))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)  # 50 draws: too few for the ESS threshold
        one = fg.infer(m, algorithm=fg.Gibbs(draws=50, burn=10, chains=1, seed=11), progress=False)
        three = fg.infer(m, algorithm=fg.Gibbs(draws=50, burn=10, chains=3, seed=11))
        again = fg.infer(m, algorithm=fg.Gibbs(draws=50, burn=10, chains=3, seed=11))
    for name in ("mu", "tau"):
        assert np.array_equal(one.draws[name][0], three.draws[name][0])
        assert np.array_equal(three.draws[name], again.draws[name])
        assert not np.array_equal(three.draws[name][0], three.draws[name][1])
    assert [s.spawn_key for s in chain_seeds(11, 3)] == [(0,), (1,), (2,)]


def test_result_posterior_arviz_summary_and_warning():
    y = np.random.default_rng(8).normal(size=12)
    m = _normal_gamma_model(y)
    with pytest.warns(fg.ConvergenceWarning, match=r"mu \(R-hat .*tau \(R-hat"):
        r = fg.infer(m, algorithm=fg.Gibbs(draws=40, burn=5, chains=2, seed=1))
    assert not r.converged and "bulk ESS" in r.warnings[0]
    q = r.posterior("mu")
    assert isinstance(q, fg.EmpiricalPosterior)
    lo, hi = q.quantile([0.05, 0.95])
    assert lo < q.mean() < hi and q.var() > 0
    idata = r.to_arviz()
    assert idata.posterior["mu"].shape == (2, 40)
    assert "log_likelihood" in idata.groups()
    table = r.summary()
    assert {"r_hat", "ess_bulk"} <= set(table.columns) and list(table.index) == ["mu", "tau"]
    with pytest.raises(fg.ModelError, match="'g' is a Gibbs fit"):
        fg.compare({"v": fg.infer(m), "g": r})


def test_agreement_of_vmp_with_gibbs_and_inferencedata():
    m, g, y = _hierarchical()
    ref = fg.infer(m, algorithm=fg.Gibbs(**GIBBS))
    v = fg.infer(m)
    table = fg.agreement(v, ref)
    assert list(table.index) == ["mu", *(f"theta[{i}]" for i in range(5))]
    assert {"mean", "sd", "mean_ref", "sd_ref", "z", "sd_ratio", "mcse_ref"} <= set(table.columns)
    # mean field on (μ, θ) is too narrow for μ (it ignores the coupling), the means are right
    assert table.loc["mu", "sd_ratio"] < 0.97 and (table["z"] < 0.2).all()
    np.testing.assert_allclose(table["mcse_ref"], table["sd_ref"] / np.sqrt(
        [float(az.ess(ref.draws["mu"], method="mean"))] + [float(az.ess(ref.draws["theta"][..., i], method="mean"))
                                                          for i in range(5)]))
    again = fg.agreement(v, az.from_dict(posterior={k: x for k, x in ref.draws.items()}))
    np.testing.assert_allclose(again[["mean_ref", "sd_ref"]], table[["mean_ref", "sd_ref"]])
    with pytest.raises(fg.ModelError, match="reference must be a Gibbs result"):
        fg.agreement(v, v)


@pytest.mark.parametrize("field", ["draws", "burn", "chains", "thin"])
@pytest.mark.parametrize("value", [0, -3, 2.5, True, "10", None])
def test_bad_counts(field, value):
    with pytest.raises(fg.ModelError, match=f"Gibbs: {field} must be a positive integer, got {value!r}"):
        fg.Gibbs(**{field: value})


@pytest.mark.parametrize("seed", [1.5, "7", -1, True])
def test_bad_seed(seed):
    with pytest.raises(fg.ModelError, match="Gibbs: seed must be an integer"):
        fg.Gibbs(seed=seed)


def test_factor_without_conditional_is_named():
    X = np.random.default_rng(0).normal(size=(20, 2))
    with fg.Model("robust") as m:
        n = fg.plate("n", 20)
        w = fg.mv_gaussian("w", np.zeros(2), precision=np.eye(2))
        fg.student_t("y", fg.inner(X, w, plates=[n]), precision=1.0, plates=[n], observed=X[:, 0])
    with pytest.raises(fg.ModelError, match=r"Gibbs: factor 'StudentT\(y\)' \(StudentT\) has no full conditional"):
        fg.infer(m, algorithm=fg.Gibbs())
    with pytest.raises(fg.ModelError, match="handlers= is not used by Gibbs"):
        fg.infer(m, algorithm=fg.Gibbs(), handlers={"w": fg.Laplace()})
    with pytest.raises(fg.ModelError, match="callbacks= is not used by Gibbs"):
        fg.infer(_normal_gamma_model(np.zeros(3)), algorithm=fg.Gibbs(), callbacks=[print])
    with pytest.raises(fg.ModelError, match="agreement: result must be a Result"):
        fg.agreement("fit", None)


def test_hidden_markov_model_with_learned_parameters():
    """π, A, the state means and precisions drawn with the paths (FFBS): a well-separated two-state chain's states
    are recovered up to the labels' permutation, and A's persistence."""
    rng = np.random.default_rng(12)
    T, A = 150, np.array([[0.9, 0.1], [0.1, 0.9]])
    states = [0]
    for _ in range(T - 1):
        states.append(rng.choice(2, p=A[states[-1]]))
    states = np.array(states)
    y = rng.normal(np.array([-2.0, 2.0])[states], 0.7)
    with fg.Model("hmm-learned") as m:
        t, k = fg.plate("t", T), fg.plate("k", 2)
        pi, trans = fg.dirichlet("pi", np.ones(2)), fg.dirichlet("A", np.ones(2), plates=[k])
        mu, tau = fg.gaussian("mu", 0.0, precision=0.01, plates=[k]), fg.gamma("tau", 1.0, 1.0, plates=[k])
        z = fg.markov_chain("z", initial=pi, transition=trans, plates=[t])
        fg.gaussian("y", mean=mu[z], precision=tau[z], plates=[t], observed=y)
    with pytest.warns(fg.ConvergenceWarning, match="bulk ESS"):  # 400 draws of one chain: ESS below 400
        r = fg.infer(m, algorithm=fg.Gibbs(draws=400, burn=100, chains=1, seed=0))
    assert np.all(r.diagnostics()["r_hat"] < 1.05)
    hit = (np.round(r.draws["z"][0].mean(0)) == states).mean()
    assert max(hit, 1 - hit) > 0.95
    assert np.all(np.diag(r.posterior("A").mean()) > 0.75)


@pytest.mark.slow
def test_speed_benchmark_runs():
    """benchmarks/gibbs_speed.py at a small size: a Gibbs draw and a VMP sweep are timed, the chains mix and agree
    with VMP's means."""
    from benchmarks.gibbs_speed import main

    out = main(["--N", "2000", "--G", "40", "--draws", "500"])
    assert out["vmp_sweep"] > 0 and out["gibbs_draw"] > 0 and out["min_ess"] > 400
