"""fg.lognormal and the LogNormal family: moments against scipy, E_q[log f] of its factors against numerical
integration, a Gaussian with a log-normal sd against an independent coordinate ascent in numpy, the observed
log-normal likelihood against the Gaussian on log x, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

import factorgraph as fg
from distributions import Gamma, Gaussian, LogNormal
from factors.base import point_stats
from factors.heteroscedastic import GAUSSIAN_LOGNORMAL_SD, log_sd_evidence
from factors.lognormal import LOGNORMAL, lognormal_evidence
from tests.reference.ncvmp_regression import kl_gaussian, quad_expectation


def test_distribution_matches_scipy():
    q = LogNormal(mu=np.array([0.3, -1.0]), sigma=np.array([0.5, 1.2]))
    ref = [stats.lognorm(s=s, scale=np.exp(m)) for m, s in ((0.3, 0.5), (-1.0, 1.2))]
    np.testing.assert_allclose(q.mean(), [r.mean() for r in ref], rtol=1e-12)
    np.testing.assert_allclose(q.var(), [r.var() for r in ref], rtol=1e-12)
    np.testing.assert_allclose(q.entropy(), [r.entropy() for r in ref], rtol=1e-12)
    np.testing.assert_allclose(q.logpdf(np.array([0.7, 2.0])), [ref[0].logpdf(0.7), ref[1].logpdf(2.0)], rtol=1e-12)
    np.testing.assert_allclose(q.interval(0.9)[1], [r.ppf(0.95) for r in ref], rtol=1e-12)
    e1, e2 = q.expected_stats()
    for i, r in enumerate(ref):
        assert e1[i] == pytest.approx(r.expect(np.log), rel=1e-9)
        assert e2[i] == pytest.approx(r.expect(lambda x: np.log(x) ** 2), rel=1e-9)
    p = LogNormal(mu=0.0, sigma=1.0)
    kl = q[0].kl(p)
    ref_kl = integrate.quad(lambda x: ref[0].pdf(x) * (ref[0].logpdf(x) - stats.lognorm(s=1.0).logpdf(x)),
                            0, np.inf, epsabs=1e-13)[0]
    assert kl == pytest.approx(ref_kl, rel=1e-8)
    # the generic KL from natural parameters agrees with the closed form
    assert LogNormal.__mro__[1].kl(q[0], p) == pytest.approx(kl, rel=1e-12)


def test_lognormal_factor_expected_log_likelihood_matches_quadrature():
    assert LOGNORMAL.get_evidence()[1] == "exact"
    x = 1.7
    for m, v in ((0.0, 0.1), (1.2, 2.0)):
        tau = Gamma(shape=3.0, rate=2.0)
        moments = {"out": LogNormal.observed_stats(np.array([x])),
                   "mu": Gaussian(mean=np.array([m]), var=np.array([v])).expected_stats(),
                   "precision": tuple(np.atleast_1d(a) for a in tau.expected_stats())}
        got = lognormal_evidence(moments, {})[0]
        et, elt = tau.expected_stats()
        # E over μ by quadrature; over τ the expression is linear in (τ, log τ)
        ref = quad_expectation(lambda mu: -np.log(x) + 0.5 * (elt - np.log(2 * np.pi))  # noqa: B023
                               - 0.5 * et * (np.log(x) - mu) ** 2, m, v)  # noqa: B023
        assert got == pytest.approx(ref, rel=1e-10)


def _weighted(sd, y, mu, dens):
    return stats.norm.logpdf(y, mu, sd) * dens.pdf(sd)


def test_gaussian_with_lognormal_sd_expected_log_likelihood_matches_quadrature():
    assert GAUSSIAN_LOGNORMAL_SD.get_evidence()[1] == "exact"
    y, mu = 0.4, -0.3
    for m_s, s_s in ((-0.5, 0.05), (0.2, 0.6), (1.0, 1.2)):
        q = LogNormal(mu=np.array([m_s]), sigma=np.array([s_s]))
        moments = {"out": point_stats(Gaussian, np.array([y])), "mean": point_stats(Gaussian, np.array([mu])),
                   "log_sd": q.expected_stats()}
        got = log_sd_evidence(moments, {})[0]
        dens = stats.lognorm(s=s_s, scale=np.exp(m_s))
        ref = integrate.quad(_weighted, 0, np.inf, args=(y, mu, dens), epsabs=1e-13, epsrel=1e-13, limit=400)[0]
        assert got == pytest.approx(ref, rel=1e-9, abs=1e-9), (m_s, s_s)


def _reference(y, m0, p0, mu_s0, p_s0, iters=5000):
    """Mean-field q(μ)q(σ) for y_n ~ N(μ, σ²), μ ~ N(m0, 1/p0), log σ ~ N(mu_s0, 1/p_s0), in plain numpy: q(μ)
    conjugate given W = E[σ⁻²] = exp(−2m + 2v) of q(log σ) = N(m, v); q(log σ) by the NCVMP gradient step of
    S = Σ_n [−½ log 2π − m − ½Q_n W] in (E[s], E[s²])."""
    N = len(y)
    m, v = mu_s0, 1 / p_s0
    for _ in range(iters):
        W = np.exp(-2 * m + 2 * v)
        prec = p0 + N * W
        mean = (p0 * m0 + W * y.sum()) / prec
        Q = np.sum((y - mean) ** 2) + N / prec
        W = np.exp(-2 * m + 2 * v)
        dm, dv = -N + Q * W, -Q * W
        lam = p_s0 - 2 * dv
        h = p_s0 * mu_s0 + dm - 2 * m * dv
        m_new, v_new = h / lam, 1 / lam
        change = abs(m_new - m) + abs(v_new - v)
        m, v = m_new, v_new
        if change < 1e-15:
            break
    W = np.exp(-2 * m + 2 * v)
    Q = np.sum((y - mean) ** 2) + N / prec
    elbo = (N * (-0.5 * np.log(2 * np.pi) - m) - 0.5 * Q * W
            - kl_gaussian(np.array([mean]), np.array([[1 / prec]]), np.array([m0]), np.array([[p0]]))
            - kl_gaussian(np.array([m]), np.array([[v]]), np.array([mu_s0]), np.array([[p_s0]])))
    return mean, 1 / prec, m, v, elbo


def test_gaussian_with_lognormal_sd_matches_independent_coordinate_ascent():
    rng = np.random.default_rng(9)
    y = rng.normal(1.0, 2.0, 40)
    with fg.Model("lognormal-sd") as model:
        n = fg.plate("n", 40)
        mu = fg.gaussian("mu", 0.0, precision=0.01)
        sigma = fg.lognormal("sigma", mu=0.0, sd=1.0)
        fg.gaussian("y", mean=mu, sd=sigma, plates=[n], observed=y)
    r = fg.infer(model, fg.NCVMP(), tol=1e-15, param_tol=1e-14, max_iter=1000)
    mean, var, m_s, v_s, elbo = _reference(y, 0.0, 0.01, 0.0, 1.0)
    q_mu, q_sigma = r.posterior("mu"), r.posterior("sigma")
    assert isinstance(q_sigma, LogNormal)
    assert q_mu.mean() == pytest.approx(mean, abs=1e-8) and q_mu.var() == pytest.approx(var, abs=1e-8)
    assert q_sigma.mu == pytest.approx(m_s, abs=1e-8) and q_sigma.sigma**2 == pytest.approx(v_s, abs=1e-8)
    assert r.elbo == pytest.approx(elbo, abs=1e-8)
    assert 1.5 < q_sigma.mean() < 2.5


def test_observed_lognormal_is_the_gaussian_on_log_x():
    """Same posterior as fg.gaussian on log x; the ELBO differs by the Jacobian −Σ log x."""
    rng = np.random.default_rng(4)
    x = np.exp(rng.normal(0.5, 0.3, 50))

    def fit(log_space):
        with fg.Model("m") as model:
            n = fg.plate("n", 50)
            mu = fg.gaussian("mu", 0.0, precision=0.01)
            tau = fg.gamma("tau", 1.0, 1.0)
            if log_space:
                fg.gaussian("lx", mean=mu, precision=tau, plates=[n], observed=np.log(x))
            else:
                fg.lognormal("x", mu=mu, precision=tau, plates=[n], observed=x)
        return fg.infer(model, tol=1e-14, max_iter=500)

    a, b = fit(False), fit(True)
    assert a.posterior("mu").mean() == pytest.approx(b.posterior("mu").mean(), rel=1e-10)
    assert a.posterior("tau").mean() == pytest.approx(b.posterior("tau").mean(), rel=1e-10)
    assert a.elbo == pytest.approx(b.elbo - np.log(x).sum(), rel=1e-12)


def test_pointwise_log_density():
    from factorgraph.posterior.loglik import pointwise_log_likelihood

    x = np.array([0.5, 1.5, 3.0])
    with fg.Model("m") as model:
        n = fg.plate("n", 3)
        mu = fg.gaussian("mu", 0.0, precision=1.0)
        fg.lognormal("x", mu=mu, sd=0.7, plates=[n], observed=x)
    lp = pointwise_log_likelihood(model, {"mu": np.array([0.2])})["x"]
    np.testing.assert_allclose(lp[0], stats.lognorm(s=0.7, scale=np.exp(0.2)).logpdf(x), rtol=1e-12)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"observed": [1.0, -2.0, 3.0]}, "must be positive, got -2"),
    ({"observed": [1.0, 0.0, 3.0]}, "must be positive, got 0"),
    ({"sd": -1.0}, "sd must be positive, got -1"),
    ({"sd": 1.0, "precision": 1.0}, "give sd= or precision=, not both"),
])
def test_bad_input_names_variable_and_value(kwargs, match):
    with fg.Model("bad"):
        n = fg.plate("n", 3)
        with pytest.raises(fg.ModelError, match=match) as err:
            fg.lognormal("size", mu=0.0, plates=[n], **kwargs)
        assert "'size'" in str(err.value)
