"""Per-sweep time of a Bernoulli-logit regression written with ``fg.likelihood`` against the built-in factor.

One run prints, at N = 1e5 rows and D = 20 features, the median seconds per NCVMP sweep (the first sweep
left out) of

* the built-in ``fg.bernoulli_logit(..., method="quadrature")`` (its own numba kernels),
* ``fg.likelihood`` with a numpy log density ``y·x − log(1 + eˣ)``,
* ``fg.likelihood`` with the same log density as a numba ``@vectorize`` ufunc,

and the ratios of the last two to the first (targets: ≤ 3 and ≤ 1.5).  Each fit runs a fixed number of
sweeps from the same start, so the three do the same work apart from the factor itself; the three kinds are
fitted in turn ``--repeats`` times and each one's median is shown (the machine is shared).

    python benchmarks/user_likelihood_speed.py [--n 100000] [--d 20] [--sweeps 15] [--repeats 3]
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import factorgraph as fg  # noqa: E402
from benchmarks.timing import SweepTimer  # noqa: E402


def numpy_logit(y, x):
    """log σ(x)^y (1 − σ(x))^(1−y) = y·x − log(1 + eˣ)."""
    return y * x - np.logaddexp(0.0, x)


@numba.vectorize(["float64(float64, float64)"], cache=False)
def numba_logit(y, x):
    """The same log density, compiled elementwise."""
    if x > 0.0:
        return y * x - x - math.log1p(math.exp(-x))
    return y * x - math.log1p(math.exp(x))


def data(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    w = rng.normal(size=d)
    return X, (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-X @ w))).astype(float)


def fit(kind: str, X: np.ndarray, y: np.ndarray, sweeps: int) -> tuple[float, fg.Result]:
    n, d = X.shape
    with fg.Model(kind) as m:
        rows = fg.plate("n", n)
        w = fg.mv_gaussian("w", np.zeros(d), 1.0)
        eta = fg.inner(X, w, plates=[rows])
        if kind == "built-in":
            fg.bernoulli_logit("y", eta, observed=y, method="quadrature")
        else:
            fg.likelihood("y", numpy_logit if kind == "numpy" else numba_logit, observed=y, plates=[rows], x=eta)
    timer = SweepTimer()
    with warnings.catch_warnings():  # a fixed number of sweeps: not converged by design
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        r = fg.infer(m, fg.NCVMP(), tol=None, param_tol=None, max_iter=sweeps, callbacks=[timer])
    return timer.per_iter(), r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--d", type=int, default=20)
    ap.add_argument("--sweeps", type=int, default=15)
    ap.add_argument("--repeats", type=int, default=3, help="interleaved fits of each kind (the median is shown)")
    a = ap.parse_args()
    X, y = data(a.n, a.d)
    numba_logit(np.zeros(1), np.zeros(1))  # compiled before timing
    fit("built-in", X[:1000], y[:1000], 3)  # the built-in's kernels compiled before timing
    runs: dict[str, list[float]] = {"built-in": [], "numpy": [], "numba": []}
    results = {}
    for _ in range(a.repeats):  # interleaved, so that the machine's load falls on each kind alike
        for kind in runs:
            t, results[kind] = fit(kind, X, y, a.sweeps)
            runs[kind].append(t)
    times = {kind: float(np.median(ts)) for kind, ts in runs.items()}
    ref = results["built-in"].posterior("w").mean()
    print(f"N = {a.n}, D = {a.d}, {a.sweeps} NCVMP sweeps; seconds per sweep (the median over the sweeps, the "
          f"first left out, then over {a.repeats} interleaved fits)")
    for kind in times:
        diff = float(np.max(np.abs(results[kind].posterior("w").mean() - ref)))
        print(f"  {kind:9s} {times[kind] * 1e3:8.2f} ms   ratio {times[kind] / times['built-in']:5.2f}   "
              f"max |E[w] − built-in| {diff:.1e}")
    print(f"numpy fg.likelihood / built-in: {times['numpy'] / times['built-in']:.2f} (target ≤ 3)")
    print(f"numba fg.likelihood / built-in: {times['numba'] / times['built-in']:.2f} (target ≤ 1.5)")


if __name__ == "__main__":
    main()
