"""models.hmm and the earthquakes demo."""

from __future__ import annotations

import numpy as np
import pytest
from hmmlearn import hmm as hl

import factorgraph as fg
from factorgraph import models


def _non_decreasing(trace) -> bool:
    trace = np.asarray(trace)
    return bool(np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:])))


def test_earthquakes_demo_small():
    from demos import earthquakes_hmm

    out = earthquakes_hmm.main(small=True)
    assert out["best"] in ("K=2", "K=3")
    assert out["elbo"]["K=2"] > out["elbo"]["K=1"] + 30  # overdispersion: one Poisson rate is far worse
    assert all(_non_decreasing(t) for t in out["traces"].values())


def test_poisson_hmm_rates_near_maximum_likelihood():
    """With 107 counts the VB posterior means of the rates lie near hmmlearn's EM (maximum-likelihood) fit."""
    from demos.earthquakes_hmm import load

    _, y = load()
    r = models.hmm(y, 2, "poisson")
    ml = hl.PoissonHMM(2, n_iter=500, tol=1e-10, random_state=0)
    ml.fit(y[:, None].astype(int))
    np.testing.assert_allclose(np.sort(r.posterior("lam").mean()), np.sort(ml.lambdas_[:, 0]), atol=0.5)


def test_gaussian_hmm_sequences_of_different_lengths():
    rng = np.random.default_rng(1)
    seqs = [np.r_[rng.normal(-3, 0.5, 30), rng.normal(3, 0.5, 30)], rng.normal(3, 0.5, 25)]
    r = models.hmm(seqs, 2, "gaussian")
    assert _non_decreasing(r.elbo_trace) and r.converged
    np.testing.assert_allclose(np.sort(r.posterior("mu").mean()), [-3, 3], atol=0.3)
    g = r.posterior("z").mean()
    assert g.shape == (2, 60, 2) and np.all(g[1, 25:] == 0)
    assert np.allclose(g[1, :25].sum(-1), 1.0)


def test_categorical_hmm():
    rng = np.random.default_rng(2)
    B = np.array([[0.8, 0.1, 0.1], [0.1, 0.1, 0.8]])
    z = np.repeat([0, 1, 0, 1], 40)
    y = np.array([rng.choice(3, p=B[k]) for k in z])
    r = models.hmm(y, 2, "categorical")
    assert _non_decreasing(r.elbo_trace)
    Bq = r.posterior("B").mean()
    Bq = Bq[np.argsort(Bq[:, 0])[::-1]]
    np.testing.assert_allclose(Bq, B, atol=0.15)


def test_hmm_bad_input():
    with pytest.raises(fg.ModelError, match="emission must be one of"):
        models.hmm(np.ones(5), 2, "student")
    with pytest.raises(fg.ModelError, match="non-negative integer counts"):
        models.hmm(np.array([1.5, 2.0]), 2, "poisson")
    with pytest.raises(fg.ModelError, match="sequence 1 is empty"):
        models.hmm([np.ones(3), np.ones(0)], 2)


def test_faithful_hmm_demo_small():
    """Old Faithful's waits: the evidence picks two states, whose means and anti-persistent transition matrix
    sit near hmmlearn's maximum-likelihood fit (272 points: the posterior is concentrated), and the chain
    beats a mixture of independent waits."""
    from demos import faithful_hmm

    out = faithful_hmm.main(small=True)
    assert out["best"] == "K=2"
    assert out["elbo"]["K=2"] > out["elbo"]["K=1"] + 50
    assert out["elbo"]["K=2"] > out["mixture_elbo"] + 10
    assert all(_non_decreasing(t) for t in out["traces"].values())
    np.testing.assert_allclose(out["means_K2"], out["em_means"], atol=0.5)
    np.testing.assert_allclose(out["transition_K2"], out["em_transition"], atol=0.03)
    assert out["transition_K2"][0, 1] > 0.85  # a short wait is followed by a long one


def test_hmm_n_init_keeps_the_best_bound():
    """n_init=R (default 4) returns the best of the fits from seeds seed … seed + R − 1, and says so in a note;
    n_init=1 is the single fit from ``seed``."""
    from demos.faithful_hmm import load

    y = load()[:120]
    one = models.hmm(y, 3, "gaussian", seed=0, n_init=1)
    best = models.hmm(y, 3, "gaussian", seed=0)
    others = [models.hmm(y, 3, "gaussian", seed=s, n_init=1).elbo for s in range(4)]
    assert one.elbo == others[0] and not any("start" in n for n in one.notes)
    assert best.elbo == pytest.approx(max(others), abs=1e-9) and best.elbo >= one.elbo - 1e-9
    assert any(n.startswith("best of 4 starts (seeds 0…3") for n in best.notes), best.notes
    with pytest.raises(fg.ModelError, match="n_init"):
        models.hmm(y, 2, n_init=0)


def _hmm_example():
    """posteriordb's ``hmm_example``: two states, μ₁ ~ N(3, 1), μ₂ ~ N(10, 1), unit emission sd, uniform
    rows of the transition matrix and a uniform first state, on its 100 observations (data/hmm_example)."""
    import csv
    from pathlib import Path

    with open(Path(__file__).resolve().parents[1] / "data" / "hmm_example" / "data.csv", newline="") as fh:
        y = np.array([float(r["y"]) for r in csv.DictReader(fh)])
    with fg.Model("hmm_example") as m:
        t, k = fg.plate("t", len(y)), fg.plate("k", 2)
        theta = fg.dirichlet("theta", np.ones(2), plates=[k])
        z = fg.markov_chain("z", initial=np.full(2, 0.5), transition=theta, plates=[t])
        mu = fg.gaussian("mu", np.array([3.0, 10.0]), 1.0, plates=[k])
        fg.gaussian("y", mean=mu[z], precision=1.0, plates=[t], observed=y)
    return m


def test_distinct_priors_on_the_states_start_the_chain_at_the_optimum_for_every_seed():
    """The states' means have distinct, informative priors, so the chain starts from its update given them
    (each step mostly to the state whose prior explains it) whatever the seed.  From k-means++ 12 of the seeds
    0…15 ended at ELBO −212.497 (the labels swapped against the priors, μ ≈ (8.9, 3.0)); now all end at
    −173.405, whose posterior means sit at posteriordb's reference posterior means (NUTS: θ₁₁ 0.6666,
    θ₂₁ 0.0731, μ = (3.0215, 8.8273))."""
    m = _hmm_example()
    fits = [fg.infer(m, seed=s) for s in range(16)]
    best = max(f.elbo for f in fits)
    assert all(abs(f.elbo - best) < 1e-6 for f in fits), [round(f.elbo, 3) for f in fits]
    assert best == pytest.approx(-173.405, abs=1e-3)
    r = fits[0]
    assert r.converged and r.starts == {"z": "priors"}
    assert any("'z' started from its update given its components, whose priors" in n for n in r.notes)
    np.testing.assert_allclose(r.posterior("mu").mean(), [3.0215, 8.8273], atol=0.01)
    np.testing.assert_allclose(r.posterior("theta").mean()[:, 0], [0.6666, 0.0731], atol=0.01)


def test_viterbi_paths_of_a_fitted_hmm():
    """result.viterbi("z") of a VB-HMM (π, A, means and precisions learnt) gives each sequence's segments, −1 past
    its length, and agrees with the steps' modes where q is certain."""
    rng = np.random.default_rng(1)
    truth = [np.repeat([0, 1, 0], [20, 25, 15]), np.repeat([1, 0], [10, 15])]
    seqs = [np.array([-3.0, 3.0])[z] + 0.5 * rng.normal(size=z.size) for z in truth]
    r = models.hmm(seqs, 2, "gaussian")
    path = r.viterbi("z")
    assert path.shape == (2, 60) and np.all(path[1, 25:] == -1)
    high = int(np.argmax(r.posterior("mu").mean()))
    for z, p in zip(truth, path, strict=True):
        np.testing.assert_array_equal(p[: z.size] == high, z == 1)
    q = r.posterior("z")
    sure = q.mean().max(-1) > 0.999
    np.testing.assert_array_equal(path[sure], q.map_states()[sure])
