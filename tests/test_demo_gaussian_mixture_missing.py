"""The wine demo with entries hidden at random (``demos/gaussian_mixture_missing.py``) at its small size, and the
pieces it scores with: the exact fit never reads a hidden entry, and the held-out density p(x_h | x_o) of a
mixture of Student-t's equals the one from conditioning each component."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import multivariate_t

from factorgraph import models

pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def demo():
    return importlib.import_module("demos.gaussian_mixture_missing")


@pytest.fixture(scope="module")
def small(demo):
    return demo.main(small=True, seed=0)


@pytest.fixture(scope="module")
def hidden10(demo):
    """Wine, 10 % of the entries hidden (seed 1): the standardised truth, the mask and the exact fit."""
    raw, _ = demo.load()
    seen = demo.hide(raw.shape, 0.1, np.random.default_rng(1))
    truth = demo.standardise(raw, seen)
    fit = demo.fit_exact(np.where(seen, truth, np.nan), seen, restarts=1, seed=0)
    return truth, seen, fit


def test_every_fit_scored_and_exact_beats_independent_columns(small):
    for f, runs in small["runs"].items():
        for run in runs:
            exact = run["exact"]
            assert np.isfinite(exact["lpd"]) and -1.0 <= exact["ari"] <= 1.0
            # the columns are correlated: the fit's conditional density beats each column's own N(0, 1) clearly
            assert exact["lpd"] > run["reference"] + 0.1, f
            assert exact["converged"]
            for m in ("complete case", "mean fill"):
                if run[m] is not None:
                    assert np.isfinite(run[m]["lpd"])
    # at 30 % hidden, (0.7)^13 ≈ 1 % of the rows are complete: fewer than K, no complete-case fit
    assert small["runs"][0.3][0]["complete case"] is None
    assert small["figure"].exists()


def test_elbo_never_decreases(small):
    assert len(small["traces"]) == 5
    for trace in small["traces"]:
        assert np.min(np.diff(trace), initial=0.0) >= -1e-9 * abs(trace[-1])


def test_exact_fit_never_reads_hidden_entries(demo, hidden10):
    truth, seen, fit = hidden10
    garbage = np.where(seen, truth, 1e6)
    again = demo.fit_exact(garbage, seen, restarts=1, seed=0)
    assert again.elbo == fit.elbo and again.n_iter == fit.n_iter
    a, b = fit.posterior("theta"), again.posterior("theta")
    for attr in ("location", "scale", "dof", "beta"):
        np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr))
    np.testing.assert_array_equal(fit.posterior("z").probs, again.posterior("z").probs)


def _conditional_by_components(pred, x, o, h):
    """log p(x_h | x_o) by conditioning each Student-t component St(m, Σ, ν) (Σ = L⁻¹): weights ∝ w_k St_k(x_o);
    x_h | x_o ~ St(m_h + Σ_ho Σ_oo⁻¹ (x_o − m_o), (ν + δ²)/(ν + |o|) (Σ_hh − Σ_ho Σ_oo⁻¹ Σ_oh), ν + |o|)."""
    terms = []
    for k in range(len(pred.weights)):
        m, S, nu = pred.location[k], np.linalg.inv(pred.scale_precision[k]), pred.dof[k]
        Soo, Sho, Shh = S[np.ix_(o, o)], S[np.ix_(h, o)], S[np.ix_(h, h)]
        r = x[o] - m[o]
        delta2 = r @ np.linalg.solve(Soo, r)
        loc = m[h] + Sho @ np.linalg.solve(Soo, r)
        shape = (nu + delta2) / (nu + len(o)) * (Shh - Sho @ np.linalg.solve(Soo, Sho.T))
        log_obs = multivariate_t(m[o], Soo, df=nu).logpdf(x[o])
        log_hid = multivariate_t(loc, shape, df=nu + len(o)).logpdf(x[h])
        terms.append((np.log(pred.weights[k]) + log_obs, log_hid))
    lw = np.array([t[0] for t in terms])
    return float(logsumexp(lw + np.array([t[1] for t in terms])) - logsumexp(lw))


def test_conditional_logpdf_matches_componentwise_conditioning(demo, hidden10):
    truth, seen, fit = hidden10
    pred = models.mixture_predictive(fit, "full")
    got = demo.conditional_logpdf(pred, truth, seen)
    rows = np.flatnonzero(~seen.all(1))[:8]
    assert rows.size == 8
    for n in rows:
        o, h = np.flatnonzero(seen[n]), np.flatnonzero(~seen[n])
        assert got[n] == pytest.approx(_conditional_by_components(pred, truth[n], o, h), abs=1e-9)
    assert np.all(got[seen.all(1)] == 0.0)
    # a hidden entry far from the data is improbable
    far = truth.copy()
    n, j = rows[0], np.flatnonzero(~seen[rows[0]])[0]
    far[n, j] += 20.0
    assert demo.conditional_logpdf(pred, far, seen)[n] < got[n] - 5.0


def test_adjusted_rand_index(demo):
    assert demo.adjusted_rand_index([0, 0, 1, 1], [5, 5, 2, 2]) == 1.0
    assert demo.adjusted_rand_index([0, 0, 1, 1], [0, 1, 0, 1]) == pytest.approx(-0.5)
    sklearn = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 3, 200), rng.integers(0, 4, 200)
    assert demo.adjusted_rand_index(a, b) == pytest.approx(sklearn.adjusted_rand_score(a, b), abs=1e-12)
