"""Refitting with new data: ``model.set_data`` + ``fg.infer`` against building and fitting a fresh model.

A Bayesian logistic regression (N rows, D inputs, ``fg.bernoulli_logit`` under NCVMP, and the same block
under ``fg.Laplace``) is fitted to one data set; then to a second data set of a different size, either by
``model.set_data(X=..., y=...)`` and a refit (the compiled structure reused) or by building a fresh model.
The script prints the compile seconds of each fit (``Result.compile_time``), the number of compilations of
the reused model, the whole wall-clock seconds of both paths (medians of 3), and the largest difference
between the two fits' posterior means and evidences (they must agree to rounding).  ``--N``, ``--D`` change
the sizes; it runs in well under a minute.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import factorgraph as fg

from .timing import median_time


def data(N: int, D: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(N), rng.normal(size=(N, D - 1))])
    w = rng.normal(size=D)
    return X, (rng.random(N) < 1.0 / (1.0 + np.exp(-X @ w))).astype(float)


def build(X: np.ndarray, y: np.ndarray) -> fg.Model:
    with fg.Model("logistic") as m:
        n = fg.plate("n", len(y))
        w = fg.mv_gaussian("w", 0.0, precision=1.0, dim=X.shape[1])
        fg.bernoulli_logit("y", logit=fg.inner(fg.data("X", X), w, plates=[n]), observed=fg.data("y", y))
    return m


def main(N: int = 20000, D: int = 10) -> None:
    X1, y1 = data(N, D, 1)
    X2, y2 = data(N + N // 2, D, 2)
    for label, handlers in (("NCVMP", None), ("Laplace", {"w": fg.Laplace()})):
        m = build(X1, y1)
        first = fg.infer(m, handlers=handlers)

        def refit(m=m, handlers=handlers):
            m.set_data(X=X2, y=y2)
            return fg.infer(m, handlers=handlers)

        def fresh(handlers=handlers):
            return fg.infer(build(X2, y2), handlers=handlers)

        a, b = refit(), fresh()
        t_refit, t_fresh = median_time(refit), median_time(fresh)
        diff = float(np.max(np.abs(a.posterior("w").mean() - b.posterior("w").mean())))
        print(f"{label}: N = {N} -> {N + N // 2}, D = {D}")
        print(f"  compile seconds: first fit {first.compile_time:.2e}, refit after set_data {a.compile_time:.2e}, "
              f"fresh model {b.compile_time:.2e}; compilations of the reused model: {m.compilations}")
        print(f"  whole refit (set_data + infer) {t_refit:.3f} s, fresh build + infer {t_fresh:.3f} s "
              f"(ratio {t_fresh / t_refit:.2f})")
        print(f"  max |E[w] refit - E[w] fresh| = {diff:.1e}, |ELBO difference| = {abs(a.elbo - b.elbo):.1e}")
    t0 = time.perf_counter()
    r = fg.infer(build(X1, y1))
    draws = fg.predict(r, data={"X": X2[:1000]}, draws=1000)["y"]
    print(f"fg.predict at 1000 new rows, 1000 draws: {time.perf_counter() - t0:.2f} s including the fit "
          f"(draws {draws.shape})")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N", type=int, default=20000)
    ap.add_argument("--D", type=int, default=10)
    args = ap.parse_args()
    main(args.N, args.D)
