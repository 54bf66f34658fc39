"""Old Faithful's waiting times between eruptions as a Gaussian hidden Markov model, K = 1…4 states compared
by their evidence.

The 272 waiting times (minutes, in the order observed) are bimodal, short waits near 55 minutes and long ones
near 80; and they alternate: after a short wait a long one is far more likely than another short one, so a
two-state chain with an anti-persistent transition matrix explains the data better than a two-component
mixture of independent draws.  ``models.hmm(y, K, "gaussian")`` puts Dirichlet priors on the initial
distribution and the rows of the transition matrix and Normal and Gamma priors on each state's mean and
precision, and fits q(z) q(π) q(A) q(μ) q(τ) by variational message passing, q(z) the exact chain posterior
given the rest (forward–backward).  Each K keeps its best of several random starts; the bounds rank K, and
for the best model the posterior mean transition matrix and state means are printed beside hmmlearn's
maximum-likelihood fit (EM) of the same structure when hmmlearn is installed.
The figure (demos/out/faithful_hmm.png) shows the waits and the posterior mean level Σ_k q(z_t = k) E[μ_k].
Run ``python demos/faithful_hmm.py [--small]`` (``--small``: K = 1…3, fewer restarts, no figure).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import factorgraph as fg
from factorgraph import models

try:
    from ._data import data_dir
except ImportError:  # run as a script: python demos/faithful_hmm.py
    from _data import data_dir

OUT = Path(__file__).resolve().parent / "out"


def load() -> np.ndarray:
    """The 272 waiting times (minutes), in the order of the eruptions."""
    return np.genfromtxt(data_dir("faithful") / "data.csv", delimiter=",", skip_header=1)[:, 1]


def main(small: bool = False, seed: int = 0) -> dict:
    y = load()
    short = y[:-1] < 68
    after_short, after_long = np.mean(y[1:][short] >= 68), np.mean(y[1:][~short] >= 68)
    print(f"Old Faithful: {len(y)} waiting times, mean {y.mean():.1f} min; after a short wait (< 68 min) the next "
          f"is long in {after_short:.0%} of cases, after a long one in {after_long:.0%}")
    restarts = 3 if small else 10
    results = {}
    for K in range(1, 4 if small else 5):
        r = models.hmm(y, K, "gaussian", seed=seed, n_init=restarts)
        results[f"K={K}"] = r
        mu = np.sort(np.atleast_1d(r.posterior("mu").mean()))
        print(f"K={K}: ELBO {r.elbo:9.3f} ({r.n_iter} iterations{'' if r.converged else ', not converged'}); "
              f"E[μ] = {np.array2string(mu, precision=1)}")
    print(fg.compare(results))
    mix = models.gaussian_mixture(y[:, None], 2, "diag", n_init=restarts, seed=seed)
    print(f"two-component mixture of independent waits (models.gaussian_mixture, its default priors): "
          f"ELBO {mix.elbo:.3f} (the 2-state HMM: {results['K=2'].elbo:.3f})")
    best = max(results, key=lambda k: results[k].elbo)
    r2 = results["K=2"]
    order = np.argsort(r2.posterior("mu").mean())
    A2 = r2.posterior("A").mean()[np.ix_(order, order)]
    print(f"K=2: posterior mean transition matrix (short, long)\n{np.array2string(A2, precision=3)}")
    out = {"elbo": {k: v.elbo for k, v in results.items()}, "best": best, "mixture_elbo": mix.elbo,
           "traces": {k: v.elbo_trace for k, v in results.items()}, "transition_K2": A2,
           "means_K2": r2.posterior("mu").mean()[order]}
    try:
        from hmmlearn import hmm as hl
    except ImportError:
        hl = None
    if hl is not None:
        em = hl.GaussianHMM(2, covariance_type="diag", n_iter=500, tol=1e-8, random_state=seed,
                            init_params="stmc").fit(y[:, None])
        eo = np.argsort(em.means_[:, 0])
        out["em_means"] = em.means_[eo, 0]
        out["em_transition"] = em.transmat_[np.ix_(eo, eo)]
        print(f"hmmlearn EM (maximum likelihood), K=2: means {np.array2string(out['em_means'], precision=2)}, "
              f"transition\n{np.array2string(out['em_transition'], precision=3)}")
    if not small:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        r = results[best]
        level = r.posterior("z").mean()[0] @ np.atleast_1d(r.posterior("mu").mean())
        OUT.mkdir(exist_ok=True)
        fig, ax = plt.subplots(figsize=(10, 3.5))
        ax.plot(y, "o-", ms=3, lw=0.6, color="0.5", label="waiting time")
        ax.plot(level, lw=1.5, label=f"posterior mean level ({best})")
        ax.set_xlabel("eruption")
        ax.set_ylabel("minutes")
        ax.legend(loc="lower right")
        fig.tight_layout()
        fig.savefig(OUT / "faithful_hmm.png", dpi=120)
        print(f"figure: {OUT / 'faithful_hmm.png'}")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", action="store_true")
    main(small=ap.parse_args().small)
