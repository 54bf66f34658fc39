"""fg.zero_inflated_poisson: E_q[log f] against numerical integration, the NCVMP fixed point and ELBO against an
independent coordinate ascent in numpy, the pointwise log density, and refusals of bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import factorgraph as fg
from distributions import Gaussian, Poisson
from factors.zero_inflated import ZERO_INFLATED_POISSON_LOG, zero_inflated_evidence, zero_inflated_logpdf
from tests.reference.ncvmp_regression import gauss_hermite, ncvmp_fit, quad_expectation


def _log_f(y, x, p, le):
    mu = np.exp(x + le)
    with np.errstate(divide="ignore"):
        return np.logaddexp(np.log(p * (y == 0)), np.log1p(-p) + stats.poisson.logpmf(y, mu))


@pytest.mark.parametrize("y", [0, 1, 7])
@pytest.mark.parametrize("p", [0.0, 0.05, 0.6])
def test_expected_log_likelihood_matches_quadrature(y, p):
    assert ZERO_INFLATED_POISSON_LOG.get_evidence()[1] == "exact"
    for m in (-2.0, 0.5, 2.0):
        for v in (1e-4, 0.3, 1.5):
            q = Gaussian(mean=np.array([m]), var=np.array([v]))
            moments = {"out": Poisson.observed_stats(np.array([y])), "log_rate": q.expected_stats()}
            got = zero_inflated_evidence(moments, {"zero_prob": p, "log_exposure": -0.3})[0]
            ref = quad_expectation(lambda x: _log_f(y, x, p, -0.3), m, v)
            assert got == pytest.approx(ref, rel=1e-9, abs=1e-9), (m, v)


def test_pointwise_log_density_is_the_pmf():
    x = np.linspace(-3, 3, 7)
    for y in (0, 2):
        np.testing.assert_allclose(zero_inflated_logpdf(np.full(7, y), x, 0.25, 0.1), _log_f(y, x, 0.25, 0.1),
                                   rtol=1e-12)


def _zip_terms(y, p):
    z, w = gauss_hermite(200)

    def terms(m, v):
        x = m[:, None] + np.sqrt(v)[:, None] * z
        mu = np.exp(x)
        f0 = p + (1 - p) * np.exp(-mu)
        g = _log_f(y[:, None], x, p, 0.0)
        d1 = np.where(y[:, None] > 0, y[:, None] - mu, -mu * (1 - p) * np.exp(-mu) / f0)
        d2 = np.where(y[:, None] > 0, -mu, d1 * (1 - mu) - d1 * d1)
        return g @ w, d1 @ w, 0.5 * (d2 @ w)

    return terms


def test_fixed_point_and_elbo_match_independent_coordinate_ascent():
    rng = np.random.default_rng(5)
    N = 60
    X = np.c_[np.ones(N), rng.normal(size=N)]
    p = 0.3
    y = np.where(rng.random(N) < p, 0, rng.poisson(np.exp(X @ [1.0, 0.4]))).astype(float)
    prec0 = np.diag([0.5, 2.0])
    with fg.Model("zip") as model:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=np.zeros(2), precision=prec0)
        fg.zero_inflated_poisson("y", log_rate=fg.inner(X, w, plates=[n]), zero_prob=p, observed=y)
    r = fg.infer(model, fg.NCVMP(), tol=1e-14, param_tol=1e-13, max_iter=500)
    mu_ref, cov_ref, elbo_ref = ncvmp_fit(X, np.zeros(2), prec0, _zip_terms(y, p))
    q = r.posterior("w")
    np.testing.assert_allclose(q.mean(), mu_ref, atol=1e-8)
    np.testing.assert_allclose(q.cov(), cov_ref, atol=1e-8)
    assert r.elbo == pytest.approx(elbo_ref, abs=1e-8)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"observed": [1, -2, 3]}, "non-negative integers, got -2"),
    ({"observed": [1, 0.5, 3]}, "non-negative integers, got 0.5"),
    ({"zero_prob": 1.5}, r"zero_prob must lie in \[0, 1\], got 1.5"),
    ({"zero_prob": -0.1}, r"zero_prob must lie in \[0, 1\], got -0.1"),
    ({"zero_prob": 1.0}, "zero_prob = 1 at index"),
])
def test_bad_input_names_variable_and_value(kwargs, match):
    kwargs = {"zero_prob": 0.2, "observed": [1, 2, 3], **kwargs}
    with fg.Model("bad"):
        n = fg.plate("n", 3)
        x = fg.gaussian("x", plates=[n])
        with pytest.raises(fg.ModelError, match=match) as err:
            fg.zero_inflated_poisson("counts", log_rate=x, **kwargs)
        assert "'counts'" in str(err.value)


def _beta_reference(X, y, prec0, a0, b0, iters=3000):
    """Mean-field q(w)q(p) with the zeros' Jensen bound, in plain numpy: r_n = σ(E log p − E log(1 − p) + E μ_n)
    for each zero, q(p) = Beta(a0 + Σ r, b0 + Σ(1 − r) + #positive), q(w) by an NCVMP step at those r."""
    from scipy.special import betaln, digamma

    zero = y == 0
    mu, cov = np.zeros(X.shape[1]), np.linalg.inv(prec0)
    a, b = a0, b0
    for _ in range(iters):
        m = X @ mu
        v = np.einsum("nd,de,ne->n", X, cov, X)
        rate = np.exp(m + 0.5 * v)
        e_lp, e_lq = digamma(a) - digamma(a + b), digamma(b) - digamma(a + b)
        r = np.where(zero, 1 / (1 + np.exp(-(e_lp - e_lq + rate))), 0.0)
        a, b = a0 + r.sum(), b0 + (1 - r[zero]).sum() + (~zero).sum()
        w = np.where(zero, 1 - r, 1.0)
        dm, dv = np.where(zero, 0.0, y) - w * rate, -0.5 * w * rate
        prec = prec0 - 2 * (X.T * dv) @ X
        cov_new = np.linalg.inv(prec)
        mu_new = cov_new @ (X.T @ (dm - 2 * m * dv))
        change = np.max(np.abs(mu_new - mu)) + np.max(np.abs(cov_new - cov))
        mu, cov = mu_new, cov_new
        if change < 1e-15:
            break
    for _ in range(200):  # q(p) and r at the final q(w)
        m = X @ mu
        v = np.einsum("nd,de,ne->n", X, cov, X)
        rate = np.exp(m + 0.5 * v)
        e_lp, e_lq = digamma(a) - digamma(a + b), digamma(b) - digamma(a + b)
        r = np.where(zero, 1 / (1 + np.exp(-(e_lp - e_lq + rate))), 0.0)
        a, b = a0 + r.sum(), b0 + (1 - r[zero]).sum() + (~zero).sum()
    e_lp, e_lq = digamma(a) - digamma(a + b), digamma(b) - digamma(a + b)
    s = np.where(zero, np.logaddexp(e_lp, e_lq - rate), e_lq + y * m - rate + stats.poisson.logpmf(y, 1.0) + 1.0)
    kl_beta = (betaln(a0, b0) - betaln(a, b) + (a - a0) * e_lp + (b - b0) * e_lq)
    d = len(mu)
    kl_w = 0.5 * (np.trace(prec0 @ cov) + mu @ prec0 @ mu - d - np.linalg.slogdet(prec0)[1] - np.linalg.slogdet(cov)[1])
    return mu, cov, (a, b), s.sum() - kl_beta - kl_w


def test_beta_zero_probability_matches_independent_coordinate_ascent():
    """With a Beta p the zeros' term is a bound (labelled so), conjugate in p."""
    from factors.zero_inflated import ZERO_INFLATED_POISSON_LOG_BETA

    assert ZERO_INFLATED_POISSON_LOG_BETA.get_evidence()[1] == "bound"
    rng = np.random.default_rng(6)
    N = 80
    X = np.c_[np.ones(N), rng.normal(size=N)]
    y = np.where(rng.random(N) < 0.3, 0, rng.poisson(np.exp(X @ [1.0, 0.4]))).astype(float)
    prec0 = np.diag([0.5, 2.0])
    with fg.Model("zip-beta") as model:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=np.zeros(2), precision=prec0)
        p = fg.beta("p", 2.0, 3.0)
        fg.zero_inflated_poisson("y", log_rate=fg.inner(X, w, plates=[n]), zero_prob=p, observed=y)
    # a fixed number of sweeps: the ELBO is stationary in q(p), so it settles (to 1e-13) before q(p) does (1e-8)
    r = fg.infer(model, fg.NCVMP(), tol=None, param_tol=None, max_iter=150)
    mu_ref, cov_ref, (a, b), elbo_ref = _beta_reference(X, y, prec0, 2.0, 3.0)
    np.testing.assert_allclose(r.posterior("w").mean(), mu_ref, atol=1e-8)
    np.testing.assert_allclose(r.posterior("w").cov(), cov_ref, atol=1e-8)
    q = r.posterior("p")
    assert q.alpha == pytest.approx(a, abs=1e-7) and q.beta == pytest.approx(b, abs=1e-7)
    assert r.elbo == pytest.approx(elbo_ref, abs=1e-8)


# ------------------------------------------------------------------------------------ a Gamma rate
def _rate_integrand(u, p, a, mean):
    return (np.logaddexp(np.log(p), np.log1p(-p) - np.exp(u + 0.3))
            * np.exp(stats.gamma.logpdf(np.exp(u), a, scale=mean / a) + u))


@pytest.mark.parametrize("p", [1e-4, 0.3, 0.9])
def test_gamma_rate_zeros_match_quadrature(p):
    from scipy import integrate

    from distributions import Gamma
    from factors.zero_inflated_gamma import ZERO_INFLATED_POISSON, zero_inflated_rate_evidence

    assert ZERO_INFLATED_POISSON.get_evidence()[1] == "exact"
    for a in (0.5, 3.0, 200.0):
        for mean in (0.2, 3.0, 30.0):
            q = Gamma(shape=a, rate=a / mean)
            moments = {"out": Poisson.observed_stats(np.array([0])),
                       "rate": tuple(np.atleast_1d(s) for s in q.expected_stats())}
            got = zero_inflated_rate_evidence(moments, {"zero_prob": p, "log_exposure": 0.3})[0]
            lo, hi = np.log(mean) - (80 / a + 20), np.log(stats.gamma.isf(1e-17, a, scale=mean / a))
            ref = integrate.quad(_rate_integrand, lo, hi, args=(p, a, mean), epsabs=1e-13, epsrel=1e-13, limit=800,
                                 points=[np.log(mean)])[0]
            assert got == pytest.approx(ref, rel=1e-10, abs=1e-10), (a, mean)


def _rate_reference(y, p, a0, b0, iters=300):
    """q(λ) = Gam(a, b) for counts y_n ~ ZIP(p, λ), λ ~ Gam(a0, b0), in plain numpy: NCVMP in λ's statistics, the
    gradient of S(a, b) = Σ_n E[log f_n] got from ∂/∂a E[h] = E[h(log λ − ψ(a) + log b)], ∂/∂b E[h] = E[h(a/b − λ)]
    (a dense trapezoid in log λ) through the Jacobian of (a, b) ↦ (a/b, ψ(a) − log b)."""
    from scipy.special import digamma, gammaln, polygamma

    def parts(a, b):
        u = np.linspace(np.log(a / b) - 10 / np.sqrt(a) - 3, np.log(a / b) + 10 / np.sqrt(a) + 1, 1500)
        lam = np.exp(u)
        dens = np.exp(stats.gamma.logpdf(lam, a, scale=1 / b) + u)
        dens /= np.trapezoid(dens, u)
        logf = _log_f(y[:, None], np.log(lam)[None, :], p, 0.0).sum(0)
        e = lambda f: np.trapezoid(f * dens, u)  # noqa: E731
        return e(logf), e(logf * (u - digamma(a) + np.log(b))), e(logf * (a / b - lam))

    a, b = a0, b0
    for _ in range(iters):
        _, da, db = parts(a, b)
        J = np.array([[1 / b, -a / b**2], [polygamma(1, a), -1 / b]])
        g_lam, g_log = np.linalg.solve(J.T, [da, db])
        a_new, b_new = a0 + g_log, b0 - g_lam
        if abs(a_new - a) + abs(b_new - b) < 1e-13 * a:
            a, b = a_new, b_new
            break
        a, b = a_new, b_new
    s = parts(a, b)[0]
    kl = (a - a0) * digamma(a) - gammaln(a) + gammaln(a0) + a0 * (np.log(b) - np.log(b0)) + a * (b0 - b) / b
    return a, b, s - kl


def test_gamma_rate_matches_independent_coordinate_ascent():
    rng = np.random.default_rng(12)
    y = np.where(rng.random(60) < 0.3, 0, rng.poisson(4.0, 60)).astype(float)
    with fg.Model("zip-rate") as model:
        n = fg.plate("n", 60)
        lam = fg.gamma("lam", 1.0, 0.1)
        fg.zero_inflated_poisson("y", rate=lam, zero_prob=0.3, plates=[n], observed=y)
    r = fg.infer(model, fg.NCVMP(), tol=None, param_tol=None, max_iter=60)
    a, b, elbo = _rate_reference(y, 0.3, 1.0, 0.1)
    q = r.posterior("lam")
    assert q.shape == pytest.approx(a, rel=1e-8) and q.rate == pytest.approx(b, rel=1e-8)
    assert r.elbo == pytest.approx(elbo, abs=1e-8)


def test_gamma_rate_and_beta_zero_probability_match_closed_form_coordinate_ascent():
    """Beta p and Gamma λ: the zeros' Jensen bound makes both conjugate; plain numpy coordinate ascent on
    (r, q(p), q(λ)) reaches the same fixed point and bound."""
    from scipy.special import betaln, digamma, gammaln

    from factors.zero_inflated_gamma import ZERO_INFLATED_POISSON_BETA

    assert ZERO_INFLATED_POISSON_BETA.get_evidence()[1] == "bound"
    rng = np.random.default_rng(13)
    y = np.where(rng.random(70) < 0.3, 0, rng.poisson(4.0, 70)).astype(float)
    with fg.Model("zip-rate-beta") as model:
        n = fg.plate("n", 70)
        lam = fg.gamma("lam", 1.0, 0.1)
        p = fg.beta("p", 2.0, 2.0)
        fg.zero_inflated_poisson("y", rate=lam, zero_prob=p, plates=[n], observed=y)
    r = fg.infer(model, tol=None, param_tol=None, max_iter=200)
    zero = y == 0
    a, b, al, be = 1.0, 0.1, 2.0, 2.0
    for _ in range(2000):
        e_lp, e_lq = digamma(al) - digamma(al + be), digamma(be) - digamma(al + be)
        rr = 1 / (1 + np.exp(-(e_lp - e_lq + a / b)))
        al, be = 2.0 + zero.sum() * rr, 2.0 + zero.sum() * (1 - rr) + (~zero).sum()
        a, b = 1.0 + y.sum(), 0.1 + zero.sum() * (1 - rr) + (~zero).sum()
    e_lp, e_lq = digamma(al) - digamma(al + be), digamma(be) - digamma(al + be)
    e_lam, e_loglam = a / b, digamma(a) - np.log(b)
    s = np.where(zero, np.logaddexp(e_lp, e_lq - e_lam), e_lq + y * e_loglam - e_lam - gammaln(y + 1)).sum()
    kl_lam = (a - 1.0) * digamma(a) - gammaln(a) + gammaln(1.0) + 1.0 * (np.log(b) - np.log(0.1)) + a * (0.1 - b) / b
    kl_p = betaln(2.0, 2.0) - betaln(al, be) + (al - 2.0) * e_lp + (be - 2.0) * e_lq
    assert r.posterior("lam").shape == pytest.approx(a, rel=1e-10)
    assert r.posterior("lam").rate == pytest.approx(b, rel=1e-10)
    assert r.posterior("p").alpha == pytest.approx(al, rel=1e-10)
    assert r.elbo == pytest.approx(s - kl_lam - kl_p, abs=1e-8)


def test_rate_and_log_rate_exclusive():
    with fg.Model("bad"):
        lam = fg.gamma("lam", 1.0, 1.0)
        x = fg.gaussian("x")
        with pytest.raises(fg.ModelError, match="one of them"):
            fg.zero_inflated_poisson("counts", rate=lam, log_rate=x, zero_prob=0.2, observed=[1, 0])
        with pytest.raises(fg.ModelError, match="rate must be a Gamma variable"):
            fg.zero_inflated_poisson("counts", rate=2.0, zero_prob=0.2, observed=[1, 0])
