"""Conjugate VMP against BayesPy, measured in the same run on the same arrays.

Linear regression with ARD, D = 20, N ∈ {1e3, 1e4, 1e5, 1e6}:

* ours, factorised q(w) q(τ) q(α) (``mv_gaussian`` weights with an ARD ``gamma`` precision and a
  ``gamma`` noise precision; the engine fuses the likelihood so XᵀX, Xᵀy are computed once), against
  BayesPy's ``GaussianARD`` + ``SumMultiply`` model (the same model);
* ours, the normal–gamma block q(w, τ) q(α) (``models.linear_regression(ard=True)``), against
  BayesPy's ``GaussianGamma`` node with ARD (the same model).

Printed: seconds per iteration (median, first excluded), the ratio BayesPy / ours, the whole fit of
ours (build + compile + iterations to convergence; median of three fits after one warm-up fit that
loads the numba cache) as a multiple of one pass computing XᵀX (median of three), and the largest
difference between the two libraries' posterior means of w.

Gaussian mixture, K = 5, N = 1e4, D = 2: ours with diagonal precisions (a gamma per component and
dimension), BayesPy with full Wishart precisions (its GMM example); both start from the same
assignments.  The models differ, so only the per-iteration time and the recovered clusters are
compared.

Run: ``pip install -e ".[bench]" && python -m benchmarks.conjugate_vs_bayespy`` (``--quick`` skips
N = 1e6).  Absolute times vary with the machine's load; the ratios are the figures to quote.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import factorgraph as fg
from factorgraph import models

from .peers import bayespy_peer
from .peers.data import initial_assignments, make_gmm, make_linreg, matched_accuracy
from .timing import SweepTimer, median_time


def _factorised_model(X, y) -> fg.Model:
    N, D = X.shape
    with fg.Model("linreg-ard") as m:
        n, d = fg.plate("n", N), fg.plate("d", D)
        alpha = fg.gamma("alpha", shape=1e-2, rate=1e-4, plates=[d])
        w = fg.mv_gaussian("w", mean=0.0, precision=alpha)
        tau = fg.gamma("tau", shape=1e-2, rate=1e-4)
        fg.gaussian("y", mean=fg.inner(X, w, plates=[n]), precision=tau, plates=[n], observed=y)
    return m


def _fit_time(fit) -> tuple[float, fg.Result]:
    """Median wall-clock time of three whole fits (build included), after one warm-up fit."""
    r = fit()
    return median_time(fit), r


def _ours_factorised(X, y, min_iters: int = 10):
    total, r = _fit_time(lambda: fg.infer(_factorised_model(X, y), max_iter=500, tol=1e-9))
    m = _factorised_model(X, y)
    timer = SweepTimer()
    fg.infer(m, max_iter=min_iters, tol=None, callbacks=[timer])  # per-iteration timing run
    return {"per_iter": timer.per_iter(), "total": total, "iterations": r.n_iter,
            "w": r.posterior("w").mean(), "elbo": r.elbo}


def _ours_normal_gamma(X, y, min_iters: int = 10):
    total, r = _fit_time(lambda: models.linear_regression(X, y, ard=True))
    m = models.linear_regression_model(X, y, ard=True)
    timer = SweepTimer()
    fg.infer(m, schedule=["w", "alpha"], max_iter=min_iters, tol=None, callbacks=[timer])
    return {"per_iter": timer.per_iter(), "total": total, "iterations": r.n_iter, "w": r.posterior("w").mean(),
            "elbo": r.elbo}


def linreg(sizes, D: int = 20) -> None:
    print(f"Linear regression with ARD, D = {D} (times in seconds; ratio = BayesPy / ours)")
    head = (f"{'N':>8}  {'model':<14} {'ours/iter':>10} {'BayesPy/iter':>12} {'ratio':>8}  "
            f"{'ours fit':>9} {'XᵀX pass':>9} {'fit/XᵀX':>8}  {'iters':>5}  {'max |Δw|':>9}")
    print(head)
    for N in sizes:
        X, y, _ = make_linreg(N, D, seed=0)
        xtx = median_time(lambda X=X: X.T @ X)
        for label, ours_fn, variant in (("factorised", _ours_factorised, "ard"),
                                        ("normal-gamma", _ours_normal_gamma, "gaussian_gamma_ard")):
            ours = ours_fn(X, y)
            peer = bayespy_peer.linreg_ard(X, y, variant=variant, max_iter=500, tol=1e-9)
            dw = float(np.max(np.abs(ours["w"] - peer["w_mean"])))
            print(f"{N:>8.0e}  {label:<14} {ours['per_iter']:10.2e} {peer['sec_per_iter']:12.2e} "
                  f"{peer['sec_per_iter'] / ours['per_iter']:8.0f}  {ours['total']:9.3f} {xtx:9.3f} "
                  f"{ours['total'] / xtx:8.2f}  {ours['iterations']:5d}  {dw:9.1e}", flush=True)


def gmm(N: int = 10_000, K: int = 5, D: int = 2) -> None:
    X, labels, _, _ = make_gmm(N, K, D, seed=0)
    z0 = initial_assignments(N, K, seed=0, X=X)
    resp = np.full((N, K), 0.02 / K)
    resp[np.arange(N), z0] += 0.98
    t0 = time.perf_counter()
    with fg.Model("gmm") as m:
        n, k, d = fg.plate("n", N), fg.plate("k", K), fg.plate("d", D)
        pi = fg.dirichlet("pi", concentration=np.ones(K))
        mus = fg.gaussian("mus", 0.0, precision=1e-2, plates=[k, d])
        taus = fg.gamma("taus", 1.0, 1.0, plates=[k, d])
        z = fg.categorical("z", probs=pi, plates=[n])
        fg.gaussian("x", mean=mus[z], precision=taus[z], plates=[n, d], observed=X)
    r = fg.infer(m, init={"z": resp}, max_iter=500, tol=1e-9)
    total = time.perf_counter() - t0
    timer = SweepTimer()
    fg.infer(m, init={"z": resp}, max_iter=10, tol=None, callbacks=[timer])
    peer = bayespy_peer.gmm(X, K, max_iter=500, tol=1e-9, z_init=z0)
    acc = matched_accuracy(labels, r.posterior("z").probs.argmax(-1), K)
    peer_acc = matched_accuracy(labels, peer["assignments"], K)
    print(f"\nGaussian mixture K = {K}, N = {N}, D = {D} (ours: diagonal precisions; BayesPy: full Wishart)")
    print(f"{'':10} {'per iter':>10} {'fit':>8} {'iters':>6} {'accuracy':>9}")
    print(f"{'ours':10} {timer.per_iter():10.2e} {total:8.3f} {r.n_iter:6d} {acc:9.3f}")
    print(f"{'BayesPy':10} {peer['sec_per_iter']:10.2e} {peer['total_sec']:8.3f} {peer['iterations']:6d} "
          f"{peer_acc:9.3f}")
    print(f"per-iteration ratio BayesPy / ours: {peer['sec_per_iter'] / timer.per_iter():.1f}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="skip N = 1e6")
    args = ap.parse_args(argv)
    sizes = [1_000, 10_000, 100_000] + ([] if args.quick else [1_000_000])
    linreg(sizes)
    gmm()


if __name__ == "__main__":
    main()
