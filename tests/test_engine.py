"""Engine: published Infer.NET results, exact evidence, monotone ELBO, fusion, schedules."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import betaln, gammaln
from scipy.stats import multivariate_normal

import factorgraph as fg
from distributions import Dirichlet

from .conjugate_models import ALL


# ---------------------------------------------------------------------------------- Infer.NET
def test_infernet_gaussian_chain():
    """τ ~ Gam(1, 1), μ ~ N(0, 1/10), x ~ N(μ, 1/τ), y = 0.5 ~ N(x, 1); 60 iterations."""
    with fg.Model("a") as m:
        tau = fg.gamma("tau", shape=1.0, rate=1.0)
        mu = fg.gaussian("mu", mean=0.0, precision=10.0)
        x = fg.gaussian("x", mean=mu, precision=tau)
        fg.gaussian("y", mean=x, precision=1.0, observed=0.5)
    r = fg.infer(m, max_iter=60, tol=None)
    t = r.posterior("tau")
    assert r.n_iter == 60
    assert t.mean() == pytest.approx(1.1525907, abs=2e-6)
    assert t.expected_stats()[1] == pytest.approx(-0.2269629, abs=2e-6)
    assert r.posterior("mu").mean() == pytest.approx(0.0254115, abs=2e-6)
    assert r.elbo == pytest.approx(-1.5888991, abs=2e-6)


def test_infernet_gaussian_mean_and_precision():
    """μ ~ N(0, var 100), τ ~ Gam(1, 1), data [5, 7]: the published fixed point to 1e-9."""
    with fg.Model("b") as m:
        n = fg.plate("n", 2)
        mu = fg.gaussian("mu", mean=0.0, variance=100.0)
        tau = fg.gamma("tau", shape=1.0, rate=1.0)
        fg.gaussian("x", mean=mu, precision=tau, plates=[n], observed=[5.0, 7.0])
    r = fg.infer(m, max_iter=1000, tol=None, param_tol=1e-14)
    assert r.converged
    q, t = r.posterior("mu"), r.posterior("tau")
    assert q.mean() == pytest.approx(5.9603207170807826, abs=1e-9)
    assert q.var() == pytest.approx(0.66132138200164436, abs=1e-9)
    assert t.shape == pytest.approx(2.0, abs=1e-12)
    assert t.rate == pytest.approx(2.6628958274937107, abs=1e-9)


def test_infernet_dirichlet_categorical():
    with fg.Model("c") as m:
        pi = fg.dirichlet("pi", concentration=np.ones(4))
        fg.categorical("x", probs=pi, observed=2)
    r = fg.infer(m)
    np.testing.assert_allclose(r.posterior("pi").expected_stats()[0],
                               [-2.0833333, -2.0833333, -1.0833333, -2.0833333], atol=1e-7)
    assert r.elbo == pytest.approx(-1.3862944, abs=1e-7)


# ---------------------------------------------------------------------------------- exact evidence
@pytest.mark.parametrize("fused", [True, False])
def test_exact_evidence_linear_gaussian(fused):
    """w ~ N(μ₀, Σ₀), y ~ N(Xw, τ⁻¹I) with τ known: ELBO = log N(y | Xμ₀, XΣ₀Xᵀ + τ⁻¹I)."""
    rng = np.random.default_rng(3)
    N, D, tau = 25, 4, 3.0
    X = rng.normal(size=(N, D))
    y = X @ rng.normal(size=D) + rng.normal(size=N) / np.sqrt(tau)
    mu0 = rng.normal(size=D)
    A = rng.normal(size=(D, D))
    S0 = A @ A.T + np.eye(D)
    with fg.Model("exact") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=mu0, covariance=S0)
        z = fg.inner(X, w, plates=[n])
        fg.gaussian("y", mean=z if fused else z + 0.0, precision=tau, plates=[n], observed=y)
    r = fg.infer(m)
    exact = multivariate_normal(X @ mu0, X @ S0 @ X.T + np.eye(N) / tau).logpdf(y)
    assert r.elbo == pytest.approx(exact, abs=1e-9)
    assert bool(r.notes) == fused  # the fused path says so
    post_cov = np.linalg.inv(np.linalg.inv(S0) + tau * X.T @ X)
    np.testing.assert_allclose(r.posterior("w").cov(), post_cov, atol=1e-12)


def test_exact_evidence_dirichlet_categorical():
    rng = np.random.default_rng(4)
    alpha = np.array([0.5, 1.0, 2.0])
    labels = rng.integers(0, 3, 40)
    with fg.Model("dc") as m:
        n = fg.plate("n", 40)
        theta = fg.dirichlet("theta", concentration=alpha)
        fg.categorical("c", probs=theta, plates=[n], observed=labels)
    r = fg.infer(m)
    counts = np.bincount(labels, minlength=3)
    lb = lambda a: gammaln(a).sum() - gammaln(a.sum())  # noqa: E731
    assert r.elbo == pytest.approx(lb(alpha + counts) - lb(alpha), abs=1e-10)
    assert isinstance(r.posterior("theta"), Dirichlet)
    np.testing.assert_allclose(r.posterior("theta").concentration, alpha + counts)


def test_exact_evidence_beta_bernoulli():
    flips = np.array([1, 0, 0, 1, 1, 1, 0, 1], dtype=bool)
    with fg.Model("bb") as m:
        n = fg.plate("n", flips.size)
        p = fg.beta("p", alpha=2.0, beta=3.0)
        fg.bernoulli("coin", probs=p, plates=[n], observed=flips)
    r = fg.infer(m)
    h = flips.sum()
    assert r.elbo == pytest.approx(betaln(2 + h, 3 + flips.size - h) - betaln(2, 3), abs=1e-10)


# ---------------------------------------------------------------------------------- monotone ELBO
@pytest.mark.parametrize("name", sorted(ALL))
def test_elbo_never_decreases(name):
    m = ALL[name](np.random.default_rng(5))
    r = fg.infer(m, max_iter=150, tol=1e-12)
    tr = r.elbo_trace
    assert np.all(np.isfinite(tr))
    drops = np.diff(tr)
    assert np.all(drops >= -1e-9 * np.maximum(1.0, np.abs(tr[1:]))), f"{name}: ELBO fell by {-drops.min():.3g}"
    assert not any("decreased" in w for w in r.warnings)
    assert r.converged or "not converged" in r.warnings[-1]


def test_batched_plates_equal_a_loop():
    rng = np.random.default_rng(6)
    data = rng.normal(size=(8, 3)) + np.array([0.0, 3.0, -2.0])
    with fg.Model("batched") as m:
        n, g = fg.plate("n", 8), fg.plate("g", 3)
        mu = fg.gaussian("mu", 0.0, precision=0.1, plates=[g])
        fg.gaussian("x", mean=mu, precision=2.0, plates=[n, g], observed=data)
    rb = fg.infer(m)
    for j in range(3):
        with fg.Model("single") as m1:
            n = fg.plate("n", 8)
            mu = fg.gaussian("mu", 0.0, precision=0.1)
            fg.gaussian("x", mean=mu, precision=2.0, plates=[n], observed=data[:, j])
        r1 = fg.infer(m1)
        assert rb.posterior("mu").mean()[j] == pytest.approx(float(r1.posterior("mu").mean()), abs=1e-12)
        assert rb.posterior("mu").var()[j] == pytest.approx(float(r1.posterior("mu").var()), abs=1e-12)


def test_fused_and_unfused_regression_agree():
    rf = fg.infer(ALL["regression_fused_ard"](np.random.default_rng(7)), max_iter=300, tol=1e-13)
    ru = fg.infer(ALL["regression_unfused_ard"](np.random.default_rng(7)), max_iter=300, tol=1e-13)
    assert rf.notes and not any("fused" in n for n in ru.notes)
    assert rf.elbo == pytest.approx(ru.elbo, rel=1e-10)
    np.testing.assert_allclose(rf.posterior("w").mean(), ru.posterior("w").mean(), atol=1e-8)


def test_missing_values_drop_out():
    """Missing entries are marginalised out of the likelihood (not imputed): no posterior, and the fit is
    the fit of the observed entries alone."""
    m = ALL["missing_values"](np.random.default_rng(8))
    r = fg.infer(m, max_iter=2000, tol=None, param_tol=1e-13)
    with pytest.raises(KeyError):
        r.posterior("x")
    x = m.variables["x"].value[m.variables["x"].mask]
    with fg.Model() as ref:
        n = fg.plate("n", len(x))
        mu = fg.gaussian("mu", 0.0, precision=0.1)
        tau = fg.gamma("tau", 2.0, 2.0)
        fg.gaussian("x", mean=mu, precision=tau, plates=[n], observed=x)
    r2 = fg.infer(ref, max_iter=2000, tol=None, param_tol=1e-13)
    assert r.elbo == pytest.approx(r2.elbo, abs=1e-10)
    assert r.posterior("mu").mean() == pytest.approx(r2.posterior("mu").mean(), abs=1e-10)


def test_mixture_recovers_clusters():
    rng = np.random.default_rng(9)
    centers = np.array([[-6.0, 0.0], [6.0, 0.0], [0.0, 7.0], [0.0, -7.0], [7.0, 7.0]])
    lab = rng.integers(0, 5, 400)
    X = centers[lab] + rng.normal(size=(400, 2))
    with fg.Model("gmm") as m:
        n, k, d = fg.plate("n", 400), fg.plate("k", 5), fg.plate("d", 2)
        pi = fg.dirichlet("pi", concentration=np.ones(5))
        mus = fg.gaussian("mus", 0.0, precision=1e-2, plates=[k, d])
        taus = fg.gamma("taus", 1.0, 1.0, plates=[k, d])
        z = fg.categorical("z", probs=pi, plates=[n])
        fg.gaussian("x", mean=mus[z], precision=taus[z], plates=[n, d], observed=X)
    r = fg.infer(m, max_iter=500, tol=1e-10, seed=0)
    assert _ari(lab, r.posterior("z").probs.argmax(-1)) >= 0.95


def _ari(a, b):
    """Adjusted Rand index of two labelings."""
    _, ai = np.unique(a, return_inverse=True)
    _, bi = np.unique(b, return_inverse=True)
    table = np.zeros((ai.max() + 1, bi.max() + 1))
    np.add.at(table, (ai, bi), 1)
    comb = lambda x: x * (x - 1) / 2  # noqa: E731
    s = comb(table).sum()
    sa, sb = comb(table.sum(1)).sum(), comb(table.sum(0)).sum()
    expected = sa * sb / comb(len(a))
    return (s - expected) / (0.5 * (sa + sb) - expected)


def test_init_and_schedule_are_respected():
    m = ALL["gaussian_mean_precision"](np.random.default_rng(10))
    order = []
    r = fg.infer(m, schedule=["tau", "mu"], max_iter=3, tol=None,
                 callbacks=[lambda it, L, eng: order.append(it)])
    assert r.n_iter == 3 and order == [1, 2, 3]
    with pytest.warns(fg.ConvergenceWarning, match="a callback stopped the run at iteration 2"):
        stop = fg.infer(m, callbacks=[lambda it, L, eng: it >= 2])
    assert stop.n_iter == 2 and not stop.converged
    own = fg.infer(m, callbacks=[lambda it, L, eng: "converged" if it >= 2 else None])
    assert own.n_iter == 2 and own.converged and not own.warnings


def _lda(seed: int = 0):
    rng = np.random.default_rng(seed)
    words = rng.integers(0, 6, size=(5, 8))
    with fg.Model("lda") as m:
        k, doc, w = fg.plate("k", 2), fg.plate("doc", 5), fg.plate("w", 8)
        phi = fg.dirichlet("phi", np.full(6, 0.5), plates=[k])
        theta = fg.dirichlet("theta", np.ones(2), plates=[doc])
        z = fg.categorical("z", theta, plates=[doc, w], categories=k)
        fg.categorical("words", phi[z], plates=[doc, w], observed=words)
    return m


def test_initialised_variables_are_updated_after_the_selectors():
    """Variables given in ``init`` come last in the default order, after a mixture's selectors, so every other
    update of the first sweep uses them: with q(φ) and q(θ) given, the tokens' z goes first (before, φ went first
    and its start was overwritten from z's random start unused)."""
    from distributions import Dirichlet

    rng = np.random.default_rng(3)
    orders, bounds = [], []
    for scale in (1.0, 50.0):
        init = {"phi": Dirichlet(scale * rng.gamma(1.0, 1.0, (2, 6))), "theta": Dirichlet(np.ones((5, 2)))}
        with pytest.warns(fg.ConvergenceWarning):
            r = fg.infer(_lda(), init=init, max_iter=1, tol=None,
                         callbacks=[lambda it, L, eng: orders.append([v.name for v in eng.c.order])])
        bounds.append(r.elbo)
    assert orders[0] == ["z", "phi", "theta"]
    assert abs(bounds[0] - bounds[1]) > 1e-3  # the given q(φ) shapes the first sweep
    with pytest.warns(fg.ConvergenceWarning):
        fg.infer(_lda(), init={"z": np.full((5, 8, 2), 0.5)}, max_iter=1, tol=None,
                 callbacks=[lambda it, L, eng: orders.append([v.name for v in eng.c.order])])
    assert orders[-1][-1] == "z"  # a given selector goes last too


def test_dirichlet_init_takes_concentrations():
    from distributions import Dirichlet

    lam = np.random.default_rng(4).gamma(100.0, 0.01, (2, 6))
    with pytest.warns(fg.ConvergenceWarning):
        a = fg.infer(_lda(), init={"phi": lam}, max_iter=2, tol=None)
    with pytest.warns(fg.ConvergenceWarning):
        b = fg.infer(_lda(), init={"phi": Dirichlet(lam)}, max_iter=2, tol=None)
    assert a.elbo == b.elbo
    for bad in [np.ones((3, 6)), -lam, np.full((2, 6), np.nan)]:
        with pytest.raises(fg.ModelError, match=r"init of .phi. must be positive finite concentrations of shape \(2,"):
            fg.infer(_lda(), init={"phi": bad})


def test_compare_table():
    rng = np.random.default_rng(11)
    r1 = fg.infer(ALL["regression_fused_ard"](rng))
    r2 = fg.infer(ALL["regression_fused_shared"](np.random.default_rng(11)))
    table = fg.compare({"ard": r1, "shared": r2})
    assert table.probability.sum() == pytest.approx(1.0)
    assert table.log_bayes_factor.max() == 0.0
    assert "ard" in str(table) and "lower bound" in str(table)
