"""Radon in Minnesota homes: complete, no and partial pooling across counties (Gelman & Hill 2007, ch. 12-13).

919 houses in 85 counties; y = log radon, x = floor of the measurement (0 basement, 1 first floor),
county sizes from 1 to 116 houses.  Five regressions, all by variational message passing:

    complete pooling        y ~ N(α + βx, σ²)                     (one regression for the state)
    no pooling              y ~ N(α_j + βx, σ²), α_j ~ N(0, 100)  (each county on its own)
    partial pooling         y ~ N(α_j + βx, σ²), α_j ~ N(μ, τ⁻¹)  (varying intercepts)
    + county uranium        the same with the county's log soil uranium as a predictor
    varying slopes          y ~ N(α_j + β_j x, σ²), α_j ~ N(μ_α, τ_α⁻¹), β_j ~ N(μ_β, τ_β⁻¹)

``fg.compare`` ranks them by their evidence (the ELBO, a lower bound on log p(y)).  The partial-pooling
fits are written with ``models.hierarchical_regression``; the varying-slopes model is also built by hand
to show the indexing it rests on: ``mean=a[county] + b[county] * floor``.  Posteriors are printed for the
eight counties of Gelman & Hill's Figure 12.4; the figure (county intercepts against county size, no
pooling vs partial pooling) goes to ``demos/out/radon_hierarchical.png``.

Run ``python demos/radon_hierarchical.py [--small]`` (``--small``: the 40 smallest-numbered counties).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import factorgraph as fg  # noqa: E402
from factorgraph import models  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).resolve().parent / "out"
SHOWN = ["LAC QUI PARLE", "AITKIN", "KOOCHICHING", "DOUGLAS", "CLAY", "STEARNS", "RAMSEY", "ST LOUIS"]


def load(small: bool = False) -> dict:
    """The radon table (data/radon/data.csv): county labels 0..J−1, floor, log radon, county uranium."""
    with open(ROOT / "data" / "radon" / "data.csv") as fh:
        rows = list(csv.DictReader(fh))
    county = np.array([int(r["county_idx"]) for r in rows])
    keep = county < 40 if small else np.ones(len(rows), bool)
    names = {}
    uranium = {}
    for r in rows:
        names[int(r["county_idx"])] = r["county"]
        uranium[int(r["county_idx"])] = float(r["log_uranium"])
    J = int(county[keep].max()) + 1
    return {"county": county[keep], "floor": np.array([float(r["floor"]) for r in rows])[keep],
            "y": np.array([float(r["log_radon"]) for r in rows])[keep],
            "names": [names[j] for j in range(J)], "uranium": np.array([uranium[j] for j in range(J)])}


def varying_slopes_by_hand(d: dict) -> fg.Model:
    """The varying-intercept, varying-slope model written out with the builder API."""
    county, x, y = d["county"], d["floor"], d["y"]
    with fg.Model("varying slopes (by hand)") as m:
        n, c = fg.plate("n", len(y)), fg.plate("county", len(d["names"]))
        mu_a = fg.gaussian("mu_a", mean=0.0, precision=1e-2)
        tau_a = fg.gamma("tau_a", shape=1.0, rate=1.0)
        mu_b = fg.gaussian("mu_b", mean=0.0, precision=1e-2)
        tau_b = fg.gamma("tau_b", shape=1.0, rate=1.0)
        a = fg.gaussian("a", mean=mu_a, precision=tau_a, plates=[c])
        b = fg.gaussian("b", mean=mu_b, precision=tau_b, plates=[c])
        tau = fg.gamma("tau", shape=1.0, rate=1.0)
        fg.gaussian("y", mean=a[county] + b[county] * x, precision=tau, plates=[n], observed=y)
    return m


def main(small: bool = False) -> dict:
    d = load(small)
    county, x, y, J = d["county"], d["floor"], d["y"], len(d["names"])
    X = x[:, None]
    fits = {
        "complete pooling": models.hierarchical_regression(X, y, county, varying=(), n_groups=J),
        "no pooling": models.hierarchical_regression(X, y, county, varying=("intercept",), pooling="none",
                                                     n_groups=J),
        "partial pooling": models.hierarchical_regression(X, y, county, varying=("intercept",), n_groups=J),
        "partial + uranium": models.hierarchical_regression(np.c_[x, d["uranium"][county]], y, county,
                                                            varying=("intercept",), n_groups=J),
        "varying slopes": models.hierarchical_regression(X, y, county, varying=("intercept", "slope"),
                                                         n_groups=J),
    }
    by_hand = fg.infer(varying_slopes_by_hand(d), max_iter=1000)
    print(f"Radon: {len(y)} houses in {J} counties (county sizes {np.bincount(county).min()}-"
          f"{np.bincount(county).max()})\n")
    for name, r in fits.items():
        print(f"  {name:<18} {r.n_iter:4d} iterations, {'converged' if r.converged else 'not converged'}, "
              f"{1e3 * r.time:.0f} ms")
    print("\nEvidence (ELBO):")
    comparison = fg.compare(fits)
    print(comparison)
    print(f"\nvarying slopes written by hand (a[county] + b[county] * floor): ELBO {by_hand.elbo:.6f} "
          f"(canned model: {fits['varying slopes'].elbo:.6f})")

    cp, npool, pp, vs = (fits[k] for k in ("complete pooling", "no pooling", "partial pooling", "varying slopes"))
    n_j = np.bincount(county, minlength=J)
    raw = np.bincount(county, weights=y, minlength=J) / np.maximum(n_j, 1)
    alpha = float(cp.posterior("intercept").mean())
    print(f"\nfloor effect β: complete pooling {cp.posterior('slope').mean()[0]:.3f}, partial pooling "
          f"{pp.posterior('slope').mean()[0]:.3f} ± {np.sqrt(pp.posterior('slope').var()[0]):.3f}; "
          f"between-county sd of intercepts 1/√E[τ] = "
          f"{1 / np.sqrt(pp.posterior('intercept_precision').mean()):.3f}")
    print("\nCounty intercepts α_j (mean ± sd) and, for varying slopes, β_j:")
    head = f"{'county':<14} {'n_j':>4} {'raw mean':>9} {'complete':>9} {'no pooling':>14} {'partial':>14} " \
           f"{'vs α_j':>14} {'vs β_j':>14}"
    print(head + "\n" + "-" * len(head))
    shown = [d["names"].index(s) for s in SHOWN if s in d["names"]]
    qa_n, qa_p = npool.posterior("intercept"), pp.posterior("intercept")
    qa_v, qb_v = vs.posterior("intercept"), vs.posterior("slope")
    for j in shown:
        print(f"{d['names'][j]:<14} {n_j[j]:4d} {raw[j]:9.3f} {alpha:9.3f} "
              f"{qa_n.mean()[j]:7.3f} ± {np.sqrt(qa_n.var()[j]):.3f} "
              f"{qa_p.mean()[j]:7.3f} ± {np.sqrt(qa_p.var()[j]):.3f} "
              f"{qa_v.mean()[j]:7.3f} ± {np.sqrt(qa_v.var()[j]):.3f} "
              f"{qb_v.mean()[j, 0]:7.3f} ± {np.sqrt(qb_v.var()[j, 0]):.3f}")
    # shrinkage: partial-pooling intercepts sit between the no-pooling ones and the state mean, more so for small n_j
    mu = float(pp.posterior("intercept_mean").mean())
    shrink = 1.0 - (qa_p.mean() - mu) / np.where(np.abs(qa_n.mean() - mu) > 1e-9, qa_n.mean() - mu, np.nan)

    OUT.mkdir(exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    jitter = n_j * np.exp(0.05 * np.random.default_rng(0).standard_normal(J))
    for ax, q, title in ((axes[0], qa_n, "no pooling"), (axes[1], qa_p, "partial pooling")):
        ax.errorbar(jitter, q.mean(), yerr=np.sqrt(q.var()), fmt="o", ms=3, lw=0.6)
        ax.axhline(mu, color="k", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_xlabel("houses in the county (log scale)")
        ax.set_title(f"{title}: county intercepts α_j ± 1 sd")
    axes[0].set_ylim(-1.5, 3.5)
    axes[0].set_ylabel("intercept (log radon, basement)")
    fig.tight_layout()
    path = OUT / "radon_hierarchical.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"\nfigure: {path.relative_to(ROOT)}")
    return {"evidence": {k: r.elbo for k, r in fits.items()}, "best": comparison.best(),
            "traces": {k: r.elbo_trace for k, r in fits.items()},
            "converged": {k: r.converged for k, r in fits.items()},
            "by_hand_elbo": by_hand.elbo, "n_j": n_j, "shrink": shrink,
            "no_pool_sd": np.sqrt(qa_n.var()), "partial_sd": np.sqrt(qa_p.var())}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="only the first 40 counties")
    main(ap.parse_args().small)
