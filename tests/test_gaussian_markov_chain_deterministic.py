"""fg.gaussian_markov_chain with nearly deterministic dynamics: a constant-velocity model (x_t = (position,
velocity), A = [[1, 1], [0, 1]], T = 100, position observed with unit noise) whose noise precision Q = qI runs
from 1 to 1e12.  With everything but the states known, q(x) is exact and the ELBO is log p(y) to 1e-8, its
smoothed moments are the dense joint Gaussian's, and with a random (Gamma or Wishart) Q the ELBO stays a
lower bound on log p(y)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.linalg import cho_factor, cho_solve
from scipy.special import gammaln, logsumexp

import factorgraph as fg

A = np.array([[1.0, 1.0], [0.0, 1.0]])
H = np.array([1.0, 0.0])
M0, P0 = np.zeros(2), 1e-2  # x_1 ~ N(0, 100 I)
T = 100
PRECISIONS = [10.0 ** e for e in range(0, 13, 2)] + [3e10, 1e11]  # 3e10, 1e11: where the information form failed


@pytest.fixture(scope="module")
def y() -> np.ndarray:
    rng = np.random.default_rng(0)
    return 3.0 + 0.5 * np.arange(T) + rng.normal(size=T)


def _model(y: np.ndarray, noise) -> fg.Model:
    with fg.Model("constant-velocity") as m:
        t = fg.plate("t", len(y))
        x = fg.gaussian_markov_chain("x", initial_mean=M0, initial_precision=P0, transition=A, noise_precision=noise,
                                     plates=[t])
        fg.gaussian("y", mean=fg.inner(H, x), precision=1.0, plates=[t], observed=y)
    return m


def _fit(y, noise, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        return fg.infer(_model(y, noise), **kw)


def _kalman_loglik(y: np.ndarray, q: float) -> float:
    """log p(y | q) by the covariance-form Kalman filter (prediction-error decomposition)."""
    m, P, ll = M0.copy(), np.eye(2) / P0, 0.0
    for t, yt in enumerate(y):
        if t:
            m, P = A @ m, A @ P @ A.T + np.eye(2) / q
        s, v = H @ P @ H + 1.0, yt - H @ m
        ll -= 0.5 * (np.log(2.0 * np.pi * s) + v * v / s)
        k = P @ H / s
        m, P = m + k * v, P - np.outer(k, k) * s
    return float(ll)


def _dense(y: np.ndarray, q: float):
    """log p(y | q) and the smoothed means, covariances (2T × 2T) from the joint Gaussian written out.

    x = F m₀ + Bξ with ξ ~ N(0, I) the standardised initial state and disturbances (B[t, s] = A^{t−s}U_s,
    U_0U_0ᵀ = P₀⁻¹, U_sU_sᵀ = Q⁻¹).  In ξ the joint posterior precision K = I + BᵀGᵀGB (G the observation matrix)
    is well conditioned; with its Cholesky factor, ξ̂ = K⁻¹BᵀGᵀr (r = y − GFm₀) and

        log p(y) = log N(r | GBξ̂, I) − ½ξ̂ᵀξ̂ − ½ log|K|,   E[x | y] = Fm₀ + Bξ̂,   Cov(x | y) = BK⁻¹Bᵀ

    (log p(y) = log p(y | x) + log p(x) − log p(x | y) at x = E[x | y], written in ξ)."""
    n = len(y)
    B = np.zeros((2 * n, 2 * n))
    F = np.zeros((2 * n, 2))
    for t in range(n):
        F[2 * t:2 * t + 2] = np.linalg.matrix_power(A, t)
        for s in range(t + 1):
            scale = 1.0 / np.sqrt(P0) if s == 0 else 1.0 / np.sqrt(q)
            B[2 * t:2 * t + 2, 2 * s:2 * s + 2] = np.linalg.matrix_power(A, t - s) * scale
    GB = np.kron(np.eye(n), H) @ B
    r = y - np.kron(np.eye(n), H) @ F @ M0
    k = cho_factor(np.eye(2 * n) + GB.T @ GB, lower=True)
    xi = cho_solve(k, GB.T @ r)
    e = r - GB @ xi
    ll = -0.5 * (n * np.log(2.0 * np.pi) + e @ e + xi @ xi) - np.log(np.diag(k[0])).sum()
    return float(ll), (F @ M0 + B @ xi).reshape(n, 2), B @ cho_solve(k, B.T)


@pytest.mark.parametrize("q", [1.0, 1e6, 1e12])
def test_the_two_references_agree(y, q):
    """The filter and the dense Gaussian are independent formulations; they agree to 1e-9 up to q = 1e12 (both
    are within 2e-10 of a 60-digit decimal Kalman filter at these q)."""
    assert abs(_kalman_loglik(y, q) - _dense(y, q)[0]) < 1e-9


@pytest.mark.parametrize("q", PRECISIONS)
def test_elbo_is_the_exact_evidence(y, q):
    """Known dynamics and noise: the ELBO equals log p(y) to 1e-8 nats, with no positive-definiteness failure."""
    res = _fit(y, q * np.eye(2), max_iter=3)
    assert abs(res.elbo - _kalman_loglik(y, q)) < 1e-8


@pytest.mark.parametrize("q", [1.0, 1e4, 1e8, 3e10, 1e12])
def test_smoothed_moments_match_the_dense_gaussian(y, q):
    """Smoothed means, covariances and lag-one covariances against the dense joint Gaussian."""
    _, mean, cov = _dense(y, q)
    post = _fit(y, q * np.eye(2), max_iter=3).posterior("x")
    np.testing.assert_allclose(post.mean(), mean, rtol=1e-9, atol=1e-9)
    blocks = cov.reshape(T, 2, T, 2)
    idx = np.arange(T)
    marg = blocks[idx, :, idx, :]
    lag = blocks[idx[1:], :, idx[:-1], :]
    scale = np.sqrt(np.einsum("tii->ti", marg))  # compare each entry relative to its standard deviations
    np.testing.assert_allclose(post.cov() / (scale[:, :, None] * scale[:, None, :]),
                               marg / (scale[:, :, None] * scale[:, None, :]), atol=1e-8)
    np.testing.assert_allclose(post.lag_one_cov()[1:] / (scale[1:, :, None] * scale[:-1, None, :]),
                               lag / (scale[1:, :, None] * scale[:-1, None, :]), atol=1e-8)


def test_elbo_bounds_the_evidence_with_a_gamma_noise_precision(y):
    """Q = τI with τ ~ Gamma(2, 2e-10) (prior mean 1e10): the ELBO never decreases and stays below log p(y),
    computed by quadrature over log τ of p(y | τ) p(τ).  The gap (about 2 nats) is mean field's: q(τ) has shape
    2 + (T − 1)·2/2 = 101 where the posterior of τ stays about as broad as its prior (the data barely tell
    τ > 1e8 apart)."""
    a, b = 2.0, 2e-10
    with fg.Model("cv-gamma") as m:
        t = fg.plate("t", T)
        tau = fg.gamma("tau", a, b)
        x = fg.gaussian_markov_chain("x", initial_mean=M0, initial_precision=P0, transition=A, noise_precision=tau,
                                     plates=[t])
        fg.gaussian("y", mean=fg.inner(H, x), precision=1.0, plates=[t], observed=y)
    res = fg.infer(m, max_iter=200, tol=1e-12)
    trace = np.asarray(res.elbo_trace)
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:])), np.diff(trace).min()
    u = np.linspace(np.log(1e4), np.log(1e16), 401)  # u = log τ (the sum is converged to 1e-13 here)
    tau_grid = np.exp(u)
    log_prior = a * np.log(b) - gammaln(a) + a * u - b * tau_grid  # log p(τ) + log |dτ/du|
    log_lik = np.array([_kalman_loglik(y, s) for s in tau_grid])
    log_py = logsumexp(log_prior + log_lik) + np.log(u[1] - u[0])
    assert res.elbo <= log_py
    assert log_py - res.elbo < 3.0


def test_wishart_noise_precision_at_high_precision(y):
    """Q ~ Wishart(5, V = 5e-10 I) (E[Q] = 1e10 I): the ELBO never decreases and the fit stays nearly
    deterministic (E[Q] above 1e8) with finite smoothed covariances, where the information form failed."""
    with fg.Model("cv-wishart") as m:
        t = fg.plate("t", T)
        Q = fg.wishart("Q", dof=5.0, scale=5e-10 * np.eye(2))
        x = fg.gaussian_markov_chain("x", initial_mean=M0, initial_precision=P0, transition=A, noise_precision=Q,
                                     plates=[t])
        fg.gaussian("y", mean=fg.inner(H, x), precision=1.0, plates=[t], observed=y)
    res = fg.infer(m, max_iter=200, tol=1e-12)
    trace = np.asarray(res.elbo_trace)
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:])), np.diff(trace).min()
    assert np.all(np.isfinite(res.posterior("x").cov()))
    assert np.all(np.linalg.eigvalsh(res.posterior("Q").mean()) > 1e8)


def test_residual_sums_recentre_on_changed_moments():
    """The evidence and the messages to P₀ and Q from the smoother's residual sums, re-centred on moments of
    m₀ and A other than those q was smoothed with (as after an update of q(A) or q(m₀)), equal the moment
    formulas of the same q on a well-conditioned chain."""
    from distributions.gaussian_chain import GaussianChain
    from factors.gaussian_markov_chain import GAUSSIAN_MARKOV_CHAIN, chain_posterior

    rng = np.random.default_rng(2)
    D, N, L = 2, 2, 6

    def moments(scale):
        a1 = np.array([[0.9, 0.2], [-0.3, 0.8]]) + scale * rng.normal(size=(D, D))
        acov = np.stack([np.eye(D) * 0.01 * (1 + i) for i in range(D)])
        m01 = rng.normal(size=D)
        return {"initial_mean": (m01, np.outer(m01, m01) + 0.1 * np.eye(D)),
                "initial_precision": (np.array([[2.0, 0.3], [0.3, 1.0]]), 0.4),
                "transition": (a1, acov + a1[:, :, None] * a1[:, None, :]),
                "noise_precision": (np.array([[3.0, 0.5], [0.5, 2.0]]), 1.1)}

    p = {"lengths": np.array([L, 4]), "D": D, "noise": "full", "shape": (N, L), "state": {}}
    eta1 = rng.normal(size=(N, L, D))
    eta2 = -0.5 * np.broadcast_to(np.array([[1.5, 0.2], [0.2, 0.7]]), (N, L, D, D))
    q = chain_posterior(moments(0.0), p, (eta1, eta2))
    assert q.residuals is not None
    plain = GaussianChain(q.mean(), q.second, q.pair, q.log_normalizer, q.joint_entropy)
    m = moments(0.1)  # other moments of m₀ and A than q's
    evidence = GAUSSIAN_MARKOV_CHAIN._evidence["default"][0]
    out = {}
    for name, chain in (("residuals", q), ("moments", plain)):
        p["state"]["q"] = chain
        out[name] = (evidence(m, p), GAUSSIAN_MARKOV_CHAIN.get_rule("initial_precision", "vmp")(m, p)[0],
                     GAUSSIAN_MARKOV_CHAIN.get_rule("noise_precision", "vmp")(m, p)[0])
    for a, b in zip(out["residuals"], out["moments"], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)
