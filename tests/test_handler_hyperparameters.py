"""Hyperparameters learned by the global handlers (``learn=``): gradients, the exact type-II optimum on a
Gaussian block, the objective never below the fixed-θ fit, recovery of a site scale, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats

import factorgraph as fg
from factors.logistic import logit_point
from factors.sites import cauchy_point, laplace_point, student_point
from schedules import NCVMP
from schedules.compile import compile_model
from schedules.handlers import MVI, BlockTarget, Laplace, Site, VIDiag
from schedules.handlers.hyper import Hyper
from schedules.handlers.laplace import laplace_evidence

BOTH = ("prior_precision", "scale")


def _cauchy_data(seed=0, N=30, D=3, gam=0.5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    return X, X @ rng.normal(size=D) + gam * rng.standard_cauchy(N)


def _cauchy_target(X, y, alpha=2.0, gam=1.0):
    D = X.shape[1]
    prior = (np.zeros(D), -0.5 * alpha * np.eye(D))
    site = Site(X, cauchy_point, {"out": (y, y * y)}, {"scale": gam}, name="CauchySite(y)")
    return BlockTarget(*prior, [site], prior)


def _logistic_target(seed=2, N=30, D=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    s = (rng.random(N) < 1 / (1 + np.exp(-X @ np.array([1.5, -1.0, 0.5])))).astype(float)
    prior = (np.full(D, 0.3), -0.5 * np.diag([1.0, 2.0, 0.5]))  # m₀ = (0.3, 0.15, 0.6), Λ₀ = diag(1, 2, ½)
    return BlockTarget(*prior, [Site(X, logit_point, {"out": (s, s)}, {})], prior)


def _cauchy_model(X, y, alpha=1.0, gam=1.0):
    with fg.Model("cauchy-regression") as m:
        n = fg.plate("n", X.shape[0])
        w = fg.mv_gaussian("w", mean=0.0, precision=alpha, dim=X.shape[1])
        fg.cauchy_site("y", x=fg.inner(X, w, plates=[n]), location=y, scale=gam)
    return m


def _fd_check(fn, x, rtol=1e-5, atol=1e-6, eps=1e-6):
    g = fn(x)[1]
    num = np.array([(fn(x + e)[0] - fn(x - e)[0]) / (2 * eps) for e in eps * np.eye(len(x))])
    np.testing.assert_allclose(g, num, rtol=rtol, atol=atol)


@pytest.mark.parametrize("site", ["laplace", "cauchy", "student"])
def test_site_log_scale_derivative_matches_finite_differences(site):
    point, params = {"laplace": (laplace_point, {"scale": 0.4}), "cauchy": (cauchy_point, {"scale": 0.3}),
                     "student": (student_point, {"scale": 0.5, "dof": 3.0})}[site]
    u, loc = np.array([-1.3, -0.2, 0.05, 0.7, 2.5]), np.full(5, 0.1)
    s = Site(np.eye(5), point, {"out": (loc, loc * loc)}, params)
    f1 = point(u, s.moments, {**params, "scale": params["scale"] * np.exp(1e-6)})[0]
    f0 = point(u, s.moments, {**params, "scale": params["scale"] * np.exp(-1e-6)})[0]
    np.testing.assert_allclose(s.dlog_scale(u, point(u, s.moments, params)[1]), (f1 - f0) / 2e-6, atol=1e-8)


@pytest.mark.parametrize("problem", ["cauchy", "logistic"])
@pytest.mark.parametrize("handler", [MVI("mean"), MVI("eig"), MVI("lr"), VIDiag()], ids=lambda h: h.kind)
def test_joint_objective_gradient_matches_finite_differences(handler, problem):
    if problem == "cauchy":
        target, learn = _cauchy_target(*_cauchy_data()), BOTH
    else:
        target, learn = _logistic_target(), ("prior_precision",)
    hyper = Hyper(target, learn, "test")
    rng = np.random.default_rng(4)
    Z = rng.standard_normal((50, 3))
    w0 = np.array([0.5, -0.3, 0.2])
    cov = np.array([[0.3, 0.05, 0.0], [0.05, 0.2, 0.01], [0.0, 0.01, 0.25]])
    handler._setup(w0, np.linalg.cholesky(cov), cov)
    theta = handler.init(w0, np.linalg.cholesky(cov), cov, rng)
    x = np.concatenate([theta + 0.01 * rng.standard_normal(len(theta)), hyper.h0 + 0.3])
    _fd_check(handler.objective(target, Z, hyper), x)


@pytest.mark.parametrize("problem", ["cauchy", "logistic"])
def test_laplace_evidence_gradient_matches_finite_differences(problem):
    """dL/dh includes the motion of the mode through the Hessian (third derivatives of the sites)."""
    target, learn = (_cauchy_target(*_cauchy_data(N=60)), BOTH) if problem == "cauchy" else (
        _logistic_target(), ("prior_precision",))
    hyper = Hyper(target, learn, "test")
    w0 = np.zeros(3)

    def fn(h):
        value, grad, _ = laplace_evidence(hyper, h, w0)
        return value, grad

    _fd_check(fn, hyper.h0 - 0.2, eps=1e-5)


def _gaussian_block(seed=0, N=20, D=3, tau=4.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    y = 0.7 * X @ rng.normal(size=D) + rng.normal(size=N) / np.sqrt(tau)
    with fg.Model("gaussian-block") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=0.0, precision=2.0, dim=D)
        fg.gaussian("y", mean=fg.inner(X, w, plates=[n]), precision=tau, plates=[n], observed=y)

    def log_evidence(log_alpha):  # log N(y | 0, XXᵀ/α + I/τ)
        return stats.multivariate_normal(np.zeros(N), X @ X.T / np.exp(log_alpha) + np.eye(N) / tau).logpdf(y)

    best = optimize.minimize_scalar(lambda a: -log_evidence(a), bracket=(-3.0, 3.0), tol=1e-12)
    return m, float(np.exp(best.x)), -float(best.fun)


def test_laplace_reaches_the_exact_type_ii_maximum_on_a_gaussian_block():
    m, alpha, log_z = _gaussian_block()
    r = fg.infer(m, handlers={"w": fg.Laplace(learn=("prior_precision",))})
    assert r.hyperparameters("w")["prior_precision"] == pytest.approx(alpha, rel=1e-6)
    assert r.elbo == pytest.approx(log_z, abs=1e-9)  # the evidence at the learned α (exact on this block)
    assert any("learned hyperparameters" in n for n in r.notes)
    for h in (fg.MVI("lr", n_samples=300, learn="prior_precision"), fg.VIDiag(n_samples=300, learn="prior_precision")):
        r = fg.infer(m, handlers={"w": h})  # the ELBO's optimum in α is close to the evidence's
        assert r.hyperparameters("w")["prior_precision"] == pytest.approx(alpha, rel=0.02)
        assert log_z - 0.1 < r.elbo <= log_z + 1e-9


def test_learning_never_lowers_the_objective_and_recovers_the_site_scale():
    X, y = _cauchy_data(seed=1, N=300, gam=0.5)
    m = _cauchy_model(X, y, alpha=1.0, gam=2.0)  # start the scale 4× too wide
    fixed, learned = fg.infer(m, handlers={"w": fg.Laplace()}), fg.infer(m, handlers={"w": fg.Laplace(learn=BOTH)})
    assert learned.elbo >= fixed.elbo
    assert learned.hyperparameters("w")["scale"]["CauchySite(y)"] == pytest.approx(0.5, rel=0.15)
    fixed = fg.infer(m, handlers={"w": fg.MVI("lr", n_samples=100)})
    learned = fg.infer(m, handlers={"w": fg.MVI("lr", n_samples=100, learn=BOTH)})
    assert learned.elbo >= fixed.elbo - 3 * (fixed.elbo_se + learned.elbo_se)
    hyp = learned.hyperparameters("w")
    assert hyp["scale"]["CauchySite(y)"] == pytest.approx(0.5, rel=0.15)
    assert set(hyp) == {"prior_precision", "scale"} and hyp["prior_precision"] > 0


def test_class_plated_block_prior_and_non_isotropic_report():
    K, D = 3, 2
    X = np.random.default_rng(0).normal(size=(8, D))
    with fg.Model("multiclass") as m:
        n, k = fg.plate("n", 8), fg.plate("k", K)
        W = fg.mv_gaussian("W", mean=np.array([1.0, -1.0]), precision=np.array([2.0, 0.5]), plates=[k])
        fg.categorical_softmax("y", logits=fg.inner(X, W, plates=[n]), over=k, observed=np.arange(8) % K)
    c = compile_model(m, NCVMP(), handlers={"W": Laplace(learn="prior_precision")})
    a1, a2 = c.block_prior["W"]
    np.testing.assert_allclose(a1, np.tile([2.0, -0.5], K))
    np.testing.assert_allclose(a2, -0.5 * np.kron(np.eye(K), np.diag([2.0, 0.5])))
    hyper = Hyper(BlockTarget(a1, a2, [], (a1, a2)), ("prior_precision",), "test")
    assert hyper.report(np.array([np.log(3.0)])) == {"prior_precision_multiplier": pytest.approx(3.0)}


def test_default_learns_nothing():
    X, y = _cauchy_data()
    for h in (fg.Laplace(), fg.MVI("lr", n_samples=50), fg.VIDiag(n_samples=50)):
        assert h.learn == () and "learn" not in repr(h)
        r = fg.infer(_cauchy_model(X, y), handlers={"w": h})
        assert r.hyper == {} and not any("learned" in n for n in r.notes)
    with pytest.raises(KeyError, match="'w'"):
        r.hyperparameters("w")


def _gamma_prior_model(X, y):
    with fg.Model("hyperprior") as m:
        n = fg.plate("n", X.shape[0])
        alpha = fg.gamma("alpha", 1.0, 1.0)
        w = fg.mv_gaussian("w", mean=0.0, precision=alpha, dim=X.shape[1])
        fg.bernoulli_logit("s", logit=fg.inner(X, w, plates=[n]), observed=y > 0)
    return m


def test_bad_learn_input_is_rejected_clearly():
    X, y = _cauchy_data()
    with pytest.raises(fg.ModelError, match="MVI: learn= has unknown hyperparameter 'noise'"):
        fg.MVI("lr", learn=("prior_precision", "noise"))
    with pytest.raises(fg.ModelError, match="Laplace: learn= has unknown hyperparameter 'precision'"):
        fg.Laplace(learn="precision")
    with pytest.raises(fg.ModelError, match=r"'w'.*learns 'scale'.*BernoulliLogit\(s\)"):
        fg.infer(_gamma_prior_model(X, y), handlers={"w": fg.VIDiag(learn="scale")})
    with pytest.raises(fg.ModelError, match=r"'w'.*learns 'prior_precision'.*variable 'alpha'"):
        fg.infer(_gamma_prior_model(X, y), handlers={"w": fg.MVI("lr", learn="prior_precision")})
    with pytest.raises(fg.ModelError, match=r"'w'.*improper flat prior"):
        fg.infer(_cauchy_model(X, y, alpha=0.0), handlers={"w": fg.Laplace(learn="prior_precision")})
    with pytest.raises(fg.ModelError, match="plain log density has no hyperparameters"):
        fg.approximate(lambda w: -0.5 * float(w @ w), np.zeros(2), fg.Laplace(learn="prior_precision"))
