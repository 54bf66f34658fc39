"""fg.gaussian_markov_chain: exact smoothing against statsmodels and a dense Gaussian, VB monotonicity with
learned A, Q and R, joint draws, bad input.  (The messages are checked as gradients in test_rules.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.stats import multivariate_normal

import factorgraph as fg
from distributions.gaussian_chain import GaussianChain

NILE = Path(__file__).resolve().parents[1] / "data" / "nile" / "data.csv"


def load_nile() -> np.ndarray:
    return np.loadtxt(NILE, delimiter=",", skiprows=1)[:, 1]


def _local_level(y, s2e, s2n, m0, p0, noise=None, obs=None):
    with fg.Model("local-level") as m:
        t = fg.plate("t", len(y))
        x = fg.gaussian_markov_chain("x", initial_mean=m0, initial_precision=1.0 / p0, transition=1.0,
                                     noise_precision=1.0 / s2n if noise is None else noise, plates=[t])
        fg.gaussian("y", mean=fg.inner(np.ones(1), x), precision=1.0 / s2e if obs is None else obs, plates=[t],
                    observed=y)
    return m


@pytest.mark.parametrize(("s2e", "s2n", "m0", "p0"), [(15099.0, 1469.1, 1000.0, 1e4), (8000.0, 300.0, 1120.0, 1e6),
                                                      (2e4, 5e3, 900.0, 50.0)])
def test_local_level_matches_statsmodels(s2e, s2n, m0, p0):
    """With fixed variances and a known initial state prior, the ELBO is statsmodels' log-likelihood and the
    smoothed levels and their variances are statsmodels' (``UnobservedComponents.smooth``) to 1e-8."""
    from statsmodels.tsa.statespace.structural import UnobservedComponents

    y = load_nile()
    r = fg.infer(_local_level(y, s2e, s2n, m0, p0), max_iter=5)
    assert r.converged
    mod = UnobservedComponents(y, "local level")
    mod.ssm.initialize_known(np.array([m0]), np.array([[p0]]))
    mod.loglikelihood_burn = 0  # statsmodels drops the first observation's term by default
    res = mod.smooth([s2e, s2n])
    assert abs(r.elbo - res.llf) < 1e-8 * abs(res.llf)
    q = r.posterior("x")
    assert isinstance(q, GaussianChain)
    np.testing.assert_allclose(q.mean()[:, 0], res.smoothed_state[0], rtol=1e-10, atol=1e-8)
    np.testing.assert_allclose(q.var()[:, 0], res.smoothed_state_cov[0, 0], rtol=1e-8)


def _dense_reference(y, lengths, C, r, m0, P0, A, Q):
    """log p(y) and the smoothed moments of each sequence from the joint Gaussian of x_1..x_L written out."""
    D = A.shape[0]
    out = []
    for n, L in enumerate(lengths):
        # prior precision of x (block tridiagonal) and its information vector
        lam = np.zeros((L * D, L * D))
        blk = lambda i: slice(i * D, (i + 1) * D)  # noqa: E731
        lam[blk(0), blk(0)] += P0
        for t in range(1, L):
            lam[blk(t), blk(t)] += Q
            lam[blk(t - 1), blk(t - 1)] += A.T @ Q @ A
            lam[blk(t), blk(t - 1)] -= Q @ A
            lam[blk(t - 1), blk(t)] -= A.T @ Q
        cov_x = np.linalg.inv(lam)
        mean_x = cov_x[:, :D] @ (P0 @ m0)
        G = np.kron(np.eye(L), C)
        R = np.diag(np.tile(1.0 / r, L))
        yn = y[n, :L].reshape(-1)
        ll = multivariate_normal(G @ mean_x, G @ cov_x @ G.T + R).logpdf(yn)
        post_lam = lam + G.T @ np.linalg.inv(R) @ G
        post_cov = np.linalg.inv(post_lam)
        post_mean = post_cov @ (lam @ mean_x + G.T @ np.linalg.solve(R, yn))
        out.append((ll, post_mean.reshape(L, D), post_cov))
    return out


def _simulate(rng, N, T, C, r, m0, P0, A, Q):
    D, P = A.shape[0], C.shape[0]
    x = np.zeros((N, T, D))
    x[:, 0] = rng.multivariate_normal(m0, np.linalg.inv(P0), N)
    for t in range(1, T):
        x[:, t] = x[:, t - 1] @ A.T + rng.multivariate_normal(np.zeros(D), np.linalg.inv(Q), N)
    return x @ C.T + rng.normal(size=(N, T, P)) / np.sqrt(r)


def _params(rng, D=2, P=3):
    A = np.array([[0.9, 0.2], [-0.3, 0.8]])[:D, :D]
    Q = np.array([[2.0, 0.5], [0.5, 1.0]])[:D, :D]
    return (rng.normal(size=(P, D)), rng.uniform(0.5, 2.0, P), rng.normal(size=D), np.array([[0.5, 0.1], [0.1, 0.3]]),
            A, Q)


def test_multivariate_chain_matches_dense_gaussian():
    """Two-dimensional states seen through three noisy coordinates, two sequences of different lengths: the
    ELBO is the exact log p(y) and the smoothed means, covariances and lag-one covariances are the dense joint
    Gaussian's."""
    rng = np.random.default_rng(0)
    C, r, m0, P0, A, Q = _params(rng)
    lengths = np.array([9, 6])
    N, T, P = 2, 9, C.shape[0]
    y = _simulate(rng, N, T, C, r, m0, P0, A, Q)
    mask = np.broadcast_to((np.arange(T) < lengths[:, None])[..., None], y.shape)
    with fg.Model("lgssm") as m:
        n, t, p = fg.plate("n", N), fg.plate("t", T), fg.plate("p", P)
        x = fg.gaussian_markov_chain("x", initial_mean=m0, initial_precision=P0, transition=A, noise_precision=Q,
                                     plates=[n, t], lengths=lengths)
        fg.gaussian("y", mean=fg.inner(C, x, plates=[p]), precision=np.broadcast_to(r, y.shape), plates=[n, t, p],
                    observed=y, mask=mask)
    res = fg.infer(m, max_iter=5)
    ref = _dense_reference(y, lengths, C, r, m0, P0, A, Q)
    assert abs(res.elbo - sum(a for a, _, _ in ref)) < 1e-9
    q = res.posterior("x")
    D = A.shape[0]
    for i, (L, (_, mean, cov)) in enumerate(zip(lengths, ref, strict=True)):
        np.testing.assert_allclose(q.mean()[i, :L], mean, atol=1e-10)
        for s in range(L):
            np.testing.assert_allclose(q.cov()[i, s], cov[s * D:(s + 1) * D, s * D:(s + 1) * D], atol=1e-10)
        for s in range(1, L):
            np.testing.assert_allclose(q.lag_one_cov()[i, s], cov[s * D:(s + 1) * D, (s - 1) * D:s * D], atol=1e-10)
        assert np.all(q.mean()[i, L:] == 0.0)


def test_joint_draws_have_the_smoothed_moments():
    """Forward-filtering backward-sampling draws: their mean, covariance and lag-one covariance match q's."""
    rng = np.random.default_rng(1)
    C, r, m0, P0, A, Q = _params(rng)
    y = _simulate(rng, 1, 6, C, r, m0, P0, A, Q)[0]
    with fg.Model("draws") as m:
        t, p = fg.plate("t", 6), fg.plate("p", 3)
        x = fg.gaussian_markov_chain("x", initial_mean=m0, initial_precision=P0, transition=A, noise_precision=Q,
                                     plates=[t])
        fg.gaussian("y", mean=fg.inner(C, x, plates=[p]), precision=np.broadcast_to(r, y.shape), plates=[t, p],
                    observed=y)
    q = fg.infer(m, max_iter=5).posterior("x")
    s = q.sample(40000, rng=np.random.default_rng(2))
    assert s.shape == (40000, 6, 2)
    np.testing.assert_allclose(s.mean(0), q.mean(), atol=0.03)
    d = s - q.mean()
    np.testing.assert_allclose(np.einsum("sti,stj->tij", d, d) / len(s), q.cov(), atol=0.03)
    np.testing.assert_allclose(np.einsum("sti,stj->tij", d[:, 1:], d[:, :-1]) / len(s), q.lag_one_cov()[1:],
                               atol=0.03)


def test_vb_with_learned_parameters_never_decreases():
    """A (Gaussian rows), Q (Wishart) and the observation precisions (Gamma) learned: the ELBO trace never
    decreases and the learned A is close to the truth on a long series."""
    rng = np.random.default_rng(3)
    C, r, m0, P0, A, Q = _params(rng)
    T = 300
    y = _simulate(rng, 1, T, C, r, m0, P0, A, Q)[0]
    with fg.Model("vb-lgssm") as m:
        t, p, d = fg.plate("t", T), fg.plate("p", 3), fg.plate("d", 2)
        a = fg.mv_gaussian("A", np.zeros(2), precision=1e-2, plates=[d])
        q = fg.wishart("Q", dof=2.0, scale=np.eye(2))
        x = fg.gaussian_markov_chain("x", initial_mean=np.zeros(2), initial_precision=0.1, transition=a,
                                     noise_precision=q, plates=[t])
        tau = fg.gamma("tau", 1e-2, 1e-2, plates=[p])
        fg.gaussian("y", mean=fg.inner(C, x, plates=[p]), precision=tau, plates=[t, p], observed=y)
    with pytest.warns(fg.ConvergenceWarning):  # VB for state-space models converges slowly; 150 sweeps suffice here
        res = fg.infer(m, max_iter=150, tol=1e-12)
    trace = np.asarray(res.elbo_trace)
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:])), np.diff(trace).min()
    np.testing.assert_allclose(res.posterior("A").mean(), A, atol=0.15)


def test_gamma_noise_precisions_never_decrease():
    """Q = diag(τ) with Gamma τ per dimension (Beal 2003, ch. 5) and a shared-τ local level: monotone ELBO."""
    y = load_nile()
    with fg.Model("ll-vb") as m:
        t = fg.plate("t", len(y))
        tq = fg.gamma("tau_level", 1e-2, 10.0)
        tr = fg.gamma("tau_obs", 1e-2, 10.0)
        x = fg.gaussian_markov_chain("x", initial_mean=1000.0, initial_precision=1e-5, transition=1.0,
                                     noise_precision=tq, plates=[t])
        fg.gaussian("y", mean=fg.inner(np.ones(1), x), precision=tr, plates=[t], observed=y)
    res = fg.infer(m, max_iter=500, tol=1e-10)
    trace = np.asarray(res.elbo_trace)
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:])), np.diff(trace).min()
    rng = np.random.default_rng(4)
    C, r, m0, P0, A, Q = _params(rng)
    Qd = np.diag(np.diag(Q))
    y2 = _simulate(rng, 1, 300, C, r, m0, P0, A, Qd)[0]
    with fg.Model("diag") as m:
        t, p, d = fg.plate("t", 300), fg.plate("p", 3), fg.plate("d", 2)
        tau = fg.gamma("tau", 1e-2, 1e-2, plates=[d])
        x = fg.gaussian_markov_chain("x", initial_mean=m0, initial_precision=P0, transition=A, noise_precision=tau,
                                     plates=[t])
        fg.gaussian("y", mean=fg.inner(C, x, plates=[p]), precision=np.broadcast_to(r, y2.shape), plates=[t, p],
                    observed=y2)
    res = fg.infer(m, max_iter=300, tol=1e-10)
    trace = np.asarray(res.elbo_trace)
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:])), np.diff(trace).min()
    np.testing.assert_allclose(res.posterior("tau").mean(), np.diag(Qd), rtol=0.35)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"initial_mean": np.zeros(3), "transition": np.eye(2)}, r"'x': mismatched state dimensions"),
    ({"noise_precision": np.array([[1.0, 2.0], [2.0, 1.0]])}, r"'x': noise_precision must be positive definite"),
    ({"initial_precision": -1.0}, r"'x': initial_precision"),
    ({"initial_precision": np.zeros((2, 2))}, r"'x': initial_precision must be positive definite"),
    ({"transition": np.ones((2, 3))}, r"'x': transition must be a D×D matrix"),
    ({"lengths": 0}, r"'x': lengths must be integers in 1\.\.5"),
])
def test_bad_input_names_the_variable(kwargs, match):
    with fg.Model("bad"), pytest.raises(fg.ModelError, match=match):
        t = fg.plate("t", 5)
        fg.gaussian_markov_chain("x", plates=[t], **kwargs)


def test_chain_needs_a_time_plate():
    with fg.Model("bad"), pytest.raises(fg.ModelError, match=r"'x': a Gaussian Markov chain needs plates"):
        fg.gaussian_markov_chain("x", plates=[])


def test_sequences_share_random_initial_state_prior():
    """Three sequences with a random initial mean (Gaussian) and initial precision (Wishart) shared by all: the
    ELBO never decreases and q(m₀) centres on the sequences' first states."""
    rng = np.random.default_rng(5)
    C, r, _, P0, A, Q = _params(rng)
    m0 = np.array([4.0, -3.0])
    y = _simulate(rng, 3, 30, C, r, m0, P0 * 25.0, A, Q)
    with fg.Model("random-start") as m:
        n, t, p = fg.plate("n", 3), fg.plate("t", 30), fg.plate("p", 3)
        mu0 = fg.mv_gaussian("m0", np.zeros(2), precision=1e-2)
        lam0 = fg.wishart("P0", dof=3.0, scale=np.eye(2))
        x = fg.gaussian_markov_chain("x", initial_mean=mu0, initial_precision=lam0, transition=A, noise_precision=Q,
                                     plates=[n, t])
        fg.gaussian("y", mean=fg.inner(C, x, plates=[p]), precision=np.broadcast_to(r, y.shape), plates=[n, t, p],
                    observed=y)
    res = fg.infer(m, max_iter=300, tol=1e-10)
    trace = np.asarray(res.elbo_trace)
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:])), np.diff(trace).min()
    first = res.posterior("x").mean()[:, 0].mean(0)
    np.testing.assert_allclose(res.posterior("m0").mean(), first, atol=0.5)


def test_dimension_mismatch_with_random_parameters():
    with fg.Model("bad"), pytest.raises(fg.ModelError, match=r"'x': mismatched state dimensions"):
        t, row = fg.plate("t", 5), fg.plate("row", 2)
        a = fg.mv_gaussian("A", np.zeros(2), precision=1.0, plates=[row])
        q = fg.wishart("Q", dof=4.0, scale=np.eye(3))
        fg.gaussian_markov_chain("x", transition=a, noise_precision=q, plates=[t])


def test_chain_of_one_step_is_a_gaussian():
    """T = 1: no transition at all; the ELBO is log N(y | c·m₀, c P₀⁻¹ cᵀ + 1/r) exactly."""
    with fg.Model("one") as m:
        t = fg.plate("t", 1)
        x = fg.gaussian_markov_chain("x", initial_mean=[1.0, 2.0], initial_precision=np.diag([2.0, 0.5]),
                                     transition=np.eye(2), noise_precision=1.0, plates=[t])
        fg.gaussian("y", mean=fg.inner(np.array([1.0, -1.0]), x), precision=4.0, plates=[t], observed=[0.3])
    res = fg.infer(m, max_iter=5)
    var = 1.0 / 2.0 + 1.0 / 0.5 + 0.25
    assert abs(res.elbo - (-0.5 * np.log(2 * np.pi * var) - 0.5 * (0.3 + 1.0) ** 2 / var)) < 1e-12


def test_sample_prior_draws_the_stationary_chain():
    """fg.sample_prior: x_t = A x_{t−1} + η with A = [[0.5, 0], [0.5, 0]] (rows drawn from a tight Gaussian) and
    Q⁻¹ = diag(1, 1/4) reaches var(x_t) = (4/3, 4/3·1/4 + 1/4) after a few steps; x_1 has the initial moments."""
    with fg.Model("prior") as m:
        n, t, row = fg.plate("n", 2), fg.plate("t", 40), fg.plate("row", 2)
        a = fg.mv_gaussian("A", np.array([0.5, 0.0]), precision=1e8, plates=[row])
        fg.gaussian_markov_chain("x", initial_mean=[1.0, -1.0], initial_precision=4.0, transition=a,
                                 noise_precision=np.diag([1.0, 4.0]), plates=[n, t])
    x = fg.sample_prior(m, 20000, seed=1)["x"]
    assert x.shape == (20000, 2, 40, 2)
    np.testing.assert_allclose(x[:, :, 0].mean((0, 1)), [1.0, -1.0], atol=0.02)
    np.testing.assert_allclose(x[:, :, 0].var((0, 1)), [0.25, 0.25], rtol=0.05)
    np.testing.assert_allclose(x[:, :, 30].var((0, 1)), [4 / 3, 4 / 3 / 4 + 0.25], rtol=0.05)


def test_non_positive_definite_filter_is_named():
    """Potentials that make the chain's precision indefinite (as a non-conjugate message could) are reported
    with the sequence and step, not turned into NaN."""
    from factors.gaussian_markov_chain import chain_posterior

    D = 2
    m = {"initial_mean": (np.zeros(D), np.eye(D)), "initial_precision": (np.eye(D), 0.0),
         "transition": (np.eye(D), np.eye(D)[:, :, None] * np.eye(D)[:, None, :]),  # A = I: E[a_iaᵢᵀ] = e_ieᵢᵀ
         "noise_precision": (np.eye(D), 0.0)}
    p = {"lengths": np.array([5, 5]), "D": D, "noise": "full", "shape": (2, 5), "state": {}}
    eta1 = np.zeros((2, 5, D))
    eta2 = np.zeros((2, 5, D, D))
    eta2[1, 3] = 10.0 * np.eye(D)  # a negative precision −20·I at sequence 1, step 3
    with pytest.raises(FloatingPointError, match="sequence 1, step 3"):
        chain_posterior(m, p, (eta1, eta2))
    eta2[1, 3] = 0.0
    q = chain_posterior(m, p, (eta1, eta2))
    assert np.all(np.isfinite(q.second))


def test_full_covariance_observations_through_mv_gaussian():
    """y_t ~ N(x_t, R⁻¹) with a full R through ``fg.mv_gaussian(mean=x)``: exact log p(y) against the dense
    Gaussian with R fixed, and a monotone ELBO with a Wishart R."""
    rng = np.random.default_rng(6)
    _, _, m0, P0, A, Q = _params(rng)
    R = np.array([[3.0, 1.0], [1.0, 2.0]])
    T, D = 6, 2
    y = rng.normal(size=(T, D))
    with fg.Model("full-R") as m:
        t = fg.plate("t", T)
        x = fg.gaussian_markov_chain("x", initial_mean=m0, initial_precision=P0, transition=A, noise_precision=Q,
                                     plates=[t])
        fg.mv_gaussian("y", mean=x, precision=R, plates=[t], observed=y)
    res = fg.infer(m, max_iter=5)
    lam_r = np.kron(np.eye(T), R)
    # the dense joint precision of x; y = x + ε, ε ~ N(0, R⁻¹) per step
    lam = np.zeros((T * D, T * D))
    for s in range(T):
        b = slice(s * D, (s + 1) * D)
        lam[b, b] += P0 if s == 0 else Q
        if s:
            a = slice((s - 1) * D, s * D)
            lam[a, a] += A.T @ Q @ A
            lam[b, a] -= Q @ A
            lam[a, b] -= A.T @ Q
    cov = np.linalg.inv(lam)
    ll = multivariate_normal(cov[:, :D] @ (P0 @ m0), cov + np.linalg.inv(lam_r)).logpdf(y.reshape(-1))
    assert abs(res.elbo - ll) < 1e-10
    T = 150
    x = np.zeros((T, D))
    for s in range(1, T):
        x[s] = A @ x[s - 1] + rng.multivariate_normal(np.zeros(D), np.linalg.inv(Q))
    y = x + rng.multivariate_normal(np.zeros(D), np.linalg.inv(R), T)
    with fg.Model("wishart-R") as m:
        t = fg.plate("t", T)
        rv = fg.wishart("R", dof=D + 1.0, scale=np.eye(D))
        xv = fg.gaussian_markov_chain("x", initial_mean=m0, initial_precision=P0, transition=A, noise_precision=Q,
                                      plates=[t])
        fg.mv_gaussian("y", mean=xv, precision=rv, plates=[t], observed=y)
    res = fg.infer(m, max_iter=300, tol=1e-10)
    assert res.converged
    assert np.all(np.diff(res.elbo_trace) >= -1e-9 * np.abs(res.elbo_trace[1:]))


def test_random_parameters_declared_without_a_dimension_take_the_chains():
    with fg.Model("dims") as m:
        t, row = fg.plate("t", 20), fg.plate("row", 2)
        a = fg.mv_gaussian("A", 0.0, precision=1.0, plates=[row])
        mu = fg.mv_gaussian("m0", 0.0, precision=1.0)
        x = fg.gaussian_markov_chain("x", initial_mean=mu, transition=a, noise_precision=np.eye(2), plates=[t])
        fg.gaussian("y", mean=fg.inner(np.ones(2), x), precision=1.0, plates=[t],
                    observed=np.sin(np.arange(20.0)))
    res = fg.infer(m, max_iter=500)
    assert res.posterior("A").mean().shape == (2, 2) and res.posterior("m0").mean().shape == (2,)


def test_benchmark_runs_small():
    """The benchmark's small case runs and both libraries smooth to the same numbers (timing not asserted)."""
    from benchmarks.kalman_vs_statsmodels import main

    out = main(small=True, repeat=1)
    assert out["dll"] < 1e-9 * 1e5 and out["dmu"] < 1e-8 and out["dcov"] < 1e-8


def test_summary_has_exact_intervals_for_the_states():
    pytest.importorskip("pandas")  # the after extra, installed by .ci/run
    y = load_nile()[:30]
    res = fg.infer(_local_level(y, 15099.0, 1469.1, 1000.0, 1e4), max_iter=5)
    table = res.summary(prob=0.9)
    q = res.posterior("x")
    row = table.loc["x[4, 0]"]
    assert bool(row["exact"])
    np.testing.assert_allclose(row["5%"], q.mean()[4, 0] - 1.6448536269514722 * np.sqrt(q.var()[4, 0]), rtol=1e-9)
