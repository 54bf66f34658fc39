"""Full-covariance Gaussian mixture with single entries missing: the cost of exact marginalisation, from one run.

Data: ``benchmarks.peers.data.make_gmm`` (K = 5 components in D = 5, well separated), N = 1000, 5000 and 20000
by default, with 10 % of the entries hidden completely at random (seeded).  Two fits of
``models.gaussian_mixture_model(X, K, "full")`` on the same rows, from the same starting responsibilities
(nearest of K seeded rows of the column-mean-filled table, softened to 0.96 / 0.01) and with the same priors
(m₀ and V₀ of the complete table, passed to both):

* **missing**: ``mask=`` the (N, D) observation mask; a partly observed row keeps the marginal density of its
  observed coordinates, and the fit runs NCVMP (``factors/mv_gaussian_wishart_missing.py``);
* **complete**: the same rows with nothing hidden (plain VMP, conjugate).

Printed per N: ms per sweep of each (the median of single-sweep timings after the first, ELBO included, like
``benchmarks.gmm_vs_peers``) and their ratio, both measured in the same run; and sweeps (and seconds) to
convergence of each with ``gaussian_mixture``'s stopping rule (ELBO change ≤ 1e-9 relative, at most 500
sweeps), from the same start, and the accuracy of each fit's MAP labels against the true components (best
matching), to show whether the two ended in the same partition (the start, nearest of K random rows, can
put two centres in one cluster; then both fits may end with a component emptied and two clusters merged).
The machine is shared, so absolute times are noisy; read the ratio.
Run ``python -m benchmarks.gmm_missing_entries [--N 1000 5000 20000] [--fraction 0.1] [--sweeps 10]`` (with
``OPENBLAS_NUM_THREADS=1`` on a loaded machine).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import factorgraph as fg
from factorgraph import models

from .peers.data import initial_assignments, make_gmm, matched_accuracy
from .timing import SweepTimer


def _resp(z0: np.ndarray, K: int) -> np.ndarray:
    r = np.full((len(z0), K), 0.01)
    r[np.arange(len(z0)), z0] = 1.0 - 0.01 * (K - 1)
    return r


def _per_sweep(model, resp: np.ndarray, sweeps: int) -> float:
    timer = SweepTimer()
    with warnings.catch_warnings():  # a fixed number of sweeps, not meant to converge
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        fg.infer(model, init={"z": resp}, max_iter=sweeps + 1, tol=None, param_tol=None, callbacks=[timer])
    return timer.per_iter()


def _to_convergence(model, resp: np.ndarray, max_iter: int = 500, tol: float = 1e-9):
    t = time.perf_counter()
    r = fg.infer(model, init={"z": resp}, max_iter=max_iter, tol=tol)
    return r, time.perf_counter() - t


def case(N: int, K: int = 5, D: int = 5, fraction: float = 0.1, sweeps: int = 10, seed: int = 0) -> dict:
    X, labels, _, _ = make_gmm(N, K, D, seed=seed)
    seen = np.random.default_rng(seed + 1).random(X.shape) >= fraction
    filled = np.where(seen, X, np.where(seen, X, 0.0).sum(0) / seen.sum(0))
    resp = _resp(initial_assignments(N, K, seed, filled), K)
    priors = {"mean_prior": X.mean(0), "scale": np.cov(X.T)}
    missing = models.gaussian_mixture_model(np.where(seen, X, np.nan), K, "full", mask=seen, **priors)
    complete = models.gaussian_mixture_model(X, K, "full", **priors)
    out = {"N": N, "partly_observed_rows": int((~seen.all(1)).sum()), "hidden": int((~seen).sum())}
    out["missing_ms"] = 1e3 * _per_sweep(missing, resp, sweeps)
    out["complete_ms"] = 1e3 * _per_sweep(complete, resp, sweeps)
    for name, model in (("missing", missing), ("complete", complete)):
        r, sec = _to_convergence(model, resp)
        z = r.posterior("z").probs.argmax(-1)
        out[name] = {"sweeps": r.n_iter, "sec": sec, "converged": r.converged, "algorithm": r.algorithm,
                     "elbo": r.elbo, "monotone": bool(np.all(np.diff(r.elbo_trace) >= -1e-9 * abs(r.elbo))),
                     "accuracy": matched_accuracy(labels, z, K), "used": int(np.unique(z).size)}
    return out


def main(Ns: tuple[int, ...] = (1000, 5000, 20000), K: int = 5, D: int = 5, fraction: float = 0.1, sweeps: int = 10,
         seed: int = 0) -> list[dict]:
    print(f"GMM, full covariance, K = {K}, D = {D}, {100 * fraction:g}% of entries missing at random; "
          f"{sweeps} timed sweeps (shared machine: noisy)")
    rows = []
    for N in Ns:
        o = case(N, K, D, fraction, sweeps, seed)
        m, c = o["missing"], o["complete"]
        print(f"N = {N} ({o['partly_observed_rows']} rows partly observed, {o['hidden']} entries hidden): "
              f"missing {o['missing_ms']:.2f} ms/sweep ({m['algorithm']}), complete {o['complete_ms']:.2f} "
              f"ms/sweep ({c['algorithm']}): ratio missing/complete = {o['missing_ms'] / o['complete_ms']:.2f}")
        print(f"  to convergence from the same start: missing {m['sweeps']} sweeps, {m['sec']:.2f} s "
              f"(converged {m['converged']}, ELBO never fell: {m['monotone']}); complete {c['sweeps']} sweeps, "
              f"{c['sec']:.2f} s (converged {c['converged']})")
        print(f"  labels against the true components: missing accuracy {m['accuracy']:.3f} ({m['used']} components "
              f"used), complete {c['accuracy']:.3f} ({c['used']} used)")
        rows.append(o)
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--N", type=int, nargs="+", default=[1000, 5000, 20000])
    ap.add_argument("--K", type=int, default=5)
    ap.add_argument("--D", type=int, default=5)
    ap.add_argument("--fraction", type=float, default=0.1)
    ap.add_argument("--sweeps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    main(tuple(a.N), a.K, a.D, a.fraction, a.sweeps, a.seed)
