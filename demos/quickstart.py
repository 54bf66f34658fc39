"""Quickstart: the README example.

1. A Gaussian with unknown mean and precision (``fg.gaussian``, ``fg.gamma``, a plate ``n``).
2. Bayesian linear regression with the canned ``models.linear_regression`` and its Student-t
   predictive ``models.linear_predictive``.
3. ``fg.compare`` of the shared-α model against the ARD model on the same data.

Run ``python demos/quickstart.py`` (``--small`` for a fast run; ``--plot`` also saves the evidence comparison
as a bar chart, ``factorgraph.plots.evidence_comparison``, to ``demos/out/quickstart_evidence.png``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import factorgraph as fg
from factorgraph import models


def _table(headers: list[str], rows: list[list[object]]) -> str:
    """A plain fixed-width table (floats with 4 significant decimals)."""
    cells = [[f"{c:.4f}" if isinstance(c, float) else str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    line = "  ".join(f"{h:>{w}}" for h, w in zip(headers, widths, strict=True))
    out = [line, "-" * len(line)]
    out += ["  ".join(f"{c:>{w}}" for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(out)


def main(small: bool = False, seed: int = 0, plot: bool = False) -> dict:
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    N = 50 if small else 200
    true_mu, true_sd = 2.5, 0.8
    data = rng.normal(true_mu, true_sd, size=N)
    X = np.column_stack([np.ones(N), rng.standard_normal((N, 5))])
    true_w = np.array([1.0, 2.0, -1.5, 0.0, 0.0, 0.0])  # three irrelevant inputs
    y = X @ true_w + 0.5 * rng.standard_normal(N)
    X_new = np.array([[1.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0, 0.0, 0.0],
                      [1.0, -2.0, 1.0, 0.5, -0.5, 0.0]])

    # ---------------------------------------------------------------- the README example
    # 1. unknown mean and precision
    with fg.Model("gaussian") as m:
        n = fg.plate("n", N)
        mu = fg.gaussian("mu", mean=0.0, precision=1e-2)
        tau = fg.gamma("tau", shape=1.0, rate=1.0)
        fg.gaussian("x", mean=mu, precision=tau, plates=[n], observed=data)
    r = fg.infer(m)
    q_mu, q_tau = r.posterior("mu"), r.posterior("tau")

    # 2. Bayesian linear regression (Drugowitsch 2014): joint q(w, tau), shrinkage q(alpha)
    shared = models.linear_regression(X, y)
    pred = models.linear_predictive(shared, X_new)  # Student-t: mean, precision, dof

    # 3. shared alpha vs one alpha per input (ARD): compare the evidence bounds
    ard = models.linear_regression(X, y, ard=True)
    comparison = fg.compare({"shared alpha": shared, "ARD": ard})
    # ---------------------------------------------------------------- end of the example

    print(f"1. Gaussian with unknown mean and precision: N = {N}, data ~ N({true_mu}, {true_sd}^2)")
    print(_table(["quantity", "truth", "posterior mean", "posterior sd", "sample estimate"], [
        ["mu", true_mu, float(q_mu.mean()), float(np.sqrt(q_mu.var())), float(data.mean())],
        ["tau", 1 / true_sd**2, float(q_tau.mean()), float(np.sqrt(q_tau.var())), float(1 / data.var(ddof=1))],
    ]))
    print(f"   ELBO = {r.elbo:.4f} ({r.evidence_kind}), {r.n_iter} iterations, converged = {r.converged}\n")

    q_w = shared.posterior("w")
    print(f"2. Bayesian linear regression: N = {N}, D = {X.shape[1]}, noise sd 0.5")
    print(_table(["coef", "truth", "E[w]", "sd[w]"], [
        [f"w{i}", float(true_w[i]), float(q_w.mean()[i]), float(np.sqrt(q_w.var()[i]))] for i in range(len(true_w))
    ]))
    print(f"   E[tau] = {float(q_w.shape / q_w.rate):.4f} (truth {1 / 0.25:.1f}), E[alpha] = "
          f"{float(shared.posterior('alpha').mean()):.4f}, bound = {shared.elbo:.4f}")
    print("   predictive (Student-t) at new inputs:")
    print(_table(["x_new", "truth E[y]", "pred mean", "pred sd", "dof"], [
        [str(np.round(X_new[i, 1:], 2).tolist()), float(X_new[i] @ true_w), float(pred.mean[i]),
         float(np.sqrt(pred.var()[i])), float(pred.dof)] for i in range(len(X_new))
    ]))
    e_alpha = ard.posterior("alpha").mean()
    print("   ARD: E[alpha_i] per input (large = switched off): "
          + ", ".join(f"{a:.3g}" for a in np.atleast_1d(e_alpha)))
    print("\n3. Model comparison by the evidence bound:")
    print(comparison)
    print(f"   best: {comparison.best()}")
    figure = None
    if plot:
        figure = _plot_comparison(comparison)
        print(f"   figure: {figure}")
    elapsed = time.perf_counter() - t0
    print(f"\n[quickstart: {elapsed:.2f} s]")
    return {
        "mu_mean": float(q_mu.mean()), "mu_sd": float(np.sqrt(q_mu.var())), "tau_mean": float(q_tau.mean()),
        "gaussian_elbo": float(r.elbo), "gaussian_elbo_trace": np.asarray(r.elbo_trace),
        "w_mean": np.asarray(q_w.mean()), "true_w": true_w, "noise_precision": float(q_w.shape / q_w.rate),
        "pred_mean": np.asarray(pred.mean), "pred_sd": np.sqrt(pred.var()), "pred_truth": X_new @ true_w,
        "ard_alpha": np.asarray(e_alpha), "evidence": dict(zip(comparison.names, comparison.evidence.tolist(),
                                                                strict=True)),
        "best_model": comparison.best(), "time": elapsed, "figure": figure,
    }


def _plot_comparison(comparison: fg.Comparison):
    """The evidence comparison as a bar chart, saved under demos/out/ (the Agg backend: nothing is shown)."""
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from factorgraph import plots

    out = Path(__file__).resolve().parent / "out"
    out.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    plots.evidence_comparison(comparison, ax=ax)
    ax.set_ylim(min(comparison.evidence) - 10, max(comparison.evidence) + 5)
    fig.tight_layout()
    path = out / "quickstart_evidence.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="a small, fast run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot", action="store_true", help="save the evidence comparison as a bar chart")
    a = ap.parse_args()
    main(small=a.small, seed=a.seed, plot=a.plot)
