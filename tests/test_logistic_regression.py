"""``models.logistic_regression`` (quadratic bound) reproduces Drugowitsch's vb_logit_fit(_ard) exactly.

Golden outputs: the author's MATLAB code run under GNU Octave (tests/reference/...golden.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from factorgraph import models

GOLDEN = json.loads((Path(__file__).parent / "reference" / "drugowitsch_octave_golden.json").read_text())
CASES = [(c, fit) for c in GOLDEN["cases"] if c["kind"] == "logit" for fit in ("vb_logit_fit", "vb_logit_fit_ard")]


@pytest.mark.parametrize(("case", "fit"), CASES, ids=[f"{c['name']}-{f}" for c, f in CASES])
def test_matches_author_code(case, fit):
    X, y = np.array(case["X"]), np.array(case["y"]).ravel()
    priors = dict(zip(("a0", "b0"), case["priors"], strict=True)) if case["priors"] else {}
    gold = case["fits"][fit]
    r = models.logistic_regression(X, y, ard=fit.endswith("ard"), init="reference", **priors)
    q = r.posterior("w")
    assert r.n_iter == gold["n_iter"]
    np.testing.assert_allclose(q.mean(), np.ravel(gold["w"]), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(q.cov(), np.array(gold["V"]), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(r.posterior("alpha").mean(), np.ravel(gold["E_a"]), rtol=1e-9)
    assert r.elbo == pytest.approx(gold["L"], rel=1e-10, abs=1e-10)
    np.testing.assert_allclose(models.logistic_predictive(r, X, method="bound"), np.ravel(gold["pred"]),
                               rtol=1e-9, atol=1e-12)


def test_labels_in_any_coding():
    case = CASES[0][0]
    X, y = np.array(case["X"]), np.array(case["y"]).ravel()
    r_pm = models.logistic_regression(X, y)
    r_01 = models.logistic_regression(X, (y + 1) / 2)
    r_b = models.logistic_regression(X, y > 0)
    assert r_pm.elbo == r_01.elbo == r_b.elbo


def test_quadrature_predictive_is_the_exact_expectation():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = rng.random(80) < 1 / (1 + np.exp(-X @ np.array([1.0, -2.0, 0.5])))
    r = models.logistic_regression(X, y, method="quadrature")
    q = r.posterior("w")
    p = models.logistic_predictive(r, X[:4])
    draws = q.sample(400_000, rng) @ X[:4].T
    np.testing.assert_allclose(p, np.mean(1 / (1 + np.exp(-draws)), axis=0), atol=3e-3)
    # the bound predictive is a lower bound on the exact one under the same q
    assert np.all(models.logistic_predictive(r, X[:4], method="bound") <= p + 1e-12)
