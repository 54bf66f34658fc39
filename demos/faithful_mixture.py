"""Old Faithful: a full-covariance Bayesian Gaussian mixture, with K chosen by the evidence.

The 272 eruptions of the Old Faithful geyser (eruption time and waiting time, in minutes; R's
``datasets::faithful``, shipped in ``data/faithful``) are standardised and fitted by
``models.gaussian_mixture(X, K, covariance="full")`` for K = 1..5: π ~ Dirichlet(1), joint
normal–Wishart components (Bishop 2006 §10.2), responsibilities started from a k-means++ seeding,
a few restarts per K.  ``fg.compare`` ranks the fits by their ELBO (a lower bound on the log
evidence; for K = 1 it is exact) and the best K is reported with its components and a figure
(data coloured by MAP component, the posterior predictive density as contours) in ``demos/out/``.

Run ``python -m demos.faithful_mixture [--small]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import factorgraph as fg  # noqa: E402
from factorgraph import models  # noqa: E402

try:
    from ._data import data_dir
except ImportError:  # run as a script: python demos/faithful_mixture.py
    from _data import data_dir

OUT = Path(__file__).resolve().parent / "out"


def load() -> np.ndarray:
    """The (272, 2) table of eruption and waiting times."""
    return np.genfromtxt(data_dir("faithful") / "data.csv", delimiter=",", skip_header=1)


def main(small: bool = False, seed: int = 0) -> dict:
    t0 = time.perf_counter()
    raw = load()
    centre, spread = raw.mean(0), raw.std(0)
    X = (raw - centre) / spread
    Ks = (1, 2, 3) if small else (1, 2, 3, 4, 5)
    restarts = 2 if small else 5
    print(f"Old Faithful: N = {len(X)}, D = {X.shape[1]} (standardised); K in {list(Ks)}, {restarts} restarts each")
    results = {f"K={K}": models.gaussian_mixture(X, K, "full", n_init=restarts, seed=seed) for K in Ks}
    table = fg.compare(results)
    print(table)
    best = table.best()
    r = results[best]
    K = int(best[2:])
    print(f"\nchosen: {best} ({r.n_iter} iterations, converged = {r.converged})")
    pred = models.mixture_predictive(r, "full")
    if K > 1:
        q = r.posterior("theta")
        weights = r.posterior("pi").mean()
        means = q.location * spread + centre
        covs = q.scale / (q.dof - X.shape[1] - 1.0)[:, None, None] * np.outer(spread, spread)  # E[Λ⁻¹]
        order = np.argsort(means[:, 0])
        for j in order:
            sd = np.sqrt(np.diag(covs[j]))
            rho = covs[j][0, 1] / (sd[0] * sd[1])
            print(f"  weight {weights[j]:.3f}: mean eruption {means[j, 0]:.2f} min, waiting {means[j, 1]:.1f} min; "
                  f"sd {sd[0]:.2f}, {sd[1]:.1f}; correlation {rho:+.2f}")
        z_map = r.posterior("z").probs.argmax(-1)
    else:
        weights, means, z_map = np.ones(1), (r.posterior("theta").location * spread + centre), np.zeros(len(X), int)
    avg_lpd = float(pred.logpdf(X).mean() - np.log(spread).sum())  # per point, in the original units
    print(f"mean log predictive density of the data (original units): {avg_lpd:.4f}")

    OUT.mkdir(parents=True, exist_ok=True)
    g0 = np.linspace(raw[:, 0].min() - 0.5, raw[:, 0].max() + 0.5, 120)
    g1 = np.linspace(raw[:, 1].min() - 5, raw[:, 1].max() + 5, 120)
    G0, G1 = np.meshgrid(g0, g1)
    grid = (np.stack([G0.ravel(), G1.ravel()], -1) - centre) / spread
    dens = pred.pdf(grid).reshape(G0.shape)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    axes[0].contour(G0, G1, dens, levels=12, cmap="Greys")
    axes[0].scatter(raw[:, 0], raw[:, 1], c=z_map, s=12, cmap="tab10")
    axes[0].set(xlabel="eruption time (min)", ylabel="waiting time (min)", title=f"{best}: predictive density")
    names = list(results)
    elbos = [results[n].elbo for n in names]
    axes[1].plot(list(Ks), elbos, "o-", color="C0")
    axes[1].plot([K], [r.elbo], "o", color="C3", markersize=10, label=f"chosen: {best}")
    axes[1].set(xlabel="number of components K", ylabel="ELBO (log evidence bound)", title="model choice by evidence",
                xticks=list(Ks))
    axes[1].legend()
    fig.tight_layout()
    path = OUT / "faithful_mixture.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"figure: {path}  ({time.perf_counter() - t0:.1f} s)")
    return {"best": best, "K": K, "elbo": {n: results[n].elbo for n in names}, "weights": weights, "means": means,
            "traces": {n: results[n].elbo_trace for n in names}, "avg_lpd": avg_lpd, "figure": path}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="a small, fast run")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    main(small=a.small, seed=a.seed)
