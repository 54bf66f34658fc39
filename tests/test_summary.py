"""result.summary(): a pandas table, exact where q has closed-form quantiles, from draws elsewhere."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import factorgraph as fg
from factorgraph import models


def _fit():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    y = X @ [1.0, -0.5] + 0.3 * rng.normal(size=40)
    with fg.Model("lin") as m:
        n, g = fg.plate("n", 40), fg.plate("g", 3)
        w = fg.mv_gaussian("w", 0.0, precision=1.0, dim=2)
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
    t = r.summary()
    assert t["exact"].all()
    # the labels z (60 rows × 2 categories) are per-row latents beyond the default's limit: left out, and said so
    assert not any(i.startswith("z[") for i in t.index)
    assert t.attrs["notes"] == ["left out per-row latent variables of more than 100 rows: 'z' (120 rows); name them "
                                "in var_names= to include them"]
    qpi = r.posterior("pi")
    a = qpi.concentration  # a Dirichlet marginal is Beta(a_k, Σa − a_k): exact, not sampled
    exact = stats.beta(a[0], a.sum() - a[0]).ppf([0.03, 0.97])
    np.testing.assert_allclose(t.loc["pi[0]", ["3%", "97%"]].to_numpy(float), exact, rtol=1e-12)
    np.testing.assert_allclose(t.loc["pi[0]", ["mean", "sd"]].to_numpy(float), [qpi.mean()[0], np.sqrt(qpi.var()[0])])
    tz = r.summary(var_names=["z"])
    assert len(tz) == 120 and "z[59, 1]" in tz.index and tz.attrs["notes"] == []
    pz = r.posterior("z").probs[0, 0]  # the indicator 1[z_0 = 0] ~ Bernoulli(q(z_0 = 0))
    np.testing.assert_allclose(tz.loc["z[0, 0]", ["mean", "sd"]].to_numpy(float), [pz, np.sqrt(pz * (1 - pz))])
    assert tz["exact"].all()

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


def test_var_names_select_variables_and_rows():
    r = _fit()
    assert list(r.summary(var_names="tau").index) == ["tau"]
    assert list(r.summary(var_names=["mu", "w"]).index) == ["w[0]", "w[1]", "mu[0]", "mu[1]", "mu[2]"]
    with pytest.raises(fg.ModelError, match=r"summary: no posterior for \['nope'\]; the variables are \['w', 'tau'"):
        r.summary(var_names=["w", "nope"])
    for bad in ([], 3, ["w", 1]):
        with pytest.raises(fg.ModelError, match="summary: var_names must be"):
            r.summary(var_names=bad)
    X = np.c_[np.ones(30), np.linspace(-1, 1, 30)]
    with fg.Model("ng") as m:
        n = fg.plate("n", 30)
        w = fg.gaussian_gamma("w", dim=2)
        fg.gaussian("y", mean=fg.inner(X, w, plates=[n]), precision=w.tau, plates=[n], observed=X[:, 1] * 2)
    r2 = fg.infer(m)
    assert list(r2.summary(var_names="w.tau").index) == ["w.tau"]
    assert list(r2.summary(var_names="w").index) == ["w[0]", "w[1]", "w.tau"]


def test_small_per_row_latents_stay_and_large_ones_are_left_out():
    rng = np.random.default_rng(2)

    def effects(N):
        with fg.Model("effects") as m:
            n = fg.plate("n", N)
            mu = fg.gaussian("mu", 0.0, 1.0)
            u = fg.gaussian("u", mu, 1.0, plates=[n])
            fg.gaussian("y", u, 4.0, plates=[n], observed=rng.normal(size=N))
        return fg.infer(m)

    small, big = effects(100), effects(101)
    assert len(small.summary()) == 101 and small.summary().attrs["notes"] == []
    t = big.summary()
    assert list(t.index) == ["mu"] and "'u' (101 rows)" in t.attrs["notes"][0]
    assert len(big.summary(var_names=["mu", "u"])) == 102


def test_dataframe_columns_name_the_coefficients():
    pd_X = pd.DataFrame(np.random.default_rng(3).normal(size=(40, 3)), columns=["age", "income", "height"])
    y = pd_X.to_numpy() @ [1.0, 0.0, -1.0] + np.random.default_rng(4).normal(size=40)
    r = models.linear_regression(pd_X, y, ard=True)
    t = r.summary()
    assert list(t.index) == ["alpha[age]", "alpha[income]", "alpha[height]", "w[age]", "w[income]", "w[height]",
                             "w.tau"]
    np.testing.assert_allclose(t.loc[["w[age]", "w[income]", "w[height]"], "mean"], r.posterior("w").mean())
    assert list(r.to_arviz(draws=8, chains=1).posterior["w"].coords["w_dim_0"].values) == ["age", "income", "height"]
    assert list(models.logistic_regression(pd_X, y > 0).summary().index[1:]) == ["w[age]", "w[income]",
                                                                                    "w[height]"]
    with fg.Model() as m:  # fg.inner with a DataFrame: a mean-field w on a plate of the columns, or a vector
        n, d = fg.plate("n", 40), fg.plate("d", 3)
        a = fg.gaussian("a", 0.0, 1.0, plates=[d])
        b = fg.mv_gaussian("b", 0.0, precision=1.0, dim=3)
        fg.gaussian("y", fg.inner(pd_X, a, plates=[n]) + fg.inner(pd_X, b, plates=[n]), 1.0, plates=[n], observed=y)
    idx = list(fg.infer(m).summary().index)
    assert idx == ["a[age]", "a[income]", "a[height]", "b[age]", "b[income]", "b[height]"]


def test_a_dataframe_given_as_a_data_node_names_the_coefficients():
    """``fg.data("X", df)`` keeps the columns: they name w in the summary, in ArviZ, and after set_data."""
    pd_X = pd.DataFrame(np.random.default_rng(3).normal(size=(40, 3)), columns=["age", "income", "height"])
    y = pd_X.to_numpy() @ [1.0, 0.0, -1.0] + np.random.default_rng(4).normal(size=40)
    with fg.Model() as m:
        n, d = fg.plate("n", 40), fg.plate("d", 3)
        X = fg.data("X", pd_X)
        a = fg.gaussian("a", 0.0, precision=1.0, plates=[d])
        b = fg.mv_gaussian("b", 0.0, precision=1.0, dim=3)
        fg.gaussian("y", fg.inner(X, a, plates=[n]) + fg.inner(X, b, plates=[n]), precision=1.0, plates=[n],
                    observed=y)
    r = fg.infer(m)
    assert list(r.summary().index) == ["a[age]", "a[income]", "a[height]", "b[age]", "b[income]", "b[height]"]
    assert list(r.to_arviz(draws=8, chains=1).posterior["b"].coords["b_dim_0"].values) == ["age", "income", "height"]
    np.testing.assert_allclose(r.summary().loc[["b[age]", "b[income]", "b[height]"], "mean"], r.posterior("b").mean())
    pred = fg.predict(r, data={"X": pd_X.iloc[:5]}, seed=0)
    assert np.shape(pred["y"])[-1] == 5


# ---------------------------------------------------------------- every family a posterior can have, summarised
def _walk_distribution_classes() -> set[type]:
    """Every concrete distribution class of the ``distributions`` package (each of its modules imported)."""
    import importlib
    import pkgutil

    import distributions
    from distributions.base import ChainPosterior, Distribution, ExponentialFamily

    for info in pkgutil.iter_modules(distributions.__path__):
        importlib.import_module(f"distributions.{info.name}")
    found, todo = set(), [Distribution]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("distributions."):
                found.add(sub)
    return found - {ExponentialFamily, ChainPosterior}


_RNG = np.random.default_rng(5)
_N = 30
_X = _RNG.normal(size=(_N, 2))
_YL = (_RNG.random(_N) < 1 / (1 + np.exp(-_X @ [1.5, -1.0]))).astype(float)
_Y8, _S8 = np.array([28.0, 8, -3, 7, -1, 1, 18, 12]), np.array([15.0, 10, 16, 11, 9, 11, 10, 18])


def _logistic():
    with fg.Model("logit") as m:
        n = fg.plate("n", _N)
        w = fg.mv_gaussian("w", 0.0, precision=0.5, dim=2)
        fg.bernoulli_logit("y", fg.inner(_X, w, plates=[n]), observed=_YL, method="quadrature")
    return m


def _schools(scale="half_cauchy", noncentred=False):
    with fg.Model("schools") as m:
        j = fg.plate("school", 8)
        mu = fg.gaussian("mu", 0.0, sd=5.0)
        tau = fg.half_cauchy("tau", scale=5.0) if scale == "half_cauchy" else fg.uniform_scale("tau", upper=30.0)
        if noncentred:  # τ used on σ itself: q(τ) is a TiltedScale
            eta = fg.gaussian("eta", 0.0, sd=1.0, plates=[j])
            fg.gaussian("y", mean=mu + tau * eta, sd=_S8, plates=[j], observed=_Y8)
        else:
            theta = fg.gaussian("theta", mu, sd=tau, plates=[j])
            fg.gaussian("y", theta, sd=_S8, plates=[j], observed=_Y8)
    return m


def _simple(kind):
    with fg.Model(kind) as m:
        n = fg.plate("n", _N)
        if kind == "bernoulli":
            fg.bernoulli("b", fg.beta("p", 1.0, 1.0), plates=[fg.plate("k", 3)])
            fg.gaussian("y", fg.gaussian("mu", 0.0, 1.0), 1.0, plates=[n], observed=_X[:, 0])
        elif kind == "wishart":
            L = fg.wishart("L", dof=3.0, scale=np.eye(2))
            fg.mv_gaussian("x", np.zeros(2), precision=L, plates=[n], observed=_X)
        elif kind == "gaussian_chain":
            x = fg.gaussian_markov_chain("x", initial_mean=0.0, initial_precision=1.0, transition=1.0,
                                         noise_precision=4.0, plates=[n])
            fg.gaussian("y", fg.inner(np.ones(1), x), 1.0, plates=[n], observed=np.cumsum(_X[:, 0]))
        elif kind == "ragged_hmm":  # two sequences, the second shorter: its steps past its length do not exist
            s, t = fg.plate("seq", 2), fg.plate("t", 20)
            z = fg.markov_chain("z", fg.dirichlet("pi", np.ones(2)), fg.dirichlet("A", np.ones(2), plates=[fg.plate(
                "from", 2)]), plates=[s, t], lengths=[20, 12])
            lam = fg.gamma("lam", 1.0, 0.2, plates=[fg.plate("state", 2)])
            fg.poisson("y", lam[z], plates=[s, t], observed=np.r_[_RNG.poisson(2, 20), _RNG.poisson(9, 20)].reshape(
                2, 20))
        elif kind == "lognormal":  # a log-normal noise scale
            fg.gaussian("y", fg.gaussian("mu", 0.0, 0.01), sd=fg.lognormal("sigma", 0.0, 1.0), plates=[n],
                        observed=_X[:, 0])
    return m


# posterior class -> (fit, the variable whose posterior has that class)
POSTERIORS = {
    "Gaussian": (lambda: _fit(), "mu"),
    "MvGaussian": (lambda: _fit(), "w"),
    "Gamma": (lambda: _fit(), "tau"),
    "Beta": (lambda: _fit(), "p"),
    "Bernoulli": (lambda: fg.infer(_simple("bernoulli")), "b"),
    "Dirichlet": (lambda: models.gaussian_mixture(_X, 2, "full"), "pi"),
    "Categorical": (lambda: models.gaussian_mixture(_X, 2, "full"), "z"),
    "GaussianWishart": (lambda: models.gaussian_mixture(_X, 2, "full"), "theta"),
    "GaussianGamma": (lambda: models.linear_regression(_X, _X[:, 0] - _X[:, 1]), "w"),
    "Wishart": (lambda: fg.infer(_simple("wishart")), "L"),
    "CategoricalChain": (lambda: fg.infer(_simple("ragged_hmm")), "z"),
    "GaussianChain": (lambda: fg.infer(_simple("gaussian_chain")), "x"),
    "InverseSqrtGamma": (lambda: fg.infer(_schools()), "tau"),
    "TruncatedGamma": (lambda: fg.infer(_schools("uniform")), "tau"),
    "TiltedScale": (lambda: fg.infer(_schools(noncentred=True)), "tau"),
    "GridDensity": (lambda: fg.infer(_schools(noncentred=True), handlers={"tau": fg.ScaleQuadrature()}), "tau"),
    "QuadratureMixture": (lambda: fg.infer(_schools(noncentred=True), handlers={"tau": fg.ScaleQuadrature()}),
                          "mu"),
    "GaussianMixture": (lambda: fg.infer(_logistic(), handlers={"w": fg.BVI(n_components=2, seed=0)}), "w"),
    "AffineIndependent": (lambda: fg.infer(_logistic(), handlers={"w": fg.AIKL(base="gaussian")}), "w"),
    "GaussianRows": (lambda: models.pca(np.c_[_X, _X @ [1.0, -1.0]], 1), "z"),  # the scores of a factor analysis
}
POSTERIORS["LogNormal"] = (lambda: fg.infer(_simple("lognormal")), "sigma")
# classes that are never a posterior: counts are observed only, a point mass is an observed or clamped value
NOT_POSTERIORS = {"Binomial", "Multinomial", "Poisson", "PointMass"}


def test_the_walk_covers_every_distribution_class():
    names = {c.__name__ for c in _walk_distribution_classes()}
    assert names == set(POSTERIORS) | NOT_POSTERIORS, "a distribution class is missing from POSTERIORS (a fitted " \
        "model whose posterior has it) or NOT_POSTERIORS"


@pytest.mark.parametrize("cls", sorted(POSTERIORS))
def test_summary_for_every_posterior_family(cls):
    fit, name = POSTERIORS[cls]
    r = fit()
    assert cls in (type(r.posteriors[name]).__name__, type(r.posterior(name)).__name__)
    t = r.summary(var_names=[name], draws=400, seed=1)
    q = r.posterior(name)
    assert len(t) > 0 and t.index[0].startswith(name)
    lo, hi = t["3%"].to_numpy(float), t["97%"].to_numpy(float)
    m, sd = t["mean"].to_numpy(float), t["sd"].to_numpy(float)
    assert np.all(np.isfinite(t.iloc[:, :4].to_numpy(float))) and np.all(sd >= 0) and np.all(lo <= hi)
    if cls == "CategoricalChain":  # one row per state of each step that exists: 20 + 12 steps of 2 states
        assert len(t) == 2 * (20 + 12) and "z[1, 11, 1]" in t.index and "z[1, 12, 0]" not in t.index
        keep = q.marginals.sum(-1) > 0
        np.testing.assert_allclose(m, q.marginals[keep].ravel())
        assert t["exact"].all()
        return
    mean = q.mean()[0] if cls == "GaussianWishart" else q.mean()  # a normal–Wishart block's rows are its means
    np.testing.assert_allclose(m[: np.size(mean)], np.ravel(mean), rtol=1e-9, atol=1e-12)
    assert np.all(lo <= m + 1e-9) and np.all(m <= hi + 1e-9) or cls in ("Categorical", "Bernoulli")


def test_summary_of_a_canned_hidden_markov_model():
    y = np.r_[_RNG.poisson(2, 30), _RNG.poisson(9, 30)]
    r = models.hmm(y, 2, "poisson")
    t = r.summary()
    assert {"pi[0]", "A[1, 1]", "lam[1]"} <= set(t.index) and t["exact"].all()
    assert "'z' (120 rows)" in t.attrs["notes"][0]
    tz = r.summary(var_names="z")
    np.testing.assert_allclose(tz["mean"].to_numpy().reshape(60, 2), r.posterior("z").marginals[0])


@pytest.mark.parametrize("cls", sorted(c for c in POSTERIORS if c in ("InverseSqrtGamma", "TruncatedGamma",
                                                                      "TiltedScale", "GridDensity")))
def test_interval_and_median_have_one_type_across_families(cls):
    """Every posterior with ``interval`` (the scales σ: their q has closed-form or numerical quantiles) returns a
    numpy float for one variable and an array of its batch shape for a batch, as the summary's rows read them."""
    fit, name = POSTERIORS[cls]
    q = fit().posterior(name)
    lo, hi = q.interval(np.float32(0.9))
    assert type(lo) is type(hi) is type(q.median()) is np.float64
    assert lo < q.median() < hi
    np.testing.assert_allclose([lo, hi], q.ppf(np.array([0.05, 0.95])), rtol=1e-5)  # 0.9 in float32
    if cls != "GridDensity":  # a batch of two: arrays of the batch's shape
        from distributions import InverseSqrtGamma, TiltedScale

        if cls == "TiltedScale":
            two = TiltedScale(np.repeat(q._nat[0], 2), np.repeat(q._nat[1], 2), q._prior["prior"], q._prior["p0"],
                              q._prior["p1"], q._prior["const"])
        else:
            nat = (np.repeat(a, 2) for a in q.precision.natural)
            lower = {"lower": np.repeat(q.precision._lower, 2)} if cls == "TruncatedGamma" else {}
            two = InverseSqrtGamma(type(q.precision).from_natural(*nat, **lower))
        lo2, hi2 = two.interval(np.float32(0.9))
        assert isinstance(lo2, np.ndarray) and lo2.shape == hi2.shape == two.median().shape == (2,)
        np.testing.assert_allclose(lo2, lo, rtol=1e-9)


def test_the_summary_says_its_intervals_come_from_q() -> None:
    import factorgraph as fg

    with fg.Model("m") as m:
        mu = fg.gaussian("mu", 0.0, precision=1e-2)
        fg.gaussian("x", mean=mu, precision=fg.gamma("tau", 1.0, 1.0), plates=[fg.plate("n", 10)],
                    observed=np.arange(10.0))
    text = fg.infer(m).summary().attrs["intervals"]
    assert "quantiles of q" in text and "mean field" in text and "How far is my fit?" in text
    with fg.Model("w") as m2:
        w = fg.mv_gaussian("w", mean=0.0, precision=1.0, dim=2)
        fg.bernoulli_logit("y", logit=fg.inner(np.eye(2)[[0, 1, 0, 1]], w, plates=[fg.plate("n", 4)]),
                           observed=np.array([1, 0, 1, 1]))
    assert "'w'" in fg.infer(m2, handlers={"w": fg.Laplace()}).summary().attrs["intervals"]
