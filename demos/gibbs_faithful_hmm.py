"""Old Faithful's waiting times as a two-state Gaussian hidden Markov model: Gibbs sampling against variational
Bayes.

The model is ``models.hmm_model(y, 2, "gaussian")`` (Dirichlet priors on the initial distribution π and the rows
of the transition matrix A, Normal and Gamma priors on each state's mean μ_k and precision τ_k).  Variational
Bayes (``models.hmm``: q(z) q(π) q(A) q(μ) q(τ), q(z) the exact chain posterior given the rest) is scored by
``fg.agreement`` against ``fg.Gibbs`` on the same model, which draws the state path jointly by forward filtering
backward sampling and π, A, μ, τ from their conjugate conditionals.  The states' labels are arbitrary (a chain
may settle on either labelling), so each draw's states are put in the order of the variational state means
before the comparison.  The demo prints the posterior means and sds of μ, τ, π and A from both, the table of
``fg.agreement``, and the largest standardised distance between the means.

Run ``python demos/gibbs_faithful_hmm.py [--small]`` (``--small``: 200 draws per chain instead of 2000).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import factorgraph as fg
from factorgraph import models

try:
    from .faithful_hmm import load
except ImportError:  # run as a script: python demos/gibbs_faithful_hmm.py
    from faithful_hmm import load


def relabel(draws: dict[str, np.ndarray], order: np.ndarray) -> dict[str, np.ndarray]:
    """The draws of π, A, μ, τ with each draw's states permuted so that its k-th smallest mean takes the label of
    the k-th smallest variational mean (``order`` = argsort of those)."""
    p = np.argsort(draws["mu"], axis=-1)  # (chains, draws, K): states by increasing mean
    inv = np.empty_like(p)
    inv[..., order] = p  # new label order[i] <- old state p[i]
    out = {n: np.take_along_axis(draws[n], inv, -1) for n in ("mu", "tau", "pi")}
    rows = np.take_along_axis(draws["A"], inv[..., :, None], -2)
    out["A"] = np.take_along_axis(rows, inv[..., None, :], -1)
    return out


def main(small: bool = False, seed: int = 0) -> dict:
    import arviz as az
    y = load()
    vb = models.hmm(y, 2, "gaussian", seed=seed, n_init=3 if small else 10)
    draws = 200 if small else 2000
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", fg.ConvergenceWarning)
        g = fg.infer(models.hmm_model(y, 2, "gaussian"), algorithm=fg.Gibbs(draws=draws, burn=200, chains=4,
                                                                            seed=seed))
    for w in caught:  # label switching between chains shows as poor mixing before the relabelling
        print(f"  (before relabelling) {w.message}")
    print(f"Gibbs: 4 chains x {draws} draws (+200 burn-in) in {time.perf_counter() - t0:.1f} s; VB: ELBO "
          f"{vb.elbo:.3f} ({vb.n_iter} iterations)")
    order = np.argsort(vb.posterior("mu").mean())
    ref = relabel(g.draws, order)
    table = fg.agreement(vb, az.from_dict(posterior=ref))
    print("\nfg.agreement: variational Bayes against the relabelled Gibbs draws")
    print(table[["mean", "sd", "mean_ref", "sd_ref", "z", "sd_ratio", "mcse_ref"]].round(3).to_string())
    worst = table["z"].idxmax()
    print(f"largest z = |Δmean|/sd: {table['z'].max():.3f} (at {worst}); sd ratios from {table['sd_ratio'].min():.3f} "
          f"to {table['sd_ratio'].max():.3f}")
    mu = ref["mu"].reshape(-1, 2).mean(0)[order]
    A = ref["A"].reshape(-1, 2, 2).mean(0)[np.ix_(order, order)]
    print(f"Gibbs: state means {np.array2string(mu, precision=2)} min; transition matrix (short, long) "
          f"{np.array2string(A, precision=3)}")
    return {"vb": vb, "gibbs": g, "draws": ref, "table": table, "max_z": float(table["z"].max())}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help="200 draws per chain")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(args.small, args.seed)
