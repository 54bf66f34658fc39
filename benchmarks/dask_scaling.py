"""Sharded plates on Dask: time per sweep against N, in memory and sharded; bytes moved per sweep against D; and
a worked estimate for 10⁹ rows.

The model is Bayesian logistic regression under NCVMP (every sweep passes over every row: the per-row work
that sharding spreads).  A sweep's time is the median gap between the ``callbacks`` of successive sweeps, so
setting up the chunks is not counted.  Sharded runs use a ``LocalCluster(n_workers=2, processes=True)`` (and
Dask's threaded scheduler, without a client).  All figures come from one run on this machine.

    python -m benchmarks.dask_scaling            # N up to 10⁶
    python -m benchmarks.dask_scaling --small    # N up to 10⁵ (a quick look)
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import factorgraph as fg


def _data(N: int, D: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D)) / np.sqrt(D)
    w = rng.normal(size=D)
    return X, (rng.random(N) < 1.0 / (1.0 + np.exp(-(X @ w)))).astype(float)


def _model(X, s) -> fg.Model:
    N, D = X.shape
    with fg.Model("logistic") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=np.zeros(D), precision=1.0)
        fg.bernoulli_logit("s", fg.inner(X, w, plates=[n]), observed=s, plates=[n])
    return m


def _sweep_time(model, sweeps: int = 6) -> tuple[float, fg.Result]:
    import warnings

    stamps: list[float] = []
    with warnings.catch_warnings():  # a fixed number of sweeps: not converged, and not meant to be
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        r = fg.infer(model, max_iter=sweeps, tol=None, param_tol=None, progress=False,
                     callbacks=[lambda it, elbo, eng: stamps.append(time.perf_counter())])
    return float(np.median(np.diff(stamps))), r


def main(small: bool = False) -> None:
    import dask
    import dask.array as da
    import distributed

    D = 10
    sizes = [10_000, 100_000] if small else [10_000, 100_000, 1_000_000]
    chunks = 4
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cluster, distributed.Client(cluster):
        print(f"logistic regression (NCVMP), D = {D}, {chunks} chunks; seconds per sweep (median of 5)")
        print(f"{'N':>10} {'in memory':>10} {'threads':>10} {'cluster':>10} {'cluster/mem':>12} {'bytes/sweep':>12}")
        per_row = None
        for N in sizes:
            X, s = _data(N, D)
            t_mem, r0 = _sweep_time(_model(X, s))
            Xd, sd = da.from_array(X, chunks=(N // chunks, D)), da.from_array(s, chunks=N // chunks)
            with dask.config.set(scheduler="threads"):
                t_thr, _ = _sweep_time(_model(Xd, sd))
            Xd, sd = dask.persist(Xd, sd)  # on the workers, as a user would before a fit
            t_cl, r1 = _sweep_time(_model(Xd, sd))
            assert abs(r1.elbo - r0.elbo) <= 1e-10 * abs(r0.elbo)
            print(f"{N:>10} {t_mem:>10.4f} {t_thr:>10.4f} {t_cl:>10.4f} {t_cl / t_mem:>12.2f} "
                  f"{r1.sharding['bytes_per_sweep']:>12.0f}")
            per_row = (t_cl, N, r1.sharding)
        print(f"\nbytes moved per sweep against D (N = 20000, {chunks} chunks, cluster)")
        print(f"{'D':>6} {'bytes/sweep':>12} {'per chunk':>10} {'per chunk / (8·D²)':>19}")
        by_d = {}
        for d in (2, 10, 50, 100):
            X, s = _data(20_000, d)
            _, r = _sweep_time(_model(da.from_array(X, chunks=(5_000, d)), da.from_array(s, chunks=5_000)), 3)
            by_d[d] = r.sharding["bytes_per_sweep"]
            print(f"{d:>6} {by_d[d]:>12.0f} {by_d[d] / chunks:>10.0f} {by_d[d] / chunks / (8 * d * d):>19.2f}")
    t, N, sh = per_row
    # worked estimate: rows per worker scale the per-sweep compute; bytes scale with chunks × the globals
    rows, workers, chunk_rows = 1e9, 100, 1e7
    compute = t * (rows / workers) / (N / 2)  # measured seconds per row per worker, times the rows per worker
    n_chunks = rows / chunk_rows
    bytes_sweep = by_d[D] / chunks * n_chunks
    print(f"\nworked estimate for 10⁹ rows, D = {D}, on {workers} workers like these, chunks of {chunk_rows:.0e} "
          f"rows ({n_chunks:.0f} chunks):")
    print(f"  compute per sweep ≈ {t:.3f} s × (10⁹ / {workers}) / ({N} / 2) rows per worker = {compute:.1f} s")
    print(f"  bytes per sweep ≈ {by_d[D] / chunks:.0f} B per chunk × {n_chunks:.0f} = {bytes_sweep / 1e6:.2f} MB "
          "(independent of the rows)")
    print(f"  memory per worker: {rows / workers * (D + 2) * 8 / 1e9:.1f} GB of rows (X, y and NCVMP state per "
          "row) — or read out of core from Zarr as in tests/test_sharded_out_of_core.py")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true")
    main(parser.parse_args().small)
