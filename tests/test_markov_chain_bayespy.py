"""The VB hidden Markov model against BayesPy's ``CategoricalMarkovChain`` (Luttinen 2016): the same model,
factorisation, initialisation and update order reach the same fixed point and the same bound, to 1e-8.

Both libraries hold q(z_1..z_T) as the exact chain posterior given the emission messages (forward–backward),
with Dirichlet q(π) and q(A) rows and mean-field emission parameters.  Each case starts the emission means
at the same q, every other factor at its prior, and updates in the library's schedule order.
"""

from __future__ import annotations

import numpy as np
import pytest

import factorgraph as fg
from distributions import Gaussian as FgGaussian

pytest.importorskip("bayespy")  # part of the test extra, installed by .ci/run
from bayespy.inference import VB  # noqa: E402
from bayespy.nodes import CategoricalMarkovChain, Dirichlet, Gamma, GaussianARD, Mixture  # noqa: E402


def _data(rng, K, T, N):
    A = np.full((K, K), 0.15 / (K - 1)) + np.eye(K) * (0.85 - 0.15 / (K - 1))
    means = np.linspace(-3.0, 3.0, K)
    y = np.empty((N, T))
    for n in range(N):
        z = rng.integers(K)
        for t in range(T):
            z = rng.choice(K, p=A[z]) if t else z
            y[n, t] = rng.normal(means[z], 0.8)
    return y


def _run(K, T, N, seed, sweeps):
    rng = np.random.default_rng(seed)
    y = _data(rng, K, T, N)
    m0 = rng.normal(0.0, 2.0, K)  # the shared starting q(mu): means m0, precisions 4
    with fg.Model("vb-hmm") as m:
        k, n, t = fg.plate("k", K), fg.plate("n", N), fg.plate("t", T)
        pi = fg.dirichlet("pi", np.full(K, 1.0))
        A = fg.dirichlet("A", np.full(K, 1.0), plates=[k])
        z = fg.markov_chain("z", initial=pi, transition=A, plates=[n, t])
        mu = fg.gaussian("mu", 0.0, precision=0.01, plates=[k])
        tau = fg.gamma("tau", 2.0, 2.0, plates=[k])
        fg.gaussian("y", mu[z], precision=tau[z], plates=[n, t], observed=y)
    init = {"mu": FgGaussian(m0, precision=np.full(K, 4.0))}
    order = ["z", "pi", "A", "tau", "mu"]  # the chain first: nothing reads its starting q
    r = fg.infer(m, init=init, schedule=order, tol=None, max_iter=sweeps, progress=False)

    bpi = Dirichlet(np.full(K, 1.0))
    bA = Dirichlet(np.full(K, 1.0), plates=(K,))
    nodes = {"pi": bpi, "A": bA, "z": CategoricalMarkovChain(bpi, bA, states=T, plates=(N,)),
             "mu": GaussianARD(0.0, 0.01, plates=(K,)), "tau": Gamma(2.0, 2.0, plates=(K,))}
    Y = Mixture(nodes["z"], GaussianARD, nodes["mu"], nodes["tau"])
    Y.observe(y)
    nodes["mu"].initialize_from_parameters(m0, np.full(K, 4.0))
    Q = VB(Y, *nodes.values())
    for _ in range(sweeps):
        Q.update(*[nodes[o] for o in order], verbose=False)
    return r, Q, nodes, order


@pytest.mark.parametrize(("K", "T", "N", "seed"), [(2, 60, 1, 0), (3, 40, 3, 1)])
def test_vb_hmm_matches_bayespy(K, T, N, seed):
    r, Q, nodes, order = _run(K, T, N, seed, sweeps=300)
    assert abs(r.elbo_trace[-1] - r.elbo_trace[-2]) < 1e-10 * abs(r.elbo)  # at the fixed point
    np.testing.assert_allclose(r.elbo, Q.compute_lowerbound(), rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(r.posterior("mu").mean(), nodes["mu"].get_moments()[0], rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(r.posterior("tau").mean(), nodes["tau"].get_moments()[0], rtol=1e-8, atol=1e-8)
    elogA = nodes["A"].get_moments()[0]
    np.testing.assert_allclose(r.posterior("A").expected_stats()[0], elogA, rtol=1e-8, atol=1e-8)
    first, pairs = nodes["z"].get_moments()  # BayesPy: q(z_1) (N, K) and q(z_{t-1}, z_t) (N, T-1, K, K)
    qz = r.posterior("z")
    np.testing.assert_allclose(qz.marginals[:, 0], first, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(qz.marginals[:, 1:], pairs.sum(-2), rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(qz.pair_counts, pairs.sum(1), rtol=1e-8, atol=1e-8)


@pytest.mark.filterwarnings("ignore::factorgraph.ConvergenceWarning")  # 3 sweeps on purpose
def test_vb_hmm_iterates_agree_before_convergence():
    """Not only the fixed point: after 3 sweeps from the same start the bounds agree too (same update order)."""
    r, Q, nodes, _ = _run(3, 30, 2, 5, sweeps=3)
    np.testing.assert_allclose(r.elbo, Q.compute_lowerbound(), rtol=1e-9)


def test_benchmark_runs_small():
    """The benchmark's small case runs and both libraries reach the same bound (its timing is not asserted)."""
    from benchmarks.hmm_vs_bayespy import main

    out = main(small=True, sweeps=3)
    assert out["gap"] < 1e-8 * 2000
