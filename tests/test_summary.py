"""result.summary(): a pandas table, exact where q has closed-form quantiles, from draws elsewhere."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import factorgraph as fg


def _fit():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    y = X @ [1.0, -0.5] + 0.3 * rng.normal(size=40)
    with fg.Model("lin") as m:
        n, g = fg.plate("n", 40), fg.plate("g", 3)
        w = fg.mv_gaussian("w", 0.0, 1.0, dim=2)
        tau = fg.gamma("tau", 1.0, 1.0)
        mu = fg.gaussian("mu", 0.0, precision=1.0, plates=[g])
        fg.gaussian("y", mean=fg.inner(X, w, plates=[n]), precision=tau, plates=[n], observed=y)
        fg.gaussian("z", mean=mu, precision=1.0, plates=[g], observed=np.array([1.0, 2.0, 3.0]))
        p = fg.beta("p", 2.0, 2.0)
        fg.bernoulli("s", probs=p, plates=[n], observed=(y > 0).astype(float))
    return fg.infer(m)


def test_summary_is_exact_from_q():
    r = _fit()
    t = r.summary()
    assert isinstance(t, pd.DataFrame)
    assert list(t.columns) == ["mean", "sd", "3%", "97%", "exact"]
    assert list(t.index) == ["w[0]", "w[1]", "tau", "mu[0]", "mu[1]", "mu[2]", "p"]
    assert t["exact"].all()
    qw, qt, qm, qp = (r.posterior(k) for k in ("w", "tau", "mu", "p"))
    np.testing.assert_allclose(t.loc["w[1]", "mean"], qw.mean()[1])
    np.testing.assert_allclose(t.loc["w[1]", "sd"], np.sqrt(qw.cov()[1, 1]))
    np.testing.assert_allclose(t.loc["w[1]", "97%"], stats.norm(qw.mean()[1], np.sqrt(qw.cov()[1, 1])).ppf(0.97))
    np.testing.assert_allclose(t.loc["tau", ["3%", "97%"]].to_numpy(float),
                               stats.gamma(qt.shape, scale=1 / qt.rate).ppf([0.03, 0.97]))
    np.testing.assert_allclose(t.loc["mu[2]", "3%"], stats.norm(qm.mean()[2], qm.std()[2]).ppf(0.03))
    np.testing.assert_allclose(t.loc["p", "97%"], stats.beta(qp.alpha, qp.beta).ppf(0.97))
    t50 = r.summary(prob=0.5)
    assert list(t50.columns[2:4]) == ["25%", "75%"]
    assert (t50["75%"] - t50["25%"] < t["97%"] - t["3%"]).all()
    with pytest.raises(ValueError, match="prob"):
        r.summary(prob=1.5)


def test_summary_from_draws_for_a_mixture_and_normal_gamma():
    rng = np.random.default_rng(1)
    x = np.r_[rng.normal(-3, 1, 30), rng.normal(3, 1, 30)]
    with fg.Model("mix") as m:
        n, k = fg.plate("n", 60), fg.plate("k", 2)
        pi = fg.dirichlet("pi", np.ones(2))
        mus = fg.gaussian("mus", mean=0.0, precision=0.01, plates=[k])
        z = fg.categorical("z", pi, plates=[n])
        fg.gaussian("x", mean=mus[z], precision=1.0, plates=[n], observed=x)
    r = fg.infer(m)
    t = r.summary(draws=20_000)
    assert not t.loc["pi[0]", "exact"] and t.loc["mus[1]", "exact"]
    assert "z[59, 1]" in t.index
    qpi = r.posterior("pi")
    a = qpi.concentration  # a Dirichlet marginal is Beta(a_k, Σa − a_k): the draws' quantiles approach it
    exact = stats.beta(a[0], a.sum() - a[0]).ppf([0.03, 0.97])
    np.testing.assert_allclose(t.loc["pi[0]", ["3%", "97%"]].to_numpy(float), exact, atol=0.01)
    np.testing.assert_allclose(t.loc["pi[0]", "mean"], qpi.mean()[0])
    np.testing.assert_allclose(t.loc["z[0, 0]", "mean"], r.posterior("z").probs[0, 0])

    X = np.c_[np.ones(30), rng.normal(size=30)]
    y = X @ [0.5, 2.0] + rng.normal(size=30)
    with fg.Model("ng") as m2:
        nn = fg.plate("n", 30)
        w = fg.gaussian_gamma("w", dim=2)
        fg.gaussian("y", mean=fg.inner(X, w, plates=[nn]), precision=w.tau, plates=[nn], observed=y)
    r2 = fg.infer(m2)
    t2 = r2.summary()
    assert list(t2.index) == ["w[0]", "w[1]", "w.tau"] and t2["exact"].all()
    draws = r2.sample(40_000, seed=3)
    np.testing.assert_allclose(t2.loc["w[1]", ["3%", "97%"]].to_numpy(float),
                               np.quantile(draws["w"][:, 1], [0.03, 0.97]), rtol=0.02)
    np.testing.assert_allclose(t2.loc["w.tau", ["3%", "97%"]].to_numpy(float),
                               np.quantile(draws["w.tau"], [0.03, 0.97]), rtol=0.03)
