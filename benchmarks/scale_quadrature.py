"""``fg.ScaleQuadrature``: inner sweeps, time and error against exact references.

Cases:

* **eight schools** (data/eight_schools), τ ~ half-Cauchy(0, 5) integrated out, the rest fitted by NCVMP
  (centred: q(μ)q(θ) given τ) and by VMP (non-centred: q(μ)q(η) given τ).  Exact reference: 1-D quadrature
  over u = log τ of p(τ) p(y | τ), the Gaussian marginal likelihood with θ and μ integrated out
  (``demos.eight_schools.exact``).  For the centred form the script also prints the integral the handler
  targets, p(τ) p(y | τ) e^{−KL(τ)} with KL(τ) = ½(Σ log Λ_ii − log det Λ) the gap of the mean-field fit given
  τ in closed form (Λ the precision of (μ, θ) given τ and y): the handler's error against it is its own, the
  rest is the mean-field gap.
* **narrow regression**: y = Xw + ε, N = 5000 rows, D = 24 columns (the size of the posterior database's
  ``diamonds``), w ~ N(0, 100 I), σ ~ half-normal(5) used as ``sd=``: the posterior sd of log σ is 0.01.  Given
  σ the rest is one Gaussian block fitted exactly, so the exact reference is p(σ | y) ∝ p(σ) N(y | 0, σ²I +
  100 XXᵀ) by quadrature on 4001 nodes.

For each: the inner sweeps the Result reports (``result.n_iter``), the node fits, the grid, wall time, and
the errors of E[σ], sd[σ] (in posterior sd) and log Z (nats).  Before this handler placed its grid from the
posterior, the centred fit took 550 917 sweeps (438 s) and the regression either crashed (a float-keyed node
lookup) or warned of a quadrature error of 0.08 nats; those figures are not re-run here.

Run ``python -m benchmarks.scale_quadrature``.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

import factorgraph as fg
from demos.eight_schools import build, build_noncentred, exact, load

MU_SD, TAU_SCALE = 5.0, 5.0


def centred_mean_field_target(y: np.ndarray, sigma: np.ndarray, n: int = 4001) -> dict:
    """E[τ], sd[τ] and log Z under q(u) ∝ p(τ) p(y | τ) τ e^{−KL(τ)} (u = log τ): what the centred handler
    integrates when its fits given τ reach the mean-field optimum."""
    u = np.linspace(-12.0, 8.0, n)
    t = np.exp(u)
    v = sigma**2 + t[:, None] ** 2
    c = 1 / MU_SD**2
    sv, syv = np.sum(1 / v, 1), np.sum(y / v, 1)
    log_ml = -0.5 * (np.sum(y * y / v, 1) - syv**2 / (c + sv) + np.sum(np.log(v), 1) + np.log1p(sv / c)
                     + len(y) * np.log(2 * np.pi))
    gap = np.empty(n)
    J = len(y)
    for i, x in enumerate(t):
        lam = np.zeros((J + 1, J + 1))
        lam[0, 0] = c + J / x**2
        lam[0, 1:] = lam[1:, 0] = -1 / x**2
        lam[1:, 1:] = np.diag(1 / sigma**2 + 1 / x**2)
        gap[i] = 0.5 * (np.sum(np.log(np.diag(lam))) - np.linalg.slogdet(lam)[1])
    L = log_ml - gap + np.log(2 / (np.pi * TAU_SCALE)) - np.log1p((t / TAU_SCALE) ** 2) + u
    w = np.exp(L - L.max())
    log_z = float(L.max() + np.log(w.sum() * (u[1] - u[0])))
    w /= w.sum()
    m = float(w @ t)
    return {"tau": [m, float(np.sqrt(w @ t**2 - m * m))], "log_evidence": log_z}


def regression(seed: int = 0, N: int = 5000, D: int = 24):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    y = X @ rng.normal(size=D) + 0.7 * rng.normal(size=N)
    with fg.Model("narrow regression") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=0.0, covariance=100.0, dim=D)
        s = fg.half_normal("s", 5.0)
        fg.gaussian("y", mean=fg.inner(X, w, plates=[n]), sd=s, plates=[n], observed=y)
    return m, X, y


def regression_reference(X: np.ndarray, y: np.ndarray) -> dict:
    """E[σ], sd[σ] and log Z by quadrature over u = log σ of p(σ) N(y | 0, σ²I + 100 XXᵀ) (matrix determinant
    lemma and Woodbury's identity in D dimensions)."""
    (N, D), G, b, yy = X.shape, X.T @ X, X.T @ y, y @ y

    def log_post(u: float) -> float:
        s2 = np.exp(2 * u)
        logdet = N * np.log(s2) + np.linalg.slogdet(np.eye(D) + 100 * G / s2)[1]
        quad = (yy - b @ np.linalg.solve(s2 / 100 * np.eye(D) + G, b)) / s2
        return -0.5 * (logdet + quad + N * np.log(2 * np.pi)) + np.log(2 / (5 * np.sqrt(2 * np.pi))) - s2 / 50 + u

    coarse = np.linspace(-4.0, 4.0, 801)
    mode = coarse[np.argmax([log_post(u) for u in coarse])]
    u = np.linspace(mode - 0.5, mode + 0.5, 4001)
    L = np.array([log_post(x) for x in u])
    w = np.exp(L - L.max())
    log_z = float(L.max() + np.log(w.sum() * (u[1] - u[0])))
    w /= w.sum()
    s = np.exp(u)
    m = float(w @ s)
    return {"s": [m, float(np.sqrt(w @ s**2 - m * m))], "log_evidence": log_z,
            "sd_log_s": float(np.sqrt(w @ u**2 - (w @ u) ** 2))}


def report(label: str, r: fg.Result, name: str, elapsed: float, refs: dict[str, dict]) -> None:
    q = r.posterior(name)
    mean, sd = float(q.mean()), float(q.std())
    quad = r.quadrature
    print(f"{label}: {r.n_iter} inner sweeps at {quad['fits']} fits ({quad['restarts']} restarts from extrapolated "
          f"iterates), {len(quad['u'])} nodes, step {quad['u'][1] - quad['u'][0]:.3g} in log {name}, "
          f"{quad['refinements']} refinement(s), {elapsed:.2f} s; error estimate {quad['error']:.2g}; "
          f"warnings: {len(r.warnings)}")
    print(f"    E[{name}] {mean:.5f}, sd {sd:.5f}, log Z {r.elbo:.6f}")
    for what, ref in refs.items():
        rm, rs = ref[name]
        print(f"    against {what}: E[{name}] {rm:.5f} ({(mean - rm) / rs:+.2e} sd), sd {rs:.5f} "
              f"({(sd - rs) / rs:+.2e} sd), log Z {ref['log_evidence']:.6f} ({r.elbo - ref['log_evidence']:+.2e})")


def main() -> None:
    _, y, sigma = load()
    ref = exact(y, sigma)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        t = time.perf_counter()
        r = fg.infer(build(y, sigma), fg.NCVMP(), handlers={"tau": fg.ScaleQuadrature()})
        report("eight schools, centred (NCVMP given τ)", r, "tau", time.perf_counter() - t,
               {"the exact posterior": ref, "the mean-field target": centred_mean_field_target(y, sigma)})
        t = time.perf_counter()
        r = fg.infer(build_noncentred(y, sigma), fg.VMP(), handlers={"tau": fg.ScaleQuadrature()})
        report("eight schools, non-centred (VMP given τ)", r, "tau", time.perf_counter() - t,
               {"the exact posterior": ref})
        m, X, yy = regression()
        reg = regression_reference(X, yy)
        t = time.perf_counter()
        r = fg.infer(m, handlers={"s": fg.ScaleQuadrature()})
        report(f"narrow regression (N = {X.shape[0]}, D = {X.shape[1]}, sd of log σ {reg['sd_log_s']:.4f})", r, "s",
               time.perf_counter() - t, {"the exact posterior": reg})


if __name__ == "__main__":
    main()
