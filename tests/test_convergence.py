"""No run ends silently unconverged or in a trap: adaptive backtracking under NCVMP, ConvergenceWarning,
data-scaled starts of the canned regressions, and the default algorithm of ``fg.infer``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import factorgraph as fg
from factorgraph import models


def _logreg(X, y, method="quadrature"):
    with fg.Model("logreg") as m:
        n = fg.plate("n", X.shape[0])
        w = fg.mv_gaussian("w", mean=0.0, precision=1.0, dim=X.shape[1])
        fg.bernoulli_logit("y", logit=fg.inner(X, w, plates=[n]), observed=y, method=method)
    return m


def _logreg_ard(X, y):
    with fg.Model("logreg-ard") as m:
        n, d = fg.plate("n", X.shape[0]), fg.plate("d", X.shape[1])
        alpha = fg.gamma("alpha", shape=1.0, rate=1.0, plates=[d])
        w = fg.mv_gaussian("w", mean=0.0, precision=alpha, dim=X.shape[1])
        fg.bernoulli_logit("y", logit=fg.inner(X, w, plates=[n]), observed=y, method="quadrature")
    return m


def _monotone(trace):
    return np.all(np.diff(trace) >= -1e-9 * np.maximum(1.0, np.abs(trace[1:])))


def _convergence_warnings(caught):
    return [str(w.message) for w in caught if issubclass(w.category, fg.ConvergenceWarning)]


# ---------------------------------------------------------------------------------- item: oscillation
def test_convergence_warning_is_public():
    assert issubclass(fg.ConvergenceWarning, UserWarning)
    assert "ConvergenceWarning" in fg.__all__
    with pytest.raises(fg.ModelError, match="backtracking"):
        fg.NCVMP(backtracking="sometimes")
    assert fg.NCVMP().backtracking == "adaptive"
    assert fg.NCVMP(backtracking=np.bool_(True)).backtracking is True


def test_ncvmp_two_cycle_logistic_d500_recovers_and_warns():
    """D = 500 weights, N = 20 rows: plain NCVMP alternates between two ELBOs for ever; it warns, naming w and
    the oscillation.  The default (adaptive backtracking) converges, monotonically, to the fixed point that
    strict backtracking reaches, far above both ELBOs of the cycle."""
    rng = np.random.default_rng(0)
    N, D = 20, 500
    X = rng.normal(size=(N, D))
    y = rng.random(N) < 1 / (1 + np.exp(-X @ rng.normal(size=D)))
    with pytest.warns(fg.ConvergenceWarning, match=r"'w'.*the ELBO (oscillates|alternates)") as caught:
        plain = fg.infer(_logreg(X, y), algorithm=fg.NCVMP(backtracking=False), max_iter=40)
    tr = plain.elbo_trace
    assert not plain.converged
    assert np.max(np.abs(np.diff(tr[-6:]))) > 50  # swinging by ~100 nats a sweep
    assert plain.warnings[-1] == _convergence_warnings(caught)[-1]
    with warnings.catch_warnings():
        warnings.simplefilter("error", fg.ConvergenceWarning)  # a converged run must not warn
        default = fg.infer(_logreg(X, y), max_iter=300)
    strict = fg.infer(_logreg(X, y), algorithm=fg.NCVMP(backtracking=True), max_iter=300)
    assert default.algorithm == "ncvmp" and default.converged and not default.warnings
    assert _monotone(default.elbo_trace)
    assert any("backtracking raised damping" in n for n in default.notes)
    assert default.elbo == pytest.approx(strict.elbo, abs=1e-6)
    assert default.elbo > tr[-4:].max() + 5


def _scaled_softmax_data():
    """Three classes, four un-centred inputs (means ≈ 5), then scaled by 100."""
    rng = np.random.default_rng(1)
    N, D, K = 60, 4, 3
    labels = rng.integers(0, K, N)
    X = (5 + rng.normal(size=(K, D)))[labels] + 0.5 * rng.normal(size=(N, D))
    return 1e2 * X, labels, K


def test_softmax_scaled_inputs_reaches_backtracking_elbo():
    """Inputs ×100: plain NCVMP swings wildly (to the end, every other sweep between about −70 and −1e5 or
    lower: where it stops depends on rounding in a chaotic iteration); the default NCVMP never lets the ELBO fall,
    ends where strict backtracking does, and, not converged within max_iter, says so naming W."""
    X, labels, K = _scaled_softmax_data()
    with pytest.warns(fg.ConvergenceWarning):
        plain = models.softmax_regression(X, labels, K, algorithm=fg.NCVMP(backtracking=False), max_iter=300)
    swings = np.diff(plain.elbo_trace[-10:])
    assert np.min(swings) < -1e4 and np.max(swings) > 1e4
    with pytest.warns(fg.ConvergenceWarning, match=r"not settled.*'W'") as caught:
        default = models.softmax_regression(X, labels, K, max_iter=300)
    strict = models.softmax_regression(X, labels, K, algorithm=fg.NCVMP(backtracking=True), max_iter=300)
    assert _monotone(default.elbo_trace)
    assert default.elbo >= strict.elbo - 0.5
    assert default.elbo > plain.elbo_trace.max() + 10
    assert not default.converged and default.warnings[-1] == _convergence_warnings(caught)[-1]
    assert "standardis" in default.warnings[-1]  # the hint: these inputs are far from unit scale


# ---------------------------------------------------------------------------------- item: every unconverged run warns
def _conjugate():
    rng = np.random.default_rng(3)
    with fg.Model("gauss") as m:
        n = fg.plate("n", 30)
        mu = fg.gaussian("mu", mean=0.0, precision=1e-2)
        tau = fg.gamma("tau", shape=1.0, rate=1.0)
        fg.gaussian("x", mean=mu, precision=tau, plates=[n], observed=rng.normal(3.0, 2.0, 30))
    return m


def _taylor_softmax():
    rng = np.random.default_rng(4)
    N, D, K = 80, 3, 3
    X = 30 * rng.normal(size=(N, D))
    lab = rng.integers(0, K, N)
    with fg.Model("taylor") as m:
        n, k = fg.plate("n", N), fg.plate("k", K)
        W = fg.mv_gaussian("W", mean=0.0, precision=1.0, plates=[k], dim=D)
        fg.categorical_softmax("y", logits=fg.inner(X, W, plates=[n]), over=k, observed=lab, method="taylor")
    return m


@pytest.mark.parametrize("case", ["vmp_max_iter", "ncvmp_max_iter", "callback", "plain_ncvmp", "strict", "handler"])
def test_unconverged_always_warns(case):
    """Whatever stops a run early, the result carries a ConvergenceWarning naming a variable, and the same
    text is in Result.warnings; a converged run carries none."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(60, 3))
    y = rng.random(60) < 1 / (1 + np.exp(-X @ [2.0, -1.0, 0.5]))
    run = {
        "vmp_max_iter": lambda: fg.infer(_conjugate(), max_iter=2),
        "ncvmp_max_iter": lambda: fg.infer(_logreg(X, y), max_iter=2),
        "callback": lambda: fg.infer(_conjugate(), callbacks=[lambda it, L, eng: it == 3]),
        "plain_ncvmp": lambda: fg.infer(_logreg(1e3 * X, X @ [2.0, -1.0, 0.5] > 0),
                                        algorithm=fg.NCVMP(backtracking=False), max_iter=40),
        "strict": lambda: fg.infer(_taylor_softmax(), algorithm=fg.NCVMP(backtracking=True), max_iter=400),
        "handler": lambda: fg.infer(_logreg_ard(X, y), handlers={"w": fg.Laplace()}, max_iter=2),
    }[case]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = run()
    texts = _convergence_warnings(caught)
    assert not r.converged
    assert texts, f"{case}: unconverged without a ConvergenceWarning"
    assert len(texts) == len([w for w in r.warnings if "not converged" in w or "did not converge" in w])
    assert all(t in r.warnings for t in texts)
    assert all(any(f"'{v}'" in t for v in r.posteriors) for t in texts)  # names a variable
    with warnings.catch_warnings():
        warnings.simplefilter("error", fg.ConvergenceWarning)
        ok = fg.infer(_conjugate())
    assert ok.converged and not ok.warnings


def test_strict_backtracking_on_an_approximation_reports_the_damped_step():
    """The Taylor softmax 'bound' is an approximation, not a bound: its fixed point need not maximise it, so
    strict backtracking drives the damping towards 1 and the run crawls.  The warning reports the full
    (undamped) step, not the vanishing damped one; adaptive backtracking leaves such factors alone."""
    with pytest.warns(fg.ConvergenceWarning, match=r"divided by 1 − α for damping α up to 0\.99") as caught:
        r = fg.infer(_taylor_softmax(), algorithm=fg.NCVMP(backtracking=True), max_iter=200)
    assert not r.converged
    step = float(_convergence_warnings(caught)[-1].split("'W' (")[1].split(")")[0])
    assert step > 1e-6
    adaptive = fg.infer(_taylor_softmax(), algorithm=fg.NCVMP(damping=0.5), max_iter=400)
    assert not any("backtracking raised" in n for n in adaptive.notes)


def test_fixed_sweep_run_without_stopping_rule_converges_when_settled():
    """tol = param_tol = None: the run is max_iter sweeps; settled at the end means converged, no warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", fg.ConvergenceWarning)
        r = fg.infer(_conjugate(), max_iter=200, tol=None)
    assert r.n_iter == 200 and r.converged
    with pytest.warns(fg.ConvergenceWarning, match="'mu'|'tau'"):
        short = fg.infer(_conjugate(), max_iter=2, tol=None)
    assert not short.converged


def test_callback_can_declare_convergence():
    r = fg.infer(_conjugate(), tol=None, callbacks=[lambda it, L, eng: "converged" if it == 4 else None])
    assert r.n_iter == 4 and r.converged and not r.warnings


# ---------------------------------------------------------------------------------- item: the w ≈ 0 trap
def _linear_data():
    rng = np.random.default_rng(0)
    N, D = 100, 5
    X = rng.normal(size=(N, D))
    w = rng.normal(size=D)
    return X, X @ w + 0.1 * rng.normal(size=N), w


@pytest.mark.parametrize("scale", [1e-3, 1e-6])
@pytest.mark.parametrize("ard", [False, True])
def test_linear_regression_tiny_scale_escapes_w0_trap(scale, ard):
    """X·1e-3 or X·1e-6: the reference start (α at its prior mean) stops at w ≈ 0 with a bound ~300 nats
    lower; the default finds the fit of the unscaled data (w scaled by 1/scale)."""
    X, y, _ = _linear_data()
    unscaled = models.linear_regression(X, y, ard=ard)
    ref = models.linear_regression(scale * X, y, ard=ard, init="reference")
    assert np.max(np.abs(ref.posterior("w").mean() * scale)) < 1e-2  # the trap, kept reachable
    r = models.linear_regression(scale * X, y, ard=ard)
    np.testing.assert_allclose(r.posterior("w").mean() * scale, unscaled.posterior("w").mean(), rtol=1e-3, atol=1e-4)
    assert r.elbo > ref.elbo + 200
    assert r.elbo == pytest.approx(unscaled.elbo, abs=2.0)  # only the Gamma prior on α is not scale-free
    assert any("data's scale" in n for n in r.notes)
    data = models.linear_regression(scale * X, y, ard=ard, init="data")
    assert data.elbo == r.elbo


def test_linear_regression_auto_start_is_the_reference_on_standardised_inputs():
    X, y, _ = _linear_data()
    Xs = (X - X.mean(0)) / np.sqrt(np.mean((X - X.mean(0)) ** 2))  # unit mean square overall
    a = models.linear_regression(Xs, y)
    b = models.linear_regression(Xs, y, init="reference")
    assert a.elbo == b.elbo and a.n_iter == b.n_iter
    with pytest.raises(fg.ModelError, match="init"):
        models.linear_regression(X, y, init="prior")


@pytest.mark.parametrize("method", ["quadratic", "quadrature"])
def test_logistic_regression_tiny_scale_predicts(method):
    """X·1e-3: the reference start predicts ½ everywhere; the default predicts as on the unscaled inputs."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3))
    y = rng.random(200) < 1 / (1 + np.exp(-X @ np.array([2.0, -1.5, 1.0])))
    p_unscaled = models.logistic_predictive(models.logistic_regression(X, y, method=method), X)
    ref = models.logistic_regression(1e-3 * X, y, method=method, init="reference")
    assert np.allclose(models.logistic_predictive(ref, 1e-3 * X), 0.5, atol=1e-2)
    r = models.logistic_regression(1e-3 * X, y, method=method)
    p = models.logistic_predictive(r, 1e-3 * X)
    np.testing.assert_allclose(p, p_unscaled, atol=5e-3)
    assert np.mean((p > 0.5) == y) > 0.75
    assert r.elbo > ref.elbo + 20


# ---------------------------------------------------------------------------------- item: the default algorithm
def test_default_algorithm_for_bernoulli_logit():
    """fg.infer(m) on a bernoulli_logit model runs NCVMP, says so, and equals the explicit call; a model VMP can
    run (conjugate, or the Jaakkola–Jordan bound) stays under VMP; asked for VMP on a non-conjugate factor,
    the error names the fix."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(50, 3))
    y = rng.random(50) < 1 / (1 + np.exp(-X @ [1.0, -1.0, 0.5]))
    r = fg.infer(_logreg(X, y))
    assert r.algorithm == "ncvmp" and r.converged
    assert any("NCVMP" in n and "BernoulliLogit" in n for n in r.notes)
    explicit = fg.infer(_logreg(X, y), algorithm=fg.NCVMP())
    assert r.elbo == explicit.elbo
    assert fg.infer(_logreg(X, y, "quadratic")).algorithm == "vmp"
    assert fg.infer(_conjugate()).algorithm == "vmp"
    # a handler that claims the non-conjugate factor leaves a conjugate graph: VMP
    assert fg.infer(_logreg(X, y), handlers={"w": fg.Laplace()}).algorithm == "vmp"
    with pytest.raises(fg.ModelError, match=r"use fg\.NCVMP\(\)"):
        fg.infer(_logreg(X, y), algorithm=fg.VMP())


def test_default_algorithm_for_sites_and_probit():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 2))
    with fg.Model("robust") as m:
        n = fg.plate("n", 40)
        w = fg.mv_gaussian("w", mean=0.0, precision=1.0, dim=2)
        fg.student_t_site("y", fg.inner(X, w, plates=[n]), location=X @ [1.0, 2.0], scale=1.0, dof=4.0)
    r = fg.infer(m, max_iter=500)
    assert r.algorithm == "ncvmp" and r.converged
    np.testing.assert_allclose(r.posterior("w").mean(), [1.0, 2.0], atol=0.3)
    with fg.Model("probit") as m2:
        n = fg.plate("n", 40)
        w = fg.mv_gaussian("w", mean=0.0, precision=1.0, dim=2)
        fg.probit("y", fg.inner(X, w, plates=[n]), observed=X @ [1.0, 2.0] > 0)
    assert fg.infer(m2, max_iter=500).algorithm == "ncvmp"
