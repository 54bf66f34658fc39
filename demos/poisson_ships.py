"""Ship damage incidents (McCullagh & Nelder 1989 §6.3.2; MASS ``ships``): Poisson regression with exposure,
against an overdispersed alternative, compared by the evidence.

Each of the 40 cells is a ship type (A–E) × construction period (1960–64, 65–69, 70–74, 75–79) × operation
period (1960–74, 1975–79), with the aggregate months of service and the number of damage incidents.  Six cells
have no service (such ships were never built or never sailed in that period) and no incidents: they carry no
information about a rate and are dropped, as in the standard analysis, leaving 34 cells.

Models (X: intercept + dummies for type B–E, construction 65/70/75 and operation 75; 9 columns):

* ``poisson``:       incidents_n ~ Poisson(service_n · exp(x_nᵀw)), w ~ N(0, α⁻¹I), α ~ Gam(0.01, 1e-4)
                     (``models.poisson_regression``, NCVMP with a full-covariance q(w));
* ``poisson_ard``:   the same with one α per coefficient (ARD);
* ``lognormal``:     Poisson-lognormal, log rate x_nᵀw + ε_n with a per-cell random effect ε_n ~ N(0, τ⁻¹),
                     τ ~ Gam(1, 0.1): extra-Poisson variation between cells.

``fg.compare`` ranks them by their evidence bounds.  The lognormal model's bound is a mean-field one
(q(w)q(ε)q(τ)), looser than the Poisson model's (whose only factorisation is q(w)q(α)), so a Bayes factor
read from the two bounds leans towards the Poisson model.  The Poisson coefficients are printed beside the
maximum-likelihood GLM fit (intercept −6.406 and residual deviance 38.70 on 25 df in McCullagh & Nelder),
and a figure of observed counts against the two models' predictive intervals goes to demos/out/.
Run ``python demos/poisson_ships.py [--small]`` (``--small`` leaves out the ARD model and the figure).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

import factorgraph as fg
from factorgraph import models

DATA = Path(__file__).resolve().parents[1] / "data" / "ships" / "data.csv"
OUT = Path(__file__).resolve().parent / "out"
NAMES = ["intercept", "type B", "type C", "type D", "type E", "built 65-69", "built 70-74", "built 75-79",
         "operated 75-79"]


def load() -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    with open(DATA, newline="") as fh:
        rows = list(csv.DictReader(fh))
    kept = [r for r in rows if float(r["service"]) > 0]
    print(f"ships: {len(rows)} cells, {len(rows) - len(kept)} with service == 0 dropped (no exposure, no "
          f"incidents): {len(kept)} cells, {sum(int(r['incidents']) for r in kept)} incidents")
    X = np.array([[1.0] + [float(r["type"] == t) for t in "BCDE"] + [float(r["year"] == y) for y in ("65", "70", "75")]
                  + [float(r["period"] == "75")] for r in kept])
    y = np.array([int(r["incidents"]) for r in kept])
    service = np.array([float(r["service"]) for r in kept])
    labels = [f"{r['type']}{r['year']}/{r['period']}" for r in kept]
    return X, y, service, labels


def glm_mle(X: np.ndarray, y: np.ndarray, service: np.ndarray) -> tuple[np.ndarray, float]:
    """Maximum-likelihood Poisson GLM by Newton's method; returns the coefficients and the deviance."""
    w = np.zeros(X.shape[1])
    w[0] = np.log(y.sum() / service.sum())
    for _ in range(100):
        mu = service * np.exp(X @ w)
        step = np.linalg.solve((X.T * mu) @ X, X.T @ (y - mu))
        w += step
        if np.max(np.abs(step)) < 1e-12:
            break
    mu = service * np.exp(X @ w)
    dev = 2.0 * np.sum(np.where(y > 0, y * np.log(np.where(y > 0, y, 1.0) / mu), 0.0) - (y - mu))
    return w, float(dev)


def lognormal_model(X: np.ndarray, y: np.ndarray, service: np.ndarray) -> fg.Model:
    N, D = X.shape
    with fg.Model("lognormal") as m:
        n, d = fg.plate("n", N), fg.plate("d", D)  # noqa: F841
        alpha = fg.gamma("alpha", shape=1e-2, rate=1e-4)
        w = fg.mv_gaussian("w", mean=0.0, precision=alpha, dim=D)
        tau = fg.gamma("tau", shape=1.0, rate=0.1)
        eps = fg.gaussian("eps", mean=0.0, precision=tau, plates=[n])
        fg.poisson_log("y", fg.inner(X, w, plates=[n]) + eps, exposure=service, plates=[n], observed=y)
    return m


def main(small: bool = False) -> dict:
    """Fit and compare the models; returns the results by name, the GLM fit and the comparison."""
    X, y, service, labels = load()

    results = {"poisson": models.poisson_regression(X, y, exposure=service)}
    if not small:
        results["poisson_ard"] = models.poisson_regression(X, y, exposure=service, ard=True)
    results["lognormal"] = fg.infer(lognormal_model(X, y, service), algorithm=fg.NCVMP(), max_iter=2000)
    for name, r in results.items():
        print(f"{name:12s} evidence {r.elbo:10.4f}  ({r.evidence_kind}; {r.n_iter} sweeps, "
              f"{'converged' if r.converged else 'not converged'})")

    w_ml, dev = glm_mle(X, y, service)
    print(f"\nGLM maximum likelihood: residual deviance {dev:.2f} on {len(y) - X.shape[1]} df "
          "(McCullagh & Nelder: 38.70 on 25 df)")
    q = results["poisson"].posterior("w")
    ql = results["lognormal"].posterior("w")
    print(f"{'coefficient':16s} {'GLM MLE':>9s} {'VB Poisson (sd)':>18s} {'VB lognormal (sd)':>19s}")
    for i, nm in enumerate(NAMES):
        print(f"{nm:16s} {w_ml[i]:9.3f} {q.mean()[i]:9.3f} ({np.sqrt(q.cov()[i, i]):5.3f}) "
              f"{ql.mean()[i]:9.3f} ({np.sqrt(ql.cov()[i, i]):5.3f})")
    tau = results["lognormal"].posterior("tau")
    print(f"\nlognormal random effect: E[τ] = {float(tau.mean()):.3g}, so a between-cell sd of about "
          f"{float(1 / np.sqrt(tau.mean())):.3g} on the log rate")

    comparison = fg.compare(results)
    print("\n" + str(comparison))
    out = {"results": results, "glm": (w_ml, dev), "comparison": comparison, "n_cells": len(y)}
    if small:
        return out
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pred = models.poisson_predictive(results["poisson"], X, exposure=service)
    # Poisson-lognormal predictive moments: the random effect adds its variance to that of xᵀw
    s2 = np.einsum("nd,de,ne->n", X, ql.cov(), X) + float(1 / tau.mean())
    mean_l = service * np.exp(X @ ql.mean() + 0.5 * s2)
    var_l = mean_l + mean_l**2 * np.expm1(s2)
    OUT.mkdir(parents=True, exist_ok=True)
    order = np.argsort(pred.mean)
    idx = np.arange(len(y))
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.errorbar(idx - 0.15, pred.mean[order], 2 * np.sqrt(pred.var[order]), fmt="o", ms=3, label="Poisson ±2 sd")
    ax.errorbar(idx + 0.15, mean_l[order], 2 * np.sqrt(var_l[order]), fmt="s", ms=3, label="Poisson-lognormal ±2 sd")
    ax.plot(idx, y[order], "k*", label="observed")
    ax.set_xticks(idx, [labels[i] for i in order], rotation=90, fontsize=7)
    ax.set_ylabel("damage incidents")
    ax.set_title("Ship damage: predictive mean ± 2 sd for new cells with the same service, by cell")
    ax.legend()
    fig.tight_layout()
    path = OUT / "poisson_ships.png"
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", action="store_true", help="only the two main models, no figure")
    main(small=ap.parse_args().small)
