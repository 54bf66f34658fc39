"""fg.SVI: stochastic variational inference against full-batch VMP, the step's formula, streaming, errors."""

from __future__ import annotations

import numpy as np
import pytest

import factorgraph as fg
from demos.lda_topics import build as build_lda
from demos.lda_topics import make_corpus
from factorgraph.posterior.results import LOWER_BOUND, STOCHASTIC

W_TRUE = np.array([1.0, 0.0, -2.0, 0.5])


def regression(X, y):
    with fg.Model("regression") as m:
        n = fg.plate("n", len(y))
        w = fg.mv_gaussian("w", mean=np.zeros(X.shape[1]), precision=np.eye(X.shape[1]))
        tau = fg.gamma("tau", shape=1e-2, rate=1e-2)
        fg.gaussian("y", mean=fg.inner(X, w, plates=[n]), precision=tau, plates=[n], observed=y)
    return m


def regression_data(N, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 4))
    return X, X @ W_TRUE + 0.3 * rng.normal(size=N)


def mixture(N=240, seed=0):
    rng = np.random.default_rng(seed)
    centers = np.array([[-4.0, 0.0], [4.0, 0.0], [0.0, 5.0]])
    X = centers[rng.integers(0, 3, N)] + rng.normal(size=(N, 2))
    with fg.Model("mixture") as m:
        n, k, d = fg.plate("n", N), fg.plate("k", 3), fg.plate("d", 2)
        pi = fg.dirichlet("pi", concentration=np.ones(3))
        mus = fg.gaussian("mus", 0.0, precision=1e-2, plates=[k, d])
        taus = fg.gamma("taus", 1.0, 1.0, plates=[k, d])
        z = fg.categorical("z", probs=pi, plates=[n])
        fg.gaussian("x", mean=mus[z], precision=taus[z], plates=[n, d], observed=X)
    return m


def gaussian_mean(y):
    with fg.Model("mean") as m:
        n = fg.plate("n", len(y))
        mu = fg.gaussian("mu", mean=0.0, precision=1.0)
        fg.gaussian("y", mean=mu, precision=4.0, plates=[n], observed=y)
    return m


def rel(a, b):
    return abs(a - b) / abs(b)


def test_regression_reaches_the_full_batch_elbo():
    m = regression(*regression_data(400))
    vmp = fg.infer(m)
    svi = fg.infer(m, algorithm=fg.SVI(batch_size=40, learning_rate=(1.0, 0.7)), max_iter=150, seed=1)
    assert svi.evidence_kind == LOWER_BOUND and svi.algorithm == "svi"
    assert rel(svi.elbo, vmp.elbo) < 1e-3
    assert svi.elbo <= vmp.elbo + 1e-6 * abs(vmp.elbo)  # VMP's optimum is the maximum of this concave problem
    np.testing.assert_allclose(svi.posterior("w").mean(), vmp.posterior("w").mean(), atol=0.02)
    assert svi.elbo_trace.shape == (150,) and np.isfinite(svi.elbo_estimate)
    assert rel(svi.elbo_estimate, vmp.elbo) < 0.05  # the smoothed minibatch figure is near the bound


def test_mixture_reaches_the_full_batch_elbo():
    m = mixture()
    vmp = max((fg.infer(m, seed=s, max_iter=500) for s in range(3)), key=lambda r: r.elbo)
    svi = fg.infer(m, algorithm=fg.SVI(batch_size=40), max_iter=150, seed=0)
    assert svi.notes[0].startswith("SVI on data plate 'n'")
    assert rel(svi.elbo, vmp.elbo) < 1e-3
    # the same clusters (up to label switching)
    a, b = np.sort(vmp.posterior("mus").mean()[:, 0]), np.sort(svi.posterior("mus").mean()[:, 0])
    np.testing.assert_allclose(a, b, atol=0.1)
    assert svi.posterior("z").probs.shape == (240, 3)  # locals of every row from the final full pass
    # init= starts globals where given (the rest from the first batch); from near the clusters every seed gets there
    from distributions import Gaussian

    start = {"mus": Gaussian(mean=np.array([[-4.0, 0.0], [4.0, 0.0], [0.0, 5.0]]), var=np.ones((3, 2)))}
    for seed in (1, 2):
        r = fg.infer(m, algorithm=fg.SVI(batch_size=40), max_iter=100, seed=seed, init=start)
        assert rel(r.elbo, vmp.elbo) < 1e-3
    with pytest.raises(fg.ModelError, match="init gives 'z', which is not a global latent variable"):
        fg.infer(m, algorithm=fg.SVI(batch_size=40), init={"z": np.full((240, 3), 1 / 3)})


def test_lda_reaches_the_full_batch_elbo():
    words, _ = make_corpus(60, 20, np.random.default_rng(0))
    m = build_lda(words, 4)
    vmp = max((fg.infer(m, seed=s, max_iter=1000, tol=1e-9) for s in range(2)), key=lambda r: r.elbo)
    svi = fg.infer(m, algorithm=fg.SVI(batch_size=15), max_iter=120, seed=0)
    assert "locals ['theta', 'z']" in svi.notes[0] and "globals ['phi']" in svi.notes[0]
    assert rel(svi.elbo, vmp.elbo) < 1e-3


def test_one_step_is_prior_plus_rescaled_batch_statistics():
    """ρ = 1: q(μ) after a step is exactly prior + (N/|B|)·(the batch's conjugate messages)."""
    y = np.random.default_rng(3).normal(1.5, 0.5, size=30)
    seen = []

    def keep(it, L, eng):  # the batch's rows: the observed y of the batch model
        seen.append(eng.c.model.variables["y"].value.copy())

    r = fg.infer(gaussian_mean(y), algorithm=fg.SVI(batch_size=6, learning_rate=lambda t: 1.0, exact_elbo=False),
                 max_iter=3, seed=2, callbacks=[keep])
    yb = seen[-1]
    assert yb.shape == (6,) and len(set(np.round(yb, 12)) & set(np.round(y, 12))) == 6
    prec = 1.0 + 30 / 6 * 6 * 4.0
    q = r.posterior("mu")
    np.testing.assert_allclose(q.var(), 1.0 / prec, rtol=1e-12)
    np.testing.assert_allclose(q.mean(), 30 / 6 * 4.0 * yb.sum() / prec, rtol=1e-12)
    # the batches of an epoch are drawn without replacement: 5 steps of 6 cover the 30 rows once
    seen.clear()
    fg.infer(gaussian_mean(y), algorithm=fg.SVI(batch_size=6, exact_elbo=False), max_iter=5, seed=4, callbacks=[keep])
    np.testing.assert_allclose(np.sort(np.concatenate(seen)), np.sort(y))


def test_step_sizes():
    assert fg.SVI(batch_size=1, learning_rate=(4.0, 0.75)).step_size(5) == pytest.approx(9.0 ** -0.75)
    assert fg.SVI(batch_size=1, learning_rate=0.6).step_size(0) == 1.0
    assert fg.SVI(batch_size=1, learning_rate=0.6).step_size(3) == pytest.approx(4.0 ** -0.6)
    assert fg.SVI(batch_size=1, learning_rate=lambda t: 0.25).step_size(7) == 0.25
    with pytest.raises(fg.ModelError, match=r"κ = 0.3 must lie in \(0.5, 1\]"):
        fg.SVI(batch_size=1, learning_rate=0.3)
    with pytest.raises(fg.ModelError, match="step sizes must lie in"):
        fg.SVI(batch_size=1, learning_rate=lambda t: 2.0)
    with pytest.raises(fg.ModelError, match="batch_size"):
        fg.SVI(batch_size=0)


def test_streamed_regression_recovers_the_weights():
    X0, y0 = regression_data(20)
    m = regression(X0, y0)  # any rows: the model fixes the shapes; the stream brings the data

    def batches(seed):
        rng = np.random.default_rng(seed)
        while True:
            X = rng.normal(size=(25, 4))
            yield {"X": X, "y": X @ W_TRUE + 0.3 * rng.normal(size=25)}

    r = fg.infer(m, algorithm=fg.SVI(batch_size=25, n_data=10_000), data=batches(5), max_iter=100)
    assert r.evidence_kind == STOCHASTIC and r.elbo_se > 0
    np.testing.assert_allclose(r.posterior("w").mean(), W_TRUE, atol=0.03)
    assert r.posterior("tau").mean() == pytest.approx(1 / 0.09, rel=0.15)
    # a finite stream ends the run
    short = fg.infer(m, algorithm=fg.SVI(batch_size=25, n_data=500), data=[next(batches(1)) for _ in range(4)],
                     max_iter=100)
    assert short.n_iter == 4 and any("stream ended" in n for n in short.notes)


def test_streamed_posterior_tracks_a_drifting_mean():
    m = gaussian_mean(np.zeros(10))
    truth = np.linspace(0.0, 5.0, 200)

    def batches():
        rng = np.random.default_rng(0)
        for mu in truth:
            yield {"y": mu + 0.5 * rng.normal(size=10)}

    means = []
    r = fg.infer(m, algorithm=fg.SVI(batch_size=10, n_data=100, learning_rate=lambda t: 0.2), data=batches(),
                 max_iter=500, callbacks=[lambda it, L, eng: means.append(float(eng.q["mu"].mean()))])
    assert r.n_iter == 200
    lagged = np.abs(np.array(means[20:]) - truth[20:])  # the mean the posterior sees lags the drift a little
    assert lagged.max() < 0.4
    assert abs(r.posterior("mu").mean() - 5.0) < 0.3  # not the stream's average (2.5): it tracks
    # a decaying step size on a stationary stream converges on the mean
    stat = fg.infer(m, algorithm=fg.SVI(batch_size=10, n_data=100),
                    data=({"y": 2.0 + 0.5 * np.random.default_rng(i).normal(size=10)} for i in range(300)),
                    max_iter=300)
    assert abs(stat.posterior("mu").mean() - 2.0) < 0.05


def test_compare_labels_stochastic_estimates():
    m = gaussian_mean(np.zeros(10))
    r = fg.infer(m, algorithm=fg.SVI(batch_size=10, n_data=100), max_iter=30,
                 data=({"y": np.random.default_rng(i).normal(size=10)} for i in range(30)))
    exact = fg.infer(m)
    table = fg.compare({"svi": r, "vmp": exact})
    assert STOCHASTIC in table.kinds and "stochastic estimates" in table.note
    assert "different kinds" in table.note


def test_models_that_do_not_fit_svi():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    with fg.Model("logistic") as m:
        n = fg.plate("n", 30)
        w = fg.mv_gaussian("w", mean=np.zeros(3), precision=np.eye(3))
        fg.bernoulli_logit("y", fg.inner(X, w, plates=[n]), plates=[n], observed=rng.random(30) < 0.5)
    with pytest.raises(fg.ModelError, match="global variable 'w' is not conjugate-exponential"):
        fg.infer(m, algorithm=fg.SVI(batch_size=10))
    with fg.Model("all-local") as m2:
        n = fg.plate("n", 30)
        mu = fg.gaussian("mu", 0.0, precision=1.0, plates=[n])
        fg.gaussian("y", mean=mu, precision=1.0, plates=[n], observed=rng.normal(size=30))
    with pytest.raises(fg.ModelError, match="no global latent variable"):
        fg.infer(m2, algorithm=fg.SVI(batch_size=10))
    with fg.Model("two-plates") as m3:
        n, g = fg.plate("n", 30), fg.plate("g", 20)
        a = fg.gaussian("a", 0.0, precision=1.0, plates=[g])
        fg.gaussian("y", mean=fg.gaussian("mu", 0.0, precision=1.0), precision=1.0, plates=[n],
                    observed=rng.normal(size=30))
        fg.gaussian("v", mean=a, precision=1.0, plates=[g], observed=rng.normal(size=20))
    with pytest.raises(fg.ModelError, match="local variables on two plates"):
        fg.infer(m3, algorithm=fg.SVI(batch_size=10))
    with pytest.raises(fg.ModelError, match=r"observed 'v' is not on the data plate 'n' but shares plates \['g'\] "
                                            "with latent 'a': local variables on two plates"):
        fg.infer(m3, algorithm=fg.SVI(batch_size=10, plate="n"))
    m4 = gaussian_mean(np.zeros(10))
    with pytest.raises(fg.ModelError, match="n_data"):
        fg.infer(m4, algorithm=fg.SVI(batch_size=5), data=iter([]))
    with pytest.raises(fg.ModelError, match="batch_size 50 exceeds the 10 rows"):
        fg.infer(m4, algorithm=fg.SVI(batch_size=50))
    with pytest.raises(fg.ModelError, match="plate='k' is not a plate"):
        fg.infer(m4, algorithm=fg.SVI(batch_size=5, plate="k"))
    with pytest.raises(fg.ModelError, match=r"batch 0 of the stream \(counted from 0\) lacks \['y'\]"):
        fg.infer(m4, algorithm=fg.SVI(batch_size=5, n_data=50), data=iter([{}]))
    with pytest.raises(fg.ModelError, match=r"key 'x' is not a row array of the data plate 'n'; the keys are \['y'\]"):
        fg.infer(m4, algorithm=fg.SVI(batch_size=5, n_data=50), data=iter([{"x": np.zeros(5)}]))
    with pytest.raises(fg.ModelError, match="data= streams batches to fg.SVI only"):
        fg.infer(m4, data=iter([]))
    with pytest.raises(fg.ModelError, match="the data stream is empty"):
        fg.infer(m4, algorithm=fg.SVI(batch_size=5, n_data=50), data=iter([]))
    with pytest.raises(fg.ModelError, match="n_data=50 is for streamed data"):
        fg.infer(m4, algorithm=fg.SVI(batch_size=5, n_data=50))
    with pytest.raises(fg.ModelError, match="SVI has no stopping rule"):
        fg.infer(m4, algorithm=fg.SVI(batch_size=5), tol=1e-6)


@pytest.mark.parametrize("build", ["product_and_sum", "regression_mean_field", "hierarchical_rate", "mixture"])
def test_whole_data_batches_with_unit_steps_are_vmp(build):
    """|B| = N and ρ = 1: every step is a VMP sweep (locals, then globals in turn), so SVI ends at VMP's fixed
    point — through expressions off the data plate (a·b in a·b + 2c_n), mean-field weight vectors stepped
    element by element, hierarchical globals and gated factors."""
    from tests import conjugate_models as cm

    m = getattr(cm, build)(np.random.default_rng(0))
    vmp = max((fg.infer(m, seed=s, max_iter=2000, tol=1e-12) for s in range(3)), key=lambda r: r.elbo)
    N = next(p.size for p in m.plates.values() if p.name == "n")
    seeds = 3 if build == "mixture" else 1  # VMP's and SVI's random starts may reach different optima
    svi = max((fg.infer(m, algorithm=fg.SVI(batch_size=N, learning_rate=lambda t: 1.0, local_tol=1e-12, plate="n"),
                        max_iter=80, seed=s) for s in range(seeds)), key=lambda r: r.elbo)
    assert rel(svi.elbo, vmp.elbo) < 1e-7


def test_rescaling_equals_repeating_the_batch():
    """λ̂ with scale N/|B| equals the unscaled λ̂ of a data set that repeats the batch N/|B| times, also
    through an expression off the data plate (a·b in a·b + 2c_n) and through a gate."""
    from schedules.svi_batch import batch_arrays, batch_model, data_layout, local_step
    from tests import conjugate_models as cm

    for build in ("product_and_sum", "mixture"):
        m = getattr(cm, build)(np.random.default_rng(1))
        layout = data_layout(m)
        N = layout.plate.size
        rows = np.arange(0, N, 5)  # |B| = N/5
        half = batch_model(m, layout, batch_arrays(layout, rows), len(rows))
        whole = batch_model(m, layout, batch_arrays(layout, np.tile(rows, 5)), N)
        rng = np.random.default_rng(0)
        q0 = {g.name: g.family.from_natural(*(np.asarray(a) + 0.0 for a in _prior_like(m, g, rng)))
              for g in layout.globals}
        a, _, _ = local_step(half, layout, q0, 5.0, 0.7, 500, 1e-13, np.random.default_rng(3))
        b, _, _ = local_step(whole, layout, q0, 1.0, 0.7, 500, 1e-13, np.random.default_rng(3))
        for g in q0:
            for x, y in zip(a[g].natural, b[g].natural, strict=True):
                np.testing.assert_allclose(x, y, rtol=1e-7, atol=1e-9)


def _prior_like(m, g, rng):
    """A proper, asymmetric starting posterior for a global: its prior's natural parameters, jittered."""
    from schedules.algorithms import VMP
    from schedules.compile import compile_model
    from schedules.engine import Engine

    eng = Engine(compile_model(m, VMP()))
    eng.initialise({}, np.random.default_rng(0))
    nat = eng.q[g.name].natural
    return (nat[0] + 0.3 * rng.normal(size=np.shape(nat[0])),) + tuple(nat[1:])


def test_streamed_lda_recovers_the_topics():
    """Documents streamed ten at a time as word ids (the model was built on ten documents, so the word plate
    is the larger one there and the data plate must be named)."""
    words, phi = make_corpus(300, 30, np.random.default_rng(0))
    m = build_lda(words[:10], 4)
    with pytest.raises(fg.ModelError, match="ambiguous: 'doc' carries more per-row latent variables .2 against 1. but "
                                            "'w' is larger .30 against 10.; pass fg.SVI.plate=...."):
        fg.infer(m, algorithm=fg.SVI(batch_size=10, n_data=300), data=[])
    # like VMP's, SVI's random start may merge topics: a few seeds, the best by the smoothed estimate (whose
    # differences here are many standard errors)
    runs = [fg.infer(m, algorithm=fg.SVI(batch_size=10, n_data=300, plate="doc"), max_iter=1000, seed=seed,
                     data=({"words": words[i:i + 10]} for _ in range(2) for i in range(0, 300, 10)))
            for seed in range(4)]
    r = max(runs, key=lambda r: r.elbo)
    assert r.n_iter == 60 and r.notes[0].startswith("SVI on data plate 'doc'") and r.evidence_kind == STOCHASTIC
    tv = 0.5 * np.abs(r.posterior("phi").mean()[:, None, :] - phi[None]).sum(-1)
    assert np.all(tv.min(1) < 0.08) and len(set(tv.argmin(1))) == 4  # each true topic found once


def test_indexed_groups_in_memory_and_streamed():
    """A hierarchy through x[labels]: the labels are row data (sliced, or streamed as "mu[n]")."""
    rng = np.random.default_rng(0)
    G, N = 8, 400
    mu_true = rng.normal(0, 2, G)
    g = rng.integers(0, G, N)

    def build(y, g):
        with fg.Model("groups") as m:
            n, grp = fg.plate("n", len(y)), fg.plate("g", G)
            mu = fg.gaussian("mu", fg.gaussian("m0", 0.0, precision=0.01), precision=1.0, plates=[grp])
            fg.gaussian("y", mean=mu[g], precision=fg.gamma("tau", 1.0, 1.0), plates=[n], observed=y)
        return m

    m = build(mu_true[g] + rng.normal(size=N), g)
    vmp = fg.infer(m)
    svi = fg.infer(m, algorithm=fg.SVI(batch_size=40), max_iter=200)
    assert rel(svi.elbo, vmp.elbo) < 1e-4

    def stream():
        for i in range(200):
            r = np.random.default_rng(i)
            gg = r.integers(0, G, 40)
            yield {"y": mu_true[gg] + r.normal(size=40), "mu[n]": gg}

    s = fg.infer(m, algorithm=fg.SVI(batch_size=40, n_data=400), data=stream(), max_iter=200)
    np.testing.assert_allclose(s.posterior("mu").mean(), mu_true, atol=0.2)
    with pytest.raises(fg.ModelError, match=r"integer labels in \[0, 8\)"):
        fg.infer(m, algorithm=fg.SVI(batch_size=40, n_data=400), data=[{"y": np.zeros(3), "mu[n]": [0, 9, 1]}])


def test_grouped_linear_fused_and_generic_agree_under_svi():
    """A fused grouped linear-Gaussian likelihood (a[g] + inner(X, w), on per-group Gram matrices of each batch)
    takes the same SVI steps as the generic path (the same model with + 0.0), and ends near the VMP fit."""
    rng = np.random.default_rng(4)
    G, N = 6, 360
    g = rng.integers(0, G, N)
    X = rng.normal(size=(N, 2))
    y = rng.normal(0, 2, G)[g] + X @ np.array([1.0, -0.5]) + 0.5 * rng.normal(size=N)

    def build(generic):
        with fg.Model("slopes") as m:
            n, grp = fg.plate("n", N), fg.plate("g", G)
            a = fg.gaussian("a", fg.gaussian("m0", 0.0, precision=0.01), precision=1.0, plates=[grp])
            w = fg.mv_gaussian("w", np.zeros(2), precision=1.0)
            mean = a[g] + fg.inner(X, w, [n])
            fg.gaussian("y", mean=mean + 0.0 if generic else mean, precision=fg.gamma("tau", 1.0, 1.0), plates=[n],
                        observed=y)
        return m

    fused, generic = (fg.infer(build(k), algorithm=fg.SVI(batch_size=40), max_iter=150, seed=3) for k in (0, 1))
    assert fused.elbo == pytest.approx(generic.elbo, rel=1e-9)
    for k in ("a", "w", "tau"):
        np.testing.assert_allclose(fused.posterior(k).mean(), generic.posterior(k).mean(), rtol=1e-8, atol=1e-10)
    assert rel(fused.elbo, fg.infer(build(0)).elbo) < 1e-3


def test_rescaled_bound_averages_to_the_elbo():
    """Over the disjoint batches of an epoch the minibatch-rescaled bound averages to the exact ELBO (at fixed
    globals, with each batch's locals at their optimum, which is the full data's), and with |B| = N it is it."""
    from schedules.algorithms import VMP
    from schedules.compile import compile_model
    from schedules.engine import Engine
    from schedules.svi_batch import batch_arrays, batch_model, data_layout, local_step, rescaled_bound
    from tests import conjugate_models as cm

    m = cm.mixture(np.random.default_rng(2))
    layout = data_layout(m)
    N = layout.plate.size
    full = Engine(compile_model(m, VMP()))
    full.initialise({}, np.random.default_rng(0))
    for _ in range(30):
        for v in full.c.order:
            full.update(v)
    q = {g.name: full.q[g.name] for g in layout.globals}
    for _ in range(50):  # the locals at their optimum given these globals
        for v in layout.locals:
            full.update(full.c.model.variables[v.name])
    exact = full.elbo()
    assert rescaled_bound(full, layout, 1.0) == pytest.approx(exact, rel=1e-12)
    perm = np.random.default_rng(1).permutation(N)
    bounds = []
    for rows in perm.reshape(6, -1):
        bm = batch_model(m, layout, batch_arrays(layout, np.sort(rows)), len(rows))
        _, b, _ = local_step(bm, layout, q, N / len(rows), 0.5, 200, 1e-13, np.random.default_rng(0))
        bounds.append(b)
    assert np.mean(bounds) == pytest.approx(exact, rel=1e-9)
    assert np.std(bounds) > 1e-3 * abs(exact)  # each one is a noisy estimate


def test_dask_backed_rows_give_the_same_fit_as_numpy():
    """With the data plate's arrays as dask arrays each step reads only its batch's rows; the fit is the
    in-memory one (same batches, same steps, same final full pass)."""
    da = pytest.importorskip("dask.array", reason="the dask extra is installed by .ci/run")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = X @ [1.0, 2.0, 3.0] + 0.5 * rng.normal(size=400)

    def build(X, y):
        with fg.Model("dask rows") as m:
            n = fg.plate("n", 400)
            w = fg.mv_gaussian("w", mean=np.zeros(3), precision=1e-2)
            fg.gaussian("y", mean=fg.inner(X, w, [n]), precision=fg.gamma("tau", 1.0, 1.0), plates=[n], observed=y)
        return m

    svi = fg.SVI(batch_size=50, learning_rate=(1.0, 0.7))
    a = fg.infer(build(X, y), svi, max_iter=60, seed=1)
    b = fg.infer(build(da.from_array(X, chunks=(100, 3)), da.from_array(y, chunks=100)), svi, max_iter=60, seed=1)
    assert b.elbo == pytest.approx(a.elbo, rel=1e-12)
    np.testing.assert_allclose(b.posterior("w").mean(), a.posterior("w").mean(), rtol=1e-12, atol=1e-14)
    assert b.posterior("tau").mean() == pytest.approx(a.posterior("tau").mean(), rel=1e-12)


def test_constants_per_row_in_products_under_svi():
    """a[g] + b[g]·x + c·x with x a constant per row (it was refused): in memory x is subsampled with the rows,
    raw or as a data node, and the end is near VMP's; streamed, the batch keys are the data nodes' names (one
    key "g" for the labels of both views); a polynomial with per-row coefficients is refused with the way out."""
    rng = np.random.default_rng(4)
    G, N = 6, 360
    g = rng.integers(0, G, N)
    x = rng.normal(size=N)
    y = rng.normal(0, 2, G)[g] + rng.normal(1, 0.5, G)[g] * x + 0.5 * rng.normal(size=N)

    def build(kind):
        with fg.Model(kind) as m:
            n, grp = fg.plate("n", N), fg.plate("g", G)
            a = fg.gaussian("a", fg.gaussian("m0", 0.0, precision=0.01), precision=1.0, plates=[grp])
            b = fg.gaussian("b", 0.0, precision=1.0, plates=[grp])
            xx, gg = (fg.data("x", x), fg.data("g", g)) if kind == "data" else (x, g)
            if kind == "polynomial":
                ag = a[g]
                mean = ag + ag * x
            else:
                mean = a[gg] + b[gg] * xx + fg.gaussian("c", 0.0, precision=1.0) * xx
            fg.gaussian("y", mean=mean, precision=fg.gamma("tau", 1.0, 1.0), plates=[n], observed=y)
        return m

    vmp = fg.infer(build("raw"))
    raw, data = (fg.infer(build(k), algorithm=fg.SVI(batch_size=40), max_iter=150, seed=3) for k in ("raw", "data"))
    assert raw.elbo == pytest.approx(data.elbo, rel=1e-12)
    assert rel(raw.elbo, vmp.elbo) < 3e-3

    def stream():
        for i in range(300):
            idx = np.random.default_rng(i).integers(0, N, 40)
            yield {"y": y[idx], "x": x[idx], "g": g[idx]}

    s = fg.infer(build("data"), algorithm=fg.SVI(batch_size=40, n_data=N), data=stream(), max_iter=300)
    np.testing.assert_allclose(s.posterior("b").mean(), vmp.posterior("b").mean(), atol=0.15)
    np.testing.assert_allclose(s.posterior("a").mean(), vmp.posterior("a").mean(), atol=0.15)
    with pytest.raises(fg.ModelError, match=r"polynomial.*vary over the data plate 'n'.*a\[g\] \* \(1 \+ x\)"):
        fg.infer(build("polynomial"), algorithm=fg.SVI(batch_size=40), max_iter=5)


def test_streamed_batches_that_do_not_fit_are_named_by_key_and_place():
    """A bad batch names the user's key ("X", not the expression's internal name) and its place in the stream;
    rows that disagree name the arrays; batches larger than n_data are refused, as batch_size > N is in memory."""
    X, y = regression_data(10)
    m = regression(X, y)
    rng = np.random.default_rng(1)

    def run(batches, batch_size=5, n_data=100):
        return fg.infer(m, algorithm=fg.SVI(batch_size=batch_size, n_data=n_data), data=iter(batches), max_iter=5)

    ok = {"X": rng.normal(size=(5, 4)), "y": rng.normal(size=5)}
    with pytest.raises(fg.ModelError, match=r"SVI: batch 1 of the stream \(counted from 0\): 'X' has shape \(5, 3\); "
                                            r"the model's 'X' has shape \(10, 4\), so a batch's must be \(rows, 4\)"):
        run([ok, {"X": rng.normal(size=(5, 3)), "y": rng.normal(size=5)}])
    with pytest.raises(fg.ModelError, match=r"batch 0 of the stream \(counted from 0\): 'y' has shape \(5, 2\).*"
                                            r"must be \(rows,\)"):
        run([{"X": ok["X"], "y": rng.normal(size=(5, 2))}])
    with pytest.raises(fg.ModelError, match=r"batch 2 of the stream \(counted from 0\): its arrays disagree on the "
                                            r"number of rows: 'X' has 5, 'y' has 6"):
        run([ok, ok, {"X": ok["X"], "y": rng.normal(size=6)}])
    with pytest.raises(fg.ModelError, match=r"batch 0 of the stream \(counted from 0\) has no rows"):
        run([{"X": np.zeros((0, 4)), "y": np.zeros(0)}])
    with pytest.raises(fg.ModelError, match=r"SVI: batch_size 25 exceeds n_data=10"):
        run([{"X": rng.normal(size=(25, 4)), "y": rng.normal(size=25)}], batch_size=25, n_data=10)
    with pytest.raises(fg.ModelError, match=r"batch 1 of the stream \(counted from 0\) has 25 rows, more than "
                                            r"n_data=10"):
        run([ok, {"X": rng.normal(size=(25, 4)), "y": rng.normal(size=25)}], n_data=10)
    with pytest.raises(fg.ModelError, match=r"batch 1 of the stream \(counted from 0\): 'y' has non-finite values"):
        run([ok, {"X": ok["X"], "y": [1.0, 2.0, np.nan, 4.0, 5.0]}])
    with pytest.raises(fg.ModelError, match=r"batch 1 of the stream \(counted from 0\) must be a dict of row arrays "
                                            r"keyed by \['X', 'y'\], got list"):
        run([ok, [1, 2]])
    with pytest.raises(fg.ModelError, match=r"batch 0 of the stream \(counted from 0\) gives 'X' twice"):
        run([{"X": ok["X"], "inner_0": ok["X"], "y": ok["y"]}])
    assert run([ok, ok], n_data=10).n_iter == 2


def test_a_callback_stops_svi_unconverged_unless_it_says_converged():
    m = regression(*regression_data(40))
    alg = fg.SVI(batch_size=10)
    with pytest.warns(fg.ConvergenceWarning, match=r"not converged \(a callback stopped the run at step 3\)"):
        r = fg.infer(m, algorithm=alg, max_iter=20, callbacks=[lambda it, elbo, eng: it == 3])
    assert r.n_iter == 3 and not r.converged and r.warnings
    r = fg.infer(m, algorithm=alg, max_iter=20, callbacks=[lambda it, elbo, eng: "converged" if it == 4 else None])
    assert r.n_iter == 4 and r.converged and not r.warnings
    assert fg.infer(m, algorithm=alg, max_iter=5).converged


def test_svi_in_memory_reports_named_deterministic_nodes():
    X, y = regression_data(60)
    with fg.Model("det") as m:
        n = fg.plate("n", 60)
        w = fg.mv_gaussian("w", mean=np.zeros(4), precision=np.eye(4))
        f = fg.deterministic("f", fg.inner(X, w, plates=[n]))
        fg.gaussian("y", mean=f, precision=10.0, plates=[n], observed=y)
    svi = fg.infer(m, algorithm=fg.SVI(batch_size=20), max_iter=100, seed=0)
    q, qw = svi.posterior("f"), svi.posterior("w")  # f = Xw: its moments are those of q(w), exactly
    np.testing.assert_allclose(q.mean(), X @ qw.mean(), rtol=1e-10)
    np.testing.assert_allclose(q.var(), np.einsum("nd,de,ne->n", X, qw.cov(), X), rtol=1e-8)
    assert svi.summary(var_names="f").shape == (60, 5)
    assert svi.to_arviz(draws=40).posterior["f"].shape == (4, 10, 60)
