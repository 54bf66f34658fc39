"""Annual counts of major earthquakes (magnitude ≥ 7), 1900–2006: Poisson hidden Markov models with K = 1…4
states compared by their evidence (Zucchini & MacDonald 2009, the book's running example).

The counts are overdispersed (mean 19.4, variance 51.6), and the years of high and low activity cluster.
A K-state Poisson HMM explains both: z_t is a Markov chain over K activity levels and y_t ~ Poisson(λ_{z_t}).
``models.hmm(y, K, "poisson")`` puts Dirichlet priors on the initial distribution and the rows of the
transition matrix and Gamma priors on the rates, and fits q(z) q(π) q(A) q(λ) by variational message passing,
with q(z) the exact chain posterior given the rest (forward–backward), each K the best of its four starts (the
default ``n_init``).  The evidence bound ranks K; the
figure (demos/out/earthquakes_hmm.png) shows the counts and the posterior mean rate Σ_k q(z_t = k) E[λ_k]
under the best K.  Run ``python demos/earthquakes_hmm.py [--small]`` (``--small``: K = 1…3, no figure).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

import factorgraph as fg
from factorgraph import models

DATA = Path(__file__).resolve().parents[1] / "data" / "earthquakes" / "data.csv"
OUT = Path(__file__).resolve().parent / "out"


def load() -> tuple[np.ndarray, np.ndarray]:
    with open(DATA, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return np.array([int(r["year"]) for r in rows]), np.array([float(r["count"]) for r in rows])


def main(small: bool = False, seed: int = 0) -> dict:
    years, y = load()
    print(f"earthquakes: {len(y)} years {years[0]}–{years[-1]}, mean {y.mean():.2f}, variance {y.var(ddof=1):.2f}")
    results = {}
    for K in range(1, 4 if small else 5):
        r = models.hmm(y, K, "poisson", seed=seed)
        results[f"K={K}"] = r
        lam = np.sort(np.atleast_1d(r.posterior("lam").mean()))
        print(f"K={K}: ELBO {r.elbo:9.3f} ({r.n_iter} iterations{'' if r.converged else ', not converged'}); "
              f"E[λ] = {np.array2string(lam, precision=2)}")
    comparison = fg.compare(results)
    print(comparison)
    best = max(results, key=lambda k: results[k].elbo)
    r = results[best]
    out = {"elbo": {k: v.elbo for k, v in results.items()}, "best": best,
           "traces": {k: v.elbo_trace for k, v in results.items()},
           "rates": {k: np.sort(np.atleast_1d(v.posterior("lam").mean())) for k, v in results.items()}}
    if r.posterior("lam").mean().ndim:
        order = np.argsort(r.posterior("lam").mean())
        A = r.posterior("A").mean()[np.ix_(order, order)]
        print(f"{best}: posterior mean transition matrix (states by increasing rate)\n"
              f"{np.array2string(A, precision=3)}")
        out["transition"] = A
    if not small:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        g = r.posterior("z").mean()[0]
        rate = g @ np.atleast_1d(r.posterior("lam").mean())
        OUT.mkdir(exist_ok=True)
        fig, ax = plt.subplots(figsize=(9, 3.5))
        ax.plot(years, y, "o-", ms=3, lw=0.8, color="0.4", label="major earthquakes")
        ax.plot(years, rate, lw=2, label=f"posterior mean rate ({best})")
        ax.set_xlabel("year")
        ax.set_ylabel("count")
        ax.legend()
        fig.tight_layout()
        fig.savefig(OUT / "earthquakes_hmm.png", dpi=120)
        plt.close(fig)
        from factorgraph import plots

        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        plots.elbo_trace(results, ax=axes[0]).set_title("ELBO per sweep")
        plots.evidence_comparison(comparison, ax=axes[1], relative=True).set_title("log Bayes factor against the best")
        fig.tight_layout()
        fig.savefig(OUT / "earthquakes_hmm_elbo.png", dpi=120)
        plt.close(fig)
        print(f"figures: {OUT / 'earthquakes_hmm.png'}, {OUT / 'earthquakes_hmm_elbo.png'}")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", action="store_true")
    main(small=ap.parse_args().small)
