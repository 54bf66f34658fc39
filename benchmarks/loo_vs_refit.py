"""PSIS-LOO on draws of q (``az.loo(result.to_arviz())``) against a brute-force leave-one-out refit.

Logistic regression, y_i ~ Bernoulli(σ(x_iᵀw)), w ~ N(0, I), fitted by NCVMP (quadrature).  The brute force
refits the model N times without row i and computes log p(y_i | y_−i) = log E_{q−i}[σ(±x_iᵀw)] by Gauss–Hermite
quadrature over the Gaussian x_iᵀw under q−i.  Both score the model *as fitted by the approximation*, so they
should agree to within PSIS-LOO's Monte Carlo and Pareto-smoothing error.  Also prints the cost of
``to_arviz`` (draws of q and pointwise log-likelihoods) and of ``az.loo`` against the N refits.

Run ``python -m benchmarks.loo_vs_refit [--N 36] [--draws 4000] [--seed 3]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import factorgraph as fg


def fit(X: np.ndarray, y: np.ndarray) -> fg.Result:
    with fg.Model("logistic") as m:
        n = fg.plate("n", len(y))
        w = fg.mv_gaussian("w", np.zeros(X.shape[1]), precision=np.eye(X.shape[1]))
        fg.bernoulli_logit("y", fg.inner(X, w, plates=[n]), observed=y)
    return fg.infer(m, fg.NCVMP())


def log_mean_sigmoid(mean: float, var: float, nodes: int = 60) -> float:
    """log E[σ(a)], a ~ N(mean, var), by Gauss–Hermite quadrature."""
    t, wts = np.polynomial.hermite_e.hermegauss(nodes)
    return float(np.log(np.sum(wts / (1.0 + np.exp(-(mean + np.sqrt(var) * t)))) / np.sqrt(2 * np.pi)))


def main(N: int = 36, draws: int = 4000, seed: int = 3) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz as az
    rng = np.random.default_rng(seed)
    X = np.c_[np.ones(N), rng.normal(size=(N, 2))]
    y = (rng.random(N) < 1.0 / (1.0 + np.exp(-X @ np.array([0.3, 1.5, -1.0])))).astype(float)
    r = fit(X, y)
    tf = time.perf_counter()
    r.to_arviz(draws=draws, seed=5)  # the first call imports xarray's and ArviZ's lazily loaded modules
    t0 = time.perf_counter()
    idata = r.to_arviz(draws=draws, seed=5)
    t1 = time.perf_counter()
    loo = az.loo(idata, pointwise=True)
    t2 = time.perf_counter()
    brute = np.empty(N)
    for i in range(N):
        keep = np.arange(N) != i
        q = fit(X[keep], y[keep]).posterior("w")
        brute[i] = log_mean_sigmoid((2 * y[i] - 1) * X[i] @ q.mean(), X[i] @ q.cov() @ X[i])
    t3 = time.perf_counter()
    diff = float(loo.elpd_loo - brute.sum())
    print(f"logistic regression, N = {N}, D = {X.shape[1]}, {draws} draws of q")
    print(f"PSIS-LOO elpd_loo   {loo.elpd_loo:10.4f}  (se {loo.se:.4f}, p_loo {loo.p_loo:.3f}, "
          f"max Pareto k {float(loo.pareto_k.max()):.3f})")
    print(f"brute-force refits  {brute.sum():10.4f}")
    print(f"difference          {diff:10.4f}  = {abs(diff) / loo.se:.3f} se; largest pointwise |difference| "
          f"{np.max(np.abs(loo.loo_i.values - brute)):.4f}")
    print(f"seconds: to_arviz {t1 - t0:.3f} (first call {t0 - tf:.3f}), az.loo {t2 - t1:.3f}, {N} refits "
          f"{t3 - t2:.3f}")
    return {"elpd_loo": float(loo.elpd_loo), "se": float(loo.se), "brute": float(brute.sum()), "diff": diff}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--N", type=int, default=36)
    ap.add_argument("--draws", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=3)
    a = ap.parse_args()
    main(a.N, a.draws, a.seed)
