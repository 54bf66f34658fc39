"""Multiclass (softmax) logistic regression: Gianniotis, "Mixed Variational Inference", Tables V–VI (§V-D).

Model: y_n ~ Categorical(softmax(W φ_n)), the K class weight vectors w_k ~ N(0, α⁻¹I), with the class-plated
weight matrix W handed to a global handler as one jointly Gaussian block of K·D weights:

    with fg.Model() as m:
        n, k = fg.plate("n", N), fg.plate("k", K)
        W = fg.mv_gaussian("W", mean=0.0, precision=α, plates=[k], dim=D)
        fg.categorical_softmax("y", logits=fg.inner(Φ, W, plates=[n]), over=k, observed=labels)
    r = fg.infer(m, handlers={"W": h}, max_iter=1)   # W is the only latent variable: one block fit

h ∈ {``fg.Laplace()``, ``fg.MVI("mean" | "eig" | "lr", n_samples=1000, seed)``, ``fg.VIDiag(...)``}.  The joint
q(W) is ``r.joint["W"]`` (a K·D Gaussian, class-major); ``models.softmax_predictive`` would use the per-class
marginals only, so the predictive is computed here by sampling the joint q:

    LPD (eq. 13) = log (1/S′) Σ_s Π_n softmax(W_s φ_n)_{y_n},   W_s ~ q(W), S′ = 10⁴ (2000 in small mode),

a total over the test set as in the paper's Table V; the error is that of the label with the largest
Monte Carlo predictive probability (1/S′) Σ_s softmax(W_s φ_n).

Features: φ_n = [standardised x_n, 1] (standardised column-wise with the training mean and sd, as the paper
standardises its data; the ones column is the bias, since the logits must be exactly ``fg.inner(Φ, W)``) and
α = 1, i.e. the prior N(0, I).  **The paper uses RBF features** (θ initialised as in its §V-C and optimised
inside each objective), so our numbers are not on the paper's scale; the comparison between the methods is
the point.  Splits: seeded random 70/30 subsamples as in the paper (N_train = ⌈0.7 N⌉, which reproduces the
paper's N column; its N_test for Vehicle, 293, does not add up to the 846 points: ours is 253), but only
3 per dataset at full size instead of 100 (MVI on the 64–76-dimensional blocks of Ecoli and Vehicle takes
minutes per fit here) and 1 per dataset on Iris, Wine and Soybean in small mode.  Labels are the sorted
class names; Crabs has K = 4 (species × sex), as in the paper.  VI-diag starts from diag(Σ_LA) only (the
paper reports the better of two initialisations).

Run ``python demos/mvi_table5.py [--small] [--seed S] [--splits N]``; the figure goes to ``demos/out/``.
"""

from __future__ import annotations

import os

# the fits are many small matrix products: threaded BLAS only adds contention on a shared machine
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy.special import log_softmax, logsumexp  # noqa: E402

import factorgraph as fg  # noqa: E402

try:  # imported as demos.<name> (tests) or run as a script
    from ._data import DATA  # noqa: E402
except ImportError:
    from _data import DATA  # noqa: E402
OUT = Path(__file__).resolve().parent / "out"
METHODS = ("laplace", "mean", "eig", "lr", "diag")
LABELS = {"laplace": "Laplace", "mean": "MVI-μ", "eig": "MVI-eig", "lr": "MVI-lr", "diag": "VI-diag"}
# name: (folder, K, Q, N_train, N_test) as in the paper's Table V
DATASETS = {
    "Ecoli": ("ecoli", 8, 7, 236, 100),
    "Crabs": ("crabs", 4, 5, 140, 60),
    "Iris": ("iris", 3, 4, 105, 45),
    "Soybean": ("soybean_small", 4, 35, 33, 14),
    "Wine": ("wine", 3, 13, 125, 53),
    "Glass": ("glass", 6, 9, 150, 64),
    "Vehicle": ("vehicle", 4, 18, 593, 293),
    "Balance": ("balance_scale", 3, 4, 438, 187),
}
SMALL = ("Iris", "Wine", "Soybean")
# Table V (median test LPD) and Table VI (median test error %), columns Laplace, MVI-μ, MVI-eig, MVI-lr, VI-diag
PAPER_LPD = {
    "Ecoli": (-50.32, -48.80, -49.31, -48.52, -51.39),
    "Crabs": (-64.59, -64.11, -64.28, -64.10, -68.92),
    "Iris": (-9.06, -7.53, -6.42, -7.46, -8.17),
    "Soybean": (-4.10, -2.35, -0.66, -2.36, -1.67),
    "Wine": (-5.72, -4.01, -3.33, -3.94, -4.66),
    "Glass": (-61.35, -60.39, -59.79, -60.44, -76.26),
    "Vehicle": (-159.783, -158.39, -158.60, -159.15, -174.725),
    "Balance": (-23.5734, -22.7321, -23.2197, -23.078, -31.587),
}
PAPER_ERR = {
    "Ecoli": (17.22, 16.75, 17.23, 16.73, 17.87),
    "Crabs": (55.75, 54.98, 55.10, 55.00, 58.96),
    "Iris": (9.24, 7.57, 7.86, 7.58, 9.76),
    "Soybean": (13.12, 4.83, 3.85, 4.86, 9.33),
    "Wine": (4.97, 3.11, 3.31, 3.14, 4.72),
    "Glass": (42.93, 41.14, 39.79, 41.14, 53.01),
    "Vehicle": (32.60, 32.15, 32.34, 32.22, 34.61),
    "Balance": (6.56, 6.07, 6.27, 6.25, 8.06),
}


def load(folder: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Inputs (N, Q) and labels 0..K−1 (the sorted class names)."""
    X = np.loadtxt(DATA / folder / "X.csv", delimiter=",", skiprows=1, ndmin=2)
    with open(DATA / folder / "y.csv", newline="") as f:
        raw = [row[0].strip() for row in csv.reader(f)][1:]
    names = sorted(set(raw))
    lookup = {c: i for i, c in enumerate(names)}
    return X, np.array([lookup[c] for c in raw]), names


def standardise(X_train: np.ndarray, X_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mu, sd = X_train.mean(0), X_train.std(0)
    sd = np.where(sd > 0, sd, 1.0)  # a column constant on the training set stays constant (0)
    return (X_train - mu) / sd, (X_test - mu) / sd


def softmax_model(Phi: np.ndarray, y: np.ndarray, K: int, alpha: float = 1.0) -> fg.Model:
    with fg.Model("multiclass-logistic") as m:
        n, k = fg.plate("n", Phi.shape[0]), fg.plate("k", K)
        W = fg.mv_gaussian("W", mean=0.0, precision=alpha, plates=[k], dim=Phi.shape[1])
        fg.categorical_softmax("y", logits=fg.inner(Phi, W, plates=[n]), over=k, observed=y)
    return m


def _handler(name: str, n_samples: int, seed: int):
    if name == "laplace":
        return fg.Laplace()
    if name == "diag":
        return fg.VIDiag(n_samples=n_samples, seed=seed)
    return fg.MVI(name, n_samples=n_samples, seed=seed)


def joint_predictive(result: fg.Result, Phi: np.ndarray, y: np.ndarray, K: int, n_samples: int,
                     seed: int, chunk: int = 1000) -> tuple[float, np.ndarray]:
    """Eq. (13) and the predictive probabilities (N, K), by sampling the joint q(W) (class-major K·D)."""
    q = result.joint["W"]
    D = Phi.shape[1]
    Ws = q.sample(n_samples, np.random.default_rng(seed)).reshape(n_samples, K, D)
    total = np.zeros(n_samples)
    probs = np.zeros((len(y), K))
    rows = np.arange(len(y))
    for i in range(0, n_samples, chunk):
        ls = log_softmax(np.einsum("skd,nd->snk", Ws[i:i + chunk], Phi), axis=-1)  # (s, N, K)
        total[i:i + chunk] = ls[:, rows, y].sum(1)
        probs += np.exp(ls).sum(0)
    return float(logsumexp(total) - np.log(n_samples)), probs / n_samples


def run_split(X, y, K, train, test, n_samples, n_pred, seed) -> dict:
    Ztr, Zte = standardise(X[train], X[test])
    Phi, Phit = np.c_[Ztr, np.ones(len(train))], np.c_[Zte, np.ones(len(test))]
    out = {}
    for name in METHODS:
        t0 = time.perf_counter()
        res = fg.infer(softmax_model(Phi, y[train], K), handlers={"W": _handler(name, n_samples, seed)}, max_iter=1)
        fit_time = time.perf_counter() - t0
        lpd, probs = joint_predictive(res, Phit, y[test], K, n_pred, seed + 1)
        out[name] = {"lpd": lpd, "err": float(np.mean(probs.argmax(1) != y[test]) * 100.0),
                     "elbo": float(res.elbo), "time": fit_time}
    return out


def main(small: bool = False, seed: int = 0, n_splits: int | None = None) -> dict:
    t0 = time.perf_counter()
    n_splits = n_splits or (1 if small else 3)
    n_samples = 1000
    n_pred = 2000 if small else 10_000
    names = SMALL if small else tuple(DATASETS)
    results: dict = {}
    for di, name in enumerate(names):
        folder, K_paper, Q, _, _ = DATASETS[name]
        X, y, classes = load(folder)
        K, N = len(classes), len(y)
        if K != K_paper or X.shape[1] != Q:
            raise RuntimeError(f"{name}: K = {K}, Q = {X.shape[1]}; the paper has K = {K_paper}, Q = {Q}")
        n_train = math.ceil(0.7 * N)
        rng = np.random.default_rng([seed, di])
        runs = []
        for _ in range(n_splits):
            perm = rng.permutation(N)
            runs.append(run_split(X, y, K, np.sort(perm[:n_train]), np.sort(perm[n_train:]), n_samples, n_pred, seed))
        med = {q: {k: float(np.median([r[k][q] for r in runs])) for k in METHODS}
               for q in ("lpd", "err", "elbo", "time")}
        results[name] = {"runs": runs, "median": med, "K": K, "N_train": n_train, "N_test": N - n_train}
        print(f"[{name}: K = {K}, D = {X.shape[1] + 1}, {n_splits} split(s), "
              f"{time.perf_counter() - t0:.0f} s elapsed]", flush=True)

    print(f"\nGianniotis, MVI, Tables V–VI: multiclass logistic regression (linear features, joint q(W)), medians over "
          f"{n_splits} random 70/30 split(s) (ours | paper, 100 splits)")
    head = f"{'dataset':>9} {'K':>2} {'N':>4} {'Ntest':>5}" + "".join(f"{LABELS[k]:>20}" for k in METHODS)
    for q, title, paper in (("lpd", "median test LPD (eq. 13, total over the test set)", PAPER_LPD),
                            ("err", "median test error %", PAPER_ERR)):
        print(f"\n{title}")
        print(head)
        print("-" * len(head))
        for name in DATASETS:
            _, K, _, n_tr, n_te = DATASETS[name]
            if name in results:
                n_tr, n_te = results[name]["N_train"], results[name]["N_test"]
            row = f"{name:>9} {K:>2} {n_tr:>4} {n_te:>5}"
            for j, k in enumerate(METHODS):
                ours = f"{results[name]['median'][q][k]:9.2f}" if name in results else f"{'—':>9}"
                row += f"{ours:>10}|{paper[name][j]:<9.2f}"
            print(row)
    print(f"\n{'':>21}" + "".join(f"{LABELS[k]:>20}" for k in METHODS))
    print(f"{'median seconds per fit':>21}" + "".join(
        f"{np.median([results[n]['median']['time'][k] for n in results]):>20.2f}" for k in METHODS))

    mvi_beats_la = {n: max(results[n]["median"]["lpd"][k] for k in ("mean", "eig", "lr"))
                    > results[n]["median"]["lpd"]["laplace"] for n in results}
    mvi_beats_diag = {n: max(results[n]["median"]["lpd"][k] for k in ("mean", "eig", "lr"))
                      > results[n]["median"]["lpd"]["diag"] for n in results}
    best = {n: LABELS[max(METHODS, key=lambda k, n=n: results[n]["median"]["lpd"][k])] for n in results}
    paper_best = {n: LABELS[METHODS[int(np.argmax(PAPER_LPD[n]))]] for n in results}
    print("\nbest median LPD per dataset (ours / paper): " + "; ".join(f"{n}: {best[n]} / {paper_best[n]}"
                                                                       for n in results))
    print(f"  the best MVI variant's median LPD is above Laplace's on {sum(mvi_beats_la.values())}/"
          f"{len(results)} datasets and above VI-diag's on {sum(mvi_beats_diag.values())}/{len(results)} "
          f"(paper: on all 8, both)")
    print("differences from the paper: linear features on standardised inputs with a bias column and prior N(0, I) "
          f"(the paper: RBF features, θ optimised); {n_splits} random split(s) per dataset instead of 100; "
          "VI-diag from diag(Σ_LA) only")

    OUT.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.2
    xs = np.arange(len(results))
    for j, k in enumerate(("mean", "eig", "lr", "diag")):
        d = [(results[n]["median"]["lpd"][k] - results[n]["median"]["lpd"]["laplace"]) / results[n]["N_test"]
             for n in results]
        ax.bar(xs + (j - 1.5) * width, d, width, label=LABELS[k])
    ax.axhline(0.0, color="k", lw=0.8)
    ax.set_xticks(xs, list(results))
    ax.set_ylabel("(median LPD − Laplace's) / N_test")
    ax.set_title("Multiclass logistic regression (joint q(W)): median test LPD relative to Laplace")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = OUT / ("mvi_table5_small.png" if small else "mvi_table5.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    elapsed = time.perf_counter() - t0
    print(f"\nfigure: {path}\ntotal time {elapsed:.1f} s")
    return {"results": results, "mvi_beats_laplace": mvi_beats_la, "mvi_beats_diag": mvi_beats_diag, "best": best,
            "figure": str(path), "time": elapsed, "n_splits": n_splits}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help="Iris, Wine, Soybean, one split each (for tests)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--splits", type=int, default=None, help="random splits per dataset (default 3; small 1)")
    args = parser.parse_args()
    main(small=args.small, seed=args.seed, n_splits=args.splits)
