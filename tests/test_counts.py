"""Count data: Poisson, Binomial and Multinomial distributions, factors, builders and the Poisson regression."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats
from scipy.special import betaln, gammaln

import factorgraph as fg
from distributions import Binomial, Multinomial, Poisson
from factorgraph import models
from factors.binomial import BINOMIAL_LOGIT
from factors.multinomial import MULTINOMIAL_SOFTMAX
from factors.poisson import POISSON_LOG


# ------------------------------------------------------------------------------------ distributions
def test_distributions_match_scipy():
    lam = np.array([0.3, 2.0, 11.0])
    q = Poisson(lam)
    x = np.array([0, 3, 12])
    np.testing.assert_allclose(q.logpmf(x), stats.poisson.logpmf(x, lam), rtol=1e-12)
    np.testing.assert_allclose(q.entropy(), stats.poisson.entropy(lam), rtol=1e-9)
    assert q.sample(5, 0).shape == (5, 3)
    b = Binomial([5, 12, 30], [0.1, 0.5, 0.8])
    np.testing.assert_allclose(b.logpmf([2, 6, 30]), stats.binom.logpmf([2, 6, 30], [5, 12, 30], [0.1, 0.5, 0.8]))
    np.testing.assert_allclose(b.entropy(), stats.binom.entropy([5, 12, 30], [0.1, 0.5, 0.8]), rtol=1e-9)
    assert b.logpmf(6)[0] == -np.inf
    p = np.array([0.2, 0.3, 0.5])
    mn = Multinomial(7, p)
    np.testing.assert_allclose(mn.logpmf([1, 2, 4]), stats.multinomial.logpmf([1, 2, 4], 7, p), rtol=1e-12)
    np.testing.assert_allclose(mn.entropy(), stats.multinomial.entropy(7, p), rtol=1e-9)
    np.testing.assert_allclose(mn.cov(), stats.multinomial.cov(7, p), rtol=1e-12)
    assert mn.logpmf([1, 2, 3]) == -np.inf
    assert mn.sample(4, 1).sum(-1).tolist() == [7] * 4
    with pytest.raises(ValueError, match="trials must be non-negative integers"):
        Binomial(2.5, 0.3)
    with pytest.raises(ValueError, match="rate must be positive"):
        Poisson(-1.0)


# ------------------------------------------------------------------------------------ exact evidence
def test_gamma_poisson_evidence_is_exact():
    rng = np.random.default_rng(0)
    y, e = rng.poisson(3.0, size=30), rng.uniform(0.5, 2.0, 30)
    a, b = 2.0, 1.5
    with fg.Model("gamma-poisson") as m:
        n = fg.plate("n", 30)
        lam = fg.gamma("lam", shape=a, rate=b)
        fg.poisson("y", rate=lam, exposure=e, plates=[n], observed=y)
    r = fg.infer(m)
    A, B = a + y.sum(), b + e.sum()
    exact = (a * np.log(b) - gammaln(a) + gammaln(A) - A * np.log(B) + np.sum(y * np.log(e))
             - gammaln(y + 1.0).sum())
    assert abs(r.elbo - exact) < 1e-10
    assert r.evidence_kind == "lower bound"
    np.testing.assert_allclose(r.posterior("lam").shape, A)
    np.testing.assert_allclose(r.posterior("lam").rate, B)


def test_masked_counts_are_missing_entries():
    """The masked entries of a numpy masked array are missing, as with mask=: the fit ignores them (they used to
    count as observed zeros in every count builder)."""
    y = np.array([1.0, 2.0, 7.0, 9.0])
    fits = []
    for observed, mask in [(np.ma.masked_array(y, mask=[0, 0, 1, 1]), None), (y, np.array([1, 1, 0, 0], bool))]:
        with fg.Model() as m:
            n = fg.plate("n", 4)
            lam = fg.gamma("lam", 1.0, 1.0)
            v = fg.poisson("y", lam, plates=[n], observed=observed, mask=mask)
            pi = fg.dirichlet("pi", np.ones(2))
            fg.multinomial("c", trials=3, probs=pi, plates=[n],
                           observed=np.ma.masked_array([[1, 2], [3, 0], [-1, 9], [0, 3]], mask=[[0, 0], [0, 0], [1, 1],
                                                                                               [0, 0]]))
        np.testing.assert_array_equal(v.mask, [True, True, False, False])
        r = fg.infer(m)
        fits.append((r.posterior("lam").shape, r.posterior("lam").rate, *r.posterior("pi").concentration))
    np.testing.assert_allclose(fits[0], [1.0 + 3.0, 1.0 + 2.0, 1.0 + 4.0, 1.0 + 5.0])  # conjugate updates
    np.testing.assert_allclose(fits[1], fits[0])


def test_beta_binomial_evidence_is_exact():
    rng = np.random.default_rng(1)
    nt = rng.integers(0, 12, 25)
    y = rng.binomial(nt, 0.3)
    with fg.Model("beta-binomial") as m:
        n = fg.plate("n", 25)
        p = fg.beta("p", 2.0, 3.0)
        fg.binomial("y", trials=nt, probs=p, plates=[n], observed=y)
    r = fg.infer(m)
    exact = (np.sum(gammaln(nt + 1.0) - gammaln(y + 1.0) - gammaln(nt - y + 1.0))
             + betaln(2.0 + y.sum(), 3.0 + (nt - y).sum()) - betaln(2.0, 3.0))
    assert abs(r.elbo - exact) < 1e-10


def test_dirichlet_multinomial_evidence_is_exact():
    rng = np.random.default_rng(2)
    alpha = np.array([1.0, 2.0, 0.5, 3.0])
    Y = rng.multinomial(9, [0.1, 0.2, 0.3, 0.4], size=20)

    def log_mvbeta(a):
        return gammaln(a).sum() - gammaln(a.sum())

    with fg.Model("dirichlet-multinomial") as m:
        n = fg.plate("n", 20)
        pi = fg.dirichlet("pi", alpha)
        fg.multinomial("y", trials=9, probs=pi, plates=[n], observed=Y)
    r = fg.infer(m)
    exact = (np.sum(gammaln(10.0) - gammaln(Y + 1.0).sum(1)) + log_mvbeta(alpha + Y.sum(0)) - log_mvbeta(alpha))
    assert abs(r.elbo - exact) < 1e-10


def test_constant_parameters_give_the_log_likelihood():
    y = np.array([0, 2, 5])
    Y = np.array([[1, 2, 0], [0, 0, 3]])
    with fg.Model("constants") as m:
        n, k = fg.plate("n", 3), fg.plate("k", 2)
        fg.poisson("a", rate=np.array([0.5, 1.0, 4.0]), exposure=2.0, plates=[n], observed=y)
        fg.binomial("b", trials=6, probs=0.4, plates=[n], observed=y)
        fg.multinomial("c", trials=3, probs=[0.2, 0.3, 0.5], plates=[k], observed=Y)
        mu = fg.gaussian("mu", 0.0, precision=1.0)  # something latent so there is something to infer
        fg.gaussian("x", mu, precision=1.0, observed=0.3)
    r = fg.infer(m)
    q = r.posterior("mu")
    gauss = (-0.5 * np.log(2 * np.pi) - 0.5 * (q.var() + q.mean() ** 2)
             - 0.5 * np.log(2 * np.pi) - 0.5 * (0.09 - 0.6 * q.mean() + q.var() + q.mean() ** 2) + q.entropy())
    loglik = (stats.poisson.logpmf(y, 2.0 * np.array([0.5, 1.0, 4.0])).sum() + stats.binom.logpmf(y, 6, 0.4).sum()
              + stats.multinomial.logpmf(Y, 3, [0.2, 0.3, 0.5]).sum())
    np.testing.assert_allclose(r.elbo, loglik + gauss, rtol=1e-12)


def test_gated_gamma_rate_is_a_poisson_mixture():
    rng = np.random.default_rng(3)
    y = np.concatenate([rng.poisson(1.0, 150), rng.poisson(12.0, 150)])
    with fg.Model("poisson-mixture") as m:
        k, n = fg.plate("k", 2), fg.plate("n", 300)
        lam = fg.gamma("lam", shape=1.0, rate=0.1, plates=[k])
        pi = fg.dirichlet("pi", np.ones(2))
        z = fg.categorical("z", probs=pi, plates=[n], categories=k)
        fg.poisson("y", rate=lam[z], plates=[n], observed=y)
    r = fg.infer(m, max_iter=300)
    rates = np.sort(r.posterior("lam").mean())
    np.testing.assert_allclose(rates, [1.0, 12.0], rtol=0.2)



def test_gated_beta_and_dirichlet_are_binomial_and_multinomial_mixtures():
    rng = np.random.default_rng(9)
    N = 300
    z0 = rng.integers(0, 2, N)
    nt = rng.integers(5, 15, N)
    y = rng.binomial(nt, np.where(z0, 0.8, 0.2))
    Y = np.stack([rng.multinomial(10, [0.7, 0.2, 0.1] if t else [0.1, 0.2, 0.7]) for t in z0])
    with fg.Model("binomial-mixture") as m:
        k, n = fg.plate("k", 2), fg.plate("n", N)
        p = fg.beta("p", 1.0, 1.0, plates=[k])
        z = fg.categorical("z", probs=np.ones(2) / 2, plates=[n], categories=k)
        fg.binomial("y", trials=nt, probs=p[z], plates=[n], observed=y)
    np.testing.assert_allclose(np.sort(fg.infer(m, max_iter=300).posterior("p").mean()), [0.2, 0.8], atol=0.03)
    with fg.Model("multinomial-mixture") as m:
        k, n = fg.plate("k", 2), fg.plate("n", N)
        pi = fg.dirichlet("pi", np.ones(3), plates=[k])
        z = fg.categorical("z", probs=np.ones(2) / 2, plates=[n], categories=k)
        fg.multinomial("y", trials=10, probs=pi[z], plates=[n], observed=Y)
    means = fg.infer(m, max_iter=300).posterior("pi").mean()
    np.testing.assert_allclose(means[np.argsort(means[:, 0])], [[0.1, 0.2, 0.7], [0.7, 0.2, 0.1]], atol=0.03)


def test_poisson_log_with_an_offset_expression_and_a_shared_rate():
    rng = np.random.default_rng(10)
    N = 2000
    X, off = rng.normal(size=(N, 2)), rng.normal(size=N)
    y = rng.poisson(np.exp(X @ np.array([0.3, -0.2]) + off))
    with fg.Model("offset") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", 0.0, precision=1.0, dim=2)
        fg.poisson_log("y", fg.inner(X, w, plates=[n]) + off, plates=[n], observed=y)
    np.testing.assert_allclose(fg.infer(m, algorithm=fg.NCVMP()).posterior("w").mean(), [0.3, -0.2], atol=0.05)
    with fg.Model("shared") as m:
        n = fg.plate("n", N)
        mu = fg.gaussian("mu", 0.0, precision=0.01)
        fg.poisson_log("y", mu, plates=[n], observed=y)
    r = fg.infer(m, algorithm=fg.NCVMP())
    assert r.converged
    # the Gaussian-family optimum: stationarity of Σy·m − N exp(m + v/2) − 0.01 m²/2 and of its v-part
    q = r.posterior("mu")
    mm, v = float(q.mean()), float(q.var())
    rate = N * np.exp(mm + v / 2)
    assert abs(y.sum() - rate - 0.01 * mm) < 1e-6 * y.sum()
    np.testing.assert_allclose(1 / v, rate + 0.01, rtol=1e-6)

# ------------------------------------------------------------------------------------ point rules
@pytest.mark.parametrize("ftype", [POISSON_LOG, BINOMIAL_LOGIT, MULTINOMIAL_SOFTMAX], ids=lambda f: f.name)
def test_point_rules_are_derivatives(ftype):
    """The handlers' pointwise (log f, ∂, ∂²) agree with finite differences and with the exact log pmf."""
    rng = np.random.default_rng(4)
    edge = next(iter(ftype.pointwise))
    point = ftype.pointwise[edge]
    h = 1e-6
    if ftype is MULTINOMIAL_SOFTMAX:
        y = rng.multinomial(6, [0.2, 0.3, 0.5], size=4).astype(float)
        m = {"out": Multinomial.observed_stats(y)}
        u = rng.normal(size=(4, 3))
        val, g, H = point(u, m, {})
        ref = stats.multinomial.logpmf(y, 6, np.exp(u) / np.exp(u).sum(-1, keepdims=True))
        np.testing.assert_allclose(val, ref, rtol=1e-10)
        for j in range(3):
            du = np.zeros(3)
            du[j] = h
            np.testing.assert_allclose(g[:, j], (point(u + du, m, {})[0] - point(u - du, m, {})[0]) / (2 * h),
                                       rtol=1e-6, atol=1e-6)
            dg = (point(u + du, m, {})[1] - point(u - du, m, {})[1]) / (2 * h)
            np.testing.assert_allclose(H.dense()[:, :, j], dg, rtol=1e-6, atol=1e-6)
        return
    u = rng.normal(size=5)
    if ftype is POISSON_LOG:
        y = rng.poisson(2.0, 5).astype(float)
        le = rng.normal(size=5)
        m, p = {"out": Poisson.observed_stats(y)}, {"log_exposure": le}
        ref = stats.poisson.logpmf(y, np.exp(u + le))
    else:
        n = np.full(5, 7.0)
        y = rng.binomial(7, 0.4, 5).astype(float)
        m = {"out": Binomial.observed_stats(y)}
        p = {"trials": n, "log_coef": gammaln(n + 1) - gammaln(y + 1) - gammaln(n - y + 1)}
        ref = stats.binom.logpmf(y, n, 1 / (1 + np.exp(-u)))
    val, g, H = point(u, m, p)
    np.testing.assert_allclose(val, ref, rtol=1e-10)
    np.testing.assert_allclose(g, (point(u + h, m, p)[0] - point(u - h, m, p)[0]) / (2 * h), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(H, (point(u + h, m, p)[1] - point(u - h, m, p)[1]) / (2 * h), rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------------------------ Poisson log link
def _poisson_data(N=200, D=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    e = rng.uniform(0.5, 2.0, N)
    y = rng.poisson(e * np.exp(X @ np.linspace(0.5, -0.3, D)))
    return X, y, e


def test_ncvmp_fixed_point_is_the_gaussian_elbo_optimum():
    """NCVMP with a full-covariance q(w) stops at the optimum of the closed-form Gaussian-family ELBO
    (found directly by L-BFGS over the mean and the Cholesky factor)."""
    X, y, e = _poisson_data()
    N, D = X.shape
    lam0 = 2.0
    with fg.Model("poisson-log") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=0.0, precision=lam0, dim=D)
        fg.poisson_log("y", fg.inner(X, w, plates=[n]), exposure=e, plates=[n], observed=y)
    r = fg.infer(m, algorithm=fg.NCVMP(), param_tol=1e-12, max_iter=200)
    assert r.converged
    q = r.posterior("w")
    tril = np.tril_indices(D)
    const = np.sum(y * np.log(e) - gammaln(y + 1.0))

    def neg_elbo(theta):
        mu, L = theta[:D], np.zeros((D, D))
        L[tril] = theta[D:]
        d = np.diag_indices(D)
        L[d] = np.exp(L[d])
        S = L @ L.T
        xm, xSx = X @ mu, np.einsum("nd,de,ne->n", X, S, X)
        rate = e * np.exp(xm + 0.5 * xSx)
        lik = np.sum(y * xm - rate) + const
        prior = 0.5 * D * np.log(lam0 / (2 * np.pi)) - 0.5 * lam0 * (mu @ mu + np.trace(S))
        ent = 0.5 * D * (1 + np.log(2 * np.pi)) + np.sum(np.log(np.diag(L)))
        # gradient
        gx = y - rate
        gmu = X.T @ gx - lam0 * mu
        gS = -0.5 * (X.T * rate) @ X - 0.5 * lam0 * np.eye(D)
        gL = 2.0 * gS @ L
        gL[d] = gL[d] * np.diag(L) + 1.0
        return -(lik + prior + ent), -np.concatenate([gmu, gL[tril]])

    theta0 = np.concatenate([np.zeros(D), np.zeros(len(tril[0]))])
    opt = optimize.minimize(neg_elbo, theta0, jac=True, method="L-BFGS-B",
                            options={"ftol": 1e-15, "gtol": 1e-11, "maxiter": 5000})
    mu = opt.x[:D]
    L = np.zeros((D, D))
    L[tril] = opt.x[D:]
    L[np.diag_indices(D)] = np.exp(L[np.diag_indices(D)])
    np.testing.assert_allclose(q.mean(), mu, atol=1e-6)
    np.testing.assert_allclose(q.cov(), L @ L.T, atol=1e-6)
    np.testing.assert_allclose(r.elbo, -opt.fun, atol=1e-6, rtol=0)


def test_poisson_regression_and_predictive():
    X, y, e = _poisson_data(N=400, D=4, seed=5)
    r = models.poisson_regression(X, y, exposure=e)
    assert r.converged
    w = r.posterior("w").mean()
    np.testing.assert_allclose(w, np.linspace(0.5, -0.3, 4), atol=0.15)
    ra = models.poisson_regression(X, y, exposure=e, ard=True)
    assert ra.posterior("alpha").mean().shape == (4,)
    pred = models.poisson_predictive(r, X[:7], exposure=e[:7])
    # Monte Carlo over q(w) and the counts
    q = r.posterior("w")
    W = q.sample(200_000, np.random.default_rng(0))
    lam = e[:7] * np.exp(W @ X[:7].T)
    np.testing.assert_allclose(pred.mean, lam.mean(0), rtol=5e-3)
    np.testing.assert_allclose(pred.var, lam.mean(0) + lam.var(0), rtol=2e-2)


def test_laplace_handler_claims_the_poisson_site():
    X, y, e = _poisson_data(N=300, D=3, seed=6)
    model = models.poisson_regression_model(X, y, exposure=e)
    rl = fg.infer(model, handlers={"w": fg.Laplace()})
    rn = models.poisson_regression(X, y, exposure=e)
    np.testing.assert_allclose(rl.posterior("w").mean(), rn.posterior("w").mean(), atol=0.02)
    rm = fg.infer(models.poisson_regression_model(X, y, exposure=e), handlers={"w": fg.MVI("mean")})
    np.testing.assert_allclose(rm.posterior("w").mean(), rn.posterior("w").mean(), atol=0.02)


def test_binomial_logit_methods_agree_with_bernoulli_rows():
    """A binomial-logit row of n trials carries the same information as n Bernoulli-logit rows."""
    rng = np.random.default_rng(7)
    N, D = 60, 2
    X = rng.normal(size=(N, D))
    nt = rng.integers(1, 6, N)
    y = rng.binomial(nt, 1 / (1 + np.exp(-(X @ np.array([1.0, -0.5])))))
    rows = np.repeat(np.arange(N), nt)
    s = np.concatenate([np.r_[np.ones(k), np.zeros(t - k)] for k, t in zip(y, nt, strict=True)])
    const = np.sum(gammaln(nt + 1.0) - gammaln(y + 1.0) - gammaln(nt - y + 1.0))
    for method in ("quadrature", "tilted", "quadratic"):
        with fg.Model("binomial-logit") as m:
            n = fg.plate("n", N)
            w = fg.mv_gaussian("w", mean=0.0, precision=1.0, dim=D)
            fg.binomial_logit("y", trials=nt, logit=fg.inner(X, w, plates=[n]), plates=[n], observed=y, method=method)
        with fg.Model("bernoulli-logit") as mb:
            n = fg.plate("n", len(rows))
            w = fg.mv_gaussian("w", mean=0.0, precision=1.0, dim=D)
            fg.bernoulli_logit("y", logit=fg.inner(X[rows], w, plates=[n]), observed=s, method=method)
        alg = fg.VMP() if method == "quadratic" else fg.NCVMP()
        r = fg.infer(m, algorithm=alg, max_iter=500, tol=1e-13, param_tol=None)
        rb = fg.infer(mb, algorithm=alg, max_iter=500, tol=1e-13, param_tol=None)
        np.testing.assert_allclose(r.posterior("w").mean(), rb.posterior("w").mean(), atol=1e-6, err_msg=method)
        np.testing.assert_allclose(r.elbo, rb.elbo + const, atol=1e-6, err_msg=method)


def test_multinomial_softmax_adds_the_coefficient_to_counts_softmax():
    rng = np.random.default_rng(8)
    N, D, K = 40, 2, 3
    X = rng.normal(size=(N, D))
    Y = np.stack([rng.multinomial(5, np.ones(K) / K) for _ in range(N)])

    def build(kind):
        with fg.Model(kind) as m:
            n, k = fg.plate("n", N), fg.plate("k", K)
            W = fg.mv_gaussian("W", mean=0.0, precision=1.0, plates=[k], dim=D)
            g = fg.inner(X, W, plates=[n])
            if kind == "multinomial":
                fg.multinomial_softmax("y", trials=5, logits=g, over=k, observed=Y)
            else:
                fg.categorical_softmax("y", logits=g, over=k, observed=Y, counts=True)
        return m

    r = fg.infer(build("multinomial"), algorithm=fg.NCVMP(), max_iter=300)
    rc = fg.infer(build("categorical"), algorithm=fg.NCVMP(), max_iter=300)
    coef = np.sum(gammaln(6.0) - gammaln(Y + 1.0).sum(1))
    np.testing.assert_allclose(r.posterior("W").mean(), rc.posterior("W").mean(), atol=1e-8)
    np.testing.assert_allclose(r.elbo, rc.elbo + coef, atol=1e-8)


# ------------------------------------------------------------------------------------ bad input
def test_bad_counts_are_named():
    with fg.Model("bad") as m:  # noqa: F841
        n = fg.plate("n", 3)
        lam = fg.gamma("lam", 1.0, 1.0)
        p = fg.beta("p", 1.0, 1.0)
        pi = fg.dirichlet("pi", np.ones(3))
        w = fg.gaussian("w", 0.0, precision=1.0, plates=[n])
        k = fg.plate("k", 3)
        g = fg.gaussian("g", 0.0, precision=1.0, plates=[n, k])
        with pytest.raises(fg.ModelError, match="'y1'.*non-negative integers.*2.5"):
            fg.poisson("y1", rate=lam, plates=[n], observed=[1, 2.5, 3])
        with pytest.raises(fg.ModelError, match="'y2'.*non-negative integers.*-1"):
            fg.poisson_log("y2", w, observed=[1, -1, 3])
        with pytest.raises(fg.ModelError, match="'y3'.*exceed the trials"):
            fg.binomial("y3", trials=[4, 4, 2], probs=p, plates=[n], observed=[1, 2, 3])
        with pytest.raises(fg.ModelError, match="'y4'.*exceed the trials"):
            fg.binomial_logit("y4", trials=2, logit=w, observed=[1, 2, 3])
        with pytest.raises(fg.ModelError, match="'y5'.*shape"):
            fg.poisson("y5", rate=lam, plates=[n], observed=[1, 2])
        with pytest.raises(fg.ModelError, match="'y6'.*sum to the trials"):
            fg.multinomial("y6", trials=4, probs=pi, plates=[n], observed=[[1, 2, 1], [0, 0, 4], [1, 1, 1]])
        with pytest.raises(fg.ModelError, match="'y7'.*shape"):
            fg.multinomial("y7", trials=4, probs=pi, plates=[n], observed=[[1, 3], [0, 4], [2, 2]])
        with pytest.raises(fg.ModelError, match="'y8'.*must be observed"):
            fg.poisson("y8", rate=lam, plates=[n])
        with pytest.raises(fg.ModelError, match="'y9'.*trials must be non-negative integers"):
            fg.binomial("y9", trials=2.5, probs=p, plates=[n], observed=[1, 2, 0])
        with pytest.raises(fg.ModelError, match="'y10'.*exposure must be positive"):
            fg.poisson_log("y10", w, exposure=[1.0, 0.0, 1.0], observed=[1, 2, 3])
        with pytest.raises(fg.ModelError, match="'y11'.*rate must be Gamma"):
            fg.poisson("y11", rate=w, observed=[1, 2, 3])
        with pytest.raises(fg.ModelError, match="'y12'.*probs must lie in"):
            fg.binomial("y12", trials=3, probs=1.5, plates=[n], observed=[1, 2, 0])
        with pytest.raises(fg.ModelError, match="'y14'.*sum to the trials"):
            fg.multinomial_softmax("y14", trials=[3, 3, 4], logits=g, over=k, observed=np.ones((3, 3)))
        with pytest.raises(fg.ModelError, match="'y13'.*exposure has shape"):
            fg.poisson("y13", rate=lam, exposure=[1.0, 2.0], plates=[n], observed=[1, 2, 0])
    with pytest.raises(fg.ModelError, match="X has 3 rows but y has 2"):
        models.poisson_regression(np.ones((3, 2)), [1, 2])


# ------------------------------------------------------------------------------------ demo
def test_ships_demo_small():
    import importlib

    out = importlib.import_module("demos.poisson_ships").main(small=True)
    assert out["n_cells"] == 34
    w_ml, dev = out["glm"]
    assert abs(dev - 38.70) < 0.01 and abs(w_ml[0] - (-6.406)) < 1e-3  # McCullagh & Nelder's fit
    res = out["results"]
    assert set(res) == {"poisson", "lognormal"} and all(r.converged for r in res.values())
    # a weak prior: the posterior mean is near the maximum-likelihood fit
    np.testing.assert_allclose(res["poisson"].posterior("w").mean(), w_ml, atol=0.1)
    assert out["comparison"].best() in res
