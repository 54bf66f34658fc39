"""fg.negative_binomial: E_q[log f] against numerical integration, the model's NCVMP fixed point and ELBO against an
independent coordinate ascent in numpy, and its refusals of bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import factorgraph as fg
from distributions import Gaussian, Poisson
from factors.negative_binomial import NEGATIVE_BINOMIAL_LOG, negative_binomial_evidence
from tests.reference.ncvmp_regression import gauss_hermite, ncvmp_fit, quad_expectation


def _log_f(y, x, phi, le):
    mu = np.exp(x + le)
    return stats.nbinom.logpmf(y, phi, phi / (phi + mu))


@pytest.mark.parametrize("y", [0, 3, 40])
@pytest.mark.parametrize("phi", [0.3, 2.0, 50.0])
def test_expected_log_likelihood_matches_quadrature(y, phi):
    assert NEGATIVE_BINOMIAL_LOG.get_evidence()[1] == "exact"
    for m in (-2.0, 0.5, 3.0):
        for v in (1e-4, 0.3, 2.5):
            le = 0.4
            q = Gaussian(mean=np.array([m]), var=np.array([v]))
            moments = {"out": Poisson.observed_stats(np.array([y])), "log_mean": q.expected_stats()}
            got = negative_binomial_evidence(moments, {"dispersion": phi, "log_exposure": le})[0]
            ref = quad_expectation(lambda x: _log_f(y, x, phi, 0.4), m, v)
            assert got == pytest.approx(ref, rel=1e-9, abs=1e-9), (m, v)


def _nb_terms(y, phi, le):
    z, w = gauss_hermite(200)

    def terms(m, v):
        x = m[:, None] + np.sqrt(v)[:, None] * z
        c = le[:, None] - np.log(phi)
        sig = 1.0 / (1.0 + np.exp(-(x + c)))
        g = _log_f(y[:, None], x, phi, le[:, None])
        d1 = y[:, None] - (y[:, None] + phi) * sig
        d2 = -(y[:, None] + phi) * sig * (1 - sig)
        return g @ w, d1 @ w, 0.5 * (d2 @ w)  # Price's theorem: ∂E[g]/∂v = ½E[g″]

    return terms


def test_fixed_point_and_elbo_match_independent_coordinate_ascent():
    rng = np.random.default_rng(3)
    N = 40
    X = np.c_[np.ones(N), rng.normal(size=N)]
    expo = rng.uniform(0.5, 2.0, N)
    phi = 1.7
    mu = expo * np.exp(X @ [0.8, 0.6])
    y = rng.negative_binomial(phi, phi / (phi + mu)).astype(float)
    prec0 = np.diag([0.5, 2.0])
    with fg.Model("nb") as model:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=np.zeros(2), precision=prec0)
        fg.negative_binomial("y", log_mean=fg.inner(X, w, plates=[n]), dispersion=phi, exposure=expo, observed=y)
    r = fg.infer(model, fg.NCVMP(), tol=1e-14, param_tol=1e-13, max_iter=500)
    mu_ref, cov_ref, elbo_ref = ncvmp_fit(X, np.zeros(2), prec0, _nb_terms(y, phi, np.log(expo)))
    q = r.posterior("w")
    np.testing.assert_allclose(q.mean(), mu_ref, atol=1e-8)
    np.testing.assert_allclose(q.cov(), cov_ref, atol=1e-8)
    assert r.elbo == pytest.approx(elbo_ref, abs=1e-8)


def test_large_dispersion_approaches_poisson():
    rng = np.random.default_rng(4)
    y = rng.poisson(3.0, 30)

    def fit(build):
        with fg.Model("m") as model:
            n = fg.plate("n", 30)
            x = fg.gaussian("x", mean=0.0, precision=1.0)
            build(x, n)
        return fg.infer(model, fg.NCVMP(), tol=1e-13)

    nb = fit(lambda x, n: fg.negative_binomial("y", log_mean=x, dispersion=1e8, plates=[n], observed=y))
    po = fit(lambda x, n: fg.poisson_log("y", log_rate=x, plates=[n], observed=y))
    assert nb.posterior("x").mean() == pytest.approx(po.posterior("x").mean(), abs=1e-6)
    assert nb.elbo == pytest.approx(po.elbo, abs=1e-5)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"observed": [1, -2, 3]}, "non-negative integers, got -2"),
    ({"observed": [1, 2.5, 3]}, "non-negative integers, got 2.5"),
    ({"observed": [1, 2, 3], "dispersion": -1.0}, "dispersion must be positive, got -1"),
    ({"observed": [1, 2, 3], "dispersion": 0.0}, "dispersion must be positive, got 0"),
    ({"observed": [1, 2, 3], "exposure": [1.0, 0.0, 1.0]}, "exposure must be positive, got 0"),
])
def test_bad_input_names_variable_and_value(kwargs, match):
    kwargs = {"dispersion": 2.0, **kwargs}
    with fg.Model("bad"):
        n = fg.plate("n", 3)
        x = fg.gaussian("x", plates=[n])
        with pytest.raises(fg.ModelError, match=match) as err:
            fg.negative_binomial("counts", log_mean=x, **kwargs)
        assert "'counts'" in str(err.value)


def test_roaches_demo_small():
    """The negative binomial fits the roaches far better than the Poisson, by the evidence and by LOO; φ and the
    coefficients are near rstanarm's (reciprocal dispersion ≈ 0.27; Poisson GLM 3.09, 0.70, −0.52, −0.38)."""
    pytest.importorskip("arviz")
    import importlib

    out = importlib.import_module("demos.roaches").main(small=True)
    res = out["results"]
    assert out["n"] == 262 and all(r.converged for r in res.values())
    assert 0.2 < out["dispersion"] < 0.35
    np.testing.assert_allclose(res["poisson"].posterior("w").mean(), [3.089, 0.698, -0.517, -0.380], atol=5e-3)
    np.testing.assert_allclose(res["negbin"].posterior("w").mean(), [2.84, 1.31, -0.78, -0.33], atol=0.03)
    assert 0.2 < out["phi_mean"] < 0.35  # φ learned under a Gamma(1, 1) prior
    np.testing.assert_allclose(res["negbin_phi"].posterior("w").mean(), [2.84, 1.31, -0.78, -0.33], atol=0.03)
    comp = out["comparison"]
    assert comp.best() in ("negbin", "negbin_phi")
    assert res["negbin"].elbo - res["poisson"].elbo > 1000


# ------------------------------------------------------------------------------------ a Gamma dispersion
def _gamma_case(y, a, mean_phi, m, v):
    from distributions import Gamma
    from factors.negative_binomial_gamma import negative_binomial_gamma_evidence

    q = Gamma(shape=a, rate=a / mean_phi)
    moments = {"out": Poisson.observed_stats(np.array([y])),
               "log_mean": Gaussian(mean=np.array([m]), var=np.array([v])).expected_stats(),
               "dispersion": tuple(np.atleast_1d(s) for s in q.expected_stats())}
    return negative_binomial_gamma_evidence(moments, {"log_exposure": 0.2})[0]


def _gamma_integrand(u, y, a, mean_phi, m, v, z, w):
    """E_x[log f] at φ = e^u (Gauss–Hermite in x) times q's density of u = log φ."""
    return (_log_f(y, m + np.sqrt(v) * z, np.exp(u), 0.2) @ w) * np.exp(
        stats.gamma.logpdf(np.exp(u), a, scale=mean_phi / a) + u)


@pytest.mark.parametrize("a", [0.5, 3.0, 200.0])
def test_gamma_dispersion_expected_log_likelihood_matches_quadrature(a):
    from scipy import integrate

    from factors.negative_binomial_gamma import NEGATIVE_BINOMIAL_LOG_GAMMA

    assert NEGATIVE_BINOMIAL_LOG_GAMMA.get_evidence()[1] == "exact"
    z, w = gauss_hermite(120)
    for y in (0, 4, 60):
        for mean_phi in (0.3, 5.0):
            for m, v in ((-1.0, 0.05), (2.0, 0.8)):
                lo = np.log(mean_phi) - (80 / a + 20)
                hi = np.log(stats.gamma.isf(1e-17, a, scale=mean_phi / a))
                ref = integrate.quad(_gamma_integrand, lo, hi, args=(y, a, mean_phi, m, v, z, w), epsabs=1e-13,
                                     epsrel=1e-13, limit=500, points=[np.log(mean_phi)])[0]
                assert _gamma_case(y, a, mean_phi, m, v) == pytest.approx(ref, rel=1e-10, abs=1e-10)


def _gamma_reference(X, y, prec0, a0, b0, iters=50):
    """Mean-field q(w)q(φ) in plain numpy: E over φ ~ Gam(a, b) on a dense trapezoid in log φ, over x by
    Gauss–Hermite; q(w) by an NCVMP step; q(φ) by the NCVMP message, the gradient in (E[φ], E[log φ]) got from
    ∂/∂a E[h] = E[h(log φ − ψ(a) + log b)], ∂/∂b E[h] = E[h(a/b − φ)] through the Jacobian of (a, b) ↦ (a/b,
    ψ(a) − log b)."""
    from scipy.special import digamma, gammaln, polygamma

    z, wz = gauss_hermite(40)
    mu, cov = np.zeros(X.shape[1]), np.linalg.inv(prec0)
    a, b = a0, b0

    def expectations(mu, cov, a, b):
        m = X @ mu
        v = np.einsum("nd,de,ne->n", X, cov, X)
        u = np.linspace(np.log(a / b) - 6 / np.sqrt(a) - 3, np.log(a / b) + 6 / np.sqrt(a) + 1, 400)
        phi = np.exp(u)
        dens = np.exp(stats.gamma.logpdf(phi, a, scale=1 / b) + u)
        dens /= np.trapezoid(dens, u)
        x = m[:, None, None] + np.sqrt(v)[:, None, None] * z          # rows × 1 × nodes
        t = x - np.log(phi)[None, :, None]                               # the logit of μ/(φ + μ)
        sp = np.logaddexp(0, t) @ wz                                     # E_x softplus, rows × φ
        sg = (1 / (1 + np.exp(-t))) @ wz
        sgg = ((1 / (1 + np.exp(-t))) * (1 / (1 + np.exp(t)))) @ wz
        yy = y[:, None]
        h = gammaln(yy + phi) - gammaln(phi) - yy * np.log(phi) - (yy + phi) * sp   # rows × φ
        e = lambda f: np.trapezoid(f * dens, u, axis=-1)  # noqa: E731
        S = e(h) - gammaln(y + 1) + y * m
        dm = y - e((yy + phi) * sg)
        dv = -0.5 * e((yy + phi) * sgg)
        H = h.sum(0)
        da = e(H * (u - digamma(a) + np.log(b)))
        db = e(H * (a / b - phi))
        J = np.array([[1 / b, -a / b**2], [polygamma(1, a), -1 / b]])   # ∂(E φ, E log φ)/∂(a, b)
        g_phi, g_logphi = np.linalg.solve(J.T, [da, db])
        return m, S, dm, dv, g_phi, g_logphi

    for sweep in range(iters):
        _, _, _, _, g_phi, g_logphi = expectations(mu, cov, a, b)
        if sweep > 0:  # the first sweep keeps q(φ) at its prior, as the library's first message does
            a, b = a0 + g_logphi, b0 - g_phi
        m, _, dm, dv, _, _ = expectations(mu, cov, a, b)
        cov = np.linalg.inv(prec0 - 2 * (X.T * dv) @ X)
        mu = cov @ (X.T @ (dm - 2 * m * dv))
    _, S, _, _, _, _ = expectations(mu, cov, a, b)
    kl_phi = ((a - a0) * digamma(a) - gammaln(a) + gammaln(a0) + a0 * (np.log(b) - np.log(b0))
              + a * (b0 - b) / b)
    d = len(mu)
    kl_w = 0.5 * (np.trace(prec0 @ cov) + mu @ prec0 @ mu - d - np.linalg.slogdet(prec0)[1] - np.linalg.slogdet(cov)[1])
    return mu, cov, (a, b), S.sum() - kl_phi - kl_w


def test_gamma_dispersion_matches_independent_coordinate_ascent():
    rng = np.random.default_rng(8)
    N = 40
    X = np.c_[np.ones(N), rng.normal(size=N)]
    mu = np.exp(X @ [1.0, 0.5])
    y = rng.negative_binomial(2.0, 2.0 / (2.0 + mu)).astype(float)
    prec0 = np.eye(2)
    with fg.Model("nb-gamma") as model:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=np.zeros(2), precision=prec0)
        phi = fg.gamma("phi", 2.0, 1.0)
        fg.negative_binomial("y", log_mean=fg.inner(X, w, plates=[n]), dispersion=phi, observed=y)
    r = fg.infer(model, fg.NCVMP(), tol=None, param_tol=None, max_iter=150)
    mu_ref, cov_ref, (a, b), elbo_ref = _gamma_reference(X, y, prec0, 2.0, 1.0)
    np.testing.assert_allclose(r.posterior("w").mean(), mu_ref, atol=1e-8)
    np.testing.assert_allclose(r.posterior("w").cov(), cov_ref, atol=1e-8)
    q = r.posterior("phi")
    assert q.shape == pytest.approx(a, rel=1e-8) and q.rate == pytest.approx(b, rel=1e-8)
    assert r.elbo == pytest.approx(elbo_ref, abs=1e-8)
