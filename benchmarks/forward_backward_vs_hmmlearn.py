"""Forward–backward on one chain (T steps, K states): the library's numba kernel against hmmlearn's compiled one.

Both compute, from the same per-step log-likelihoods, the log-likelihood, the smoothed marginals and the summed
pairwise (transition) counts, in the scaled form.  hmmlearn's path is ``_hmmc.forward_scaling``,
``backward_scaling`` and ``compute_scaling_xi_sum`` (what its EM calls per sequence) plus the marginals
(``fwd * bwd``, normalised) and the exponentiation of the log-likelihoods (shifted by each step's maximum) it
needs; the library's is ``factors.kernels.forward_backward.forward_backward``.  Best of ``--repeat`` runs each,
after a warm-up; the ratio is printed.  ``--small``: T = 1e5.

Run ``python -m benchmarks.forward_backward_vs_hmmlearn [--small]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from hmmlearn import _hmmc

from factors.kernels.forward_backward import forward_backward


def _hmmlearn(pi, A, logb):
    m = logb.max(1, keepdims=True)
    b = np.exp(logb - m)
    ll, fwd, scale = _hmmc.forward_scaling(pi, A, b)
    bwd = _hmmc.backward_scaling(pi, A, b, scale)
    xi = _hmmc.compute_scaling_xi_sum(fwd, A, bwd, b)
    post = fwd * bwd
    post /= post.sum(1, keepdims=True)
    return ll + m.sum(), post, xi


def _best(fn, repeat):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main(small: bool = False, repeat: int = 3) -> dict:
    T, K = (100_000 if small else 1_000_000), 10
    rng = np.random.default_rng(0)
    pi = rng.dirichlet(np.ones(K))
    A = rng.dirichlet(np.ones(K), size=K)
    logb = rng.normal(0, 2, (T, K))
    lengths = np.array([T])
    ours = lambda: forward_backward(logb[None], np.log(pi), np.log(A), lengths)  # noqa: E731
    theirs = lambda: _hmmlearn(pi, A, logb)  # noqa: E731
    ours(), theirs()  # warm-up (numba compilation or cache load)
    t_ours, (g, xi, logz) = _best(ours, repeat)
    t_theirs, (ll, post, xi2) = _best(theirs, repeat)
    diff = max(abs(logz[0] - ll), np.abs(g[0] - post).max(), np.abs(xi[0] - xi2).max() / T)
    print(f"forward-backward, T = {T:.0e}, K = {K}: library {t_ours * 1e3:.1f} ms, hmmlearn {t_theirs * 1e3:.1f} ms, "
          f"ratio library/hmmlearn = {t_ours / t_theirs:.2f} (max difference {diff:.1e})")
    return {"ours": t_ours, "hmmlearn": t_theirs, "ratio": t_ours / t_theirs, "diff": diff}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", action="store_true")
    main(small=ap.parse_args().small)
