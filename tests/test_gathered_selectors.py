"""A selector gathered by labels, ``mu[z[g]]``: one label per group, shared by the group's rows (a mixture of groups).

The gate weights of row n are q(z_{g_n} = k); z_g's update sums the E[log f] of all its rows.  Checked against a
mean-field coordinate ascent written out here in plain numpy, the pointwise log-likelihood per group against a
direct computation on the same draws, and the predictive's shared labels.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import digamma, gammaln, logsumexp

import factorgraph as fg
from distributions import Categorical
from factorgraph.graph.nodes import ModelError

G, PER, K = 12, 5, 3
PRIOR_PREC, NOISE, ALPHA = 0.01, 1.0, 1.0


def _data(seed=0):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, K, G)
    sizes = rng.integers(1, 2 * PER, G)
    g = np.repeat(np.arange(G), sizes)
    rng.shuffle(g)  # rows in any order
    y = rng.normal(np.array([-4.0, 0.0, 4.0])[truth][g], 1.0)
    return y, g, truth


def _model(y, g, mask=None):
    with fg.Model("mixture of groups") as m:
        n, c, k = fg.plate("n", len(y)), fg.plate("c", G), fg.plate("k", K)
        pi = fg.dirichlet("pi", np.full(K, ALPHA))
        zc = fg.categorical("zc", pi, plates=[c], categories=k)
        mu = fg.gaussian("mu", 0.0, precision=PRIOR_PREC, plates=[k])
        fg.gaussian("y", mean=mu[zc[g]], precision=NOISE, plates=[n], observed=y, mask=mask)
    return m


def _cavi(y, g, r0, sweeps=5000):
    """Mean-field coordinate ascent on q(π) q(μ) Π_g q(z_g), in the library's order (μ, π, then z), and its ELBO."""
    r = r0.copy()
    for _ in range(sweeps):
        w = r[g]  # (N, K): row n's weights q(z_{g_n} = k)
        prec = PRIOR_PREC + NOISE * w.sum(0)
        m = NOISE * (w * y[:, None]).sum(0) / prec
        a = ALPHA + r.sum(0)
        elog_pi = digamma(a) - digamma(a.sum())
        ll = NOISE * (y[:, None] * m - 0.5 * (m**2 + 1 / prec))  # E[log f] up to constants in k
        score = elog_pi + np.array([ll[g == j].sum(0) for j in range(G)])
        new = np.exp(score - logsumexp(score, axis=1, keepdims=True))
        done = np.max(np.abs(new - r)) < 1e-15
        r = new
        if done:
            break
    w = r[g]
    prec = PRIOR_PREC + NOISE * w.sum(0)
    m = NOISE * (w * y[:, None]).sum(0) / prec
    a = ALPHA + r.sum(0)
    elog_pi = digamma(a) - digamma(a.sum())
    e_lik = (w * (0.5 * np.log(NOISE / (2 * np.pi)) - 0.5 * NOISE * ((y[:, None] - m) ** 2 + 1 / prec))).sum()
    e_z = (r * elog_pi).sum() - (r * np.log(np.where(r > 0, r, 1))).sum()
    e_mu = (0.5 * np.log(PRIOR_PREC / (2 * np.pi)) - 0.5 * PRIOR_PREC * (m**2 + 1 / prec)).sum() + (
        0.5 * np.log(2 * np.pi * np.e / prec)).sum()
    lnB = lambda v: gammaln(v).sum() - gammaln(v.sum())  # noqa: E731
    e_pi = (((ALPHA - 1) - (a - 1)) * elog_pi).sum() - lnB(np.full(K, ALPHA)) + lnB(a)
    return r, m, prec, a, e_lik + e_z + e_mu + e_pi


def test_fit_equals_independent_coordinate_ascent():
    y, g, _ = _data()
    r0 = np.random.default_rng(5).dirichlet(np.ones(K), size=G)
    res = fg.infer(_model(y, g), init={"zc": Categorical(probs=r0)}, tol=None, param_tol=1e-14, max_iter=5000)
    r, m, prec, a, elbo = _cavi(y, g, r0)
    np.testing.assert_allclose(res.posterior("zc").probs, r, atol=1e-10)
    np.testing.assert_allclose(res.posterior("mu").mean(), m, rtol=1e-10)
    np.testing.assert_allclose(res.posterior("mu").precision, prec, rtol=1e-10)
    np.testing.assert_allclose(res.posterior("pi").concentration, a, rtol=1e-10)
    assert res.elbo == pytest.approx(elbo, abs=1e-9)


def test_default_start_recovers_the_groups_and_the_bound_rises():
    """Without init=, each group starts at the k-means++ seeding of its rows' means."""
    y, g, truth = _data(1)
    res = fg.infer(_model(y, g), seed=0)
    labels = res.posterior("zc").probs.argmax(-1)
    pairs = labels[:, None] == labels[None, :]
    assert np.array_equal(pairs, truth[:, None] == truth[None, :])  # the same partition of the groups
    assert np.all(np.diff(res.elbo_trace) >= -1e-9 * abs(res.elbo))


def test_bernoulli_selector_gathered_by_labels():
    """fg.select(values, b[g]) with a Bernoulli per group (a two-category gate): each group's q(b) is its
    posterior given the group's rows, exactly (the values are known constants and P(b) fixed)."""
    rng = np.random.default_rng(3)
    g = np.repeat(np.arange(4), 3)
    y = rng.normal(np.array([0.0, 3.0, 0.0, 3.0])[g], 1.0)
    with fg.Model("spike per group") as m:
        n, c = fg.plate("n", 12), fg.plate("c", 4)
        b = fg.bernoulli("b", 0.3, plates=[c])
        fg.gaussian("y", mean=fg.select(np.array([0.0, 3.0]), b[g]), precision=1.0, plates=[n], observed=y)
    res = fg.infer(m)
    lik = np.stack([np.array([np.sum(-0.5 * (y[g == j] - v) ** 2) for j in range(4)]) for v in (0.0, 3.0)], -1)
    logit = np.log(0.3 / 0.7) + lik[:, 1] - lik[:, 0]
    np.testing.assert_allclose(res.posterior("b").probs, 1 / (1 + np.exp(-logit)), rtol=1e-12)
    # the evidence is exact here: log p(y) = Σ_groups log Σ_b p(b) p(y_group | b)
    exact = np.sum(logsumexp(lik + np.log([0.7, 0.3]), axis=1)) - 6 * np.log(2 * np.pi)
    assert res.elbo == pytest.approx(exact, abs=1e-10)


def test_pointwise_log_likelihood_is_per_group():
    """to_arviz: one entry per group, log Σ_k π_k Π_{n ∈ group} N(y_n | μ_k, 1) at each draw."""
    y, g, _ = _data(2)
    res = fg.infer(_model(y, g), seed=0)
    draws = res.sample(30, 7)
    idata = res.to_arviz(draws=30, seed=7, chains=1)
    ll = idata.log_likelihood["y"].values[0]
    assert ll.shape == (30, G)
    rows = -0.5 * np.log(2 * np.pi) - 0.5 * (y[None, :, None] - draws["mu"][:, None, :]) ** 2  # (S, N, K)
    per_group = np.stack([rows[:, g == j].sum(1) for j in range(G)], 1)  # (S, G, K)
    want = logsumexp(per_group + np.log(draws["pi"])[:, None, :], axis=-1)
    np.testing.assert_allclose(ll, want, rtol=1e-10)


def test_predictive_rows_of_a_group_share_its_label():
    """A group whose rows are all missing keeps q(z_g) = its prior mean; its predicted rows still share one label
    per draw (drawn per group, not per row)."""
    y, g, _ = _data(4)
    seen = g != 0
    res = fg.infer(_model(np.where(seen, y, np.nan), g, mask=seen), seed=0)
    assert np.max(res.posterior("zc").probs[0]) < 0.9  # the empty group is undecided
    draws = fg.predict(res, draws=300, seed=1)["y"][:, g == 0]
    mu = np.sort(res.posterior("mu").mean())
    comp = np.abs(draws[..., None] - mu).argmin(-1)  # nearest component of each predicted row
    # shared: all rows agree unless noise (sd 1, components 4 apart) crosses a midpoint, ≈ 0.8 of the draws here;
    # drawn per row with q(z) near uniform they would agree in ≈ 3·(1/3)⁶ < 0.5% of the draws
    assert np.mean(np.all(comp == comp[:, :1], axis=1)) > 0.5
    assert len(np.unique(comp[:, 0])) > 1  # and the group's label does vary between draws


def test_sharded_and_svi_refuse_a_gathered_selector_by_name():
    da = pytest.importorskip("dask.array")
    y, g, _ = _data()
    with pytest.raises(ModelError, match=r"selector 'zc' \(gathered by labels onto 'n'\) .*sharded.*numpy"):
        fg.infer(_model(da.from_array(y, chunks=20), g))
    with pytest.raises(ModelError, match=r"SVI: the selector 'zc' \(gathered by labels onto 'n'\)"):
        fg.infer(_model(y, g), fg.SVI(plate="n", batch_size=10), max_iter=3)


def test_full_covariance_mixture_of_groups_with_partly_observed_labels():
    """mu[z[g]] and L[z[g]] in one factor are one selector (two writings of z[g]); half the groups' labels observed
    (semi-supervised): those stay point masses, the others are inferred from their rows."""
    rng = np.random.default_rng(6)
    truth = rng.integers(0, 2, 16)
    g = np.repeat(np.arange(16), 6)
    X = rng.normal(size=(len(g), 2)) + np.array([[-3.0, 0.0], [3.0, 0.0]])[truth][g]
    seen = np.arange(16) < 8
    with fg.Model("groups, full covariance") as m:
        n, c, k = fg.plate("n", len(g)), fg.plate("c", 16), fg.plate("k", 2)
        zc = fg.categorical("zc", fg.dirichlet("pi", np.ones(2)), plates=[c], categories=k,
                            observed=np.where(seen, truth, 0), mask=seen)
        mu = fg.mv_gaussian("mu", np.zeros(2), precision=0.01, plates=[k])
        L = fg.wishart("L", dof=2.0, scale=np.eye(2), plates=[k])
        fg.mv_gaussian("x", mu[zc[g]], precision=L[zc[g]], plates=[n], observed=X)
    res = fg.infer(m)
    q = res.posterior("zc").probs
    np.testing.assert_allclose(q[seen], np.eye(2)[truth[seen]], rtol=0, atol=1e-300)  # point masses
    np.testing.assert_array_equal(q.argmax(-1), truth)
    assert np.all(np.diff(res.elbo_trace) >= -1e-9 * abs(res.elbo))
