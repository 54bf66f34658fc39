"""Dask data past the size of one row block (8192 rows), in small chunks: every pass the build makes over the data
(Gram matrices, Xᵀy, counts, label checks, seeding, priors from the data) is a reduction over the chunks, and the
fit equals the in-memory fit.  Run on Dask's threaded scheduler."""

from __future__ import annotations

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


def test_linear_regression_of_dask_data_past_one_row_block_equals_in_memory():
    """The Gram matrix XᵀX and Xᵀy of the fused likelihood come from one dask reduction over the chunks."""
    X, y = _regression()
    r0 = fg.models.linear_regression(X, y)
    r1 = fg.models.linear_regression(_chunked(X), _chunked(y))
    _same(r0, r1, ["w"])


def test_factorised_gaussian_weights_of_dask_data_past_one_row_block_equal_in_memory():
    X, y = _regression()
    r0 = fg.infer(_factorised(X, y), progress=False)
    r1 = fg.infer(_factorised(_chunked(X), _chunked(y)), progress=False)
    _same(r0, r1, ["w", "tau", "b"])
