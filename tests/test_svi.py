"""fg.SVI: stochastic VI (Hoffman et al. 2013) reaches the full-batch ELBO to 0.1 % on a linear regression, a
Gaussian mixture and LDA; its trace is labelled as estimates; bad options are refused."""

from __future__ import annotations

import numpy as np
import pytest

import factorgraph as fg


def _linear(N=4000, D=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.3 * rng.normal(size=N)
    with fg.Model("linear") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=np.zeros(D), precision=1.0)
        fg.gaussian("y", mean=fg.inner(X, w, plates=[n]), precision=fg.gamma("tau", 1.0, 1.0), plates=[n],
                    observed=y)
    return m


def _mixture(N=3000, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.permutation(np.concatenate([rng.normal(-3, 1, N // 3), rng.normal(0, 0.5, N // 3),
                                        rng.normal(4, 1, N - 2 * (N // 3))]))
    with fg.Model("mixture") as m:
        k, n = fg.plate("k", 3), fg.plate("n", N)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(3)), plates=[n])
        mu = fg.gaussian("mu", 0.0, 0.01, plates=[k])
        tau = fg.gamma("tau", 1.0, 1.0, plates=[k])
        fg.gaussian("x", mu[z], tau[z], plates=[n], observed=x)
    return m


def _lda(docs=300, words=20, V=8, K=2, seed=0):
    rng = np.random.default_rng(seed)
    topics = np.array([[0.3, 0.3, 0.2, 0.1, 0.05, 0.03, 0.01, 0.01], [0.01, 0.01, 0.03, 0.05, 0.1, 0.2, 0.3, 0.3]])
    theta = rng.dirichlet(np.ones(K), size=docs)
    z = np.array([rng.choice(K, size=words, p=t) for t in theta])
    w = np.array([[rng.choice(V, p=topics[k]) for k in row] for row in z])
    with fg.Model("lda") as m:
        k, doc, pos = fg.plate("k", K), fg.plate("doc", docs), fg.plate("w", words)
        phi = fg.dirichlet("phi", np.full(V, 0.5), plates=[k])
        th = fg.dirichlet("theta", np.ones(K), plates=[doc])
        zz = fg.categorical("z", th, plates=[doc, pos])
        fg.categorical("words", phi[zz], plates=[doc, pos], observed=w)
    return m


@pytest.mark.parametrize("build, svi, steps", [
    (_linear, fg.SVI(batch_size=400), 100),
    (_mixture, fg.SVI(batch_size=300, learning_rate=(1.0, 0.7)), 300),
    (_lda, fg.SVI(batch_size=30, learning_rate=(1.0, 0.7), plate="doc"), 300),
], ids=["linear", "gaussian_mixture", "lda"])
def test_svi_reaches_the_full_batch_elbo(build, svi, steps):
    full = fg.infer(build(), progress=False)
    r = fg.infer(build(), svi, max_iter=steps)
    assert r.algorithm == "svi" and r.n_iter == steps and len(r.elbo_trace) == steps
    assert r.evidence_kind == "lower bound"  # the exact ELBO of the final q; the trace holds estimates
    assert any("estimates" in n for n in r.notes)
    assert abs(r.elbo - full.elbo) <= 1e-3 * abs(full.elbo)


def test_robbins_monro_steps_and_bad_options():
    svi = fg.SVI(batch_size=10, learning_rate=(1.0, 0.7))
    assert svi.rho(1) == pytest.approx(2.0 ** -0.7) and svi.rho(9) == pytest.approx(10.0 ** -0.7)
    assert fg.SVI(learning_rate=0.1).rho(50) == 0.1
    with pytest.raises(fg.ModelError, match="kappa"):
        fg.SVI(learning_rate=(1.0, 0.4))
    with pytest.raises(fg.ModelError, match="batch_size"):
        fg.SVI(batch_size=0)
    with pytest.raises(fg.ModelError, match="no plate 'rows'"):
        fg.infer(_linear(N=50), fg.SVI(batch_size=10, plate="rows"), max_iter=2)


def test_svi_with_a_constant_step_tracks_a_drifting_stream():
    """Batches of a regression whose slope drifts from 1 to 3: the constant-step globals follow the current
    slope (the full-batch fit would sit at the average, 2)."""
    rng = np.random.default_rng(0)
    B, steps = 50, 120

    def batch_model(slope):
        x = rng.normal(size=(B, 1))
        y = slope * x[:, 0] + 0.2 * rng.normal(size=B)
        with fg.Model("drift") as m:
            n = fg.plate("n", B)
            w = fg.mv_gaussian("w", mean=np.zeros(1), precision=1.0)
            fg.gaussian("y", mean=fg.inner(x, w, plates=[n]), precision=25.0, plates=[n], observed=y)
        return m

    slopes = np.linspace(1.0, 3.0, steps)
    stream = (batch_model(s) for s in slopes)
    r = fg.infer(batch_model(1.0), fg.SVI(batch_size=B, learning_rate=0.2, stream=stream, rows=1000), max_iter=1000)
    assert r.n_iter == steps  # the stream ran out first
    assert abs(r.posterior("w").mean()[0] - 3.0) < 0.1
    assert r.evidence_kind == "estimate"


def test_svi_reads_minibatches_from_dask_data_as_from_numpy():
    da = pytest.importorskip("dask.array")  # the dask extra, installed by .ci/run
    import dask

    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 2))
    y = X @ np.array([0.5, -1.0]) + 0.3 * rng.normal(size=600)

    def model(X, y):
        with fg.Model("linear") as m:
            n = fg.plate("n", 600)
            w = fg.mv_gaussian("w", mean=np.zeros(2), precision=1.0)
            fg.gaussian("y", mean=fg.inner(X, w, plates=[n]), precision=fg.gamma("tau", 1.0, 1.0), plates=[n],
                        observed=y)
        return m

    svi = fg.SVI(batch_size=60)
    r0 = fg.infer(model(X, y), svi, max_iter=20)
    with dask.config.set(scheduler="threads"):
        r1 = fg.infer(model(da.from_array(X, chunks=(200, 2)), da.from_array(y, chunks=200)), svi, max_iter=20)
    np.testing.assert_allclose(r1.elbo_trace, r0.elbo_trace, rtol=1e-12)
    np.testing.assert_allclose(r1.posterior("w").mean(), r0.posterior("w").mean(), rtol=1e-12)
