"""Wishart and normal–Wishart: distributions against scipy, exact evidence, gated full-covariance
mixtures against scikit-learn's BayesianGaussianMixture, and bad input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.stats as st

import factorgraph as fg
from distributions import GaussianWishart, Wishart
from factorgraph import models

D = 3


def _spd(rng, batch=(), d=D):
    a = rng.normal(size=batch + (d, d))
    return a @ np.swapaxes(a, -1, -2) + d * np.eye(d)


# ------------------------------------------------------------------------------------ distributions
@pytest.mark.parametrize("batch", [(), (2,)])
def test_wishart_matches_scipy(batch):
    rng = np.random.default_rng(0)
    V = _spd(rng, batch)
    nu = rng.uniform(D - 0.5, D + 5, batch)
    q = Wishart(nu, V)
    for idx in np.ndindex(batch):
        ref = st.wishart(df=nu[idx], scale=np.linalg.inv(V[idx]))
        x = ref.rvs(random_state=1)
        np.testing.assert_allclose(q[idx].logpdf(x) if batch else q.logpdf(x), ref.logpdf(x), rtol=1e-12)
        qi = q[idx] if batch else q
        np.testing.assert_allclose(qi.entropy(), ref.entropy(), rtol=1e-12)
        np.testing.assert_allclose(qi.mean(), ref.mean(), rtol=1e-12)
        np.testing.assert_allclose(qi.var(), ref.var(), rtol=1e-12)
    assert q.batch_shape == batch and q.event_shape == (D, D)


def test_wishart_expected_statistics_match_monte_carlo():
    rng = np.random.default_rng(1)
    V, nu = _spd(rng), D + 1.7
    q = Wishart(nu, V)
    draws = st.wishart(df=nu, scale=np.linalg.inv(V)).rvs(size=200_000, random_state=2)
    elam, elog = q.expected_stats()
    se = draws.std(0) / np.sqrt(len(draws))
    assert np.all(np.abs(draws.mean(0) - elam) < 5 * se)
    logdets = np.linalg.slogdet(draws)[1]
    assert abs(logdets.mean() - elog) < 5 * logdets.std() / np.sqrt(len(draws))
    own = q.sample(200_000, rng=3)  # the Bartlett sampler agrees with scipy's
    assert np.all(np.abs(own.mean(0) - elam) < 5 * se)
    assert abs(np.linalg.slogdet(own)[1].mean() - elog) < 5 * logdets.std() / np.sqrt(len(draws))


def _kappa_grad(q, cls):
    eta, h = q.natural, 1e-6
    out = []
    for i, e in enumerate(eta):
        g = np.zeros(e.shape)
        for idx in np.ndindex(e.shape):
            up = [a.copy() for a in eta]
            dn = [a.copy() for a in eta]
            up[i][idx] += h
            dn[i][idx] -= h
            g[idx] = (cls.from_natural(*up).log_partition() - cls.from_natural(*dn).log_partition()) / (2 * h)
        out.append(0.5 * (g + np.swapaxes(g, -1, -2)) if e.ndim == 2 else g)
    return out


@pytest.mark.parametrize("cls", [Wishart, GaussianWishart])
def test_expected_stats_are_gradient_of_log_partition_and_entropy_is_consistent(cls):
    rng = np.random.default_rng(4)
    q = Wishart(D + 0.8, _spd(rng)) if cls is Wishart else GaussianWishart(rng.normal(size=D), 1.7, D + 0.8, _spd(rng))
    for g, e in zip(_kappa_grad(q, cls), q.expected_stats(), strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-7)
    inner = sum(np.sum(a * b) for a, b in zip(q.natural, q.expected_stats(), strict=True))
    np.testing.assert_allclose(q.entropy(), q.log_partition() - inner, rtol=1e-12)
    r = cls.from_natural(*q.natural)
    for a, b in zip(r.expected_stats(), q.expected_stats(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_gaussian_wishart_logpdf_and_moments():
    rng = np.random.default_rng(5)
    m, beta, nu, V = rng.normal(size=D), 0.6, D + 3.5, _spd(rng)
    q = GaussianWishart(m, beta, nu, V)
    lam = st.wishart(df=nu, scale=np.linalg.inv(V)).rvs(random_state=6)
    mu = rng.normal(size=D)
    ref = (st.multivariate_normal(m, np.linalg.inv(beta * lam)).logpdf(mu)
           + st.wishart(df=nu, scale=np.linalg.inv(V)).logpdf(lam))
    np.testing.assert_allclose(q.logpdf(mu, lam), ref, rtol=1e-12)
    np.testing.assert_allclose(q.mean(), m)
    mus, lams = q.sample(100_000, rng=7)
    np.testing.assert_allclose(mus.mean(0), m, atol=0.03)
    np.testing.assert_allclose(np.cov(mus.T), q.cov(), rtol=0.05, atol=0.02)
    np.testing.assert_allclose(np.einsum("ni,nij,nj->n", mus, lams, mus).mean(), q.expected_stats()[1], rtol=0.02)


def test_kl_is_nonnegative_zero_at_equality_and_matches_monte_carlo():
    rng = np.random.default_rng(8)
    p, q = Wishart(D + 2.0, _spd(rng)), Wishart(D + 4.0, _spd(rng))
    assert abs(q.kl(q)) < 1e-10 and q.kl(p) > 0
    x = q.sample(100_000, rng=9)
    mc = (q.logpdf(x) - p.logpdf(x)).mean()
    np.testing.assert_allclose(q.kl(p), mc, rtol=0.03)


# ------------------------------------------------------------------------------------ exact evidence
def _nw_posterior(X, m0, b0, nu0, V0):
    N = len(X)
    xb = X.mean(0)
    S = (X - xb).T @ (X - xb)
    bN = b0 + N
    return (b0 * m0 + N * xb) / bN, bN, nu0 + N, V0 + S + b0 * N / bN * np.outer(xb - m0, xb - m0)


def _nw_log_evidence(X, m0, b0, nu0, V0):
    """log p(X) by Bayes' rule at an arbitrary (μ, Λ), with scipy's densities."""
    mN, bN, nuN, VN = _nw_posterior(X, m0, b0, nu0, V0)
    mu, L = np.zeros(X.shape[1]), np.eye(X.shape[1])
    inv = np.linalg.inv
    return (st.multivariate_normal(mu, inv(L)).logpdf(X).sum()
            + st.multivariate_normal(m0, inv(b0 * L)).logpdf(mu) + st.wishart(nu0, inv(V0)).logpdf(L)
            - st.multivariate_normal(mN, inv(bN * L)).logpdf(mu) - st.wishart(nuN, inv(VN)).logpdf(L))


def test_normal_wishart_block_gives_the_exact_log_evidence():
    rng = np.random.default_rng(10)
    N = 25
    X = rng.normal(size=(N, D)) @ np.array([[1, 0, 0], [0.5, 1, 0], [0, 0.3, 2]]) + 1.0
    m0, b0, nu0, V0 = np.array([0.5, 0, -1.0]), 0.7, D + 1.5, _spd(rng)
    with fg.Model("nw") as m:
        n = fg.plate("n", N)
        th = fg.gaussian_wishart("theta", mean=m0, beta=b0, dof=nu0, scale=V0)
        fg.mv_gaussian("x", th, plates=[n], observed=X)
    r = fg.infer(m)
    assert abs(r.evidence - _nw_log_evidence(X, m0, b0, nu0, V0)) < 1e-10
    mN, bN, nuN, VN = _nw_posterior(X, m0, b0, nu0, V0)
    q = r.posterior("theta")
    np.testing.assert_allclose(q.location, mN, rtol=1e-12)
    np.testing.assert_allclose(q.beta, bN, rtol=1e-12)
    np.testing.assert_allclose(q.dof, nuN, rtol=1e-12)
    np.testing.assert_allclose(q.scale, VN, rtol=1e-12)


def test_wishart_precision_with_a_known_mean_gives_the_exact_log_evidence():
    rng = np.random.default_rng(11)
    N, mu = 30, np.array([1.0, -1.0, 0.5])
    X = rng.multivariate_normal(mu, np.linalg.inv(_spd(rng)), size=N)
    nu0, V0 = D + 0.5, _spd(rng)
    with fg.Model("w") as m:
        n = fg.plate("n", N)
        L = fg.wishart("L", dof=nu0, scale=V0)
        fg.mv_gaussian("x", mu, precision=L, plates=[n], observed=X)
    r = fg.infer(m)
    VN, nuN = V0 + (X - mu).T @ (X - mu), nu0 + N
    lam = np.eye(D)
    ref = (st.multivariate_normal(mu, np.linalg.inv(lam)).logpdf(X).sum()
           + st.wishart(nu0, np.linalg.inv(V0)).logpdf(lam) - st.wishart(nuN, np.linalg.inv(VN)).logpdf(lam))
    assert abs(r.evidence - ref) < 1e-10
    np.testing.assert_allclose(r.posterior("L").mean(), nuN * np.linalg.inv(VN), rtol=1e-12)


def test_gated_precision_with_observed_labels_is_exact_per_group():
    """L[z] with the labels observed: each component's Wishart sees only its own rows."""
    rng = np.random.default_rng(12)
    K, N, mu = 2, 40, np.zeros(D)
    labels = np.arange(N) % K
    X = rng.normal(size=(N, D)) * np.where(labels[:, None] == 0, 1.0, 3.0)
    nu0, V0 = D + 1.0, _spd(rng)
    with fg.Model("wg") as m:
        n, k = fg.plate("n", N), fg.plate("k", K)
        L = fg.wishart("L", dof=nu0, scale=V0, plates=[k])
        z = fg.categorical("z", np.full(K, 1.0 / K), plates=[n], observed=labels, categories=k)
        fg.mv_gaussian("x", mu, precision=L[z], plates=[n], observed=X)
    r = fg.infer(m)
    ref = N * np.log(1.0 / K)
    for j in range(K):
        Xj = X[labels == j]
        VN, nuN = V0 + Xj.T @ Xj, nu0 + len(Xj)
        np.testing.assert_allclose(r.posterior("L").mean()[j], nuN * np.linalg.inv(VN), rtol=1e-12)
        ref += (st.multivariate_normal(mu, np.eye(D)).logpdf(Xj).sum()
                + st.wishart(nu0, np.linalg.inv(V0)).logpdf(np.eye(D))
                - st.wishart(nuN, np.linalg.inv(VN)).logpdf(np.eye(D)))
    assert abs(r.evidence - ref) < 1e-9


def test_mean_field_mixture_with_gated_mean_and_precision_runs_monotone():
    rng = np.random.default_rng(13)
    K, D2 = 2, 2
    X = np.concatenate([rng.normal(size=(50, D2)) * 0.5 + [3, 0], rng.normal(size=(50, D2)) * [1.5, 0.3] - [3, 0]])
    with fg.Model("mf") as m:
        n, k = fg.plate("n", len(X)), fg.plate("k", K)
        pi = fg.dirichlet("pi", np.ones(K))
        z = fg.categorical("z", pi, plates=[n], categories=k)
        mu = fg.mv_gaussian("mu", np.zeros(D2), precision=0.01, plates=[k])
        L = fg.wishart("L", dof=D2 + 1.0, scale=np.eye(D2), plates=[k])
        fg.mv_gaussian("x", mu[z], precision=L[z], plates=[n], observed=X)
    r = fg.infer(m, max_iter=300)
    assert np.all(np.diff(r.elbo_trace) > -1e-9)
    centres = np.sort(r.posterior("mu").mean()[:, 0])
    np.testing.assert_allclose(centres, [-3, 3], atol=0.4)


# ------------------------------------------------------------------------------------ missing rows
def _wishart_fit(kind, Y, mask=None, resp=None, row_mask=True):
    """Y under a Wishart precision ("wishart": mean-field mu, L; "normal_wishart": a theta block), as one
    group or, with ``resp``, a two-component mixture (L[z], theta[z]) started from those responsibilities."""
    N, D2 = Y.shape
    with fg.Model(kind) as m:
        n, k = fg.plate("n", N), fg.plate("k", 2)
        kp = [k] if resp is not None else []
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(2)), plates=[n], categories=k) if resp is not None else None
        if kind == "wishart":
            mu = fg.mv_gaussian("mu", np.zeros(D2), precision=0.1, plates=kp)
            L = fg.wishart("L", dof=D2 + 1.0, scale=np.eye(D2), plates=kp)
            mean, prec = (mu, L) if z is None else (mu[z], L[z])
        else:
            th = fg.gaussian_wishart("theta", mean=np.zeros(D2), beta=0.1, dof=D2 + 1.0, scale=np.eye(D2), plates=kp)
            mean, prec = (th if z is None else th[z]), None
        if mask is not None and not row_mask:
            mask = np.broadcast_to(mask[:, None], Y.shape)  # a per-coordinate mask whose rows are whole
        fg.mv_gaussian("y", mean, precision=prec, plates=[n], observed=Y, mask=mask)
    init = None if resp is None else {"z": resp}
    return fg.infer(m, init=init, tol=None, param_tol=1e-13, max_iter=5000)


@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("row_mask", [True, False])
@pytest.mark.parametrize("kind", ["wishart", "normal_wishart"])
def test_missing_rows_under_a_wishart_precision_equal_dropping_them(kind, row_mask, gated):
    """mask= on an mv_gaussian with a Wishart precision (L, L[z]) or a normal–Wishart mean (theta,
    theta[z]): the masked rows (NaN under the mask) drop out, so the ELBO and every posterior equal
    the fit without them.  The mask was ignored: the masked rows were used as data and NaN refused."""
    rng = np.random.default_rng(21)
    Y = np.r_[rng.normal(-2.0, 1.0, (8, 2)), rng.normal(2.0, 0.5, (8, 2))]
    keep = np.ones(16, bool)
    keep[[2, 11, 12]] = False
    resp = np.where(np.arange(16)[:, None] < 8, [0.8, 0.2], [0.3, 0.7]) if gated else None
    a = _wishart_fit(kind, np.where(keep[:, None], Y, np.nan), keep, resp, row_mask)
    b = _wishart_fit(kind, Y[keep], None, None if resp is None else resp[keep])
    assert a.converged and b.converged
    assert abs(a.elbo - b.elbo) < 1e-10
    for name in b.posteriors:
        if name == "z":
            np.testing.assert_allclose(a.posterior("z").probs[keep], b.posterior("z").probs, atol=1e-10)
        elif name == "theta":
            qa, qb = a.posterior(name), b.posterior(name)
            for attr in ("location", "beta", "dof", "scale"):
                np.testing.assert_allclose(getattr(qa, attr), getattr(qb, attr), rtol=1e-10, atol=1e-10)
        else:
            np.testing.assert_allclose(a.posterior(name).mean(), b.posterior(name).mean(), rtol=1e-10, atol=1e-10)
    if kind == "wishart":
        np.testing.assert_allclose(a.posterior("L").dof, b.posterior("L").dof, rtol=1e-12)


def test_partly_observed_rows_under_a_wishart_precision_keep_their_marginal():
    """A row with some coordinates missing keeps the marginal density of its observed coordinates under a
    Wishart precision or a normal–Wishart mean (the non-conjugate factors.mv_gaussian_wishart_missing, so the
    fit runs NCVMP), for a per-coordinate mask and for a numpy masked array; the masked values are never read."""
    rng = np.random.default_rng(22)
    Y = rng.normal(size=(5, 2))
    cm = np.ones((5, 2), bool)
    cm[3, 1] = False
    elbos = {}
    for label, observed, mask in [("nan", np.where(cm, Y, np.nan), cm), ("ma", np.ma.masked_array(Y, ~cm), None),
                                  ("junk", np.where(cm, Y, 1e6), cm)]:
        with fg.Model("partial") as m:
            n = fg.plate("n", 5)
            L = fg.wishart("L", dof=3.0, scale=np.eye(2))
            th = fg.gaussian_wishart("theta", mean=np.zeros(2))
            y = fg.mv_gaussian("y", np.zeros(2), precision=L, plates=[n], observed=observed, mask=mask)
            x = fg.mv_gaussian("x", th, plates=[n], observed=observed, mask=mask)
        assert y.prior.ftype.name == "MvGaussianWishartMissing"
        assert x.prior.ftype.name == "MvGaussianNormalWishartMissing"
        np.testing.assert_array_equal(y.coord_mask, cm)
        r = fg.infer(m)
        assert r.algorithm == "ncvmp" and r.converged
        elbos[label] = r.elbo
    assert elbos["nan"] == elbos["ma"] == elbos["junk"]


@pytest.mark.parametrize("covariance", ["full", "diag"])
@pytest.mark.parametrize("K", [1, 2])
def test_gaussian_mixture_with_missing_rows_equals_dropping_them(covariance, K):
    """models.gaussian_mixture_model(mask=): missing rows drop out (the default priors come from the observed
    rows), and single missing entries are accepted by both."""
    from distributions import Categorical

    rng = np.random.default_rng(23)
    X = np.r_[rng.normal(-2.0, 1.0, (10, 2)), rng.normal(2.0, 1.0, (10, 2))]
    keep = np.ones(20, bool)
    keep[[4, 15]] = False
    resp = np.where(np.arange(20)[:, None] < 10, [0.8, 0.2], [0.2, 0.8])
    init = ({"z": Categorical(probs=resp)}, {"z": Categorical(probs=resp[keep])}) if K > 1 else (None, None)
    a = fg.infer(models.gaussian_mixture_model(np.where(keep[:, None], X, np.nan), K, covariance, mask=keep),
                 init=init[0], tol=None, param_tol=1e-13, max_iter=5000)
    b = fg.infer(models.gaussian_mixture_model(X[keep], K, covariance), init=init[1], tol=None, param_tol=1e-13,
                 max_iter=5000)
    assert abs(a.elbo - b.elbo) < 1e-10
    cm = np.ones(X.shape, bool)
    cm[7, 0] = False
    r = models.gaussian_mixture(np.where(cm, X, np.nan), K, covariance, mask=cm)  # "full": by NCVMP
    assert np.isfinite(r.elbo) and np.all(np.diff(r.elbo_trace) >= -1e-9 * np.abs(r.elbo_trace[1:]))


def test_masked_mixture_is_seeded_from_its_observed_rows():
    """Without init=, a mixture's responsibilities start from a k-means++ seeding of the data; rows with missing
    entries used to switch that off (random Dirichlet starts), so masked fits landed on worse optima than the
    same data with the rows dropped.  Three clusters, six rows missing: each seed reaches the dropped fit's
    optimum."""
    rng = np.random.default_rng(7)
    X = np.r_[rng.normal(-4.0, 1.0, (15, 2)), rng.normal(0.0, 1.0, (10, 2)), rng.normal(4.0, 1.0, (15, 2))]
    keep = np.ones(len(X), bool)
    keep[[2, 9, 17, 21, 30, 38]] = False
    dropped = max(models.gaussian_mixture(X[keep], 3, seed=s).elbo for s in range(3))
    for seed in range(3):
        masked = models.gaussian_mixture(np.where(keep[:, None], X, np.nan), 3, mask=keep, seed=seed)
        assert masked.elbo == pytest.approx(dropped, abs=1e-6), seed


# ------------------------------------------------------------------------------------ indexed precisions
def _grouped(kind, Y, g, G):
    """mv_gaussian rows with group means mu[g] and precisions a[g] (Gamma: Λ = α_g I; ARD: diag(α_g);
    Wishart: L_g) or a normal–Wishart theta[g]; with G = 0, one group without indexing."""
    with fg.Model(kind) as m:
        cp = [fg.plate("c", G)] if G else []
        n, d = fg.plate("n", len(Y)), fg.plate("d", Y.shape[1])
        mu = fg.mv_gaussian("mu", np.zeros(2), precision=0.01, plates=cp)
        if kind == "normal_wishart":
            th = fg.gaussian_wishart("a", mean=np.zeros(2), beta=0.1, dof=3.0, scale=np.eye(2), plates=cp)
            fg.mv_gaussian("y", th[g] if G else th, plates=[n], observed=Y)
            return fg.infer(m, tol=None, param_tol=1e-13, max_iter=5000)
        if kind == "gamma":
            a = fg.gamma("a", 2.0, 1.0, plates=cp)
        elif kind == "ard":
            a = fg.gamma("a", 2.0, 1.0, plates=[*cp, d])
        else:
            a = fg.wishart("a", dof=3.0, scale=np.eye(2), plates=cp)
        prec = a if not G else fg.index(a, g, along=cp[0]) if kind == "ard" else a[g]  # a[g]: the form
        fg.mv_gaussian("y", mu[g] if G else mu, precision=prec, plates=[n], observed=Y)
    return fg.infer(m, tol=None, param_tol=1e-13, max_iter=5000)


@pytest.mark.parametrize("kind", ["gamma", "ard", "wishart", "normal_wishart"])
def test_indexed_precision_equals_one_model_per_group(kind):
    """fg.mv_gaussian("y", mu[g], a[g]) with a Gamma (the scalar precision raised AttributeError), an ARD
    Gamma, a Wishart a[g] or a normal–Wishart theta[g]: the fit is the sum of one model per group."""
    rng = np.random.default_rng(24)
    g = np.array([0, 1, 2, 0, 1, 2, 1, 0, 2, 0])
    Y = rng.normal(size=(len(g), 2)) * np.array([1.0, 0.5, 2.0])[g, None] + g[:, None]
    r = _grouped(kind, Y, g, 3)
    parts = [_grouped(kind, Y[g == j], g[g == j], 0) for j in range(3)]
    assert r.converged and all(p.converged for p in parts)
    assert abs(r.elbo - sum(p.elbo for p in parts)) < 1e-10
    for name in (["a"] if kind == "normal_wishart" else ["a", "mu"]):
        want = np.stack([np.asarray(p.posterior(name).mean()) for p in parts])
        np.testing.assert_allclose(np.asarray(r.posterior(name).mean()), want, rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------------------------ scikit-learn
def _sklearn_fit(X, resp, K, a0, m0, b0, nu0, V0):
    from sklearn.mixture import BayesianGaussianMixture

    class FromResponsibilities(BayesianGaussianMixture):
        def _initialize_parameters(self, X, random_state, xp=None):
            self._initialize(X, resp.copy())  # sklearn's own M-step from the given responsibilities

    sk = FromResponsibilities(n_components=K, weight_concentration_prior_type="dirichlet_distribution",
                              weight_concentration_prior=a0, mean_prior=m0, mean_precision_prior=b0,
                              degrees_of_freedom_prior=nu0, covariance_prior=V0, reg_covar=0.0, tol=1e-14,
                              max_iter=5000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sk.fit(X)
    return sk


@pytest.mark.parametrize("seed", [1, 2])
def test_full_covariance_mixture_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    K = 3
    means = np.array([[0, 0], [4, 1], [-2, 5.0]])
    X = np.concatenate([rng.multivariate_normal(mu, [[1, 0.5], [0.5, 1.5]], size=60) for mu in means])
    resp = rng.dirichlet(np.ones(K), size=len(X))
    a0, b0, nu0, m0, V0 = 0.5, 0.8, 3.5, X.mean(0), np.array([[1.5, 0.2], [0.2, 1.0]])
    sk = _sklearn_fit(X, resp, K, a0, m0, b0, nu0, V0)
    with fg.Model("gmm") as m:
        n, k = fg.plate("n", len(X)), fg.plate("k", K)
        pi = fg.dirichlet("pi", np.full(K, a0))
        z = fg.categorical("z", pi, plates=[n], categories=k)
        th = fg.gaussian_wishart("theta", mean=m0, beta=b0, dof=nu0, scale=V0, plates=[k])
        fg.mv_gaussian("x", th[z], plates=[n], observed=X)
    r = fg.infer(m, init={"z": resp}, max_iter=5000, tol=None, param_tol=1e-13)
    assert r.converged
    q = r.posterior("theta")
    np.testing.assert_allclose(q.location, sk.means_, atol=1e-6)
    np.testing.assert_allclose(q.precision.mean(), sk.precisions_, atol=1e-6)
    np.testing.assert_allclose(r.posterior("pi").mean(), sk.weights_, atol=1e-6)
    np.testing.assert_allclose(q.beta, sk.mean_precision_, atol=1e-6)
    np.testing.assert_allclose(q.dof, sk.degrees_of_freedom_, atol=1e-6)


# ------------------------------------------------------------------------------------ bad input
def test_bad_input_names_the_variable():
    with fg.Model("bad"):
        with pytest.raises(fg.ModelError, match="'L'.*positive definite"):
            fg.wishart("L", dof=4.0, scale=np.array([[1.0, 2.0], [2.0, 1.0]]))
        with pytest.raises(fg.ModelError, match="'L'.*dof must exceed D − 1 = 1"):
            fg.wishart("L", dof=0.5, scale=np.eye(2))
        with pytest.raises(fg.ModelError, match="'L'.*symmetric"):
            fg.wishart("L", dof=4.0, scale=np.array([[1.0, 0.5], [0.0, 1.0]]))
        with pytest.raises(fg.ModelError, match="'L'.*dimension"):
            fg.wishart("L", dof=4.0, scale=2.0)
        with pytest.raises(fg.ModelError, match="'T'.*dof must exceed"):
            fg.gaussian_wishart("T", mean=np.zeros(3), dof=1.9)
        with pytest.raises(fg.ModelError, match="'T'.*inconsistent dimensions"):
            fg.gaussian_wishart("T", mean=np.zeros(3), scale=np.eye(2))
        k = fg.plate("k", 3)
        with pytest.raises(fg.ModelError, match="'L2'.*scale"):
            fg.wishart("L2", dof=4.0, scale=np.stack([np.eye(2)] * 2), plates=[k])
        L = fg.wishart("L3", dof=4.0, scale=np.eye(2))
        n = fg.plate("n", 5)
        with pytest.raises(fg.ModelError, match="'x'.*inconsistent dimensions"):
            fg.mv_gaussian("x", np.zeros(3), precision=L, plates=[n])
        with pytest.raises(fg.ModelError, match="observed data of 'y'"):
            fg.mv_gaussian("y", np.zeros(2), precision=L, plates=[n], observed=np.zeros((5, 3)))
        th = fg.gaussian_wishart("T2", mean=np.zeros(2))
        with pytest.raises(fg.ModelError, match="'w'.*do not pass precision"):
            fg.mv_gaussian("w", th, precision=2.0, plates=[n])
        with pytest.raises(fg.ModelError, match="'v'.*do not pass covariance= or sd="):
            fg.mv_gaussian("v", th, sd=2.0, plates=[n])


def test_gaussian_mixture_bad_input_names_what_is_wrong():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(10, 2))
    with pytest.raises(fg.ModelError, match="'X': the default scale .* singular .*eigenvalue"):
        models.gaussian_mixture_model(np.c_[X, X[:, 0] - X[:, 1]], 2)  # collinear features
    with pytest.raises(fg.ModelError, match="'X': the default scale .* singular .*variance 0.0"):
        models.gaussian_mixture_model(np.c_[X, np.ones(10)], 2, "diag")  # a constant feature
    with pytest.raises(fg.ModelError, match=r"'scale' must be a \(2,\) vector or a \(2, 2\) matrix"):
        models.gaussian_mixture_model(X, 2, "diag", scale=np.ones(3))
    with pytest.raises(fg.ModelError, match=r"'scale' must be a \(2, 2\) matrix"):
        models.gaussian_mixture_model(X, 2, "full", scale=np.eye(3))
    with pytest.raises(fg.ModelError, match="'theta'.*positive definite"):
        models.gaussian_mixture_model(X, 2, scale=np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(fg.ModelError, match="'theta'.*dof must exceed D − 1 = 1"):
        models.gaussian_mixture_model(X, 2, dof=1.0)
    with pytest.raises(fg.ModelError, match="'theta'.*inconsistent dimensions"):
        models.gaussian_mixture_model(X, 2, mean_prior=np.zeros(3))
    with pytest.raises(fg.ModelError, match="'L'.*dof must be finite"):
        with fg.Model("bad"):
            fg.wishart("L", dof=np.nan, scale=np.eye(2))
    with pytest.raises(fg.ModelError, match="'L'.*dof has shape"):
        with fg.Model("bad"):
            fg.wishart("L", dof=np.array([3.0, 4.0, 5.0]), scale=np.eye(2), plates=[fg.plate("k", 2)])
    with pytest.raises(fg.ModelError, match="'T'.*beta must be positive"):
        with fg.Model("bad"):
            fg.gaussian_wishart("T", mean=np.zeros(2), beta=0.0)


@pytest.mark.parametrize("kind", ["normal_wishart", "mean_field"])
def test_mixture_sweeps_never_form_rows_by_components_by_d_by_d_arrays(kind):
    """The full-covariance mixture's messages and bound are batched matrix products: the memory a sweep
    allocates stays far below one rows × components × D × D array (128 MB here; the data's own N × D × D
    second moments are 16 MB)."""
    import tracemalloc

    rng = np.random.default_rng(0)
    N, K, D = 20000, 8, 10
    X = rng.normal(size=(N, D)) + rng.integers(0, K, N)[:, None]
    init = rng.dirichlet(np.ones(K), N)
    if kind == "normal_wishart":
        m = models.gaussian_mixture_model(X, K)
    else:
        with fg.Model() as m:
            n, k = fg.plate("n", N), fg.plate("k", K)
            z = fg.categorical("z", fg.dirichlet("pi", np.ones(K)), plates=[n], categories=k)
            mu = fg.mv_gaussian("mu", np.zeros(D), precision=1e-2, plates=[k])
            L = fg.wishart("L", dof=float(D), scale=np.eye(D), plates=[k])
            fg.mv_gaussian("x", mu[z], precision=L[z], plates=[n], observed=X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        tracemalloc.start()
        try:
            r = fg.infer(m, init={"z": init}, max_iter=3, tol=None)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert np.isfinite(r.elbo) and np.all(np.diff(r.elbo_trace) > -1e-6 * abs(r.elbo))
    assert peak < 0.4 * N * K * D * D * 8, f"peak {peak / 1e6:.0f} MB"
