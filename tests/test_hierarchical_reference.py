"""Hierarchical models against an independent mean-field coordinate ascent written here in plain numpy.

Same factorisation, same update order and the same initialisation (every variable starts at the
message of its prior given its parents' starting posteriors, in declaration order); both iterate to
convergence and must agree on every posterior and on the ELBO to 1e-9, sweep by sweep.

* Radon (Gelman & Hill 2007), varying intercepts: y_n ~ N(a[county_n] + b·floor_n, τ⁻¹),
  a_c ~ N(μ, τ_a⁻¹), μ ~ N(0, 100), b ~ N(0, 100), τ_a ~ Gam(1, 1), τ ~ Gam(1, 1).
* Eight schools (Rubin 1981): y_j ~ N(θ_j, σ_j²) with known σ_j, θ_j ~ N(μ, τ⁻¹), μ ~ N(0, 10⁴),
  τ ~ Gam(1, 10).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from scipy.special import digamma, gammaln

import factorgraph as fg
from factorgraph import models

DATA = Path(__file__).resolve().parents[1] / "data"
LOG2PI = np.log(2 * np.pi)


def _radon():
    with open(DATA / "radon" / "data.csv") as fh:
        rows = list(csv.DictReader(fh))
    county = np.array([int(r["county_idx"]) for r in rows])
    floor = np.array([float(r["floor"]) for r in rows])
    y = np.array([float(r["log_radon"]) for r in rows])
    return county, floor, y


def _schools():
    with open(DATA / "eight_schools" / "data.csv") as fh:
        rows = list(csv.DictReader(fh))
    return np.array([float(r["y"]) for r in rows]), np.array([float(r["sigma"]) for r in rows])


# ------------------------------------------------------------------------------------ numpy pieces
def _gauss_elog(x_m, x_v, m_m, m_v, tau_e, tau_elog):
    """E[log N(x | m, τ⁻¹)] for independent x, m, τ given by means/variances and E[τ], E[log τ]."""
    sq = x_v + m_v + (x_m - m_m) ** 2
    return 0.5 * (tau_elog - LOG2PI) - 0.5 * tau_e * sq


def _gamma_elog(e, elog, a, b):
    return a * np.log(b) - gammaln(a) + (a - 1) * elog - b * e


def _h_gauss(v):
    return 0.5 * np.log(2 * np.pi * np.e * v)


def _h_gamma(a, b):
    return a - np.log(b) + gammaln(a) + (1 - a) * digamma(a)


def _gam(a, b):
    return a / b, digamma(a) - np.log(b)


def radon_reference(county, x, y, sweeps):
    """Coordinate ascent in the order a, b, μ, τ_a, τ; returns the posteriors and the ELBO per sweep."""
    C, p0, a0, b0 = county.max() + 1, 1e-2, 1.0, 1.0
    cnt = np.bincount(county, minlength=C)
    # initialisation: priors given the parents' starting posteriors, in declaration order
    mu_m, mu_v = 0.0, 1 / p0
    ta_a, ta_b = a0, b0
    ta_e, _ = _gam(ta_a, ta_b)
    a_m, a_v = np.full(C, mu_m), np.full(C, 1 / ta_e)
    b_m, b_v = 0.0, 1 / p0
    t_a, t_b = a0, b0
    trace = []
    for _ in range(sweeps):
        t_e, t_elog = _gam(t_a, t_b)
        ta_e, ta_elog = _gam(ta_a, ta_b)
        prec = ta_e + t_e * cnt
        a_m = (ta_e * mu_m + t_e * np.bincount(county, weights=y - b_m * x, minlength=C)) / prec
        a_v = 1 / prec
        prec = p0 + t_e * np.sum(x * x)
        b_m, b_v = t_e * np.sum(x * (y - a_m[county])) / prec, 1 / prec
        prec = p0 + C * ta_e
        mu_m, mu_v = ta_e * a_m.sum() / prec, 1 / prec
        ta_a = a0 + C / 2
        ta_b = b0 + 0.5 * np.sum(a_v + mu_v + (a_m - mu_m) ** 2)
        resid = (y - a_m[county] - b_m * x) ** 2 + a_v[county] + b_v * x * x
        t_a, t_b = a0 + len(y) / 2, b0 + 0.5 * resid.sum()
        t_e, t_elog = _gam(t_a, t_b)
        ta_e, ta_elog = _gam(ta_a, ta_b)
        elbo = (_gauss_elog(mu_m, mu_v, 0.0, 0.0, p0, np.log(p0)) + _gamma_elog(ta_e, ta_elog, a0, b0)
                + _gauss_elog(a_m, a_v, mu_m, mu_v, ta_e, ta_elog).sum()
                + _gauss_elog(b_m, b_v, 0.0, 0.0, p0, np.log(p0)) + _gamma_elog(t_e, t_elog, a0, b0)
                + np.sum(0.5 * (t_elog - LOG2PI) - 0.5 * t_e * resid)
                + _h_gauss(mu_v) + _h_gauss(a_v).sum() + _h_gauss(b_v) + _h_gamma(ta_a, ta_b) + _h_gamma(t_a, t_b))
        trace.append(elbo)
    post = {"a": (a_m, a_v), "b": (b_m, b_v), "mu": (mu_m, mu_v), "tau_a": (ta_a, ta_b), "tau": (t_a, t_b)}
    return post, np.array(trace)


def schools_reference(y, sigma, sweeps):
    """Coordinate ascent in the order θ, μ, τ."""
    J, p0, a0, b0 = len(y), 1e-4, 1.0, 10.0
    lam = 1 / sigma**2
    mu_m, mu_v = 0.0, 1 / p0
    t_a, t_b = a0, b0
    t_e, _ = _gam(t_a, t_b)
    th_m, th_v = np.full(J, mu_m), np.full(J, 1 / t_e)
    trace = []
    for _ in range(sweeps):
        t_e, t_elog = _gam(t_a, t_b)
        prec = t_e + lam
        th_m, th_v = (t_e * mu_m + lam * y) / prec, 1 / prec
        prec = p0 + J * t_e
        mu_m, mu_v = t_e * th_m.sum() / prec, 1 / prec
        t_a, t_b = a0 + J / 2, b0 + 0.5 * np.sum(th_v + mu_v + (th_m - mu_m) ** 2)
        t_e, t_elog = _gam(t_a, t_b)
        elbo = (_gauss_elog(mu_m, mu_v, 0.0, 0.0, p0, np.log(p0)) + _gamma_elog(t_e, t_elog, a0, b0)
                + _gauss_elog(th_m, th_v, mu_m, mu_v, t_e, t_elog).sum()
                + _gauss_elog(y, 0.0, th_m, th_v, lam, np.log(lam)).sum()
                + _h_gauss(mu_v) + _h_gauss(th_v).sum() + _h_gamma(t_a, t_b))
        trace.append(elbo)
    return {"theta": (th_m, th_v), "mu": (mu_m, mu_v), "tau": (t_a, t_b)}, np.array(trace)


# ------------------------------------------------------------------------------------ the library
def radon_model(county, x, y):
    N, C = len(y), county.max() + 1
    with fg.Model("radon-varying-intercept") as m:
        n, c = fg.plate("n", N), fg.plate("c", C)
        mu = fg.gaussian("mu", mean=0.0, precision=1e-2)
        tau_a = fg.gamma("tau_a", shape=1.0, rate=1.0)
        a = fg.gaussian("a", mean=mu, precision=tau_a, plates=[c])
        b = fg.gaussian("b", mean=0.0, precision=1e-2, plates=[fg.plate("one", 1)])
        tau = fg.gamma("tau", shape=1.0, rate=1.0)
        fg.gaussian("y", mean=a[county] + b[np.zeros(N, int)] * x, precision=tau, plates=[n], observed=y)
    return m


def _check(r, post, trace, gamma_names):
    np.testing.assert_allclose(r.elbo_trace, trace, rtol=0, atol=1e-9 * max(1.0, abs(trace[-1])))
    assert abs(r.elbo - trace[-1]) < 1e-9 * max(1.0, abs(trace[-1]))
    for name, (p1, p2) in post.items():
        q = r.posterior(name)
        if name in gamma_names:
            got = (q.shape, q.rate)
        else:
            got = (q.mean(), q.var())
        for g, w in zip(got, (p1, p2), strict=True):
            np.testing.assert_allclose(np.reshape(g, -1), np.reshape(w, -1), rtol=1e-9, atol=1e-12, err_msg=name)


def test_radon_varying_intercept_matches_numpy_coordinate_ascent():
    county, x, y = _radon()
    r = fg.infer(radon_model(county, x, y), schedule=["a", "b", "mu", "tau_a", "tau"], tol=1e-15, max_iter=2000)
    assert r.converged and r.n_iter > 5
    post, trace = radon_reference(county, x, y, r.n_iter)
    assert abs(trace[-1] - trace[-2]) < 1e-10  # the reference has converged too
    _check(r, post, trace, {"tau_a", "tau"})


def test_canned_hierarchical_regression_is_the_same_model():
    """models.hierarchical_regression (fixed slope as a 1-vector) reaches the same fixed point."""
    county, x, y = _radon()
    r = models.hierarchical_regression(x[:, None], y, county, varying=("intercept",), tol=None,
                                       param_tol=1e-13, max_iter=5000)
    post, trace = radon_reference(county, x, y, 3000)
    assert abs(r.elbo - trace[-1]) < 1e-9 * abs(trace[-1])
    np.testing.assert_allclose(r.posterior("intercept").mean(), post["a"][0], rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(r.posterior("intercept").var(), post["a"][1], rtol=1e-8)
    np.testing.assert_allclose(r.posterior("slope").mean().ravel(), post["b"][0], rtol=1e-8)


def test_eight_schools_matches_numpy_coordinate_ascent():
    y, sigma = _schools()
    with fg.Model("eight-schools") as m:
        j = fg.plate("j", len(y))
        mu = fg.gaussian("mu", mean=0.0, precision=1e-4)
        tau = fg.gamma("tau", shape=1.0, rate=10.0)
        theta = fg.gaussian("theta", mean=mu, precision=tau, plates=[j])
        fg.gaussian("y", mean=theta, precision=1 / sigma**2, plates=[j], observed=y)
    # sweep for sweep against the reference's plain coordinate ascent: no extrapolation
    r = fg.infer(m, fg.VMP(accelerate=False), schedule=["theta", "mu", "tau"], tol=1e-15, max_iter=5000)
    assert r.converged
    post, trace = schools_reference(y, sigma, r.n_iter)
    assert abs(trace[-1] - trace[-2]) < 1e-10
    _check(r, post, trace, {"tau"})
    assert np.all(np.diff(r.elbo_trace) >= -1e-12 * abs(r.elbo))
