"""models.local_level, models.linear_state_space and state_space_predictive."""

from __future__ import annotations

import numpy as np
import pytest

import factorgraph as fg
from factorgraph import models


def _lgssm(rng, T=200):
    A = np.array([[0.95, 0.2], [-0.2, 0.95]])
    C = rng.normal(size=(4, 2))
    x = np.zeros((T, 2))
    for t in range(1, T):
        x[t] = A @ x[t - 1] + rng.normal(size=2)
    return A, C, x @ C.T + 0.5 * rng.normal(size=(T, 4))


def test_local_level_recovers_variances_and_forecasts():
    rng = np.random.default_rng(0)
    level = np.cumsum(rng.normal(0.0, 1.0, 400))
    y = level + rng.normal(0.0, 2.0, 400)
    y[50:55] = np.nan  # missing years: their levels are interpolated
    r = models.local_level(y)
    assert r.converged
    np.testing.assert_allclose(1.0 / r.posterior("tau_obs").mean(), 4.0, rtol=0.3)
    np.testing.assert_allclose(1.0 / r.posterior("tau_level").mean(), 1.0, rtol=0.4)
    p = models.state_space_predictive(r, steps=3)
    assert p.state_mean.shape == (403, 1) and p.obs_var.shape == (403, 1)
    assert np.all(np.isfinite(p.state_mean[50:55]))
    # a random walk's forecast: flat mean, variance growing by E[1/τ_level] per step
    np.testing.assert_allclose(p.state_mean[-3:, 0], p.state_mean[399, 0])
    np.testing.assert_allclose(np.diff(p.state_cov[399:, 0, 0]), 1.0 / (r.posterior("tau_level").shape - 1)
                               * r.posterior("tau_level").rate, rtol=1e-10)
    assert np.all(p.obs_var > p.state_cov[:, :, 0])


def test_linear_state_space_finds_the_dynamics_and_prunes_a_spare_dimension():
    """Three state dimensions for data from two: the ARD prior switches the third off, and the learned A has
    the true eigenvalues (A is identified only up to a rotation)."""
    rng = np.random.default_rng(1)
    A, C, y = _lgssm(rng)
    r = models.linear_state_space(y, 3, max_iter=1500)
    trace = np.asarray(r.elbo_trace)
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))
    gam = np.sort(r.posterior("gamma").mean())
    assert gam[-1] > 100 * gam[1]  # one column of C switched off
    ev = np.linalg.eigvals(r.posterior("A").mean())
    ev = ev[np.argsort(-np.abs(ev))][:2]
    np.testing.assert_allclose(np.sort_complex(ev), np.sort_complex(np.linalg.eigvals(A)), atol=0.05)
    np.testing.assert_allclose(1.0 / r.posterior("tau_obs").mean(), 0.25, rtol=0.3)
    p = models.state_space_predictive(r, steps=2)
    assert p.obs_mean.shape == (202, 4)
    resid = y - p.obs_mean[:200]
    assert np.mean(resid**2) < 0.35


@pytest.mark.parametrize(("call", "match"), [
    (lambda: models.local_level(np.zeros((3, 2))), "local_level: y must be one series"),
    (lambda: models.local_level([np.nan, np.nan]), "local_level: y has no observed value"),
    (lambda: models.linear_state_space(np.ones((5, 2)), 0), "linear_state_space: state_dim"),
    (lambda: models.local_level([1.0, np.inf]), "local_level: y has an infinite value"),
])
def test_bad_input(call, match):
    with pytest.raises(fg.ModelError, match=match):
        call()
