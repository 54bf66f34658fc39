"""fg.uniform_scale: σ ~ U(0, U), whose posterior over λ = σ⁻² is a Gamma truncated to λ > U⁻².

The truncated Gamma's normaliser, moments and entropy are checked against scipy.integrate.quad on a grid;
on the conjugate model (Gaussian data with a known mean) the fitted q is the exact posterior and the ELBO
the exact log evidence (a quad integral over σ); the ELBO is monotone when the mean is unknown too.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, special

import factorgraph as fg
from distributions import InverseSqrtGamma, TruncatedGamma

GRID = [(a, b, c) for a in (-2.5, -0.5, 0.3, 1.0, 4.0, 60.0, 2e3) for b in (0.01, 1.0, 50.0) for c in (1e-3, 0.4, 30.0)]


def _quad_moments(a, b, c):
    """log Z, E[λ], Var[λ], E[log λ], E[λ^(−1/2)] and the entropy of λ^(a−1)e^(−bλ) on λ > c, by quad in
    u = log λ (the integrand exp(a u − b eᵘ) is unimodal; its peak is a breakpoint)."""
    ustar = max(np.log(a / b) if a > 0 else -np.inf, np.log(c))
    fmax = a * ustar - b * np.exp(ustar)
    sd = 1.0 / np.sqrt(max(a, b * c, 1e-3))
    hi = ustar + 1.0
    while a * hi - b * np.exp(hi) > fmax - 80.0:
        hi += 1.0
    pts = [x for x in (ustar + sd, ustar + 3 * sd, ustar + 10 * sd) if x < hi]

    def q(fn):
        return integrate.quad(lambda u: fn(u) * np.exp(a * u - b * np.exp(u) - fmax), np.log(c), hi, points=pts,
                              limit=2000, epsabs=0.0, epsrel=1e-13)[0]

    z = q(lambda u: 1.0)
    m = q(np.exp) / z
    var = q(lambda u: (np.exp(u) - m) ** 2) / z
    ml = q(lambda u: u) / z
    mhalf = q(lambda u: np.exp(-0.5 * u)) / z
    logz = fmax + np.log(z)
    ent = logz - (a - 1) * ml + b * m
    return logz, m, var, ml, mhalf, ent


@pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")
@pytest.mark.parametrize(("a", "b", "c"), GRID, ids=[f"a{a:g}-b{b:g}-c{c:g}" for a, b, c in GRID])
def test_moments_match_quadrature(a, b, c):
    q = TruncatedGamma(shape=a, rate=b, lower=c)
    logz, m, var, ml, mhalf, ent = _quad_moments(a, b, c)
    assert abs(q.log_partition() - logz) <= 1e-10 * max(1.0, abs(logz))
    assert abs(q.mean() - m) <= 1e-10 * m
    assert abs(q.var() - var) <= 1e-10 * var
    assert abs(q.mean_log() - ml) <= 1e-10 * max(1.0, abs(ml))
    assert abs(q.moment(-0.5) - mhalf) <= 1e-10 * mhalf
    assert abs(q.entropy() - ent) <= 1e-10 * max(1.0, abs(ent))
    # E[λ] = a/b + c^a b^(a−1) e^(−bc)/Γ(a, bc) (integration by parts; for a < 0 the two terms cancel,
    # so the closed form itself carries a rounding error of order 1e-16·|a/b|)
    closed = a / b + np.exp(a * np.log(c) + (a - 1) * np.log(b) - b * c - logz - a * np.log(b))
    assert abs(q.mean() - closed) <= 1e-10 * m + 1e-14 * abs(a / b)
    if a > 0:  # Γ(a, bc) = Γ(a) Q(a, bc) where scipy's regularised function does not underflow
        qreg = special.gammaincc(a, b * c)
        if qreg > 1e-250:
            assert abs(q.log_partition() - (special.gammaln(a) + np.log(qreg) - a * np.log(b))) <= 1e-10 * max(
                1.0, abs(logz))


def test_pareto_limit_and_untruncated_limit():
    """b = 0 is the Pareto law; c → 0 recovers the Gamma."""
    q = TruncatedGamma(shape=-2.5, rate=0.0, lower=0.3)
    assert abs(q.mean() - 0.3 * 2.5 / 1.5) < 1e-14 and abs(q.mean_log() - (np.log(0.3) + 1 / 2.5)) < 1e-14
    val = integrate.quad(lambda x: -np.exp(q.logpdf(x)) * q.logpdf(x), 0.3, np.inf, epsrel=1e-13)[0]
    assert abs(q.entropy() - val) < 1e-10
    from distributions import Gamma

    g, t = Gamma(shape=3.0, rate=2.0), TruncatedGamma(shape=3.0, rate=2.0, lower=1e-12)
    np.testing.assert_allclose([t.mean(), t.var(), t.mean_log(), t.entropy()],
                               [g.mean(), g.var(), g.mean_log(), g.entropy()], rtol=1e-11)


def test_expected_stats_are_the_log_partition_gradient():
    """E[u] = ∇κ(η) (central differences), the identity the ELBO's entropy term rests on."""
    q = TruncatedGamma(shape=np.array([0.7, 5.0, -1.5]), rate=np.array([2.0, 0.3, 4.0]),
                       lower=np.array([0.5, 20.0, 0.1]))
    h = 1e-6
    for i in range(2):
        up = [n.copy() for n in q.natural]
        dn = [n.copy() for n in q.natural]
        up[i] += h
        dn[i] -= h
        fd = (TruncatedGamma.from_natural(*up, lower=q.lower).log_partition()
              - TruncatedGamma.from_natural(*dn, lower=q.lower).log_partition()) / (2 * h)
        np.testing.assert_allclose(q.expected_stats()[i], fd, rtol=1e-7)


def test_sampling_quantiles_and_sigma_scale():
    q = TruncatedGamma(shape=np.array([2.5, -0.5, 2.0]), rate=np.array([1.5, 0.7, 3.0]),
                       lower=np.array([0.4, 0.3, 5.0]))
    draws = q.sample(100_000, rng=0)
    assert np.all(draws > q.lower)
    np.testing.assert_allclose(draws.mean(0), q.mean(), rtol=0.02)
    np.testing.assert_allclose(np.log(draws).mean(0), q.mean_log(), atol=0.01)
    np.testing.assert_allclose(q.sf(q.isf(0.3)), 0.3, rtol=1e-10)
    s = InverseSqrtGamma(q)
    for i in range(3):
        one = InverseSqrtGamma(q[i])
        up = float(q.lower[i]) ** -0.5
        m = integrate.quad(lambda x, one=one: x * np.exp(one.logpdf(x)), 0, up, epsrel=1e-12)[0]
        np.testing.assert_allclose(s.mean()[i], m, rtol=1e-9)
        assert abs(integrate.quad(lambda x, one=one: np.exp(one.logpdf(x)), 0, float(one.median()))[0] - 0.5) < 1e-8
    lo, hi = s.interval(0.9)
    assert np.all(hi < q.lower**-0.5)


def _known_mean_model(y, upper):
    with fg.Model("noise") as m:
        n = fg.plate("n", len(y))
        s = fg.uniform_scale("sigma", upper=upper)
        fg.gaussian("y", 0.0, sd=s, plates=[n], observed=y)
    return m


@pytest.mark.parametrize("upper", [2.0, 20.0])
def test_conjugate_case_is_exact(upper):
    """y_i ~ N(0, σ²), σ ~ U(0, U): p(λ | y) = TruncatedGamma(n/2 − 1/2, S/2, U⁻²) exactly, so the fitted q is
    that posterior and the ELBO is log p(y) (computed here by quad over σ) to 1e-10.  With U = 2 the
    truncation binds (the data's sd is about 1.8)."""
    y = np.random.default_rng(4).normal(0.0, 1.8, size=12)
    for alg in (fg.VMP(), fg.NCVMP()):
        r = fg.infer(_known_mean_model(y, upper), alg)
        q = r.posteriors["sigma"]
        assert isinstance(q, TruncatedGamma)
        a, b = len(y) / 2 - 0.5, np.sum(y * y) / 2
        np.testing.assert_allclose([q.shape, q.rate, q.lower], [a, b, upper**-2], rtol=1e-12)

        def lik(s):
            return np.sum(-0.5 * np.log(2 * np.pi * s * s) - 0.5 * y * y / (s * s)) - np.log(upper)

        peak = lik(np.sqrt(np.mean(y * y)))
        z = integrate.quad(lambda s, peak=peak: np.exp(lik(s) - peak), 0, upper, points=[np.sqrt(np.mean(y * y))],
                           epsabs=0, epsrel=1e-13, limit=500)[0]
        assert abs(r.elbo - (peak + np.log(z))) <= 1e-10 * abs(r.elbo)
        assert r.posterior("sigma").interval(0.999)[1] < upper


def test_elbo_monotone_with_unknown_mean():
    rng = np.random.default_rng(2)
    y = 3.0 + 0.8 * rng.normal(size=30)
    with fg.Model("noise") as m:
        n = fg.plate("n", len(y))
        mu = fg.gaussian("mu", 0.0, sd=10.0)
        s = fg.uniform_scale("sigma", upper=5.0)
        fg.gaussian("y", mean=mu, sd=s, plates=[n], observed=y)
    r = fg.infer(m, fg.VMP(), tol=1e-12)
    assert r.converged
    t = np.asarray(r.elbo_trace)
    assert len(t) > 3 and np.all(np.diff(t) >= -1e-9 * np.abs(t[1:]))
    lo, hi = r.posterior("sigma").interval(0.99)
    assert lo < 0.8 < hi


def test_hierarchical_group_scale():
    """A plated uniform scale as a group sd (eight-schools shape): runs under NCVMP, σ stays below U."""
    y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
    s = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
    with fg.Model("schools") as m:
        j = fg.plate("school", 8)
        mu = fg.gaussian("mu", 0.0, sd=5.0)
        tau = fg.uniform_scale("tau", upper=10.0)
        theta = fg.gaussian("theta", mean=mu, sd=tau, plates=[j])
        fg.gaussian("y", mean=theta, sd=s, plates=[j], observed=y)
    r = fg.infer(m, fg.NCVMP())
    assert r.converged and np.isfinite(r.elbo)
    assert 0 < r.posterior("tau").mean() < 10.0
    draws = r.sample(200)["tau"]
    assert np.all(draws < 10.0)
    table = r.summary()
    assert table.loc["tau"].iloc[3] < 10.0  # the upper quantile, on the σ scale
    prior = fg.sample_prior(m, draws=20_000, seed=1)["tau"]
    assert prior.max() < 10.0 and abs(prior.mean() - 5.0) < 0.1  # U(0, 10)


@pytest.mark.parametrize(("upper", "match"), [(0.0, r"'sigma': upper must be positive, got 0.0"),
                                              (-1.0, r"'sigma': upper must be positive, got -1.0"),
                                              (np.inf, r"'sigma': upper"), (np.nan, r"'sigma': upper")])
def test_bad_input(upper, match):
    with fg.Model("bad"), pytest.raises(fg.ModelError, match=match):
        fg.uniform_scale("sigma", upper=upper)
