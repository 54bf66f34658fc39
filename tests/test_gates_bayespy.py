"""Gated models against BayesPy (Luttinen 2016): the same model, factorisation, initialisation and update
order give the same fixed point and the same bound, to 1e-8.

BayesPy expresses a gate as ``Mixture(z, Family, parents...)`` (and ``Gate``/``Take`` for selected
parents).  Each case below builds the model in both libraries, starts q(z) at the same random
responsibilities (every other factor at its prior), updates in the library's schedule order until
the bound stops moving, and compares the bound and the posterior moments.
"""

from __future__ import annotations

import numpy as np
import pytest

import factorgraph as fg
from schedules.compile import compile_model

bp = pytest.importorskip("bayespy")  # part of the test extra, installed by .ci/run
from bayespy.inference import VB  # noqa: E402
from bayespy.nodes import Bernoulli as BpBernoulli  # noqa: E402
from bayespy.nodes import Beta, Categorical, Dirichlet, Gamma, Gaussian, GaussianARD, Mixture  # noqa: E402


def _run_both(model, nodes, observed, init, sweeps=400, init_bp=None):
    """The same number of sweeps in the same order from the same start: the iterates agree, and after
    ``sweeps`` both sit at the fixed point (the last sweep moved the bound by less than 1e-12)."""
    order = [v.name for v in compile_model(model, fg.VMP()).order]
    r = fg.infer(model, init={"z": init}, tol=None, max_iter=sweeps)
    assert abs(r.elbo_trace[-1] - r.elbo_trace[-2]) < 1e-12 * abs(r.elbo)
    nodes["z"].initialize_from_parameters(init if init_bp is None else init_bp)
    Q = VB(*observed, *nodes.values())
    for _ in range(sweeps):
        Q.update(*[nodes[o] for o in order], verbose=False)
    return r, Q.compute_lowerbound()


def _close(a, b, tol=1e-8):
    np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float), rtol=tol, atol=tol)


def test_scalar_gaussian_mixture():
    rng = np.random.default_rng(0)
    N, K = 30, 3
    x = np.r_[rng.normal(-3, 1, 10), rng.normal(0, 0.5, 10), rng.normal(3, 1, 10)]
    init = rng.dirichlet(np.ones(K), N)
    with fg.Model() as m:
        k, n = fg.plate("k", K), fg.plate("n", N)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(K)), plates=[n])
        mu = fg.gaussian("mu", 0.0, precision=0.1, plates=[k])
        tau = fg.gamma("tau", 2.0, 2.0, plates=[k])
        fg.gaussian("x", mu[z], precision=tau[z], plates=[n], observed=x)
    pi = Dirichlet(np.ones(K))
    nodes = {"pi": pi, "z": Categorical(pi, plates=(N,)), "mu": GaussianARD(0, 0.1, plates=(K,)),
             "tau": Gamma(2.0, 2.0, plates=(K,))}
    X = Mixture(nodes["z"], GaussianARD, nodes["mu"], nodes["tau"])
    X.observe(x)
    r, L = _run_both(m, nodes, [X], init)
    _close(r.elbo, L)
    _close(r.posterior("mu").mean(), nodes["mu"].get_moments()[0])
    _close(r.posterior("tau").mean(), nodes["tau"].get_moments()[0])
    _close(r.posterior("z").probs, nodes["z"].get_moments()[0])


def test_scalar_gaussian_mixture_with_missing_values():
    """Missing entries drop out of the likelihood.  In BayesPy that model is written by leaving the missing
    points out of the mixture node while keeping their selectors (children-less Categorical nodes):
    ``observe(data, mask=...)`` would instead keep the missing x as latent variables (imputation)."""
    rng = np.random.default_rng(1)
    N, K = 20, 2
    x = np.r_[rng.normal(-2, 1, 10), rng.normal(2, 1, 10)]
    mask = rng.random(N) < 0.8
    init = rng.dirichlet(np.ones(K), N)
    with fg.Model() as m:
        k, n = fg.plate("k", K), fg.plate("n", N)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(K)), plates=[n])
        mu = fg.gaussian("mu", 0.0, precision=0.1, plates=[k])
        fg.gaussian("x", mu[z], precision=1.5, plates=[n], observed=np.where(mask, x, np.nan), mask=mask)
    pi = Dirichlet(np.ones(K))
    z_obs, z_mis = Categorical(pi, plates=(mask.sum(),)), Categorical(pi, plates=((~mask).sum(),))
    mu = GaussianARD(0, 0.1, plates=(K,))
    X = Mixture(z_obs, GaussianARD, mu, 1.5)
    X.observe(x[mask])
    order = [v.name for v in compile_model(m, fg.VMP()).order]
    r = fg.infer(m, init={"z": init}, tol=None, max_iter=400)
    z_obs.initialize_from_parameters(init[mask])
    z_mis.initialize_from_parameters(init[~mask])
    nodes = {"pi": [pi], "mu": [mu], "z": [z_obs, z_mis]}
    Q = VB(X, pi, mu, z_obs, z_mis)
    for _ in range(400):
        Q.update(*[nd for o in order for nd in nodes[o]], verbose=False)
    _close(r.elbo, Q.compute_lowerbound())
    _close(r.posterior("mu").mean(), mu.get_moments()[0])
    _close(r.posterior("z").probs[mask], z_obs.get_moments()[0])
    _close(r.posterior("z").probs[~mask], z_mis.get_moments()[0])


def test_bernoulli_mixture():
    rng = np.random.default_rng(2)
    N, D, K = 40, 5, 2
    P = np.array([[0.9, 0.9, 0.8, 0.1, 0.2], [0.1, 0.2, 0.1, 0.9, 0.8]])
    data = (rng.random((N, D)) < P[rng.integers(0, K, N)]).astype(float)
    init = rng.dirichlet(np.ones(K), N)
    with fg.Model() as m:
        k, n, d = fg.plate("k", K), fg.plate("n", N), fg.plate("d", D)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(K)), plates=[n])
        p = fg.beta("p", 0.5, 0.5, plates=[k, d])
        fg.bernoulli("x", p[z], plates=[n, d], observed=data)
    pi = Dirichlet(np.ones(K))
    nodes = {"pi": pi, "z": Categorical(pi, plates=(N, 1)), "p": Beta([0.5, 0.5], plates=(D, K))}
    X = Mixture(nodes["z"], BpBernoulli, nodes["p"])
    X.observe(data.astype(int))
    r, L = _run_both(m, nodes, [X], init, init_bp=init[:, None, :])
    _close(r.elbo, L)
    _close(np.exp(r.posterior("p").expected_stats()[0]), np.exp(nodes["p"].get_moments()[0][..., 0]).T)
    _close(r.posterior("z").probs, nodes["z"].get_moments()[0][:, 0])


def test_lda():
    """LDA: topics phi_k ~ Dir, per-document theta ~ Dir, z ~ Cat(theta), w ~ Cat(phi[z])."""
    rng = np.random.default_rng(3)
    Dn, L, V, K = 6, 8, 5, 2
    words = rng.integers(0, V, (Dn, L))
    init = rng.dirichlet(np.ones(K), (Dn, L))
    with fg.Model() as m:
        k, doc, w = fg.plate("k", K), fg.plate("doc", Dn), fg.plate("w", L)
        phi = fg.dirichlet("phi", np.full(V, 0.5), plates=[k])
        theta = fg.dirichlet("theta", np.ones(K), plates=[doc])
        z = fg.categorical("z", theta, plates=[doc, w])
        fg.categorical("words", phi[z], plates=[doc, w], observed=words)
    theta = Dirichlet(np.ones(K), plates=(Dn, 1))
    nodes = {"phi": Dirichlet(np.full(V, 0.5), plates=(K,)), "theta": theta, "z": Categorical(theta, plates=(Dn, L))}
    W = Mixture(nodes["z"], Categorical, nodes["phi"])
    W.observe(words)
    r, Lb = _run_both(m, nodes, [W], init)
    _close(r.elbo, Lb)
    _close(r.posterior("phi").expected_stats()[0], nodes["phi"].get_moments()[0])
    _close(r.posterior("z").probs, nodes["z"].get_moments()[0])


def test_mv_gaussian_mixture():
    """Vector Gaussian mixture with a full-covariance component mean and a known precision matrix;
    BayesPy: Mixture(z, Gaussian, mu, Λ)."""
    rng = np.random.default_rng(4)
    N, D, K = 24, 2, 3
    Y = np.array([[-3, 0], [3, 0], [0, 3.0]])[rng.integers(0, K, N)] + rng.normal(size=(N, D))
    Lam = np.array([[1.5, 0.4], [0.4, 0.8]])
    init = rng.dirichlet(np.ones(K), N)
    with fg.Model() as m:
        k, n = fg.plate("k", K), fg.plate("n", N)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(K)), plates=[n])
        mu = fg.mv_gaussian("mu", np.zeros(D), precision=0.1, plates=[k])
        fg.mv_gaussian("y", mu[z], precision=Lam, plates=[n], observed=Y)
    pi = Dirichlet(np.ones(K))
    nodes = {"pi": pi, "z": Categorical(pi, plates=(N,)), "mu": Gaussian(np.zeros(D), 0.1 * np.eye(D), plates=(K,))}
    Yn = Mixture(nodes["z"], Gaussian, nodes["mu"], Lam)
    Yn.observe(Y)
    r, L = _run_both(m, nodes, [Yn], init)
    _close(r.elbo, L)
    _close(r.posterior("mu").mean(), nodes["mu"].get_moments()[0])
    _close(r.posterior("z").probs, nodes["z"].get_moments()[0])


def test_gamma_rate_mixture():
    rng = np.random.default_rng(5)
    N, K = 20, 2
    x = np.r_[rng.gamma(2.0, 1.0, 10), rng.gamma(2.0, 0.1, 10)]
    init = rng.dirichlet(np.ones(K), N)
    with fg.Model() as m:
        k, n = fg.plate("k", K), fg.plate("n", N)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(K)), plates=[n])
        b = fg.gamma("b", 1.0, 1.0, plates=[k])
        fg.gamma("x", 2.0, b[z], plates=[n], observed=x)
    pi = Dirichlet(np.ones(K))
    nodes = {"pi": pi, "z": Categorical(pi, plates=(N,)), "b": Gamma(1.0, 1.0, plates=(K,))}
    X = Mixture(nodes["z"], Gamma, 2.0, nodes["b"])
    X.observe(x)
    r, L = _run_both(m, nodes, [X], init)
    _close(r.elbo, L)
    _close(r.posterior("b").mean(), nodes["b"].get_moments()[0])
    _close(r.posterior("z").probs, nodes["z"].get_moments()[0])


def test_vector_gaussian_mixture_with_gamma_precision():
    """A vector Gaussian mixture whose components have isotropic Gamma precisions, y_n ~ N(μ_{z_n}, a_{z_n}⁻¹ I).
    With the isotropic prior on μ_k its posterior covariance is diagonal, so BayesPy writes the same model
    with scalar nodes over a (D, K) plate: Mixture(z, GaussianARD, μ, a) with z plated (N, 1) and a (1, K)."""
    rng = np.random.default_rng(6)
    N, D, K = 30, 3, 2
    lab = rng.integers(0, K, N)
    Y = np.array([[-2, 0, 1], [2, 1, -1.0]])[lab] + rng.normal(size=(N, D)) * np.array([1.5, 0.5])[lab][:, None]
    init = rng.dirichlet(np.ones(K), N)
    with fg.Model() as m:
        k, n = fg.plate("k", K), fg.plate("n", N)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(K)), plates=[n])
        mu = fg.mv_gaussian("mu", np.zeros(D), precision=0.1, plates=[k])
        a = fg.gamma("a", 2.0, 1.0, plates=[k])
        fg.mv_gaussian("y", mu[z], precision=a[z], plates=[n], observed=Y)
    pi = Dirichlet(np.ones(K))
    nodes = {"pi": pi, "z": Categorical(pi, plates=(N, 1)), "mu": GaussianARD(0, 0.1, plates=(D, K)),
             "a": Gamma(2.0, 1.0, plates=(1, K))}
    Yn = Mixture(nodes["z"], GaussianARD, nodes["mu"], nodes["a"])
    Yn.observe(Y)
    r, L = _run_both(m, nodes, [Yn], init, init_bp=init[:, None, :])
    _close(r.elbo, L)
    _close(r.posterior("a").mean(), nodes["a"].get_moments()[0].ravel())
    _close(r.posterior("mu").mean(), nodes["mu"].get_moments()[0].T)
    _close(np.diagonal(r.posterior("mu").cov(), axis1=-2, axis2=-1),
           (nodes["mu"].get_moments()[1] - nodes["mu"].get_moments()[0] ** 2).T)
    _close(r.posterior("z").probs, nodes["z"].get_moments()[0][:, 0])


def _wishart_mixture_case(seed, N, D, K, gate_mean=True):
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 3, (K, D))
    Y = centres[rng.integers(0, K, N)] + rng.normal(size=(N, D)) @ np.diag(rng.uniform(0.5, 1.5, D))
    init = rng.dirichlet(np.ones(K), N)
    V = np.eye(D) + 0.3 * np.ones((D, D))
    with fg.Model() as m:
        k, n = fg.plate("k", K), fg.plate("n", N)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(K)), plates=[n], categories=k)
        L = fg.wishart("L", dof=D + 1.0, scale=V, plates=[k])
        if gate_mean:
            mu = fg.mv_gaussian("mu", np.zeros(D), precision=0.1, plates=[k])
            fg.mv_gaussian("y", mu[z], precision=L[z], plates=[n], observed=Y)
        else:
            mu = fg.mv_gaussian("mu", np.zeros(D), precision=0.1)
            fg.mv_gaussian("y", mu, precision=L[z], plates=[n], observed=Y)
    from bayespy.nodes import Wishart as BpWishart

    pi = Dirichlet(np.ones(K))
    mu_bp = Gaussian(np.zeros(D), 0.1 * np.eye(D), plates=(K,) if gate_mean else ())
    nodes = {"pi": pi, "z": Categorical(pi, plates=(N,)), "mu": mu_bp, "L": BpWishart(D + 1.0, V, plates=(K,))}
    # a shared mean (gate_mean False) enters every component: BayesPy's Mixture broadcasts it over the clusters
    Yn = Mixture(nodes["z"], Gaussian, nodes["mu"], nodes["L"])
    Yn.observe(Y)
    return m, nodes, Yn, init


@pytest.mark.parametrize(("seed", "N", "D", "K", "gate_mean"),
                         [(6, 30, 2, 3, True), (7, 25, 3, 2, True), (8, 20, 2, 2, False)])
def test_wishart_precision_mixture(seed, N, D, K, gate_mean):
    """Full-covariance mixture with a mean-field mean and Wishart precision per component:
    y_n ~ N(μ_{z_n}, Λ_{z_n}⁻¹); BayesPy: Mixture(z, Gaussian, mu, Lambda) with a Wishart Lambda (a mean
    shared by the components in the last case)."""
    m, nodes, Yn, init = _wishart_mixture_case(seed, N, D, K, gate_mean)
    r, L = _run_both(m, nodes, [Yn], init)
    _close(r.elbo, L)
    _close(r.posterior("mu").mean(), nodes["mu"].get_moments()[0])
    _close(r.posterior("L").mean(), nodes["L"].get_moments()[0])
    _close(r.posterior("z").probs, nodes["z"].get_moments()[0])


def test_discrete_mixtures_benchmark_runs_small():
    """The benchmark's small case runs; the same-start iterates agree with BayesPy's and the bounds are in
    scikit-learn's units, checked both ways (its timings are not asserted)."""
    from benchmarks.discrete_mixtures_vs_peers import main

    out = main(small=True, seeds=1, sweeps=3)
    mix, lda = out["mixture"], out["lda"]
    assert mix["gap"] < 1e-9 * abs(mix["elbo"])
    gm = out["gaussian_mixture"]
    assert gm["gap"] < 1e-9 * abs(gm["elbo"]) and gm["mv_gap"] < 1e-9 * abs(gm["elbo"])
    assert lda["bayespy_gap"] < 1e-9 * abs(lda["best_ours"])
    assert lda["check_formula_at_ours"] < 1e-6 and lda["check_ours_at_sklearn"] < 1e-6
