"""Sharded plates (dask data): the same posteriors and ELBO as in memory, on a two-process LocalCluster and on
Dask's default threaded scheduler; the reporting; bad chunks; a lost worker."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import factorgraph as fg

da = pytest.importorskip("dask.array")  # the dask extra, installed by .ci/run
distributed = pytest.importorskip("distributed")

RTOL = 1e-10


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       silence_logs=40)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def _data(N=240, D=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    w = np.array([1.0, -2.0, 0.5])[:D]
    y = X @ w + 0.3 * rng.normal(size=N)
    s = (rng.random(N) < 1.0 / (1.0 + np.exp(-(X @ w)))).astype(float)
    return X, y, s


def _chunked(a, rows=80):
    return da.from_array(a, chunks=(rows,) + a.shape[1:])


def linear(X, y, fused=True):
    N, D = X.shape
    with fg.Model("linear") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=np.zeros(D), precision=1.0)
        tau = fg.gamma("tau", 1.0, 1.0)
        mean = fg.inner(X, w, plates=[n])
        if not fused:  # an intercept: the likelihood stays factorised (messages through the sum)
            mean = mean + fg.gaussian("b", 0.0, precision=1.0)
        fg.gaussian("y", mean=mean, precision=tau, plates=[n], observed=y)
    return m


def logistic(X, s):
    N, D = X.shape
    with fg.Model("logistic") as m:
        n = fg.plate("n", N)
        alpha = fg.gamma("alpha", 1.0, 1.0)
        w = fg.mv_gaussian("w", mean=np.zeros(D), precision=alpha)
        fg.bernoulli_logit("s", fg.inner(X, w, plates=[n]), observed=s, plates=[n])
    return m


def gaussian_mixture(x, K=3):
    N = x.shape[0]
    with fg.Model("gaussian_mixture") as m:
        k, n = fg.plate("k", K), fg.plate("n", N)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(K)), plates=[n])
        mu = fg.gaussian("mu", 0.0, precision=0.01, plates=[k])
        tau = fg.gamma("tau", 1.0, 1.0, plates=[k])
        fg.gaussian("x", mu[z], precision=tau[z], plates=[n], observed=x)
    return m


def varying_intercept(y, groups, G=7):
    N = y.shape[0]
    with fg.Model("varying_intercept") as m:
        c, n = fg.plate("c", G), fg.plate("n", N)
        mu = fg.gaussian("mu", 0.0, precision=0.01)
        a = fg.gaussian("a", mean=mu, precision=fg.gamma("tau_a", 2.0, 1.0), plates=[c])
        fg.gaussian("y", mean=a[groups], precision=fg.gamma("tau", 2.0, 1.0), plates=[n], observed=y)
    return m


def varying_slopes(y, groups, X, G=7, generic=False):
    """Varying intercepts and slopes beside fixed effects: fused onto per-group Gram matrices in each chunk
    (``generic``: + 0.0, the gather/scatter path, whose indexed views inside the sum are cut per chunk)."""
    N = y.shape[0]
    with fg.Model("varying_slopes") as m:
        c, n, d = fg.plate("c", G), fg.plate("n", N), fg.plate("d", 2)
        a = fg.gaussian("a", mean=fg.gaussian("mu", 0.0, precision=0.01), precision=fg.gamma("tau_a", 2.0, 1.0),
                        plates=[c])
        b = fg.gaussian("b", 0.0, precision=1.0, plates=[c, d])
        w = fg.mv_gaussian("w", np.zeros(1), precision=1.0)
        mean = a[groups] + fg.inner(X[:, :2], fg.index(b, groups, plate=n, along=c), [n]) + fg.inner(X[:, 2:], w, [n])
        fg.gaussian("y", mean=mean + 0.0 if generic else mean, precision=fg.gamma("tau", 2.0, 1.0), plates=[n],
                    observed=y)
    return m


def slopes_times_rows(y, groups, x, G=7, kind="fused"):
    """a[g] + b[g]·x with x a numpy column per row, which each chunk cuts to its rows: fused, on the gather/scatter
    path (a term 0.5·x of its own), a polynomial (a[g] in two terms), or a common slope (a[g] + beta·x)."""
    N = y.shape[0]
    with fg.Model("slopes_times_rows") as m:
        c, n = fg.plate("c", G), fg.plate("n", N)
        a = fg.gaussian("a", mean=fg.gaussian("mu", 0.0, precision=0.01), precision=fg.gamma("tau_a", 2.0, 1.0),
                        plates=[c])
        b = fg.gaussian("b", 0.0, precision=1.0, plates=[c])
        if kind == "polynomial":
            ag = a[groups]
            mean = ag + ag * x
        elif kind == "common":  # one slope for every group: the unplated beta puts x on the rows' plate by size
            mean = a[groups] + fg.gaussian("beta", 0.0, precision=1.0) * x
        else:
            mean = a[groups] + b[groups] * x
            if kind == "generic":
                mean = mean + 0.5 * x
        fg.gaussian("y", mean=mean, precision=fg.gamma("tau", 2.0, 1.0), plates=[n], observed=y)
    return m


def poisson_regression(X, counts):
    N, D = X.shape
    with fg.Model("poisson") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=np.zeros(D), precision=1.0)
        fg.poisson_log("y", fg.inner(X, w, plates=[n]), plates=[n], observed=counts)
    return m


def softmax_regression(X, labels, K=3):
    N, D = X.shape
    with fg.Model("softmax") as m:
        n, k = fg.plate("n", N), fg.plate("k", K)
        W = fg.mv_gaussian("W", mean=np.zeros(D), precision=1.0, plates=[k])
        fg.categorical_softmax("y", fg.inner(X, W, plates=[n]), over=k, observed=labels)
    return m


def bernoulli_mixture(B, K=2):
    N, Dd = B.shape
    with fg.Model("bernoulli_mixture") as m:
        k, n, d = fg.plate("k", K), fg.plate("n", N), fg.plate("d", Dd)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(K)), plates=[n])
        p = fg.beta("p", 1.0, 1.0, plates=[k, d])
        fg.bernoulli("x", p[z], plates=[n, d], observed=B)
    return m


def lda(words, K=2, V=6):
    n_docs, length = words.shape
    with fg.Model("lda") as m:
        k, doc, w = fg.plate("k", K), fg.plate("doc", n_docs), fg.plate("w", length)
        phi = fg.dirichlet("phi", np.full(V, 0.5), plates=[k])
        theta = fg.dirichlet("theta", np.ones(K), plates=[doc])
        z = fg.categorical("z", theta, plates=[doc, w], categories=k)
        fg.categorical("words", phi[z], plates=[doc, w], observed=words)
    return m


def _words(N=240, length=5, seed=6):
    """Two topics over six words (words 0–2 and 3–5), each document mostly one of them."""
    rng = np.random.default_rng(seed)
    topic = (rng.random((N, length)) < rng.choice([0.1, 0.9], N)[:, None]).astype(int)
    return 3 * topic + rng.integers(0, 3, (N, length))


def _count_data(N=240, seed=3):
    X, _, _ = _data(N)
    rng = np.random.default_rng(seed)
    return rng.poisson(np.exp(0.5 * X @ np.array([1.0, -1.0, 0.5]))).astype(float)


def _class_data(N=240, seed=4):
    X, _, _ = _data(N)
    rng = np.random.default_rng(seed)
    logits = X @ rng.normal(size=(3, 3)).T
    return np.array([rng.choice(3, p=np.exp(r) / np.exp(r).sum()) for r in logits])


def _binary_data(N=240, seed=5):
    rng = np.random.default_rng(seed)
    protos = np.array([[0.9, 0.8, 0.1, 0.2], [0.1, 0.2, 0.9, 0.7]])
    return (rng.random((N, 4)) < protos[rng.integers(0, 2, N)]).astype(float)


def _mixture_data(N=240, seed=1):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(-3, 1, N // 3), rng.normal(0, 0.5, N // 3), rng.normal(4, 1, N - 2 * (N // 3))])
    return rng.permutation(x)


def _groups(N=240, G=7, seed=2):
    rng = np.random.default_rng(seed)
    g = rng.integers(0, G, N)
    return g, rng.normal(size=G)[g] + 0.3 * rng.normal(size=N)


def _same(r0, r1, names, rtol=RTOL, elbo_rtol=None):
    assert r1.n_iter == r0.n_iter
    assert abs(r1.elbo - r0.elbo) <= (rtol if elbo_rtol is None else elbo_rtol) * abs(r0.elbo)
    for name in names:
        for a, b in zip(r0.posterior(name).natural, r1.posterior(name).natural, strict=True):
            np.testing.assert_allclose(b, a, rtol=rtol, atol=rtol * np.max(np.abs(a)))


CASES = {
    "linear_fused": (lambda X, y, s, c: linear(c(X), c(y)), lambda X, y, s: linear(X, y), ["w", "tau"]),
    "linear_factorised": (lambda X, y, s, c: linear(c(X), c(y), fused=False), lambda X, y, s: linear(X, y, False),
                          ["w", "tau", "b"]),
    "logistic_ncvmp": (lambda X, y, s, c: logistic(c(X), c(s)), lambda X, y, s: logistic(X, s), ["w", "alpha"]),
    # the selector starts from the same k-means++ seeding as in memory (the chunks compute distances, the
    # driver draws); the responsibilities are collected from the chunks by ``posterior("z")``
    "gaussian_mixture": (lambda X, y, s, c: gaussian_mixture(c(_mixture_data())),
                         lambda X, y, s: gaussian_mixture(_mixture_data()), ["mu", "tau", "pi", "z"]),
    # the handler on the driver; log p̃, its gradient and Hessian are sums over the chunks' rows
    "logistic_laplace": (lambda X, y, s, c: logistic(c(X), c(s)), lambda X, y, s: logistic(X, s), ["w", "alpha"],
                         {"handlers": {"w": fg.Laplace()}}),
    "poisson_ncvmp": (lambda X, y, s, c: poisson_regression(c(X), c(_count_data())),
                      lambda X, y, s: poisson_regression(X, _count_data()), ["w"]),
    "softmax_ncvmp": (lambda X, y, s, c: softmax_regression(c(X), c(_class_data())),
                      lambda X, y, s: softmax_regression(X, _class_data()), ["W"], {"max_iter": 25}),
    # one token per label: the start is the tokens' responsibilities from random topics the driver draws
    "lda": (lambda X, y, s, c: lda(c(_words())), lambda X, y, s: lda(_words()), ["phi", "theta", "z"]),
    "bernoulli_mixture": (lambda X, y, s, c: bernoulli_mixture(c(_binary_data())),
                          lambda X, y, s: bernoulli_mixture(_binary_data()), ["p", "pi", "z"]),
    # segment sums over the groups, per chunk, added on the driver
    "varying_intercept": (lambda X, y, s, c: varying_intercept(c(_groups()[1]), _groups()[0]),
                          lambda X, y, s: varying_intercept(_groups()[1], _groups()[0]), ["a", "mu", "tau", "tau_a"]),
    # per-group Gram matrices of the design, per chunk (factors/grouped_linear_gaussian.py)
    "varying_slopes": (lambda X, y, s, c: varying_slopes(c(_groups()[1]), _groups()[0], c(X)),
                       lambda X, y, s: varying_slopes(_groups()[1], _groups()[0], X), ["a", "b", "w", "mu", "tau"]),
    # a constant per row inside a product (b[g]·x), cut per chunk like the data
    **{f"slopes_times_rows_{k}": (
        lambda X, y, s, c, k=k: slopes_times_rows(c(_groups()[1]), _groups()[0], X[:, 0], kind=k),
        lambda X, y, s, k=k: slopes_times_rows(_groups()[1], _groups()[0], X[:, 0], kind=k),
        ["a", "mu", "tau"]) for k in ("fused", "generic", "polynomial", "common")},
    # the column itself a dask array, chunked like the data: each chunk gets its block
    **{f"slopes_times_dask_column_{k}": (
        lambda X, y, s, c, k=k: slopes_times_rows(c(_groups()[1]), _groups()[0], c(X[:, 0]), kind=k),
        lambda X, y, s, k=k: slopes_times_rows(_groups()[1], _groups()[0], X[:, 0], kind=k),
        ["a", "mu", "tau"]) for k in ("fused", "generic", "common")},
    "varying_slopes_generic": (lambda X, y, s, c: varying_slopes(c(_groups()[1]), _groups()[0], c(X), generic=True),
                               lambda X, y, s: varying_slopes(_groups()[1], _groups()[0], X, generic=True),
                               ["a", "b", "w", "mu", "tau"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_sharded_equals_in_memory_on_a_cluster(client, case):
    build_dask, build_np, names, *options = CASES[case]
    options = {"progress": False, **(options[0] if options else {})}
    X, y, s = _data()
    with warnings.catch_warnings():  # a case run for a fixed number of sweeps warns alike in both
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        r0 = fg.infer(build_np(X, y, s), **options)
        r1 = fg.infer(build_dask(X, y, s, _chunked), **options)
    _same(r0, r1, names)
    assert r1.sharding["backend"] == "distributed" and r1.sharding["workers"] == 2
    assert r1.sharding["chunks"] == 3 and r1.sharding["chunk_rows"] == [80, 80, 80]
    assert r1.sharding["bytes_per_sweep"] > 0


@pytest.mark.parametrize("handler", [fg.MVI("mean"), fg.MVI("eig"), fg.VIDiag(), fg.MVI("lr")], ids=repr)
def test_fixed_sample_handlers_over_chunks_equal_in_memory(client, handler):
    """MVI and VIDiag fit the block on the driver; Σ_n log f_n at the fixed draws and its gradient are sums
    over the chunks' rows.  Re-associating those sums changes the objective in its last digits only, but these
    fits are optimiser stopping points (L-BFGS to a tolerance), not closed-form fixed points, and the path
    follows those last digits: the low-rank ("lr") family L = C + (Cu)vᵀ has a flat direction (u, v ↦ cu, v/c),
    and the in-memory fit itself moves by 1.5e-7 (relative, natural parameters of w) when the same rows are
    summed in another order (rows permuted); "mean" was seen to move by 1e-8 under CI's multi-threaded BLAS
    (round-off of the same order in the chunks' matrix products), though it agrees to 1e-15 single-threaded.
    So these fits are held to 1e-6 on the posteriors; the ELBO, a smooth function at the optimum, to 1e-10."""
    X, _y, s = _data()
    r0 = fg.infer(logistic(X, s), handlers={"w": handler}, progress=False)
    r1 = fg.infer(logistic(_chunked(X), _chunked(s)), handlers={"w": handler}, progress=False)
    _same(r0, r1, ["w", "alpha"], rtol=1e-6, elbo_rtol=RTOL)
    assert r1.sharding["backend"] == "distributed" and r1.sharding["chunks"] == 3


def test_sharded_on_the_threaded_scheduler_without_a_client():
    X, y, s = _data()
    r0 = fg.infer(logistic(X, s), progress=False)
    import dask

    with dask.config.set(scheduler="threads"):  # the local scheduler, even with the module's client active
        r1 = fg.infer(logistic(_chunked(X, 50), _chunked(s, 50)), progress=False)
    _same(r0, r1, ["w", "alpha"])
    assert r1.sharding["backend"] == "threads" and r1.sharding["chunk_rows"] == [50, 50, 50, 50, 40]
    assert any("sharded plate 'n': 5 chunks" in n for n in r1.notes)


def test_a_chunk_with_bad_values_names_the_variable_and_the_rows(client):
    X, y, s = _data()
    y = y.copy()
    y[170] = np.nan
    with pytest.raises(fg.ModelError) as mem:
        linear(X, y)
    with pytest.raises(fg.ModelError, match=r"observed data of 'y' contains nan.*chunk at rows 160–239") as dist:
        fg.infer(linear(_chunked(X), _chunked(y)), progress=False)
    assert str(mem.value) in str(dist.value)


def test_bytes_per_sweep_do_not_grow_with_the_rows(client):
    X, y, _s = _data(N=480)
    small = fg.infer(linear(_chunked(X[:240]), _chunked(y[:240])), progress=False).sharding
    large = fg.infer(linear(_chunked(X), _chunked(y)), progress=False).sharding
    assert large["chunks"] == 2 * small["chunks"]
    # the same messages per chunk: twice the chunks move twice the bytes, whatever the rows per chunk
    assert large["bytes_per_sweep"] <= 2.2 * small["bytes_per_sweep"]


def test_a_worker_killed_mid_fit_is_recovered_with_the_same_result(client):
    """The chunks of a lost worker are rebuilt from their data elsewhere and their commands replayed."""
    import os
    import signal

    X, y, s = _data()
    r0 = fg.infer(logistic(X, s), progress=False)
    killed = []

    def kill(it, elbo, eng):
        if it == 3 and not killed:
            address = eng.backend.actors[0]._address
            killed.append(address)
            pid = client.run(os.getpid, workers=[address])[address]
            os.kill(pid, signal.SIGKILL)

    r1 = fg.infer(logistic(_chunked(X), _chunked(s)), callbacks=[kill], progress=False)
    assert killed and r1.sharding["retries"] >= 1
    _same(r0, r1, ["w", "alpha"])
    client.wait_for_workers(2, timeout=60)


def test_arrays_chunked_differently_are_cut_alike():
    """X in chunks of 100 rows and y in chunks of 60: both are cut at y's boundaries (observed values come
    first, then the inner products' inputs)."""
    import dask

    X, y, _s = _data()
    r0 = fg.infer(linear(X, y, fused=False), progress=False)
    with dask.config.set(scheduler="threads"):
        r1 = fg.infer(linear(_chunked(X, 100), _chunked(y, 60), fused=False), progress=False)
    _same(r0, r1, ["w", "tau", "b"])
    assert r1.sharding["chunk_rows"] == [60, 60, 60, 60]


def test_dask_data_chunked_along_two_plates_is_refused():
    B = _binary_data()
    with pytest.raises(fg.ModelError, match=r"the observed data of 'x' is a dask array chunked along several plates "
                                            r"\['n', 'd'\]"):
        fg.infer(bernoulli_mixture(da.from_array(B, chunks=(80, 2))), progress=False)


# ------------------------------------------------------------------------------------ missing entries
def _missing(N=240, rate=0.2, seed=7, observed_chunk=None):
    """A missing-entry pattern (True = missing); with ``observed_chunk`` = (a, b) rows a..b−1 miss nothing."""
    miss = np.random.default_rng(seed).random(N) < rate
    if observed_chunk is not None:
        miss[slice(*observed_chunk)] = False
    return miss


def linear_masked(X, y, mask, fused=True):
    N, D = X.shape
    with fg.Model("linear") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=np.zeros(D), precision=1.0)
        tau = fg.gamma("tau", 1.0, 1.0)
        mean = fg.inner(X, w, plates=[n])
        if not fused:
            mean = mean + fg.gaussian("b", 0.0, precision=1.0)
        fg.gaussian("y", mean=mean, precision=tau, plates=[n], observed=y, mask=mask)
    return m


def mixture_masked(x, mask, K=3):
    N = x.shape[0]
    with fg.Model("gaussian_mixture") as m:
        k, n = fg.plate("k", K), fg.plate("n", N)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(K)), plates=[n])
        mu = fg.gaussian("mu", 0.0, precision=0.01, plates=[k])
        tau = fg.gamma("tau", 1.0, 1.0, plates=[k])
        fg.gaussian("x", mu[z], precision=tau[z], plates=[n], observed=x, mask=mask)
    return m


# the ways to mark dask data's missing entries: a numpy mask, a dask mask (chunked otherwise: it is cut like
# the data), a dask masked array (nan entries masked)
MASKINGS = {
    "numpy_mask": lambda v, miss: (_chunked(v), ~miss),
    "dask_mask": lambda v, miss: (_chunked(v), da.from_array(~miss, chunks=50)),
    "dask_masked_array": lambda v, miss: (da.ma.masked_invalid(_chunked(v)), None),
}


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "factorised"])
@pytest.mark.parametrize("masking", sorted(MASKINGS))
def test_linear_regression_with_missing_y_equals_in_memory(client, masking, fused):
    """Missing y drop out of the likelihood (their rows leave XᵀX, Xᵀy) in each chunk as in memory; the values at
    missing entries (nan here) are never read."""
    X, y, _s = _data()
    miss = _missing()
    y = np.where(miss, np.nan, y)
    r0 = fg.infer(linear_masked(X, y, ~miss, fused), progress=False)
    yd, mask = MASKINGS[masking](y, miss)
    r1 = fg.infer(linear_masked(_chunked(X), yd, mask, fused), progress=False)
    _same(r0, r1, ["w", "tau"] + ([] if fused else ["b"]))
    assert r1.sharding["chunks"] == 3 and r1.sharding["backend"] == "distributed"


@pytest.mark.parametrize("masking", sorted(MASKINGS))
def test_gaussian_mixture_with_missing_entries_equals_in_memory(client, masking):
    """The first chunk misses nothing, the others do: x is partly observed in every chunk's eyes, so no chunk
    seeds k-means++ from it, and z starts from the in-memory Dirichlet(1) draws (each chunk replays the stream
    to its rows).  A row with x missing has no observed descendant; its z drops out, per chunk as in memory."""
    x = _mixture_data()
    miss = _missing(rate=0.15, seed=8, observed_chunk=(0, 80))
    x = np.where(miss, np.nan, x)
    r0 = fg.infer(mixture_masked(x, ~miss), progress=False)
    xd, mask = MASKINGS[masking](x, miss)
    r1 = fg.infer(mixture_masked(xd, mask), progress=False)
    _same(r0, r1, ["mu", "tau", "pi", "z"])


def test_a_bad_value_at_an_observed_entry_of_masked_dask_data_names_its_chunk(client):
    X, y, _s = _data()
    miss = _missing()
    y = np.where(miss, np.nan, y)  # nan where missing: fine
    bad = int(np.flatnonzero(~miss[160:])[0]) + 160
    y[bad] = np.inf
    with pytest.raises(fg.ModelError, match=r"observed data of 'y' contains inf.*chunk at rows 160–239"):
        fg.infer(linear_masked(_chunked(X), _chunked(y), ~miss), progress=False)


def _latent_parent(y, x, mask):
    N = len(x)
    with fg.Model("latent_parent") as m:
        n = fg.plate("n", N)
        mu = fg.gaussian("mu", 0.0, precision=0.01)
        yy = fg.gaussian("y", mu, precision=1.0, plates=[n], observed=y, mask=mask)
        fg.gaussian("x", yy, precision=fg.gamma("t", 1.0, 1.0), plates=[n], observed=x)
    return m


def test_missing_entries_of_a_parent_are_local_latent_variables(client):
    """y's missing entries are latent (x observes them): each chunk keeps them, ``posterior("y")`` collects."""
    rng = np.random.default_rng(3)
    y = 1.0 + rng.normal(size=240)
    x = y + rng.normal(size=240)
    miss = _missing(seed=4)
    r0 = fg.infer(_latent_parent(y, x, ~miss), progress=False)
    r1 = fg.infer(_latent_parent(_chunked(y), _chunked(x), ~miss), progress=False)
    _same(r0, r1, ["mu", "t", "y"])
    # a chunk without missing entries of y would compile y as data, not as a latent variable: refused
    miss[:80] = False
    with pytest.raises(fg.ModelError, match=r"chunk 0 \(rows 0–79\) and chunk 1 \(rows 80–159\) differ in the "
                                            r"latent variables \['y'\]"):
        fg.infer(_latent_parent(_chunked(y), _chunked(x), ~miss), progress=False)


def poisson_masked(X, counts, mask):
    N, D = X.shape
    with fg.Model("poisson") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=np.zeros(D), precision=1.0)
        fg.poisson_log("y", fg.inner(X, w, plates=[n]), plates=[n], observed=counts, mask=mask)
    return m


def bernoulli_mixture_masked(B, mask, K=2):
    N, Dd = B.shape
    with fg.Model("bernoulli_mixture") as m:
        k, n, d = fg.plate("k", K), fg.plate("n", N), fg.plate("d", Dd)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(K)), plates=[n])
        p = fg.beta("p", 1.0, 1.0, plates=[k, d])
        fg.bernoulli("x", p[z], plates=[n, d], observed=B, mask=mask)
    return m


@pytest.mark.parametrize("masking", ["numpy_mask", "dask_masked_array"])
def test_missing_counts_and_binary_entries_equal_in_memory(client, masking):
    """Counts (NCVMP Poisson regression) and 0/1 data (a Bernoulli mixture, entries missing over (n, d)) are
    validated per chunk at their observed entries only, as in memory."""
    X, _y, _s = _data()
    miss = _missing(seed=5)
    c = np.where(miss, np.nan, _count_data())
    r0 = fg.infer(poisson_masked(X, c, ~miss), progress=False)
    cd, mask = MASKINGS[masking](c, miss)
    _same(r0, fg.infer(poisson_masked(_chunked(X), cd, mask), progress=False), ["w"])
    bm = np.random.default_rng(9).random((240, 4)) < 0.1
    B = np.where(bm, np.nan, _binary_data())
    r0 = fg.infer(bernoulli_mixture_masked(B, ~bm), progress=False)
    Bd, mask = MASKINGS[masking](B, bm)
    _same(r0, fg.infer(bernoulli_mixture_masked(Bd, mask), progress=False), ["p", "pi", "z"])


@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_init_of_a_local_variable_is_cut_like_the_data(client, kind):
    """init= of the responsibilities, numpy or dask (chunked otherwise): each chunk receives its rows only."""
    x = _mixture_data()
    r = np.full((len(x), 3), 0.1)  # mostly the nearest of three guessed centres
    r[np.arange(len(x)), np.abs(x[:, None] - np.array([-2.0, 0.5, 3.0])).argmin(1)] = 0.8
    r0 = fg.infer(gaussian_mixture(x), init={"z": r}, progress=False)
    start = r if kind == "numpy" else da.from_array(r, chunks=(70, 3))
    r1 = fg.infer(gaussian_mixture(_chunked(x)), init={"z": start}, progress=False)
    _same(r0, r1, ["mu", "tau", "pi", "z"])
    with pytest.raises(fg.ModelError, match=r"init of 'z' must be probabilities of shape \(240, 3\).*got shape "
                                            r"\(240, 2\)"):
        fg.infer(gaussian_mixture(_chunked(x)), init={"z": da.from_array(r[:, :2])}, progress=False)


def logistic_masked(X, s, mask):
    N, D = X.shape
    with fg.Model("logistic") as m:
        n = fg.plate("n", N)
        alpha = fg.gamma("alpha", 1.0, 1.0)
        w = fg.mv_gaussian("w", mean=np.zeros(D), precision=alpha)
        fg.bernoulli_logit("s", fg.inner(X, w, plates=[n]), observed=s, plates=[n], mask=mask)
    return m


def softmax_masked(X, labels, mask, K=3):
    N, D = X.shape
    with fg.Model("softmax") as m:
        n, k = fg.plate("n", N), fg.plate("k", K)
        W = fg.mv_gaussian("W", mean=np.zeros(D), precision=1.0, plates=[k])
        fg.categorical_softmax("y", fg.inner(X, W, plates=[n]), over=k, observed=labels, mask=mask)
    return m


@pytest.mark.parametrize("masking", ["dask_mask", "dask_masked_array"])
def test_missing_binary_labels_equal_in_memory(client, masking):
    """Binary labels (logistic regression) with missing entries: recoded and checked per chunk at observed
    entries only, as in memory."""
    X, _y, s = _data()
    miss = _missing(seed=5)
    s = np.where(miss, np.nan, s)
    r0 = fg.infer(logistic_masked(X, s, ~miss), progress=False)
    sd, mask = MASKINGS[masking](s, miss)
    _same(r0, fg.infer(logistic_masked(_chunked(X), sd, mask), progress=False), ["w", "alpha"])


def test_missing_class_labels_in_dask_data_are_refused():
    """One-hot class labels with missing entries trip the distributed scheduler when a fit is repeated on the
    same arrays (an assertion on a resubmitted key, seen with dask.distributed here): refused for now."""
    X, _y, _s = _data()
    miss = _missing(seed=6)
    with pytest.raises(fg.ModelError, match=r"labels of 'y' are a dask array: missing labels"):
        softmax_masked(_chunked(X), _chunked(np.where(miss, np.nan, _class_data().astype(float))), ~miss)


def test_missing_topic_words_in_dask_data_are_refused():
    """``fg.categorical`` takes dask labels as ``fg.categorical_softmax`` does, with the same refusal of missing
    labels (a mask, or a dask masked array)."""
    words = _words()
    mask = np.ones(words.shape, bool)
    mask[0, 0] = False
    with pytest.raises(fg.ModelError, match=r"labels of 'words' are a dask array: missing labels"):
        with fg.Model("lda"):
            k, doc, w = fg.plate("k", 2), fg.plate("doc", words.shape[0]), fg.plate("w", words.shape[1])
            z = fg.categorical("z", fg.dirichlet("theta", np.ones(2), plates=[doc]), plates=[doc, w], categories=k)
            fg.categorical("words", fg.dirichlet("phi", np.full(6, 0.5), plates=[k])[z], plates=[doc, w],
                           observed=_chunked(words), mask=mask)


def prior_mixture(x, means, K=3):
    """A Gaussian mixture whose components have distinct priors on their means, N(means[k], 0.25)."""
    N = x.shape[0]
    with fg.Model("prior_mixture") as m:
        k, n = fg.plate("k", K), fg.plate("n", N)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(K)), plates=[n])
        mu = fg.gaussian("mu", np.asarray(means, float), 4.0, plates=[k])
        tau = fg.gamma("tau", 1.0, 1.0, plates=[k])
        fg.gaussian("x", mu[z], tau[z], plates=[n], observed=x)
    return m


@pytest.mark.parametrize("means, how", [([-3.0, 0.0, 4.0], "priors"),
                                        ([40.0, 50.0, 60.0], "drawn, named after the priors")])
def test_a_selector_started_from_distinct_priors_starts_alike_over_chunks(means, how):
    """Components with distinct priors: each chunk starts its rows from their update given the priors, and when
    that leaves a component without a row (priors far from the data: every row nearest the prior at 40), the
    driver draws k-means++ after the other selectors and names the clusters after the priors from the chunks'
    summed agreement.  The fit equals the in-memory one either way (threaded scheduler, three chunks)."""
    import dask

    x = _mixture_data()
    r0 = fg.infer(prior_mixture(x, means), progress=False, seed=3)
    with dask.config.set(scheduler="threads"):
        r1 = fg.infer(prior_mixture(_chunked(x), means), progress=False, seed=3)
    assert r0.starts == r1.starts == {"z": how}
    _same(r0, r1, ["mu", "tau", "pi", "z"])
    assert np.all(np.diff(r0.posterior("mu").mean()) > 0)  # labels in the priors' order
