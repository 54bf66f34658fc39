"""Bayesian PCA with ARD: ``models.pca`` against BayesPy's PCA (``GaussianARD`` + ``SumMultiply``, its
``RotationOptimizer`` for the rotation), same model (no mean, one noise precision), data, start and order.

Prints, in one run:

1. the time per sweep of each without rotation (``--sweeps`` sweeps from the same point-mass q(W); both
   compute the bound every sweep) and the ratio, with the difference of the bounds after those sweeps (the
   two compute the same iterates: tests/test_pca.py checks them to 1e-9);
2. sweeps and seconds to convergence (relative bound change < ``--tol``), ours with and without the
   rotation and BayesPy with its rotation, and the number of components ARD kept.

Data: N × D Gaussian rows from K_true = 5 components (loadings scaled 3 … 1) plus noise 0.5; the model has
K = 10 components.  ``--small``: N = 2000.

Run ``python -m benchmarks.pca_vs_bayespy [--small]`` (BayesPy from the ``test`` extra).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import factorgraph as fg
from benchmarks.peers.bayespy_peer import pca_nodes
from factorgraph import models


def _data(N: int, D: int, K: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(D, K)) * np.linspace(3.0, 1.0, K)
    return rng.normal(size=(N, K)) @ W.T + 0.5 * rng.normal(size=(N, D))


def _active(W: np.ndarray) -> int:
    s = np.einsum("dk,dk->k", W, W)
    return int(np.sum(s > 1e-3 * s.max()))


def main(small: bool = False, D: int = 50, K: int = 10, sweeps: int = 20, tol: float = 1e-7,
         max_iter: int = 3000) -> dict:
    N = 2_000 if small else 10_000
    X = _data(N, D, 5)
    W0 = np.random.default_rng(1).normal(size=(D, K))
    common = {"noise": "isotropic", "mean": False, "init": W0, "scale": False}  # BayesPy's model exactly
    out: dict = {"N": N, "D": D, "K": K}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)  # fixed sweep counts: unconverged on purpose
        models.pca(X, K, rotate=False, max_iter=2, tol=0.0, **common)  # warm-up
        t0 = time.perf_counter()
        r = models.pca(X, K, rotate=False, max_iter=sweeps, tol=0.0, **common)
        out["ours_sec_per_sweep"] = (time.perf_counter() - t0) / sweeps
    Q, order, W, _ = pca_nodes(X, K, W0)
    t0 = time.perf_counter()
    for _ in range(sweeps):
        Q.update(*order, verbose=False)
    out["bayespy_sec_per_sweep"] = (time.perf_counter() - t0) / sweeps
    out["bound_diff"] = abs(r.elbo - Q.compute_lowerbound())
    out["ratio"] = out["bayespy_sec_per_sweep"] / out["ours_sec_per_sweep"]
    print(f"PCA N={N} D={D} K={K}, {sweeps} sweeps without rotation")
    print(f"  per sweep: ours {1e3 * out['ours_sec_per_sweep']:.2f} ms, BayesPy "
          f"{1e3 * out['bayespy_sec_per_sweep']:.2f} ms  -> {out['ratio']:.1f}x;  |bound difference| "
          f"{out['bound_diff']:.2e}")

    print(f"to convergence (relative bound change < {tol:g}, at most {max_iter} sweeps):")
    for rotate in (True, False):
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always", fg.ConvergenceWarning)
            r = models.pca(X, K, rotate=rotate, max_iter=max_iter, tol=tol, **common)
        key = "ours_rot" if rotate else "ours_norot"
        out[key] = {"sweeps": r.n_iter, "sec": r.time, "converged": r.converged, "active": _active(r.loadings),
                    "elbo": r.elbo}
        state = "" if r.converged else " (not converged)"
        print(f"  ours, rotation {'on ' if rotate else 'off'}: {r.n_iter} sweeps{state}, {r.time:.2f} s, "
              f"{out[key]['active']} components kept, bound {r.elbo:.6f}")
    Q, order, W, _ = pca_nodes(X, K, W0, rotate=True)
    t0 = time.perf_counter()
    n = 0
    last = -np.inf
    while n < max_iter:
        Q.update(*order, verbose=False)
        n += 1
        L = Q.compute_lowerbound()
        if abs(L - last) <= tol * (1.0 + abs(L)):
            break
        last = L
    sec = time.perf_counter() - t0
    out["bayespy_rot"] = {"sweeps": n, "sec": sec, "active": _active(W.get_moments()[0][:, 0, :]), "elbo": L}
    print(f"  BayesPy, rotation on: {n} sweeps, {sec:.2f} s, {out['bayespy_rot']['active']} components kept, "
          f"bound {L:.6f}")
    print(f"  time to convergence with rotation: BayesPy / ours = {sec / out['ours_rot']['sec']:.1f}x")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--sweeps", type=int, default=20)
    a = ap.parse_args()
    main(small=a.small, sweeps=a.sweeps)
