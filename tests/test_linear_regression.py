"""``models.linear_regression`` reproduces Drugowitsch's VBLinLogit exactly (Drugowitsch 2014, §2).

Checked against the author's own MATLAB code run under GNU Octave (golden outputs stored in
``tests/reference/drugowitsch_octave_golden.json``) and against the independent numpy oracle in
``tests/reference/drugowitsch.py`` on further random problems.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from distributions import GaussianGamma
from factorgraph import models

from .reference.drugowitsch import vb_linear_fit, vb_linear_fit_ard, vb_linear_pred

GOLDEN = json.loads((Path(__file__).parent / "reference" / "drugowitsch_octave_golden.json").read_text())
LIN_CASES = [(c, fit) for c in GOLDEN["cases"] if c["kind"] == "lin" for fit in c["fits"]]


@pytest.mark.parametrize(("case", "fit"), LIN_CASES, ids=[f"{c['name']}-{f}" for c, f in LIN_CASES])
def test_matches_author_code(case, fit):
    X, y = np.array(case["X"]), np.array(case["y"]).ravel()
    priors = dict(zip(("a0", "b0", "c0", "d0"), case["priors"], strict=True)) if case["priors"] else {}
    gold = case["fits"][fit]
    r = models.linear_regression(X, y, ard=fit.endswith("ard"), init="reference", **priors)
    q = r.posterior("w")
    assert isinstance(q, GaussianGamma)
    assert r.n_iter == gold["n_iter"]
    rel = dict(rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(q.mean(), np.ravel(gold["w"]), **rel)
    np.testing.assert_allclose(np.diag(q.scale_matrix), np.ravel(gold["V_diag"]), **rel)
    if "V" in gold:
        np.testing.assert_allclose(q.scale_matrix, np.array(gold["V"]), **rel)
    assert float(q.shape) == pytest.approx(gold["an"], rel=1e-12)
    assert float(q.rate) == pytest.approx(gold["bn"], rel=1e-8)
    np.testing.assert_allclose(r.posterior("alpha").mean(), np.ravel(gold["E_a"]), rtol=1e-7)
    assert r.elbo == pytest.approx(gold["L"], rel=1e-9)
    pred = models.linear_predictive(r, X)
    np.testing.assert_allclose(pred.mean, np.ravel(gold["pred_mu"]), **rel)
    np.testing.assert_allclose(pred.precision, np.ravel(gold["pred_lambda"]), rtol=1e-8)
    assert pred.dof == pytest.approx(2 * gold["an"])


@pytest.mark.parametrize("ard", [False, True])
@pytest.mark.parametrize(("N", "D"), [(100, 4), (150, 30), (20, 35)])
def test_matches_reference_oracle(N, D, ard):
    rng = np.random.default_rng(N + D)
    X = np.c_[np.ones(N), rng.normal(size=(N, D - 1))]
    y = X @ (rng.normal(size=D) * (rng.random(D) < 0.4)) + rng.normal(size=N)
    ref = (vb_linear_fit_ard if ard else vb_linear_fit)(X, y)
    r = models.linear_regression(X, y, ard=ard, init="reference")
    q = r.posterior("w")
    assert r.n_iter == ref.n_iter
    np.testing.assert_allclose(q.mean(), ref.w, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(q.scale_matrix, ref.V, rtol=1e-8, atol=1e-12)
    assert r.elbo == pytest.approx(ref.L, rel=1e-10)
    mu, lam, nu = vb_linear_pred(X[:7], ref.w, ref.V, ref.an, ref.bn)
    pred = models.linear_predictive(r, X[:7])
    np.testing.assert_allclose(pred.mean, mu, rtol=1e-8)
    np.testing.assert_allclose(pred.precision, lam, rtol=1e-8)
    assert pred.dof == pytest.approx(nu)


def test_tolerance_option_runs_to_the_fixed_point():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 5))
    y = X @ np.arange(5.0) + rng.normal(size=60)
    r_seed = models.linear_regression(X, y, ard=True)
    r_tol = models.linear_regression(X, y, ard=True, tol=1e-14, max_iter=5000)
    assert r_tol.converged
    assert r_tol.elbo >= r_seed.elbo - 1e-9
    assert np.all(np.diff(r_tol.elbo_trace) >= -1e-9 * np.abs(r_tol.elbo_trace[1:]))


def test_predictive_density_integrates_to_one():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 3))
    y = X @ np.ones(3) + rng.normal(size=30)
    pred = models.linear_predictive(models.linear_regression(X, y), X[:1])
    grid = np.linspace(pred.mean[0] - 60, pred.mean[0] + 60, 200001)
    mass = np.trapezoid(np.exp(pred.logpdf(grid[:, None]))[:, 0], grid)
    assert mass == pytest.approx(1.0, abs=1e-4)
