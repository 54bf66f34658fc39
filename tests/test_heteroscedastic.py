"""fg.gaussian(..., log_sd=s): E_q[log f] against numerical integration, a heteroscedastic regression's fixed
point and ELBO against an independent coordinate ascent in numpy, the pointwise log density, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

import factorgraph as fg
from distributions import Gaussian
from factors.base import point_stats
from factors.heteroscedastic import GAUSSIAN_LOG_SD, log_sd_evidence
from tests.reference.ncvmp_regression import kl_gaussian


def _integrand(mu, s, y, m_mu, sd_mu, m_s, sd_s):
    """log N(y | μ, e^(2s)) q(μ) q(s), in plain floats (scipy.stats per point would be slow)."""
    c = 0.5 * math.log(2 * math.pi)
    log_f = -c - s - 0.5 * (y - mu) ** 2 * math.exp(-2 * s)
    q = math.exp(-0.5 * ((mu - m_mu) / sd_mu) ** 2 - 0.5 * ((s - m_s) / sd_s) ** 2 - 2 * c) / (sd_mu * sd_s)
    return log_f * q


def test_expected_log_likelihood_matches_quadrature():
    """E over q(μ)q(s) of log N(y | μ, e^(2s)), as a double integral."""
    assert GAUSSIAN_LOG_SD.get_evidence()[1] == "exact"
    y = 0.7
    for m_mu, v_mu in ((0.2, 0.05), (-1.0, 1.3)):
        for m_s, v_s in ((-0.5, 1e-3), (0.3, 0.4), (1.0, 1.5)):
            moments = {"out": point_stats(Gaussian, np.array([y])),
                       "mean": Gaussian(mean=np.array([m_mu]), var=np.array([v_mu])).expected_stats(),
                       "log_sd": Gaussian(mean=np.array([m_s]), var=np.array([v_s])).expected_stats()}
            got = log_sd_evidence(moments, {})[0]
            sd_mu, sd_s = np.sqrt(v_mu), np.sqrt(v_s)
            ref = integrate.dblquad(_integrand, m_s - 12 * sd_s, m_s + 12 * sd_s, m_mu - 12 * sd_mu,
                                    m_mu + 12 * sd_mu, args=(y, m_mu, sd_mu, m_s, sd_s), epsabs=1e-12,
                                    epsrel=1e-12)[0]
            assert got == pytest.approx(ref, rel=1e-9, abs=1e-9), (m_mu, v_mu, m_s, v_s)


def _reference(X, Z, y, prec_w, prec_v, iters=5000):
    """Mean-field q(w)q(v) for y_n ~ N(X_n w, exp(2 Z_n v)) in plain numpy: q(w) by its conjugate update given
    W_n = E[e^(−2 s_n)] = exp(−2 Z_n μ_v + 2 Z_n Σ_v Z_nᵀ); q(v) by an NCVMP step (halved while the ELBO falls)."""
    Dw, Dv = X.shape[1], Z.shape[1]
    mu_w, cov_w = np.zeros(Dw), np.linalg.inv(prec_w)
    mu_v, cov_v = np.zeros(Dv), np.linalg.inv(prec_v)

    def parts(mu_w, cov_w, mu_v, cov_v):
        m_s = Z @ mu_v
        v_s = np.einsum("nd,de,ne->n", Z, cov_v, Z)
        W = np.exp(-2 * m_s + 2 * v_s)
        Q = (y - X @ mu_w) ** 2 + np.einsum("nd,de,ne->n", X, cov_w, X)
        elbo = (np.sum(-0.5 * np.log(2 * np.pi) - m_s - 0.5 * Q * W) - kl_gaussian(mu_w, cov_w, np.zeros(Dw), prec_w)
                - kl_gaussian(mu_v, cov_v, np.zeros(Dv), prec_v))
        return m_s, W, Q, elbo

    nat_v = (np.zeros(Dv), prec_v)
    last = -np.inf
    for _ in range(iters):
        _, W, _, _ = parts(mu_w, cov_w, mu_v, cov_v)
        cov_w = np.linalg.inv(prec_w + (X.T * W) @ X)
        mu_w = cov_w @ (X.T @ (W * y))
        m_s, W, Q, _ = parts(mu_w, cov_w, mu_v, cov_v)
        dm, dv = -1 + Q * W, -Q * W
        target = (Z.T @ (dm - 2 * m_s * dv), prec_v - 2 * (Z.T * dv) @ Z)
        step = 1.0
        while True:
            h = (1 - step) * nat_v[0] + step * target[0]
            P = (1 - step) * nat_v[1] + step * target[1]
            cov_try = np.linalg.inv(P)
            mu_try = cov_try @ h
            elbo = parts(mu_w, cov_w, mu_try, cov_try)[3]
            if elbo >= parts(mu_w, cov_w, mu_v, cov_v)[3] - 1e-12 or step < 1e-3:
                break
            step *= 0.5
        change = np.max(np.abs(mu_try - mu_v)) + np.max(np.abs(cov_try - cov_v))
        mu_v, cov_v, nat_v = mu_try, cov_try, (h, P)
        if change < 1e-14 and abs(elbo - last) < 1e-13:
            break
        last = elbo
    return mu_w, cov_w, mu_v, cov_v, parts(mu_w, cov_w, mu_v, cov_v)[3]


def _data(seed=7, N=60):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, N)
    X = np.c_[np.ones(N), x]
    Z = np.c_[np.ones(N), x]
    y = X @ [0.5, 1.0] + np.exp(Z @ [-0.5, 0.6]) * rng.normal(size=N)
    return X, Z, y


def test_fixed_point_and_elbo_match_independent_coordinate_ascent():
    X, Z, y = _data()
    prec_w, prec_v = np.diag([0.1, 0.1]), np.diag([1.0, 1.0])
    with fg.Model("hetero") as model:
        n = fg.plate("n", len(y))
        w = fg.mv_gaussian("w", mean=np.zeros(2), precision=prec_w)
        v = fg.mv_gaussian("v", mean=np.zeros(2), precision=prec_v)
        fg.gaussian("y", mean=fg.inner(X, w, plates=[n]), log_sd=fg.inner(Z, v, plates=[n]), observed=y)
    r = fg.infer(model, fg.NCVMP(), tol=1e-15, param_tol=1e-13, max_iter=2000)
    mu_w, cov_w, mu_v, cov_v, elbo = _reference(X, Z, y, prec_w, prec_v)
    np.testing.assert_allclose(r.posterior("w").mean(), mu_w, atol=1e-8)
    np.testing.assert_allclose(r.posterior("w").cov(), cov_w, atol=1e-8)
    np.testing.assert_allclose(r.posterior("v").mean(), mu_v, atol=1e-8)
    np.testing.assert_allclose(r.posterior("v").cov(), cov_v, atol=1e-8)
    assert r.elbo == pytest.approx(elbo, abs=1e-8)
    # the noise grows with x, as generated
    assert r.posterior("v").mean()[1] > 0.3


def test_pointwise_log_density():
    X, Z, y = _data(N=20)
    with fg.Model("hetero") as model:
        n = fg.plate("n", len(y))
        w = fg.mv_gaussian("w", mean=np.zeros(2), precision=0.1)
        v = fg.mv_gaussian("v", mean=np.zeros(2), precision=1.0)
        fg.gaussian("y", mean=fg.inner(X, w, plates=[n]), log_sd=fg.inner(Z, v, plates=[n]), observed=y)
    from factorgraph.posterior.loglik import pointwise_log_likelihood

    wd, vd = np.array([[0.4, 0.9]]), np.array([[-0.3, 0.5]])
    lp = pointwise_log_likelihood(model, {"w": wd, "v": vd})["y"]
    np.testing.assert_allclose(lp[0], stats.norm.logpdf(y, X @ wd[0], np.exp(Z @ vd[0])), rtol=1e-12)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"sd": 1.0}, "do not also give sd="),
    ({"precision": 2.0}, "do not also give precision="),
    ({"log_sd_const": 0.3}, "log_sd must be a Gaussian variable or expression, got 0.3"),
])
def test_bad_input_names_variable_and_value(kwargs, match):
    with fg.Model("bad"):
        n = fg.plate("n", 3)
        s = fg.gaussian("s", plates=[n])
        log_sd = kwargs.pop("log_sd_const", s)
        with pytest.raises(fg.ModelError, match=match) as err:
            fg.gaussian("y", mean=0.0, log_sd=log_sd, observed=[0.1, 0.2, 0.3], **kwargs)
        assert "'y'" in str(err.value)
