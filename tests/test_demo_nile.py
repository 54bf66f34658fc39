"""The Nile demo (``demos/nile_local_level.py``): VB's learned variances and smoothed levels against
statsmodels' maximum likelihood, and the exact fixed-variance check."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

pytest.importorskip("statsmodels")


@pytest.fixture(scope="module")
def nile():
    return importlib.import_module("demos.nile_local_level").main(small=True)


def test_learned_variances_near_maximum_likelihood(nile):
    """100 observations and weak priors: the posterior means of the variances are within 3% of the ML
    estimates (15099, 1469 in Durbin & Koopman 2001) and the smoothed levels within a tenth of a smoothed sd."""
    np.testing.assert_allclose(nile["ml"]["obs"], 15099.0, rtol=0.01)
    np.testing.assert_allclose(nile["ml"]["level"], 1469.1, rtol=0.02)
    for k in ("obs", "level"):
        np.testing.assert_allclose(nile["vb"][k], nile["ml"][k], rtol=0.03)
    assert nile["level_diff_sd"] < 0.1


def test_fixed_variances_are_exact(nile):
    assert abs(nile["exact_gap"]) < 1e-8
    assert nile["exact_level_gap"] < 1e-8


def test_elbo_never_decreases(nile):
    trace = nile["elbo_trace"]
    assert np.min(np.diff(trace)) >= -1e-9 * abs(trace[-1])
