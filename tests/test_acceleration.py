"""``accelerate=True``: Anderson extrapolation of the sweeps, guarded by the ELBO (``schedules.acceleration``).

A mean-field regression on an uncentred covariate (log earnings on heights near 66 inches) crawls along
the ridge of intercept and slope: plain VMP contracts the error by ρ² ≈ 1 − 16/66² per sweep.  A
hierarchical model with a half-normal scale per group needs NCVMP under heavy damping and crawls too.
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
import pytest

import factorgraph as fg
from schedules.acceleration import Acceleration
from schedules.compile import compile_model
from schedules.engine import Engine, _iterate

PRIOR_SD = 10.0  # of the intercept a and the slope b
SHAPE0, RATE0 = 1.0, 1.0  # the Gamma prior of the noise precision


def _earnings(N=1000, seed=0):
    rng = np.random.default_rng(seed)
    height = rng.normal(66.0, 4.0, N)
    log_earn = 5.8 + 0.06 * height + rng.normal(0.0, 0.9, N)
    return height, log_earn


def _earnings_model(x, y):
    with fg.Model("earnings") as m:
        n = fg.plate("n", len(y))
        a = fg.gaussian("a", 0.0, sd=PRIOR_SD)
        b = fg.gaussian("b", 0.0, sd=PRIOR_SD)
        tau = fg.gamma("tau", SHAPE0, RATE0)
        fg.gaussian("y", a + b * x, precision=tau, plates=[n], observed=y)
    return m


def _mean_field_fixed_point(x, y):
    """The fixed point of coordinate ascent for q(a) q(b) q(τ), solved exactly: given E[τ], the means of
    q(a) = N(m_a, 1/λ_a) and q(b) = N(m_b, 1/λ_b) solve the two stationarity equations jointly,

        λ_a m_a = E[τ](Σy − m_b Σx),   λ_b m_b = E[τ](Σxy − m_a Σx),
        λ_a = 1/s₀² + E[τ] N,          λ_b = 1/s₀² + E[τ] Σx²,

    and q(τ) = Gam(a₀ + N/2, b₀ + ½ Σ E[(y − a − bx)²]); the one-dimensional iteration over E[τ] is solved
    to round-off (it contracts fast: τ is nearly independent of the means)."""
    N, sx, sxx, sy, sxy = len(y), x.sum(), (x * x).sum(), y.sum(), (x * y).sum()
    p0 = 1.0 / PRIOR_SD**2
    shape = SHAPE0 + N / 2
    et = 1.0
    for _ in range(200):
        la, lb = p0 + et * N, p0 + et * sxx
        ma, mb = np.linalg.solve([[la, et * sx], [et * sx, lb]], [et * sy, et * sxy])
        rate = RATE0 + 0.5 * (np.sum((y - ma - mb * x) ** 2) + N / la + sxx / lb)
        new = shape / rate
        if abs(new - et) <= 1e-15 * et:
            break
        et = new
    return {"a": (ma, 1 / la), "b": (mb, 1 / lb), "tau": (shape, rate)}


def _check_fixed_point(r, exact, rtol):
    for k in ("a", "b"):
        q = r.posteriors[k]
        np.testing.assert_allclose([float(q.mean()), float(q.var())], exact[k], rtol=rtol, err_msg=k)
    q = r.posteriors["tau"]
    np.testing.assert_allclose([float(q.shape), float(q.rate)], exact["tau"], rtol=rtol, err_msg="tau")


def _monotone(trace):
    return bool(np.all(np.diff(trace) >= -1e-12 * np.abs(trace[1:])))


def test_uncentred_regression_converges_in_tens_of_sweeps():
    x, y = _earnings()
    exact = _mean_field_fixed_point(x, y)
    r = fg.infer(_earnings_model(x, y), fg.VMP(accelerate=True), max_iter=50, tol=1e-14, progress=False)
    assert r.converged and r.n_iter <= 50 and not r.warnings
    _check_fixed_point(r, exact, 1e-8)
    assert _monotone(r.elbo_trace)
    note = next(n for n in r.notes if n.startswith("acceleration"))
    assert "extrapolations tried" in note and "accepted" in note and "rejected" in note
    # the same budget without acceleration: far from converged, the mean of a several posterior sd away
    with pytest.warns(fg.ConvergenceWarning, match="not converged"):
        plain = fg.infer(_earnings_model(x, y), fg.VMP(), max_iter=50, tol=1e-14, progress=False)
    assert not plain.converged and not any(n.startswith("acceleration") for n in plain.notes)
    sd_a = np.sqrt(exact["a"][1])
    assert abs(float(plain.posteriors["a"].mean()) - exact["a"][0]) > 10 * sd_a
    assert _monotone(plain.elbo_trace)


def test_uncentred_regression_default_options():
    """With the default options (at most 200 sweeps, tol = 1e-9, ``accelerate="auto"``) the fit converges in
    tens of sweeps: plain sweeps for 50, extrapolated from there.  Without acceleration it stops unconverged,
    dozens of posterior sd of q(a) short of the fixed point."""
    x, y = _earnings()
    exact = _mean_field_fixed_point(x, y)
    sd_a = np.sqrt(exact["a"][1])
    with pytest.warns(fg.ConvergenceWarning, match="max_iter reached: 200 sweeps"):
        plain = fg.infer(_earnings_model(x, y), fg.VMP(accelerate=False), progress=False)
    assert not plain.converged and abs(float(plain.posteriors["a"].mean()) - exact["a"][0]) > 10 * sd_a
    for algorithm in (None, fg.VMP(accelerate=True)):
        r = fg.infer(_earnings_model(x, y), algorithm, progress=False)
        assert r.converged and r.n_iter <= 80 and not r.warnings
        assert abs(float(r.posteriors["a"].mean()) - exact["a"][0]) < 0.5 * sd_a
    assert r.n_iter <= 50
    auto = fg.infer(_earnings_model(x, y), progress=False)
    assert any("from sweep 51, the run not having converged by then" in n for n in auto.notes)


def test_auto_acceleration_leaves_a_fit_that_converges_early_as_it_was():
    """``accelerate="auto"`` begins after 50 sweeps: a fit that converges before runs bit for bit as with
    ``accelerate=False``, and its notes say nothing of acceleration."""
    x, y = _earnings(N=200, seed=3)
    x = x - x.mean()  # centred: mean field converges in a few sweeps
    auto = fg.infer(_earnings_model(x, y), progress=False)
    off = fg.infer(_earnings_model(x, y), fg.VMP(accelerate=False), progress=False)
    assert auto.converged and auto.n_iter < 50
    np.testing.assert_array_equal(auto.elbo_trace, off.elbo_trace)
    for k in ("a", "b", "tau"):
        for a, b in zip(auto.posteriors[k].natural, off.posteriors[k].natural, strict=True):
            np.testing.assert_array_equal(a, b)
    assert not any("acceleration" in n for n in auto.notes)


@pytest.mark.slow
def test_uncentred_regression_same_fixed_point_as_a_long_plain_run():
    x, y = _earnings()
    exact = _mean_field_fixed_point(x, y)
    fast = fg.infer(_earnings_model(x, y), fg.VMP(accelerate=True), max_iter=50, tol=None, param_tol=1e-13,
                    progress=False)
    slow = fg.infer(_earnings_model(x, y), fg.VMP(accelerate=False), max_iter=20000, tol=None, param_tol=1e-13,
                    progress=False)
    assert fast.converged and slow.converged and slow.n_iter > 3000 and fast.n_iter <= 50
    for k in ("a", "b", "tau"):
        for s, f in zip(slow.posteriors[k].natural, fast.posteriors[k].natural, strict=True):
            np.testing.assert_allclose(f, s, rtol=1e-6, err_msg=k)
    _check_fixed_point(slow, exact, 1e-6)
    _check_fixed_point(fast, exact, 1e-9)


def _groups_model(G=50, R=3, seed=1):
    """y_gr ~ N(a_g, s_g²), a_g ~ N(μ, τ²), half-normal priors on τ and on every group's s_g."""
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(G), R)
    sd = rng.uniform(0.5, 3.0, G)
    y = rng.normal(size=G)[g] + sd[g] * rng.normal(size=G * R)
    with fg.Model("scale per group") as m:
        c, n = fg.plate("c", G), fg.plate("n", G * R)
        mu = fg.gaussian("mu", 0.0, sd=10.0)
        tau = fg.half_normal("tau", 2.0)
        a = fg.gaussian("a", mu, sd=tau, plates=[c])
        s = fg.half_normal("s", 2.0, plates=[c])
        fg.gaussian("y", a[g], sd=s[g], plates=[n], observed=y)
    return m


def test_scale_per_group_converges_in_far_fewer_sweeps():
    """Plain NCVMP needs about 1050 sweeps here (damping raised to 0.75 by backtracking); accelerated, under
    100.  The ELBO never falls, and the result is a fixed point: one more sweep moves nothing."""
    box = {}
    r = fg.infer(_groups_model(), fg.NCVMP(accelerate=True), max_iter=150, progress=False,
                 callbacks=[lambda it, elbo, eng: box.update(engine=eng)])
    assert r.algorithm == "ncvmp" and r.converged and r.n_iter <= 150 and not r.warnings
    assert _monotone(r.elbo_trace)
    note = next(n for n in r.notes if n.startswith("acceleration"))
    assert " 0 accepted" not in note
    eng = box["engine"]
    eng.max_change = 0.0
    for v in eng.c.order:
        eng.update(v)
    assert eng.max_change < 1e-7
    with pytest.warns(fg.ConvergenceWarning, match="not converged"):
        plain = fg.infer(_groups_model(), fg.NCVMP(accelerate=False), max_iter=150, progress=False)
    assert not plain.converged
    auto = fg.infer(_groups_model(), max_iter=150, progress=False)  # the default: extrapolated from sweep 51
    assert auto.algorithm == "ncvmp" and auto.converged and not auto.warnings


@pytest.mark.slow
def test_scale_per_group_same_fixed_point_as_a_long_plain_run():
    fast = fg.infer(_groups_model(), fg.NCVMP(accelerate=True), max_iter=300, progress=False)
    slow = fg.infer(_groups_model(), fg.NCVMP(accelerate=False), max_iter=5000, progress=False)
    assert fast.converged and slow.converged and slow.n_iter > 5 * fast.n_iter
    assert fast.elbo == pytest.approx(slow.elbo, rel=1e-10)
    for k in ("mu", "tau", "a", "s"):
        np.testing.assert_allclose(fast.posteriors[k].mean(), slow.posteriors[k].mean(), rtol=1e-5, err_msg=k)


def test_overshooting_extrapolation_is_rejected_and_counted():
    """Along the ridge the plain sweeps contract by ρ² ≈ 0.996: the distance left is ~270 times the last
    step.  An extrapolation that assumes a rate of 0.999 jumps ~1000 steps, past the fixed point by more than
    the distance it had to go, where the ELBO is lower: it is refused, counted, and the state is the plain
    sweep's."""
    x, y = _earnings()
    m = _earnings_model(x, y)
    c = compile_model(m, fg.VMP(accelerate=True))
    eng = Engine(c)
    eng.initialise({}, np.random.default_rng(0))

    def sweep():
        for v in c.order:
            eng.update(v)

    for _ in range(30):
        sweep()
    acc = Acceleration(c, eng.structured)
    acc.before_sweep(eng, None, True)  # no ELBO yet: only notes the start
    x0 = acc._flat(eng)
    sweep()
    f0 = acc._flat(eng)
    # the pairs of a map contracting at 0.999 along the last step: g₁ = 0.999 g₀
    acc.pairs = [(x0, f0), (f0, f0 + 0.999 * (f0 - x0))]
    acc._set(eng, acc.pairs[-1][1])
    elbo = eng.elbo()
    before = {k: tuple(np.copy(a) for a in eng.q[k].natural) for k in ("a", "b", "tau")}
    assert acc.before_sweep(eng, elbo, True) is None
    assert (acc.accepted, acc.rejected) == (0, 1)
    assert eng.elbo() == elbo
    for k, nat in before.items():
        for u, v in zip(eng.q[k].natural, nat, strict=True):
            np.testing.assert_array_equal(u, v)
    # the same pairs at the true rate are accepted: the guard refuses the overshoot, not the extrapolation
    rate = 1 - 16 / (66**2 + 16)
    acc.pairs = [(x0, f0), (f0, f0 + rate * (f0 - x0))]
    acc._set(eng, acc.pairs[-1][1])
    assert acc.before_sweep(eng, eng.elbo(), True) is not None
    assert (acc.accepted, acc.rejected) == (1, 1)
    assert "2 extrapolations tried, 1 accepted, 1 rejected" in acc.note()


def test_accelerate_option_is_checked_and_reported_when_off():
    with pytest.raises(fg.ModelError, match=r"VMP: accelerate must be True, False or 'auto', got 'yes'"):
        fg.VMP(accelerate="yes")
    with pytest.raises(fg.ModelError, match=r"NCVMP: accelerate must be True, False or 'auto'"):
        fg.NCVMP(accelerate=1)
    assert fg.VMP().accelerate == "auto" and fg.NCVMP().accelerate == "auto"
    assert fg.VMP(accelerate=np.True_).accelerate is True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        r = fg.infer(_groups_model(G=6, R=3), fg.NCVMP(backtracking=False, accelerate=True), max_iter=20,
                     progress=False)
    assert any(n.startswith("acceleration off: without backtracking") for n in r.notes)


class _Stay(Acceleration):
    """Proposes the current state itself: a kept proposal that changes nothing."""

    def _propose(self, eng, elbo):
        self.accepted += 1
        return eng.snapshot()


def _sweeps(accel, sweeps=12):
    c = compile_model(_groups_model(85, 1), fg.NCVMP(accelerate=True))
    eng = Engine(c)
    eng.initialise({}, np.random.default_rng(0))
    trace = []
    acc = accel(c, eng.structured) if accel else None
    _iterate(c, eng, trace, sweeps, None, None, [], SimpleNamespace(update=lambda elbo: None), False, [], acc)
    return trace, acc, eng


def test_sweep_that_falls_after_a_kept_proposal_undoes_it_first():
    """Under NCVMP a sweep may lower the ELBO.  From a kept proposal such a sweep undoes the proposal (counted as
    rejected) before backtracking raises any damping: with proposals that do not move, the run is the plain
    run, sweep for sweep, and every fall of the plain run is one undo."""
    plain, _, eng0 = _sweeps(None)
    trace, acc, eng = _sweeps(_Stay)
    assert eng0.raised  # the plain run's sweeps fell, and backtracking raised the damping
    assert acc.rejected >= 1 and acc.accepted >= acc.rejected
    np.testing.assert_array_equal(trace, plain)
    assert eng.raised == eng0.raised


def test_handled_block_is_not_accelerated():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(60, 3))
    y = rng.random(60) < 1 / (1 + np.exp(-X @ np.array([1.5, -1.0, 0.5])))
    with fg.Model("logistic-block") as m:
        n = fg.plate("n", 60)
        alpha = fg.gamma("alpha", 2.0, 1.0)
        w = fg.mv_gaussian("w", mean=0.0, precision=alpha, dim=3)
        fg.bernoulli_logit("y", logit=fg.inner(X, w, plates=[n]), observed=y)
    r = fg.infer(m, fg.NCVMP(accelerate=True), handlers={"w": fg.Laplace()}, progress=False)
    assert r.converged and any(n.startswith("acceleration off: the handled blocks") for n in r.notes)


def test_sharded_run_says_it_is_not_accelerated():
    da = pytest.importorskip("dask.array")
    import dask

    x, y = _earnings(N=200)
    with dask.config.set(scheduler="threads"), warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        r = fg.infer(_earnings_model(da.from_array(x, chunks=100), da.from_array(y, chunks=100)),
                     fg.VMP(accelerate=True), max_iter=5, progress=False)
    assert r.sharding["chunks"] == 2
    assert any(n.startswith("acceleration off: the local posteriors of a sharded run") for n in r.notes)
