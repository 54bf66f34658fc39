"""Expectation propagation (fg.EP): exact on linear-Gaussian models, the fixed point of an independent EP on
probit regression, site rules against quadrature, TrueSkill against the ``trueskill`` package, bad inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import betaln, log_ndtr
from scipy.stats import multivariate_normal

import factorgraph as fg
from distributions import Gaussian
from factorgraph import models
from factors.base import FactorType
from factors.gaussian import gaussian_ep
from factors.is_positive import is_positive_tilted
from factors.logistic import logistic_ep
from factors.sites import probit_ep

MODES = [False, True]  # sequential, parallel


def _gaussian_mean_model(x):
    with fg.Model("mean") as m:
        n = fg.plate("n", len(x))
        mu = fg.gaussian("mu", mean=0.3, precision=0.5)
        fg.gaussian("x", mean=mu, precision=2.0, plates=[n], observed=x)
    return m


@pytest.mark.parametrize("parallel", MODES)
def test_gaussian_mean_is_exact(parallel):
    x = np.random.default_rng(0).normal(1.0, 1.0, 20)
    r = fg.infer(_gaussian_mean_model(x), algorithm=fg.EP(parallel=parallel))
    prec = 0.5 + 2.0 * 20
    mean = (0.5 * 0.3 + 2.0 * x.sum()) / prec
    q = r.posterior("mu")
    assert abs(q.mean() - mean) < 1e-10 and abs(q.var() - 1 / prec) < 1e-12
    logz = multivariate_normal(np.full(20, 0.3), np.eye(20) / 2.0 + np.ones((20, 20)) / 0.5).logpdf(x)
    assert abs(r.elbo - logz) < 1e-10
    assert r.evidence_kind == "EP approximation" and r.converged


@pytest.mark.parametrize("parallel", MODES)
def test_regression_with_known_noise_is_exact(parallel):
    rng = np.random.default_rng(1)
    N, D, tau, alpha = 30, 3, 4.0, 0.5
    X = rng.normal(size=(N, D))
    y = X @ np.array([1.0, -2.0, 0.5]) + rng.normal(size=N) * 0.5
    with fg.Model("reg") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=np.zeros(D), precision=alpha * np.eye(D))
        fg.gaussian("y", mean=fg.inner(X, w, [n]), precision=tau, observed=y)
    r = fg.infer(m, algorithm=fg.EP(parallel=parallel))
    P = alpha * np.eye(D) + tau * X.T @ X
    q = r.posterior("w")
    np.testing.assert_allclose(q.mean(), np.linalg.solve(P, tau * X.T @ y), atol=1e-10)
    np.testing.assert_allclose(q.cov(), np.linalg.inv(P), atol=1e-12)
    logz = multivariate_normal(np.zeros(N), np.eye(N) / tau + X @ X.T / alpha).logpdf(y)
    assert abs(r.elbo - logz) < 1e-10


@pytest.mark.parametrize("parallel", MODES)
def test_sum_and_scaling_of_scalars_is_exact(parallel):
    """y = a + 2b − 1 + noise with a, b independent Gaussians (a tree: EP is exact for every marginal)."""
    with fg.Model("sum") as m:
        a = fg.gaussian("a", mean=1.0, precision=0.5)
        b = fg.gaussian("b", mean=-1.0, precision=2.0)
        fg.gaussian("y", mean=a + 2.0 * b - 1.0, precision=3.0, observed=0.7)
    r = fg.infer(m, algorithm=fg.EP(parallel=parallel))
    # joint Gaussian of (a, b, y)
    mu = np.array([1.0, -1.0, 1.0 - 2.0 - 1.0])
    C = np.diag([2.0, 0.5, 0.0])
    C[2, 2] = 2.0 + 4 * 0.5 + 1 / 3.0
    C[0, 2] = C[2, 0] = 2.0
    C[1, 2] = C[2, 1] = 2 * 0.5
    k = C[:2, 2] / C[2, 2]
    post_mean = mu[:2] + k * (0.7 - mu[2])
    post_var = np.diag(C[:2, :2]) - k * C[:2, 2]
    for i, name in enumerate("ab"):
        q = r.posterior(name)
        assert abs(q.mean() - post_mean[i]) < 1e-10 and abs(q.var() - post_var[i]) < 1e-10
    assert abs(r.elbo - multivariate_normal(mu[2], C[2, 2]).logpdf(0.7)) < 1e-10


def test_conjugate_pairs_are_exact():
    """Beta–Bernoulli, Gamma–Poisson and Dirichlet–Categorical: the exact posterior and log evidence."""
    s = np.array([1, 0, 1, 1, 0, 1, 1])
    with fg.Model("bb") as m:
        n = fg.plate("n", len(s))
        p = fg.beta("p", alpha=2.0, beta=3.0)
        fg.bernoulli("s", p, plates=[n], observed=s)
    r = fg.infer(m, algorithm=fg.EP())
    k = s.sum()
    assert np.allclose(r.posterior("p").mean(), (2 + k) / (5 + len(s)), atol=1e-12)
    assert abs(r.elbo - (betaln(2 + k, 3 + len(s) - k) - betaln(2, 3))) < 1e-10
    rv = fg.infer(m)  # VMP's bound is exact here too
    assert abs(r.elbo - rv.elbo) < 1e-9
    counts = np.array([3, 0, 2, 5])
    with fg.Model("gp") as m:
        n = fg.plate("n", 4)
        lam = fg.gamma("lam", shape=2.0, rate=1.0)
        fg.poisson("c", lam, plates=[n], observed=counts)
    r = fg.infer(m, algorithm=fg.EP())
    assert abs(r.posterior("lam").mean() - (2 + counts.sum()) / 5.0) < 1e-12
    assert abs(r.elbo - fg.infer(m).elbo) < 1e-9
    labels = np.array([0, 2, 2, 1, 2])
    with fg.Model("dc") as m:
        n = fg.plate("n", 5)
        th = fg.dirichlet("th", concentration=np.ones(3))
        fg.categorical("z", th, plates=[n], observed=labels)
    r = fg.infer(m, algorithm=fg.EP())
    np.testing.assert_allclose(r.posterior("th").mean(), (1 + np.bincount(labels, minlength=3)) / 8.0, atol=1e-12)
    assert abs(r.elbo - fg.infer(m).elbo) < 1e-9


def test_hybrid_factor_sends_its_vmp_message():
    """A Gaussian with a latent precision has no EP rule: its VMP messages make the run VMP's fixed point."""
    x = np.random.default_rng(2).normal(1.0, 2.0, 25)
    with fg.Model("hyb") as m:
        n = fg.plate("n", 25)
        mu = fg.gaussian("mu", mean=0.0, precision=0.1)
        tau = fg.gamma("tau", shape=2.0, rate=1.0)
        fg.gaussian("x", mean=mu, precision=tau, plates=[n], observed=x)
    r = fg.infer(m, algorithm=fg.EP(tol=1e-13))
    rv = fg.infer(m, tol=1e-14)
    assert abs(r.posterior("mu").mean() - rv.posterior("mu").mean()) < 1e-8
    assert abs(r.posterior("tau").mean() - rv.posterior("tau").mean()) < 1e-8
    assert any("send their VMP message" in s and "Gaussian(x)" in s for s in r.notes)


# ------------------------------------------------------------------------------------------ probit regression
def _numpy_ep(X, t, alpha, parallel, sweeps=400):
    """Plain EP for probit regression (Rasmussen & Williams 2006, Alg. 3.5, in weight space)."""
    N, D = X.shape
    nu, tau = np.zeros(N), np.zeros(N)

    def posterior():
        P = alpha * np.eye(D) + (X.T * tau) @ X
        S = np.linalg.inv(P)
        return S @ (X.T @ nu), S

    def tilted(mc, vc, ti):
        s = np.sqrt(1 + vc)
        z = ti * mc / s
        r = np.exp(-0.5 * z * z - 0.5 * np.log(2 * np.pi) - log_ndtr(z))
        return log_ndtr(z), mc + ti * vc * r / s, vc - vc**2 * r * (z + r) / (1 + vc)

    for _ in range(sweeps):
        if parallel:
            mu, S = posterior()
            v = np.einsum("nd,de,ne->n", X, S, X)
            m = X @ mu
            tc, nc = 1 / v - tau, m / v - nu
            _, mt, vt = tilted(nc / tc, 1 / tc, t)
            tau, nu = 1 / vt - tc, mt / vt - nc
        else:
            for i in range(N):
                mu, S = posterior()
                v, m = X[i] @ S @ X[i], X[i] @ mu
                tc, nc = 1 / v - tau[i], m / v - nu[i]
                _, mt, vt = tilted(nc / tc, 1 / tc, t[i])
                tau[i], nu[i] = 1 / vt - tc, mt / vt - nc
    mu, S = posterior()
    # log Z_EP = log ∫ prior Π t̃_i + Σ_i log s_i, s_i = Z_i / ∫ t̃_i N(cavity)
    v = np.einsum("nd,de,ne->n", X, S, X)
    m = X @ mu
    tc, nc = 1 / v - tau, m / v - nu
    mc, vc = nc / tc, 1 / tc
    lz = tilted(mc, vc, t)[0]
    log_int = -0.5 * np.log1p(tau * vc) + (nu**2 * vc + 2 * nu * mc - tau * mc**2) / (2 * (1 + tau * vc))
    b = X.T @ nu
    P = alpha * np.eye(D) + (X.T * tau) @ X
    log_prior_int = 0.5 * D * np.log(alpha) - 0.5 * np.linalg.slogdet(P)[1] + 0.5 * b @ np.linalg.solve(P, b)
    return mu, S, log_prior_int + np.sum(lz - log_int)


@pytest.mark.parametrize("parallel", MODES)
def test_probit_regression_is_the_ep_fixed_point(parallel):
    rng = np.random.default_rng(3)
    N, D, alpha = 40, 3, 0.7
    X = np.c_[np.ones(N), rng.normal(size=(N, D - 1))]
    y = X @ np.array([0.3, 1.5, -1.0]) + rng.normal(size=N) > 0
    r = models.probit_regression(X, y, alpha, algorithm=fg.EP(parallel=parallel, tol=1e-13, max_iter=500))
    assert r.converged
    mu, S, logz = _numpy_ep(X, 2.0 * y - 1, alpha, parallel)
    q = r.posterior("w")
    np.testing.assert_allclose(q.mean(), mu, atol=1e-8)
    np.testing.assert_allclose(q.cov(), S, atol=1e-8)
    assert abs(r.elbo - logz) < 1e-8


def test_ep_mean_is_closer_to_the_exact_posterior_than_ncvmp():
    """Ten separable, skewed points and a weak prior: the exact posterior mean by a 2-d grid."""
    rng = np.random.default_rng(0)
    N, alpha = 10, 0.1
    X = np.c_[np.ones(N), rng.exponential(1.0, N)]
    y = X[:, 1] > np.median(X[:, 1])
    g = np.linspace(-15, 15, 601)
    W = np.stack([a.ravel() for a in np.meshgrid(g, g, indexing="ij")], 1)
    lp = -0.5 * alpha * (W**2).sum(1) + log_ndtr((W @ X.T) * (2.0 * y - 1)).sum(1)
    p = np.exp(lp - lp.max())
    exact = p @ W / p.sum()
    ep = models.probit_regression(X, y, alpha).posterior("w").mean()
    nc = models.probit_regression(X, y, alpha, algorithm=fg.NCVMP(), max_iter=2000).posterior("w").mean()
    assert np.linalg.norm(ep - exact) < 0.6 * np.linalg.norm(nc - exact)


# ------------------------------------------------------------------------------------------ site rules
def _quadrature(logf, mu, v, support=(-np.inf, np.inf)):
    """log Z, mean and variance of f(d)N(d; μ, v) on a fine grid over f's support (trapezoid)."""
    sd = np.sqrt(v)
    d = np.linspace(max(mu - 14 * sd, support[0]), min(mu + 14 * sd, support[1]), 400001)
    lw = logf(d) - 0.5 * (d - mu) ** 2 / v - 0.5 * np.log(2 * np.pi * v)
    top = lw.max()
    w = np.exp(lw - top)
    h = d[1] - d[0]
    z = np.trapezoid(w, dx=h)
    mean = np.trapezoid(w * d, dx=h) / z
    return top + np.log(z), mean, np.trapezoid(w * (d - mean) ** 2, dx=h) / z


CAVITIES = [(0.3, 2.0), (-2.0, 0.5), (4.0, 9.0), (-1.0, 25.0)]


@pytest.mark.parametrize(("name", "rule", "edge", "other", "logf", "support"), [
    ("is_positive", is_positive_tilted, "x", {"out": (np.array(1.0),)}, np.zeros_like, (0.0, np.inf)),
    ("is_positive false", is_positive_tilted, "x", {"out": (np.array(0.0),)}, np.zeros_like, (-np.inf, 0.0)),
    ("probit", probit_ep, "x", {"out": (np.array(-1.0),)}, lambda d: log_ndtr(-d), (-np.inf, np.inf)),
    ("logistic", logistic_ep, "logit", {"out": (np.array(1.0),)}, lambda d: -np.logaddexp(0, -d),
     (-np.inf, np.inf)),
    ("logistic 0", logistic_ep, "logit", {"out": (np.array(0.0),)}, lambda d: -np.logaddexp(0, d),
     (-np.inf, np.inf)),
    ("gaussian", gaussian_ep, "mean", {"precision": (np.array(1.7), np.log(1.7))},
     lambda d: -0.5 * 1.7 * d * d + 0.5 * np.log(1.7 / (2 * np.pi)), (-np.inf, np.inf)),
])
def test_message_times_cavity_has_the_tilted_moments(name, rule, edge, other, logf, support):
    for mu, v in CAVITIES:
        lz, mt, vt = rule({edge: (np.array(mu), np.array(v)), **other}, {})
        ql, qm, qv = _quadrature(logf, mu, v, support)
        # the message is the projection over the cavity; times the cavity it is the projection itself
        lam, h = 1 / vt - 1 / v, mt / vt - mu / v
        prec = 1 / v + lam
        np.testing.assert_allclose([lz, (mu / v + h) / prec, 1 / prec], [ql, qm, qv], rtol=1e-7, atol=1e-9,
                                   err_msg=f"{name} at cavity N({mu}, {v})")


def test_step_site_is_stable_far_in_the_tail():
    """z = −40: log Z from log Φ without underflow, the moments of the truncated normal (mean → 0⁺, var ~ v/z²)."""
    lz, mt, vt = is_positive_tilted({"x": (np.array([-40.0, -400.0]), np.array([1.0, 1.0])),
                                     "out": (np.array([1.0, 1.0]),)}, {})
    np.testing.assert_allclose(lz, log_ndtr(np.array([-40.0, -400.0])), rtol=1e-12)
    assert np.all(np.isfinite(mt)) and np.all(vt > 0)
    # truncated N(−40, 1) to x > 0: mean ≈ 1/40, variance ≈ 1/40² (exponential tail)
    np.testing.assert_allclose([mt[0], vt[0]], [1 / 40 - 2 / 40**3, 1 / 40**2 - 5 / 40**4], rtol=1e-3)


# ------------------------------------------------------------------------------------------ TrueSkill
def _one_game(parallel):
    mu0, sigma0, beta = 25.0, 25 / 3, 25 / 6
    with fg.Model("trueskill") as m:
        p = fg.plate("players", 2)
        g = fg.plate("games", 1)
        skill = fg.gaussian("skill", mean=mu0, precision=1 / sigma0**2, plates=[p])
        w = fg.gaussian("perf_winner", mean=skill[np.array([0])], precision=1 / beta**2, plates=[g])
        lo = fg.gaussian("perf_loser", mean=skill[np.array([1])], precision=1 / beta**2, plates=[g])
        fg.is_positive("won", w - lo, observed=True)
    return fg.infer(m, algorithm=fg.EP(parallel=parallel, tol=1e-13))


@pytest.mark.parametrize("parallel", MODES)
def test_trueskill_one_game_matches_the_trueskill_package(parallel):
    import trueskill  # the test extra
    env = trueskill.TrueSkill(mu=25.0, sigma=25 / 3, beta=25 / 6, tau=0.0, draw_probability=0.0)
    (a,), (b,) = env.rate([(env.create_rating(),), (env.create_rating(),)], ranks=[0, 1])
    q = _one_game(parallel).posterior("skill")
    np.testing.assert_allclose(q.mean(), [a.mu, b.mu], atol=1e-6)
    np.testing.assert_allclose(np.sqrt(q.var()), [a.sigma, b.sigma], atol=1e-6)


def test_trueskill_evidence_is_the_win_probability():
    r = _one_game(False)
    assert abs(r.elbo - np.log(0.5)) < 1e-12  # two equal players


# ------------------------------------------------------------------------------------------ bad inputs, warnings
@pytest.mark.parametrize("damping", [-0.1, 1.0, 2.0, np.nan, "a"])
def test_bad_damping_is_refused_by_name(damping):
    with pytest.raises(fg.ModelError, match="damping"):
        fg.EP(damping=damping)


def test_bad_options_are_refused():
    with pytest.raises(fg.ModelError, match="parallel"):
        fg.EP(parallel="yes")
    with pytest.raises(fg.ModelError, match="max_iter"):
        fg.EP(max_iter=0)
    m = _gaussian_mean_model(np.zeros(3))
    with pytest.raises(fg.ModelError, match="schedule"):
        fg.infer(m, algorithm=fg.EP(), schedule=["mu"])


def test_is_positive_needs_ep():
    with fg.Model("step") as m:
        x = fg.gaussian("x", mean=0.0, precision=1.0)
        fg.is_positive("b", x, observed=True)
    with pytest.raises(fg.ModelError, match=r"fg\.EP\(\)"):
        fg.infer(m, algorithm=fg.NCVMP())
    r = fg.infer(m, algorithm=fg.EP())
    assert abs(r.posterior("x").mean() - np.sqrt(2 / np.pi)) < 1e-12  # the half-normal's mean


def test_factor_without_any_rule_is_named():
    from factorgraph.graph.nodes import FactorNode

    bare = FactorType("BareTestFactor", out=Gaussian, x=Gaussian)
    with fg.Model("bare") as m:
        x = fg.gaussian("x", mean=0.0, precision=1.0)
    m.add_factor(FactorNode(bare, "BareTestFactor(y)", {"out": np.array(1.0), "x": x}, ()))
    with pytest.raises(fg.ModelError, match=r"BareTestFactor\(y\).*no EP rule"):
        fg.infer(m, algorithm=fg.EP())


def test_unconverged_run_warns():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(30, 2))
    with pytest.warns(fg.ConvergenceWarning, match="EP did not converge"):
        r = models.probit_regression(X, X[:, 0] > 0, algorithm=fg.EP(max_iter=1))
    assert not r.converged and r.warnings


def test_compare_warns_that_ep_and_bounds_are_unlike():
    x = np.random.default_rng(5).normal(size=10)
    m = _gaussian_mean_model(x)
    with pytest.warns(UserWarning, match="not like with like"):
        c = fg.compare({"ep": fg.infer(m, algorithm=fg.EP()), "vmp": fg.infer(m)})
    assert "EP" in c.note


@pytest.mark.parametrize("parallel", MODES)
def test_a_weight_vector_beside_scalar_terms(parallel):
    """Probit with a scalar intercept b beside the weight vector w (q(w)q(b)), written through a latent
    z_n ~ N(x_nᵀw + b, 1) with is_positive(z_n) or as fg.probit: one EP fixed point, near the joint fit's."""
    rng = np.random.default_rng(6)
    N = 25
    X = rng.normal(size=(N, 2))
    y = X @ np.array([1.0, -1.0]) + 0.5 + rng.normal(size=N) > 0
    alg = fg.EP(parallel=parallel, tol=1e-12, max_iter=2000)
    ref = models.probit_regression(np.c_[X, np.ones(N)], y, 1.0, algorithm=alg)
    with fg.Model("latent") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=np.zeros(2), precision=np.eye(2))
        b = fg.gaussian("b", mean=0.0, precision=1.0)
        z = fg.gaussian("z", mean=fg.inner(X, w, [n]) + b, precision=1.0)
        fg.is_positive("y", z, observed=y)
    r = fg.infer(m, algorithm=alg)
    assert r.converged
    np.testing.assert_allclose(r.posterior("w").mean(), ref.posterior("w").mean()[:2], atol=1e-2)
    with fg.Model("bias") as m2:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=np.zeros(2), precision=np.eye(2))
        b = fg.gaussian("b", mean=0.0, precision=1.0)
        fg.probit("y", fg.inner(X, w, [n]) + b, observed=y)
    r2 = fg.infer(m2, algorithm=alg)
    np.testing.assert_allclose(r.posterior("w").mean(), r2.posterior("w").mean(), atol=1e-7)
    np.testing.assert_allclose(r.posterior("b").mean(), r2.posterior("b").mean(), atol=1e-7)
    assert abs(r.elbo - r2.elbo) < 1e-7


def test_logistic_sites_sequential_and_parallel_share_the_fixed_point():
    rng = np.random.default_rng(7)
    N = 15
    X = np.c_[np.ones(N), rng.normal(size=N)]
    y = rng.random(N) < 1 / (1 + np.exp(-(X @ np.array([0.5, 2.0]))))

    def fit(parallel):
        with fg.Model("logit") as m:
            n = fg.plate("n", N)
            w = fg.mv_gaussian("w", mean=np.zeros(2), precision=0.2 * np.eye(2))
            fg.bernoulli_logit("y", fg.inner(X, w, [n]), observed=y)
        return fg.infer(m, algorithm=fg.EP(parallel=parallel, tol=1e-13, max_iter=500))

    a, b = fit(False), fit(True)
    np.testing.assert_allclose(a.posterior("w").mean(), b.posterior("w").mean(), atol=1e-8)
    np.testing.assert_allclose(a.posterior("w").cov(), b.posterior("w").cov(), atol=1e-8)
    assert abs(a.elbo - b.elbo) < 1e-8
    g = np.linspace(-12, 12, 481)
    W = np.stack([c.ravel() for c in np.meshgrid(g, g, indexing="ij")], 1)
    lp = -0.1 * (W**2).sum(1) - np.logaddexp(0, -(W @ X.T) * (2.0 * y - 1)).sum(1)
    p = np.exp(lp - lp.max())
    exact_mean = p @ W / p.sum()
    assert np.linalg.norm(a.posterior("w").mean() - exact_mean) < 0.05 * np.linalg.norm(exact_mean)
    # the log evidence by the same grid
    logz = np.log(p.sum() * (g[1] - g[0]) ** 2) + lp.max() + np.log(0.2 / (2 * np.pi))
    assert abs(a.elbo - logz) < 0.05


def test_logistic_regression_method_ep():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(60, 2))
    y = rng.random(60) < 1 / (1 + np.exp(-(X @ np.array([1.0, -1.0]))))
    r = models.logistic_regression(X, y, method="ep")
    rv = models.logistic_regression(X, y, method="quadrature")
    assert r.algorithm == "ep" and r.evidence_kind == "EP approximation" and r.converged
    assert any("MvGaussian(w)" in s for s in r.notes)  # the prior with a learned precision runs hybrid
    np.testing.assert_allclose(r.posterior("w").mean(), rv.posterior("w").mean(), atol=0.02)


def test_trueskill_season_demo_small():
    import importlib

    out = importlib.import_module("demos.trueskill_season").main(small=True, seed=0)
    assert out["result"].converged and out["result"].algorithm == "ep"
    assert out["tau"] > 0.5 and out["inside"] >= out["players"] - 2
    np.testing.assert_allclose(out["ep_mean"], out["ts_mean"], atol=1e-6)
    np.testing.assert_allclose(out["ep_sd"], out["ts_sd"], atol=1e-6)
    assert abs(out["log_z"] - np.log(0.5)) < 1e-12


@pytest.mark.parametrize("parallel", MODES)
def test_season_sequential_and_parallel_reach_one_fixed_point(parallel):
    """A season of games (a loopy graph): both schedules settle on the same q, whose mean skill stays the
    prior's (only differences meet the data)."""
    import importlib

    demo = importlib.import_module("demos.trueskill_season")
    _, w, lo = demo.season(8, 60, 1)
    r = fg.infer(demo.trueskill_model(8, w, lo), algorithm=fg.EP(parallel=parallel, tol=1e-11, max_iter=5000))
    ref = fg.infer(demo.trueskill_model(8, w, lo), algorithm=fg.EP(parallel=not parallel, tol=1e-11, max_iter=5000))
    assert r.converged and not r.warnings
    np.testing.assert_allclose(r.posterior("skill").mean(), ref.posterior("skill").mean(), atol=1e-7)
    np.testing.assert_allclose(r.posterior("skill").var(), ref.posterior("skill").var(), atol=1e-7)
    assert abs(r.elbo - ref.elbo) < 1e-7
    assert abs(r.posterior("skill").mean().mean() - 25.0) < 0.05


def test_oscillating_parallel_updates_are_damped_with_a_warning():
    """Five copies of one constraint x > 0 updated in parallel overshoot by turns (a 2-cycle): the run raises
    the damping, says so, and converges to the sequential fixed point."""
    with fg.Model("repeated") as m:
        fg.plate("n", 5)
        x = fg.gaussian("x", mean=0.0, precision=0.01)
        fg.is_positive("b", x * np.ones(5), observed=np.ones(5))
    with pytest.warns(fg.ConvergenceWarning, match="oscillate"):
        r = fg.infer(m, algorithm=fg.EP(parallel=True, max_iter=500))
    assert r.converged and any("damping raised" in s for s in r.notes)
    seq = fg.infer(m, algorithm=fg.EP(max_iter=500))
    assert abs(r.posterior("x").mean() - seq.posterior("x").mean()) < 1e-6


def test_improper_cavities_are_skipped_and_counted():
    """A site whose message claims more precision than q holds has an improper cavity: the kernels leave it."""
    from factors.kernels.ep_sites import SITE_STEP, sequential_site

    h, lam = np.zeros((2, 1)), np.array([[2.0], [0.0]])
    q_lin, q_prec = np.zeros(2), np.array([1.0, 1.0])
    none = (np.zeros((2, 0)), np.zeros(2), np.zeros(2), np.zeros(0), np.zeros((0, 0)))
    _, skipped = sequential_site(SITE_STEP, np.array([[0], [1]]), np.ones((2, 1)), np.zeros(2), np.ones(2), 0.0,
                                 h, lam, q_lin, q_prec, *none, 0.0)
    assert skipped == 1 and lam[0, 0] == 2.0 and q_prec[0] == 1.0 and lam[1, 0] > 0
    hv, lv = np.zeros(1), np.array([3.0])
    mu, sigma = np.zeros(2), np.eye(2)
    _, skipped = sequential_site(SITE_STEP, np.zeros((1, 0), dtype=np.int64), np.zeros((1, 0)), np.zeros(1),
                                 np.ones(1), 0.0, np.zeros((1, 0)), np.zeros((1, 0)), q_lin, q_prec,
                                 np.array([[1.0, 0.0]]), hv, lv, mu, sigma, 0.0)
    assert skipped == 1 and lv[0] == 3.0 and np.all(sigma == np.eye(2))


def test_is_positive_picks_ep_by_default():
    with fg.Model("step") as m:
        x = fg.gaussian("x", mean=1.0, precision=1.0)
        fg.is_positive("b", x, observed=False)
    r = fg.infer(m)
    assert r.algorithm == "ep" and "IsPositive(b)" in r.notes[0]
    z = -1.0  # the mean of N(1, 1) truncated to x ≤ 0
    assert abs(r.posterior("x").mean() - (1.0 - np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi) / (1 - 0.8413447460685429))) \
        < 1e-9


def test_per_factor_damping_is_checked_and_keeps_the_fixed_point():
    rng = np.random.default_rng(9)
    X = rng.normal(size=(20, 2))
    m = models.probit_regression_model(X, X[:, 0] > 0)
    with pytest.raises(fg.ModelError, match="unknown factors"):
        fg.infer(m, algorithm=fg.EP(), damping={"nope": 0.5})
    a = fg.infer(m, algorithm=fg.EP(tol=1e-12, max_iter=1000), damping={"Probit(y)": 0.5})
    b = fg.infer(m, algorithm=fg.EP(tol=1e-12))
    assert a.n_iter > b.n_iter
    np.testing.assert_allclose(a.posterior("w").mean(), b.posterior("w").mean(), atol=1e-9)


def test_hybrid_messages_pass_through_expressions():
    """A regression with an unknown noise precision: the Gaussian likelihood on fg.inner(X, w) + b has no EP rule
    (its precision is latent), so it sends VMP messages through the expression: VMP's mean-field fixed point."""
    rng = np.random.default_rng(10)
    N = 40
    X = rng.normal(size=(N, 2))
    y = X @ np.array([1.0, -0.5]) + 0.3 + rng.normal(size=N) * 0.7
    with fg.Model("noise") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=np.zeros(2), precision=np.eye(2))
        b = fg.gaussian("b", mean=0.0, precision=1.0)
        tau = fg.gamma("tau", shape=2.0, rate=1.0)
        fg.gaussian("y", mean=fg.inner(X, w, [n]) + b, precision=tau, observed=y)
    r = fg.infer(m, algorithm=fg.EP(tol=1e-13, max_iter=2000))
    rv = fg.infer(m, tol=1e-15, max_iter=5000)
    assert r.converged
    for name in ("w", "b", "tau"):
        np.testing.assert_allclose(r.posterior(name).mean(), rv.posterior(name).mean(), atol=1e-7)
    np.testing.assert_allclose(r.posterior("w").cov(), rv.posterior("w").cov(), atol=1e-9)


def test_mean_field_weights_in_inner():
    """fg.inner(X, w) with w a scalar Gaussian per coefficient (mean field): D scalar terms per row; the
    sequential and parallel schedules share the fixed point."""
    rng = np.random.default_rng(11)
    N, D = 50, 3
    X = rng.normal(size=(N, D))
    y = X @ np.array([1.0, -1.0, 0.5]) + rng.normal(size=N) > 0
    fits = []
    for parallel in MODES:
        with fg.Model("mf") as m:
            n, d = fg.plate("n", N), fg.plate("d", D)
            w = fg.gaussian("w", mean=0.0, precision=1.0, plates=[d])
            fg.probit("y", fg.inner(X, w, [n]), observed=y)
        fits.append(fg.infer(m, algorithm=fg.EP(parallel=parallel, tol=1e-12, max_iter=2000)))
    a, b = fits
    assert a.converged and b.converged
    np.testing.assert_allclose(a.posterior("w").mean(), b.posterior("w").mean(), atol=1e-8)
    np.testing.assert_allclose(a.posterior("w").var(), b.posterior("w").var(), atol=1e-8)
    assert abs(a.elbo - b.elbo) < 1e-8


@pytest.mark.parametrize("parallel", MODES)
def test_missing_labels_drop_their_rows(parallel):
    rng = np.random.default_rng(12)
    X = rng.normal(size=(30, 2))
    y = X @ np.array([1.0, -1.0]) + rng.normal(size=30) > 0
    seen = rng.random(30) > 0.3

    def fit(X, y, mask):
        with fg.Model("missing") as m:
            n = fg.plate("n", len(y))
            w = fg.mv_gaussian("w", mean=np.zeros(2), precision=np.eye(2))
            fg.probit("y", fg.inner(X, w, [n]), observed=y, mask=mask)
        return fg.infer(m, algorithm=fg.EP(parallel=parallel, tol=1e-12))

    r, ref = fit(X, y, seen), fit(X[seen], y[seen], None)
    np.testing.assert_allclose(r.posterior("w").mean(), ref.posterior("w").mean(), atol=1e-10)
    np.testing.assert_allclose(r.posterior("w").cov(), ref.posterior("w").cov(), atol=1e-10)
    assert abs(r.elbo - ref.elbo) < 1e-9 and "y" not in r.posteriors


def test_flat_prior_on_a_weight_vector_is_named():
    X = np.random.default_rng(13).normal(size=(8, 2))
    with fg.Model("flat") as m:
        n = fg.plate("n", 8)
        w = fg.mv_gaussian("w", mean=np.zeros(2), precision=0.0)
        fg.probit("y", fg.inner(X, w, [n]), observed=X[:, 0] > 0)
    with pytest.raises(fg.InferenceError, match=r"q\(w\) is not a proper Gaussian"):
        fg.infer(m, algorithm=fg.EP())


def test_is_positive_forward_draws_and_predictions():
    """b = 1[x > 0] forward: before the game each player wins half the draws; fg.predict draws the performances
    from q, so the game is won with q's probability Φ((m_w − m_l)/√(v_w + v_l))."""
    r = _one_game(False)
    prior = fg.sample_prior(r.model, draws=4000, seed=1)
    assert set(np.unique(prior["won"])) <= {0.0, 1.0} and abs(prior["won"].mean() - 0.5) < 0.03
    w, lo = r.posterior("perf_winner"), r.posterior("perf_loser")
    gap, spread = float((w.mean() - lo.mean())[0]), math.sqrt(2 * float((w.var() + lo.var())[0]))
    p_win = 0.5 * (1 + math.erf(gap / spread))
    replay = fg.predict(r, draws=20000, seed=2)["won"]
    assert abs(replay.mean() - p_win) < 0.015


def test_loopy_gaussian_means_are_exact():
    """Scalar coefficients a, b coupled by twenty rows of y = a + b·x (a loop under factorised q): EP is Gaussian
    belief propagation there, so its means are the exact posterior means (its variances are not)."""
    rng = np.random.default_rng(14)
    N = 20
    x = rng.normal(size=N)
    y = 1 + 2 * x + rng.normal(size=N)
    with fg.Model("loopy") as m:
        fg.plate("n", N)
        a = fg.gaussian("a", mean=0.0, precision=1.0)
        b = fg.gaussian("b", mean=0.0, precision=1.0)
        fg.gaussian("y", mean=a + b * x, precision=1.0, observed=y)
    X = np.c_[np.ones(N), x]
    exact = np.linalg.solve(np.eye(2) + X.T @ X, X.T @ y)
    for parallel in MODES:
        r = fg.infer(m, algorithm=fg.EP(parallel=parallel, tol=1e-13, max_iter=5000))
        np.testing.assert_allclose([r.posterior("a").mean(), r.posterior("b").mean()], exact, atol=1e-9)


@pytest.mark.parametrize(("mu", "v"), [(0.0, 1e4), (100.0, 1e6), (-30.0, 1e-4), (50.0, 0.01), (0.5, 1e-6)])
def test_logistic_site_at_wide_and_narrow_cavities(mu, v):
    """The sinh-substituted rule resolves the sigmoid's bend under a cavity 1000 times wider, and a narrow
    cavity far out in its tail."""
    lz, mt, vt = logistic_ep({"logit": (np.array(mu), np.array(v)), "out": (np.array(1.0),)}, {})
    ql, qm, qv = _quadrature(lambda d: -np.logaddexp(0, -d), mu, v)
    np.testing.assert_allclose([lz, mt, vt], [ql, qm, qv], rtol=1e-7, atol=1e-9)
