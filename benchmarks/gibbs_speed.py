"""Cost of one Gibbs draw relative to one VMP sweep, on the varying-intercept model of ``hierarchical_speed``:

    y_n ~ N(a[g_n], τ⁻¹),  a_g ~ N(μ, τ_a⁻¹),  μ ~ N(0, 100),  τ_a, τ ~ Gam(1, 1)

(and, with ``--variant slopes``, varying slopes a[g] + b[g]·x).  A Gibbs sweep draws μ, τ_a, the G intercepts
(one vectorised draw) and τ from their full conditionals, which the engine forms from the same messages a VMP
sweep computes; a VMP sweep also evaluates the ELBO.  Both are timed in the same run: the VMP sweep as the
median interval between sweeps (``SweepTimer``), the Gibbs draw as the chains' wall time over their sweeps.
The script prints both and their ratio, and the effective sample size per second of the slowest-mixing scalar
(ArviZ bulk ESS), which is what a draw is worth.  Default N = 20 000 rows in G = 200 groups runs in well under a
minute; ``--N`` and ``--G`` change the sizes, and ``--big`` runs N = 10⁶ rows in G = 10⁴ groups (100 draws after 20
of burn-in per chain: a few minutes).

``--eight-schools`` measures instead the effective draws per second of the eight schools (half-Cauchy(0, 5) on τ,
τ drawn by slice sampling in log τ) in both parametrisations: the bulk ESS of the slowest-mixing scalar (τ) over
the sampling time, and NUTS's (PyMC, non-centred, 4 chains of 1000 draws after 1000 of tuning) in the same run
when PyMC is installed; otherwise it says so.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

import factorgraph as fg

from .hierarchical_speed import build
from .timing import SweepTimer


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N", type=int, default=20_000)
    ap.add_argument("--G", type=int, default=200)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--burn", type=int, default=200)
    ap.add_argument("--variant", choices=("intercepts", "slopes"), default="intercepts")
    ap.add_argument("--big", action="store_true", help="N = 10^6 rows in G = 10^4 groups, 100 draws after 20")
    ap.add_argument("--eight-schools", action="store_true", help="effective draws per second on the eight schools")
    args = ap.parse_args(argv)
    if args.eight_schools:
        return eight_schools(args.draws, args.chains)
    if args.big:
        args.N, args.G, args.draws, args.burn = 1_000_000, 10_000, 100, 20
    m, _ = build(args.N, args.G, variant=args.variant)
    timer = SweepTimer()
    fit = fg.infer(m, max_iter=50, tol=None, param_tol=None, callbacks=[timer], progress=False)
    vmp = timer.per_iter()
    sampler = fg.Gibbs(draws=args.draws, burn=args.burn, chains=args.chains, seed=0)
    t0 = time.perf_counter()
    with warnings.catch_warnings():  # a short run's mixing warning: the ESS is printed below
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        gibbs = fg.infer(m, algorithm=sampler, progress=False)
    wall = time.perf_counter() - t0
    sweeps = args.chains * (sampler.burn + sampler.draws)
    per_draw = gibbs.time / sweeps
    d = gibbs.diagnostics()
    worst = float(d["ess_bulk"].min())
    agree = fg.agreement(fit, gibbs)
    print(f"varying {args.variant}: N = {args.N}, G = {args.G}; {args.chains} chains × {sampler.burn} + "
          f"{sampler.draws} sweeps")
    print(f"VMP sweep (ELBO included): {1e3 * vmp:.3f} ms")
    print(f"Gibbs draw (one sweep):    {1e3 * per_draw:.3f} ms  = {per_draw / vmp:.2f} VMP sweeps")
    print(f"Gibbs run: {wall:.2f} s in fg.infer ({gibbs.time:.2f} s sampling, {gibbs.compile_time:.2f} s compiling, "
          "the rest: importing ArviZ and its diagnostics)")
    print(f"lowest bulk ESS {worst:.0f} ({d['ess_bulk'].idxmin()}): {worst / gibbs.time:.0f} effective draws per "
          f"second; largest R-hat {d['r_hat'].max():.4f}")
    print(f"VMP vs Gibbs: largest |Δmean|/sd {agree['z'].max():.3f}, sd ratio of mu {agree.loc['mu', 'sd_ratio']:.3f}, "
          f"of tau_a {agree.loc['tau_a', 'sd_ratio']:.3f}")
    return {"vmp_sweep": vmp, "gibbs_draw": per_draw, "ratio": per_draw / vmp, "min_ess": worst}


def _eight_schools_models() -> dict[str, fg.Model]:
    root = Path(__file__).resolve().parents[1] / "data" / "eight_schools"
    rows = [r.split(",") for r in (root / "data.csv").read_text().splitlines()[1:] if r.strip()]
    y, s = np.array([float(r[1]) for r in rows]), np.array([float(r[2]) for r in rows])
    models = {}
    for form in ("centred", "non-centred"):
        with fg.Model(f"eight schools, {form}") as m:
            j = fg.plate("school", len(y))
            mu = fg.gaussian("mu", 0.0, sd=5.0)
            tau = fg.half_cauchy("tau", scale=5.0)
            if form == "centred":
                theta = fg.gaussian("theta", mean=mu, sd=tau, plates=[j])
            else:
                theta = mu + tau * fg.gaussian("eta", 0.0, sd=1.0, plates=[j])
            fg.gaussian("y", mean=theta, sd=s, plates=[j], observed=y)
        models[form] = m
    return models


def _nuts(chains: int) -> float | None:
    """NUTS's (PyMC) ESS of τ per second of sampling on the non-centred eight schools, or None without PyMC."""
    try:
        import pymc as pm
    except ImportError:
        return None
    import arviz as az
    root = Path(__file__).resolve().parents[1] / "data" / "eight_schools"
    rows = [r.split(",") for r in (root / "data.csv").read_text().splitlines()[1:] if r.strip()]
    y, s = np.array([float(r[1]) for r in rows]), np.array([float(r[2]) for r in rows])
    with pm.Model():
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        eta = pm.Normal("eta", 0.0, 1.0, shape=len(y))
        pm.Normal("y", mu + tau * eta, s, observed=y)
        t0 = time.perf_counter()
        idata = pm.sample(1000, tune=1000, chains=chains, cores=1, random_seed=0, progressbar=False)
        seconds = time.perf_counter() - t0
    return float(az.ess(idata, var_names=["tau"], method="bulk")["tau"]) / seconds


def eight_schools(draws: int, chains: int) -> dict[str, float]:
    """Effective draws of τ per second of Gibbs sampling in both parametrisations, and NUTS's when PyMC is here."""
    out = {}
    for form, m in _eight_schools_models().items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fg.ConvergenceWarning)
            r = fg.infer(m, algorithm=fg.Gibbs(draws=draws, burn=200, chains=chains, seed=0), progress=False)
        d = r.diagnostics()
        ess = float(d.loc["tau", "ess_bulk"])
        out[form] = ess / r.time
        print(f"eight schools, {form}: Gibbs {chains} × {200 + draws} sweeps in {r.time:.2f} s "
              f"({1e3 * r.time / (chains * (200 + draws)):.3f} ms a sweep); bulk ESS of tau {ess:.0f} "
              f"(lowest of all scalars {d['ess_bulk'].min():.0f}): {out[form]:.0f} effective draws of tau per second")
    nuts = _nuts(chains)
    if nuts is None:
        ref = json.loads((Path(__file__).resolve().parents[1] / "data/eight_schools/reference.json").read_text())
        print(f"NUTS: PyMC is not installed, so NUTS was not timed in this run (the reference file's NUTS run, "
              f"{ref['nuts']['draws']} draws in {ref['nuts']['seconds']:.0f} s, was made on another occasion and is "
              "not comparable)")
    else:
        out["nuts"] = nuts
        print(f"NUTS (PyMC, non-centred): {nuts:.0f} effective draws of tau per second")
    return out


if __name__ == "__main__":
    main()
