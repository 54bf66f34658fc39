"""EP against NCVMP on small, separable, skewed probit problems: whose posterior mean is nearer the exact one.

Each data set: N = 10 rows x_n = (1, e_n) with e_n ~ Exponential(1) (a right-skewed covariate), labels
y_n = 1[e_n > median(e)] (perfectly separable, so the likelihood alone has no maximum), prior w ~ N(0, α⁻¹I)
with α = 0.1 (weak).  The exact posterior mean is computed on a 601 × 601 grid over [−15, 15]² (the posterior
mass there is 1 to double precision).  Both fits are ``models.probit_regression``: ``fg.EP()`` (sequential) and
``fg.NCVMP()`` (Gaussian q(w) with full covariance, the probit term by quadrature), each run to its own
stopping rule.  Printed: per data set the distances |E_q[w] − E[w | y]| of both, then how many data sets EP
wins, and the median ratio of the distances.

    python -m benchmarks.ep_vs_ncvmp             # 100 data sets, about a minute and a half
    python -m benchmarks.ep_vs_ncvmp --sets 20
    python -m benchmarks.ep_vs_ncvmp --speed     # seconds to convergence at N = 10⁵, D = 20 (about half a minute)

``--speed`` fits one larger probit regression (N = 10⁵ rows, D = 20, seeded) by sequential EP, parallel EP and
NCVMP, each to its own stopping rule, after one warm-up fit of each on 200 rows (numba compilation is not
timed), and prints sweeps, seconds and the evidence figure of each; read the ratios, measured in one run.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from scipy.special import log_ndtr

import factorgraph as fg
from factorgraph import models

ALPHA, N = 0.1, 10


def data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    e = rng.exponential(1.0, N)
    return np.c_[np.ones(N), e], e > np.median(e)


def exact_mean(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    g = np.linspace(-15.0, 15.0, 601)
    W = np.stack([a.ravel() for a in np.meshgrid(g, g, indexing="ij")], 1)
    lp = -0.5 * ALPHA * (W**2).sum(1) + log_ndtr((W @ X.T) * (2.0 * y - 1.0)).sum(1)
    p = np.exp(lp - lp.max())
    return p @ W / p.sum()


def main(sets: int = 100) -> None:
    wins, ratios = 0, []
    print(f"{'seed':>4}  {'|EP − exact|':>13}  {'|NCVMP − exact|':>15}")
    for seed in range(sets):
        X, y = data(seed)
        exact = exact_mean(X, y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fg.ConvergenceWarning)
            ep = models.probit_regression(X, y, ALPHA).posterior("w").mean()
            nc = models.probit_regression(X, y, ALPHA, algorithm=fg.NCVMP(), max_iter=2000).posterior("w").mean()
        d_ep, d_nc = np.linalg.norm(ep - exact), np.linalg.norm(nc - exact)
        wins += d_ep < d_nc
        ratios.append(d_ep / d_nc)
        print(f"{seed:4d}  {d_ep:13.5f}  {d_nc:15.5f}")
    print(f"EP nearer the exact posterior mean on {wins} of {sets} data sets; median ratio of the distances "
          f"(EP / NCVMP) {np.median(ratios):.3f}")


def speed(N: int = 100_000, D: int = 20) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D))
    y = X @ rng.normal(size=D) * 0.3 + rng.normal(size=N) > 0
    algorithms = {"EP, sequential": fg.EP(), "EP, parallel": fg.EP(parallel=True), "NCVMP": fg.NCVMP()}
    for alg in algorithms.values():
        models.probit_regression(X[:200], y[:200], algorithm=alg)
    times = {}
    for label, alg in algorithms.items():
        t = time.perf_counter()
        r = models.probit_regression(X, y, algorithm=alg)
        times[label] = time.perf_counter() - t
        print(f"{label:15s} {r.n_iter:3d} sweeps  {times[label]:7.2f} s  evidence {r.elbo:.4f} ({r.evidence_kind})")
    print(f"NCVMP / sequential EP: {times['NCVMP'] / times['EP, sequential']:.1f}×; parallel EP / sequential EP: "
          f"{times['EP, parallel'] / times['EP, sequential']:.1f}×")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=100)
    parser.add_argument("--speed", action="store_true", help="time one fit at N = 1e5, D = 20 instead")
    args = parser.parse_args()
    speed() if args.speed else main(args.sets)
