"""Full-covariance Gaussian mixture: seconds per sweep against scikit-learn and BayesPy, from one run.

Data: ``benchmarks.peers.data.make_gmm`` (K = 5 well-separated components in D = 10, N = 1e5 by
default), every library starting from the same responsibilities (nearest of K seeded data points,
softened to 0.96 / 0.01).

* normal–Wishart components (scikit-learn's model, ``BayesianGaussianMixture(weight_concentration_
  prior_type="dirichlet_distribution")`` with the same priors): ``models.gaussian_mixture_model``
  against scikit-learn, per sweep and to convergence from the same start (the two reach the same fixed
  point: tests/test_wishart.py);
* independent mean and Wishart precision per component (BayesPy's GMM example, BayesPy's priors):
  ``fg.mv_gaussian("x", mu[z], precision=L[z])`` against BayesPy's ``Mixture(Z, Gaussian, mu, Lambda)``,
  per sweep.

Per sweep = the median of single-sweep timings after a warm-up sweep (BayesPy's ``Q.update(repeat=1)``
also computes its bound, as ours does).  The machine is shared, so timings are noisy.
Run ``python -m benchmarks.gmm_vs_peers [--N 100000 --K 5 --D 10 --sweeps 8]`` (on a loaded machine, with
``OPENBLAS_NUM_THREADS=1``: threaded BLAS that competes for the cores swamps every library's timings).
"""

from __future__ import annotations

import argparse
import time
import warnings
from statistics import median

import numpy as np

import factorgraph as fg
from factorgraph import models

from .peers.data import initial_assignments, make_gmm


def _resp(z0: np.ndarray, K: int) -> np.ndarray:
    r = np.full((len(z0), K), 0.01)
    r[np.arange(len(z0)), z0] = 1.0 - 0.01 * (K - 1)
    return r


def _per_sweep_ours(model, resp, sweeps: int) -> tuple[float, object]:
    stamps = []
    r = fg.infer(model, init={"z": resp}, max_iter=sweeps + 1, tol=None,
                 callbacks=[lambda it, L, eng: stamps.append(time.perf_counter())])
    return median(np.diff(stamps)), r  # each sweep's updates and its ELBO, after the first


def _sklearn(X, resp, K, m0, V0, max_iter: int, tol: float):
    from sklearn.mixture import BayesianGaussianMixture

    class FromResponsibilities(BayesianGaussianMixture):
        def _initialize_parameters(self, X, random_state, xp=None):
            self._initialize(X, resp.copy())

    sk = FromResponsibilities(n_components=K, weight_concentration_prior_type="dirichlet_distribution",
                              weight_concentration_prior=1.0, mean_prior=m0, mean_precision_prior=1.0,
                              degrees_of_freedom_prior=float(X.shape[1]), covariance_prior=V0, reg_covar=0.0,
                              tol=tol, max_iter=max_iter)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        sk.fit(X)
        return time.perf_counter() - t, sk


def _bayespy_per_sweep(X, z0, K, sweeps: int) -> float:
    from .peers.bayespy_peer import gmm_nodes

    Q, _, _ = gmm_nodes(X, K, z0)
    times = []
    for _ in range(sweeps + 1):
        t = time.perf_counter()
        Q.update(repeat=1, verbose=False)
        times.append(time.perf_counter() - t)
    return median(times[1:])


def _mean_field_model(X, K):
    N, D = X.shape
    with fg.Model("gmm_mean_field") as m:
        n, k = fg.plate("n", N), fg.plate("k", K)
        pi = fg.dirichlet("pi", np.full(K, 1e-5))
        z = fg.categorical("z", pi, plates=[n], categories=k)
        mu = fg.mv_gaussian("mu", np.zeros(D), precision=1e-5, plates=[k])
        L = fg.wishart("L", dof=float(D), scale=1e-5 * np.eye(D), plates=[k])
        fg.mv_gaussian("x", mu[z], precision=L[z], plates=[n], observed=X)
    return m


def main(N: int = 100_000, K: int = 5, D: int = 10, sweeps: int = 8, seed: int = 0) -> dict:
    X, _, _, _ = make_gmm(N, K, D, seed=seed)
    z0 = initial_assignments(N, K, seed, X)
    resp = _resp(z0, K)
    m0, V0 = X.mean(0), np.cov(X.T)
    print(f"GMM, full covariance: N = {N}, K = {K}, D = {D}; {sweeps} timed sweeps (shared machine: noisy)")
    out = {}

    nw = models.gaussian_mixture_model(X, K, "full")
    out["ours_nw"], _ = _per_sweep_ours(nw, resp, sweeps)
    t_sk, _ = _sklearn(X, resp, K, m0, V0, max_iter=sweeps, tol=0.0)
    out["sklearn"] = t_sk / sweeps
    print(f"normal–Wishart: ours {out['ours_nw'] * 1e3:.1f} ms/sweep, scikit-learn {out['sklearn'] * 1e3:.1f} "
          f"ms/iteration: ratio sklearn/ours = {out['sklearn'] / out['ours_nw']:.2f}")

    t = time.perf_counter()
    r = fg.infer(nw, init={"z": resp}, max_iter=1000, tol=None, param_tol=1e-8)
    t_ours = time.perf_counter() - t
    t_sk, sk = _sklearn(X, resp, K, m0, V0, max_iter=1000, tol=1e-10)
    diff = float(np.abs(r.posterior("theta").location - sk.means_).max())
    out.update({"ours_total": t_ours, "sklearn_total": t_sk, "means_max_diff": diff})
    print(f"to convergence from the same start: ours {t_ours:.2f} s ({r.n_iter} sweeps), scikit-learn {t_sk:.2f} s "
          f"({sk.n_iter_} iterations): ratio {t_sk / t_ours:.2f}; max |means difference| {diff:.2e}")

    out["ours_mf"], _ = _per_sweep_ours(_mean_field_model(X, K), resp, sweeps)
    try:
        out["bayespy"] = _bayespy_per_sweep(X, z0, K, sweeps)
    except ImportError:
        print("BayesPy is not installed (pip install -e .[bench]); skipped")
    else:
        print(f"independent mean and Wishart: ours {out['ours_mf'] * 1e3:.1f} ms/sweep, BayesPy "
              f"{out['bayespy'] * 1e3:.1f} ms/sweep: ratio BayesPy/ours = {out['bayespy'] / out['ours_mf']:.2f}")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--N", type=int, default=100_000)
    ap.add_argument("--K", type=int, default=5)
    ap.add_argument("--D", type=int, default=10)
    ap.add_argument("--sweeps", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    main(a.N, a.K, a.D, a.sweeps, a.seed)
