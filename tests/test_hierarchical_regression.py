"""models.hierarchical_regression: varying intercepts and slopes, pooling choices, predictions, bad input."""

from __future__ import annotations

import numpy as np
import pytest

import factorgraph as fg
from factorgraph import models


def _data(rng, G=6, N=300, D=2):
    g = rng.integers(0, G, N)
    X = rng.normal(size=(N, D))
    a = 1.0 + 0.8 * rng.normal(size=G)
    B = np.array([0.5, -1.0]) + 0.4 * rng.normal(size=(G, D))
    y = a[g] + np.sum(X * B[g], axis=1) + 0.2 * rng.normal(size=N)
    return X, y, g, a, B


def test_varying_intercepts_and_slopes_recover_the_truth():
    X, y, g, a, B = _data(np.random.default_rng(0))
    r = models.hierarchical_regression(X, y, g, varying=("intercept", "slope"))
    assert r.converged and not r.warnings
    qa, qb = r.posterior("intercept"), r.posterior("slope")
    assert qb.batch_shape == (6, 2)
    assert np.all(np.abs(qa.mean() - a) < 4 * np.sqrt(qa.var()) + 0.05)
    assert np.all(np.abs(qb.mean() - B) < 4 * np.sqrt(qb.var()) + 0.05)
    assert np.all(np.diff(r.elbo_trace) >= -1e-9 * abs(r.elbo))
    assert abs(1 / np.sqrt(r.posterior("noise_precision").mean()) - 0.2) < 0.03


def test_the_evidence_prefers_the_true_structure():
    X, y, g, _, _ = _data(np.random.default_rng(1))
    fits = {v: models.hierarchical_regression(X, y, g, varying=v)
            for v in [(), ("intercept",), ("intercept", "slope")]}
    assert fg.compare({str(k): r for k, r in fits.items()}).best() == str(("intercept", "slope"))
    none = models.hierarchical_regression(X, y, g, varying=("intercept", "slope"), pooling="none")
    assert "intercept_mean" not in none.posteriors and "intercept_mean" in fits[("intercept",)].posteriors


def test_predictive_covers_new_rows():
    rng = np.random.default_rng(2)
    X, y, g, a, B = _data(rng, N=400)
    r = models.hierarchical_regression(X[:300], y[:300], g[:300], varying=("intercept", "slope"), n_groups=6)
    pred = models.hierarchical_predictive(r, X[300:], g[300:])
    z = (y[300:] - pred.mean()) / np.sqrt(pred.var())
    assert abs(np.mean(np.abs(z) < 1.96) - 0.95) < 0.05
    for varying in [("intercept",), ("slope",), ()]:
        fit = models.hierarchical_regression(X, y, g, varying=varying)
        p2 = models.hierarchical_predictive(fit, X[:5], g[:5])
        assert p2.mean().shape == (5,) and np.all(p2.var() > 0)
        assert np.all(np.abs(p2.mean() - y[:5]) < 4 * np.sqrt(p2.var())), varying
    with pytest.raises(fg.ModelError, match=r"labels of 'groups_new' must lie in 0\.\.5, got 6"):
        models.hierarchical_predictive(r, X[:2], [0, 6])


def test_empty_group_keeps_the_population_prior():
    X, y, g, _, _ = _data(np.random.default_rng(3))
    r = models.hierarchical_regression(X, y, g, n_groups=7)
    q = r.posterior("intercept")
    mu = r.posterior("intercept_mean")
    # no rows: the population prior (as of the last update of the intercepts, which precedes the mean's)
    assert abs(q.mean()[6] - mu.mean()) < 1e-4
    assert abs(q.var()[6] * r.posterior("intercept_precision").mean() - 1) < 1e-3


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"varying": ("intercept", "slopes")}, r"varying must be a tuple drawn from \('intercept', 'slope'\)"),
    ({"varying": ("slope", "slope")}, r"each at most once"),
    ({"pooling": "some"}, r"pooling must be one of \('partial', 'none'\), got 'some'"),
    ({"groups": [0, 1, 2]}, r"groups has 3 labels but y has 8 observations"),
    ({"groups": [0, 1, 2, 0, 1, -2, 0, 1]}, r"labels of 'groups' must lie in 0\.\.2.*got -2"),
    ({"groups": [0, 1, 2, 0, 1, 1.5, 0, 1]}, r"labels of 'groups' must be integers.*got 1\.5"),
    ({"groups": np.array(["a", "b", 2, 0, 1, 2, 0, 1], dtype=object)},
     r"groups must be integer codes or names \(strings\), not a mix"),
    ({"groups": list("abcabcab"), "n_groups": 4}, r"n_groups=4 applies to integer group codes.*named \(e\.g\. 'a'\)"),
    ({"groups": np.ma.array(list("abcabcab"), mask=[0, 0, 0, 1, 0, 0, 0, 0])},
     r"labels of 'groups' cannot be missing.*1 masked entry \(first at position 3\)"),
    ({"groups": [None, 1, 2, 0, 1, 2, 0, 1]}, r"labels of 'groups' must be integers.*got None"),
    ({"groups": ["a", None, "b", "a", "b", "a", "b", "a"]}, r"groups: row\(s\) \[1\] have no group name \(None\)"),
    ({"groups": np.array(["a", "b", "a", np.nan, "b", "a", np.nan, "a"], dtype=object)},
     r"groups: row\(s\) \[3, 6\] have no group name \(nan\)"),
    ({"X": None, "varying": ("intercept", "slope")}, r"varying slopes need X with at least one column"),
    ({"X": np.ones((7, 2))}, r"X must be a matrix with one row per observation \(8\), got shape \(7, 2\)"),
])
def test_bad_input(kwargs, match):
    args = {"X": np.arange(8.0), "y": np.arange(8.0), "groups": [0, 1, 2, 0, 1, 2, 0, 1]} | kwargs
    with pytest.raises(fg.ModelError, match=match):
        models.hierarchical_regression_model(args.pop("X"), args.pop("y"), args.pop("groups"), **args)


def test_named_groups_are_coded_in_sorted_order():
    """String group labels give the model of their np.unique codes; the names label the groups (model.coords,
    to_arviz) and are what hierarchical_predictive takes."""
    rng = np.random.default_rng(4)
    X, y, g, _, _ = _data(rng, G=3, N=60)
    names = np.array(["texas", "alaska", "ohio"])  # codes 0, 1, 2 -> sorted order alaska, ohio, texas
    named = models.hierarchical_regression(X, y, list(names[g]), varying=("intercept", "slope"))
    order = np.argsort(names)
    coded = models.hierarchical_regression(X, y, np.argsort(order)[g], varying=("intercept", "slope"))
    assert named.elbo == coded.elbo
    np.testing.assert_array_equal(named.model.coords["groups"], names[order])
    np.testing.assert_array_equal(named.posterior("intercept").mean(), coded.posterior("intercept").mean())
    np.testing.assert_array_equal(named.posterior("slope").mean(), coded.posterior("slope").mean())
    p1 = models.hierarchical_predictive(named, X[:5], names[g[:5]])
    p2 = models.hierarchical_predictive(coded, X[:5], np.argsort(order)[g[:5]])
    np.testing.assert_array_equal(p1.mean(), p2.mean())
    np.testing.assert_array_equal(p1.var(), p2.var())
    with pytest.raises(fg.ModelError, match=r"groups_new: group 'utah' \(at position 1\) is not one the model"):
        models.hierarchical_predictive(named, X[:2], ["ohio", "utah"])
    with pytest.raises(fg.ModelError, match=r"groups_new must be a 1-D array of the group names.*\['alaska', 'ohio'"):
        models.hierarchical_predictive(named, X[:2], [0, 1])
    pytest.importorskip("arviz")
    idata = named.to_arviz(draws=20, seed=0)
    np.testing.assert_array_equal(idata.posterior.coords["groups"].values, names[order])
    rows = named.summary().index.tolist()  # the table labels the groups by name too
    assert [f"intercept[{n}]" for n in names[order]] == [r for r in rows if r.startswith("intercept[")]
    assert "slope[alaska, 0]" in rows and "slope[texas, 0]" in rows



@pytest.mark.parametrize("varying", [("intercept",), ("intercept", "slope")])
def test_missing_outcomes_drop_out(varying):
    """NaN (or a masked entry) in y is missing: the fit equals the fit without those rows (the same groups, so
    a group left with no rows keeps its place and its population prior)."""
    X, y, g, _, _ = _data(np.random.default_rng(5), G=5, N=80)
    gone = np.zeros(len(y), bool)
    gone[[3, 10, 11, 40]] = True
    gone[g == 4] = True  # every row of group 4
    kw = {"n_groups": 5, "tol": 1e-13, "max_iter": 3000}
    with_nan = models.hierarchical_regression(X, np.where(gone, np.nan, y), g, varying, **kw)
    masked = models.hierarchical_regression(X, np.ma.masked_array(y, mask=gone), g, varying, **kw)
    dropped = models.hierarchical_regression(X[~gone], y[~gone], g[~gone], varying, **kw)
    for r in (with_nan, masked):
        assert r.elbo == pytest.approx(dropped.elbo, rel=1e-10)
        for k in dropped.posteriors:
            np.testing.assert_allclose(r.posterior(k).mean(), dropped.posterior(k).mean(), rtol=1e-7, atol=1e-9)
    with pytest.raises(fg.ModelError, match="y must be finite or NaN"):
        models.hierarchical_regression(X, np.where(gone, np.inf, y), g, varying)


# ------------------------------------------------------------------ population scales: priors, non-centred, integrated
def _small_groups(seed: int = 0, G: int = 6, N: int = 60):
    rng = np.random.default_rng(seed)
    g = rng.integers(0, G, N)
    x = rng.normal(size=N)
    y = rng.normal(1.0, 0.4, G)[g] + 0.3 * x + rng.normal(0.0, 1.0, N)
    return x, y, g


def test_a_scale_prior_is_the_hand_written_model() -> None:
    x, y, g = _small_groups()
    r = models.hierarchical_regression(x, y, g, scale_prior="half_normal", scale=2.0, tol=1e-12)
    with fg.Model("by hand") as m:
        n, grp = fg.plate("n", len(y)), fg.plate("groups", 6)
        mu = fg.gaussian("intercept_mean", 0.0, precision=1e-2)
        a = fg.gaussian("intercept", mean=mu, sd=fg.half_normal("intercept_sd", 2.0), plates=[grp])
        b = fg.mv_gaussian("slope", mean=0.0, precision=1e-2, dim=1)
        fg.gaussian("y", mean=a[g] + fg.inner(x[:, None], b, [n]), precision=fg.gamma("noise_precision", 1.0, 1.0),
                    plates=[n], observed=y)
    h = fg.infer(m, tol=1e-12, max_iter=1000)
    assert r.converged and h.converged
    assert r.elbo == pytest.approx(h.elbo, abs=1e-9)
    np.testing.assert_allclose(r.posterior("intercept").mean(), h.posterior("intercept").mean(), atol=1e-8)
    np.testing.assert_allclose(r.posterior("intercept_sd").mean(), h.posterior("intercept_sd").mean(), atol=1e-8)


def test_non_centred_intercepts_report_the_named_effects_and_predict() -> None:
    x, y, g = _small_groups(1)
    r = models.hierarchical_regression(x, y, g, scale_prior="half_normal", parametrisation="non_centred", tol=1e-12)
    assert r.converged and {"intercept_raw", "intercept_sd", "intercept_mean"} <= set(r.posteriors)
    mu, sd, raw = r.posterior("intercept_mean"), r.posterior("intercept_sd"), r.posterior("intercept_raw")
    # α_g = μ + σ·η_g under the factorised q: E[α_g] = E[μ] + E[σ]E[η_g]
    np.testing.assert_allclose(r.posterior("intercept").mean(), mu.mean() + sd.mean() * raw.mean(), rtol=1e-10)
    pred = models.hierarchical_predictive(r, x[:4], g[:4])
    np.testing.assert_allclose(pred.mean(), np.asarray(r.posterior("intercept").mean())[g[:4]]
                               + x[:4] * float(r.posterior("slope").mean()[0]), rtol=1e-10)


@pytest.mark.parametrize("kw, match", [
    ({"parametrisation": "non_centred"}, "needs a scale_prior"),
    ({"scale_prior": "half_normal", "parametrisation": "non_centred", "pooling": "none"}, "partial pooling"),
    ({"scale_prior": "lognormal"}, "scale_prior must be"),
    ({"parametrisation": "noncentered"}, "parametrisation must be"),
    ({"scale_prior": "half_normal", "scale": -1.0}, "scale"),
    ({"integrate_scale": True}, "needs a scale_prior"),
    ({"scale_prior": "half_normal", "integrate_scale": "yes"}, "integrate_scale must be"),
])
def test_scale_options_are_checked(kw, match) -> None:
    x, y, g = _small_groups()
    with pytest.raises(fg.ModelError, match=match):
        models.hierarchical_regression(x, y, g, **kw)


@pytest.mark.slow
def test_integrating_the_intercepts_scale_out() -> None:
    x, y, g = _small_groups(2, G=4, N=24)
    r = models.hierarchical_regression(x, y, g, scale_prior="half_normal", parametrisation="non_centred",
                                       integrate_scale=True)
    mf = models.hierarchical_regression(x, y, g, scale_prior="half_normal", parametrisation="non_centred")
    assert type(r.posterior("intercept_sd")).__name__ == "GridDensity"
    assert r.elbo >= mf.elbo - 1e-6  # the quadrature's bound is at least the mean-field one
    assert np.all(np.isfinite(models.hierarchical_predictive(r, x[:3], g[:3]).mean()))
