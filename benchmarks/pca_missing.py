"""Bayesian PCA with missing entries: ``models.pca`` on data with a fraction of entries missing at random.

Prints, in one run, for missing fractions 0, 10 % and 30 % (the same data, N × D rows from K_true = 5
components, loadings scaled 3 … 1, noise 0.5; the model has K = 10 components, rotation on, noise diagonal):

1. sweeps and seconds to convergence (relative bound change < ``--tol``), ms per sweep, components ARD kept,
   the largest principal angle between the true and the fitted subspace; and, at 30 % missing, the same with
   K = 5 (no component to switch off);
2. the root mean square error of the imputed entries (``PCAResult.impute``) against the true values, beside
   filling in the column means, and the standard deviation of the standardised errors (1 = calibrated);
3. the time per sweep without rotation against BayesPy's PCA with the same missing entries (its
   ``observe(..., mask=)``; same model: no mean, one noise precision, same start), and the difference of the
   two bounds after those sweeps (tests/test_pca.py checks the iterates to 1e-9).

Run ``python -m benchmarks.pca_missing [--small]`` (``--small``: N = 1000; BayesPy from the ``test`` extra).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from scipy.linalg import subspace_angles

import factorgraph as fg
from benchmarks.peers.bayespy_peer import pca_nodes
from factorgraph import models


def _data(N: int, D: int, K: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(D, K)) * np.linspace(3.0, 1.0, K)
    return rng.normal(size=(N, K)) @ W.T + 0.5 * rng.normal(size=(N, D)), W


def main(small: bool = False, D: int = 30, K: int = 10, sweeps: int = 10, tol: float = 1e-7,
         max_iter: int = 3000) -> dict:
    N = 1_000 if small else 5_000
    X, Wtrue = _data(N, D, 5)
    out: dict = {"N": N, "D": D, "K": K}
    print(f"PCA N={N} D={D} K={K} (K_true = 5), rotation on, to relative bound change < {tol:g}:")
    for frac in (0.0, 0.1, 0.3):
        M = np.random.default_rng(1).random(X.shape) >= frac
        Xm = np.where(M, X, np.nan)
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always", fg.ConvergenceWarning)
            r = models.pca(Xm, K, max_iter=max_iter, tol=tol)
        act = r.active()
        angle = float(np.degrees(subspace_angles(Wtrue, r.loadings[:, act])).max()) if act.sum() >= 5 else np.nan
        row = {"sweeps": r.n_iter, "sec": r.time, "converged": r.converged, "active": int(act.sum()),
               "angle_deg": angle}
        line = (f"  {100 * frac:4.0f}% missing: {r.n_iter} sweeps{'' if r.converged else ' (not converged)'}, "
                f"{r.time:.2f} s ({1e3 * r.time / r.n_iter:.2f} ms/sweep), {row['active']} components kept, "
                f"max subspace angle {angle:.2f} deg")
        if frac > 0:
            filled, var = r.impute()
            colmean = np.where(M, X, 0.0).sum(0) / M.sum(0)
            err = (filled - X)[~M]
            row["rmse"] = float(np.sqrt(np.mean(err**2)))
            row["rmse_colmean"] = float(np.sqrt(np.mean((colmean - X)[~M] ** 2)))
            row["z_std"] = float((err / np.sqrt(var[~M])).std())
            line += (f"\n        imputed entries: RMSE {row['rmse']:.3f} (column means: {row['rmse_colmean']:.3f}), "
                     f"standardised errors' sd {row['z_std']:.3f}")
        out[frac] = row
        print(line)

    M = np.random.default_rng(1).random(X.shape) >= 0.3
    Xm = np.where(M, X, np.nan)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always", fg.ConvergenceWarning)
        r = models.pca(Xm, 5, max_iter=max_iter, tol=tol)
    out["K_true"] = {"sweeps": r.n_iter, "sec": r.time}
    print(f"  30% missing, K = K_true = 5 (nothing to switch off): {r.n_iter} sweeps, {r.time:.2f} s")
    W0 = np.random.default_rng(2).normal(size=(D, K))
    common = {"noise": "isotropic", "mean": False, "init": W0, "scale": False}  # BayesPy's model exactly
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)  # fixed sweep counts: unconverged on purpose
        models.pca(Xm, K, rotate=False, max_iter=2, tol=0.0, **common)  # warm-up
        t0 = time.perf_counter()
        r = models.pca(Xm, K, rotate=False, max_iter=sweeps, tol=0.0, **common)
        ours = (time.perf_counter() - t0) / sweeps
    Q, order, _, _ = pca_nodes(X, K, W0, mask=M)
    t0 = time.perf_counter()
    for _ in range(sweeps):
        Q.update(*order, verbose=False)
    theirs = (time.perf_counter() - t0) / sweeps
    out["per_sweep"] = {"ours": ours, "bayespy": theirs, "ratio": theirs / ours,
                        "bound_diff": abs(r.elbo - Q.compute_lowerbound())}
    print(f"30% missing, {sweeps} sweeps without rotation, per sweep: ours {1e3 * ours:.2f} ms, BayesPy "
          f"{1e3 * theirs:.2f} ms -> {theirs / ours:.1f}x; |bound difference| {out['per_sweep']['bound_diff']:.2e}")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--sweeps", type=int, default=10)
    a = ap.parse_args()
    main(small=a.small, sweeps=a.sweeps)
