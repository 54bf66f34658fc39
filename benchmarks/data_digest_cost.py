"""The cost of recording what a fit was fitted to: ``Result.data_digest`` against the fit itself.

``fg.infer`` hashes every observed variable's data once per fit (SHA-1 over the mask and the values,
``factorgraph.posterior.fitted_data.observed_digest``) so that ``fg.compare`` can refuse fits of different
data.  This prints the time of that digest and of the fit it rides on, for a Bayesian linear regression
(one pass of VMP suffices: the conjugate model converges in a few sweeps) and for a two-component Gaussian
mixture, both with N rows, and their ratio, measured in one run.

Run ``python -m benchmarks.data_digest_cost [--N 1000000] [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import factorgraph as fg
from factorgraph.posterior.fitted_data import observed_digest


def regression(N: int, rng: np.random.Generator) -> fg.Model:
    X = rng.normal(size=(N, 5))
    y = X @ np.arange(1.0, 6.0) + rng.normal(size=N)
    with fg.Model("regression") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", np.zeros(5), precision=np.eye(5))
        fg.gaussian("y", fg.inner(X, w, plates=[n]), fg.gamma("tau", 1.0, 1.0), plates=[n], observed=y)
    return m


def mixture(N: int, rng: np.random.Generator) -> fg.Model:
    x = np.where(rng.random(N) < 0.5, -2.0, 2.0) + rng.normal(size=N)
    with fg.Model("mixture") as m:
        n, k = fg.plate("n", N), fg.plate("k", 2)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(2)), plates=[n])
        mus = fg.gaussian("mus", 0.0, 0.01, plates=[k])
        fg.gaussian("x", mus[z], 1.0, plates=[n], observed=x)
    return m


def best(f, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--N", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"N = {args.N} rows; best of {args.repeats} runs")
    for build in (regression, mixture):
        m = build(args.N, rng)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fg.ConvergenceWarning)
            fit = best(lambda m=m: fg.infer(m, max_iter=20), args.repeats)
        digest = best(lambda m=m: observed_digest(m), args.repeats)
        print(f"{m.name:<11} fg.infer (at most 20 sweeps, digest included) {fit:8.3f} s   digest {digest:8.4f} s   "
              f"digest / fit {digest / fit:.4f}")


if __name__ == "__main__":
    main()
