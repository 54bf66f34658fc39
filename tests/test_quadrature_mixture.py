"""QuadratureMixture: Σ_g w_g q_g over the nodes of a quadrature."""

import numpy as np
import pytest
from scipy import stats

from distributions import Gaussian, QuadratureMixture


def test_moments_logpdf_and_draws():
    w = np.array([0.2, 0.5, 0.3])
    comps = [Gaussian(np.array([m, -m]), np.array([1.0, 2.0]) * (1 + k)) for k, m in enumerate([-1.0, 0.5, 3.0])]
    q = QuadratureMixture(w, comps)
    means = np.array([c.mean() for c in comps])
    vars_ = np.array([c.var() for c in comps])
    np.testing.assert_allclose(q.mean(), w @ means)
    np.testing.assert_allclose(q.var(), w @ (vars_ + means**2) - (w @ means) ** 2)
    x = np.array([0.3, -2.0])
    ref = np.log(sum(wk * stats.norm(c.mean(), np.sqrt(c.var())).pdf(x) for wk, c in zip(w, comps, strict=True)))
    np.testing.assert_allclose(q.logpdf(x), ref, rtol=1e-12)
    nodes = np.array([0, 2, 2, 1])
    d = q.sample_at(nodes, rng=0)
    assert d.shape == (4, 2)
    big = q.sample(200_000, rng=np.random.default_rng(1))
    np.testing.assert_allclose(big.mean(0), q.mean(), atol=5 * np.sqrt(q.var() / 200_000).max())


def test_bad_input():
    g = Gaussian(np.zeros(2), np.ones(2))
    with pytest.raises(ValueError, match="one non-negative weight per component"):
        QuadratureMixture([0.5, 0.5], [g])
    with pytest.raises(ValueError, match="components differ in shape"):
        QuadratureMixture([0.5, 0.5], [g, Gaussian(0.0, 1.0)])


def test_entropy_estimate():
    """A mixture of one repeated Gaussian is that Gaussian: the estimate agrees with its closed-form entropy
    within a few standard errors, and ``entropy()`` is deterministic."""
    g = Gaussian(np.array([0.0, 2.0]), np.array([1.0, 4.0]))
    q = QuadratureMixture([0.4, 0.6], [g, g])
    est, se = q.entropy_estimate(50_000, rng=1)
    assert np.all(np.abs(est - g.entropy()) < 5 * se)
    assert np.array_equal(q.entropy(), q.entropy())
    two = QuadratureMixture([0.5, 0.5], [Gaussian(-3.0, 0.01), Gaussian(3.0, 0.01)])  # far apart: H = H_g + log 2
    est, se = two.entropy_estimate(50_000, rng=2)
    assert abs(est - (Gaussian(0.0, 0.01).entropy() + np.log(2.0))) < 5 * se + 1e-9
