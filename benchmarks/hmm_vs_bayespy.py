"""A VB-HMM sweep (Gaussian emissions, Dirichlet π and A rows, Normal and Gamma emission parameters): the
library against BayesPy's ``CategoricalMarkovChain`` + ``Mixture`` on the same model, data and update order.

Both run ``--sweeps`` sweeps from the same start (the emission means' q set alike, everything else at the
prior); the time per sweep of each and the ratio are printed, with the difference of the bounds after the
sweeps (the two compute the same iterates: tests/test_markov_chain_bayespy.py checks them to 1e-9).
``--small``: T = 2000.

Run ``python -m benchmarks.hmm_vs_bayespy [--small]`` (BayesPy from the ``test`` extra).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import factorgraph as fg
from distributions import Gaussian


def _data(rng, K, T):
    A = np.full((K, K), 0.1 / (K - 1)) + np.eye(K) * (0.9 - 0.1 / (K - 1))
    z = np.empty(T, dtype=int)
    z[0] = 0
    u = rng.random(T)
    cum = np.cumsum(A, 1)
    for t in range(1, T):  # the benchmark's data generator, not library code
        z[t] = min(np.searchsorted(cum[z[t - 1]], u[t]), K - 1)
    return np.linspace(-5, 5, K)[z] + rng.normal(0, 0.7, T)


def main(small: bool = False, K: int = 10, sweeps: int = 10) -> dict:
    from bayespy.inference import VB
    from bayespy.nodes import CategoricalMarkovChain, Dirichlet, Gamma, GaussianARD, Mixture

    T = 2_000 if small else 100_000
    rng = np.random.default_rng(0)
    y = _data(rng, K, T)
    m0 = np.linspace(-4, 4, K) + rng.normal(0, 0.3, K)
    order = ["z", "pi", "A", "tau", "mu"]

    with fg.Model("vb-hmm") as m:
        k, n, t = fg.plate("k", K), fg.plate("n", 1), fg.plate("t", T)
        pi = fg.dirichlet("pi", np.ones(K))
        A = fg.dirichlet("A", np.ones(K), plates=[k])
        z = fg.markov_chain("z", initial=pi, transition=A, plates=[n, t])
        mu = fg.gaussian("mu", 0.0, precision=0.01, plates=[k])
        tau = fg.gamma("tau", 2.0, 2.0, plates=[k])
        fg.gaussian("y", mu[z], precision=tau[z], plates=[n, t], observed=y[None])
    init = {"mu": Gaussian(m0, precision=np.full(K, 4.0))}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a fixed number of sweeps: unconverged on purpose
        fg.infer(m, init=init, schedule=order, tol=None, max_iter=2, progress=False)  # warm-up (numba cache)
        t0 = time.perf_counter()
        r = fg.infer(m, init=init, schedule=order, tol=None, max_iter=sweeps, progress=False)
        t_ours = (time.perf_counter() - t0) / sweeps

    bpi = Dirichlet(np.ones(K))
    bA = Dirichlet(np.ones(K), plates=(K,))
    nodes = {"pi": bpi, "A": bA, "z": CategoricalMarkovChain(bpi, bA, states=T, plates=(1,)),
             "mu": GaussianARD(0.0, 0.01, plates=(K,)), "tau": Gamma(2.0, 2.0, plates=(K,))}
    Y = Mixture(nodes["z"], GaussianARD, nodes["mu"], nodes["tau"])
    Y.observe(y[None])
    nodes["mu"].initialize_from_parameters(m0, np.full(K, 4.0))
    Q = VB(Y, *nodes.values())
    t0 = time.perf_counter()
    for _ in range(sweeps):
        Q.update(*[nodes[o] for o in order], verbose=False)
    t_bp = (time.perf_counter() - t0) / sweeps
    gap = abs(r.elbo - Q.compute_lowerbound())
    print(f"VB-HMM sweep, T = {T:.0e}, K = {K}, {sweeps} sweeps: library {t_ours * 1e3:.1f} ms/sweep, BayesPy "
          f"{t_bp * 1e3:.1f} ms/sweep, speed-up {t_bp / t_ours:.1f}x (bounds after the sweeps differ by {gap:.1e})")
    return {"ours": t_ours, "bayespy": t_bp, "speedup": t_bp / t_ours, "gap": gap}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--sweeps", type=int, default=10)
    a = ap.parse_args()
    main(a.small, sweeps=a.sweeps)
