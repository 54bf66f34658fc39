"""Bayesian PCA with ARD (``models.pca``) and the rotation speed-up (``factorgraph.rotation``).

* the rotation terms' gradients are the finite differences of their values, and the rotation's reported
  gain is exactly the rise of the ELBO it causes;
* the blocked updates and the ELBO coincide with BayesPy's PCA (same model, start and order) sweep by
  sweep to 1e-9 without rotation; with rotation both reach the same fixed point and bound (1e-10);
* at convergence every block is at its optimum (perturbing any block's q lowers the ELBO), the ELBO never
  decreases, the principal subspace of synthetic data is recovered and ARD switches the unneeded
  components off within 100 sweeps with rotation (not without);
* bad input is refused with a clear ModelError.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.linalg import subspace_angles

import factorgraph as fg
from factorgraph import models
from factorgraph.pca import _State
from factorgraph.rotation import ard_term, evaluate, gaussian_term, optimal_rotation


def _synthetic(seed=0, N=400, D=10, K=3, noise=0.3):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(D, K)) * np.linspace(3.0, 1.5, K)
    X = rng.normal(size=(N, K)) @ W.T + rng.normal(size=D) * 2.0 + noise * rng.normal(size=(N, D))
    return X, W


def _fd_grad(term, R, h=1e-6):
    g = np.zeros_like(R)
    for i in range(R.shape[0]):
        for j in range(R.shape[1]):
            E = np.zeros_like(R)
            E[i, j] = h
            g[i, j] = (evaluate([term], R + E)[0] - evaluate([term], R - E)[0]) / (2 * h)
    return g


@pytest.mark.parametrize("make", [
    lambda A: gaussian_term(A, 37.0),
    lambda A: ard_term(A, 11.0, 1e-3, 1e-3),
    lambda A: ard_term(A, 11.0, 2.0, 0.5, shared=True),
])
def test_rotation_term_gradient_is_finite_difference(make):
    rng = np.random.default_rng(3)
    B = rng.normal(size=(4, 6))
    term = make(B @ B.T + np.eye(4))
    R = np.eye(4) + 0.3 * rng.normal(size=(4, 4))
    np.testing.assert_allclose(evaluate([term], R)[1], _fd_grad(term, R), rtol=1e-5, atol=1e-6)


def _state(X, K, *, mean=True, iso=False, ard=True, seed=0):
    W0 = np.random.default_rng(seed).standard_normal((X.shape[1], K))
    return _State(X, K, mean, iso, ard, 1e-3, 1e-3, 1e-6, W0)


def _sweep(st):
    st.update_z()
    st.update_w()
    st.update_alpha()
    st.update_tau()


@pytest.mark.parametrize("ard", [True, False])
def test_rotation_gain_is_the_elbo_rise(ard):
    X, _ = _synthetic(1, N=200, D=8)
    st = _state(X, 5, ard=ard)
    for _ in range(3):
        _sweep(st)
    before = st.elbo()
    gain = st.rotate()
    assert gain > 0
    np.testing.assert_allclose(st.elbo() - before, gain, rtol=1e-6)


def test_optimal_rotation_is_identity_at_an_optimum():
    # −½tr(RARᵀ) + n log|det R| is maximised at R = I when A = nI
    R, gain = optimal_rotation([gaussian_term(5.0 * np.eye(3), 5.0)], 3)
    np.testing.assert_allclose(R, np.eye(3), atol=1e-6)
    assert gain < 1e-10


@pytest.mark.parametrize("mean,iso", [(True, False), (False, True), (True, True)])
def test_fixed_point_every_block_at_its_optimum(mean, iso):
    X, _ = _synthetic(2, N=150, D=6)
    st = _state(X, 4, mean=mean, iso=iso)
    for _ in range(3000):
        _sweep(st)
        st.rotate()
        L = st.elbo()
        if abs(L - getattr(st, "_last", -np.inf)) < 1e-12 * abs(L):
            break
        st._last = L
    L = st.elbo()
    rng = np.random.default_rng(0)
    for attr, scale in [("Wm", 1e-3), ("Zm", 1e-3), ("tau_b", 1e-3), ("al_b", 1e-3), ("Zc", 1e-4)]:
        for _ in range(3):
            old = getattr(st, attr).copy()
            d = rng.normal(size=old.shape) * scale * (1 + np.abs(old))
            if attr == "Zc":
                d = d + d.T
            setattr(st, attr, old + d)
            if attr == "Zm" or attr == "Zc":
                st.z_stats()
            assert st.elbo() < L + 1e-9 * abs(L), attr
            setattr(st, attr, old)
            st.z_stats()


def test_same_sweeps_and_bound_as_bayespy():
    pytest.importorskip("bayespy")  # part of the test extra, installed by .ci/run
    from benchmarks.peers.bayespy_peer import pca_nodes

    X, _ = _synthetic(4, N=60, D=6, K=2)
    K = 4
    W0 = np.random.default_rng(5).normal(size=(6, K))
    Q, order, W, _ = pca_nodes(X, K, W0)
    for it in range(1, 9):
        Q.update(*order, verbose=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fg.ConvergenceWarning)
            r = models.pca(X, K, rotate=False, noise="isotropic", mean=False, init=W0, max_iter=it, tol=0.0,
                               scale=False)
        np.testing.assert_allclose(r.elbo, Q.compute_lowerbound(), rtol=1e-9)
        np.testing.assert_allclose(r.loadings, W.get_moments()[0][:, 0, :], atol=1e-9)
    # with rotation (each library its own optimiser, K = the true 3 so that no component is being pruned):
    # the same fixed point and bound
    X, _ = _synthetic(4, N=60, D=6, K=3)
    W0 = W0[:, :3]
    Q, order, W, _ = pca_nodes(X, 3, W0, rotate=True)
    Q.update(*order, repeat=2000, tol=1e-14, verbose=False)
    r = models.pca(X, 3, rotate=True, noise="isotropic", mean=False, init=W0, max_iter=2000, tol=1e-14,
                   scale=False)
    assert r.converged
    np.testing.assert_allclose(r.elbo, Q.compute_lowerbound(), rtol=1e-10)
    WW = W.get_moments()[0][:, 0, :]
    np.testing.assert_allclose(r.loadings @ r.loadings.T, WW @ WW.T, atol=1e-4)


@pytest.mark.parametrize("noise", ["diagonal", "isotropic"])
def test_elbo_never_decreases(noise):
    X, _ = _synthetic(5, N=200, D=8)
    for rotate in (True, False):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fg.ConvergenceWarning)
            r = models.pca(X, 6, rotate=rotate, noise=noise, max_iter=300)
        assert np.all(np.diff(r.elbo_trace) >= -1e-9 * np.abs(r.elbo_trace[1:])), rotate


def test_recovers_subspace_and_ard_switches_off_within_100_sweeps():
    X, W = _synthetic(6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        r = models.pca(X, 8, max_iter=100)
        slow = models.pca(X, 8, rotate=False, max_iter=100)
    assert r.active().sum() == 3
    assert np.degrees(subspace_angles(W, r.loadings[:, r.active()])).max() < 2.0
    assert slow.active().sum() > 3  # without the rotation, 100 sweeps leave spurious components on
    assert r.elbo > slow.elbo
    # the learned noise, mean and predictive covariance against the data
    np.testing.assert_allclose(r.noise_variance, 0.09, rtol=0.3)
    np.testing.assert_allclose(r.mean, X.mean(0), atol=0.05)
    _, cov = r.predictive()
    np.testing.assert_allclose(cov, np.cov(X.T), atol=0.1 * np.abs(cov).max())
    assert r.explained_variance_ratio[:3].sum() > 0.95 and np.all(r.explained_variance_ratio[3:] < 1e-3)
    assert np.abs(r.reconstruct() - X).std() < 0.35
    m, c = r.transform(X[:5])
    assert m.shape == (5, 8) and c.shape == (8, 8)
    np.testing.assert_allclose(r.components @ r.components.T, np.eye(8), atol=1e-8)


def test_results_follow_the_units_of_x():
    """With ``scale`` the fit of cX is the fit of X in other units: loadings, mean, noise scale by c, the ARD
    precisions by c⁻², the bound shifts by −ND log c; ARD prunes alike at any scale."""
    X, _ = _synthetic(8, N=200, D=6)
    r = models.pca(X, 5)
    for c in (1e-6, 1e6):
        rc = models.pca(c * X, 5)
        assert rc.n_iter == r.n_iter and rc.active().sum() == r.active().sum() == 3
        big = c * np.abs(r.loadings).max()
        # (the L-BFGS path of the rotation differs in the last digits: loadings agree to the convergence level)
        np.testing.assert_allclose(rc.loadings, c * r.loadings, atol=1e-4 * big)
        np.testing.assert_allclose(rc.mean, c * r.mean, rtol=1e-6, atol=1e-6 * big)
        np.testing.assert_allclose(rc.noise_variance, c**2 * r.noise_variance, rtol=1e-6)
        np.testing.assert_allclose(rc.ard_precision, r.ard_precision / c**2, rtol=1e-4)
        np.testing.assert_allclose(rc.elbo, r.elbo - X.size * np.log(c), rtol=1e-9)


def test_unconverged_run_warns():
    X, _ = _synthetic(7, N=100, D=6)
    with pytest.warns(fg.ConvergenceWarning, match="not converged after 3 sweeps"):
        r = models.pca(X, 4, max_iter=3)
    assert not r.converged and r.warnings


@pytest.mark.parametrize("kwargs,match", [
    ({"X": np.ones(5), "n_components": 1}, "matrix"),
    ({"n_components": 0}, "between 1 and D = 6"),
    ({"n_components": 7}, "between 1 and D = 6"),
    ({"n_components": 2.0}, "integer"),
    ({"n_components": 2, "noise": "full"}, "noise"),
    ({"n_components": 2, "init": np.ones((5, 2))}, r"shape \(D, K\) = \(6, 2\)"),
    ({"n_components": 2, "init": "svd"}, "init"),
    ({"X": np.array([[1.0, np.inf], [0.0, 1.0]]), "n_components": 1}, r"X \(its observed entries\) must be finite"),
    ({"X": np.array([[1.0, np.nan], [0.0, np.nan], [2.0, np.nan]]), "n_components": 1},
     r"column\(s\) \[1\] of X have no observed entry"),
    ({"n_components": 2, "mask": np.ones((20, 5), bool)}, r"mask of 'X' has shape \(20, 5\)"),
    ({"n_components": 2, "mask": np.ones((20, 6))}, "mask of 'X' must be boolean"),
])
def test_bad_input(kwargs, match):
    X = np.random.default_rng(0).normal(size=(20, 6))
    kwargs = {"X": X, **kwargs}
    with pytest.raises(fg.ModelError, match=match):
        models.pca(**kwargs)
