"""Tests of the numba kernels in factors.kernels (accuracy, derivatives, bound orderings, extremes)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.special as sps
from scipy import integrate, optimize

import factors.kernels as K

NOJIT = os.environ.get("NUMBA_DISABLE_JIT", "0") == "1"
REPO = Path(__file__).resolve().parents[1]

M_GRID = [-1000.0, -300.0, -30.0, -5.0, -1.0, -0.2, 0.0, 0.5, 3.0, 30.0, 300.0, 1000.0]
V_GRID = [1e-8, 1e-4, 7e-4, 3e-3, 0.1, 0.6, 0.7, 2.0, 10.0, 100.0, 1e4, 1e6]


# ----------------------------------------------------------------------------------------------------------
# reference: scipy quad of f(x) N(x; m, v) in log space around the integrand's mode
# ----------------------------------------------------------------------------------------------------------
def _log_softplus(x):
    sp = np.logaddexp(0.0, x)
    return x if x < -37.0 else math.log(sp)


def _log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


def _log_dsigmoid(x):
    return -np.logaddexp(0.0, x) - np.logaddexp(0.0, -x)


def _mode(kind, m, v):
    """Mode of f(x) N(x; m, v) from the monotone stationarity equation (all three f are log-concave)."""
    if kind == "softplus":

        def g(x):
            ratio = 1.0 if x < -37.0 else sps.expit(x) / np.logaddexp(0.0, x)
            return v * ratio - (x - m)

        lo, hi = m, m + v
    elif kind == "sigmoid":

        def g(x):
            return v * sps.expit(-x) - (x - m)

        lo, hi = m, m + v
    else:

        def g(x):
            return -v * math.tanh(0.5 * x) - (x - m)

        lo, hi = m - v, m + v
    if g(lo) <= 0.0:
        return lo
    if g(hi) >= 0.0:
        return hi
    return optimize.brentq(g, lo, hi, xtol=1e-14, rtol=1e-14)


def quad_log_expectation(kind, m, v):
    """log E[f(x)], x ~ N(m, v), by adaptive quadrature (f = softplus, sigmoid or σσ′).

    Integrates ``φ(z) f(m + √v z)`` over the standardised variable (so that the Gaussian factor is exact even
    when ``√v`` is below the spacing of doubles near ``m``), scaled by its value at the mode.
    """
    logf = {"softplus": _log_softplus, "sigmoid": _log_sigmoid, "dsigmoid": _log_dsigmoid}[kind]
    s = math.sqrt(v)
    zm = (_mode(kind, m, v) - m) / s

    def logint(z):
        return logf(m + s * z) - 0.5 * z * z

    c = logint(zm)
    lo, hi = zm - 40.0, zm + 40.0
    pts = {zm + d for d in (-20, -10, -5, -3, -2, -1, -0.5, 0.5, 1, 2, 3, 5, 10, 20)}
    pts |= {zm} | {(x - m) / s for x in (0.0, -1.0, 1.0, -4.0, 4.0, -12.0, 12.0, -40.0, 40.0)}
    pts = sorted(p for p in pts if lo < p < hi)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        val, _ = integrate.quad(
            lambda z: math.exp(logint(z) - c), lo, hi, points=pts, epsabs=0.0, epsrel=1e-13, limit=2000
        )
    return math.log(val) + c - 0.5 * math.log(2.0 * math.pi)


# ----------------------------------------------------------------------------------------------------------
# finite differences
# ----------------------------------------------------------------------------------------------------------
def _fd(f, x, h, lower=None):
    """Central difference, or a 3-point one-sided one when x − h would cross ``lower``."""
    if lower is not None and x - h < lower:
        return (-3.0 * f(x) + 4.0 * f(x + h) - f(x + 2.0 * h)) / (2.0 * h)
    return (f(x + h) - f(x - h)) / (2.0 * h)


def _steps(m, v):
    return 1e-5 * max(1.0, abs(m)), 1e-5 * max(v, 1e-3)


def _check_fd_scalar(kernel, cases, rtol=2e-5, atol=1e-8):
    for m, v in cases:
        out = kernel(m, v)
        hm, hv = _steps(m, v)
        dm = _fd(lambda x, v=v: float(kernel(x, v)[0]), m, hm)
        dv = _fd(lambda x, m=m: float(kernel(m, x)[0]), v, hv, lower=0.0)
        assert float(out[1]) == pytest.approx(dm, rel=rtol, abs=atol), (kernel.__name__, m, v, "d/dm")
        assert float(out[2]) == pytest.approx(dv, rel=rtol, abs=atol), (kernel.__name__, m, v, "d/dv")


def _check_fd_rows(kernel, m, v, rtol=2e-5, atol=1e-8):
    out = kernel(m, v)
    for i in range(m.shape[0]):
        for j in range(m.shape[1]):
            hm, hv = _steps(m[i, j], v[i, j])

            def fm(x, i=i, j=j):
                mm = m[i].copy()
                mm[j] = x
                return float(kernel(mm, v[i])[0])

            def fv(x, i=i, j=j):
                vv = v[i].copy()
                vv[j] = x
                return float(kernel(m[i], vv)[0])

            dm = _fd(fm, m[i, j], hm)
            dv = _fd(fv, v[i, j], hv, lower=0.0)
            assert out[1][i, j] == pytest.approx(dm, rel=rtol, abs=atol), (kernel.__name__, i, j, "d/dm")
            assert out[2][i, j] == pytest.approx(dv, rel=rtol, abs=atol), (kernel.__name__, i, j, "d/dv")


SCALAR_FD_CASES = [
    (0.0, 1.0),
    (-2.0, 0.3),
    (1.5, 0.65),
    (4.0, 5.0),
    (-30.0, 2.0),
    (25.0, 80.0),
    (-0.5, 1e-6),
    (0.3, 1e3),
    (-200.0, 1e4),
]


def _random_q(rng, n, k, u=1.0, vscale=1.0):
    m = rng.normal(0.0, math.sqrt(u), size=(n, k))
    v = vscale * rng.gamma(2.0, 0.5, size=(n, k))
    return m, v


# ----------------------------------------------------------------------------------------------------------
# core tests (also run with NUMBA_DISABLE_JIT=1 in a subprocess)
# ----------------------------------------------------------------------------------------------------------
def test_core_special_functions():
    x = np.concatenate([np.linspace(-800, 800, 4001), [-37.0, 18.0, 33.3, 0.0, -1e-300]])
    np.testing.assert_allclose(K.log1pexp(x), np.logaddexp(0.0, x), rtol=2e-16, atol=0)
    np.testing.assert_allclose(K.sigmoid(x), sps.expit(x), rtol=4e-16, atol=1e-300)
    np.testing.assert_allclose(K.log_sigmoid(x), -np.logaddexp(0.0, -x), rtol=2e-16, atol=0)
    xs = np.concatenate([np.linspace(-20, 40, 601), np.geomspace(1e-8, 1e10, 200)])
    np.testing.assert_allclose(K.erfcx(xs), sps.erfcx(xs), rtol=4e-15)
    rng = np.random.default_rng(3)
    a = rng.normal(0, 300, size=(3, 4, 7))
    for axis in (-1, 0, 1):
        np.testing.assert_allclose(K.logsumexp(a, axis=axis), sps.logsumexp(a, axis=axis), rtol=1e-15)
        np.testing.assert_allclose(K.softmax(a, axis=axis), sps.softmax(a, axis=axis), rtol=1e-13, atol=1e-300)
    assert K.log1pexp(2.0).shape == ()
    assert float(K.jj_lambda(0.0)) == 0.125
    xi = np.array([1e-9, 1e-3, 0.0999, 0.1001, 1.0, 50.0, -2.0])
    np.testing.assert_allclose(K.jj_lambda(xi), np.tanh(np.abs(xi) / 2) / (4 * np.abs(xi)), rtol=1e-15)


def test_core_logistic_quad_small():
    for m, v in [(0.0, 1.0), (-3.0, 0.2), (2.0, 40.0), (-50.0, 3.0)]:
        val, dm, dv = K.logistic_expectations(m, v)
        for kind, ours in (("softplus", val), ("sigmoid", dm), ("dsigmoid", 2.0 * dv)):
            ref = quad_log_expectation(kind, m, v)
            assert math.log(float(ours)) == pytest.approx(ref, abs=1e-10), (kind, m, v)


def test_core_fd_small():
    cases = [(0.7, 0.4), (-1.0, 3.0)]
    for kern in (K.logistic_expectations, K.tilted_logistic_bound, K.jj_logistic_bound):
        _check_fd_scalar(kern, cases)
    rng = np.random.default_rng(5)
    m, v = _random_q(rng, 2, 3)
    for kern in (
        K.tilted_softmax_bound,
        K.bouchard_softmax_bound,
        K.log_softmax_bound,
        K.bohning_softmax_bound,
        K.taylor_softmax_approx,
    ):
        _check_fd_rows(kern, m, v)


def test_core_infer_net_fixed_point():
    """Prior N(0, 1), s = 1: the NCVMP fixed point of q = prior × message (Infer.NET's published test)."""
    m, v = 0.0, 1.0
    for _ in range(500):
        prec, hmean, _ = K.logistic_quadrature_message(m, v, 1.0)
        v_new = 1.0 / (1.0 + float(prec))
        m_new = v_new * float(hmean)
        done = abs(m_new - m) < 1e-15 and abs(v_new - v) < 1e-15
        m, v = m_new, v_new
        if done:
            break
    assert m == pytest.approx(0.413126805979683, abs=1e-8)
    assert v == pytest.approx(0.828868291887001, abs=1e-8)


def test_core_extremes_finite():
    for m in (-1e3, -30.0, 0.0, 30.0, 1e3):
        for v in (1e-8, 1.0, 1e6):
            for kern in (K.logistic_expectations, K.tilted_logistic_bound, K.jj_logistic_bound):
                assert all(np.isfinite(float(o)) for o in kern(m, v)), (kern.__name__, m, v)
            mm = np.array([m, 0.0, -m, 3.0])
            vv = np.full(4, v)
            for kern in (
                K.tilted_softmax_bound,
                K.bouchard_softmax_bound,
                K.log_softmax_bound,
                K.bohning_softmax_bound,
                K.taylor_softmax_approx,
            ):
                assert all(np.all(np.isfinite(o)) for o in kern(mm, vv)), (kern.__name__, m, v)


# ----------------------------------------------------------------------------------------------------------
# full tests
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["softplus", "sigmoid", "dsigmoid"])
def test_logistic_expectations_vs_quad(kind):
    mm, vv = np.meshgrid(M_GRID, V_GRID, indexing="ij")
    val, dm, dv = K.logistic_expectations(mm, vv)
    ours = {"softplus": val, "sigmoid": dm, "dsigmoid": 2.0 * dv}[kind]
    assert ours.shape == mm.shape
    worst = 0.0
    for idx in np.ndindex(mm.shape):
        ref = quad_log_expectation(kind, mm[idx], vv[idx])
        if ref < -700.0:  # not a normal double
            assert 0.0 <= ours[idx] < 1e-290
            continue
        err = abs(math.log(ours[idx]) - ref)
        worst = max(worst, err)
        assert err < 1e-11, (kind, mm[idx], vv[idx], ours[idx], math.exp(ref))
    assert worst < 1e-11


def test_logistic_random_vs_quad():
    rng = np.random.default_rng(11)
    m = rng.normal(0, 20, size=40)
    v = np.exp(rng.uniform(np.log(1e-6), np.log(1e5), size=40))
    val, dm, dv = K.logistic_expectations(m, v)
    for i in range(m.size):
        for kind, ours in (("softplus", val[i]), ("sigmoid", dm[i]), ("dsigmoid", 2 * dv[i])):
            ref = quad_log_expectation(kind, m[i], v[i])
            assert abs(math.log(ours) - ref) < 1e-11, (kind, m[i], v[i])


def test_logistic_symmetries_and_limits():
    m = np.linspace(-40, 40, 81)
    for v in (1e-3, 0.5, 0.61, 3.0, 300.0):
        s1, e1, d1 = K.logistic_expectations(m, v)
        s2, e2, d2 = K.logistic_expectations(-m, v)
        np.testing.assert_allclose(s1 - s2, m, rtol=1e-13, atol=1e-12)  # S(m) − S(−m) = m
        np.testing.assert_allclose(e1 + e2, 1.0, rtol=1e-14)
        np.testing.assert_allclose(d1, d2, rtol=1e-13)
    # v → 0: point values
    s, e, d = K.logistic_expectations(m, 0.0)
    np.testing.assert_allclose(s, np.logaddexp(0, m), rtol=1e-15)
    np.testing.assert_allclose(e, sps.expit(m), rtol=1e-15)
    np.testing.assert_allclose(2 * d, sps.expit(m) * sps.expit(-m), rtol=1e-15)
    # continuity across the Gauss–Hermite / series switch
    for mm in (-20.0, -1.0, 0.0, 2.0, 35.0):
        lo = K.logistic_expectations(mm, 0.6)
        hi = K.logistic_expectations(mm, np.nextafter(0.6, 1.0))
        for a, b in zip(lo, hi, strict=True):
            assert float(a) == pytest.approx(float(b), rel=1e-12)


def test_broadcasting_shapes():
    m = np.zeros((3, 1))
    v = np.ones((1, 4))
    for kern in (K.logistic_expectations, K.tilted_logistic_bound, K.jj_logistic_bound):
        assert all(o.shape == (3, 4) for o in kern(m, v))
    out = K.logistic_quadrature_message(m, v, np.ones(4))
    assert all(o.shape == (3, 4) for o in out)
    mk = np.zeros((2, 1, 5))
    vk = np.ones((3, 5))
    val, dm, dv, a = K.tilted_softmax_bound(mk, vk)
    assert val.shape == (2, 3) and dm.shape == dv.shape == a.shape == (2, 3, 5)
    val, dm, dv, alpha, xi = K.bouchard_softmax_bound(mk, vk)
    assert val.shape == alpha.shape == (2, 3) and xi.shape == (2, 3, 5)
    for kern in (K.log_softmax_bound, K.bohning_softmax_bound, K.taylor_softmax_approx):
        val, dm, dv = kern(mk, vk)
        assert val.shape == (2, 3) and dm.shape == dv.shape == (2, 3, 5)
    with pytest.raises(ValueError, match="K >= 2"):
        K.bouchard_softmax_bound(np.zeros((2, 1)), np.ones((2, 1)))
    assert np.isnan(K.logistic_expectations(0.0, -1.0)[0])
    assert np.isnan(K.tilted_softmax_bound([0.0, 1.0], [1.0, -1.0])[0])


def test_fd_derivatives_scalar_kernels():
    for kern in (K.logistic_expectations, K.tilted_logistic_bound, K.jj_logistic_bound):
        _check_fd_scalar(kern, SCALAR_FD_CASES)


def test_fd_derivatives_softmax_kernels():
    rng = np.random.default_rng(7)
    m, v = _random_q(rng, 3, 4)
    m2, v2 = _random_q(rng, 2, 3, u=100.0, vscale=30.0)
    m3 = np.array([[0.0, -25.0, 3.0], [1.0, 1.0, 1.0]])
    v3 = np.array([[1e-5, 2.0, 1e3], [1e-4, 1e-4, 1e-4]])
    for kern in (
        K.tilted_softmax_bound,
        K.bouchard_softmax_bound,
        K.log_softmax_bound,
        K.bohning_softmax_bound,
        K.taylor_softmax_approx,
    ):
        for a, b in ((m, v), (m2, v2), (m3, v3)):
            _check_fd_rows(kern, a, b)


def test_fd_gauss_hermite_generic():
    val, dm, dv = K.gaussian_expectation(np.cos, np.array([0.3, -1.0]), np.array([0.5, 2.0]), n=40)
    m, v = np.array([0.3, -1.0]), np.array([0.5, 2.0])
    np.testing.assert_allclose(val, np.cos(m) * np.exp(-v / 2), rtol=1e-13)
    np.testing.assert_allclose(dm, -np.sin(m) * np.exp(-v / 2), rtol=1e-12)
    np.testing.assert_allclose(dv, -0.5 * np.cos(m) * np.exp(-v / 2), rtol=1e-12)
    z, w = K.normal_rule(10)
    assert w.sum() == pytest.approx(1.0, rel=1e-15)
    assert (w * z**4).sum() == pytest.approx(3.0, rel=1e-13)


def test_logistic_bounds_above_truth():
    rng = np.random.default_rng(13)
    m = np.concatenate([rng.normal(0, 5, 300), M_GRID * 10])
    v = np.concatenate([np.exp(rng.uniform(-10, 10, 300)), np.repeat(V_GRID, 12)[: 10 * 12]])
    m = m[: v.size]
    truth = K.logistic_expectations(m, v)[0]
    tilt = K.tilted_logistic_bound(m, v)[0]
    jj = K.jj_logistic_bound(m, v)[0]
    logb = np.logaddexp(0.0, m + v / 2)  # the "log" bound, a = 0 in the tilted bound
    tol = 1e-13 * (1 + np.abs(truth))
    assert np.all(tilt >= truth - tol)
    assert np.all(jj >= truth - tol)
    assert np.all(tilt <= logb + tol)
    # and a few directly against adaptive quadrature
    for i in range(0, m.size, 37):
        ref = math.exp(quad_log_expectation("softplus", m[i], v[i]))
        assert tilt[i] >= ref * (1 - 1e-12) and jj[i] >= ref * (1 - 1e-12)


def test_tilted_logistic_optimality():
    rng = np.random.default_rng(17)
    m = rng.normal(0, 10, 200)
    v = np.exp(rng.uniform(np.log(1e-8), np.log(1e6), 200))
    val, dm, dv, a = K.tilted_logistic_bound(m, v)
    # a is the fixed point and the bound is minimal in a
    np.testing.assert_allclose(a, sps.expit(m + (1 - 2 * a) * v / 2), rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(dm, a, rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(dv, 0.5 * a * sps.expit(-(m + (1 - 2 * a) * v / 2)), rtol=1e-8, atol=1e-300)
    for da in (1e-3, -1e-3):
        ap = np.clip(a + da, 0, 1)
        other = 0.5 * ap**2 * v + np.logaddexp(0, m + (1 - 2 * ap) * v / 2)
        assert np.all(other >= val - 1e-12 * np.abs(val))


def _mc_lse(rng, m, v, n=100_000):
    x = m + np.sqrt(v) * rng.standard_normal((n, m.size))
    s = sps.logsumexp(x, axis=1)
    return s.mean(), s.std(ddof=1) / math.sqrt(n)


def test_softmax_bounds_above_monte_carlo_truth():
    rng = np.random.default_rng(2024)
    for trial in range(16):
        k = [2, 3, 10, 30][trial % 4]
        u = [0.1, 1.0, 10.0][trial % 3]
        vs = [0.1, 1.0, 10.0, 100.0][(trial // 4) % 4]
        m = rng.normal(0, math.sqrt(u), k)
        v = np.full(k, vs) * rng.uniform(0.5, 1.5, k)
        mean, se = _mc_lse(rng, m, v)
        floor = mean - 5 * se
        assert float(K.log_softmax_bound(m, v)[0]) >= floor
        assert float(K.tilted_softmax_bound(m, v)[0]) >= floor
        assert float(K.bouchard_softmax_bound(m, v)[0]) >= floor
        assert float(K.bohning_softmax_bound(m, v)[0]) >= floor
        assert float(K.adaptive_softmax_bound(m, v)[0]) >= floor


def test_tilted_below_log_bound_everywhere():
    rng = np.random.default_rng(99)
    for u, vscale, k in [(1, 1, 10), (0.1, 100, 5), (10, 0.01, 20), (1000, 1e4, 4), (1, 1e6, 3), (1e5, 1e-8, 6)]:
        m, v = _random_q(rng, 200, k, u=u, vscale=vscale)
        t = K.tilted_softmax_bound(m, v)
        lb = K.log_softmax_bound(m, v)[0]
        assert np.all(t[0] <= lb + 1e-13 * (1 + np.abs(lb)))
        # optimality: a is the fixed point of a ← softmax(m + ½(1 − 2a)v)
        fixed = sps.softmax(m + 0.5 * (1 - 2 * t[3]) * v, axis=-1)
        np.testing.assert_allclose(t[3], fixed, atol=1e-10)
        assert np.all(np.isfinite(t[0]))


def test_tilted_softmax_warm_start_same_optimum():
    """A previous a only changes the starting point: the optimum agrees with the cold start to rounding,
    from a nearby solution, a far one, and invalid ones (zeros, NaN: cold start for those rows)."""
    rng = np.random.default_rng(12)
    for u, vscale, k in [(1, 1, 10), (10, 0.01, 20), (1000, 1e4, 4), (1, 1e6, 3)]:
        m, v = _random_q(rng, 300, k, u=u, vscale=vscale)
        cold = K.tilted_softmax_bound(m, v)
        near = K.tilted_softmax_bound(m * 1.01 + 0.01, v * 0.98)[3]
        far = sps.softmax(rng.normal(0, 5, m.shape), axis=-1)
        junk = near.copy()
        junk[::3, 0] = 0.0
        junk[1::3, -1] = np.nan
        for a0 in (cold[3], near, far, junk):
            warm = K.tilted_softmax_bound(m, v, a0=a0)
            np.testing.assert_allclose(warm[0], cold[0], rtol=1e-13, atol=1e-13)
            # at v ~ 1e6 the objective is flat in a to rounding over ~1e-9 (the values agree to 1e-13)
            np.testing.assert_allclose(warm[3], cold[3], rtol=1e-8, atol=1e-12)
            np.testing.assert_allclose(warm[1], cold[1], rtol=1e-8, atol=1e-12)


def test_tilted_softmax_newton_path_agrees_with_lambert_w_solver():
    """Rows with every v_k < 1 are solved by Newton in a (O(K) steps); they agree with the Lambert-W
    solver that every other row uses, and reach its fixed point."""
    from factors.kernels.tilted import _NEWTON_MAX_V, _tilted_softmax_row

    rng = np.random.default_rng(21)
    m, v = rng.normal(0, 4, (400, 8)), rng.uniform(0.0, _NEWTON_MAX_V, (400, 8))
    v[::5] *= 1e-6
    got = K.tilted_softmax_bound(m, v)[3]
    ref = np.empty_like(m)
    lv, y = np.empty(8), np.empty(8)
    for i in range(len(m)):
        _tilted_softmax_row(m[i], v[i], ref[i], lv, y, False)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got, sps.softmax(m + (0.5 - got) * v, axis=-1), rtol=0.0, atol=1e-14)


def test_log_and_tilted_exact_as_v_to_zero():
    rng = np.random.default_rng(4)
    m = rng.normal(0, 1, (20, 10))
    gaps_log, gaps_tilt = [], []
    for scale in (1e-1, 1e-2, 1e-3, 1e-4):
        v = scale * rng.uniform(0.5, 1.5, m.shape)
        s = sps.softmax(m, axis=-1)
        # E[lse] = lse(m) + ½Σ v s(1 − s) + O(v²)
        truth = sps.logsumexp(m, axis=-1) + 0.5 * np.sum(v * s * (1 - s), axis=-1)
        gaps_log.append(np.max(np.abs(K.log_softmax_bound(m, v)[0] - truth)))
        gaps_tilt.append(np.max(np.abs(K.tilted_softmax_bound(m, v)[0] - truth)))
    assert gaps_log[-1] < 1e-4 and gaps_tilt[-1] < 1e-7
    assert all(b < 0.2 * a for a, b in zip(gaps_log, gaps_log[1:], strict=False))
    assert all(b < 0.2 * a for a, b in zip(gaps_tilt, gaps_tilt[1:], strict=False))


def test_bouchard_and_adaptive():
    rng = np.random.default_rng(8)
    m, v = _random_q(rng, 50, 6, u=4.0, vscale=5.0)
    val, dm, dv, alpha, xi = K.bouchard_softmax_bound(m, v)
    lam = K.jj_lambda(xi)
    np.testing.assert_allclose(xi**2, (m - alpha[:, None]) ** 2 + v, rtol=1e-12)
    np.testing.assert_allclose(dv, lam, rtol=1e-14)
    # α stationary: closed-form update of docs/maths.md §5
    alpha_fp = ((m.shape[1] / 2 - 1) / 2 + np.sum(lam * m, axis=-1)) / np.sum(lam, axis=-1)
    np.testing.assert_allclose(alpha, alpha_fp, rtol=1e-10, atol=1e-10)
    for da in (1e-4, -1e-4):
        a2 = alpha + da
        xi2 = np.sqrt((m - a2[:, None]) ** 2 + v)
        other = a2 + np.sum(np.logaddexp(0, xi2) + (m - a2[:, None] - xi2) / 2, axis=-1)
        assert np.all(other >= val - 1e-12)
    av, adm, adv, used = K.adaptive_softmax_bound(m, v)
    tv = K.tilted_softmax_bound(m, v)[0]
    np.testing.assert_array_equal(av, np.minimum(tv, val))
    assert used.dtype == bool


def test_message_conventions():
    """NCVMP messages from the returned derivatives match the closed forms of docs/maths.md §3."""
    m, v, s = np.array([0.3, -2.0]), np.array([0.5, 4.0]), np.array([1.0, 0.0])
    prec, hmean, elog = K.logistic_quadrature_message(m, v, s)
    val, dm, dv = K.logistic_expectations(m, v)
    np.testing.assert_allclose(prec, 2 * dv, rtol=1e-15)
    np.testing.assert_allclose(hmean, m * prec + s - dm, rtol=1e-15)
    np.testing.assert_allclose(elog, s * m - val, rtol=1e-15)
    jv, jdm, jdv, xi = K.jj_logistic_bound(m, v)
    # conjugate JJ message: precision 2λ, precision·mean s − ½
    np.testing.assert_allclose(m * 2 * jdv + s - jdm, s - 0.5, rtol=1e-12, atol=1e-15)


def test_core_vector_math_matches_libm():
    """The call-free exp of y ≤ 0 and log1p on [0, 1] agree with libm to a few ulp; exp flushes below −708."""
    from factors.kernels.vector_math import EXP_MIN, exp_nonpositive, log1p_unit

    n = 20_000 if NOJIT else 2_000_000
    y = np.concatenate([-np.linspace(0.0, -EXP_MIN, n), -np.logspace(-300, 2.8, n), [-0.0, EXP_MIN, -708.4, -800.0]])
    out = np.empty_like(y)
    exp_nonpositive(y, out, np.empty(y.size, dtype=np.int64))
    ok = y >= EXP_MIN
    np.testing.assert_allclose(out[ok], np.exp(y[ok]), rtol=1e-15, atol=0.0)
    assert np.all(out[~ok] == 0.0)
    e = np.concatenate([np.linspace(0.0, 1.0, 2001), np.logspace(-300, 0, 2001)])
    got = np.array([log1p_unit(x) for x in e])
    np.testing.assert_allclose(got, np.log1p(e), rtol=1e-15, atol=0.0)


def test_core_site_likelihood_kernels():
    """Bernoulli and categorical log-likelihoods with their gradients at many draws, against numpy."""
    rng = np.random.default_rng(31)
    u = np.concatenate([rng.normal(0.0, 8.0, (3, 500)), np.array([[0.0, -0.0, 1e-300, 40.0, -40.0] * 100])])
    s = (rng.uniform(size=500) < 0.5).astype(float)
    val, grad = K.bernoulli_logit_value_grad(u, s)
    ref = s * u - np.logaddexp(0.0, u)
    np.testing.assert_allclose(val, ref, rtol=0.0, atol=4e-15 * np.max(np.abs(ref)))
    np.testing.assert_allclose(grad, s - sps.expit(u), rtol=0.0, atol=2e-16)
    U = rng.normal(0.0, 6.0, (4, 300, 7))
    d = rng.multinomial(2, np.ones(7) / 7, size=300).astype(float)
    val, grad = K.categorical_logit_value_grad(U, d)
    ref = (d * U).sum(-1) - d.sum(-1) * sps.logsumexp(U, axis=-1)
    np.testing.assert_allclose(val, ref, rtol=1e-14, atol=1e-13)
    np.testing.assert_allclose(grad, d - d.sum(-1)[:, None] * sps.softmax(U, axis=-1), rtol=0.0, atol=1e-15)


@pytest.mark.skipif(NOJIT, reason="already running without JIT")
def test_core_without_jit_in_subprocess():
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "core", str(Path(__file__))],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]


def test_logistic_small_variance_series_matches_the_32_node_rule():
    """The v-series branch (v ≤ TAYLOR_MAX_VAR) against 32-node Gauss–Hermite, relative 2e-14."""
    from factors.kernels.gauss_hermite import normal_rule
    from factors.kernels.logistic import TAYLOR_MAX_VAR, _logistic_gh, _logistic_taylor

    z, w = normal_rule(32)
    for v in (1e-9, 1e-5, 5e-4, TAYLOR_MAX_VAR):
        for m in np.concatenate([np.linspace(-40.0, 40.0, 161), [-700.0, -100.0, 100.0, 700.0]]):
            ours, ref = np.array(_logistic_taylor(m, v)), np.array(_logistic_gh(m, v, z, w))
            assert np.all(np.abs(ours - ref) <= 2e-14 * np.abs(ref)), (m, v, ours, ref)


def test_logistic_series_coefficients_follow_the_sigmoid_derivative_recurrence():
    """σ′ = p, d(pᵃtᵇ)/dx = a pᵃtᵇ⁺¹ − 2b pᵃ⁺¹tᵇ⁻¹ (p = σ(1−σ), t = 1−2σ): the series built from this
    recurrence equals the kernel's written-out polynomials."""
    from factors.kernels.logistic import _logistic_taylor

    terms = {1: {(1, 0): 1}}
    for n in range(1, 13):
        nxt: dict = {}
        for (a, b), c in terms[n].items():
            nxt[(a, b + 1)] = nxt.get((a, b + 1), 0) + a * c
            if b:
                nxt[(a + 1, b - 1)] = nxt.get((a + 1, b - 1), 0) - 2 * b * c
        terms[n + 1] = nxt
    assert terms[13][(7, 0)] == 22368256  # σ⁽¹³⁾(0)·2¹⁴: the tangent number T₇
    for m in (-30.0, -3.0, -0.4, 0.0, 0.7, 5.0, 40.0):
        e = math.exp(-abs(m))  # p and t without cancellation in the tails
        s, p, t = sps.expit(m), e / (1 + e) ** 2, math.copysign((1 - e) / (1 + e), -m)
        d = {n: sum(c * p**a * t**b for (a, b), c in terms[n].items()) for n in terms}
        for v in (1e-3, 0.01):
            ck = [(0.5 * v) ** k / math.factorial(k) for k in range(7)]
            ref = (np.logaddexp(0.0, m) + sum(ck[k] * d[2 * k - 1] for k in range(1, 7)),
                   s + sum(ck[k] * d[2 * k] for k in range(1, 7)),
                   p + sum(ck[k] * d[2 * k + 1] for k in range(1, 7)))
            np.testing.assert_allclose(_logistic_taylor(m, v), ref, rtol=1e-13, atol=0)
