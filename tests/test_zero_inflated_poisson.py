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


def test_rate_must_be_given_on_the_log_scale():
    with fg.Model("bad"):
        lam = fg.gamma("lam", 1.0, 1.0)
        with pytest.raises(fg.ModelError, match="log_rate="):
            fg.zero_inflated_poisson("counts", rate=lam, zero_prob=0.2, observed=[1, 0])
