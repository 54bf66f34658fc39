"""Out of core: a linear regression on Zarr data read lazily by dask, fitted on a two-process LocalCluster whose
workers' memory limit is below the data's size (a worker that held its share of the rows would pass its limit;
the chunks keep only XᵀX, Xᵀy and y).  Nothing but the global posteriors comes back to the client."""

from __future__ import annotations

import numpy as np
import pytest

import factorgraph as fg

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")  # the dask extra, installed by .ci/run
distributed = pytest.importorskip("distributed")
pytest.importorskip("zarr")

N, D, CHUNKS = 12_000_000, 9, 24  # 960 MB of data
# bytes per worker: Dask pauses a worker at 80% of it, and a worker that has just compiled the library's numba
# kernels (a fresh clone, cold cache) holds about 330 MB, so 400 MB paused the workers and the fit stalled
LIMIT = 800e6


def _write(path, w_true: np.ndarray) -> None:
    import zarr

    rows = N // CHUNKS
    X = zarr.create_array(store=str(path / "X.zarr"), shape=(N, D), chunks=(rows, D), dtype="f8")
    y = zarr.create_array(store=str(path / "y.zarr"), shape=(N,), chunks=(rows,), dtype="f8")
    rng = np.random.default_rng(0)
    for a in range(0, N, rows):
        Xc = rng.normal(size=(rows, D))
        X[a:a + rows] = Xc
        y[a:a + rows] = Xc @ w_true + 0.5 * rng.normal(size=rows)


@pytest.mark.slow
def test_linear_regression_on_zarr_under_a_worker_memory_limit(tmp_path):
    w_true = np.linspace(-1.0, 1.0, D)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=LIMIT,
                                  dashboard_address=None, silence_logs=40) as cluster, distributed.Client(cluster):
        _write(tmp_path, w_true)  # by this process, a chunk at a time: the workers only fit
        X, y = da.from_zarr(str(tmp_path / "X.zarr")), da.from_zarr(str(tmp_path / "y.zarr"))
        assert X.nbytes + y.nbytes > LIMIT  # the data do not fit in one worker
        with fg.Model("linear") as m:
            n = fg.plate("n", N)
            w = fg.mv_gaussian("w", mean=np.zeros(D), precision=1.0)
            tau = fg.gamma("tau", 1.0, 1.0)
            fg.gaussian("y", mean=fg.inner(X, w, plates=[n]), precision=tau, plates=[n], observed=y)
        r = fg.infer(m, progress=False)
    assert r.converged
    assert r.sharding["backend"] == "distributed" and r.sharding["chunks"] == CHUNKS and r.sharding["retries"] == 0
    assert r.sharding["bytes_per_sweep"] < 100_000  # the globals' moments and sums, never rows
    np.testing.assert_allclose(r.posterior("w").mean(), w_true, atol=2e-3)
    assert abs(1.0 / np.sqrt(r.posterior("tau").mean()) - 0.5) < 2e-3


def _linear(X, y):
    with fg.Model("linear") as m:
        n = fg.plate("n", X.shape[0])
        w = fg.mv_gaussian("w", mean=np.zeros(X.shape[1]), precision=1.0)
        fg.gaussian("y", mean=fg.inner(X, w, plates=[n]), precision=fg.gamma("tau", 1.0, 1.0), plates=[n], observed=y)
    return m


@pytest.mark.slow
def test_linear_regression_on_data_five_times_a_workers_memory_equals_the_in_memory_fit():
    """4 GB of rows drawn chunk by chunk by ``dask.array.random`` on the workers (never whole anywhere on the
    cluster), five times a worker's memory limit: each chunk is drawn, reduced to its XᵀX and Xᵀy and dropped.  The
    same draws computed into this process give the in-memory fit, and the two agree."""
    n_rows, d, rows = 25_000_000, 19, 500_000  # 50 chunks of 80 MB; a chunk keeps its 4 MB of y
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=LIMIT,
                                  dashboard_address=None, silence_logs=40) as cluster, distributed.Client(cluster):
        rng = da.random.default_rng(11)
        X = rng.normal(size=(n_rows, d), chunks=(rows, d))
        y = X @ np.linspace(-1.0, 1.0, d) + 0.5 * rng.normal(size=n_rows, chunks=rows)
        assert X.nbytes + y.nbytes >= 5 * LIMIT
        r1 = fg.infer(_linear(X, y), progress=False)
        assert r1.sharding["backend"] == "distributed" and r1.sharding["retries"] == 0
        assert r1.sharding["chunks"] == n_rows // rows
        Xm, ym = dask.compute(X, y, scheduler="threads")  # the same draws, in this process
    r0 = fg.infer(_linear(Xm, ym), progress=False)
    assert r0.converged and r1.converged
    assert abs(r1.elbo - r0.elbo) <= 1e-8 * abs(r0.elbo)
    for name in ("w", "tau"):
        for a, b in zip(r0.posterior(name).natural, r1.posterior(name).natural, strict=True):
            np.testing.assert_allclose(b, a, rtol=1e-8, atol=1e-8 * np.max(np.abs(a)))
