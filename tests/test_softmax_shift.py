"""Multinomial regression's common shift (``schedules.shift.ClassShift``, a sweep hook of
``models.softmax_regression_model``): the class weights' common part no longer crawls, the fixed point is the
plain sweeps' own, and a sharded run applies it on the driver and equals the in-memory fit."""

from __future__ import annotations

import numpy as np
import pytest

import factorgraph as fg
from factorgraph import models
from factorgraph.graph.nodes import ModelError
from schedules.shift import ClassShift


def _classes(N, K=3, D=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    g = X @ rng.normal(size=(K, D)).T
    p = np.exp(g - g.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    return X, (rng.random(N)[:, None] > np.cumsum(p, 1)).sum(1)


def test_the_shift_reaches_the_plain_sweeps_fixed_point_in_few_sweeps():
    """At N = 1000 the plain sweeps need over a thousand sweeps (the class means' average decays by under 1% a
    sweep); with the shift, a few dozen.  Started from the shifted fit, plain sweeps stay there."""
    X, y = _classes(1000)
    m = models.softmax_regression_model(X, y, 3)
    shifted = fg.infer(m, algorithm=fg.NCVMP(), tol=1e-15, param_tol=1e-12, max_iter=500, progress=False)
    assert shifted.converged and shifted.n_iter < 100
    assert np.allclose(shifted.posterior("W").mean().mean(0), 0.0, atol=1e-12)  # the class means average to μ₀
    hook = m.sweep_hooks[0]
    assert hook.shifts[0] > 1e-3 and hook.shifts[-1] < 1e-8  # the last shift: nothing left to move
    m.sweep_hooks.clear()
    with pytest.warns(fg.ConvergenceWarning):
        plain = fg.infer(m, algorithm=fg.NCVMP(accelerate=False), tol=1e-15, param_tol=1e-12, max_iter=300,
                         progress=False)
    assert abs(plain.posterior("W").mean().mean(0)).max() > 1e-4  # still crawling after 300 sweeps
    assert plain.elbo < shifted.elbo
    again = fg.infer(m, algorithm=fg.NCVMP(), tol=1e-15, param_tol=1e-12, max_iter=50, progress=False,
                     init={"W": shifted.posterior("W"), "b": shifted.posterior("b")})
    assert again.n_iter <= 3
    np.testing.assert_allclose(again.posterior("W").mean(), shifted.posterior("W").mean(), atol=1e-7)
    assert again.elbo == pytest.approx(shifted.elbo, rel=1e-13)


def test_the_shift_never_lowers_the_elbo_it_follows():
    """The hook runs after each sweep, before the ELBO: every ELBO of the run is at least the last."""
    X, y = _classes(500, K=4, seed=3)
    r = models.softmax_regression(X, y, 4, max_iter=200)
    assert r.converged
    assert np.all(np.diff(r.elbo_trace) >= -1e-9 * abs(r.elbo))


def test_a_sharded_softmax_regression_applies_the_shift_on_the_driver_and_equals_the_in_memory_fit():
    da = pytest.importorskip("dask.array")
    dask = pytest.importorskip("dask")
    X, y = _classes(20000)
    with dask.config.set(scheduler="threads"):
        r0 = models.softmax_regression(X, y, 3)
        r1 = models.softmax_regression(da.from_array(X, chunks=(2500, 3)), da.from_array(y, chunks=2500), 3)
    assert r0.converged and r1.converged and r1.n_iter == r0.n_iter < 100
    assert r1.sharding["chunks"] == 8
    assert abs(r1.elbo - r0.elbo) <= 1e-10 * abs(r0.elbo)
    for name in ("W", "b"):
        for a, b in zip(r0.posterior(name).natural, r1.posterior(name).natural, strict=True):
            np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-10 * np.max(np.abs(a)))


def test_a_hook_on_the_sharded_plate_is_refused_by_name():
    da = pytest.importorskip("dask.array")
    X, y = _classes(200)
    with fg.Model("scores") as m:
        n = fg.plate("n", 200)
        z = fg.gaussian("z", 0.0, precision=1.0, plates=[n])
        fg.gaussian("y", z, precision=1.0, plates=[n], observed=da.from_array(X[:, 0], chunks=50))
    m.sweep_hooks.append(ClassShift(("z",)))
    with pytest.raises(ModelError, match=r"ClassShift.*sharded plate 'n'"):
        fg.infer(m, progress=False)
