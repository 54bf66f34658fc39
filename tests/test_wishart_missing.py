"""Partly observed rows under a Wishart precision or a normal–Wishart block (factors.mv_gaussian_wishart_missing).

The rule identity (message = gradient of E[log f]) is checked generically in test_rules.py.  Here: E[log f]
against Monte Carlo over q (the sub-block property of the Wishart it rests on), complete rows against the
conjugate factors, the inverse map from statistics to (ν, V), and whole fits against the optimum of the
ELBO written out independently in plain numpy/scipy and maximised by BFGS.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats
from scipy.special import digamma, multigammaln

import factorgraph as fg
from distributions import GaussianWishart, MvGaussian, Wishart
from factorgraph import models
from factorgraph.graph.nodes import ModelError
from factors.mv_gaussian_wishart import mvw_evidence, mvw_to_mean, mvw_to_precision
from factors.mv_gaussian_wishart_missing import (
    missing_patterns,
    mvnwm_evidence,
    mvnwm_to_params,
    mvwm_evidence,
    mvwm_to_mean,
    mvwm_to_precision,
    wishart_params,
)
from factors.normal_wishart import mvnw_evidence, mvnw_to_params

D = 3


def _spd(rng, d=D):
    a = rng.normal(size=(d, d))
    return a @ a.T + d * np.eye(d)


def _observed(x):
    return (x, x[..., :, None] * x[..., None, :])


def test_expected_log_density_matches_monte_carlo():
    """E_q[log N(x_o | μ_o, (Λ⁻¹)_oo)] against 400 000 draws of Λ ~ W (and μ | Λ for the normal–Wishart)."""
    rng = np.random.default_rng(2)
    Vinv = _spd(rng) / 4.0
    nu, x, beta = 5.5, rng.normal(size=D), 1.7
    o = np.array([True, False, True])
    p = missing_patterns(o[None])
    W = Wishart(nu, np.linalg.inv(Vinv))
    lams = stats.wishart(df=nu, scale=Vinv).rvs(400_000, random_state=3)
    cov = np.linalg.inv(lams)[:, o][:, :, o]
    mu = np.array([0.3, -0.2, 0.1])
    m = {"out": _observed(x[None]), "mean": (mu[None], np.outer(mu, mu)[None]),
         "precision": tuple(np.atleast_1d(s) if s.ndim == 0 else s[None] for s in W.expected_stats())}

    def logpdf(r):
        quad = np.einsum("si,sij,sj->s", r, np.linalg.inv(cov), r)
        return -0.5 * np.linalg.slogdet(cov)[1] - 0.5 * quad - o.sum() / 2 * np.log(2 * np.pi)

    ll = logpdf(np.broadcast_to((x - mu)[o], (len(lams), o.sum())))
    assert abs(mvwm_evidence(m, p)[0] - ll.mean()) < 4 * ll.std() / np.sqrt(len(ll))
    # normal–Wishart: μ | Λ ~ N(m, (βΛ)⁻¹)
    G = GaussianWishart(mu, beta, nu, np.linalg.inv(Vinv))
    mus = mu + np.einsum("sij,sj->si", np.linalg.cholesky(np.linalg.inv(lams) / beta), rng.normal(size=(len(lams), D)))
    ll = logpdf(x[o] - mus[:, o])
    got = mvnwm_evidence({"out": _observed(x[None]), "params": tuple(s[None] for s in G.expected_stats())}, p)[0]
    assert abs(got - ll.mean()) < 4 * ll.std() / np.sqrt(len(ll))


def test_complete_rows_send_the_conjugate_messages():
    """A complete row gives the conjugate factor's messages and E[log f]; a row with nothing observed gives 0."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, D))
    W = Wishart(np.array([4.5, 30.0]), np.stack([_spd(rng), _spd(rng)]))
    mu = MvGaussian(mean=rng.normal(size=(2, D)), cov=np.stack([_spd(rng), _spd(rng)])).expected_stats()
    m = {"out": _observed(x), "mean": mu, "precision": W.expected_stats()}
    p = missing_patterns(np.array([[1, 1, 1], [1, 1, 1]]))
    for got, want in zip(mvwm_to_precision(m, p), mvw_to_precision(m, {"D": D}), strict=True):
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-13, atol=1e-13)
    for got, want in zip(mvwm_to_mean(m, p), mvw_to_mean(m, {"D": D}), strict=True):
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-11)
    np.testing.assert_allclose(mvwm_evidence(m, p), mvw_evidence(m, {"D": D}), rtol=1e-11)
    G = GaussianWishart(rng.normal(size=(2, D)), np.array([0.7, 3.0]), np.array([4.5, 30.0]),
                        np.stack([_spd(rng), _spd(rng)]))
    mg = {"out": _observed(x), "params": G.expected_stats()}
    for got, want in zip(mvnwm_to_params(mg, p), mvnw_to_params(mg, {"D": D}), strict=True):
        np.testing.assert_allclose(got, np.broadcast_to(np.asarray(want), np.shape(got)), rtol=1e-13)
    np.testing.assert_allclose(mvnwm_evidence(mg, p), mvnw_evidence(mg, {"D": D}), rtol=1e-11)
    none = missing_patterns(np.zeros((2, D)))
    assert all(np.all(np.asarray(a) == 0) for a in mvwm_to_precision(m, none))
    assert np.all(mvwm_evidence(m, none) == 0) and np.all(mvnwm_evidence(mg, none) == 0)
    assert all(np.all(np.asarray(a) == 0) for a in mvnwm_to_params(mg, none))


@pytest.mark.parametrize("nu", [2.0 + 1e-3, 2.5, 7.0, 1e3, 1e6])
def test_wishart_params_inverts_the_expected_statistics(nu):
    rng = np.random.default_rng(5)
    V = _spd(rng)
    got_nu, got_v = wishart_params(*Wishart(nu, V).expected_stats())
    np.testing.assert_allclose(got_nu, nu, rtol=1e-9)
    np.testing.assert_allclose(got_v, V, rtol=1e-9)
    with pytest.raises(FloatingPointError, match="no Wishart"):
        wishart_params(np.eye(D), 0.0)  # E[log|Λ|] = log|E[Λ]| = 0: Jensen's inequality fails


# ---------------------------------------------------------------------------- whole fits
def _data(rng, n=40, d=D):
    cov = np.array([[1.0, 0.6, 0.3], [0.6, 1.0, 0.2], [0.3, 0.2, 1.0]])[:d, :d]
    X = rng.multivariate_normal(np.arange(1.0, d + 1), cov, size=n)
    mask = rng.uniform(size=X.shape) > 0.25
    mask[0] = True
    mask[1] = [False] * d  # a row with nothing observed
    return X, mask


def _row_terms(X, mask, nu, V, mean, beta=None):
    """Σ_n E_q[log N(x_o | μ_o, Σ_oo)], row by row with direct indexing (the sub-block Wishart W(ν − k, V_oo))."""
    total = 0.0
    for x, o in zip(X, mask, strict=True):
        r, k = int(o.sum()), len(o) - int(o.sum())
        if r == 0:
            continue
        voo = V[np.ix_(o, o)]
        elog = sum(digamma((nu - k + 1 - i) / 2) for i in range(1, r + 1)) + r * np.log(2) - np.linalg.slogdet(voo)[1]
        d = x[o] - mean[o]
        total += -r / 2 * np.log(2 * np.pi) + 0.5 * elog - 0.5 * (nu - k) * d @ np.linalg.solve(voo, d)
        if beta is not None:
            total -= r / (2 * beta)
    return total


def _wishart_prior_term(nu, V, nu0, V0):
    """E_q[log W(Λ | ν₀, V₀)] under q = W(ν, V) (inverse scales)."""
    d = len(V)
    elog = sum(digamma((nu + 1 - i) / 2) for i in range(1, d + 1)) + d * np.log(2) - np.linalg.slogdet(V)[1]
    return ((nu0 - d - 1) / 2 * elog - 0.5 * np.trace(V0 @ (nu * np.linalg.inv(V))) + nu0 / 2 * np.linalg.slogdet(V0)[1]
            - nu0 * d / 2 * np.log(2) - multigammaln(nu0 / 2, d))


def _unpack(theta, d):
    nu = d - 1 + np.exp(theta[0])
    chol = np.zeros((d, d))
    chol[np.tril_indices(d)] = theta[1:1 + d * (d + 1) // 2]
    chol[np.diag_indices(d)] = np.exp(np.diag(chol))
    return nu, chol @ chol.T, theta[1 + d * (d + 1) // 2:]


def _pack(nu, V, *rest):
    d = len(V)
    chol = np.linalg.cholesky(V)
    chol[np.diag_indices(d)] = np.log(np.diag(chol))
    return np.concatenate([[np.log(nu - d + 1)], chol[np.tril_indices(d)], *rest])


def test_wishart_fit_is_the_optimum_of_the_independently_written_elbo():
    """Known mean, Wishart prior, rows with single coordinates missing: fg's NCVMP fixed point and ELBO equal the
    maximum over W(ν, V) of the ELBO written out here (rows one by one, scipy's Wishart entropy), by BFGS."""
    rng = np.random.default_rng(6)
    X, mask = _data(rng)
    mean, nu0, V0 = np.array([0.9, 2.1, 2.9]), 4.0, 0.5 * np.eye(D)
    with fg.Model() as mod:
        n = fg.plate("n", len(X))
        lam = fg.wishart("lam", dof=nu0, scale=V0)
        fg.mv_gaussian("x", mean, precision=lam, plates=[n], observed=X, mask=mask)
    r = fg.infer(mod, tol=1e-12, max_iter=500)
    assert r.algorithm == "ncvmp"
    q = r.posterior("lam")

    def neg_elbo(theta):
        nu, V, _ = _unpack(theta, D)
        return -(_row_terms(X, mask, nu, V, mean) + _wishart_prior_term(nu, V, nu0, V0)
                 + stats.wishart(df=nu, scale=np.linalg.inv(V)).entropy())

    best = optimize.minimize(neg_elbo, _pack(nu0 + len(X), np.eye(D) * len(X)), method="BFGS",
                             options={"gtol": 1e-9, "maxiter": 5000})
    nu, V, _ = _unpack(best.x, D)
    np.testing.assert_allclose(r.elbo, -best.fun, rtol=0, atol=1e-7)
    np.testing.assert_allclose(float(q.dof), nu, rtol=1e-5)
    np.testing.assert_allclose(q.mean(), nu * np.linalg.inv(V), rtol=1e-5)
    # the ELBO at fg's q, written out here, is fg's ELBO
    np.testing.assert_allclose(-neg_elbo(_pack(float(q.dof), q.scale)), r.elbo, rtol=0, atol=1e-9)


def test_normal_wishart_fit_is_the_optimum_of_the_independently_written_elbo():
    """The same for a normal–Wishart block (μ, Λ) ~ NW(m₀, β₀, ν₀, V₀): q(μ, Λ) = NW(m, β, ν, V) by BFGS over all
    four, the ELBO from the rows, E_q[log prior] = E_q[log W(Λ)] + E_q[log N(μ | m₀, (β₀Λ)⁻¹)] and the entropy."""
    rng = np.random.default_rng(8)
    d = 2
    X, mask = _data(rng, n=30, d=d)
    m0, b0, nu0, V0 = np.zeros(d), 0.5, 3.0, np.eye(d)
    with fg.Model() as mod:
        n = fg.plate("n", len(X))
        theta = fg.gaussian_wishart("theta", mean=m0, beta=b0, dof=nu0, scale=V0)
        fg.mv_gaussian("x", theta, plates=[n], observed=X, mask=mask)
    r = fg.infer(mod, tol=1e-12, max_iter=500)
    q = r.posterior("theta")

    def neg_elbo(th):
        nu, V, rest = _unpack(th, d)
        m, beta = rest[:d], np.exp(rest[d])
        elog = sum(digamma((nu + 1 - i) / 2) for i in range(1, d + 1)) + d * np.log(2) - np.linalg.slogdet(V)[1]
        e_lam = nu * np.linalg.inv(V)
        # E log N(μ | m₀, (β₀Λ)⁻¹) = d/2 log β₀ + ½E log|Λ| − d/2 log 2π − β₀/2 (d/β + (m − m₀)ᵀE[Λ](m − m₀))
        prior_mu = (d / 2 * np.log(b0) + 0.5 * elog - d / 2 * np.log(2 * np.pi)
                    - b0 / 2 * (d / beta + (m - m0) @ e_lam @ (m - m0)))
        # H[q] = H[W(ν, V)] + E_Λ H[N(m, (βΛ)⁻¹)] = H[W] + d/2 (1 + log 2π) − d/2 log β − ½E log|Λ|
        ent = (stats.wishart(df=nu, scale=np.linalg.inv(V)).entropy() + d / 2 * (1 + np.log(2 * np.pi))
               - d / 2 * np.log(beta) - 0.5 * elog)
        return -(_row_terms(X, mask, nu, V, m, beta) + _wishart_prior_term(nu, V, nu0, V0) + prior_mu + ent)

    best = optimize.minimize(neg_elbo, _pack(nu0 + len(X), np.eye(d) * len(X), np.ones(d),
                                             [np.log(len(X))]), method="BFGS",
                             options={"gtol": 1e-9, "maxiter": 5000})
    nu, V, rest = _unpack(best.x, d)
    np.testing.assert_allclose(r.elbo, -best.fun, rtol=0, atol=1e-7)
    np.testing.assert_allclose(float(q.dof), nu, rtol=1e-5)
    np.testing.assert_allclose(q.location, rest[:d], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(float(q.beta), np.exp(rest[d]), rtol=1e-5)
    np.testing.assert_allclose(-neg_elbo(_pack(float(q.dof), q.scale, q.location, [np.log(float(q.beta))])), r.elbo,
                               rtol=0, atol=1e-9)


def test_gaussian_mixture_with_single_entries_missing():
    """models.gaussian_mixture(covariance="full") with entries missing: NCVMP, the ELBO never falls, and the
    fit stays close to the complete-data fit."""
    rng = np.random.default_rng(9)
    centres = np.array([[0.0, 0.0, 0.0], [4.0, 4.0, 0.0], [0.0, 4.0, 4.0]])
    X = np.vstack([rng.multivariate_normal(c, 0.3 * np.eye(D) + 0.1, size=60) for c in centres])
    mask = rng.uniform(size=X.shape) > 0.15
    r = models.gaussian_mixture(X, 3, "full", mask=mask, seed=1)
    assert r.algorithm == "ncvmp" and r.converged
    assert np.all(np.diff(r.elbo_trace) >= -1e-9 * abs(r.elbo))
    full = models.gaussian_mixture(X, 3, "full", seed=1)
    order = np.argsort(r.posterior("theta").location[:, 0] + 10 * r.posterior("theta").location[:, 2])
    ref = np.argsort(full.posterior("theta").location[:, 0] + 10 * full.posterior("theta").location[:, 2])
    np.testing.assert_allclose(r.posterior("theta").location[order], full.posterior("theta").location[ref], atol=0.2)


def test_partly_observed_rows_need_numpy_data_and_ncvmp():
    da = pytest.importorskip("dask.array")
    X = np.random.default_rng(0).normal(size=(20, 2))
    mask = np.ones_like(X, bool)
    mask[3, 1] = False
    with fg.Model(), pytest.raises(ModelError, match=r"'x': row 3 has some coordinates observed.*dask"):
        n = fg.plate("n", 20)
        fg.mv_gaussian("x", np.zeros(2), precision=fg.wishart("lam", dof=2.0, scale=np.eye(2)), plates=[n],
                       observed=da.from_array(X, chunks=10), mask=mask)
    with fg.Model() as mod:
        n = fg.plate("n", 20)
        fg.mv_gaussian("x", np.zeros(2), precision=fg.wishart("lam", dof=2.0, scale=np.eye(2)), plates=[n],
                       observed=X, mask=mask)
    with pytest.raises(ModelError, match="use fg.NCVMP"):
        fg.infer(mod, fg.VMP())


def test_benchmark_runs_small():
    """benchmarks/gmm_missing_entries.py at a tiny size runs; both fits converge to the same partition and the
    missing-entry fit's ELBO never falls (its timing is not asserted)."""
    from benchmarks.gmm_missing_entries import main

    (out,) = main(Ns=(300,), sweeps=2)
    assert out["missing_ms"] > 0 and out["complete_ms"] > 0 and out["hidden"] > 0
    m, c = out["missing"], out["complete"]
    assert m["algorithm"] == "ncvmp" and c["algorithm"] == "vmp"
    assert m["converged"] and c["converged"] and m["monotone"]
    assert abs(m["accuracy"] - c["accuracy"]) < 0.02


@pytest.mark.parametrize("seed", [11, 17])
def test_default_scale_under_a_mask_is_the_pairwise_complete_covariance(seed):
    """models.gaussian_mixture_model(mask=) with single entries missing: V₀ is the pairwise-complete covariance
    (each entry over the rows where both columns are seen), or its diagonal when that is not positive definite
    (seed 17), so a table with hardly any complete row still fits with the default priors (the covariance of
    the complete rows was singular there)."""
    rng = np.random.default_rng(seed)
    X = rng.multivariate_normal(np.zeros(8), 0.5 * np.eye(8) + 0.5, size=80)
    seen = rng.uniform(size=X.shape) > 0.3
    assert seen.all(-1).sum() < 8  # fewer complete rows than columns
    m = models.gaussian_mixture_model(np.where(seen, X, np.nan), 2, "full", mask=seen)
    v0 = next(f for f in m.factors if f.ftype.name == "NormalWishart").params["scale"]
    want = np.empty((8, 8))
    for i in range(8):
        for j in range(8):
            both = seen[:, i] & seen[:, j]
            xi, xj = X[seen[:, i], i].mean(), X[seen[:, j], j].mean()  # about each column's observed mean
            want[i, j] = ((X[both, i] - xi) * (X[both, j] - xj)).sum() / (both.sum() - 1)
    if np.linalg.eigvalsh(want)[0] <= 0:
        assert seed == 17
        want = np.diag(np.diagonal(want))
    np.testing.assert_allclose(v0, want, rtol=1e-12)
    r = fg.infer(m, seed=0, max_iter=5000)  # one cluster split in two: slow, but it gets there
    assert r.converged and np.isfinite(r.elbo)
