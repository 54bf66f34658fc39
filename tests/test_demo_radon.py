"""The radon demo (``demos/radon_hierarchical.py``) at its small size: evidence ordering, shrinkage, monotone ELBO."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def radon():
    return importlib.import_module("demos.radon_hierarchical").main(small=True)


def test_partial_pooling_wins_the_evidence(radon):
    ev = radon["evidence"]
    assert ev["partial pooling"] > ev["complete pooling"] > ev["no pooling"]
    assert radon["best"] == max(ev, key=ev.get)
    assert all(radon["converged"].values())


def test_elbo_never_decreases(radon):
    for name, trace in radon["traces"].items():
        assert np.min(np.diff(trace)) >= -1e-9 * abs(trace[-1]), name


def test_by_hand_model_is_the_canned_one(radon):
    assert abs(radon["by_hand_elbo"] - radon["evidence"]["varying slopes"]) < 1e-6 * abs(radon["by_hand_elbo"])


def test_partial_pooling_shrinks(radon):
    has = radon["n_j"] > 0
    assert np.all(radon["partial_sd"][has] < radon["no_pool_sd"][has])
    s = radon["shrink"][has]
    ok = np.isfinite(s)
    assert np.all((s[ok] > 0) & (s[ok] < 1))  # pulled toward the state mean, never past it
    small = radon["n_j"][has][ok] <= 3
    assert s[ok][small].mean() > s[ok][~small].mean()  # small counties are pulled more
