"""The Old Faithful demo (``demos/faithful_mixture.py``) at its small size: the evidence picks two components."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def faithful():
    return importlib.import_module("demos.faithful_mixture").main(small=True)


def test_evidence_picks_two_components(faithful):
    assert faithful["best"] == "K=2" == max(faithful["elbo"], key=faithful["elbo"].get)
    # the two eruption regimes: short (about 2 min, 55 min wait) and long (about 4.3 min, 80 min wait)
    means = faithful["means"][np.argsort(faithful["means"][:, 0])]
    np.testing.assert_allclose(means, [[2.04, 54.5], [4.29, 80.0]], atol=1.5)
    np.testing.assert_allclose(means[:, 0], [2.04, 4.29], atol=0.1)
    assert faithful["figure"].exists()


def test_elbo_never_decreases(faithful):
    for name, trace in faithful["traces"].items():
        assert np.min(np.diff(trace), initial=0.0) >= -1e-9 * abs(trace[-1]), name
