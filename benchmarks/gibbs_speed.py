"""Cost of one Gibbs draw relative to one VMP sweep, on the varying-intercept model of ``hierarchical_speed``:

    y_n ~ N(a[g_n], τ⁻¹),  a_g ~ N(μ, τ_a⁻¹),  μ ~ N(0, 100),  τ_a, τ ~ Gam(1, 1)

(and, with ``--variant slopes``, varying slopes a[g] + b[g]·x).  A Gibbs sweep draws μ, τ_a, the G intercepts
(one vectorised draw) and τ from their full conditionals, which the engine forms from the same messages a VMP
sweep computes; a VMP sweep also evaluates the ELBO.  Both are timed in the same run: the VMP sweep as the
median interval between sweeps (``SweepTimer``), the Gibbs draw as the chains' wall time over their sweeps.
The script prints both and their ratio, and the effective sample size per second of the slowest-mixing scalar
(ArviZ bulk ESS), which is what a draw is worth.  Default N = 20 000 rows in G = 200 groups runs in well under a
minute; ``--N`` and ``--G`` change the sizes.
"""

from __future__ import annotations

import argparse
import time

import factorgraph as fg

from .hierarchical_speed import build
from .timing import SweepTimer


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N", type=int, default=20_000)
    ap.add_argument("--G", type=int, default=200)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--variant", choices=("intercepts", "slopes"), default="intercepts")
    args = ap.parse_args(argv)
    m, _ = build(args.N, args.G, variant=args.variant)
    timer = SweepTimer()
    fit = fg.infer(m, max_iter=50, tol=None, param_tol=None, callbacks=[timer], progress=False)
    vmp = timer.per_iter()
    sampler = fg.Gibbs(draws=args.draws, burn=200, chains=args.chains, seed=0)
    t0 = time.perf_counter()
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


if __name__ == "__main__":
    main()
