"""fg.Gibbs on logistic factors by Pólya-Gamma augmentation: exact posterior moments of a small logistic
regression (by quadrature on a grid), the augmented conditional's natural parameters, and the PG draws' mean."""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit

import factorgraph as fg
from factors.polya_gamma import logit_polya_gamma, polya_gamma
from schedules.compile import compile_model
from schedules.gibbs_sampler import GibbsChain, _GibbsRules
from tests.test_gibbs import _within


def _logistic(seed=0, N=40):
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(N), rng.normal(size=N)])
    s = (rng.random(N) < expit(X @ np.array([-0.5, 1.5]))).astype(float)
    with fg.Model("logistic") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", np.zeros(2), precision=0.5 * np.eye(2))
        fg.bernoulli_logit("s", fg.inner(X, w, plates=[n]), plates=[n], observed=s)
    return m, X, s


def test_logistic_regression_matches_quadrature():
    """w ~ N(0, 2I), s_n ~ Bernoulli(σ(x_nᵀw)): the posterior means and variances of w on a 2-D grid."""
    m, X, s = _logistic()
    r = fg.infer(m, algorithm=fg.Gibbs(draws=1000, burn=100, chains=2, seed=0))
    a, b = np.meshgrid(np.linspace(-3.0, 2.0, 401), np.linspace(-1.0, 4.5, 441), indexing="ij")
    W = np.stack([a, b], -1)
    psi = W @ X.T
    logp = -0.25 * (W**2).sum(-1) + (s * log_expit(psi) + (1 - s) * log_expit(-psi)).sum(-1)
    p = np.exp(logp - logp.max())
    p /= p.sum()
    mean = np.array([(p * a).sum(), (p * b).sum()])
    var = np.array([(p * a * a).sum(), (p * b * b).sum()]) - mean**2
    _within(r, "w", mean, var)


def test_augmented_conditional():
    """Given the PG draws ω, w | ω, s = N(Λ⁻¹Xᵀκ, Λ⁻¹) with Λ = ½I + XᵀΩX and κ = s − ½: the conditional's natural
    parameters are (Xᵀκ, −½Λ) for the ω drawn from the chain's generator."""
    m, X, s = _logistic(N=15)
    c = compile_model(m, _GibbsRules())
    chain = GibbsChain(c, np.random.default_rng(3))
    chain.start({})
    w = np.array([0.2, -0.7])
    chain.set_point(m.variables["w"], w)
    chain.rng = np.random.default_rng(11)
    for f in c.factors:
        f.params["state"]["rng"] = chain.rng
    eta1, eta2 = chain.conditional(m.variables["w"]).natural
    omega = polya_gamma(np.ones(15), X @ w, np.random.default_rng(11))
    np.testing.assert_allclose(eta1, X.T @ (s - 0.5), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(eta2, -0.5 * (0.5 * np.eye(2) + X.T @ (omega[:, None] * X)), rtol=1e-10)


def test_polya_gamma_rule_mean():
    """ω ~ PG(1, x) has mean tanh(x/2)/(2x): the message's precision part averages to −tanh(x/2)/(4x)."""
    x = np.array([0.3, 1.0, 2.5])
    rng = np.random.default_rng(0)
    msgs = np.stack([logit_polya_gamma({"out": (np.array([1.0, 0.0, 1.0]),), "logit": (x, x * x)},
                                       {"state": {"rng": rng}})[1] for _ in range(20000)])
    np.testing.assert_allclose(msgs.mean(0), -np.tanh(x / 2) / (4 * x), rtol=0.02)
