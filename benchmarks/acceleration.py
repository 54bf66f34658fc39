"""Sweeps and seconds to convergence with ``accelerate=False``, ``"auto"`` (the default) and ``True``, in one run.

Two kinds of fit that crawl under plain coordinate ascent:

* **uncentred regressions** (the earnings models of posteriordb: log earnings on height, and on height and
  sex), written under mean field with a separate ``fg.gaussian`` prior on each coefficient and a Gamma noise
  precision, on seeded synthetic data: N = 1000, height ~ N(66, 4²) inches, male ~ Bernoulli(½),
  log earnings = 5.8 + 0.06·height (+ 0.4·male) + N(0, 0.9²).  Heights far from 0 make the intercept and
  the slope almost collinear, and VMP contracts the error by about 1 − 16/66² per sweep;
* **a half-normal scale per group** (NCVMP with backtracking): y_gr ~ N(a_g, s_g²), a_g ~ N(μ, τ²),
  μ ~ N(0, 10²), τ, s_g ~ half-normal(2), with G groups of R rows (G = 85, R = 1: one row per group, as
  in the radon counties; and G = 50, R = 3).

Every fit uses the default stopping rule of its algorithm (VMP: relative ELBO change 1e-9; NCVMP: relative
parameter change 1e-8), ``max_iter=20000``.  For the regressions the distance of the stopping point from
the exact mean-field fixed point (solved in numpy) is printed in posterior sd of q(intercept).  Each model
is fitted once before the timed fits, so that compilation is not timed.  Seconds are wall time on a shared
machine: read the ratios, measured in the same run.

    python -m benchmarks.acceleration            # about a minute and a half
    python -m benchmarks.acceleration --quick    # leaves out G = 85, R = 1 (the slowest plain fit)
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import factorgraph as fg

PRIOR_SD = 10.0


def earnings(male: bool, N: int = 1000, seed: int = 0) -> tuple[fg.Model, dict]:
    """The regression and its exact mean-field fixed point (the means and variances of the coefficients)."""
    rng = np.random.default_rng(seed)
    height = rng.normal(66.0, 4.0, N)
    sex = (rng.random(N) < 0.5).astype(float)
    y = 5.8 + 0.06 * height + (0.4 * sex if male else 0.0) + rng.normal(0.0, 0.9, N)
    X = np.c_[np.ones(N), height, sex] if male else np.c_[np.ones(N), height]
    with fg.Model("log earnings ~ height" + (" + male" if male else "")) as m:
        n = fg.plate("n", N)
        coef = [fg.gaussian(name, 0.0, sd=PRIOR_SD) for name in ("a", "b", "c")[:X.shape[1]]]
        mean = coef[0] + coef[1] * height
        if male:
            mean = mean + coef[2] * sex
        tau = fg.gamma("tau", 1.0, 1.0)
        fg.gaussian("y", mean, precision=tau, plates=[n], observed=y)
    return m, mean_field_fixed_point(X, y)


def mean_field_fixed_point(X: np.ndarray, y: np.ndarray) -> dict:
    """q(w_j) = N(m_j, 1/λ_j), q(τ) = Gam(1 + N/2, 1 + ½ Σ E[(y − Xw)²]) at the coordinate-ascent fixed point:
    given E[τ], λ_j = 1/s₀² + E[τ] Σ x_j² and the means solve (diag(λ) + E[τ](XᵀX − diag XᵀX)) m = E[τ] Xᵀy
    jointly; the iteration over E[τ] alone converges in a few steps."""
    N = len(y)
    XtX, Xty = X.T @ X, X.T @ y
    et = 1.0
    for _ in range(500):
        lam = 1 / PRIOR_SD**2 + et * np.diag(XtX)
        A = et * (XtX - np.diag(np.diag(XtX))) + np.diag(lam)
        m = np.linalg.solve(A, et * Xty)
        rate = 1.0 + 0.5 * (np.sum((y - X @ m) ** 2) + np.sum(np.diag(XtX) / lam))
        new = (1.0 + N / 2) / rate
        if abs(new - et) <= 1e-15 * et:
            break
        et = new
    return {"mean": m, "var": 1 / lam}


def groups(G: int, R: int, seed: int = 1) -> fg.Model:
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(G), R)
    sd = rng.uniform(0.5, 3.0, G)
    y = rng.normal(size=G)[g] + sd[g] * rng.normal(size=G * R)
    with fg.Model(f"half-normal scale per group, G = {G}, R = {R}") as m:
        c, n = fg.plate("c", G), fg.plate("n", G * R)
        mu = fg.gaussian("mu", 0.0, sd=10.0)
        tau = fg.half_normal("tau", 2.0)
        a = fg.gaussian("a", mu, sd=tau, plates=[c])
        s = fg.half_normal("s", 2.0, plates=[c])
        fg.gaussian("y", a[g], sd=s[g], plates=[n], observed=y)
    return m


def fit(build, algorithm) -> tuple[fg.Result, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        t0 = time.perf_counter()
        r = fg.infer(build(), algorithm, max_iter=20000, progress=False)
        return r, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="leave out G = 85, R = 1")
    args = ap.parse_args()
    cases = [(f"earnings ~ height{' + male' if male else ''} (VMP)", lambda male=male: earnings(male)[0],
              earnings(male)[1], fg.VMP) for male in (False, True)]
    sizes = [(50, 3)] if args.quick else [(85, 1), (50, 3)]
    cases += [(f"half-normal scale per group, G={G}, R={R} (NCVMP)", lambda G=G, R=R: groups(G, R), None, fg.NCVMP)
              for G, R in sizes]
    print(f"{'model':52s} {'':6s} {'sweeps':>7s} {'conv.':>5s} {'seconds':>8s} {'ELBO':>14s} {'|Δa|/sd':>8s}")
    for name, build, exact, alg in cases:
        fit(build, alg(accelerate=True))  # compile the kernels outside the timing
        out = {}
        for acc in (False, "auto", True):
            r, sec = fit(build, alg(accelerate=acc))
            out[acc] = (r, sec)
            off = ""
            if exact is not None:
                off = f"{abs(float(r.posteriors['a'].mean()) - exact['mean'][0]) / np.sqrt(exact['var'][0]):8.3f}"
            label = {False: "plain", "auto": "auto", True: "accel."}[acc]
            print(f"{name:52s} {label:6s} {r.n_iter:7d} {str(r.converged):>5s} "
                  f"{sec:8.3f} {r.elbo:14.6f} {off}")
        (r0, s0) = out[False]
        for acc in ("auto", True):
            r1, s1 = out[acc]
            note = next((n for n in r1.notes if n.startswith("acceleration")), "")
            print(f"{'':52s} ratio  {r0.n_iter / r1.n_iter:7.1f}       {s0 / s1:8.1f}   (plain / {acc}); "
                  f"{note.split(': ', 1)[-1]}")

if __name__ == "__main__":
    main()
