"""Sparse robust kernel regression with AI KL: Challis & Barber (2012), §4.3 and its table.

Model (as in the paper): weights w ∈ R^{N_trn}, one per training point; sparse Laplace prior
Π_d (2τ_p)⁻¹e^{−|w_d|/τ_p} — Laplace *sites* on x = e_dᵀw (X = I, location 0) under an improper flat Gaussian
prior — and robust Laplace likelihood (2τ_l)⁻¹e^{−|y_n − wᵀk_n|/τ_l} with k_n the n-th row of the kernel
matrix; τ_p = τ_l = 0.16.  Inputs and targets are standardised with the training statistics.  Each block
(a flat prior with the two groups of Laplace sites, ``fg.site("laplace", ...)``) is handed by ``fg.approximate`` to
``AIKL(base="gen_normal", theta=1.5, learn_theta=False)`` — the paper fixes θ = 1.5 and optimises L, U, b —
which returns the Gaussian KL bound B_G (its first stage) and the AI bound B_AI.  Reported: B/N_trn, and the
averaged test log-probability ATLP = mean_n log E_q[(2τ_l)⁻¹e^{−|y*_n − wᵀk*_n|/τ_l}] (lattice expectations of
the projections), mean ± standard error over splits.

**Where the data and set-up differ from the paper (read before comparing numbers).**

* Kernel.  The paper: "squared exponential kernel with length scale 0.05 and additive noise 1, see [23]".
  Read literally (k = exp(−‖x − x′‖²/(2·0.05²)) on standardised inputs) the off-diagonal kernel entries
  vanish, K = 2I, every weight decouples and the test kernel rows are ≈ 0, which cannot give the paper's
  ATLP.  We use k(x, x′) = exp(−γ‖x − x′‖²) with γ = 0.05 (a length scale √10 ≈ 3.2 in GPML's convention)
  plus 1 on the training diagonal.  This is our reading, not the paper's stated formula.
* Concrete.  The paper's "Concrete Slump Test" has N_tst = 930, i.e. 1030 rows: that is the Concrete
  Compressive Strength set, which is not available here.  We use the 103-row Slump set
  (``data/concrete_slump``, target: 28-day compressive strength, 7 inputs): 100 training and only
  3 test points per split, so its ATLP is very noisy.
* Boston: 506 rows, 13 inputs, target medv; N_trn = 100, N_tst = 406 as in the paper.
* Splits: 10 seeded random partitions (the paper's splits are not available); the synthetic set of [17] is
  not run here.
* Optimisation budget: L-BFGS is capped (``maxiter`` per lattice round); the table says whether every fit
  converged.  The lattice during the optimisation has K = 64 points per component (refined at the end).

Sizes: by default one split per data set with N_trn = 50 and at most 150 L-BFGS iterations per lattice round
(the table prints how much the last round still gained); ``--full``: the paper's 10 splits with N_trn = 100
and 500 iterations per round (an hour or more); ``--small`` (the tests'): 2 splits with N_trn = 30, 500 per
round.  ``--splits``/``--n-train``/``--maxiter`` override either.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # tiny L-BFGS steps: BLAS threads only add overhead

import argparse  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import factorgraph as fg  # noqa: E402

try:  # imported as demos.<name> (tests) or run as a script
    from ._data import DATA  # noqa: E402
except ImportError:
    from _data import DATA  # noqa: E402
OUT = Path(__file__).resolve().parent / "out"
TAU_P = TAU_L = 0.16
GAMMA = 0.05
PAPER = {  # Challis & Barber 2012, §4.3 table: B̄_G, B̄_AI, ΔB̄, ATLP_G, ATLP_AI, ΔATLP (mean ± s.e. over 10 splits)
    "concrete": ((-2.08, 0.09), (-2.06, 0.09), (0.022, 0.004), (-1.70, 0.11), (-1.67, 0.11), (0.024, 0.010)),
    "boston": ((-1.28, 0.05), (-1.25, 0.05), (0.028, 0.003), (-1.18, 0.10), (-1.15, 0.09), (0.023, 0.006)),
}


def load(name: str) -> tuple[np.ndarray, np.ndarray]:
    folder = {"boston": "boston", "concrete": "concrete_slump"}[name]
    X = np.loadtxt(DATA / folder / "X.csv", delimiter=",", skiprows=1)
    y = np.loadtxt(DATA / folder / "y.csv", delimiter=",", skiprows=1)
    return X, y


def kernel(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """exp(−γ‖a − b‖²)."""
    d2 = (A * A).sum(1)[:, None] + (B * B).sum(1)[None] - 2.0 * A @ B.T
    return np.exp(-GAMMA * np.maximum(d2, 0.0))


def split_problem(X, y, rng, n_train):
    idx = rng.permutation(len(y))
    tr, te = idx[:n_train], idx[n_train:]
    mx, sx = X[tr].mean(0), X[tr].std(0)
    sx[sx == 0] = 1.0
    Xs = (X - mx) / sx
    ys = (y - y[tr].mean()) / y[tr].std()
    K = kernel(Xs[tr], Xs[tr]) + np.eye(n_train)
    # flat prior; a Laplace site on each weight (the sparse prior) and on each fitted value K w (the likelihood)
    sites = [fg.site("laplace", np.eye(n_train), location=0.0, scale=TAU_P),
             fg.site("laplace", K, location=ys[tr], scale=TAU_L)]
    return sites, kernel(Xs[te], Xs[tr]), ys[te]


def atlp(q, K_test: np.ndarray, y_test: np.ndarray) -> float:
    def log_lik(Y):
        return -np.log(2 * TAU_L) - np.abs(y_test[:, None] - Y) / TAU_L

    return float(fg.projection_log_expectation(q, K_test, log_lik, n_lattice=256).mean())


def _last_gain(info: dict, n_train: int) -> float:
    """How much the last lattice round of L-BFGS raised the AI bound, per training point."""
    rounds = info.get("rounds", [])
    return float(rounds[-1] - rounds[-2]) / n_train if len(rounds) > 1 else float("nan")


def _why_stopped(info: dict, maxiter: int, n_train: int) -> str:
    """'converged', or why the AI KL fit stopped where it did."""
    if info["converged"]:
        return "converged"
    return (f"stopped at the L-BFGS cap ({maxiter} per round, {len(info.get('rounds', []))} lattice rounds; "
            f"last round +{_last_gain(info, n_train):.1e} in B/N)")


def main(small: bool = False, seed: int = 0, n_splits: int | None = None, n_train: int | None = None,
         maxiter: int | None = None, datasets: tuple[str, ...] = ("concrete", "boston"), full: bool = False) -> dict:
    """Run the table (one split of N_trn = 50 per dataset, 150 L-BFGS iterations per lattice round; 2 splits of
    30 with ``small``, the paper's 10 of 100 with ``full``, both 500 per round); returns per-split rows and
    per-dataset summaries."""
    if small and full:
        raise ValueError("small=True and full=True: choose one size (--small or --full)")
    n_splits = n_splits or (2 if small else 10 if full else 1)
    n_train = n_train or (30 if small else 100 if full else 50)
    maxiter = maxiter or (500 if small or full else 150)
    rows, summary = [], {}
    for name in datasets:
        X, y = load(name)
        for s in range(n_splits):
            rng = np.random.default_rng([seed, s])
            sites, K_test, y_test = split_problem(X, y, rng, n_train)
            t = time.perf_counter()
            h = fg.AIKL(base="gen_normal", theta=1.5, learn_theta=False, lattice=64, maxiter=maxiter, rounds=3,
                     max_adapt=0, max_lattice=1024)
            fit = fg.approximate(sites, np.zeros(n_train), h)
            i = fit.info
            r = {"dataset": name, "split": s, "N_trn": n_train, "N_tst": len(y_test),
                 "B_G": i["gaussian_bound"], "B_AI": fit.elbo, "ATLP_G": atlp(i["gaussian"], K_test, y_test),
                 "ATLP_AI": atlp(fit.posterior, K_test, y_test), "lattice_error": i["lattice_error"],
                 "lattice": i["lattice"], "converged": i["converged"], "iterations": i["iterations"],
                 "why": _why_stopped(i, maxiter, n_train),
                 "last_gain": _last_gain(i, n_train),
                 "time_G": i["time_gaussian"], "time_AI": i["time_ai"], "wall": time.perf_counter() - t}
            rows.append(r)
            print(f"{name:9s} split {s}: B_G/N {r['B_G'] / n_train:8.4f}  B_AI/N {r['B_AI'] / n_train:8.4f}  "
                  f"ATLP_G {r['ATLP_G']:7.3f}  ATLP_AI {r['ATLP_AI']:7.3f}  lattice err {r['lattice_error']:.1e} "
                  f"(K = {r['lattice']})  it {r['iterations']}  {r['why']}  "
                  f"t_G {r['time_G']:.0f}s t_AI {r['time_AI']:.0f}s", flush=True)
        sel = [r for r in rows if r["dataset"] == name]

        def ms(vals):
            v = np.asarray(vals, dtype=float)
            return float(v.mean()), float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else np.nan

        summary[name] = {
            "B_G": ms([r["B_G"] / n_train for r in sel]), "B_AI": ms([r["B_AI"] / n_train for r in sel]),
            "dB": ms([(r["B_AI"] - r["B_G"]) / n_train for r in sel]),
            "ATLP_G": ms([r["ATLP_G"] for r in sel]), "ATLP_AI": ms([r["ATLP_AI"] for r in sel]),
            "dATLP": ms([r["ATLP_AI"] - r["ATLP_G"] for r in sel]),
            "all_converged": all(r["converged"] for r in sel),
            "why": "" if all(r["converged"] for r in sel) else (
                f" (L-BFGS at its cap of {maxiter} iterations per lattice round; the last round raised B/N_trn by "
                f"at most {max(r['last_gain'] for r in sel):.1e}"
                + (", below the table's precision)" if max(r["last_gain"] for r in sel) < 5e-4 else
                   ": the AI bounds may still rise; try --maxiter)")),
            "max_lattice_error": max(r["lattice_error"] for r in sel)}
    cols = ("B_G", "B_AI", "dB", "ATLP_G", "ATLP_AI", "dATLP")
    head = " ".join(f"{c:>16s}" for c in ("B̄_G", "B̄_AI", "B̄_AI − B̄_G", "ATLP_G", "ATLP_AI", "ΔATLP"))
    print(f"\n{'':18s}{head}")
    for name, sm in summary.items():
        print(f"{name + ' (ours)':18s}" + " ".join(f"{sm[c][0]:9.3f} ± {sm[c][1]:.3f}" if np.isfinite(sm[c][1])
                                               else f"{sm[c][0]:9.3f} ± {'—':5s}" for c in cols)
              + f"   [{n_splits} split{'s' if n_splits != 1 else ''}, N_trn = {n_train}, "
                f"converged: {sm['all_converged']}{sm['why']}, "
                f"max lattice error {sm['max_lattice_error']:.1e}]")
        p = PAPER[name]
        print(f"{name + ' (paper)':18s}" + " ".join(f"{m:9.3f} ± {e:.3f}" for m, e in p)
              + "   [10 splits, N_trn = 100]")
    OUT.mkdir(exist_ok=True)
    path = OUT / ("aikl_robust_kernel_small.png" if small else "aikl_robust_kernel.png")
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
    for k, name in enumerate(summary):
        sel = [r for r in rows if r["dataset"] == name]
        ax[0].scatter([k] * len(sel), [(r["B_AI"] - r["B_G"]) / n_train for r in sel], label=name)
        ax[1].scatter([k] * len(sel), [r["ATLP_AI"] - r["ATLP_G"] for r in sel], label=name)
    ax[0].set(title="(B_AI − B_G)/N_trn per split", xticks=range(len(summary)), xticklabels=list(summary))
    ax[1].set(title="ATLP_AI − ATLP_G per split", xticks=range(len(summary)), xticklabels=list(summary))
    for a in ax:
        a.axhline(0.0, color="k", lw=0.5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return {"rows": rows, "summary": summary, "figure": str(path)}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--small", action="store_true", help="2 splits, N_trn = 30 (the tests' size)")
    which.add_argument("--full", action="store_true", help="the paper's 10 splits, N_trn = 100")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--splits", type=int, default=None)
    ap.add_argument("--n-train", type=int, default=None)
    ap.add_argument("--maxiter", type=int, default=None, help="L-BFGS iterations per lattice round (default 150; "
                    "500 with --small or --full)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    main(small=args.small, seed=args.seed, n_splits=args.splits, n_train=args.n_train, maxiter=args.maxiter,
         full=args.full)
    print(f"total {time.perf_counter() - t0:.0f} s")
