"""Property-based tests (hypothesis): shapes, monotone ELBO, bad parameters, batched plates = a loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import factorgraph as fg

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

sizes = st.integers(min_value=1, max_value=4)
finite = st.floats(min_value=-50.0, max_value=50.0, allow_nan=False, allow_infinity=False)


# ------------------------------------------------------------------------------------ shapes and the ELBO
@st.composite
def gaussian_models(draw):
    """A Gaussian mean/precision model on 1–3 random plates of size 1–4 with random data.

    mu is plated over a random subset of the plates, tau over another, x over all of them.
    """
    n_plates = draw(st.integers(min_value=1, max_value=3))
    shape = tuple(draw(sizes) for _ in range(n_plates))
    mu_axes = draw(st.lists(st.sampled_from(range(n_plates)), unique=True, max_size=n_plates).map(sorted))
    tau_axes = draw(st.lists(st.sampled_from(range(n_plates)), unique=True, max_size=n_plates).map(sorted))
    data = draw(hnp.arrays(float, shape, elements=finite))
    prior_prec = draw(st.floats(min_value=1e-3, max_value=10.0))
    a0 = draw(st.floats(min_value=0.1, max_value=10.0))
    b0 = draw(st.floats(min_value=0.1, max_value=10.0))
    return shape, mu_axes, tau_axes, data, prior_prec, a0, b0


@SETTINGS
@given(gaussian_models())
def test_gaussian_model_shapes_and_monotone_elbo(spec):
    shape, mu_axes, tau_axes, data, prior_prec, a0, b0 = spec
    with fg.Model("prop") as m:
        plates = [fg.plate(f"p{i}", s) for i, s in enumerate(shape)]
        mu = fg.gaussian("mu", 0.0, precision=prior_prec, plates=[plates[i] for i in mu_axes])
        tau = fg.gamma("tau", a0, b0, plates=[plates[i] for i in tau_axes])
        fg.gaussian("x", mu, precision=tau, plates=plates, observed=data)
    r = fg.infer(m, max_iter=30, tol=None)

    assert r.posterior("mu").mean().shape == tuple(shape[i] for i in mu_axes)
    assert r.posterior("mu").var().shape == tuple(shape[i] for i in mu_axes)
    assert r.posterior("tau").mean().shape == tuple(shape[i] for i in tau_axes)
    assert np.all(r.posterior("mu").var() > 0) and np.all(r.posterior("tau").mean() > 0)
    trace = np.asarray(r.elbo_trace)
    assert trace.shape == (r.n_iter,) and r.n_iter == 30
    assert np.all(np.isfinite(trace)) and np.isfinite(r.elbo)
    drops = trace[:-1] - trace[1:]
    assert np.all(drops <= 1e-9 * np.maximum(1.0, np.abs(trace[1:]))), f"ELBO decreased: {trace}"
    assert not any("decreased" in w for w in getattr(r, "warnings", []))


@SETTINGS
@given(shape=st.tuples(sizes, sizes), data=st.data())
def test_constant_precision_posterior_is_exact(shape, data):
    """With a known precision the model is conjugate and one sweep gives the exact posterior."""
    x = data.draw(hnp.arrays(float, shape, elements=finite))
    lam = data.draw(st.floats(min_value=0.1, max_value=10.0))
    p0 = data.draw(st.floats(min_value=1e-3, max_value=10.0))
    with fg.Model() as m:
        a, b = fg.plate("a", shape[0]), fg.plate("b", shape[1])
        mu = fg.gaussian("mu", 0.0, precision=p0, plates=[a])
        fg.gaussian("x", mu, precision=lam, plates=[a, b], observed=x)
    q = fg.infer(m).posterior("mu")
    prec = p0 + lam * shape[1]
    np.testing.assert_allclose(q.var(), np.full(shape[0], 1.0 / prec), rtol=1e-10)
    np.testing.assert_allclose(q.mean(), lam * x.sum(1) / prec, rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------------------------------ bad parameters
bad_scalar = st.one_of(st.floats(max_value=0.0, allow_nan=False), st.sampled_from([np.nan, np.inf, -np.inf]))
nonfinite = st.sampled_from([np.nan, np.inf, -np.inf])


def _gaussian_precision(v):
    fg.gaussian("x", 0.0, precision=v)


def _gaussian_variance(v):
    fg.gaussian("x", 0.0, variance=v)


def _gamma_shape(v):
    fg.gamma("x", shape=v, rate=1.0)


def _gamma_rate(v):
    fg.gamma("x", shape=1.0, rate=v)


def _beta_alpha(v):
    fg.beta("x", alpha=v, beta=1.0)


def _beta_beta(v):
    fg.beta("x", alpha=1.0, beta=v)


def _dirichlet(v):
    fg.dirichlet("x", concentration=[1.0, v, 2.0])


def _gaussian_gamma_shape(v):
    fg.gaussian_gamma("x", shape=v, dim=2)


def _gaussian_gamma_rate(v):
    fg.gaussian_gamma("x", rate=v, dim=2)


def _observed_gamma(v):
    n = fg.plate("n", 3)
    fg.gamma("x", 1.0, 1.0, plates=[n], observed=[1.0, v, 2.0])


POSITIVE_SLOTS = [_gaussian_precision, _gaussian_variance, _gamma_shape, _gamma_rate, _beta_alpha, _beta_beta,
                  _dirichlet, _gaussian_gamma_shape, _gaussian_gamma_rate, _observed_gamma]


@SETTINGS
@given(slot=st.sampled_from(POSITIVE_SLOTS), value=bad_scalar)
def test_non_positive_or_non_finite_parameter_raises(slot, value):
    with fg.Model(), pytest.raises(fg.ModelError, match="'x'"):
        slot(value)


def _gaussian_mean(v):
    fg.gaussian("x", mean=v)


def _mv_mean(v):
    fg.mv_gaussian("x", mean=[0.0, v])


def _mv_precision(v):
    fg.mv_gaussian("x", precision=v, dim=2)


def _observed_gaussian(v):
    n = fg.plate("n", 2)
    fg.gaussian("x", plates=[n], observed=[0.0, v])


def _inner_inputs(v):
    n = fg.plate("n", 2)
    w = fg.mv_gaussian("x", dim=2)
    fg.inner(np.array([[1.0, 2.0], [v, 0.0]]), w, plates=[n])


FINITE_SLOTS = [_gaussian_mean, _mv_mean, _mv_precision, _observed_gaussian, _inner_inputs]


@SETTINGS
@given(slot=st.sampled_from(FINITE_SLOTS + POSITIVE_SLOTS), value=nonfinite)
def test_non_finite_parameter_raises(slot, value):
    with fg.Model(), pytest.raises(fg.ModelError, match=r"'x'|X must be finite"):
        slot(value)


@SETTINGS
@given(n=sizes, pos=st.data(), value=bad_scalar)
def test_bad_entry_in_a_plated_parameter_raises(n, pos, value):
    """One bad entry anywhere in an otherwise valid plated array is found and reported."""
    i = pos.draw(st.integers(min_value=0, max_value=n - 1))
    arr = np.ones(n)
    arr[i] = value
    which = pos.draw(st.sampled_from(["precision", "shape", "rate"]))
    with fg.Model():
        p = fg.plate("n", n)
        with pytest.raises(fg.ModelError, match="'x'"):
            if which == "precision":
                fg.gaussian("x", 0.0, precision=arr, plates=[p])
            else:
                fg.gamma("x", plates=[p], **{which: arr})


@SETTINGS
@given(value=st.floats(allow_nan=False, allow_infinity=False).filter(lambda v: v <= 0 or v >= 1))
def test_bernoulli_probs_outside_open_unit_interval_raise(value):
    with fg.Model(), pytest.raises(fg.ModelError, match="'x'"):
        fg.bernoulli("x", probs=value)


@SETTINGS
@given(size=st.one_of(st.integers(max_value=0), st.floats(allow_nan=True), st.booleans()))
def test_bad_plate_size_raises(size):
    with fg.Model(), pytest.raises(fg.ModelError, match="'n'"):
        fg.plate("n", size)


# ------------------------------------------------------------------------------------ batched = loop
@st.composite
def grouped_data(draw):
    G = draw(sizes)
    N = draw(st.integers(min_value=1, max_value=5))
    x = draw(hnp.arrays(float, (G, N), elements=finite))
    m0 = draw(st.floats(min_value=-5.0, max_value=5.0))
    p0 = draw(st.floats(min_value=1e-3, max_value=10.0))
    a0 = draw(st.floats(min_value=0.1, max_value=10.0))
    b0 = draw(st.floats(min_value=0.1, max_value=10.0))
    return x, m0, p0, a0, b0


def _group_model(x, m0, p0, a0, b0, batched):
    with fg.Model() as m:
        if batched:
            g = fg.plate("g", x.shape[0])
            n = fg.plate("n", x.shape[1])
            mu = fg.gaussian("mu", m0, precision=p0, plates=[g])
            tau = fg.gamma("tau", a0, b0, plates=[g])
            fg.gaussian("x", mu, precision=tau, plates=[g, n], observed=x)
        else:
            n = fg.plate("n", x.shape[0])
            mu = fg.gaussian("mu", m0, precision=p0)
            tau = fg.gamma("tau", a0, b0)
            fg.gaussian("x", mu, precision=tau, plates=[n], observed=x)
    return m


@SETTINGS
@given(grouped_data())
def test_batched_plates_equal_a_loop(spec):
    """Independent groups under a plate give the posteriors of separate single-group models.

    Both runs use the same fixed number of sweeps (tol=None), so the per-group updates are the same
    computations and the results agree to rounding, not just to the convergence tolerance.
    """
    x, m0, p0, a0, b0 = spec
    sweeps = 15
    rb = fg.infer(_group_model(x, m0, p0, a0, b0, batched=True), max_iter=sweeps, tol=None)
    mu_b, tau_b = rb.posterior("mu"), rb.posterior("tau")
    elbo_sum = 0.0
    for i in range(x.shape[0]):
        r = fg.infer(_group_model(x[i], m0, p0, a0, b0, batched=False), max_iter=sweeps, tol=None)
        mu, tau = r.posterior("mu"), r.posterior("tau")
        np.testing.assert_allclose(mu_b.mean()[i], mu.mean(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(mu_b.var()[i], mu.var(), rtol=1e-9)
        np.testing.assert_allclose(tau_b.shape[i], tau.shape, rtol=1e-9)
        np.testing.assert_allclose(tau_b.rate[i], tau.rate, rtol=1e-9)
        elbo_sum += r.elbo
    # the evidence of independent groups adds up
    np.testing.assert_allclose(rb.elbo, elbo_sum, rtol=1e-9, atol=1e-9)


@SETTINGS
@given(grouped_data())
def test_batched_categorical_counts_equal_a_loop(spec):
    """Dirichlet–categorical per group (plated Dirichlet) equals separate models; exact conjugate counts."""
    x, *_ = spec
    G, N = x.shape
    K = 3
    labels = (np.abs(np.floor(x)).astype(int)) % K
    with fg.Model() as m:
        g, n = fg.plate("g", G), fg.plate("n", N)
        theta = fg.dirichlet("theta", np.ones(K), plates=[g])
        fg.categorical("c", theta, plates=[g, n], observed=labels)
    rb = fg.infer(m)
    for i in range(G):
        with fg.Model() as mi:
            n = fg.plate("n", N)
            theta = fg.dirichlet("theta", np.ones(K))
            fg.categorical("c", theta, plates=[n], observed=labels[i])
        ri = fg.infer(mi)
        np.testing.assert_allclose(rb.posterior("theta").concentration[i], ri.posterior("theta").concentration)
        np.testing.assert_allclose(ri.posterior("theta").concentration, 1.0 + np.bincount(labels[i], minlength=K))
