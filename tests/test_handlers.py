"""Global handlers: exactness on Gaussian blocks, hyperpriors, gradients, determinism, the MVI paper's ordering."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

import factorgraph as fg
from factors.kernels import logistic_expectations
from schedules.handlers import MVI, BlockTarget, DensityTarget, Laplace, VIDiag
from schedules.handlers.mvi import _FixedSampleVI


def _gaussian_block(rng, N=25, D=3, tau=3.0, orthogonal=False):
    X = rng.normal(size=(N, D))
    if orthogonal:  # XᵀX diagonal, so the posterior is too (for the mean-field check)
        X = np.linalg.qr(X)[0] * np.sqrt(N)
    y = X @ rng.normal(size=D) + rng.normal(size=N) / np.sqrt(tau)
    mu0 = rng.normal(size=D)
    S0 = 2.0 * np.eye(D)
    with fg.Model("gaussian-block") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=mu0, covariance=S0)
        fg.gaussian("y", mean=fg.inner(X, w, plates=[n]), precision=tau, plates=[n], observed=y)
    exact = stats.multivariate_normal(X @ mu0, X @ S0 @ X.T + np.eye(N) / tau).logpdf(y)
    post_cov = np.linalg.inv(np.eye(D) / 2.0 + tau * X.T @ X)
    post_mean = post_cov @ (mu0 / 2.0 + tau * X.T @ y)
    return m, exact, post_mean, post_cov


def test_laplace_on_a_gaussian_block_is_exact():
    m, exact, mean, cov = _gaussian_block(np.random.default_rng(0))
    r = fg.infer(m, handlers={"w": fg.Laplace()})
    np.testing.assert_allclose(r.posterior("w").mean(), mean, atol=1e-10)
    np.testing.assert_allclose(r.posterior("w").cov(), cov, atol=1e-12)
    assert r.elbo == pytest.approx(exact, abs=1e-9)


@pytest.mark.parametrize("handler", [MVI("mean"), MVI("eig"), MVI("lr"), VIDiag()], ids=repr)
def test_fixed_sample_vi_on_a_gaussian_block_is_exact_within_monte_carlo_error(handler):
    m, exact, mean, cov = _gaussian_block(np.random.default_rng(1), orthogonal=True)
    r = fg.infer(m, handlers={"w": handler})
    sd = np.sqrt(np.diag(cov))
    # the fixed-sample optimum moves the mean by O(sd/√S): allow 5 standard errors of that
    assert np.all(np.abs(r.posterior("w").mean() - mean) < 5 * sd / np.sqrt(handler.n_samples))
    np.testing.assert_allclose(np.diag(r.posterior("w").cov()), np.diag(cov), rtol=0.2)
    assert exact - 0.05 < r.elbo <= exact + 1e-9


def _logistic_data(seed=2, N=60, D=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    y = rng.random(N) < 1 / (1 + np.exp(-X @ np.array([1.5, -1.0, 0.5])))
    return X, y


def _logistic_model(X, y, alpha_prior=None):
    with fg.Model("logistic-block") as m:
        n = fg.plate("n", X.shape[0])
        prec = fg.gamma("alpha", *alpha_prior) if alpha_prior else 1.0
        w = fg.mv_gaussian("w", mean=0.0, precision=prec, dim=X.shape[1])
        fg.bernoulli_logit("y", logit=fg.inner(X, w, plates=[n]), observed=y, method="quadrature")
    return m


def test_gamma_hyperprior_reaches_the_coordinate_ascent_fixed_point():
    X, y = _logistic_data()
    r = fg.infer(_logistic_model(X, y, (2.0, 1.0)), handlers={"w": fg.MVI("lr")}, max_iter=100, tol=1e-10)
    q, a = r.posterior("w"), r.posterior("alpha")
    ew2 = float(np.trace(q.cov()) + q.mean() @ q.mean())
    D = X.shape[1]
    assert a.shape == pytest.approx(2.0 + D / 2, rel=1e-12)
    assert a.rate == pytest.approx(1.0 + ew2 / 2, rel=1e-6)


def _gaussian_elbo(q, X, y, prior_prec=1.0):
    """Exact ELBO of a Gaussian q on the logistic model (1-D quadrature per data point)."""
    mu, S = q.mean(), q.cov()
    m, v = X @ mu, np.einsum("nd,de,ne->n", X, S, X)
    lik = float(np.sum(y * m - logistic_expectations(m, v)[0]))
    D = len(mu)
    prior = 0.5 * D * np.log(prior_prec / (2 * np.pi)) - 0.5 * prior_prec * (np.trace(S) + mu @ mu)
    return lik + prior + 0.5 * np.linalg.slogdet(2 * np.pi * np.e * S)[1]


def _log_z_importance(X, y, q_la, n=200_000, seed=3):
    rng = np.random.default_rng(seed)
    prop = stats.multivariate_t(q_la.mean(), 1.5 * q_la.cov(), df=5, seed=rng)
    W = prop.rvs(n)
    u = W @ X.T
    logp = (y * u - np.logaddexp(0, u)).sum(1) + stats.multivariate_normal(np.zeros(X.shape[1])).logpdf(W)
    lw = logp - prop.logpdf(W)
    mx = lw.max()
    return mx + np.log(np.mean(np.exp(lw - mx)))


def test_mvi_evidence_lies_between_the_laplace_gaussian_elbo_and_log_z():
    X, y = _logistic_data()
    la = fg.infer(_logistic_model(X, y), handlers={"w": fg.Laplace()})
    lower = _gaussian_elbo(la.posterior("w"), X, y)
    log_z = _log_z_importance(X, y, la.posterior("w"))
    for h in (MVI("mean"), MVI("eig"), MVI("lr")):
        r = fg.infer(_logistic_model(X, y), handlers={"w": h})
        assert lower - 3 * r.elbo_se <= r.elbo <= log_z + 3 * r.elbo_se, repr(h)
        # the reported figure estimates the exact ELBO of the returned q
        assert r.elbo == pytest.approx(_gaussian_elbo(r.posterior("w"), X, y), abs=4 * r.elbo_se + 1e-9)


@pytest.mark.parametrize("handler", [MVI("mean"), MVI("eig"), MVI("lr"), VIDiag()], ids=repr)
def test_mvi_objective_gradients_match_finite_differences(handler):
    X, y = _logistic_data(N=30)
    target = _logistic_target(X, y)
    rng = np.random.default_rng(4)
    Z = rng.standard_normal((50, 3))
    w0 = np.array([0.5, -0.3, 0.2])
    cov = np.array([[0.3, 0.05, 0.0], [0.05, 0.2, 0.01], [0.0, 0.01, 0.25]])
    handler._setup(w0, np.linalg.cholesky(cov), cov)
    theta = handler.init(w0, np.linalg.cholesky(cov), cov, rng) + 0.01 * rng.standard_normal(
        {"mean": 3, "eig": 6, "lr": 9, "diag": 6}[handler.kind])
    fn = handler.objective(target, Z)
    f0, g0 = fn(theta)
    num = np.array([(fn(theta + e)[0] - fn(theta - e)[0]) / 2e-6 for e in 1e-6 * np.eye(len(theta))])
    np.testing.assert_allclose(g0, num, rtol=1e-5, atol=1e-6)


def _logistic_target(X, y):
    from factors.logistic import logit_point
    from schedules.handlers import Site

    s = Site(X, logit_point, {"out": (y.astype(float), y.astype(float))}, {})
    return BlockTarget(np.zeros(X.shape[1]), -0.5 * np.eye(X.shape[1]), [s])


def test_fixed_seed_is_deterministic():
    X, y = _logistic_data()
    a = fg.infer(_logistic_model(X, y), handlers={"w": fg.MVI("lr", seed=5)})
    b = fg.infer(_logistic_model(X, y), handlers={"w": fg.MVI("lr", seed=5)})
    assert a.elbo == b.elbo and a.elbo_se == b.elbo_se
    np.testing.assert_array_equal(a.posterior("w").cov(), b.posterior("w").cov())


def _mixture_logpdf(W):
    """Gianniotis et al. (Mixed VI), eq. (14): ⅔N(0, I) + ⅓N([−1, −2], diag(3.5, 0.3))."""
    a = stats.multivariate_normal([0.0, 0.0], np.eye(2)).logpdf(W)
    b = stats.multivariate_normal([-1.0, -2.0], np.diag([3.5, 0.3])).logpdf(W)
    return np.logaddexp(np.log(2 / 3) + a, np.log(1 / 3) + b)


def _kl_to_mixture(q) -> float:
    """KL(q‖p) by the trapezoid rule on a fine grid (smooth integrand, negligible mass outside)."""
    g = np.linspace(-10.0, 8.0, 721)
    xx, yy = np.meshgrid(g, g, indexing="ij")
    pts = np.stack([xx.ravel(), yy.ravel()], -1)
    lq = stats.multivariate_normal(q.mean(), q.cov()).logpdf(pts)
    vals = (np.exp(lq) * (lq - _mixture_logpdf(pts))).reshape(xx.shape)
    return float(integrate.trapezoid(integrate.trapezoid(vals, g, axis=1), g))


@pytest.mark.slow
def test_mvi_paper_figure_1_ordering():
    """KL(MVI-eig), KL(MVI-lr) ≤ KL(MVI-μ) ≤ KL(Laplace) on the 2-D mixture target."""
    kl = {}
    for name, h in (("laplace", Laplace()), ("mean", MVI("mean")), ("eig", MVI("eig")), ("lr", MVI("lr"))):
        kl[name] = _kl_to_mixture(fg.approximate(_mixture_logpdf, np.zeros(2), h, vectorized=True).posterior)
    assert kl["eig"] <= kl["mean"] + 1e-3 and kl["lr"] <= kl["mean"] + 1e-3
    assert kl["mean"] <= kl["laplace"]


def test_approximate_accepts_pointwise_and_batched_densities():
    cov = np.array([[1.0, 0.4], [0.4, 0.5]])
    batched = stats.multivariate_normal([1.0, 2.0], cov).logpdf
    pointwise = lambda w: float(batched(w))  # noqa: E731
    for f, vectorized in ((batched, True), (pointwise, False), (batched, False)):
        r = fg.approximate(f, np.zeros(2), fg.Laplace(), vectorized=vectorized)
        np.testing.assert_allclose(r.posterior.mean(), [1.0, 2.0], atol=1e-6)
        np.testing.assert_allclose(r.posterior.cov(), cov, atol=1e-5)
        assert r.elbo == pytest.approx(0.0, abs=1e-6)  # a normalised density has log Z = 0


def test_approximate_pointwise_2d_density():
    """A point-wise density of D = 2 whose code also runs on a (2, 2) array (returning the wrong thing) used
    to be taken for a batched one and failed with an IndexError; point-wise is now the default, stated in
    the API, and never guessed from output shapes."""
    mean, prec = np.array([1.0, -2.0]), np.array([[2.0, 0.5], [0.5, 1.0]])

    def logp(w):  # one point (2,) -> scalar; on a (2, 2) array w[0], w[1] are rows: a (2,) array of nonsense
        d0, d1 = w[0] - mean[0], w[1] - mean[1]
        return -(d0**2) - 0.5 * d0 * d1 - 0.5 * d1**2

    def grad(w):
        return -prec @ (w - mean)

    sd = np.sqrt(np.diag(np.linalg.inv(prec)))
    for g in (None, grad):
        for h, tol in ((fg.Laplace(), 1e-4 * sd), (fg.MVI("lr", n_samples=500, seed=0), 0.3 * sd)):
            r = fg.approximate(logp, np.zeros(2), h, grad=g)
            assert np.all(np.abs(r.posterior.mean() - mean) < tol)
    r = fg.approximate(logp, np.zeros(2), fg.Laplace())
    np.testing.assert_allclose(r.posterior.cov(), np.linalg.inv(prec), atol=1e-6)
    assert r.elbo == pytest.approx(np.log(2 * np.pi) - 0.5 * np.linalg.slogdet(prec)[1], abs=1e-6)


def test_approximate_wrong_output_shape_names_the_convention():
    """A batched function called point-wise, or a point-wise one declared vectorized, gets a ModelError that
    names the shape it returned and the other convention, before any handler runs."""
    def per_coordinate(w):  # returns (D,) for one point: not a log density
        return -0.5 * np.asarray(w) ** 2

    with pytest.raises(fg.ModelError, match=r"shape \(3,\).*vectorized=True"):
        fg.approximate(per_coordinate, np.zeros(3), fg.Laplace())
    with pytest.raises(fg.ModelError, match=r"shape \(1, 1\).*vectorized=False"):
        fg.approximate(lambda W: -0.5 * np.sum(W**2, axis=1, keepdims=True), np.zeros(2), fg.Laplace(),
                       vectorized=True)
    with pytest.raises(fg.ModelError, match="grad"):
        fg.approximate(lambda w: -0.5 * float(w @ w), np.zeros(2), fg.Laplace(), grad=lambda w: np.zeros(3))
    with pytest.raises(fg.ModelError, match="IndexError.*shape \\(2,\\).*pass vectorized=True"):
        fg.approximate(lambda W: -0.5 * W[:, 0] ** 2 - 0.5 * W[:, 1] ** 2, np.zeros(2), fg.Laplace())
    with pytest.raises(fg.ModelError, match="vectorized must be True or False"):
        fg.approximate(lambda w: 0.0, np.zeros(2), fg.Laplace(), vectorized="yes")


def test_handler_errors_are_clear():
    X, y = _logistic_data()
    with pytest.raises(fg.ModelError, match="'alpha'.*mv_gaussian"):
        fg.infer(_logistic_model(X, y, (1.0, 1.0)), handlers={"alpha": fg.Laplace()})
    with pytest.raises(fg.ModelError, match="kind"):
        fg.MVI("full")
    with pytest.raises(fg.ModelError, match="handler"):
        fg.infer(_logistic_model(X, y), handlers={"w": "laplace"})
    assert issubclass(MVI, _FixedSampleVI)


def test_predictive_log_density_matches_quadrature_for_one_point():
    from factorgraph import models

    X, y = _logistic_data()
    r = fg.infer(_logistic_model(X, y), handlers={"w": fg.MVI("lr")})
    q = r.posterior("w")
    x = X[:1]
    m, v = float(x[0] @ q.mean()), float(x[0] @ q.cov() @ x[0])
    exact = np.log(logistic_expectations(m, v)[1] if y[0] else 1 - logistic_expectations(m, v)[1])
    lpd = models.predictive_log_density(r, x, y[:1], n_samples=200_000)
    assert lpd == pytest.approx(float(exact), abs=5e-3)


def _softmax_model(X, y, K):
    with fg.Model("multiclass") as m:
        n, k = fg.plate("n", X.shape[0]), fg.plate("k", K)
        W = fg.mv_gaussian("W", mean=0.0, precision=1.0, plates=[k], dim=X.shape[1])
        fg.categorical_softmax("y", logits=fg.inner(X, W, plates=[n]), over=k, observed=y)
    return m


def test_softmax_block_gradient_and_hessian():
    from factors.softmax import softmax_point
    from schedules.handlers import Site

    rng = np.random.default_rng(6)
    N, D, K = 12, 3, 4
    X = rng.normal(size=(N, D))
    y = np.eye(K)[rng.integers(0, K, N)]
    target = BlockTarget(np.zeros(K * D), -0.5 * np.eye(K * D), [Site(X, softmax_point, {"out": (y,)}, {}, K)])
    w = rng.normal(size=K * D)
    v, g = target.logp_grad(w[None])
    num_g = np.array([(target.logp_grad((w + e)[None])[0][0] - target.logp_grad((w - e)[None])[0][0]) / 2e-6
                      for e in 1e-6 * np.eye(K * D)])
    np.testing.assert_allclose(g[0], num_g, rtol=1e-6, atol=1e-7)
    num_h = np.array([(target.logp_grad((w + e)[None])[1][0] - target.logp_grad((w - e)[None])[1][0]) / 2e-6
                      for e in 1e-6 * np.eye(K * D)])
    np.testing.assert_allclose(target.hessian(w), num_h, rtol=1e-5, atol=1e-6)


def test_factored_softmax_hessian_equals_the_dense_one():
    """The softmax point rule's DiagPlusOuter Hessian and the block Hessian built from it agree with the
    dense −c(diag(s) − ssᵀ) and the K²-Gram assembly (masked rows, c = 0, included)."""
    from factors.base import DiagPlusOuter
    from factors.softmax import softmax_point
    from schedules.handlers import Site

    rng = np.random.default_rng(8)
    N, D, K = 30, 4, 5
    X, u = rng.normal(size=(N, D)), rng.normal(size=(N, K))
    d = rng.multinomial(3, np.ones(K) / K, size=N).astype(float)
    d[::7] = 0.0
    _, _, g2 = softmax_point(u, {"out": (d,)}, {})
    assert isinstance(g2, DiagPlusOuter)
    s, c = np.exp(u) / np.exp(u).sum(1, keepdims=True), d.sum(1)
    dense = -c[:, None, None] * (s[:, :, None] * np.eye(K) - s[:, :, None] * s[:, None, :])
    np.testing.assert_allclose(g2.dense(), dense, rtol=1e-13, atol=1e-15)
    site = Site(X, softmax_point, {"out": (d,)}, {}, K)
    np.testing.assert_allclose(site.hessian(g2), site.hessian(dense), rtol=1e-12, atol=1e-12)


def test_mode_search_leaves_newton_where_the_hessian_is_indefinite():
    """A double well −(x² − 1)² started at 0.1, where −∇² < 0: the trust-region method takes over and
    finds the mode at x = 1 (Newton's step alone would go to the density's local minimum at 0)."""
    from schedules.handlers.laplace import HandlerError, find_mode

    target = DensityTarget(lambda w: -(w[:, 0] ** 2 - 1.0) ** 2, 1, grad=lambda w: -4.0 * w * (w**2 - 1.0),
                           vectorized=True)
    w, H, v = find_mode(target, np.array([0.1]))
    np.testing.assert_allclose(w, [1.0], atol=1e-8)
    assert v == pytest.approx(0.0, abs=1e-14) and H[0, 0] == pytest.approx(-8.0, rel=1e-4)
    # a density that is not finite where the search starts is a HandlerError (a hyperparameter search
    # backs off from such values), not a failure inside the linear algebra
    bad = DensityTarget(lambda w: -np.sum(w**2, -1), 2, grad=lambda w: np.full_like(w, np.inf), vectorized=True)
    with pytest.raises(HandlerError, match="not finite"):
        find_mode(bad, np.zeros(2))


def test_joint_multiclass_block_beats_class_factorised_fits():
    rng = np.random.default_rng(7)
    N, D, K = 90, 3, 3
    X = np.c_[np.ones(N), rng.normal(size=(N, D - 1))]
    y = np.argmax(X @ rng.normal(size=(D, K)) * 2 + rng.gumbel(size=(N, K)), axis=1)
    joint = fg.infer(_softmax_model(X, y, K), handlers={"W": fg.MVI("lr", n_samples=300)})
    diag = fg.infer(_softmax_model(X, y, K), handlers={"W": fg.VIDiag(n_samples=300)})
    ncvmp = fg.infer(_softmax_model(X, y, K), algorithm=fg.NCVMP(), max_iter=300)
    assert joint.joint["W"].mean().shape == (K * D,)
    assert joint.posterior("W").mean().shape == (K, D)
    np.testing.assert_allclose(joint.posterior("W").mean().ravel(), joint.joint["W"].mean())
    assert joint.elbo > diag.elbo - 3 * (joint.elbo_se + diag.elbo_se)
    assert joint.elbo > ncvmp.elbo
