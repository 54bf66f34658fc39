"""AI-KL timings (Challis & Barber 2012, §2.1–2.3 and §4.2).

1. **Bound and gradient per site.**  For a block of N logistic sites in dimension D with a skew-normal base,
   the time of one evaluation of the site terms and all their gradients (∂/∂A, ∂/∂b, ∂/∂θ), divided by N,
   against the paper's complexity O(D²K log DK) per site (exact zero padding to D·K) — our default circular
   lattice of length M = 2K costs O(D·K log K) per site instead.  Both paddings are timed; the table also
   shows time/(D²K log₂ DK) and time/(DK log₂ K), whose constancy across D and K checks the scaling.
2. **Optimisation at D = N = 10** (the paper's §4.2: about 8 s for AI KL, 0.2 s for Gaussian KL, Matlab 2009b on a
   2.5 GHz Core 2 Quad): the full ``AIKL(base="skew_normal").fit`` on the Fig. 4 model, with the default
   settings and with the budget of ``demos/aikl_logistic_fig4.py``, as CPU seconds (``time.process_time``,
   which is not inflated by other processes on a shared machine) and wall seconds.

Run ``python -m benchmarks.aikl_timing [--quick]``; results also go to benchmarks/out/aikl_timing.json.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from factors.logistic import logit_point  # noqa: E402
from schedules.handlers import AIKL, BlockTarget, Site  # noqa: E402
from schedules.handlers.aikl import AIKLBound  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"


def _block(rng: np.random.Generator, N: int, D: int) -> BlockTarget:
    Z = 5.0 * rng.normal(size=(N, D))
    ones = np.ones(N)
    return BlockTarget(np.zeros(D), -0.1 * np.eye(D), [Site(Z, logit_point, {"out": (ones, ones)}, {})])


def per_site(D: int, K: int, pad: int | None, N: int = 50, repeat: int = 3, seed: int = 0) -> float:
    """Median CPU seconds per site of one bound-and-gradient evaluation."""
    rng = np.random.default_rng(seed)
    target = _block(rng, N, D)
    bound = AIKLBound(target, "skew_normal", K, pad=pad)
    A = np.eye(D) + 0.3 * np.tril(rng.normal(size=(D, D)), -1)
    b, theta = 0.1 * rng.normal(size=D), 0.5 * rng.normal(size=D)
    bound.freeze(A, b, theta)
    bound.terms(A, b, theta)  # warm-up
    times = []
    for _ in range(repeat):
        t = time.process_time()
        bound.terms(A, b, theta)
        times.append(time.process_time() - t)
    return float(np.median(times)) / N


def optimisation(quick: bool) -> list[dict]:
    from demos.aikl_logistic_fig4 import HANDLER, block, make_model

    out = []
    n_models = 2 if quick else 5
    for label, handler in (("default AIKL(base='skew_normal')", AIKL(base="skew_normal")),
                           ("demo budget (Fig. 4)", HANDLER)):
        for m in range(n_models):
            Z, _ = make_model(np.random.default_rng(100 + m), 10, 1)
            c, w = time.process_time(), time.perf_counter()
            fit = handler.fit(block(Z), np.zeros(10))
            out.append({"setting": label, "model": m, "cpu": time.process_time() - c, "wall": time.perf_counter() - w,
                        "cpu_gaussian_stage": None, "wall_gaussian": fit.info["time_gaussian"],
                        "B_G": fit.info["gaussian_bound"], "B_AI": fit.log_evidence,
                        "iterations": fit.info["iterations"]})
            r = out[-1]
            print(f"{label:34s} model {m}: cpu {r['cpu']:6.1f} s  wall {r['wall']:6.1f} s  (Gaussian stage wall "
                  f"{r['wall_gaussian']:.2f} s)  B_G {r['B_G']:.4f}  B_AI {r['B_AI']:.4f}  it {r['iterations']}",
                  flush=True)
    return out


def main(quick: bool = False) -> dict:
    Ds = [2, 5, 10, 20] if quick else [2, 5, 10, 20, 40]
    Ks = [64, 256] if quick else [64, 128, 256, 512, 1024]
    rows = []
    print(f"{'D':>3s} {'K':>5s} {'pad':>5s} {'µs/site':>9s} {'/(D²K log₂DK) ns':>18s} {'/(DK log₂K) ns':>16s}")
    for D in Ds:
        for K in Ks:
            for pad in (2, None):
                t = per_site(D, K, pad)
                r = {"D": D, "K": K, "pad": "2K" if pad else "D·K (paper)", "sec_per_site": t,
                     "per_D2KlogDK": t / (D * D * K * np.log2(D * K)), "per_DKlogK": t / (D * K * np.log2(K))}
                rows.append(r)
                print(f"{D:3d} {K:5d} {r['pad']:>5s} {1e6 * t:9.1f} {1e9 * r['per_D2KlogDK']:18.3f} "
                      f"{1e9 * r['per_DKlogK']:16.3f}", flush=True)
    ref = [r for r in rows if r["D"] == 10 and r["K"] == 256]
    for r in ref:
        print(f"D = 10, K = 256, M = {r['pad']}: {1e3 * r['sec_per_site']:.3f} ms per site (bound + all gradients)")
    opt = optimisation(quick)
    for label in dict.fromkeys(r["setting"] for r in opt):
        sel = [r for r in opt if r["setting"] == label]
        print(f"D = N = 10, {label}: median cpu {np.median([r['cpu'] for r in sel]):.1f} s, median wall "
              f"{np.median([r['wall'] for r in sel]):.1f} s (seed: ≈ 8 s AI KL, 0.2 s Gaussian KL, Matlab 2009b)")
    OUT.mkdir(exist_ok=True)
    result = {"per_site": rows, "optimisation": opt}
    (OUT / "aikl_timing.json").write_text(json.dumps(result, indent=1, default=float))
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    main(quick=ap.parse_args().quick)
