"""BLAS thread policy of a handler-only model: one BLAS thread against all of them.

A model whose only non-conjugate factors are claimed by a global handler (here MVI on a logistic regression)
runs the handler's optimiser: many small BLAS products (S draws × D by D × N projections, the gradient
back-projection, D × D factors).  ``fg.infer`` now runs such a model with one BLAS thread (and the shared row
threads for the large passes over X), as it already did for models with message-passing kernels; before, it
left BLAS on all its threads.  This script times the same fit both ways in one run and prints the ratio.

The data are synthetic and shaped like the arsenic-wells survey of Gelman & Hill (2007): N = 3020 households,
an intercept and four standardised predictors (distance, arsenic level, education, community association)
plus the distance × arsenic interaction, a Bernoulli outcome (switched wells) through a logistic link.

Run ``python -m benchmarks.handler_blas_threads [--quick]``.  Timings on a shared machine are noisy; the
ratio of the two medians, measured in the same run, is the figure to read.
"""

from __future__ import annotations

import argparse
import time
from contextlib import nullcontext

import numpy as np
from threadpoolctl import threadpool_info

import factorgraph as fg
from schedules import blas


def wells_like(seed: int = 0, N: int = 3020) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic wells-like design (N × 6) and switch indicators."""
    rng = np.random.default_rng(seed)
    dist, arsenic = rng.gamma(2.0, 25.0, N), rng.lognormal(0.3, 0.6, N)
    educ, assoc = rng.integers(0, 17, N).astype(float), (rng.random(N) < 0.42).astype(float)
    cols = [(c - c.mean()) / c.std() for c in (dist, arsenic, educ, assoc)]
    X = np.column_stack([np.ones(N), *cols, cols[0] * cols[1]])
    w = np.array([0.35, -0.9, 0.45, 0.17, -0.12, -0.18])
    y = rng.random(N) < 1.0 / (1.0 + np.exp(-X @ w))
    return X, y


def model(X: np.ndarray, y: np.ndarray) -> fg.Model:
    with fg.Model("wells-like") as m:
        n = fg.plate("n", X.shape[0])
        w = fg.mv_gaussian("w", mean=0.0, precision=0.01, dim=X.shape[1])
        fg.bernoulli_logit("y", logit=fg.inner(X, w, plates=[n]), observed=y)
    return m


def fit_seconds(m: fg.Model, repeats: int, one_thread: bool) -> tuple[float, float]:
    """Median wall seconds of ``fg.infer`` with MVI('lr'), under the current policy or the previous one."""
    saved = blas._one_thread_blas, blas.row_threads
    if not one_thread:  # the previous policy for a handler-only model: BLAS on all threads, no row threads
        blas._one_thread_blas, blas.row_threads = nullcontext, nullcontext
    try:
        times, elbo = [], np.nan
        for _ in range(repeats):
            t0 = time.perf_counter()
            elbo = fg.infer(m, handlers={"w": fg.MVI("lr")}).elbo
            times.append(time.perf_counter() - t0)
    finally:
        blas._one_thread_blas, blas.row_threads = saved
    return float(np.median(times)), elbo


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one repeat per policy")
    args = ap.parse_args()
    repeats = 1 if args.quick else 3
    X, y = wells_like()
    m = model(X, y)
    blas = [(p["internal_api"], p["num_threads"]) for p in threadpool_info() if p["user_api"] == "blas"]
    print(f"BLAS pools (library, threads): {blas}")
    fit_seconds(m, 1, True)  # warm-up: numba caches, imports
    one, e1 = fit_seconds(m, repeats, True)
    many, e2 = fit_seconds(m, repeats, False)
    print(f"MVI('lr') on a wells-like logistic regression (N = {X.shape[0]}, D = {X.shape[1]}), median of {repeats}:")
    print(f"  all BLAS threads (previous policy): {many:8.3f} s   ELBO {e2:.6f}")
    print(f"  one BLAS thread (current policy):   {one:8.3f} s   ELBO {e1:.6f}")
    print(f"  ratio (all threads / one thread):   {many / one:8.2f}")


if __name__ == "__main__":
    main()
