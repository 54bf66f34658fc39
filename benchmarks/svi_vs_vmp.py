"""fg.SVI against full-batch fg.VMP: exact full-data ELBO reached, and seconds, from one run.

Three models with global conjugate-exponential variables and one data plate:

* linear regression, w ~ N(0, I), τ ~ Gamma(0.01, 0.01), y_n ~ N(x_nᵀw, τ⁻¹) (no local variables);
* a three-component Gaussian mixture in 2-D (global π, means, precisions; local responsibilities);
* LDA (``demos.lda_topics``: global topics φ; local θ_d and token assignments z_dl).

For each: full-batch VMP to convergence (best ELBO over a few seeds for the mixtures), then SVI with the
default step sizes ρ_t = (t + 1)^(−0.7), whose ``Result.elbo`` is the exact full-data ELBO after one final
pass.  Printed: both ELBOs, the relative gap (VMP − SVI)/|VMP|, seconds for each (SVI's include the final
pass).  Run ``python -m benchmarks.svi_vs_vmp [--scale 1]`` (``--scale`` multiplies the data sizes).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import factorgraph as fg
from demos.lda_topics import build as build_lda
from demos.lda_topics import make_corpus


def regression(N: int, seed: int = 0) -> fg.Model:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 4))
    y = X @ np.array([1.0, 0.0, -2.0, 0.5]) + 0.3 * rng.normal(size=N)
    with fg.Model("regression") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=np.zeros(4), precision=np.eye(4))
        tau = fg.gamma("tau", shape=1e-2, rate=1e-2)
        fg.gaussian("y", mean=fg.inner(X, w, plates=[n]), precision=tau, plates=[n], observed=y)
    return m


def mixture(N: int, seed: int = 0) -> fg.Model:
    rng = np.random.default_rng(seed)
    centers = np.array([[-4.0, 0.0], [4.0, 0.0], [0.0, 5.0]])
    X = centers[rng.integers(0, 3, N)] + rng.normal(size=(N, 2))
    with fg.Model("mixture") as m:
        n, k, d = fg.plate("n", N), fg.plate("k", 3), fg.plate("d", 2)
        pi = fg.dirichlet("pi", concentration=np.ones(3))
        mus = fg.gaussian("mus", 0.0, precision=1e-2, plates=[k, d])
        taus = fg.gamma("taus", 1.0, 1.0, plates=[k, d])
        z = fg.categorical("z", probs=pi, plates=[n])
        fg.gaussian("x", mean=mus[z], precision=taus[z], plates=[n, d], observed=X)
    return m


def lda(docs: int, seed: int = 0) -> fg.Model:
    words, _ = make_corpus(docs, 30, np.random.default_rng(seed))
    return build_lda(words, 4)


def main(scale: float = 1.0) -> list[dict]:
    cases = [("linear regression", regression(int(2000 * scale)), 1, 100, 200),
             ("Gaussian mixture", mixture(int(1000 * scale)), 3, 100, 200),
             ("LDA", lda(int(200 * scale)), 2, 20, 300)]
    rows = []
    for label, m, seeds, batch, steps in cases:
        t = time.perf_counter()
        vmp = max((fg.infer(m, seed=s, max_iter=1000, tol=1e-9) for s in range(seeds)), key=lambda r: r.elbo)
        t_vmp = time.perf_counter() - t
        t = time.perf_counter()
        svi = fg.infer(m, algorithm=fg.SVI(batch_size=batch), max_iter=steps, seed=0)
        t_svi = time.perf_counter() - t
        gap = (vmp.elbo - svi.elbo) / abs(vmp.elbo)
        rows.append({"model": label, "vmp": vmp.elbo, "svi": svi.elbo, "gap": gap})
        n = m.plates[svi.notes[0].split("'")[1]].size
        print(f"{label:18s} N = {n:5d}  VMP ELBO {vmp.elbo:14.4f} ({t_vmp:6.2f} s, {seeds} seed(s))  "
              f"SVI exact ELBO {svi.elbo:14.4f} ({t_svi:6.2f} s, {steps} steps of {batch})  "
              f"relative gap {gap:.2e}  smoothed estimate {svi.elbo_estimate:.4f}")
    return rows


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=1.0)
    main(p.parse_args().scale)
