"""Out of core: a linear regression on Zarr data read lazily by dask, fitted on a two-process LocalCluster whose
workers' memory limit is below the data's size (a worker that held its share of the rows would pass its limit;
the chunks keep only XᵀX, Xᵀy and y).  Nothing but the global posteriors comes back to the client."""

from __future__ import annotations

import numpy as np
import pytest

import factorgraph as fg

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
