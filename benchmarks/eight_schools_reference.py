"""Reference posteriors for the eight-schools model, made once with PyMC and stored in
``data/eight_schools/reference.json`` (the demo and the tests read that file, so they need no PyMC).

Model (Rubin 1981; Gelman et al., BDA3 §5.5; posteriordb's ``eight_schools``)::

    μ ~ N(0, 5²),  τ ~ HalfCauchy(0, 5),  θ_j ~ N(μ, τ²),  y_j ~ N(θ_j, σ_j²),  j = 1..8

- **NUTS**: the non-centred form θ_j = μ + τ·η_j, η_j ~ N(0, 1) (the same posterior, without the funnel's
  divergences), 4 chains × 25 000 draws after 2 000 tuning steps, ``target_accept=0.99``, seed 20261123.
  The JSON records the divergences and the largest R-hat.
- **ADVI**: PyMC's mean-field ADVI (``pm.ADVI``) on the centred model, i.e. a factorised Gaussian over
  (μ, log τ, θ_1..θ_8), 100 000 Adam steps (``pm.fit`` defaults otherwise), seed 20261123; means and sds of
  μ, τ and θ_j come from 200 000 draws of the fitted approximation.
- **ADVI, non-centred** (``advi_noncentred``): the same on the non-centred model, a factorised Gaussian over
  (μ, log τ, η_1..η_8), θ_j = μ + τ·η_j computed per draw.

- **ADVI over seeds** (``advi_seeds``): ADVI is stochastic, and one seed's fit is one draw of it.  With
  ``--seeds K`` the script refits ADVI on both parametrisations with seeds SEED+1..SEED+K (the same settings
  as above) and stores each fit's summary and its score against NUTS (the largest |Δmean|/sd over μ, τ and
  the θ_j), so the demo can say where the single-seed fits sit in ADVI's own spread.

Run: ``python -m benchmarks.eight_schools_reference`` (needs the ``bench`` extra; about 25 minutes), or
``python -m benchmarks.eight_schools_reference --only advi_noncentred`` to (re)make one entry of the file, or
``python -m benchmarks.eight_schools_reference --seeds 8`` for the seed study (about 5 minutes per seed).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "eight_schools"
SEED = 20261123


def load():
    rows = [line.split(",") for line in (DATA / "data.csv").read_text().split("\n")[1:] if line.strip()]
    return [r[0] for r in rows], np.array([float(r[1]) for r in rows]), np.array([float(r[2]) for r in rows])


def _summary(mu, tau, theta) -> dict:
    return {"mu": [float(np.mean(mu)), float(np.std(mu))], "tau": [float(np.mean(tau)), float(np.std(tau))],
            "theta": [[float(m), float(s)] for m, s in zip(theta.mean(0), theta.std(0), strict=True)]}


def nuts(y, sigma, draws=25_000, tune=2_000, chains=4):
    import arviz as az
    import pymc as pm

    with pm.Model():
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        eta = pm.Normal("eta", 0.0, 1.0, shape=len(y))
        theta = pm.Deterministic("theta", mu + tau * eta)
        pm.Normal("y", theta, sigma, observed=y)
        idata = pm.sample(draws=draws, tune=tune, chains=chains, cores=2, target_accept=0.99, random_seed=SEED,
                          progressbar=False)
    post = idata.posterior
    mu_s = post["mu"].values.reshape(-1)
    tau_s = post["tau"].values.reshape(-1)
    th_s = post["theta"].values.reshape(-1, len(y))
    out = _summary(mu_s, tau_s, th_s)
    out["divergences"] = int(idata.sample_stats["diverging"].values.sum())
    out["max_rhat"] = float(max(float(az.rhat(idata, var_names=[v])[v].max()) for v in ("mu", "tau", "eta")))
    out["draws"] = int(mu_s.size)
    # E[log τ] and sd(log τ), for comparison with mean-field fits in log τ
    out["log_tau"] = [float(np.mean(np.log(tau_s))), float(np.std(np.log(tau_s)))]
    return out


def advi(y, sigma, steps=100_000, draws=200_000, noncentred=False, seed=SEED):
    import pymc as pm

    with pm.Model():
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        if noncentred:
            eta = pm.Normal("eta", 0.0, 1.0, shape=len(y))
            theta = pm.Deterministic("theta", mu + tau * eta)
        else:
            theta = pm.Normal("theta", mu, tau, shape=len(y))
        pm.Normal("y", theta, sigma, observed=y)
        approx = pm.fit(n=steps, method="advi", random_seed=seed, progressbar=False)
        trace = approx.sample(draws, random_seed=seed)
    post = trace.posterior
    mu_s = post["mu"].values.reshape(-1)
    tau_s = post["tau"].values.reshape(-1)
    th_s = post["theta"].values.reshape(-1, len(y))
    out = _summary(mu_s, tau_s, th_s)
    out["steps"] = steps
    out["log_tau"] = [float(np.mean(np.log(tau_s))), float(np.std(np.log(tau_s)))]
    out["final_elbo_mean_last_1000"] = float(-np.mean(approx.hist[-1000:]))
    return out


def score(fit: dict, nuts: dict) -> float:
    """The largest |mean − NUTS mean| / NUTS sd over μ, τ and the θ_j (the demo's score)."""
    pairs = [(fit["mu"], nuts["mu"]), (fit["tau"], nuts["tau"])] + list(zip(fit["theta"], nuts["theta"], strict=True))
    return max(abs(f[0] - n[0]) / n[1] for f, n in pairs)


def seed_study(y, sigma, k: int) -> None:
    """Refit ADVI on both parametrisations with k further seeds; store the fits and their scores, and print
    the spread of the scores beside the single-seed reference fits'."""
    ref = json.loads((DATA / "reference.json").read_text())
    study = {"seeds": [SEED + i for i in range(1, k + 1)], "centred": [], "noncentred": []}
    for s in study["seeds"]:
        for key, nc in (("centred", False), ("noncentred", True)):
            t0 = time.perf_counter()
            fit = advi(y, sigma, noncentred=nc, seed=s)
            fit["seconds"] = time.perf_counter() - t0
            fit["score"] = score(fit, ref["nuts"])
            study[key].append(fit)
            print(f"seed {s} {key:10} score {fit['score']:.3f}  E[tau] {fit['tau'][0]:.3f}  "
                  f"ELBO(last 1000) {fit['final_elbo_mean_last_1000']:.3f}  {fit['seconds']:.0f} s", flush=True)
    ref["advi_seeds"] = study
    (DATA / "reference.json").write_text(json.dumps(ref, indent=1) + "\n")
    for key, single in (("centred", "advi"), ("noncentred", "advi_noncentred")):
        sc = np.array([f["score"] for f in study[key]])
        print(f"ADVI {key}: scores over {k} seeds min {sc.min():.3f}, median {np.median(sc):.3f}, max {sc.max():.3f}; "
              f"the reference seed's {score(ref[single], ref['nuts']):.3f}")


def main() -> None:
    import argparse
    from importlib.metadata import version

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=["nuts", "advi", "advi_noncentred"],
                        help="remake one entry of the existing reference.json")
    parser.add_argument("--seeds", type=int, help="refit ADVI with this many further seeds (stored as advi_seeds)")
    args = parser.parse_args()
    only = args.only
    schools, y, sigma = load()
    if args.seeds:
        seed_study(y, sigma, args.seeds)
        return
    if only:
        ref = json.loads((DATA / "reference.json").read_text())
        t0 = time.perf_counter()
        ref[only] = nuts(y, sigma) if only == "nuts" else advi(y, sigma, noncentred=only == "advi_noncentred")
        ref[only]["seconds"] = time.perf_counter() - t0
        ref[only]["pymc"] = version("pymc")
        (DATA / "reference.json").write_text(json.dumps(ref, indent=1) + "\n")
        print(json.dumps(ref[only], indent=1))
        return
    t0 = time.perf_counter()
    ref = {"model": "mu ~ N(0, 5^2), tau ~ HalfCauchy(0, 5), theta_j ~ N(mu, tau^2), y_j ~ N(theta_j, sigma_j^2)",
           "schools": schools, "seed": SEED, "pymc": version("pymc"), "pytensor": version("pytensor")}
    ref["nuts"] = nuts(y, sigma)
    ref["nuts"]["seconds"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    ref["advi"] = advi(y, sigma)
    ref["advi"]["seconds"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    ref["advi_noncentred"] = advi(y, sigma, noncentred=True)
    ref["advi_noncentred"]["seconds"] = time.perf_counter() - t2
    (DATA / "reference.json").write_text(json.dumps(ref, indent=1) + "\n")
    print(json.dumps(ref, indent=1))


if __name__ == "__main__":
    main()
