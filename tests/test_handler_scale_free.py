"""Handlers stop on scale-free tests: relative to the posterior's standard deviations and to the rounding level
of the objective, so a fit fails only when the optimisation fails, not because the problem is large or its
inputs are big numbers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import factorgraph as fg
from schedules.handlers import BlockTarget
from schedules.handlers.laplace import find_mode


def _regression(X, y):
    """y ~ N(Xβ, σ²), β ~ N(0, 10² I), σ ~ half-normal(10): the 'blr' regression of the posterior database."""
    N, D = X.shape
    with fg.Model("blr") as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", mean=0.0, covariance=100.0, dim=D)
        s = fg.half_normal("s", 10.0)
        fg.gaussian("y", mean=fg.inner(X, w, plates=[n]), sd=s, plates=[n], observed=y)
    return m


def _big_inputs(seed, N=100, D=5):
    """Inputs of size ~100 as the database's simulated regressions draw them: x ~ N(0, 100·(0.01 I)⁻¹),
    β = 1, unit noise; the posterior sd of β is ~1e-3 while log p̃'s terms are ~1e7 (they cancel)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D)) * np.sqrt(100.0 * 100.0)
    return X, X @ np.ones(D) + rng.normal(size=N)


def _scaled_columns(seed=3, N=300, D=100):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D)) * 100.0 * 10 ** rng.uniform(-1.0, 1.0, D)
    return X, X @ np.full(D, D**-0.5) + rng.normal(size=N)


@pytest.mark.parametrize("data", [_big_inputs(2), _big_inputs(3), _scaled_columns()],
                         ids=["inputs~100-a", "inputs~100-b", "D=100-scaled-columns"])
def test_laplace_fits_a_regression_with_big_inputs(data):
    """The Laplace fit of a Gaussian block is exact given q(σ), so it reaches the conjugate VMP fit's fixed
    point; each block refit starts at the previous mode, within rounding of the new one, where the values of
    log p̃ (terms of ~1e7 that cancel) cannot tell a step's gain from rounding error."""
    X, y = data
    plain = fg.infer(_regression(X, y))
    r = fg.infer(_regression(X, y), handlers={"w": fg.Laplace()})
    assert r.converged and plain.converged
    q, p = r.posterior("w"), plain.posterior("w")
    sd = np.sqrt(np.diag(p.cov()))
    assert np.max(np.abs(q.mean() - p.mean()) / sd) < 1e-6
    np.testing.assert_allclose(np.sqrt(np.diag(q.cov())), sd, rtol=1e-6)
    assert float(r.posterior("s").mean()) == pytest.approx(float(plain.posterior("s").mean()), rel=1e-6)


def test_mode_search_from_within_rounding_of_the_mode():
    """A quadratic log p̃ whose terms are ~1e7 at the mode, started 1e-6 posterior sd away: the values cannot
    resolve the remaining gain (~1e-12 nats), the Newton step on the gradient can; the mode is found to well
    within 1e-9 sd."""
    X, y = _big_inputs(2)
    lam = X.T @ X + 0.01 * np.eye(5)
    target = BlockTarget(X.T @ y, -0.5 * lam)
    mode = np.linalg.solve(lam, X.T @ y)
    sd = np.sqrt(np.diag(np.linalg.inv(lam)))
    for k in range(5):
        start = mode + 1e-6 * sd * np.random.default_rng(k).standard_normal(5)
        w, H, _ = find_mode(target, start)
        assert np.max(np.abs(w - mode) / sd) < 1e-9
        np.testing.assert_allclose(-H, lam, rtol=1e-12)


def _regression_and_labels(seed, scale, N=100, M=50, D=5):
    """The regression above with inputs of size ``scale`` (log p̃'s terms ~scale²·1e3, cancelling) and, on the
    same weights, M logistic labels, which the fixed-sample handlers sample (their objective is then known
    only to the rounding level of those terms)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D)) * scale
    y = X @ np.ones(D) + rng.normal(size=N)
    Z = rng.normal(size=(M, D))
    labels = rng.random(M) < 0.5
    with fg.Model("blr+logit") as m:
        n, k = fg.plate("n", N), fg.plate("k", M)
        w = fg.mv_gaussian("w", mean=0.0, covariance=100.0, dim=D)
        s = fg.half_normal("s", 10.0)
        fg.gaussian("y", mean=fg.inner(X, w, plates=[n]), sd=s, plates=[n], observed=y)
        fg.bernoulli_logit("c", logit=fg.inner(Z, w, plates=[k]), observed=labels, method="quadrature")
    return m


@pytest.mark.parametrize(("handler", "scale", "seed"), [(fg.MVI("lr"), 1e3, 1), (fg.VIDiag(), 1e3, 0),
                                                        (fg.MVI("eig"), 1e5, 0)], ids=["lr", "diag", "eig"])
def test_fixed_sample_vi_settles_at_the_rounding_level(handler, scale, seed):
    """L-BFGS stops where the gain it still expects (~1e-8 nats) is below the objective's rounding level (terms
    of 1e9 and more): the fit has converged, though its gradient (~1e-4 posterior sd) is above gtol.  The
    posterior, nearly Gaussian, is Laplace's to well within its sd."""
    r = fg.infer(_regression_and_labels(seed, scale), handlers={"w": handler})
    la = fg.infer(_regression_and_labels(seed, scale), handlers={"w": fg.Laplace()})
    assert r.converged and la.converged
    sd = np.sqrt(np.diag(la.posterior("w").cov()))
    assert np.max(np.abs(r.posterior("w").mean() - la.posterior("w").mean()) / sd) < 0.05


def test_bvi_peak_search_is_invariant_to_the_units():
    """BVI's L-BFGS judges its gradient across one sd of the current mixture: the same search on x and on
    x·10³ or x·10⁻³ (a correlated Gaussian log density) takes the same steps and ends at the same point in sd
    units (an absolute gradient test stopped the wide one at once and ran the narrow one to its iteration
    limit)."""
    from schedules.handlers.bvi_search import lbfgs

    rng = np.random.default_rng(0)
    A = rng.normal(size=(4, 4))
    P = A @ A.T + 4 * np.eye(4)  # precision in sd units
    z0 = rng.normal(size=4)
    runs = []
    for s in (1e-3, 1.0, 1e3):
        calls = [0]

        def fun(x, s=s, calls=calls):
            calls[0] += 1
            z = x / s
            return 0.5 * z @ P @ z, (P @ z) / s

        x, f, ok = lbfgs(fun, z0 * s, scale=np.full(4, s))
        runs.append((x / s, calls[0], ok))
    for z, n, ok in runs:
        assert ok and n == runs[1][1]
        np.testing.assert_allclose(z, runs[1][0], atol=1e-12)
        assert np.max(np.abs(P @ z)) <= 1e-7


def test_aikl_takes_gaussian_sites_in_closed_form():
    """AI-KL on a Gaussian block with inputs of size ~100: a Gaussian likelihood's expectation is closed-form
    under q's mean and covariance, like the prior's, so the bound has no lattice error (on a lattice its error
    grows with the site's curvature, here ~1e6) and equals the exact log evidence; q is the exact posterior."""
    from factors.gaussian import gaussian_point
    from schedules.handlers import AIKL, Site

    X, y = _big_inputs(2)
    N, D = X.shape
    tau = 1.0
    site = Site(X, gaussian_point, {"out": (y, y * y), "precision": (np.full(N, tau), np.zeros(N))}, {},
                name="y")
    lam0 = np.eye(D) / 100.0
    target = BlockTarget(np.zeros(D), -0.5 * lam0, [site])
    fit = AIKL().fit(target, np.zeros(D))
    lam = lam0 + tau * X.T @ X
    mean = np.linalg.solve(lam, tau * X.T @ y)
    cov = np.linalg.inv(lam)
    log_z = (-0.5 * N * np.log(2 * np.pi / tau) - 0.5 * tau * y @ y + 0.5 * mean @ lam @ mean
             - 0.5 * np.linalg.slogdet(np.eye(D) + tau * 100.0 * X.T @ X)[1])
    assert fit.info["lattice_error"] == 0.0
    assert fit.log_evidence == pytest.approx(log_z, abs=1e-6)
    sd = np.sqrt(np.diag(cov))
    assert np.max(np.abs(fit.q.mean() - mean) / sd) < 1e-6
    np.testing.assert_allclose(np.sqrt(np.diag(fit.q.cov())), sd, rtol=1e-6)


@pytest.mark.parametrize("handler", [fg.Laplace(learn="prior_precision"), fg.MVI("lr", learn="prior_precision")],
                         ids=["laplace", "mvi"])
def test_hyperparameter_search_with_big_inputs(handler):
    """The evidence search over the prior precision recomputes the mode at each trial value from the last one
    (the case of the warm-started block refits) and reports whether it converged: here it does, with no
    warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", fg.ConvergenceWarning)
        r = fg.infer(_regression(*_big_inputs(2)), handlers={"w": handler})
    assert r.converged and not r.warnings
    assert r.hyperparameters("w")["prior_precision"] > 0
