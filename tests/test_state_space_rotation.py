"""The rotation speed-up of ``models.linear_state_space(rotate=True)`` (``StateRotation``, ``markov_chain_term``).

* the chain term's gradient is the finite difference of its value;
* for any invertible R (not only the optimal one) the ELBO the engine computes from scratch after the transform
  changes by exactly Σ f_t(R) − Σ f_t(I), the change the rotation terms predict — so the terms are the bound;
* applied after each sweep (the optimal R), the reported gain is the ELBO's rise and is ≥ 0; a rotated fit's
  ELBO never falls between sweeps;
* on data from a 2-D state model fitted with state_dim = 4, the rotated fit meets the stopping rule in far
  fewer sweeps than the unrotated one (which has not after 10× as many) and reaches an ELBO at least as high.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from benchmarks.state_space_rotation import synthetic
from distributions import MvGaussian
from factorgraph import models
from factorgraph.graph.nodes import ModelError
from factorgraph.models.state_space import _pca_loadings, _series, linear_state_space_model
from schedules import infer
from schedules.rotation import StateRotation, evaluate, markov_chain_term, similarity_ard_term


def _fd_grad(term, R, h=1e-6):
    g = np.zeros_like(R)
    for i in range(R.shape[0]):
        for j in range(R.shape[1]):
            E = np.zeros_like(R)
            E[i, j] = h
            g[i, j] = (evaluate([term], R + E)[0] - evaluate([term], R - E)[0]) / (2 * h)
    return g


@pytest.mark.parametrize("which", ["chain", "similarity"])
def test_state_space_term_gradient_is_finite_difference(which):
    rng = np.random.default_rng(4)
    B = rng.normal(size=(3, 8))
    if which == "chain":
        term = markov_chain_term(B @ B.T + np.eye(3), 23.0, rng.normal(size=(3, 3)), rng.normal(size=(3, 3)))
    else:
        S = rng.normal(size=(3, 3, 5))
        term = similarity_ard_term(rng.normal(size=(3, 3)), S @ S.transpose(0, 2, 1) / 5 + 0.1 * np.eye(3), 1e-3, 2.0)
    R = np.eye(3) + 0.3 * rng.normal(size=(3, 3))
    np.testing.assert_allclose(evaluate([term], R)[1], _fd_grad(term, R), rtol=1e-5, atol=1e-6)


def _fit_with(callback, T=60, seed=1, D=3, max_iter=6):
    """linear_state_space's model and start, run by fg.infer with ``callback(it, L, eng)`` after each sweep."""
    y = synthetic(seed, T=T, P=5)
    model = linear_state_space_model(y, D)
    Y, mask = _series(y, "test")
    C0 = _pca_loadings(Y, mask, D) + 1e-2 * np.random.default_rng(0).standard_normal((Y.shape[1], D))
    init = {"C": MvGaussian(mean=C0, cov=np.broadcast_to(1e-2 * np.eye(D), C0.shape + (D,)))}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        infer(model, max_iter=max_iter, tol=None, init=init, callbacks=[callback])


@pytest.mark.parametrize("full", [True, False])
def test_any_rotation_changes_the_elbo_by_the_predicted_amount(full):
    rot = StateRotation(1e-3, full=full)
    rng = np.random.default_rng(7)
    seen = []

    def callback(it, L, eng):
        eng.update(eng.c.model.variables["alpha"])  # the ARD terms assume the optimal q(α), q(γ)
        eng.update(eng.c.model.variables["gamma"])
        before = eng.elbo()
        R = np.eye(3) + 0.2 * rng.normal(size=(3, 3))
        predicted = evaluate(rot.terms(eng), R)[0] - evaluate(rot.terms(eng), np.eye(3))[0]
        rot.apply(eng, R)
        seen.append((eng.elbo() - before, predicted))

    _fit_with(callback)
    actual, predicted = np.array(seen).T
    assert np.all(np.abs(predicted) > 1e-2)  # a real move, up or down
    np.testing.assert_allclose(actual, predicted, rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("full", [True, False])
def test_optimal_rotation_gain_is_the_elbo_rise(full):
    rot = StateRotation(1e-3, full=full)
    seen = []

    def callback(it, L, eng):
        eng.update(eng.c.model.variables["alpha"])
        eng.update(eng.c.model.variables["gamma"])
        before = eng.elbo()
        gain = rot(eng)
        seen.append((eng.elbo() - before, gain))

    _fit_with(callback, max_iter=8)
    actual, gain = np.array(seen).T
    assert np.all(gain >= 0.0) and np.sum(gain > 1e-6) >= 4
    np.testing.assert_allclose(actual, gain, rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("rotate", [True, "right"])
def test_rotated_fit_is_monotone(rotate):
    y = synthetic(0, T=60, P=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = models.linear_state_space(y, 4, rotate=rotate, max_iter=80)
    tr = r.elbo_trace
    assert not any("decreased" in w for w in r.warnings)
    assert np.all(np.diff(tr) >= -1e-9 * np.abs(tr[1:]))


def test_rotation_converges_in_far_fewer_sweeps():
    y = synthetic(0, T=60, P=5)  # a 2-D state fitted with 4 dimensions
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rotated = models.linear_state_space(y, 4, rotate=True, max_iter=300)
        plain = models.linear_state_space(y, 4, rotate=False, max_iter=10 * rotated.n_iter)
    assert rotated.converged and rotated.n_iter <= 100  # 53 when written
    assert not plain.converged  # still moving after 10× the sweeps (> 1500 here)
    assert rotated.elbo >= plain.elbo
    # two state dimensions switched off (E[γ] of C's columns ≫ those of the used ones)
    g = np.sort(rotated.posteriors["gamma"].mean())
    assert g[2] > 100 * g[1]


def test_bad_rotate_is_refused():
    with pytest.raises(ModelError, match="rotate"):
        models.linear_state_space(synthetic(0, T=20, P=3), 2, rotate="left")


def test_sweep_hooks_are_refused_where_they_would_not_run():
    import factorgraph as fg

    model = linear_state_space_model(synthetic(0, T=30, P=3), 2)
    model.sweep_hooks.append(StateRotation(1e-3))
    with pytest.raises(ModelError, match="sweep hooks"):
        fg.infer(model, fg.SVI(batch_size=10, n_data=30), data=iter([]))


def test_rotated_chain_draws_match_its_moments():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = models.linear_state_space(synthetic(0, T=30, P=3), 3, rotate=True, max_iter=20)
    q = r.posteriors["x"]  # the last sweep ended with a rotation: the pushed-forward chain and its sampler
    s = q.sample(20000, rng=1)
    sd = np.sqrt(np.diagonal(q.cov(), axis1=-2, axis2=-1))
    assert np.max(np.abs(s.mean(0) - q.mean()) / sd) < 0.05
    np.testing.assert_allclose(np.einsum("stk,stl->tkl", s, s) / len(s), q.second, atol=0.05 * np.abs(q.second).max())
