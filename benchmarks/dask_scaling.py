"""Sharded plates on Dask: the per-sweep overhead of sharding for each kind of model at 10⁶ and 10⁷ rows, and (for
logistic regression) time per sweep against N, bytes moved per sweep against D, and a worked estimate for 10⁹ rows.

Per kind (linear regression fused and factorised, logistic, softmax, Gaussian mixture, Bernoulli mixture, varying
intercepts, Poisson regression, a hidden Markov model over sequences of 10 steps), the same data are fitted in
memory and sharded in 8 chunks on a ``LocalCluster(n_workers=2, threads_per_worker=1, processes=True)``, each
for a fixed number of sweeps from the same start; a sweep's time is the median gap between the ``callbacks`` of
successive sweeps (building the model, sending the data and starting the chunks are not counted).  The data are
generated chunk by chunk by ``dask.array`` (seeded), persisted on the workers for the sharded run and computed
into this process for the in-memory run.  The table gives both times, their ratio (the overhead of sharding:
above 1, sharding costs; below 1, the two workers win) and the relative difference of the two runs' ELBOs after
the same sweeps.

    python -m benchmarks.dask_scaling              # each kind at N = 10⁶ and 10⁷
    python -m benchmarks.dask_scaling --quick      # each kind at N = 10⁵ and 10⁶
    python -m benchmarks.dask_scaling --logistic [--small]   # logistic regression against N and D
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


def logistic_detail(small: bool = False) -> None:
    """Logistic regression (NCVMP, D = 10): seconds per sweep against N in memory, on threads and on the cluster;
    bytes per sweep against D; the worked estimate for 10⁹ rows."""
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


# ------------------------------------------------------------------------------------ every kind: the overhead
CHUNKS, SWEEPS, SEQ_T = 8, 6, 10


def _gen(N: int, seed: int, make) -> tuple:
    """Dask arrays generated block by block: ``make(rng, rows)`` returns the block's arrays (rows first); block i
    draws from default_rng((seed, i)), so the data do not depend on where they are computed."""
    import dask
    import dask.array as da

    rows = -(-N // CHUNKS)
    sizes = [min(rows, N - a) for a in range(0, N, rows)]
    blocks = [dask.delayed(_block, pure=True)(make, seed, i, r) for i, r in enumerate(sizes)]
    probe = make(np.random.default_rng(0), 2)
    return tuple(da.concatenate([da.from_delayed(b[j], (r,) + probe[j].shape[1:], dtype=probe[j].dtype)
                                 for b, r in zip(blocks, sizes, strict=True)])
                 for j in range(len(probe)))


def _block(make, seed: int, i: int, rows: int) -> tuple:
    return make(np.random.default_rng((seed, i)), rows)  # a fresh generator: every compute draws the same


W3 = np.array([1.0, -2.0, 0.5])


def _regression(rng, r):
    X = rng.normal(size=(r, 3))
    return X, X @ W3 + 0.3 * rng.normal(size=r)


def _binary_labels(rng, r):
    X = rng.normal(size=(r, 3))
    return X, (rng.random(r) < 1.0 / (1.0 + np.exp(-(X @ W3)))).astype(float)


def _classes(rng, r):
    X = rng.normal(size=(r, 3))
    g = X @ np.array([[1.0, -1.0, 0.5], [-0.5, 1.0, 0.0], [0.0, 0.5, -1.0]]).T
    p = np.exp(g - g.max(1, keepdims=True))
    return X, (rng.random(r)[:, None] > np.cumsum(p / p.sum(1, keepdims=True), 1)).sum(1)


def _counts(rng, r):
    X = rng.normal(size=(r, 3))
    return X, rng.poisson(np.exp(0.3 * X @ W3)).astype(float)


def _clusters(rng, r):
    return (np.where(rng.random(r)[:, None] < 0.5, -3.0, 3.0) + rng.normal(size=(r, 2)),)


def _bits(rng, r):
    protos = np.array([[0.9, 0.8, 0.1, 0.2], [0.1, 0.2, 0.9, 0.7]])
    return ((rng.random((r, 4)) < protos[rng.integers(0, 2, r)]).astype(float),)


def _grouped(rng, r, G=50):
    g = rng.integers(0, G, r)
    return g, np.linspace(-2.0, 2.0, G)[g] + 0.3 * rng.normal(size=r)


def _sequences(rng, n):
    """n sequences of 10 steps of a two-state chain with Gaussian emissions (10·n rows)."""
    z = np.zeros((n, SEQ_T), int)
    z[:, 0] = rng.integers(0, 2, n)
    for t in range(1, SEQ_T):
        z[:, t] = rng.random(n) < np.array([0.1, 0.8])[z[:, t - 1]]
    return (np.array([-1.0, 1.5])[z] + rng.normal(size=z.shape),)


def _factorised(X, y):
    with fg.Model("factorised") as m:
        n, d = fg.plate("n", X.shape[0]), fg.plate("d", X.shape[1])
        w = fg.gaussian("w", 0.0, precision=1.0, plates=[d])
        fg.gaussian("y", fg.inner(X, w, plates=[n]) + fg.gaussian("b", 0.0, precision=1.0),
                    precision=fg.gamma("tau", 1.0, 1.0), plates=[n], observed=y)
    return m


def _varying(groups, y, G=50):
    with fg.Model("varying_intercepts") as m:
        c, n = fg.plate("c", G), fg.plate("n", len(groups))
        a = fg.gaussian("a", mean=fg.gaussian("mu", 0.0, precision=0.01), precision=fg.gamma("tau_a", 2.0, 1.0),
                        plates=[c])
        fg.gaussian("y", mean=a[groups], precision=fg.gamma("tau", 2.0, 1.0), plates=[n], observed=y)
    return m


# kind: (block generator, rows per generated row, model from the arrays, algorithm); the index labels of varying
# intercepts are numpy in both runs (a gathered plate's labels are not sharded)
KINDS = {
    "linear (fused)": (_regression, 1, lambda X, y: fg.models.linear_regression_model(X, y), None),
    "linear (factorised)": (_regression, 1, _factorised, None),
    "logistic": (_binary_labels, 1, lambda X, y: fg.models.logistic_regression_model(X, y), None),
    "softmax": (_classes, 1, lambda X, y: fg.models.softmax_regression_model(X, y, 3), "ncvmp"),
    "gaussian mixture": (_clusters, 1, lambda x: fg.models.gaussian_mixture_model(x, 2), None),
    "bernoulli mixture": (_bits, 1, lambda x: fg.models.mixture_model("bernoulli", 2, x), None),
    "varying intercepts": (_grouped, 1, None, None),
    "poisson": (_counts, 1, lambda X, y: fg.models.poisson_regression_model(X, y), "ncvmp"),
    "hmm": (_sequences, SEQ_T, lambda y: fg.models.hmm_model(y, 2), None),
}


def _timed(model, algorithm) -> tuple[float, float]:
    """Seconds per sweep (the median gap between the callbacks of ``SWEEPS`` sweeps) and the ELBO after them."""
    import warnings

    stamps: list[float] = []
    options = {"algorithm": fg.NCVMP()} if algorithm == "ncvmp" else {}
    with warnings.catch_warnings():  # a fixed number of sweeps: not converged, and not meant to be
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        r = fg.infer(model, max_iter=SWEEPS, tol=None, param_tol=None, progress=False, seed=0,
                     callbacks=[lambda it, elbo, eng: stamps.append(time.perf_counter())], **options)
    return float(np.median(np.diff(stamps))), r.elbo


def main(sizes: list[int], only: list[str] | None = None) -> None:
    import dask
    import distributed

    kinds = {k: v for k, v in KINDS.items() if only is None or k in only}
    print(f"seconds per sweep (median of {SWEEPS - 1} gaps), in memory and sharded in {CHUNKS} chunks on a "
          "LocalCluster of 2 single-thread worker processes; overhead = sharded / in memory")
    print(f"{'kind':<20} {'N':>9} {'in memory':>10} {'sharded':>10} {'overhead':>9} {'ELBO rel. diff':>15}")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cluster, distributed.Client(cluster) as client:
        for N in sizes:
            for name, (make, per, build, algorithm) in kinds.items():
                lazy = _gen(N // per, 1, make)
                with dask.config.set(scheduler="threads"):
                    local = dask.compute(*lazy)
                if build is None:  # varying intercepts: numpy labels, the outcomes dask or not
                    build = _varying
                    lazy = (local[0], lazy[1])
                t_mem, e_mem = _timed(build(*local), algorithm)
                held = [client.persist(a) if hasattr(a, "dask") else a for a in lazy]
                distributed.wait([a for a in held if hasattr(a, "dask")])
                t_sh, e_sh = _timed(build(*held), algorithm)
                del held, local
                print(f"{name:<20} {N:>9.0e} {t_mem:>10.4f} {t_sh:>10.4f} {t_sh / t_mem:>9.2f} "
                      f"{abs(e_sh - e_mem) / abs(e_mem):>15.1e}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="each kind at N = 1e5 and 1e6 (instead of 1e6, 1e7)")
    parser.add_argument("--kinds", nargs="*", default=None, help=f"only these kinds (of {', '.join(KINDS)})")
    parser.add_argument("--logistic", action="store_true", help="logistic regression against N and D instead")
    parser.add_argument("--small", action="store_true", help="with --logistic: N up to 1e5")
    args = parser.parse_args()
    if args.logistic:
        logistic_detail(args.small)
    else:
        main([100_000, 1_000_000] if args.quick else [1_000_000, 10_000_000], args.kinds)
