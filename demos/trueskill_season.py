"""TrueSkill by expectation propagation (Herbrich, Minka & Graepel 2007): players' skills from a season of
two-player games, and one game's update beside the ``trueskill`` package's.

A season is generated: P players with true skills s_p ~ N(25, (25/3)²), G games between random pairs, each won by
the player with the higher performance s_p + N(0, β²), β = 25/6.  The model (the TrueSkill factor graph, no
draws, no skill drift):

    skill_p ~ N(25, (25/3)²),   perf_winner_g ~ N(skill[winner_g], β²),   perf_loser_g ~ N(skill[loser_g], β²),
    is_positive(perf_winner_g − perf_loser_g) observed True,

fitted by ``fg.EP()``: sequential sweeps over the games until the messages settle (the full EP fixed point,
where TrueSkill's online filter makes one pass).  Only differences of skills meet the data, so the level of the
whole ranking is anchored by the prior alone and settles slowly (a few hundred sweeps of 400 games, about a
second).  Printed: the ranking by posterior mean with its ±2 sd band and
the true skill, Kendall's τ between the posterior means and the true skills, and how many true skills fall in
their ±2 sd band; then a single game between two new players, EP's posterior beside ``trueskill.rate``'s (equal
to 1e-6: the same factor graph), and log Z_EP = log P(win) = log ½.  A figure of the ranking goes to demos/out/.

Run ``python demos/trueskill_season.py [--small] [--seed S]`` (``--small``: 6 players, 40 games, no figure).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

import factorgraph as fg

MU0, SIGMA0, BETA = 25.0, 25.0 / 3.0, 25.0 / 6.0
OUT = Path(__file__).resolve().parent / "out"


def season(players: int, games: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """True skills and the (winner, loser) of each game."""
    rng = np.random.default_rng(seed)
    skill = rng.normal(MU0, SIGMA0, players)
    a = rng.integers(0, players, games)
    b = (a + rng.integers(1, players, games)) % players  # a different opponent
    perf_a = skill[a] + rng.normal(0.0, BETA, games)
    perf_b = skill[b] + rng.normal(0.0, BETA, games)
    won = perf_a > perf_b
    return skill, np.where(won, a, b), np.where(won, b, a)


def trueskill_model(players: int, winner: np.ndarray, loser: np.ndarray) -> fg.Model:
    with fg.Model("trueskill") as m:
        p = fg.plate("players", players)
        g = fg.plate("games", len(winner))
        skill = fg.gaussian("skill", mean=MU0, precision=1.0 / SIGMA0**2, plates=[p])
        perf_w = fg.gaussian("perf_winner", mean=skill[winner], precision=1.0 / BETA**2, plates=[g])
        perf_l = fg.gaussian("perf_loser", mean=skill[loser], precision=1.0 / BETA**2, plates=[g])
        fg.is_positive("won", perf_w - perf_l, observed=True)
    return m


def one_game() -> dict:
    """A first game between two new players: EP's update beside the trueskill package's."""
    r = fg.infer(trueskill_model(2, np.array([0]), np.array([1])), algorithm=fg.EP(tol=1e-13))
    q = r.posterior("skill")
    out = {"ep_mean": q.mean(), "ep_sd": np.sqrt(q.var()), "log_z": r.elbo}
    print("\none game, player 0 beats player 1 (both new):")
    print(f"  fg.EP:      winner {out['ep_mean'][0]:.6f} ± {out['ep_sd'][0]:.6f}, loser {out['ep_mean'][1]:.6f} ± "
          f"{out['ep_sd'][1]:.6f}, log Z_EP = {r.elbo:.6f} (log ½ = {np.log(0.5):.6f})")
    try:
        import trueskill
    except ImportError:
        print("  trueskill:  not installed (pip install trueskill) — skipped")
        return out
    env = trueskill.TrueSkill(mu=MU0, sigma=SIGMA0, beta=BETA, tau=0.0, draw_probability=0.0)
    (a,), (b,) = env.rate([(env.create_rating(),), (env.create_rating(),)], ranks=[0, 1])
    out["ts_mean"], out["ts_sd"] = np.array([a.mu, b.mu]), np.array([a.sigma, b.sigma])
    print(f"  trueskill:  winner {a.mu:.6f} ± {a.sigma:.6f}, loser {b.mu:.6f} ± {b.sigma:.6f}")
    gap = max(np.abs(out["ep_mean"] - out["ts_mean"]).max(), np.abs(out["ep_sd"] - out["ts_sd"]).max())
    print(f"  largest difference: {gap:.2e}")
    return out


def main(small: bool = False, seed: int = 0) -> dict:
    players, games = (6, 40) if small else (20, 400)
    truth, winner, loser = season(players, games, seed)
    r = fg.infer(trueskill_model(players, winner, loser), algorithm=fg.EP(max_iter=3000))
    q = r.posterior("skill")
    mean, sd = q.mean(), np.sqrt(q.var())
    order = np.argsort(-mean)
    print(f"season: {players} players, {games} games; fg.EP {'converged' if r.converged else 'NOT converged'} in "
          f"{r.n_iter} sweeps, log Z_EP = {r.elbo:.3f}")
    print(f"{'rank':>4}  {'player':>6}  {'skill (posterior mean ± 2 sd)':>30}  {'true':>6}  {'games':>5}")
    played = np.bincount(np.r_[winner, loser], minlength=players)
    for k, p in enumerate(order):
        print(f"{k + 1:4d}  {p:6d}  {mean[p]:14.2f} ± {2 * sd[p]:5.2f}{'':9s}  {truth[p]:6.2f}  {played[p]:5d}")
    tau = kendalltau(mean, truth).statistic
    inside = int(np.sum(np.abs(mean - truth) <= 2 * sd))
    print(f"Kendall's τ between posterior means and true skills: {tau:.3f}; true skills inside ±2 sd: "
          f"{inside} of {players}")
    out = {"result": r, "tau": tau, "inside": inside, "players": players, **one_game()}
    if not small:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        OUT.mkdir(exist_ok=True)
        fig, ax = plt.subplots(figsize=(7, 4))
        x = np.arange(players)
        ax.errorbar(x, mean[order], yerr=2 * sd[order], fmt="o", label="posterior mean ± 2 sd (fg.EP)")
        ax.plot(x, truth[order], "x", color="C3", label="true skill")
        ax.set_xlabel("rank")
        ax.set_ylabel("skill")
        ax.legend()
        fig.tight_layout()
        fig.savefig(OUT / "trueskill_ranking.png", dpi=120)
        print(f"figure: {OUT / 'trueskill_ranking.png'}")
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="6 players, 40 games, no figure")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(small=args.small, seed=args.seed)
