"""A Result carries its model (for ``to_arviz`` and the pointwise log-likelihood), so results and the estimators
holding them must pickle with it, and still work after a round trip."""

import pickle

import numpy as np
import pytest

import factorgraph as fg
from factorgraph import models


def _linear():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = X @ [1.0, -2.0, 0.5] + 0.3 * rng.normal(size=40)
    return models.linear_regression(X, y, ard=True)


def _normal_gamma_block():
    rng = np.random.default_rng(1)
    with fg.Model("block") as m:
        w = fg.gaussian_gamma("w", np.zeros(2), 1.0, shape=1.0, rate=1.0)
        n = fg.plate("n", 30)
        X = rng.normal(size=(30, 2))
        fg.gaussian("y", mean=fg.inner(X, w, [n]), precision=w.tau, plates=[n],
                    observed=X @ [1.0, 2.0] + rng.normal(size=30))
    return fg.infer(m)


def _mixture():
    y = np.r_[np.random.default_rng(2).normal(-2, 1, 20), np.random.default_rng(3).normal(2, 1, 20)]
    with fg.Model("mixture") as m:
        k, n = fg.plate("k", 2), fg.plate("n", 40)
        pi = fg.dirichlet("pi", np.ones(2))
        mu = fg.gaussian("mu", mean=0.0, precision=0.1, plates=[k])
        z = fg.categorical("z", pi, plates=[n])
        fg.gaussian("y", mean=mu[z], precision=1.0, plates=[n], observed=y)
    return fg.infer(m, seed=0)


def _hmm():
    y = np.r_[np.random.default_rng(4).poisson(2.0, 30), np.random.default_rng(5).poisson(9.0, 30)]
    return models.hmm(y, 2, "poisson")


def _state_space(rotate=False):
    import warnings

    y = np.cumsum(np.random.default_rng(6).normal(size=(40, 2)), 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        return models.linear_state_space(y, 2, max_iter=30, rotate=rotate)


def _state_space_rotated():
    return _state_space(rotate=True)


@pytest.mark.parametrize("fit", [_linear, _normal_gamma_block, _mixture, _hmm, _state_space, _state_space_rotated])
def test_result_round_trip_keeps_posteriors_and_arviz(fit):
    r = fit()
    r = getattr(r, "result", r)
    r2 = pickle.loads(pickle.dumps(r))
    assert r2.elbo == r.elbo
    for name, q in r.posteriors.items():
        np.testing.assert_array_equal(np.asarray(r2.posteriors[name].mean()), np.asarray(q.mean()))
    a, b = r.to_arviz(draws=48, seed=1), r2.to_arviz(draws=48, seed=1)
    for v in a.log_likelihood.data_vars:
        np.testing.assert_array_equal(a.log_likelihood[v].values, b.log_likelihood[v].values)


def test_model_pickles_without_its_compiled_structure_and_refits_the_same():
    r = _mixture()
    m = r.model
    assert m._compiled is not None
    m2 = pickle.loads(pickle.dumps(m))
    assert m2._compiled is None
    r2 = fg.infer(m2, seed=0)
    assert r2.elbo == pytest.approx(r.elbo, rel=1e-12)


@pytest.mark.parametrize("fit", [_hmm, _state_space, _state_space_rotated])
def test_chain_posteriors_draw_the_same_paths_after_a_round_trip(fit):
    """A chain's q (Markov or Gauss–Markov, rotated or not) keeps its joint sampler through pickling."""
    r = fit()
    name = next(k for k, q in r.posteriors.items() if type(q).__name__ in ("CategoricalChain", "GaussianChain"))
    q, q2 = r.posterior(name), pickle.loads(pickle.dumps(r)).posterior(name)
    a = q.sample(4, rng=np.random.default_rng(7))
    np.testing.assert_array_equal(a, q2.sample(4, rng=np.random.default_rng(7)))
    assert np.ptp(a, axis=0).max() > 0  # real draws, not a constant
