"""Multinomial (softmax) regression on Iris, Glass and Thyroid: Knowles & Minka (2011), Table 1 and §6.4.

Model (the paper's §5): g_kn = w_kᵀx_n + b_k, w_kd ~ N(0, 1), b_k ~ N(0, 1), y_n ~ Categorical(softmax(g_:n)),
fitted by ``models.softmax_regression`` with the softmax factor's

* ``quadratic`` — Bouchard's bound; conjugate, so NCVMP sends exactly its VMP message (Theorem 2) and the
  ELBO never decreases; run with ``fg.NCVMP()`` (the library registers this softmax rule under NCVMP only);
* ``tilted``    — the tilted bound, NCVMP;
* ``adaptive``  — per factor and update, the tighter of the two, NCVMP.

Every fit stops when the ELBO changes by < 1e-7 relative, or the natural parameters by < 1e-8, or after
1000 sweeps (the paper gives no stopping rule).  Every method runs under ``fg.NCVMP()`` with its default
adaptive backtracking: without it tilted and adaptive oscillate on Thyroid (its standardised binary inputs
reach |x| ≈ 60); backtracking undoes a sweep that lowers the ELBO and raises the damping of the softmax
factor for a while, and damping leaves the fixed points unchanged (the paper's §7).  A fixed heavy damping
(``fg.NCVMP(damping=0.9)``, used here before) reaches the same fixed points but needs 450–630 sweeps per fit
instead of 45–150, and stopped unconverged at 300.  On the whole Thyroid data (3600 training points) the
fits are slower still: on the first split each method reaches the 1000-sweep cap, its ELBO still changing by
1e-4 to 1e-3 per sweep (the stopping tolerance, 1e-7 relative, is about 1e-4 there).  Whether every fit
converged is printed per method.
(With ``--full`` one plain tilted fit, ``fg.NCVMP(backtracking=False)``, on the first Thyroid split is run to
show the oscillation.)

Sizes: by default Iris and Glass get the paper's 16 random 50:50 splits and Thyroid one (its fits take most
of the time); ``--full`` runs 16 splits of every dataset; ``--small`` (the tests') runs 2 splits of each, with
Thyroid a random subsample of 600 points.

Reported per method, mean ± sd over the random 50:50 train/test splits: the ELBO on the
training half (a lower bound on the marginal likelihood, the paper's "marginal likelihood"), the mean test
log predictive probability (``models.softmax_predictive``, 2000 Monte Carlo draws of the scores per point)
and the test error (argmax of the predictive probabilities).  Inputs are standardised with the training
half's mean and standard deviation.  The paper's "Probit" column (a different model) is quoted, not run.

Where our data and splits differ from the paper's:
* splits are our own seeded random permutations (the paper's 16 splits are not available);
* Glass has D = 9 inputs here (all UCI attributes except the Id); the paper lists D = 8 without saying
  which attribute it dropped;
* Thyroid is the UCI ann-thyroid data (7200 × 21, 3 classes, the UCI train and test files pooled) split 50:50
  at random, as in the paper; the paper does not say how it scaled the inputs;
* with ``--small``, Thyroid is a random subsample of 600 points.

The paper's values below are transcribed from a text extraction of the paper's Table 1, whose layout was
scrambled; the column order Quadratic, Probit, Tilted, Adaptive is the table's.

Run ``python demos/softmax_multinomial_table1.py [--small | --full] [--seed S]``.
"""

from __future__ import annotations

import argparse
import csv
import time

import numpy as np

import factorgraph as fg
from factorgraph import models

try:  # imported as demos.<name> (tests) or run as a script
    from ._data import DATA
except ImportError:
    from _data import DATA
METHODS = ("quadratic", "tilted", "adaptive")
DATASETS = {"Iris": "iris", "Glass": "glass", "Thyroid": "ann_thyroid"}

# Knowles & Minka (2011) Table 1: (mean, sd) per dataset, quantity and method
PAPER = {
    "Iris": {
        "elbo": {"quadratic": (-65, 3.5), "probit": (-37.3, 0.79), "tilted": (-31.2, 2), "adaptive": (-31.2, 2)},
        "pred_ll": {"quadratic": (-0.216, 0.07), "probit": (-0.215, 0.034), "tilted": (-0.201, 0.039),
                    "adaptive": (-0.201, 0.039)},
        "error": {"quadratic": (0.0892, 0.039), "probit": (0.0592, 0.03), "tilted": (0.065, 0.038),
                  "adaptive": (0.0642, 0.037)},
    },
    "Glass": {
        "elbo": {"quadratic": (-319, 5.6), "probit": (-201, 2.6), "tilted": (-193, 5.4), "adaptive": (-193, 3.9)},
        "pred_ll": {"quadratic": (-0.58, 0.12), "probit": (-0.503, 0.095), "tilted": (-0.531, 0.1),
                    "adaptive": (-0.542, 0.11)},
        "error": {"quadratic": (0.197, 0.032), "probit": (0.195, 0.035), "tilted": (0.200, 0.032),
                  "adaptive": (0.200, 0.032)},
    },
    "Thyroid": {
        "elbo": {"quadratic": (-1814, 43), "probit": (-840, 18), "tilted": (-916, 31), "adaptive": (-909, 30)},
        "pred_ll": {"quadratic": (-0.114, 0.019), "probit": (-0.0793, 0.014), "tilted": (-0.0753, 0.008),
                    "adaptive": (-0.0916, 0.010)},
        "error": {"quadratic": (0.0241, 0.0026), "probit": (0.0276, 0.0028), "tilted": (0.0226, 0.0023),
                  "adaptive": (0.0225, 0.0024)},
    },
}
QUANTITIES = {"elbo": "marginal likelihood (ELBO)", "pred_ll": "test predictive log lik", "error": "test error"}


def load(folder: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Inputs (N, D) and labels 0..K−1 (sorted class names, numerically when they are numbers)."""
    X = np.loadtxt(DATA / folder / "X.csv", delimiter=",", skiprows=1)
    with open(DATA / folder / "y.csv", newline="") as f:
        raw = [row[0].strip() for row in csv.reader(f)][1:]
    names = sorted(set(raw), key=lambda c: (float(c), c) if c.replace(".", "", 1).isdigit() else (np.inf, c))
    lookup = {c: i for i, c in enumerate(names)}
    return X, np.array([lookup[c] for c in raw]), len(names)


def standardise(X_train: np.ndarray, X_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mu, sd = X_train.mean(0), X_train.std(0)
    sd = np.where(sd > 0, sd, 1.0)  # a constant input column stays constant (0)
    return (X_train - mu) / sd, (X_test - mu) / sd


def _algorithm(method: str):
    return fg.NCVMP()  # adaptive backtracking (the default) for every method


def fit_split(X: np.ndarray, y: np.ndarray, K: int, train: np.ndarray, test: np.ndarray, method: str,
              max_iter: int, pred_seed: int) -> dict:
    Xtr, Xte = standardise(X[train], X[test])
    t0 = time.perf_counter()
    r = models.softmax_regression(Xtr, y[train], K, method=method, algorithm=_algorithm(method),
                                  max_iter=max_iter, tol=1e-7)
    p = models.softmax_predictive(r, Xte, n_samples=2000, seed=pred_seed)
    p_true = p[np.arange(len(test)), y[test]]
    return {"elbo": float(r.elbo), "pred_ll": float(np.mean(np.log(np.maximum(p_true, 1e-300)))),
            "error": float(np.mean(np.argmax(p, 1) != y[test])), "n_iter": r.n_iter, "converged": r.converged,
            "kind": r.evidence_kind, "time": time.perf_counter() - t0, "notes": list(r.notes),
            "n_zero_prob": int(np.sum(p_true <= 0))}


def _fmt(m: float, s: float, q: str) -> str:
    """'mean ± sd'; the sd is NaN (printed —) for a single split."""
    if q == "elbo":
        return f"{m:9.1f} ± {s:5.1f}" if np.isfinite(s) else f"{m:9.1f} ± {'—':>5}"
    return f"{m:8.4f} ± {s:6.4f}" if np.isfinite(s) else f"{m:8.4f} ± {'—':>6}"


def splits_per_dataset(small: bool, full: bool) -> dict[str, int]:
    """Random 50:50 splits of each dataset at the size asked for (at most one of ``small`` and ``full``)."""
    if small and full:
        raise ValueError("small=True and full=True: choose one size (--small or --full)")
    if small:
        return dict.fromkeys(DATASETS, 2)
    return dict.fromkeys(DATASETS, 16) | ({} if full else {"Thyroid": 1})


def main(small: bool = False, seed: int = 0, full: bool = False) -> dict:
    """Table 1: 16 splits of Iris and Glass and one of Thyroid; 2 of each (Thyroid subsampled) with ``small``,
    16 of each with ``full``."""
    splits = splits_per_dataset(small, full)
    t0 = time.perf_counter()
    max_iter = 1000
    out: dict = {}
    for di, (name, folder) in enumerate(DATASETS.items()):
        X, y, K = load(folder)
        rng = np.random.default_rng([seed, di])
        if small and name == "Thyroid":
            keep = rng.choice(len(y), 600, replace=False)
            X, y = X[keep], y[keep]
        N = len(y)
        runs = {m: [] for m in METHODS}
        n_splits = splits[name]
        for s in range(n_splits):
            perm = rng.permutation(N)
            train, test = np.sort(perm[: N // 2]), np.sort(perm[N // 2:])
            for m in METHODS:
                runs[m].append(fit_split(X, y, K, train, test, m, max_iter, pred_seed=1000 * seed + s))
        out[name] = {"N": N, "D": X.shape[1], "K": K, "runs": runs}
        for m in METHODS:
            for q in ("elbo", "pred_ll", "error", "n_iter", "time"):
                v = np.array([r[q] for r in runs[m]], dtype=float)
                out[name].setdefault(q, {})[m] = (float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else np.nan)
            out[name].setdefault("converged", {})[m] = int(sum(r["converged"] for r in runs[m]))
        t = time.perf_counter() - t0
        print(f"[{name}: N = {N}, D = {X.shape[1]}, K = {K}, {n_splits} splits done, {t:.0f} s elapsed]", flush=True)

    print("\nKnowles & Minka (2011) Table 1: mean ± sd over random 50:50 splits "
          + ", ".join(f"({splits[n]} of {n})" for n in DATASETS)
          + " (ours | paper, 16 splits); the paper's Probit column for reference")
    for name in DATASETS:
        o = out[name]
        print(f"\n{name} (N = {o['N']}, D = {o['D']}, K = {o['K']}; paper: "
              + {"Iris": "N = 150, D = 4", "Glass": "N = 214, D = 8", "Thyroid": "N = 7200, D = 21"}[name] + ")")
        head = f"{'':>28}" + "".join(f"  {m:>19} {'(paper)':>19}" for m in METHODS) + f"  {'probit (paper)':>19}"
        print(head)
        print("-" * len(head))
        for q, label in QUANTITIES.items():
            row = f"{label:>28}"
            for m in METHODS:
                row += f"  {_fmt(*o[q][m], q):>19} {_fmt(*PAPER[name][q][m], q):>19}"
            print(row + f"  {_fmt(*PAPER[name][q]['probit'], q):>19}")
        print(f"{'iterations / converged':>28}" + "".join(
            f"  {o['n_iter'][m][0]:9.0f} it, {o['converged'][m]:2d}/{splits[name]} conv {'':>19}" for m in METHODS))
        print(f"{'seconds per fit':>28}" + "".join(f"  {o['time'][m][0]:19.2f} {'':>19}" for m in METHODS))

    # the paper's claim: the ELBO of the tilted and adaptive fits is higher than the quadratic's on every dataset
    checks = {}
    for name in DATASETS:
        runs = out[name]["runs"]
        per_split = all(runs[m][i]["elbo"] >= runs["quadratic"][i]["elbo"]
                        for m in ("tilted", "adaptive") for i in range(splits[name]))
        checks[name] = per_split
    print("\nthe paper's finding, and whether this run shows it:")
    for name, ok in checks.items():
        o = out[name]
        print(f"  {'yes' if ok else 'no':3s}  {name}: tilted and adaptive ELBO ≥ quadratic's on "
              f"every split (means {o['elbo']['tilted'][0]:.1f}, {o['elbo']['adaptive'][0]:.1f} vs "
              f"{o['elbo']['quadratic'][0]:.1f})")
    kinds = {r["kind"] for name in DATASETS for m in METHODS for r in out[name]["runs"][m]}
    print(f"  evidence kinds reported by the library: {sorted(kinds)}")
    print("  the Glass and Thyroid errors are about twice the paper's for every method, quadratic "
          "included (the paper gives no preprocessing; our Glass has 9 inputs, the paper's 8)")
    pl_worse = {name: out[name]["pred_ll"]["quadratic"][0] < min(out[name]["pred_ll"][m][0]
                                                                  for m in ("tilted", "adaptive"))
                for name in DATASETS}
    print("  the paper: 'the quadratic bound seems to be slightly worse [in predictive performance]'; here the "
          "quadratic's mean predictive log lik is below both NCVMP methods' on: "
          + (", ".join(n for n, w in pl_worse.items() if w) or "none"))
    zero = sum(r["n_zero_prob"] for name in DATASETS for m in METHODS for r in out[name]["runs"][m])
    if zero:
        print(f"  warning: {zero} test points had Monte Carlo predictive probability 0 (floored at 1e-300)")
    notes = sorted({n for name in DATASETS for m in METHODS for r in out[name]["runs"][m] for n in r["notes"]})
    if notes:
        print("  engine notes: " + "; ".join(notes))

    undamped = None
    if full:  # show why NCVMP needs its backtracking here
        X, y, K = load("ann_thyroid")
        perm = np.random.default_rng([seed, 2]).permutation(len(y))
        train = np.sort(perm[: len(y) // 2])
        Xtr, _ = standardise(X[train], X[train])
        r = models.softmax_regression(Xtr, y[train], K, method="tilted", algorithm=fg.NCVMP(backtracking=False),
                                      max_iter=200)
        tr = r.elbo_trace
        undamped = {"n_decreases": int(np.sum(np.diff(tr) < 0)), "min": float(tr.min()), "max": float(tr.max()),
                    "last": float(tr[-1]), "converged": r.converged}
        print(f"  Thyroid split 0, tilted, plain NCVMP (no backtracking), 200 sweeps: the ELBO decreased in "
              f"{undamped['n_decreases']} sweeps, ranged over [{undamped['min']:.0f}, {undamped['max']:.0f}], "
              f"ended at {undamped['last']:.0f} (converged: {undamped['converged']})")

    elapsed = time.perf_counter() - t0
    print(f"\nruntime {elapsed:.1f} s")
    summary = {name: {q: out[name][q] for q in ("elbo", "pred_ll", "error", "n_iter", "time", "converged")}
               | {"N": out[name]["N"], "D": out[name]["D"], "K": out[name]["K"]} for name in DATASETS}
    return {"results": summary, "runs": {n: out[n]["runs"] for n in DATASETS}, "elbo_checks": checks,
            "pred_ll_quadratic_worst": pl_worse, "undamped_thyroid": undamped, "paper": PAPER,
            "n_splits": splits, "runtime": elapsed}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    which = p.add_mutually_exclusive_group()
    which.add_argument("--small", action="store_true", help="2 splits, Thyroid subsampled to 600 points (the tests')")
    which.add_argument("--full", action="store_true", help="the paper's 16 splits of every dataset")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    main(small=a.small, seed=a.seed, full=a.full)
