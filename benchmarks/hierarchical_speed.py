"""Cost of one VMP iteration of a varying-intercept model, in passes of ``np.bincount`` over the rows.

    y_n ~ N(a[g_n], τ⁻¹),  a_g ~ N(μ, τ_a⁻¹),  μ ~ N(0, 100),  τ_a, τ ~ Gam(1, 1)

with N = 10⁶ rows in G = 10⁴ groups (seeded synthetic data).  The unit is one weighted
``np.bincount(g, weights=w, minlength=G)`` over the N rows (the segment sum a gathered variable's
message needs), timed in the same run; the target is at most 3 such passes per iteration (the sweep
updates every variable once and computes the ELBO).  Timings on a shared machine are noisy: the script
reports medians.  When BayesPy is installed (``pip install -e .[bench]``) the same model is also run with
BayesPy's ``Take`` node (VB, one ``Q.update(repeat=1)`` per iteration, which includes its lower bound) and
the per-iteration ratio is printed.  ``--N`` and ``--G`` change the sizes; it runs in under a minute.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import factorgraph as fg

from .timing import SweepTimer, median_time


def build(N: int, G: int, seed: int = 0, variant: str = "intercepts") -> tuple[fg.Model, np.ndarray]:
    """``"intercepts"``: the model above (its likelihood runs on per-group sums); ``"generic"``: the same
    model with mean a[g] + 0.0, a sum node, which runs the generic gather/scatter path; ``"slopes"``:
    varying intercepts and slopes, mean a[g] + b[g]·x."""
    rng = np.random.default_rng(seed)
    g = rng.integers(0, G, N)
    x = rng.normal(size=N)
    y = rng.normal(size=G)[g] + 0.5 * rng.normal(size=N)
    with fg.Model("varying-intercept") as m:
        n, c = fg.plate("n", N), fg.plate("groups", G)
        mu = fg.gaussian("mu", mean=0.0, precision=1e-2)
        tau_a = fg.gamma("tau_a", shape=1.0, rate=1.0)
        a = fg.gaussian("a", mean=mu, precision=tau_a, plates=[c])
        tau = fg.gamma("tau", shape=1.0, rate=1.0)
        if variant == "slopes":
            b = fg.gaussian("b", mean=0.0, precision=1.0, plates=[c])
            mean = a[g] + b[g] * x
        else:
            mean = a[g] if variant == "intercepts" else a[g] + 0.0
        fg.gaussian("y", mean=mean, precision=tau, plates=[n], observed=y)
    return m, g


def bayespy_per_iter(N: int, G: int, iters: int = 5, seed: int = 0) -> tuple[float, float] | None:
    """BayesPy on the same data: (median seconds per iteration without the first, lower bound after them)."""
    try:
        from bayespy.inference import VB
        from bayespy.nodes import Gamma, GaussianARD, Take
    except ImportError:
        return None
    rng = np.random.default_rng(seed)
    g = rng.integers(0, G, N)
    rng.normal(size=N)  # the same draws as build()
    y = rng.normal(size=G)[g] + 0.5 * rng.normal(size=N)
    mu = GaussianARD(0.0, 1e-2)
    tau_a = Gamma(1.0, 1.0)
    a = GaussianARD(mu, tau_a, plates=(G,))
    tau = Gamma(1.0, 1.0)
    yn = GaussianARD(Take(a, g), tau)
    yn.observe(y)
    Q = VB(yn, a, mu, tau_a, tau)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        Q.update(repeat=1, verbose=False)
        times.append(time.perf_counter() - t0)
    return float(np.median(times[1:])), float(Q.compute_lowerbound())


def _per_iter(m: fg.Model, iters: int) -> tuple[float, fg.Result]:
    timer = SweepTimer()
    r = fg.infer(m, max_iter=iters, tol=None, callbacks=[timer])
    return timer.per_iter(), r


def main(N: int = 1_000_000, G: int = 10_000, iters: int = 15) -> dict:
    m, g = build(N, G)
    w = np.random.default_rng(1).normal(size=N)
    np.bincount(g, weights=w, minlength=G)
    units = [median_time(lambda: np.bincount(g, weights=w, minlength=G), repeat=15)]
    out = {}
    for variant in ("intercepts", "generic", "slopes"):
        out[variant] = _per_iter(m if variant == "intercepts" else build(N, G, variant=variant)[0], iters)
        units.append(median_time(lambda: np.bincount(g, weights=w, minlength=G), repeat=15))
    unit = float(np.median(units))  # bincount timed between the fits, so both see the same machine load
    print(f"varying-intercept VMP, N = {N:.0e} rows, G = {G:.0e} groups (medians; a shared machine is noisy)")
    print(f"  one np.bincount pass over N:               {1e3 * unit:8.2f} ms")
    label = {"intercepts": "VMP iteration with ELBO, y ~ N(a[g], 1/τ)",
             "generic": "the same on the gather/scatter path",
             "slopes": "varying slopes too, y ~ N(a[g] + b[g]x, 1/τ)"}
    note = {"intercepts": "target ≤ 3 (per-group sums of y, y² taken once, at compile time)",
            "generic": "mean a[g] + 0.0: a sum node, so no per-group sums", "slopes": "no target"}
    for variant, (t, _r) in out.items():
        print(f"  {label[variant]:<46} {1e3 * t:8.2f} ms = {t / unit:6.2f} passes  ({note[variant]})")
    a, b = out["intercepts"][1].elbo, out["generic"][1].elbo
    print(f"  ELBO after {iters} sweeps: {a:.6f} (per-group sums), {b:.6f} (gather/scatter)")
    bp = bayespy_per_iter(N, G)
    if bp is None:
        print("  BayesPy: not installed (pip install -e .[bench])")
    else:
        t = out["intercepts"][0]
        print(f"  BayesPy {_bayespy_version()} (Take node), per iteration:  {1e3 * bp[0]:8.2f} ms = "
              f"{bp[0] / unit:6.2f} passes: {bp[0] / t:.0f}x this library's, "
              f"{bp[0] / out['generic'][0]:.1f}x its gather/scatter path")
        print(f"  lower bound: BayesPy {bp[1]:.6f} after 5 iterations, this library {a:.6f} after {iters}")
    return {"unit": unit, **{k: v[0] / unit for k, v in out.items()}, "bayespy": None if bp is None else bp[0] / unit}


def _bayespy_version() -> str:
    from importlib.metadata import version

    return version("bayespy")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N", type=int, default=1_000_000)
    ap.add_argument("--G", type=int, default=10_000)
    args = ap.parse_args()
    main(args.N, args.G)
