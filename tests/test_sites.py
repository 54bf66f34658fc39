"""Site potentials: evidence against numerical integration, posteriors, clipping of improper messages."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

import factorgraph as fg
from factors.sites import CAUCHY_SITE, LAPLACE_SITE, PROBIT, STUDENT_T_SITE

LOGF = {
    "LaplaceSite": (LAPLACE_SITE, {"scale": 0.4}, lambda u: stats.laplace.logpdf(u, scale=0.4)),
    "CauchySite": (CAUCHY_SITE, {"scale": 0.3}, lambda u: stats.cauchy.logpdf(u, scale=0.3)),
    "StudentTSite": (STUDENT_T_SITE, {"scale": 0.5, "dof": 3.0}, lambda u: stats.t.logpdf(u, 3.0, scale=0.5)),
}


@pytest.mark.parametrize("name", sorted(LOGF))
@pytest.mark.parametrize(("m", "v"), [(0.3, 0.05), (-1.0, 1.0), (2.0, 4.0)])
def test_site_evidence_matches_integration(name, m, v):
    ft, params, logf = LOGF[name]
    loc = 0.5
    moments = {"x": (np.array(m), np.array(m * m + v)), "out": (np.array(loc), np.array(loc * loc))}
    evidence, _ = ft.get_evidence()
    sd = np.sqrt(v)
    truth = integrate.quad(lambda x: stats.norm.pdf(x, m, sd) * logf(x - loc), m - 30 * sd, m + 30 * sd,
                           points=[loc], limit=400, epsabs=1e-12)[0]
    tol = 1e-10 if name == "LaplaceSite" else 1e-8
    assert float(evidence(moments, {**params, "state": {}})) == pytest.approx(truth, abs=tol)


def test_probit_evidence_matches_integration():
    moments = {"x": (np.array(0.4), np.array(0.16 + 0.8)), "out": (np.array(-1.0), np.array(1.0))}
    evidence, _ = PROBIT.get_evidence()
    truth = integrate.quad(lambda x: stats.norm.pdf(x, 0.4, np.sqrt(0.8)) * stats.norm.logcdf(-x), -12, 12)[0]
    assert float(evidence(moments, {"state": {}})) == pytest.approx(truth, abs=1e-10)


def test_laplace_robust_regression_converges_and_resists_outliers():
    rng = np.random.default_rng(0)
    N, D = 60, 2
    X = np.c_[np.ones(N), rng.normal(size=N)]
    y = X @ np.array([1.0, 2.0]) + 0.1 * rng.normal(size=N)
    y[:5] += 20.0  # gross outliers
    with fg.Model("robust") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=0.0, precision=1e-2, dim=D)
        fg.laplace_site("y", x=fg.inner(X, w, plates=[n]), location=y, scale=0.16)
    r = fg.infer(m, algorithm=fg.NCVMP(backtracking=True), max_iter=2000)  # undamped, it diverges
    assert r.converged and np.all(np.isfinite(r.elbo_trace))
    assert np.all(np.diff(r.elbo_trace) >= -1e-9 * np.abs(r.elbo_trace[1:]))
    np.testing.assert_allclose(r.posterior("w").mean(), [1.0, 2.0], atol=0.1)


def test_non_log_concave_site_is_clipped_and_reported():
    with fg.Model("cauchy") as m:
        x = fg.gaussian("x", 0.0, precision=1.0)
        fg.cauchy_site("y", x=x, location=3.0, scale=0.3)
    r = fg.infer(m, algorithm=fg.NCVMP(damping=0.3), max_iter=500)
    assert np.all(np.isfinite(r.elbo_trace))
    assert any("clipped" in note for note in r.notes)
    assert r.posterior("x").var() <= 1.0 + 1e-12  # never worse than the prior


def test_probit_classifier():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(150, 2))
    labels = X @ np.array([1.5, -1.0]) + 0.3 * rng.normal(size=150) > 0
    with fg.Model("probit") as m:
        n = fg.plate("n", 150)
        w = fg.mv_gaussian("w", mean=0.0, precision=1.0, dim=2)
        fg.probit("y", x=fg.inner(X, w, plates=[n]), observed=labels)
    r = fg.infer(m, algorithm=fg.NCVMP(), max_iter=300)
    assert r.converged
    w = r.posterior("w").mean()
    assert w[0] > 0 > w[1]
    assert np.mean((X @ w > 0) == labels) > 0.9
