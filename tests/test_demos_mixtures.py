"""The mixture demos at --small size: digits (Bernoulli mixture, K by the evidence) and LDA topics."""

from __future__ import annotations

import importlib

import numpy as np
import pytest


def _monotone(trace):
    trace = np.asarray(trace)
    return bool(np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:])))


def test_bernoulli_mixture_digits_small():
    pytest.importorskip("matplotlib")
    out = importlib.import_module("demos.bernoulli_mixture_digits").main(small=True, seed=0)
    assert _monotone(out["elbo_trace"])
    assert out["K"] > 2  # ten digits: the evidence prefers more than two components
    assert out["ari"] > 0.25  # the components follow the digits (chance is 0)
    assert abs(out["weights"].sum() - 1.0) < 1e-12


def test_lda_topics_small_recovers_every_topic():
    pytest.importorskip("matplotlib")
    out = importlib.import_module("demos.lda_topics").main(small=True, seed=0)
    assert _monotone(out["elbo_trace"])
    assert sorted(out["matched"]) == [0, 1, 2, 3]
    assert np.all(out["tv"] < 0.25)  # each recovered topic is close to a distinct true one


@pytest.mark.slow
def test_bernoulli_mixture_digits_full():
    """All 1797 digits (about 7 min on a busy 2-core machine): the evidence picks K = 20 of 4..24, ARI ≈ 0.60."""
    out = importlib.import_module("demos.bernoulli_mixture_digits").main(small=False, seed=0)
    assert _monotone(out["elbo_trace"])
    assert 12 <= out["K"] <= 24
    assert out["ari"] > 0.45


@pytest.mark.slow
def test_lda_topics_full():
    """200 documents of 60 words: every topic recovered to a total variation below 0.08 (measured ≤ 0.032)."""
    out = importlib.import_module("demos.lda_topics").main(small=False, seed=0)
    assert _monotone(out["elbo_trace"])
    assert sorted(out["matched"]) == [0, 1, 2, 3]
    assert np.all(out["tv"] < 0.08)
