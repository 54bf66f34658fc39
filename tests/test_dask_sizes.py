"""Dask data past the size of one row block (8192 rows), in small chunks: every pass the build makes over the data
(Gram matrices, Xᵀy, counts, label checks, seeding, priors from the data) is a reduction over the chunks, and the
fit equals the in-memory fit.  Run on Dask's threaded scheduler."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest

import factorgraph as fg

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

N, CHUNK = 20000, 1500  # past one 8192-row block, in 14 chunks (the last one short)
RTOL = 1e-8


@pytest.fixture(autouse=True)
def threaded():
    with dask.config.set(scheduler="threads"):
        yield


def _chunked(a):
    return da.from_array(a, chunks=(CHUNK,) + a.shape[1:])


def _regression(N=N, D=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    y = X @ np.array([1.0, -2.0, 0.5])[:D] + 0.3 * rng.normal(size=N)
    return X, y


def _same(r0, r1, names, rtol=RTOL):
    assert r0.converged and r1.converged
    assert abs(r1.elbo - r0.elbo) <= rtol * abs(r0.elbo)
    for name in names:
        for a, b in zip(r0.posterior(name).natural, r1.posterior(name).natural, strict=True):
            np.testing.assert_allclose(b, a, rtol=rtol, atol=rtol * np.max(np.abs(a)))


def _factorised(X, y):
    """Weights one Gaussian per column (a plate), an intercept, a Gamma noise precision: the likelihood stays
    factorised over the rows."""
    n_rows, D = X.shape
    with fg.Model("factorised") as m:
        n, d = fg.plate("n", n_rows), fg.plate("d", D)
        w = fg.gaussian("w", 0.0, 1.0, plates=[d])
        tau = fg.gamma("tau", 1.0, 1.0)
        b = fg.gaussian("b", 0.0, 1.0)
        fg.gaussian("y", fg.inner(X, w, plates=[n]) + b, tau, plates=[n], observed=y)
    return m


@contextmanager
def _passes():
    """The graphs dask runs inside the block (one per ``compute``: one pass over the chunks each)."""
    from dask.callbacks import Callback

    runs = []
    with Callback(start=lambda dsk: runs.append(len(dsk))):
        yield runs


def test_linear_regression_of_dask_data_past_one_row_block_equals_in_memory():
    """XᵀX, Xᵀy and yᵀy of the fused likelihood come from one dask reduction over the chunks."""
    X, y = _regression()
    with _passes() as passes:
        fg.models.linear_regression_model(_chunked(X), _chunked(y))
    assert len(passes) == 1
    r0 = fg.models.linear_regression(X, y)
    r1 = fg.models.linear_regression(_chunked(X), _chunked(y))
    _same(r0, r1, ["w"])


def test_factorised_gaussian_weights_of_dask_data_past_one_row_block_equal_in_memory():
    X, y = _regression()
    r0 = fg.infer(_factorised(X, y), progress=False)
    r1 = fg.infer(_factorised(_chunked(X), _chunked(y)), progress=False)
    _same(r0, r1, ["w", "tau", "b"])


def _labels(X, seed=1):
    rng = np.random.default_rng(seed)
    return (rng.random(len(X)) < 1.0 / (1.0 + np.exp(-(X @ np.array([1.0, -2.0, 0.5]))))).astype(float)


def _clusters(seed=9):
    rng = np.random.default_rng(seed)
    return rng.permutation(np.concatenate([rng.normal(-3.0, 1.0, (N // 2, 2)), rng.normal(3.0, 1.0, (N - N // 2, 2))]))


def _binary(seed=5):
    rng = np.random.default_rng(seed)
    protos = np.array([[0.9, 0.8, 0.1, 0.2], [0.1, 0.2, 0.9, 0.7]])
    return (rng.random((N, 4)) < protos[rng.integers(0, 2, N)]).astype(float)


def _words(seed=6):
    rng = np.random.default_rng(seed)
    topic = (rng.random((N, 3)) < rng.choice([0.1, 0.9], N)[:, None]).astype(int)
    return 3 * topic + rng.integers(0, 3, (N, 3))


def test_logistic_regression_with_dask_labels_checks_them_over_the_chunks():
    """The labels' distinct values ({0, 1} here) are found per chunk and merged, not by reading every label."""
    X, _ = _regression()
    s = _labels(X)
    r0 = fg.models.logistic_regression(X, s)
    r1 = fg.models.logistic_regression(_chunked(X), _chunked(s))
    _same(r0, r1, ["w", "alpha"])
    with pytest.raises(fg.ModelError, match=r"y must be labels in"):
        fg.models.logistic_regression(_chunked(X), _chunked(2.0 * s))


def test_gaussian_mixture_of_dask_data_takes_its_default_priors_from_one_pass():
    """m₀ (the column means) and V₀ (the data covariance) are computed from the chunks once, as numpy arrays: the
    model holds no lazy prior, and the fit from k-means++ starts over the chunks equals the in-memory fit."""
    x = _clusters()
    with _passes() as passes:
        m = fg.models.gaussian_mixture_model(_chunked(x), 2)
    assert len(passes) == 1
    assert all(isinstance(v, np.ndarray) for v in m["theta"].prior.params.values())
    r0 = fg.models.gaussian_mixture(x, 2, n_init=2)
    r1 = fg.models.gaussian_mixture(_chunked(x), 2, n_init=2)
    _same(r0, r1, ["pi", "theta"])


@pytest.mark.parametrize("family", ["gaussian", "bernoulli", "categorical", "bernoulli_masked"])
def test_mixtures_of_dask_data_keep_the_data_in_their_chunks(family):
    """``mixture`` builds on the dask data itself (the observed values stay lazy: the fit is sharded), the
    categorical default V a maximum over the chunks; the fit equals the in-memory fit."""
    data, mask = {"gaussian": (_clusters(), None), "bernoulli": (_binary(), None), "categorical": (_words(), None),
                  "bernoulli_masked": (_binary(), np.random.default_rng(1).random((N, 4)) < 0.9)}[family]
    fam = family.split("_")[0]
    dmask = None if mask is None else _chunked(mask)
    m = fg.models.mixture_model(fam, 2, _chunked(data), mask=dmask)
    assert type(m["x"].value).__module__.startswith("dask")
    r0 = fg.models.mixture(fam, 2, data, mask=mask, n_init=1)
    r1 = fg.models.mixture(fam, 2, _chunked(data), mask=dmask, n_init=1)
    _same(r0, r1, ["pi", {"gaussian": "mu", "bernoulli": "p", "categorical": "phi"}[fam]], rtol=1e-8)
    assert r1.sharding["chunks"] == -(-N // CHUNK)
