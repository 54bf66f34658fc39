"""fg.ordered_logistic and fg.ordered_probit: E_q[log f] against numerical integration, the NCVMP fixed points and
ELBOs against an independent coordinate ascent in numpy, the pointwise log densities and draws, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

import factorgraph as fg
from distributions import Gaussian
from factors.base import point_stats
from factors.ordinal import ORDERED_LOGISTIC, ORDERED_PROBIT, ordered_logistic_evidence, ordered_probit_evidence
from tests.reference.ncvmp_regression import gauss_hermite, ncvmp_fit, quad_expectation

CUTS = np.array([-1.2, 0.1, 0.9])
LINKS = {"logistic": (stats.logistic, ordered_logistic_evidence, ORDERED_LOGISTIC),
         "probit": (stats.norm, ordered_probit_evidence, ORDERED_PROBIT)}


def _log_p(dist, y, x, cuts=CUTS):
    """log P(y | x) = log(F(c_{y+1} − x) − F(c_y − x)), by the survival function above 0 (no cancellation)."""
    ext = np.r_[-np.inf, cuts, np.inf]
    a, b = ext[y] - x, ext[y + 1] - x
    upper = np.where(a > 0, dist.sf(a) - dist.sf(b), dist.cdf(b) - dist.cdf(a))
    return np.log(upper)


@pytest.mark.parametrize("link", ["logistic", "probit"])
@pytest.mark.parametrize("y", [0, 1, 3])
def test_expected_log_likelihood_matches_quadrature(link, y):
    dist, evidence, ftype = LINKS[link]
    assert ftype.get_evidence()[1] == "exact"
    cuts = np.r_[-np.inf, CUTS, np.inf]
    for m in (-4.0, -0.5, 0.4, 3.0):
        for v in (1e-4, 0.2, 1.5, 6.0):
            q = Gaussian(mean=np.array([m]), var=np.array([v]))
            got = evidence({"out": point_stats(Gaussian, np.array([float(y)])), "eta": q.expected_stats()},
                           {"cuts": cuts})[0]
            ref = quad_expectation(lambda x: _log_p(dist, y, x), m, v)
            assert got == pytest.approx(ref, rel=1e-9, abs=1e-9), (m, v)


def _terms(link, y):
    """S, ∂S/∂m and ∂S/∂v of the rows in plain numpy: Gauss–Hermite with g′ = f′/f, g″ = f″/f − g′²."""
    z, w = gauss_hermite(64)  # nodes within ±11 sd: no underflow of f from the prior's variances
    ext = np.r_[-np.inf, CUTS, np.inf]
    lo, hi = ext[y][:, None], ext[y + 1][:, None]

    def terms(m, v):
        x = m[:, None] + np.sqrt(v)[:, None] * z
        a, b = lo - x, hi - x
        if link == "logistic":
            sa, sb = 1 / (1 + np.exp(-a)), 1 / (1 + np.exp(-b))
            da, db = sa * (1 - sa), sb * (1 - sb)
            dda, ddb = da * (1 - 2 * sa), db * (1 - 2 * sb)
        # f = F(b) − F(a) in logs, by the tail (cdf or sf) where it is smaller; ratios to f as exponentials
        dist = stats.logistic if link == "logistic" else stats.norm
        with np.errstate(divide="ignore", invalid="ignore"):
            upper = a > 0
            la = np.where(upper, dist.logsf(b), dist.logcdf(a))
            lb = np.where(upper, dist.logsf(a), dist.logcdf(b))
            log_f = lb + np.log1p(-np.exp(la - lb))
            if link == "probit":
                da, db = np.exp(dist.logpdf(a) - log_f), np.exp(dist.logpdf(b) - log_f)
                dda = np.where(np.isfinite(a), -np.where(np.isfinite(a), a, 0) * da, 0.0)
                ddb = np.where(np.isfinite(b), -np.where(np.isfinite(b), b, 0) * db, 0.0)
                f = 1.0
            else:
                f = np.exp(log_f)
        g1 = (da - db) / f          # d/dx of F(b) − F(a), b′ = a′ = −1
        g2 = (ddb - dda) / f - g1 * g1
        return log_f @ w, g1 @ w, 0.5 * (g2 @ w)

    return terms


@pytest.mark.parametrize("link", ["logistic", "probit"])
def test_fixed_point_and_elbo_match_independent_coordinate_ascent(link):
    rng = np.random.default_rng(11)
    N = 80
    X = rng.normal(size=(N, 2))
    dist = stats.logistic if link == "logistic" else stats.norm
    y = np.searchsorted(CUTS, X @ [1.0, -0.7] + dist.rvs(size=N, random_state=rng))
    prec0 = np.diag([1.0, 0.5])
    build = fg.ordered_logistic if link == "logistic" else fg.ordered_probit
    with fg.Model("ordinal") as model:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=np.zeros(2), precision=prec0)
        build("y", fg.inner(X, w, plates=[n]), cutpoints=CUTS, observed=y)
    r = fg.infer(model, fg.NCVMP(), tol=1e-14, param_tol=1e-13, max_iter=500)
    mu_ref, cov_ref, elbo_ref = ncvmp_fit(X, np.zeros(2), prec0, _terms(link, y))
    q = r.posterior("w")
    np.testing.assert_allclose(q.mean(), mu_ref, atol=1e-8)
    np.testing.assert_allclose(q.cov(), cov_ref, atol=1e-8)
    assert r.elbo == pytest.approx(elbo_ref, abs=1e-8)


@pytest.mark.parametrize("link", ["logistic", "probit"])
def test_pointwise_log_density_and_draws(link):
    """LOO's log densities are log P(y | η); the forward draws have the model's category frequencies."""
    pytest.importorskip("arviz")
    rng = np.random.default_rng(2)
    N = 50
    X = rng.normal(size=(N, 1))
    dist = stats.logistic if link == "logistic" else stats.norm
    y = np.searchsorted(CUTS, 0.8 * X[:, 0] + dist.rvs(size=N, random_state=rng))
    build = fg.ordered_logistic if link == "logistic" else fg.ordered_probit
    with fg.Model("ordinal") as model:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=np.zeros(1), precision=1.0)
        build("y", fg.inner(X, w, plates=[n]), cutpoints=CUTS, observed=y)
    r = fg.infer(model, fg.NCVMP())
    comparison = fg.compare({"m": r}, loo=True, loo_draws=100)
    assert np.isfinite(comparison.elpd_loo[0])
    from factorgraph.posterior.loglik import pointwise_log_likelihood

    wdraw = np.array([[0.5], [-1.0]])
    lp = pointwise_log_likelihood(model, {"w": wdraw})["y"]
    np.testing.assert_allclose(lp, _log_p(dist, y[None, :], (X @ wdraw.T).T), rtol=1e-10)
    with fg.Model("prior") as prior:
        n = fg.plate("n", 20000)
        x = fg.gaussian("x", mean=0.3, precision=1e12, plates=[n])
        build("y", x, cutpoints=CUTS, observed=np.zeros(20000, int))
    draws = fg.sample_prior(prior, 1, seed=0)["y"].ravel()
    freq = np.bincount(draws.astype(int), minlength=4) / draws.size
    np.testing.assert_allclose(freq, np.exp(_log_p(dist, np.arange(4), 0.3)), atol=0.015)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"cutpoints": [0.0, 1.0, 0.5]}, r"increasing, but cutpoints\[2\] = 0.5 does not exceed cutpoints\[1\] = 1"),
    ({"cutpoints": [0.0, 0.0]}, r"cutpoints\[1\] = 0"),
    ({"observed": [0, 4, 1]}, "must lie in 0..3, got 4"),
    ({"observed": [0, -1, 1]}, "must lie in 0..3, got -1"),
    ({"observed": [0, 1.5, 1]}, "must be integers 0..3, got 1.5"),
    ({"cutpoints": [[0.0, 1.0]]}, "cutpoints must be a vector"),
])
@pytest.mark.parametrize("build", [fg.ordered_logistic, fg.ordered_probit])
def test_bad_input_names_variable_and_value(build, kwargs, match):
    kwargs = {"cutpoints": CUTS, "observed": [0, 1, 3], **kwargs}
    with fg.Model("bad"):
        n = fg.plate("n", 3)
        x = fg.gaussian("x", plates=[n])
        with pytest.raises(fg.ModelError, match=match) as err:
            build("rating", x, **kwargs)
        assert "'rating'" in str(err.value)


def test_ordinal_balance_demo_small():
    """On the balance scale the log-scale models, where the tipping rule is linear, predict held-out rows best."""
    import importlib

    out = importlib.import_module("demos.ordinal_balance").main(small=True)
    res, scores = out["results"], out["scores"]
    assert all(r.converged for r in res.values())
    assert scores["probit_log"]["lpd"] > scores["logistic_raw"]["lpd"]
    assert scores["logistic_log"]["accuracy"] > 0.9 and scores["probit_log"]["accuracy"] > 0.9
    assert out["comparison"].best() in res
