"""GridDensity: a piecewise log-linear density in u = log x on a uniform grid."""

import math

import numpy as np
import pytest
from scipy import integrate

from distributions import GridDensity


def _q():
    u = np.linspace(-6.0, 4.0, 41)
    return GridDensity(u, 2.0 * u - 0.5 * np.exp(2 * u)), u


def _density_u(q, u, nodes):
    """The interpolant's density of u, normalised (what the class defines)."""
    lw = np.interp(u, nodes, q._lw)
    return math.exp(lw) / q._z


def test_moments_cdf_ppf_against_numerical_integration():
    q, nodes = _q()
    mass = integrate.quad(lambda u: _density_u(q, u, nodes), nodes[0], nodes[-1], points=list(nodes[1:-1]),
                          limit=200, epsabs=0, epsrel=1e-12)[0]
    assert abs(mass - 1.0) < 1e-10
    for k in (1.0, 2.0, -1.0):
        ref = integrate.quad(lambda u, k=k: math.exp(k * u) * _density_u(q, u, nodes), nodes[0], nodes[-1],
                             points=list(nodes[1:-1]), limit=200, epsabs=0, epsrel=1e-12)[0]
        assert q.moment(k) == pytest.approx(ref, rel=1e-9)
    for x in (0.05, 0.7, 1.0, 3.0):
        ref = integrate.quad(lambda u: _density_u(q, u, nodes), nodes[0], math.log(x),  # noqa: B023
                             points=[p for p in nodes[1:-1] if p < math.log(x)], limit=200, epsabs=0, epsrel=1e-12)[0]
        assert float(q.cdf(x)) == pytest.approx(ref, abs=1e-11)
    p = np.array([1e-6, 0.1, 0.5, 0.9, 0.999])
    np.testing.assert_allclose(q.cdf(q.ppf(p)), p, atol=1e-12)
    lo, hi = q.interval(0.8)
    assert float(q.cdf(hi) - q.cdf(lo)) == pytest.approx(0.8, abs=1e-12)
    x = 1.3
    assert float(q.logpdf(x)) == pytest.approx(math.log(_density_u(q, math.log(x), nodes)) - math.log(x), abs=1e-12)


def test_sampling_and_entropy():
    q, nodes = _q()
    d = q.sample(100_000, rng=np.random.default_rng(0))
    assert abs(d.mean() - float(q.mean())) < 5 * float(q.std()) / math.sqrt(d.size)
    ref = integrate.quad(lambda x: -math.exp(q.logpdf(x)) * q.logpdf(x), math.exp(nodes[0]), math.exp(nodes[-1]),
                         points=list(np.exp(nodes[1:-1])), limit=400, epsrel=1e-10)[0]
    assert float(q.entropy()) == pytest.approx(ref, abs=1e-4)


def test_bad_input():
    with pytest.raises(ValueError, match="increasing nodes"):
        GridDensity([0.0, 0.0, 1.0], [0.0, 0.0, 0.0])
