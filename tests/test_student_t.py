"""fg.student_t: the Student-t likelihood as a Gaussian–Gamma scale mixture (robust regression).

Checked against an independent plain-numpy coordinate ascent of the same model (its ELBO written term by
term, the weights λ_n explicit), for monotone ELBO traces, robustness to outliers, the learned ν, missing rows
and bad input.  The message = gradient of E[log f] identity is checked by tests/test_rules.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import digamma, gammaln

import factorgraph as fg
from factorgraph import ModelError

LOG_2PI = np.log(2.0 * np.pi)


def _data(rng, N=40, D=3, dof=3.0, noise=0.5, outliers=0):
    X = rng.normal(size=(N, D))
    w = rng.normal(size=D)
    y = X @ w + noise * rng.standard_t(dof, size=N)
    y[:outliers] += 25.0
    return X, y, w


def _robust_model(X, y, dof, alpha=0.5, a0=2.0, b0=1.0, mask=None, likelihood="t"):
    N, D = X.shape
    with fg.Model("robust") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", np.zeros(D), precision=alpha * np.eye(D))
        tau = fg.gamma("tau", a0, b0)
        if likelihood == "t":
            fg.student_t("y", fg.inner(X, w, [n]), precision=tau, dof=dof, plates=[n], observed=y, mask=mask)
        else:
            fg.gaussian("y", fg.inner(X, w, [n]), precision=tau, plates=[n], observed=y, mask=mask)
    return m


# ------------------------------------------------------------------------------------ numpy reference
def _gamma_elogp(a, b, ea, elog):
    """E[log Gam(x; a, b)] for E[x] = ea, E[log x] = elog."""
    return a * np.log(b) - gammaln(a) + (a - 1.0) * elog - b * ea


def _gamma_entropy(a, b):
    return a - np.log(b) + gammaln(a) + (1.0 - a) * digamma(a)


def reference_fit(X, y, nu, alpha, a0, b0, iters=300, learn=False):
    """Mean-field coordinate ascent for y_n ~ N(x_nᵀw, (λ_n τ)⁻¹), λ_n ~ Gam(ν/2, ν/2), w ~ N(0, α⁻¹I),
    τ ~ Gam(a0, b0), with q(w) full covariance, q(τ), q(λ_n) Gamma; returns (m, S, a, b, ELBO)."""
    N, D = X.shape
    m, S = np.zeros(D), np.eye(D) / alpha
    a, b = a0, b0
    for _ in range(iters):
        e_tau = a / b
        r2 = (y - X @ m) ** 2 + np.einsum("nd,de,ne->n", X, S, X)
        la, lb = nu / 2 + 0.5, nu / 2 + 0.5 * e_tau * r2  # q(λ_n)
        e_lam = la / lb
        if learn:  # the ν-stationarity equation of Σ E[log Gam(λ_n; ν/2, ν/2)] (Liu & Rubin 1995)
            c = np.mean(digamma(la) - np.log(lb) - e_lam)
            nu = brentq(lambda v, c=c: np.log(v / 2) + 1.0 - digamma(v / 2) + c, 1e-3, 1e6, xtol=1e-14, rtol=1e-15)
        S = np.linalg.inv(alpha * np.eye(D) + e_tau * (X.T * e_lam) @ X)  # q(w)
        m = S @ (e_tau * X.T @ (e_lam * y))
        r2 = (y - X @ m) ** 2 + np.einsum("nd,de,ne->n", X, S, X)
        a, b = a0 + N / 2, b0 + 0.5 * np.sum(e_lam * r2)  # q(τ)
    # the bound after a last λ update, every term written out
    e_tau, elog_tau = a / b, digamma(a) - np.log(b)
    la, lb = nu / 2 + 0.5, nu / 2 + 0.5 * e_tau * r2
    e_lam, elog_lam = la / lb, digamma(la) - np.log(lb)
    lik = np.sum(0.5 * (elog_lam + elog_tau - LOG_2PI) - 0.5 * e_lam * e_tau * r2)
    p_w = 0.5 * D * (np.log(alpha) - LOG_2PI) - 0.5 * alpha * (m @ m + np.trace(S))
    h_w = 0.5 * D * (1.0 + LOG_2PI) + 0.5 * np.linalg.slogdet(S)[1]
    p_tau, h_tau = _gamma_elogp(a0, b0, e_tau, elog_tau), _gamma_entropy(a, b)
    p_lam = np.sum(_gamma_elogp(nu / 2, nu / 2, e_lam, elog_lam))
    h_lam = np.sum(_gamma_entropy(la, lb))
    elbo = lik + p_w + h_w + p_tau + h_tau + p_lam + h_lam
    return (m, S, a, b, elbo, nu) if learn else (m, S, a, b, elbo)


def test_matches_numpy_coordinate_ascent():
    rng = np.random.default_rng(0)
    X, y, _ = _data(rng, N=40, outliers=3)
    nu, alpha, a0, b0 = 3.0, 0.5, 2.0, 1.0
    m_ref, S_ref, a_ref, b_ref, L_ref = reference_fit(X, y, nu, alpha, a0, b0)
    r = fg.infer(_robust_model(X, y, nu, alpha, a0, b0), max_iter=300, tol=None, param_tol=None)
    qw, qt = r.posteriors["w"], r.posteriors["tau"]
    np.testing.assert_allclose(qw.mean(), m_ref, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(qw.cov(), S_ref, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose([qt.shape, qt.rate], [a_ref, b_ref], rtol=1e-9)
    assert r.evidence_kind == "lower bound"
    assert abs(r.elbo - L_ref) < 1e-9 * max(1.0, abs(L_ref))


def test_learned_dof_matches_numpy_reference():
    """The fixed point with ν learned: posteriors, ν and ELBO agree with the reference's ν update."""
    rng = np.random.default_rng(7)
    X, y, _ = _data(rng, N=60, dof=2.0, outliers=2)
    m_ref, S_ref, a_ref, b_ref, L_ref, nu_ref = reference_fit(X, y, 10.0, 0.5, 2.0, 1.0, iters=400, learn=True)
    r = fg.infer(_robust_model(X, y, "learn"), max_iter=400, tol=None, param_tol=None)
    np.testing.assert_allclose(r.posteriors["w"].mean(), m_ref, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(r.posteriors["w"].cov(), S_ref, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(r.hyperparameters("y")["dof"], nu_ref, rtol=1e-7)
    assert abs(r.elbo - L_ref) < 1e-9 * abs(L_ref)


@pytest.mark.parametrize("dof", [2.5, "learn"])
def test_elbo_never_decreases(dof):
    rng = np.random.default_rng(1)
    X, y, _ = _data(rng, N=50, outliers=4)
    mask = np.ones(50, dtype=bool)
    mask[[7, 20]] = False
    y[7] = np.nan
    r = fg.infer(_robust_model(X, y, dof, mask=mask), max_iter=200)
    d = np.diff(r.elbo_trace)
    assert np.all(d >= -1e-10 * np.abs(r.elbo_trace[1:])), d.min()
    assert r.converged


def test_missing_rows_drop_out():
    """A masked row contributes nothing: the fit equals the fit on the other rows."""
    rng = np.random.default_rng(2)
    X, y, _ = _data(rng, N=30, outliers=2)
    mask = np.ones(30, dtype=bool)
    mask[[3, 11, 12]] = False
    y_miss = y.copy()
    y_miss[~mask] = np.inf  # never read
    kw = {"max_iter": 150, "tol": None, "param_tol": None}
    r1 = fg.infer(_robust_model(X, y_miss, 3.0, mask=mask), **kw)
    r2 = fg.infer(_robust_model(X[mask], y[mask], 3.0), **kw)
    np.testing.assert_allclose(r1.posteriors["w"].mean(), r2.posteriors["w"].mean(), rtol=1e-10)
    assert abs(r1.elbo - r2.elbo) < 1e-9 * abs(r2.elbo)


def test_robust_to_gross_outliers():
    rng = np.random.default_rng(3)
    X, y, w_true = _data(rng, N=60, dof=50.0, noise=0.3, outliers=0)
    y[:5] += rng.choice([-1, 1], 5) * 40.0
    rt = fg.infer(_robust_model(X, y, 3.0))
    rg = fg.infer(_robust_model(X, y, None, likelihood="gaussian"))
    err_t = np.linalg.norm(rt.posteriors["w"].mean() - w_true)
    err_g = np.linalg.norm(rg.posteriors["w"].mean() - w_true)
    assert err_t < 0.15, err_t
    assert err_g > 5 * err_t, (err_g, err_t)
    assert rt.elbo > rg.elbo  # the evidence prefers the heavy tails here


@pytest.mark.parametrize(("true_dof", "start"), [(3.0, 30.0), (3.0, 0.5)])
def test_learned_dof_moves_toward_truth(true_dof, start):
    rng = np.random.default_rng(4)
    X, y, _ = _data(rng, N=1500, dof=true_dof, noise=1.0)
    r = fg.infer(_learn_model(X, y, start), max_iter=500)
    nu = r.hyperparameters("y")["dof"]
    assert abs(np.log(nu / true_dof)) < abs(np.log(start / true_dof)) / 2, nu
    assert 2.0 < nu < 4.5, nu
    assert any("degrees of freedom" in n for n in r.notes)
    assert np.all(np.diff(r.elbo_trace) >= -1e-10 * np.abs(r.elbo_trace[1:]))


def _learn_model(X, y, start):
    N, D = X.shape
    with fg.Model("learn") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", np.zeros(D), precision=0.5 * np.eye(D))
        tau = fg.gamma("tau", 1.0, 1.0)
        fg.student_t("y", fg.inner(X, w, [n]), precision=tau, dof=start, learn_dof=True, plates=[n], observed=y)
    return m


def test_learned_dof_with_string_and_constant_precision():
    rng = np.random.default_rng(5)
    X, y, _ = _data(rng, N=200, dof=2.0, noise=1.0)
    with fg.Model("learn2") as m:
        n = fg.plate("n", 200)
        w = fg.mv_gaussian("w", np.zeros(3), precision=np.eye(3))
        fg.student_t("y", fg.inner(X, w, [n]), precision=1.0, dof="learn", plates=[n], observed=y)
    r = fg.infer(m)
    assert r.converged and 0.5 < r.hyperparameters("y")["dof"] < 6.0


def test_indexed_mean_and_scale_variable():
    """A group mean through an indexing view, and sd given by a half-Cauchy scale variable."""
    rng = np.random.default_rng(6)
    G, N = 4, 80
    g = rng.integers(0, G, N)
    mu_true = np.array([-3.0, 0.0, 2.0, 5.0])
    y = mu_true[g] + 0.4 * rng.standard_t(3, size=N)
    y[:3] += 30.0
    with fg.Model("groups") as m:
        c, n = fg.plate("c", G), fg.plate("n", N)
        mu = fg.gaussian("mu", 0.0, precision=0.01, plates=[c])
        sigma = fg.half_cauchy("sigma", 1.0)
        fg.student_t("y", mu[g], sd=sigma, dof=3.0, plates=[n], observed=y)
    r = fg.infer(m)
    assert r.converged
    np.testing.assert_allclose(r.posteriors["mu"].mean(), mu_true, atol=0.3)
    assert np.all(np.diff(r.elbo_trace) >= -1e-10 * np.abs(r.elbo_trace[1:]))


# ------------------------------------------------------------------------------------ bad input
def _bad(**kw):
    X = np.ones((5, 2))
    args = {"dof": 3.0, "observed": np.zeros(5)}
    args.update(kw)
    with fg.Model("bad"):
        n = fg.plate("n", 5)
        w = fg.mv_gaussian("w", np.zeros(2), precision=np.eye(2))
        mean = args.pop("mean", None)
        if mean == "gamma":
            mean = fg.gamma("g", 1.0, 1.0)
        elif mean is None:
            mean = fg.inner(X, w, [n])
        prec = args.pop("precision", 1.0)
        if prec == "gaussian":
            prec = fg.gaussian("p", 0.0, precision=1.0)
        fg.student_t("y", mean, precision=prec, plates=[n], **args)


@pytest.mark.parametrize(("kw", "match"), [
    ({"dof": 0.0}, r"'y'.*dof must be positive, got 0"),
    ({"dof": -2.0}, r"'y'.*dof must be positive"),
    ({"dof": np.inf}, r"'y'.*dof must be finite"),
    ({"dof": [1.0, 2.0]}, r"'y'.*dof must be a single"),
    ({"dof": "auto"}, r"'y'.*dof must be a positive number or \"learn\""),
    ({"observed": np.array([0.0, np.nan, 0, 0, 0])}, r"observed data of 'y' contains nan"),
    ({"observed": np.array([0.0, np.inf, 0, 0, 0])}, r"observed data of 'y' contains inf"),
    ({"observed": np.zeros(4)}, r"observed data of 'y' has shape \(4,\)"),
    ({"observed": None}, r"'y'.*needs observed data"),
    ({"mask": np.ones(3, dtype=bool)}, r"mask of 'y' has shape"),
    ({"precision": -1.0}, r"'y'.*precision must be positive"),
    ({"precision": "gaussian"}, r"'y'.*precision must be Gamma, got Gaussian 'p'"),
    ({"mean": "gamma"}, r"'y'.*mean must be Gaussian, got Gamma 'g'"),
    ({"mean": 3.0}, r"'y'.*mean must be a Gaussian variable or expression"),
    ({"learn_dof": "yes"}, r"'y'.*learn_dof must be True or False"),
])
def test_bad_input(kw, match):
    with pytest.raises(ModelError, match=match):
        _bad(**kw)


def test_demo_small():
    """demos/robust_regression.py: the Student-t likelihoods beat the Gaussian by the evidence on both data sets,
    and recover the synthetic line despite the outliers."""
    import importlib

    out = importlib.import_module("demos.robust_regression").main(small=True)
    for data in ("synthetic", "boston"):
        res = out[data]["results"]
        assert res["student_t4"].elbo > res["gaussian"].elbo + 4.0
        assert all(r.converged for r in res.values())
    syn = out["synthetic"]["results"]
    assert np.linalg.norm(syn["student_t4"].posterior("w").mean() - out["w_true"]) < 0.05


def test_mixture_of_t_components():
    """Gates on fg.student_t: with constant components (fg.select) the per-row weight q(λ_nk) and q(z_n) are
    exact, so the bound is the exact log evidence Σ_n log Σ_k π_k t_ν(y_n; μ_k, τ⁻¹); with latent means
    (mu[z]) the two clusters are found under heavy-tailed noise and the ELBO never decreases."""
    from scipy import stats
    from scipy.special import logsumexp

    y = np.array([-2.1, -1.7, -2.5, 1.9, 2.2, 2.0, 8.0, -9.0])
    pi, mus, tau, nu = np.array([0.3, 0.7]), np.array([-2.0, 2.0]), 4.0, 3.0
    with fg.Model("constant components") as m:
        n = fg.plate("n", len(y))
        z = fg.categorical("z", pi, plates=[n])
        fg.student_t("y", fg.select(mus, z), fg.select([tau, tau], z), dof=nu, plates=[n], observed=y)
    r = fg.infer(m, tol=1e-14, max_iter=2000)
    exact = logsumexp(np.log(pi)[:, None] + stats.t.logpdf(y, nu, loc=mus[:, None], scale=tau**-0.5), axis=0).sum()
    assert r.elbo == pytest.approx(exact, rel=1e-12)

    rng = np.random.default_rng(0)
    y = np.r_[0.5 * rng.standard_t(3, 40) - 3, 0.5 * rng.standard_t(3, 60) + 3]
    with fg.Model("mixture of t") as m:
        k, n = fg.plate("k", 2), fg.plate("n", len(y))
        z = fg.categorical("z", fg.dirichlet("pi", [1.0, 1.0]), plates=[n], categories=k)
        mu = fg.gaussian("mu", 0.0, precision=0.01, plates=[k])
        fg.student_t("y", mu[z], fg.gamma("tau", 1.0, 1.0), dof=3.0, plates=[n], observed=y)
    r = fg.infer(m, seed=0, max_iter=500)
    assert r.converged and np.all(np.diff(r.elbo_trace) >= -1e-9 * np.abs(r.elbo_trace[1:]))
    np.testing.assert_allclose(np.sort(r.posterior("mu").mean()), [-3.0, 3.0], atol=0.25)
    with fg.Model("learned dof"):
        k, n = fg.plate("k", 2), fg.plate("n", 4)
        z = fg.categorical("z", [0.5, 0.5], plates=[n], categories=k)
        mu = fg.gaussian("mu", 0.0, precision=0.01, plates=[k])
        with pytest.raises(fg.ModelError, match="'x': a gated fg.student_t .* constant dof"):
            fg.student_t("x", mu[z], 1.0, learn_dof=True, plates=[n], observed=np.zeros(4))
