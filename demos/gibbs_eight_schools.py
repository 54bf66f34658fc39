"""Eight schools by Gibbs sampling, against NUTS, and the mean-field fits scored against the Gibbs draws.

    μ ~ N(0, 5²),  τ ~ half-Cauchy(0, 5),  θ_j ~ N(μ, τ²),  y_j ~ N(θ_j, σ_j²),  j = 1..8

``fg.Gibbs`` draws μ and the θ_j (or the η_j of the non-centred form θ_j = μ + τ·η_j) from their Gaussian
conditionals and τ by slice sampling in log τ.  The demo prints

* the posterior mean (sd) of μ, τ and the θ_j by Gibbs sampling in both parametrisations beside NUTS (PyMC,
  100 000 draws, ``data/eight_schools/reference.json``), with each Gibbs mean's distance to NUTS in units of its
  Monte Carlo standard error (sd/√ESS) and τ's effective sample size: the centred chain mixes slowly near τ → 0
  (the funnel), the non-centred one slowly where τ·η_j is pinned by the data;
* ``fg.agreement`` tables of the variational fits against the Gibbs draws of the same parametrisation: the
  centred mean field (NCVMP), the non-centred mean field (VMP) and τ integrated out by ``fg.ScaleQuadrature``;
  each row's z = |Δmean|/sd of the draws and sd ratio (below 1: the fit is too narrow).

Run ``python demos/gibbs_eight_schools.py [--small]`` (``--small``: 300 draws per chain instead of 4000).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np

import factorgraph as fg

try:
    from .eight_schools import DATA, build, build_noncentred, load
except ImportError:  # run as a script: python demos/gibbs_eight_schools.py
    from eight_schools import DATA, build, build_noncentred, load


def gibbs(model: fg.Model, draws: int, seed: int) -> fg.GibbsResult:
    """Four chains of ``draws`` kept sweeps after 500 of burn-in (the run's mixing warning is reported, not raised)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", fg.ConvergenceWarning)
        r = fg.infer(model, algorithm=fg.Gibbs(draws=draws, burn=500, chains=4, seed=seed))
    for w in caught:
        print(f"  ({model.name}) {w.message}")
    return r


def theta_draws(r: fg.GibbsResult) -> np.ndarray:
    """θ_j's draws, (chains, draws, 8): drawn directly (centred) or μ + τ·η_j (non-centred)."""
    d = r.draws
    return d["theta"] if "theta" in d else d["mu"][..., None] + d["tau"][..., None] * d["eta"]


def moments(x: np.ndarray) -> tuple[float, float, float]:
    """Mean, sd and Monte Carlo standard error (sd/√ESS, ArviZ's ESS of the mean) of one scalar's chains."""
    import arviz as az
    return float(x.mean()), float(x.std(ddof=1)), float(x.std(ddof=1) / np.sqrt(float(az.ess(x, method="mean"))))


def main(small: bool = False, seed: int = 0) -> dict:
    schools, y, sigma = load()
    nuts = json.loads((DATA / "reference.json").read_text())["nuts"]
    draws = 300 if small else 4000
    t0 = time.perf_counter()
    g_c = gibbs(build(y, sigma), draws, seed)
    t1 = time.perf_counter()
    g_nc = gibbs(build_noncentred(y, sigma), draws, seed)
    t2 = time.perf_counter()
    print(f"Gibbs: 4 chains x {draws} draws (+500 burn-in): centred {t1 - t0:.1f} s, non-centred {t2 - t1:.1f} s")
    names = ["mu", "tau"] + [f"theta[{s}]" for s in schools]
    ref = [nuts["mu"], nuts["tau"]] + list(nuts["theta"])
    rows = {}
    for label, r in (("centred", g_c), ("non-centred", g_nc)):
        th = theta_draws(r)
        xs = [r.draws["mu"], r.draws["tau"]] + [th[..., j] for j in range(len(schools))]
        rows[label] = [moments(x) for x in xs]
    print("\nPosterior mean (sd) by Gibbs sampling against NUTS; dist = |mean - NUTS mean| / MCSE of the Gibbs mean")
    print(f"{'':10}{'NUTS':>18}{'Gibbs centred':>20}{'dist':>7}{'Gibbs non-centred':>22}{'dist':>7}")
    worst = {}
    for i, n in enumerate(names):
        line = f"{n:10}{ref[i][0]:>10.3f} ({ref[i][1]:5.2f})"
        for label in rows:
            m, s, se = rows[label][i]
            d = abs(m - ref[i][0]) / se
            worst[label] = max(worst.get(label, 0.0), d)
            line += f"{m:>12.3f} ({s:5.2f}){d:>7.2f}"
        print(line)
    ess_tau = {label: float(r.summary().loc["tau", "ess_bulk"]) for label, r in (("centred", g_c),
                                                                                  ("non-centred", g_nc))}
    print(f"largest distance in MC standard errors: centred {worst['centred']:.2f}, non-centred "
          f"{worst['non-centred']:.2f}; bulk ESS of tau: centred {ess_tau['centred']:.0f}, non-centred "
          f"{ess_tau['non-centred']:.0f} of {4 * draws} draws")
    fits = {"centred mean field (NCVMP)": (fg.infer(build(y, sigma), fg.NCVMP(), max_iter=2000), g_c),
            "non-centred mean field (VMP)": (fg.infer(build_noncentred(y, sigma), fg.VMP(), max_iter=2000), g_nc),
            "tau integrated (ScaleQuadrature)": (fg.infer(build_noncentred(y, sigma), fg.VMP(),
                                                          handlers={"tau": fg.ScaleQuadrature()}), g_nc)}
    tables = {}
    for label, (fit, ref_draws) in fits.items():
        table = fg.agreement(fit, ref_draws)
        tables[label] = table
        print(f"\nfg.agreement: {label} against the Gibbs draws of the same parametrisation")
        print(table[["mean", "sd", "mean_ref", "sd_ref", "z", "sd_ratio", "mcse_ref"]].round(3).to_string())
        print(f"  largest z {table['z'].max():.3f} (at {table['z'].idxmax()}), sd ratio of tau "
              f"{table.loc['tau', 'sd_ratio']:.3f}")
    return {"gibbs": g_c, "gibbs_noncentred": g_nc, "moments": rows, "nuts": ref, "names": names,
            "worst_mcse_distance": worst, "ess_tau": ess_tau, "tables": tables}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help="300 draws per chain")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(args.small, args.seed)
