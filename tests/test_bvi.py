"""Boosting variational inference (Guo et al. 2016; docs/maths.md §8) and the Gaussian-mixture posterior.

The quick tests check the pieces (mixture densities, moments, gradients and entropy against scipy and
quadrature; the weight step's gradient against finite differences of the Monte Carlo discrepancy with
common random numbers; the residual's Hessian; determinism; a model block and a plain density).  The
accuracy claims of the paper's experiments (30 components on the synthetic targets, Nodal) take
minutes on a loaded machine and are marked slow.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import log_expit

import factorgraph as fg
from demos._data import data_dir
from distributions import GaussianMixture, MvGaussian
from factorgraph.posterior.results import ESTIMATE
from schedules.handlers import BVI, DensityTarget
from schedules.handlers.bvi_estimates import elbo_gain, mc_discrepancy, residual, weight_gradient
from schedules.handlers.bvi_search import lbfgs


def _load(name: str):
    return importlib.import_module(f"demos.{name}")  # the repository root is on sys.path (tests is a package)


@pytest.fixture(scope="module")
def bt():
    return _load("bvi_targets")


def _mixture(rng, K=4, D=3) -> GaussianMixture:
    A = rng.normal(size=(K, D, D))
    covs = A @ np.swapaxes(A, 1, 2) + 0.3 * np.eye(D)
    w = rng.dirichlet(np.ones(K))
    return GaussianMixture(w, 2.0 * rng.normal(size=(K, D)), covs)


# ------------------------------------------------------------------------------------------ GaussianMixture
def test_mixture_logpdf_is_the_direct_sum_of_scipy_densities():
    rng = np.random.default_rng(0)
    q = _mixture(rng)
    x = rng.normal(size=(7, 5, 3)) * 3
    direct = sum(w * stats.multivariate_normal(m, c).pdf(x) for w, m, c in zip(q.weights, q.means, q.covs,
                                                                                 strict=True))
    np.testing.assert_allclose(q.logpdf(x), np.log(direct), rtol=1e-10)
    comp = np.stack([stats.multivariate_normal(m, c).logpdf(x) for m, c in zip(q.means, q.covs, strict=True)], -1)
    np.testing.assert_allclose(q.component_logpdf(x), comp, rtol=1e-10)
    np.testing.assert_allclose(q.responsibilities(x).sum(-1), 1.0)
    # the scalar form: means (K,), variances (K,)
    q1 = GaussianMixture([0.3, 0.7], [-1.0, 2.0], [0.5, 2.0])
    t = np.linspace(-4, 5, 11)[:, None]
    np.testing.assert_allclose(q1.logpdf(t), np.log(0.3 * stats.norm(-1, np.sqrt(0.5)).pdf(t[:, 0])
                                                    + 0.7 * stats.norm(2, np.sqrt(2.0)).pdf(t[:, 0])))
    assert q1.component(1).mean() == pytest.approx([2.0])


def test_mixture_moments_match_samples_and_the_law_of_total_covariance():
    rng = np.random.default_rng(1)
    q = _mixture(rng)
    n = 200_000
    X = q.sample(n, rng)
    assert X.shape == (n, 3) and q.sample((2, 5), rng).shape == (2, 5, 3)
    mean, second = q.expected_stats()
    np.testing.assert_allclose(mean, q.mean())
    np.testing.assert_allclose(second, q.cov() + np.outer(mean, mean), atol=1e-10)
    se = X.std(0) / np.sqrt(n)
    assert np.all(np.abs(X.mean(0) - mean) < 5 * se)
    C = np.cov(X.T)
    assert np.max(np.abs(C - q.cov()) / np.sqrt(np.outer(np.diag(C), np.diag(C)))) < 0.02
    np.testing.assert_allclose(q.var(), np.diag(q.cov()))
    # E_q[r_k(x)] = ∫ π_k N_k = π_k
    resp = q.responsibilities(X)
    assert np.all(np.abs(resp.mean(0) - q.weights) < 5 * resp.std(0) / np.sqrt(n))


def test_mixture_gradient_and_hessian_match_finite_differences():
    rng = np.random.default_rng(2)
    q = _mixture(rng, K=3, D=2)
    x = rng.normal(size=(4, 2))
    v, g = q.logpdf_and_grad(x)
    np.testing.assert_allclose(v, q.logpdf(x))
    h = 1e-6
    for d in range(2):
        e = np.zeros(2)
        e[d] = h
        np.testing.assert_allclose(g[:, d], (q.logpdf(x + e) - q.logpdf(x - e)) / (2 * h), rtol=1e-5, atol=1e-7)
    H = q.logpdf_hessian(x[0])
    Hfd = np.stack([(q.logpdf_and_grad(x[:1] + e)[1][0] - q.logpdf_and_grad(x[:1] - e)[1][0]) / (2 * h)
                    for e in np.eye(2) * h], axis=1)
    np.testing.assert_allclose(H, Hfd, rtol=1e-5, atol=1e-6)


def test_mixture_entropy_estimate_matches_quadrature():
    q = GaussianMixture([0.3, 0.5, 0.2], [-3.0, 0.0, 4.0], [0.3, 1.0, 2.0])
    exact = -integrate.quad(lambda t: np.exp(q.logpdf([t])) * q.logpdf([t]), -20, 20, limit=200)[0]
    est, se = q.entropy_estimate(40_000, np.random.default_rng(3))
    assert 0 < se < 0.02
    assert abs(est - exact) < 4 * se
    assert q.entropy() == q.entropy()  # fixed seed: deterministic
    assert abs(q.entropy() - exact) < 0.03
    # a one-component mixture's entropy estimate is close to the Gaussian's
    g = GaussianMixture.from_gaussian(MvGaussian(mean=np.zeros(2), cov=np.diag([1.0, 4.0])))
    assert g.entropy() == pytest.approx(float(MvGaussian(mean=np.zeros(2), cov=np.diag([1.0, 4.0])).entropy()),
                                        abs=0.03)


def test_mixture_constructions_and_validation():
    q = GaussianMixture([1.0], [0.0], [1.0]).add(0.3, [1.0], [[1.0]]).add(1.0, [2.0], [[2.0]]).add(0.2, [3.0],
                                                                                                    [[1.0]])
    np.testing.assert_allclose(q.weights, [0.0, 0.0, 0.8, 0.2])
    alphas = [1.0, 0.3, 1.0, 0.2]
    np.testing.assert_allclose(q.head(2, alphas).weights, [0.7, 0.3])  # the mixture before α₃ = 1
    np.testing.assert_allclose(q.head(4, alphas).weights, q.weights)
    with pytest.raises(ValueError, match="no weight left"):
        q.head(2)
    m2 = _mixture(np.random.default_rng(4)).marginal([0, 2])
    assert m2.dim == 2 and m2.covs.shape == (4, 2, 2)
    with pytest.raises(ValueError, match="sum to 1"):
        GaussianMixture([0.5, 0.6], [0.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="positive definite"):
        GaussianMixture([1.0], [[0.0, 0.0]], [[[1.0, 2.0], [2.0, 1.0]]])
    with pytest.raises(ValueError, match="trailing axis"):
        q.logpdf(np.zeros((3, 2)))


# ------------------------------------------------------------------------------------------ BVI pieces
def test_elbo_gain_matches_the_quadrature_difference_of_elbos():
    """ELBO((1 − α)q + αh) − ELBO(q) by common random numbers, against 1-D quadrature, and its error
    shrinking with α (what lets the handler reject a harmful component of small weight)."""
    rng = np.random.default_rng(8)
    q = GaussianMixture([0.6, 0.4], [-2.0, 1.0], [1.0, 0.5])
    h = MvGaussian(mean=np.array([3.0]), cov=np.array([[0.6]]))
    target = GaussianMixture([0.5, 0.2, 0.3], [-2.0, 1.0, 3.0], [1.0, 0.4, 0.8])
    x = np.linspace(-15, 15, 60001)[:, None]

    def elbo(mix):
        lq = mix.logpdf(x)
        return float(np.trapezoid(np.exp(lq) * (target.logpdf(x) - lq), x[:, 0]))

    n = 4000
    Xh = h.sample(n, rng)
    Xq, _, idx = q.sample_stratified(n, rng)
    ses = []
    for alpha in (0.02, 0.3):
        at_h = (q.logpdf(Xh), h.logpdf(Xh), target.logpdf(Xh))
        at_q = (q.logpdf(Xq), h.logpdf(Xq), target.logpdf(Xq))
        gain, se = elbo_gain(alpha, at_h, at_q, idx, q.weights)
        exact = elbo(q.add(alpha, np.array([3.0]), np.array([[0.6]]))) - elbo(q)
        assert exact > 0 and abs(gain - exact) < 4 * se, (alpha, gain, exact, se)
        ses.append(se)
    assert ses[0] < 0.5 * ses[1]


def test_weight_gradient_matches_finite_differences_of_the_monte_carlo_elbo():
    """With common random numbers the derivative of the Monte Carlo discrepancy is the paper's gradient
    estimator (eq. 11) plus an importance-sampling estimate of ∫(h − q) = 0 (exactly), which is small."""
    rng = np.random.default_rng(5)
    q = GaussianMixture([0.6, 0.4], [-2.0, 1.0], [1.0, 0.5])
    h = MvGaussian(mean=np.array([3.0]), cov=np.array([[0.6]]))
    target = GaussianMixture([0.5, 0.2, 0.3], [-2.0, 1.0, 3.0], [1.0, 0.4, 0.8])
    n = 20_000
    Xh, Xq = h.sample(n, rng), q.sample(n, rng)

    def parts(X):
        return q.logpdf(X), h.logpdf(X), target.logpdf(X)

    at_h, at_q = parts(Xh), parts(Xq)
    for alpha in (0.1, 0.3, 0.7):
        g = weight_gradient(alpha, at_h, at_q)
        d = 1e-6
        fd = (mc_discrepancy(alpha + d, at_h, at_q) - mc_discrepancy(alpha - d, at_h, at_q)) / (2 * d)

        def ratio(a, alpha=alpha):
            lq, lh, _ = a
            return (np.exp(lh) - np.exp(lq)) / ((1 - alpha) * np.exp(lq) + alpha * np.exp(lh))

        corr = (1 - alpha) * ratio(at_q).mean() + alpha * ratio(at_h).mean()
        assert fd == pytest.approx(g + corr, abs=1e-6)
        assert abs(fd - g) < 0.05 and abs(g) > 0.1
    # the weight step reaches the minimiser of the (large-sample) discrepancy
    a_grid = np.linspace(0.0, 1.0, 201)
    best = a_grid[np.argmin([mc_discrepancy(a, at_h, at_q) for a in a_grid])]
    tgt = DensityTarget(target.logpdf, 1, vectorized=True)
    alpha, _ = BVI(seed=1, n_weight_samples=200)._weight(tgt, q, h, np.random.default_rng(6))
    assert abs(alpha - best) < 0.05


def test_tail_stabilised_residual_and_its_hessian():
    lp, lq = np.array([-np.inf, -50.0, 0.0, 3.0]), np.array([-60.0, -np.inf, 0.0, -2.0])
    np.testing.assert_allclose(residual(lp, lq, 1e-4), np.log((np.exp(lp) + 1e-4) / (np.exp(lq) + 1e-4)))
    # analytic assembly (target.hessian) against central differences of ∇r, at points across the tails
    target_q = GaussianMixture([0.5, 0.5], [[-1.0, 0.0], [2.0, 1.0]], [np.eye(2), [[1.0, 0.3], [0.3, 0.5]]])

    class Exact:
        dim = 2

        def logp_grad(self, W):
            W = np.atleast_2d(W)
            return -0.5 * np.sum(W**2 / np.array([4.0, 1.0]), 1) - np.log(4 * np.pi), -W / np.array([4.0, 1.0])

        def hessian(self, w):
            return -np.diag([0.25, 1.0])

    q = target_q
    for name in ("auto", "fd"):
        b = BVI(hessian=name)
        neg, pieces = b._residual_fn(Exact(), q, 0.0)
        for x in (np.array([0.3, -0.2]), np.array([4.0, 3.5])):
            H, _ = b._neg_hessian(Exact(), q, x, neg, pieces)
            e = 1e-5
            Hfd = np.stack([(neg(x + d)[1] - neg(x - d)[1]) / (2 * e) for d in np.eye(2) * e], 1)
            np.testing.assert_allclose(H, 0.5 * (Hfd + Hfd.T), rtol=1e-4, atol=1e-6)


def test_lbfgs_minimises_rosenbrock():
    from scipy.optimize import rosen, rosen_der

    for x0 in ([-1.2, 1.0], [-1.2, 1.0, -0.5, 0.3, 0.8, 1.1, -1.0, 1.5]):
        x, f, ok = lbfgs(lambda z: (rosen(z), rosen_der(z)), np.array(x0))
        assert ok and f < 1e-10
        np.testing.assert_allclose(x, 1.0, atol=1e-4)


def test_fixed_seed_gives_identical_results(bt):
    t = bt.mix1d_b()
    kw = dict(n_components=4, init="broad", max_weight_steps=200, n_elbo_samples=500, n_final_samples=1000)
    runs = [fg.approximate(t.logp, t.x0, fg.BVI(seed=s, **kw), grad=t.grad, vectorized=True) for s in (7, 7, 8)]
    a, b, c = (r.posterior for r in runs)
    for attr in ("weights", "means", "covs"):
        np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr))
    assert runs[0].elbo == runs[1].elbo and runs[0].elbo_se == runs[1].elbo_se
    np.testing.assert_array_equal(runs[0].info["elbo_trace"], runs[1].info["elbo_trace"])
    assert a.n_components != c.n_components or not np.array_equal(a.weights, c.weights)


def test_kl_falls_with_the_number_of_components(bt):
    """KL(q‖p) by numerical integration on a 1-D mixture, after k = 1, 2, 4, 8, 12 components."""
    t = bt.mix1d_a()
    r = fg.approximate(t.logp, t.x0, fg.BVI(n_components=12, init="broad", seed=0), grad=t.grad, vectorized=True)
    q = r.posterior
    assert q.n_components == 12 and r.kind == ESTIMATE
    ks = [1, 2, 4, 8, 12]
    kl = bt.kl_trace(q, t, ks, r.info["alpha_trace"])
    assert np.all(np.diff(kl) <= 0.01), kl
    assert kl[-1] < 0.25 * kl[1] and kl[-1] < 0.2
    # the ELBO trace is an estimate of −KL here (log Z = 0)
    assert abs(r.info["elbo_trace"][-1] + kl[-1]) < 4 * r.info["elbo_se_trace"][-1] + 0.02
    assert len(r.info["elbo_trace"]) == len(r.info["alpha_trace"]) == q.n_components


def test_numerical_kl_matches_a_dense_grid(bt):
    rng = np.random.default_rng(9)
    t2 = bt.mix2d()
    q2 = GaussianMixture([0.4, 0.6], [[-3.5, 4.0], [0.0, 0.5]], [np.eye(2) * 0.5, [[0.5, 0.1], [0.1, 0.3]]])
    kl_grid, mass = bt.kl_grid(q2, t2.logp, ((-9, 6), (-6, 9)), n=701)
    assert mass == pytest.approx(1.0, abs=1e-6)
    assert bt.kl_numerical(q2, t2.logp) == pytest.approx(kl_grid, abs=2e-4)
    t1 = bt.cauchy()
    q1 = GaussianMixture(rng.dirichlet(np.ones(3)), [-2.0, 0.0, 3.0], [0.5, 1.0, 4.0])
    kl1, mass1 = bt.kl_grid(q1, t1.logp, ((-20, 20),), n=20001)
    assert bt.kl_numerical(q1, t1.logp) == pytest.approx(kl1, abs=1e-5)


def _logistic(seed=2, N=60, D=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    y = rng.random(N) < 1 / (1 + np.exp(-X @ np.array([1.5, -1.0, 0.5])))
    with fg.Model("logistic-bvi") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=0.0, precision=1.0, dim=D)
        fg.bernoulli_logit("y", logit=fg.inner(X, w, plates=[n]), observed=y, method="quadrature")
    s = 2.0 * y - 1.0

    def logp(W):
        W = np.atleast_2d(W)
        return -0.5 * np.sum(W**2, 1) - 0.5 * D * np.log(2 * np.pi) + log_expit((W @ X.T) * s).sum(1)

    return m, logp


def _importance_reference(logp, mu, C, n=200_000, seed=0):
    """Posterior mean, covariance and log Z by importance sampling from a Student-t (ν = 5) around the
    Laplace solution with 1.5× its scale."""
    prop = stats.multivariate_t(mu, C * 1.5**2, df=5, seed=seed)
    W = prop.rvs(n)
    lw = logp(W) - prop.logpdf(W)
    w = np.exp(lw - lw.max())
    m = w @ W / w.sum()
    V = ((W - m) * w[:, None]).T @ (W - m) / w.sum()
    return m, V, float(np.log(w.mean()) + lw.max())


def test_bvi_on_a_logistic_regression_block():
    """fg.infer with BVI on the block of fg.inner(X, w): evidence labelled, block terms consistent, the
    fit cached when the block does not change."""
    m, logp = _logistic()
    h = fg.BVI(n_components=4, max_weight_steps=200, n_elbo_samples=1000, n_final_samples=4000, seed=0)
    r = fg.infer(m, handlers={"w": h})
    q = r.posterior("w")
    fit = h.last_fit
    assert isinstance(q, GaussianMixture) and r.evidence_kind == ESTIMATE and fit.kind == ESTIMATE
    assert len(fit.info["elbo_trace"]) == q.n_components
    assert r.n_iter == 1 and r.converged  # the only latent variable: its first fit is the fixed point
    # the engine's ELBO (exact prior term + the handler's Monte Carlo site term and entropy) and the
    # handler's whole-target estimate agree within Monte Carlo error
    assert abs(r.elbo - fit.log_evidence) < 4 * np.hypot(fit.se, r.elbo_se) + 0.02
    W = q.sample(20_000, np.random.default_rng(1))
    prior = -0.5 * np.sum(W**2, 1) - 1.5 * np.log(2 * np.pi)
    assert fit.site_term == pytest.approx(float(np.mean(logp(W) - prior)), abs=5 * fit.info["site_se_alone"] + 0.02)
    assert fit.entropy == pytest.approx(q.entropy_estimate(20_000, np.random.default_rng(2))[0], abs=0.05)
    # against an importance-sampling reference: mean, variance, and the bound below log Z
    la = fg.approximate(logp, np.zeros(3), fg.Laplace(), vectorized=True).posterior
    mean, V, log_z = _importance_reference(logp, la.mean(), la.cov())
    sd = np.sqrt(np.diag(V))
    assert np.all(np.abs(q.mean() - mean) < 0.25 * sd)
    assert np.all(np.abs(q.var() / np.diag(V) - 1) < 0.25)
    assert r.elbo < log_z + 4 * r.elbo_se and r.elbo > log_z - 0.15


def test_bvi_on_a_plain_density_and_bad_options():
    cauchy = lambda W: -np.log(np.pi) - np.log1p(np.atleast_2d(W)[:, 0] ** 2)  # noqa: E731
    r = fg.approximate(cauchy, [0.5], fg.BVI(n_components=4, max_weight_steps=200, n_final_samples=4000),
                       vectorized=True)
    assert isinstance(r.posterior, GaussianMixture) and r.kind == ESTIMATE and r.elbo_se > 0
    assert r.elbo < 4 * r.elbo_se  # log Z = 0
    assert r.info["init"] == "gaussian" and r.info["elbo_trace"][-1] > r.info["elbo_trace"][0] - 0.05
    # the diagonal-Hessian option: every added component is axis-aligned
    t = GaussianMixture([0.5, 0.5], [[-2.0, 0.0], [2.0, 1.0]], [[[1.0, 0.6], [0.6, 1.0]], np.eye(2) * 0.5])
    rd = fg.approximate(t.logpdf, np.zeros(2), fg.BVI(n_components=4, diagonal=True, init="broad",
                                                       max_weight_steps=200, n_final_samples=2000), vectorized=True)
    covs = rd.posterior.covs[1:]
    assert len(covs) and np.all(covs[:, 0, 1] == 0.0)
    for bad in (dict(n_components=0), dict(lam=-1.0), dict(init="flat"), dict(hessian="exact"),
                dict(min_weight=1.0), dict(select="best"), dict(seed=-1)):
        with pytest.raises(fg.ModelError, match="BVI"):
            fg.BVI(**bad)


# ------------------------------------------------------------------------------------------ the paper's claims
@pytest.mark.slow
@pytest.mark.parametrize("name", ["mix1d_a", "mix1d_b"])
def test_1d_mixtures_every_mode_carries_its_mass(bt, name):
    """The paper's Fig. 2b: from a broad N(0, 100) start, 30 iterations with the default settings."""
    t = bt.TARGETS[name]()
    r = fg.approximate(t.logp, t.x0, fg.BVI(n_components=31, init="broad", seed=0), grad=t.grad, vectorized=True)
    mq, mp = bt.mode_masses(r.posterior, t)
    assert np.max(np.abs(mq - mp)) < 0.05, (mq, mp)
    assert np.max(np.abs(mp - t.mixture.weights[np.argsort(t.mixture.means[:, 0])])) < 0.01
    ks = [1, 2, 5, r.posterior.n_components]
    kl = bt.kl_trace(r.posterior, t, ks, r.info["alpha_trace"])
    assert kl[-1] < kl[2] < kl[0], kl


@pytest.mark.slow
def test_2d_mixture_kl_five_times_below_the_best_gaussian(bt):
    """The paper's Fig. 2c: the five-component 2-D mixture, broad start, default settings.  (Across seeds 0–3 the
    final KL is 0.16–0.29, ratio 4.4–7.9; with λ = 1 each mode takes one component and KL ≈ 0.02–0.09.)"""
    t = bt.mix2d()
    r = fg.approximate(t.logp, t.x0, fg.BVI(n_components=31, init="broad", seed=0), grad=t.grad, vectorized=True)
    q = r.posterior
    _, kl_best = bt.best_gaussian(t, list(t.mixture.means) + [t.mixture.mean()])
    ks = [1, 2, 3, 5, q.n_components]
    kl = bt.kl_trace(q, t, ks, r.info["alpha_trace"])
    assert np.all(np.diff(kl) < 0.02), kl
    assert kl[-1] * 5 <= kl_best, (kl, kl_best)


@pytest.mark.slow
def test_banana_kl_five_times_below_the_best_gaussian(bt):
    """The paper's Fig. 5: the banana (b = 0.1), broad start, ε = 1e−3: KL 0.19–0.23 over seeds 0–2.  (With the
    paper's standard-normal start and the default ε = 1e−4 the peaks chase the far tails of the arms and 30
    components reach KL ≈ 0.29–0.41, ratio 3.1–4.4.)"""
    t = bt.banana()
    r = fg.approximate(t.logp, t.x0, fg.BVI(n_components=31, init="broad", eps=1e-3, seed=0), grad=t.grad,
                       vectorized=True)
    q = r.posterior
    _, kl_best = bt.best_gaussian(t, [np.array([0.0, 10.0]), np.zeros(2), np.array([8.0, 3.0])])
    kl = bt.kl_trace(q, t, [2, 5, 10, 20, q.n_components], r.info["alpha_trace"])
    assert kl[-1] < kl[2] < kl[0], kl
    assert q.n_components == 31 and kl[-1] * 5 <= kl_best, (kl, kl_best)


def _nodal_model():
    X = np.loadtxt(data_dir("nodal") / "X.csv", delimiter=",", skiprows=1)
    y = np.loadtxt(data_dir("nodal") / "y.csv", delimiter=",", skiprows=1).astype(bool)
    N, D = X.shape
    with fg.Model("nodal") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=0.0, precision=1.0, dim=D)
        fg.bernoulli_logit("y", logit=fg.inner(X, w, plates=[n]), observed=y, method="quadrature")
    s = 2.0 * y - 1.0

    def logp(W):
        W = np.atleast_2d(W)
        return -0.5 * np.sum(W**2, 1) - 0.5 * D * np.log(2 * np.pi) + log_expit((W @ X.T) * s).sum(1)

    return m, logp, D


@pytest.fixture(scope="module")
def nodal():
    m, logp, D = _nodal_model()
    la = fg.approximate(logp, np.zeros(D), fg.Laplace(), vectorized=True).posterior
    mean, V, log_z = _importance_reference(logp, la.mean(), la.cov(), n=400_000)
    h = fg.BVI(n_components=31, seed=0)
    r = fg.infer(m, handlers={"w": h})
    mf = fg.infer(m, handlers={"w": fg.VIDiag()}).posterior("w")
    return {"q": r.posterior("w"), "mean": mean, "V": V, "log_z": log_z, "mf": mf, "result": r, "fit": h.last_fit}


@pytest.mark.slow
def test_nodal_variances_closer_than_mean_field(nodal):
    q, V, mf = nodal["q"], nodal["V"], nodal["mf"]
    err_bvi = np.abs(q.var() - np.diag(V))
    err_mf = np.abs(mf.var() - np.diag(V))
    assert np.all(err_bvi < err_mf), (err_bvi, err_mf)
    assert nodal["result"].elbo < nodal["log_z"] + 4 * nodal["result"].elbo_se


@pytest.mark.slow
def test_nodal_means_within_015_sd(nodal):
    sd = np.sqrt(np.diag(nodal["V"]))
    assert np.all(np.abs(nodal["q"].mean() - nodal["mean"]) < 0.15 * sd)


@pytest.mark.slow
def test_nodal_means_within_01_sd(nodal):
    """Default start (the Gaussian KL optimum).  From the Laplace start the means keep Laplace's error, up to
    0.12 posterior sd for the intercept: boosting adds components, it does not move the first one."""
    sd = np.sqrt(np.diag(nodal["V"]))
    assert np.all(np.abs(nodal["q"].mean() - nodal["mean"]) < 0.1 * sd)


# ------------------------------------------------------------------------------------------ demos (small)
@pytest.mark.slow
def test_demos_run_small():
    pytest.importorskip("matplotlib")
    targets = _load("bvi_targets").main(small=True, seed=0)
    assert targets["results"]["mix1d_a"]["kl"][-1] < targets["results"]["mix1d_a"]["kl"][1]
    sensors = _load("bvi_sensor_network").main(small=True, seed=0)
    # the small run (12 components, a 6000-iteration reference) adds one component: the bound rises a lot, while
    # the mean's relative error against the short tempering reference stays at Laplace's (0.0562 vs 0.0549 at
    # seed 0, the same before and after the handler rework); the full-size run is where the paper's REM claim is
    # checked by the demo's printed statements
    assert sensors["elbo_trace"][-1] > sensors["elbo_trace"][0] + 1.0
    assert sensors["rem_bvi"] <= 1.05 * sensors["rem_laplace"]
    nodal = _load("bvi_nodal").main(small=True, seed=0)
    assert nodal["claims"]["Fig. 7: BVI's variances are closer to the reference than mean-field's"]
    for path in targets["figures"] + sensors["figures"] + [nodal["figure"]]:
        assert Path(path).exists()
