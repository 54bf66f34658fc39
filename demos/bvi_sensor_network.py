"""Sensor-network localisation with boosting VI: Guo et al. (2016), §5.3, Fig. 4 and 6.

Eleven sensors on the plane; the last three are at known positions and the first eight unknown
(x ∈ R¹⁶).  Each pair (i, j) is observed with probability exp(−‖x_i − x_j‖²/(2R²)), and an observed pair
reports its distance with Gaussian noise, Y_ij ~ N(‖x_i − x_j‖, σ²), R = 0.3, σ = 0.02 (the setting of Ahn
et al. 2013 and Lan et al. 2014 that the paper follows).  The log posterior, over pairs with at least one
unknown sensor, is

    log p(x | Z, Y) = Σ_i log N(x_i | 0, 10² I) + Σ_{Z_ij = 1} [−d_ij²/(2R²) + log N(Y_ij | d_ij, σ²)]
                      + Σ_{Z_ij = 0} log(1 − exp(−d_ij²/(2R²))) + const,   d_ij = ‖x_i − x_j‖.

Assumptions (the paper gives none of these): the prior N(0, 10² I) per sensor (as in Lan et al. 2014), true
positions drawn uniformly on the unit square (seeded) and redrawn until every unknown sensor has at least two
observed distances (``make_problem``).  The reference posterior is a long parallel-tempering
random-walk Metropolis run written here in numpy (tempered levels β = 1 … 0.02, adaptive proposal
covariance per level during burn-in, swaps between neighbouring levels), standing in for the paper's NUTS
reference.  BVI starts from the Laplace approximation at the best of a few mode searches and adds
components; accuracy is the relative error of the posterior mean, REM = ‖x̄_q − x̄_ref‖₁/‖x̄_ref‖₁ (the paper's eq. 26),
against time, as in Fig. 4; Fig. 6 (posterior draws per sensor) is drawn for BVI, the Laplace start and the
reference.

Run ``python demos/bvi_sensor_network.py [--small] [--seed S]``; figures go to ``demos/out/``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import factorgraph as fg

OUT = Path(__file__).resolve().parent / "out"
R, SIGMA, PRIOR_SD = 0.3, 0.02, 10.0
N_SENSORS, N_KNOWN = 11, 3


def make_problem(seed: int = 0, min_links: int = 2) -> dict:
    """True positions, the known sensors and simulated observations (Z, Y) for every pair.

    Positions and observations are redrawn (from the same seeded stream) until every unknown sensor has at
    least ``min_links`` observed distances: with fewer, a sensor's posterior is its broad prior cut by the
    unobserved pairs, not a localisation problem.  With exactly two, a sensor can be mirrored across the
    line through its two neighbours: the multimodality the paper describes.
    """
    rng = np.random.default_rng(seed)
    i, j = np.triu_indices(N_SENSORS, 1)
    keep = (i < N_SENSORS - N_KNOWN) | (j < N_SENSORS - N_KNOWN)  # pairs with an unknown sensor
    i, j = i[keep], j[keep]
    for _ in range(10_000):
        pos = rng.random((N_SENSORS, 2))
        d = np.linalg.norm(pos[i] - pos[j], axis=1)
        z = rng.random(d.size) < np.exp(-(d**2) / (2 * R**2))
        links = np.bincount(i[z], minlength=N_SENSORS) + np.bincount(j[z], minlength=N_SENSORS)
        if links[: N_SENSORS - N_KNOWN].min() >= min_links:
            break
    y = np.where(z, d + SIGMA * rng.standard_normal(d.size), np.nan)
    return {"truth": pos, "known": pos[-N_KNOWN:], "i": i, "j": j, "z": z, "y": y, "links": links}


def log_posterior(prob: dict):
    """(logp, grad) of the 16-D posterior, both vectorised over a batch (S, 16)."""
    known, i, j, z, y = prob["known"], prob["i"], prob["j"], prob["z"], prob["y"]
    nu = N_SENSORS - N_KNOWN
    const = -nu * np.log(2 * np.pi * PRIOR_SD**2) - np.count_nonzero(z) * 0.5 * np.log(2 * np.pi * SIGMA**2)

    def positions(W: np.ndarray) -> np.ndarray:
        S = W.shape[0]
        return np.concatenate([W.reshape(S, nu, 2), np.broadcast_to(known, (S, N_KNOWN, 2))], axis=1)

    def parts(W: np.ndarray):
        P = positions(np.atleast_2d(W))
        diff = P[:, i] - P[:, j]  # (S, pairs, 2)
        d2 = np.einsum("spk,spk->sp", diff, diff)
        d = np.sqrt(np.maximum(d2, 1e-300))
        u = d2 / (2 * R**2)
        with np.errstate(divide="ignore"):
            obs = -u - 0.5 * ((np.nan_to_num(y) - d) / SIGMA) ** 2
            miss = np.log(-np.expm1(-u))
        return P, diff, d, u, obs, miss

    def logp(W: np.ndarray) -> np.ndarray:
        W = np.atleast_2d(W)
        _, _, _, _, obs, miss = parts(W)
        return const - 0.5 * np.sum(W**2, 1) / PRIOR_SD**2 + np.where(z, obs, miss).sum(1)

    def grad(W: np.ndarray) -> np.ndarray:
        W = np.atleast_2d(W)
        P, diff, d, u, _, _ = parts(W)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # ∂/∂d of each pair's term, then ∂d/∂x_i = diff/d
            g_obs = -d / R**2 + (np.nan_to_num(y) - d) / SIGMA**2
            g_miss = (d / R**2) / np.expm1(u)
            gd = np.where(z, g_obs, g_miss)
            vec = (gd / d)[:, :, None] * diff  # (S, pairs, 2)
        G = np.zeros_like(P)
        np.add.at(G, (slice(None), i), vec)
        np.add.at(G, (slice(None), j), -vec)
        return G[:, : N_SENSORS - N_KNOWN].reshape(W.shape) - W / PRIOR_SD**2

    return logp, grad


def parallel_tempering(logp, x0: np.ndarray, n_iter: int, seed: int, n_chains: int = 8,
                       betas: np.ndarray | None = None, burn: float = 0.3, thin: int = 10) -> np.ndarray:
    """Random-walk Metropolis on tempered copies p^β (vectorised over levels × chains) with swaps between
    neighbouring levels every iteration; the proposal covariance of each level adapts during burn-in
    (2.38²/D times the level's sample covariance).  Returns the β = 1 draws after burn-in, thinned."""
    rng = np.random.default_rng(seed)
    betas = np.geomspace(1.0, 0.02, 10) if betas is None else betas
    L, D = betas.size, x0.shape[-1]
    X = np.repeat(x0[None], L * n_chains, 0).reshape(L, n_chains, D) + 0.01 * rng.standard_normal((L, n_chains, D))
    lp = logp(X.reshape(-1, D)).reshape(L, n_chains)
    chol = np.repeat((0.01 * np.eye(D))[None], L, 0)
    n_burn = int(burn * n_iter)
    hist: list[np.ndarray] = []
    keep: list[np.ndarray] = []
    for t in range(n_iter):
        prop = X + np.einsum("lij,lcj->lci", chol, rng.standard_normal((L, n_chains, D)))
        lp_new = logp(prop.reshape(-1, D)).reshape(L, n_chains)
        acc = np.log(rng.random((L, n_chains))) < betas[:, None] * (lp_new - lp)
        X = np.where(acc[:, :, None], prop, X)
        lp = np.where(acc, lp_new, lp)
        # swaps between levels (l, l + 1), even and odd pairs alternately
        lo = np.arange(t % 2, L - 1, 2)
        a = (betas[lo] - betas[lo + 1])[:, None] * (lp[lo + 1] - lp[lo])
        sw = np.log(rng.random(a.shape)) < a
        for arr in (X, lp):
            upper, lower = arr[lo + 1].copy(), arr[lo].copy()
            arr[lo] = np.where(sw.reshape(sw.shape + (1,) * (arr.ndim - 2)), upper, lower)
            arr[lo + 1] = np.where(sw.reshape(sw.shape + (1,) * (arr.ndim - 2)), lower, upper)
        if t < n_burn:
            hist.append(X.copy())
            if (t + 1) % 500 == 0:
                H = np.concatenate(hist[-2000:], axis=1)  # (L, draws, D)
                for lev in range(L):
                    C = np.cov(H[lev].T) * 2.38**2 / D + 1e-8 * np.eye(D)
                    chol[lev] = np.linalg.cholesky(C)
        elif (t - n_burn) % thin == 0:
            keep.append(X[0].copy())
    return np.concatenate(keep, axis=0)


def best_start(logp, grad, rng: np.random.Generator, n: int = 8) -> np.ndarray:
    """The highest of a few L-BFGS mode searches from uniform draws on the unit square."""
    from scipy import optimize

    best = None
    for _ in range(n):
        x0 = rng.random(2 * (N_SENSORS - N_KNOWN))
        res = optimize.minimize(lambda w: (-float(logp(w[None])[0]), -grad(w[None])[0]), x0, jac=True,
                                method="L-BFGS-B")
        if best is None or res.fun < best.fun:
            best = res
    return best.x


def rem(mean: np.ndarray, ref: np.ndarray) -> float:
    """Relative error of the mean, ‖x̄ − x̄_ref‖₁ / ‖x̄_ref‖₁ (the paper's eq. 26)."""
    return float(np.abs(mean - ref).sum() / np.abs(ref).sum())


def main(small: bool = False, seed: int = 0) -> dict:
    t0 = time.perf_counter()
    prob = make_problem(seed)
    logp, grad = log_posterior(prob)
    n_obs = int(prob["z"].sum())
    print(f"Guo et al. (2016) §5.3: {N_SENSORS} sensors ({N_KNOWN} known), R = {R}, σ = {SIGMA}; "
          f"{n_obs} of {prob['z'].size} pairs observed; x ∈ R^{2 * (N_SENSORS - N_KNOWN)}")
    rng = np.random.default_rng(seed)
    x_start = best_start(logp, grad, rng, 4 if small else 8)

    n_iter = 6000 if small else 60_000
    t = time.perf_counter()
    ref = parallel_tempering(logp, x_start, n_iter, seed + 1)
    t_mcmc = time.perf_counter() - t
    ref_mean = ref.mean(0)
    print(f"reference: parallel tempering, {n_iter} iterations × 8 chains × 10 levels, {len(ref)} kept draws "
          f"({t_mcmc:.1f} s)")

    n_comp = 12 if small else 60
    h = fg.BVI(n_components=n_comp, seed=seed, n_final_samples=4000)
    t = time.perf_counter()
    r = fg.approximate(logp, x_start, h, grad=grad, vectorized=True)
    t_bvi = time.perf_counter() - t
    q = r.posterior
    alphas, times = r.info["alpha_trace"], r.info["time_trace"]
    rems = np.array([rem(q.head(k, alphas).mean(), ref_mean) for k in range(1, q.n_components + 1)])
    laplace = q.head(1, alphas)
    draws_bvi = q.sample(len(ref), np.random.default_rng(seed + 2))
    draws_la = laplace.sample(len(ref), np.random.default_rng(seed + 3))
    sd_ref = ref.std(0)
    res = {
        "rem_laplace": float(rems[0]), "rem_bvi": float(rems[-1]), "rem_trace": rems, "time_trace": times,
        "n_components": q.n_components, "elbo": r.elbo, "elbo_se": r.elbo_se, "elbo_trace": r.info["elbo_trace"],
        "sd_ratio_bvi": float(np.median(draws_bvi.std(0) / sd_ref)),
        "sd_ratio_laplace": float(np.median(draws_la.std(0) / sd_ref)),
        "time_bvi": t_bvi, "time_mcmc": t_mcmc, "stopped": r.info["stopped"], "rejections": r.info["rejections"],
    }
    print(f"\n{'':22s} {'REM':>8s} {'median sd / ref sd':>20s}")
    print(f"{'Laplace (BVI start)':22s} {res['rem_laplace']:8.4f} {res['sd_ratio_laplace']:20.3f}")
    print(f"{f'BVI, {q.n_components} components':22s} {res['rem_bvi']:8.4f} {res['sd_ratio_bvi']:20.3f}")
    print(f"BVI: {t_bvi:.1f} s ({r.info['stopped']}); ELBO {r.elbo:.3f} ± {r.elbo_se:.3f} "
          f"(trace {r.info['elbo_trace'][0]:.3f} → {r.info['elbo_trace'][-1]:.3f})")
    claims = {
        "Fig. 4: BVI's REM falls as components are added (last ≤ first)": rems[-1] <= rems[0] + 1e-12,
        "Fig. 6: BVI's spread is closer to the reference's than its Gaussian start's":
            abs(np.log(res["sd_ratio_bvi"])) <= abs(np.log(res["sd_ratio_laplace"])),
    }
    print("\nthe paper's findings (its figures give no numbers; ADVI is not run here), and whether this run "
          "shows them:")
    for text, ok in claims.items():
        print(f"  {'yes' if ok else 'no':3s}  {text}")
    res["claims"] = claims
    res["figures"] = _figures(prob, ref, draws_bvi, draws_la, rems, times, small)
    res["runtime"] = time.perf_counter() - t0
    print(f"\nfigures: {', '.join(res['figures'])}\nruntime {res['runtime']:.1f} s")
    return res


def _figures(prob, ref, draws_bvi, draws_la, rems, times, small: bool) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    OUT.mkdir(parents=True, exist_ok=True)
    suffix = "_small" if small else ""
    nu = N_SENSORS - N_KNOWN
    allx = np.concatenate([ref.reshape(-1, 2), prob["truth"]])
    lo, hi = np.percentile(allx, 0.5, axis=0) - 0.1, np.percentile(allx, 99.5, axis=0) + 0.1
    lims = list(zip(lo, hi, strict=True))
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.6))
    for ax, draws, title in zip(axes[:3], (ref, draws_bvi, draws_la),
                                ("reference (parallel tempering)", "BVI", "Laplace (BVI start)"), strict=True):
        sub = draws[:: max(1, len(draws) // 1500)].reshape(-1, nu, 2)
        for k in range(nu):
            ax.scatter(sub[:, k, 0], sub[:, k, 1], s=1, alpha=0.3)
        ax.scatter(*prob["truth"][:nu].T, marker="x", c="k", s=30, label="true (unknown)")
        ax.scatter(*prob["known"].T, marker="o", facecolors="none", edgecolors="k", s=40, label="known")
        ax.set(title=title, xlim=lims[0], ylim=lims[1], aspect="equal")
    axes[0].legend(fontsize=7, loc="upper right")
    axes[3].plot(times, rems, "o-", ms=3)
    axes[3].set(xlabel="BVI time (s)", ylabel="REM", title="relative error of the mean (Fig. 4)")
    fig.tight_layout()
    p = OUT / f"bvi_sensor_network{suffix}.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return [str(p)]


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--small", action="store_true", help="short runs (for tests)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    main(small=a.small, seed=a.seed)
