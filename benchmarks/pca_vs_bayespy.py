"""Bayesian PCA with ARD: ``models.pca`` against BayesPy's PCA (``GaussianARD`` + ``SumMultiply``, its
``RotationOptimizer`` for the rotation), same model (no mean, one noise precision), data, start and order, and
against the hand-written blocked VMP that ``models.pca`` ran before it was built on ``fg.infer``.

Prints, in one run:

1. the time per sweep of each without rotation (``--sweeps`` sweeps from the same point-mass q(W); all compute
   the bound every sweep; the best of 5 × ``--reps`` calls, each timed whole, so model building and compilation
   count) and the ratios, with the difference of the bounds after those sweeps (the iterates are the same:
   tests/test_pca.py checks them to 1e-9);
2. sweeps and seconds to convergence (relative bound change < ``--tol``; the best of two runs), ours with and
   without the rotation, the hand path the same way, and BayesPy with its rotation, and the number of
   components ARD kept.

Before and after take turns, a fresh process for each "before", so that the load of a shared machine falls on
both alike; each time is also given as the process's CPU time, which a busy machine moves less than wall-clock
time (with one BLAS thread, ``OPENBLAS_NUM_THREADS=1``, it is the work done).

"Before" is the hand path as it was at commit ``HAND_PATH`` (factorgraph/pca.py, its own VMP loop beside the
engine): its tree is taken from git (``git archive``) into a temporary directory and timed in a subprocess on the
same data (``--no-before`` skips it; it needs the repository's history).  "After" is the current ``models.pca``.

Data: N × D Gaussian rows from K_true = 5 components (loadings scaled 3 … 1) plus noise 0.5; the model has
K = 10 components.  ``--small``: N = 2000.

Run ``python -m benchmarks.pca_vs_bayespy [--small] [--no-bayespy] [--no-before]`` (BayesPy from the ``test``
extra).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

import factorgraph as fg
from benchmarks.peers.bayespy_peer import pca_nodes

HAND_PATH = "5fc8572"  # the last commit at which models.pca ran its own blocked VMP


def _data(N: int, D: int, K: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(D, K)) * np.linspace(3.0, 1.0, K)
    return rng.normal(size=(N, K)) @ W.T + 0.5 * rng.normal(size=(N, D))


def _active(W: np.ndarray) -> int:
    s = np.einsum("dk,dk->k", W, W)
    return int(np.sum(s > 1e-3 * s.max()))


def ours(N: int, D: int, K: int, sweeps: int, tol: float, max_iter: int, converge: bool = True) -> dict:
    """Timings of the importable ``models.pca`` on the benchmark's data (after a warm-up call): seconds per sweep
    without rotation (the fastest of 5 calls of ``sweeps`` sweeps, each timed whole) and the bound after them; with
    ``converge``,
    sweeps, seconds (the whole call), components kept and bound to convergence with and without the rotation."""
    from factorgraph import models

    X = _data(N, D, 5)
    W0 = np.random.default_rng(1).normal(size=(D, K))
    common = {"noise": "isotropic", "mean": False, "init": W0, "scale": False}  # BayesPy's model exactly
    out: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)  # fixed sweep counts: unconverged on purpose
        models.pca(X, K, rotate=False, max_iter=2, tol=0.0, **common)  # warm-up (imports, compiled kernels)
        best, cpu = np.inf, np.inf
        for _ in range(5):
            t0, c0 = time.perf_counter(), time.process_time()
            r = models.pca(X, K, rotate=False, max_iter=sweeps, tol=0.0, **common)
            best, cpu = min(best, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
        out["sec_per_sweep"], out["cpu_per_sweep"], out["bound"] = best / sweeps, cpu / sweeps, float(r.elbo)
        for rotate in (True, False) if converge else ():
            t0, c0 = time.perf_counter(), time.process_time()
            r = models.pca(X, K, rotate=rotate, max_iter=max_iter, tol=tol, **common)
            out["rot" if rotate else "norot"] = {
                "sweeps": int(r.n_iter), "sec": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                "converged": bool(r.converged), "active": _active(r.loadings), "elbo": float(r.elbo)}
    return out


def hand_path(tree: str, N: int, D: int, K: int, sweeps: int, tol: float, max_iter: int, converge: bool) -> dict:
    """``ours`` in a subprocess on ``tree``, the packages of commit ``HAND_PATH`` (``hand_tree``): the hand-written
    blocked VMP that ``models.pca`` was before."""
    root = Path(__file__).resolve().parents[1]
    code = ("import json; from benchmarks.pca_vs_bayespy import ours; "
            f"print(json.dumps(ours({N}, {D}, {K}, {sweeps}, {tol!r}, {max_iter}, {converge})))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tree, str(root)])}  # the old packages, this benchmark
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tree)
    if done.returncode != 0:
        raise RuntimeError(f"the hand path at {HAND_PATH} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def hand_tree(tmp: str) -> str:
    """Extract factorgraph, distributions, factors and schedules of commit ``HAND_PATH`` (``git archive``) into
    ``tmp``; returns it."""
    root = Path(__file__).resolve().parents[1]
    tree = subprocess.run(["git", "-C", str(root), "archive", HAND_PATH, "factorgraph", "distributions", "factors",
                           "schedules"], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tree)) as tar:
        tar.extractall(tmp, filter="data")
    return tmp


def _best(runs: list[dict]) -> dict:
    """The fastest of repeated timings (per key), the rest from the first run."""
    out = dict(runs[0])
    out["sec_per_sweep"] = min(r["sec_per_sweep"] for r in runs)
    out["cpu_per_sweep"] = min(r["cpu_per_sweep"] for r in runs)
    for key in ("rot", "norot"):
        timed = [r[key] for r in runs if key in r]
        if timed:
            out[key] = {**timed[0], "sec": min(t["sec"] for t in timed), "cpu": min(t["cpu"] for t in timed)}
    return out


def main(small: bool = False, D: int = 50, K: int = 10, sweeps: int = 20, tol: float = 1e-7, max_iter: int = 3000,
         reps: int = 3, bayespy: bool = True, before: bool = True) -> dict:
    N = 2_000 if small else 10_000
    out: dict = {"N": N, "D": D, "K": K}
    # before and after take turns (a fresh process for each "before"), so that the load of a shared machine falls
    # on both alike; the fastest of ``reps`` per-sweep timings and of two runs to convergence are kept
    runs_b, runs_a = [], []
    with tempfile.TemporaryDirectory() as tmp:
        tree = hand_tree(tmp) if before else None
        for i in range(reps):
            if before:
                runs_b.append(hand_path(tree, N, D, K, sweeps, tol, max_iter, converge=i < 2))
            runs_a.append(ours(N, D, K, sweeps, tol, max_iter, converge=i < 2))
    out["after"] = _best(runs_a)
    if before:
        out["before"] = _best(runs_b)
    after, hand = out["after"], out.get("before")
    print(f"PCA N={N} D={D} K={K}, {sweeps} sweeps without rotation (best of {5 * reps} calls, each timed whole)")
    print(f"  per sweep: ours {1e3 * after['sec_per_sweep']:.2f} ms (CPU {1e3 * after['cpu_per_sweep']:.2f} ms)")
    if hand:
        out["after_over_before"] = after["sec_per_sweep"] / hand["sec_per_sweep"]
        out["after_over_before_cpu"] = after["cpu_per_sweep"] / hand["cpu_per_sweep"]
        print(f"  per sweep: the hand path before ({HAND_PATH}) {1e3 * hand['sec_per_sweep']:.2f} ms (CPU "
              f"{1e3 * hand['cpu_per_sweep']:.2f} ms)  -> ours / hand = {out['after_over_before']:.2f}x (CPU "
              f"{out['after_over_before_cpu']:.2f}x);  |bound difference| {abs(after['bound'] - hand['bound']):.2e}")
    if bayespy:
        X = _data(N, D, 5)
        W0 = np.random.default_rng(1).normal(size=(D, K))
        Q, order, W, _ = pca_nodes(X, K, W0)
        t0 = time.perf_counter()
        for _ in range(sweeps):
            Q.update(*order, verbose=False)
        out["bayespy_sec_per_sweep"] = (time.perf_counter() - t0) / sweeps
        out["ratio"] = out["bayespy_sec_per_sweep"] / after["sec_per_sweep"]
        print(f"  per sweep: BayesPy {1e3 * out['bayespy_sec_per_sweep']:.2f} ms  -> BayesPy / ours = "
              f"{out['ratio']:.1f}x;  |bound difference| {abs(after['bound'] - Q.compute_lowerbound()):.2e}")

    print(f"to convergence (relative bound change < {tol:g}, at most {max_iter} sweeps; seconds of the whole call, "
          "best of 2):")
    for label, res in (("ours", after), ("hand path", hand)):
        if res is None:
            continue
        for key in ("rot", "norot"):
            f = res[key]
            state = "" if f["converged"] else " (not converged)"
            on = "on " if key == "rot" else "off"
            print(f"  {label}, rotation {on}: {f['sweeps']} sweeps{state}, {f['sec']:.2f} s (CPU {f['cpu']:.2f} s), "
                  f"{f['active']} components kept, bound {f['elbo']:.6f}")
    if hand:
        for key, what in (("rot", "with"), ("norot", "without")):
            ratio, cpu = after[key]["sec"] / hand[key]["sec"], after[key]["cpu"] / hand[key]["cpu"]
            out[f"{key}_after_over_before"], out[f"{key}_after_over_before_cpu"] = ratio, cpu
            print(f"  time to convergence {what} rotation: ours / hand = {ratio:.2f}x (CPU {cpu:.2f}x)")
    if bayespy:
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
        print(f"  time to convergence with rotation: BayesPy / ours = {sec / after['rot']['sec']:.1f}x")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--sweeps", type=int, default=20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-bayespy", action="store_true")
    ap.add_argument("--no-before", action="store_true")
    a = ap.parse_args()
    main(small=a.small, sweeps=a.sweeps, reps=a.reps, bayespy=not a.no_bayespy, before=not a.no_before)
