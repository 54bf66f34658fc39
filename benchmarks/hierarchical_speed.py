"""Cost of one VMP iteration of a varying-intercept model, in passes of ``np.bincount`` over the rows.

    y_n ~ N(a[g_n], τ⁻¹),  a_g ~ N(μ, τ_a⁻¹),  μ ~ N(0, 100),  τ_a, τ ~ Gam(1, 1)

with N = 10⁶ rows in G = 10⁴ groups (seeded synthetic data).  The unit is one weighted
``np.bincount(g, weights=w, minlength=G)`` over the N rows (the segment sum a gathered variable's
message needs), timed in the same run; the target is at most 3 such passes per iteration (the sweep
updates every variable once and computes the ELBO).  Timings on a shared machine are noisy: the script
reports medians.  When BayesPy is installed (``pip install -e .[bench]``) the same model is also run with
BayesPy's ``Take`` node (VB, one ``Q.update(repeat=1)`` per iteration, which includes its lower bound) and
the per-iteration ratio is printed.  ``--N`` and ``--G`` change the sizes; it runs in under a minute.

``--numpyro`` adds NumPyro's SVI with an ``AutoNormal`` guide (mean-field Gaussian in the unconstrained space:
log-normal over τ_a and τ where this library has Gammas) and Adam with step 0.05·0.1^(t/10⁴), run in
jit-compiled chunks of 500 steps until the ELBO of its current q is within ``--gap`` nats (default 1) of this
library's converged ELBO, and prints both wall times to that ELBO (NumPyro's includes its jit compilation,
printed separately).  The ELBO of NumPyro's q is computed exactly, outside the timing (``autonormal_elbo``:
for this model every expectation under the mean-field Gaussian/log-normal q is closed-form), because a
Monte Carlo estimate's noise (≈ √(G/2) nats per particle) is far above a 1-nat gap.
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
    varying intercepts and slopes, mean a[g] + b[g]·x (fused onto per-group Gram matrices);
    ``"slopes_generic"``: the same with + 0.0 (a constant offset is not fused: the gather/scatter path)."""
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
        if variant.startswith("slopes"):
            b = fg.gaussian("b", mean=0.0, precision=1.0, plates=[c])
            mean = a[g] + b[g] * x
            if variant == "slopes_generic":
                mean = mean + 0.0
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


def autonormal_elbo(p: dict, g: np.ndarray, y: np.ndarray, G: int) -> float:
    """The exact ELBO of an AutoNormal q for the model of ``build`` (μ ~ N(0, 10²), τ_a, τ ~ Gam(1, 1)):
    q(μ) = N(m₀, s₀²), q(a_g) = N(m_g, s_g²), q(log τ_a) = N(m₁, s₁²), q(log τ) = N(m₂, s₂²), so
    E[τ] = exp(m + s²/2), E[log τ] = m, H[τ] = ½ log(2πe s²) + m, and the likelihood is a sum over groups of
    E[τ](Σ(y − m_g)² + n_g s_g²)."""
    m0, s0 = p["mu_auto_loc"], p["mu_auto_scale"]
    m1, s1 = p["tau_a_auto_loc"], p["tau_a_auto_scale"]
    m2, s2 = p["tau_auto_loc"], p["tau_auto_scale"]
    ma, sa = p["a_auto_loc"], p["a_auto_scale"]
    et_a, et = np.exp(m1 + 0.5 * s1**2), np.exp(m2 + 0.5 * s2**2)
    lg2pi = np.log(2 * np.pi)
    n = np.bincount(g, minlength=G)
    sq = np.bincount(g, weights=(y - ma[g]) ** 2, minlength=G) + n * sa**2
    lik = len(y) * (-0.5 * lg2pi + 0.5 * m2) - 0.5 * et * sq.sum()
    groups = G * (-0.5 * lg2pi + 0.5 * m1) - 0.5 * et_a * np.sum((ma - m0) ** 2 + sa**2 + s0**2)
    priors = -0.5 * np.log(2 * np.pi * 100.0) - (m0**2 + s0**2) / 200.0 - et_a - et
    ent = (0.5 * np.log(2 * np.pi * np.e * s0**2) + np.sum(0.5 * np.log(2 * np.pi * np.e * sa**2))
           + 0.5 * np.log(2 * np.pi * np.e * s1**2) + m1 + 0.5 * np.log(2 * np.pi * np.e * s2**2) + m2)
    return float(lik + groups + priors + ent)


def versus_numpyro(N: int, G: int, gap: float = 1.0) -> dict | None:
    """This library's VMP to convergence against NumPyro's SVI to within ``gap`` nats of its ELBO."""
    m, _ = build(N, G)
    fg.infer(m, max_iter=3, tol=None)  # compile caches (numba) warm
    t0 = time.perf_counter()
    r = fg.infer(m)
    ours = time.perf_counter() - t0
    np_ = numpyro_to_elbo(N, G, r.elbo, gap)
    print(f"  to convergence: this library {ours:.3f} s ({r.n_iter} VMP sweeps, ELBO {r.elbo:.3f}, {r.evidence_kind})")
    if np_ is None:
        print("  NumPyro: not installed (pip install -e .[bench])")
        return None
    word = "reached" if np_["reached"] else "did NOT reach"
    print(f"  NumPyro {np_['version']} SVI (AutoNormal, Adam 0.05·0.1^(t/1e4)) {word} ELBO >= {r.elbo - gap:.3f} after "
          f"{np_['steps']} steps, {np_['seconds']:.2f} s (of which jit compilation ~{np_['compile']:.2f} s); its "
          f"exact ELBO there {np_['elbo']:.3f}; ratio {np_['seconds'] / ours:.0f}x this library's time "
          f"({(np_['seconds'] - np_['compile']) / ours:.0f}x without the compilation)")
    return {"ours": ours, "numpyro": np_, "elbo": r.elbo}


def main(N: int = 1_000_000, G: int = 10_000, iters: int = 15, numpyro: bool = False, gap: float = 1.0) -> dict:
    m, g = build(N, G)
    w = np.random.default_rng(1).normal(size=N)
    np.bincount(g, weights=w, minlength=G)
    units = [median_time(lambda: np.bincount(g, weights=w, minlength=G), repeat=15)]
    out = {}
    for variant in ("intercepts", "generic", "slopes", "slopes_generic"):
        out[variant] = _per_iter(m if variant == "intercepts" else build(N, G, variant=variant)[0], iters)
        units.append(median_time(lambda: np.bincount(g, weights=w, minlength=G), repeat=15))
    unit = float(np.median(units))  # bincount timed between the fits, so both see the same machine load
    print(f"varying-intercept VMP, N = {N:.0e} rows, G = {G:.0e} groups (medians; a shared machine is noisy)")
    print(f"  one np.bincount pass over N:               {1e3 * unit:8.2f} ms")
    label = {"intercepts": "VMP iteration with ELBO, y ~ N(a[g], 1/τ)",
             "generic": "the same on the gather/scatter path",
             "slopes": "varying slopes too, y ~ N(a[g] + b[g]x, 1/τ)",
             "slopes_generic": "the same on the gather/scatter path"}
    note = {"intercepts": "target ≤ 3 (per-group sums of y, y² taken once, at compile time)",
            "generic": "mean a[g] + 0.0: a sum node, so no per-group sums",
            "slopes": "per-group Gram matrices of (1, x), taken once",
            "slopes_generic": "mean a[g] + b[g]x + 0.0"}
    for variant, (t, _r) in out.items():
        print(f"  {label[variant]:<46} {1e3 * t:8.2f} ms = {t / unit:6.2f} passes  ({note[variant]})")
    a, b = out["intercepts"][1].elbo, out["generic"][1].elbo
    print(f"  ELBO after {iters} sweeps: {a:.6f} (per-group sums), {b:.6f} (gather/scatter)")
    sa, sb = out["slopes"][1].elbo, out["slopes_generic"][1].elbo
    print(f"  varying slopes: fused {out['slopes_generic'][0] / out['slopes'][0]:.0f}x faster per iteration than "
          f"the gather/scatter path; ELBO after {iters} sweeps {sa:.6f} (fused), {sb:.6f} (gather/scatter)")
    bp = bayespy_per_iter(N, G)
    if bp is None:
        print("  BayesPy: not installed (pip install -e .[bench])")
    else:
        t = out["intercepts"][0]
        print(f"  BayesPy {_bayespy_version()} (Take node), per iteration:  {1e3 * bp[0]:8.2f} ms = "
              f"{bp[0] / unit:6.2f} passes: {bp[0] / t:.0f}x this library's, "
              f"{bp[0] / out['generic'][0]:.1f}x its gather/scatter path")
        print(f"  lower bound: BayesPy {bp[1]:.6f} after 5 iterations, this library {a:.6f} after {iters}")
    res = {"unit": unit, **{k: v[0] / unit for k, v in out.items()}, "bayespy": None if bp is None else bp[0] / unit}
    if numpyro:
        res["numpyro"] = versus_numpyro(N, G, gap)
    return res


def numpyro_to_elbo(N: int, G: int, target: float, gap: float = 1.0, max_steps: int = 40_000,
                    seed: int = 0) -> dict | None:
    """NumPyro SVI (AutoNormal, Adam) on the same data until its q's exact ELBO is ≥ ``target − gap``:
    seconds of optimisation (compilation included), the compile time, steps and the ELBO reached."""
    try:
        import jax
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist
        from numpyro.infer import SVI, Trace_ELBO
        from numpyro.infer.autoguide import AutoNormal
    except ImportError:
        return None
    rng = np.random.default_rng(seed)
    g = rng.integers(0, G, N)
    rng.normal(size=N)  # the same draws as build()
    y = rng.normal(size=G)[g] + 0.5 * rng.normal(size=N)
    gj, yj = jnp.asarray(g), jnp.asarray(y)

    def model(g, y):
        mu = numpyro.sample("mu", dist.Normal(0.0, 10.0))
        tau_a = numpyro.sample("tau_a", dist.Gamma(1.0, 1.0))
        tau = numpyro.sample("tau", dist.Gamma(1.0, 1.0))
        with numpyro.plate("groups", G):
            a = numpyro.sample("a", dist.Normal(mu, 1.0 / jnp.sqrt(tau_a)))
        with numpyro.plate("n", N):
            numpyro.sample("y", dist.Normal(a[g], 1.0 / jnp.sqrt(tau)), obs=y)

    guide = AutoNormal(model)
    svi = SVI(model, guide, numpyro.optim.Adam(lambda t: 0.05 * 0.1 ** (t / 10_000)), Trace_ELBO())
    chunk = 500

    @jax.jit
    def run(state):
        return jax.lax.fori_loop(0, chunk, lambda i, s: svi.update(s, gj, yj)[0], state)

    t0 = time.perf_counter()
    state = svi.init(jax.random.PRNGKey(seed), gj, yj)
    state = jax.block_until_ready(run(state))
    compile_and_first = time.perf_counter() - t0
    t1 = time.perf_counter()
    jax.block_until_ready(run(state))  # timing a chunk once more gives the compile time; not kept
    compile_s = compile_and_first - (time.perf_counter() - t1)
    elapsed, steps = compile_and_first, chunk
    while True:
        params = {k: np.asarray(v, float) for k, v in svi.get_params(state).items()}
        elbo = autonormal_elbo(params, g, y, G)
        if elbo >= target - gap or steps >= max_steps:
            break
        t0 = time.perf_counter()
        state = jax.block_until_ready(run(state))
        elapsed += time.perf_counter() - t0
        steps += chunk
    return {"seconds": elapsed, "compile": compile_s, "steps": steps, "elbo": elbo,
            "reached": elbo >= target - gap, "version": numpyro.__version__}


def _bayespy_version() -> str:
    from importlib.metadata import version

    return version("bayespy")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N", type=int, default=1_000_000)
    ap.add_argument("--G", type=int, default=10_000)
    ap.add_argument("--numpyro", action="store_true", help="also time NumPyro SVI (AutoNormal) to the same ELBO")
    ap.add_argument("--gap", type=float, default=1.0, help="nats below this library's ELBO that count as reached")
    args = ap.parse_args()
    main(args.N, args.G, numpyro=args.numpyro, gap=args.gap)
