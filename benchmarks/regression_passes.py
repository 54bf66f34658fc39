"""A fused regression's whole fit, in passes over X: the fit's time over that of one ``X.T @ X``, in one run.

``models.linear_regression(X, y)`` at N = 10⁶ rows, D = 20, with one BLAS thread: the fit reads X to check it
(finite, within ±1e150: one read in numba), to form XᵀX and Xᵀy (one blocked pass) and, for ``init="auto"``,
takes the input scale from the diagonal of XᵀX (no pass).  The same for ``logistic_regression`` would be
dominated by its sweeps, so it is not measured here.  For comparison the script also times the checks as numpy
wrote them before (``np.isfinite`` and ``np.abs(X) > 1e150``, which make temporaries) and numpy's mean square
of the columns, each in the same units.  Each fit runs once before the timed ones (numba's compilation, the
thread pool), and every time is the median of ``--repeat`` runs.

    python -m benchmarks.regression_passes            # N = 1e6, about half a minute
    python -m benchmarks.regression_passes --n 200000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

from factorgraph import models


def median_time(fn, repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return float(np.median(out))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--d", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.n, args.d))
    y = X @ rng.normal(size=args.d) + rng.normal(size=args.n)
    with threadpool_limits(1):
        xtx = median_time(lambda: X.T @ X, args.repeat)
        print(f"N = {args.n}, D = {args.d}, one BLAS thread; X.T @ X: {xtx:.4f} s (one pass)")
        print(f"{'what':44s} {'seconds':>8s} {'passes':>7s}")

        def old_checks():
            np.isfinite(X.sum()) and np.all(np.isfinite(X))
            np.any(np.abs(X) > 1e150)

        rows = [("numpy checks as before (isfinite, |X| > 1e150)", old_checks),
                ("numpy mean square of the columns", lambda: np.mean(np.square(X), axis=0))]
        for ard in (False, True):
            for init in ("auto", "reference"):
                rows.append((f"linear_regression(ard={ard}, init={init!r})",
                             lambda ard=ard, init=init: models.linear_regression(X, y, ard=ard, init=init)))
        for label, fn in rows:
            fn()  # compile, warm the pool
            sec = median_time(fn, args.repeat)
            print(f"{label:44s} {sec:8.4f} {sec / xtx:7.2f}")


if __name__ == "__main__":
    main()
