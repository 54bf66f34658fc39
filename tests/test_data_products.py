"""The passes over X that a sweep makes (factors.data_products) agree with plain numpy, on one thread
and on the row-range threads, for any number of rows relative to the block size."""

from __future__ import annotations

import numpy as np
import pytest

from factors.data_products import _MIN_WORK, _ROWS, _ranges, gram, projected_moments, row_threads, weighted_grams


def _spd(rng, K, D):
    A = rng.normal(size=(K, D, D))
    return A @ A.transpose(0, 2, 1) / D + np.eye(D)


@pytest.mark.parametrize("N", [5, _ROWS, 2 * _ROWS + 17, 5 * _ROWS + 3])
@pytest.mark.parametrize("threads", [1, 2])
def test_projected_moments(N, threads):
    rng = np.random.default_rng(N + threads)
    D, K = 7, 3
    X, mean, second = rng.normal(size=(N, D)), rng.normal(size=(K, D)), _spd(rng, K, D)
    with row_threads(threads):
        m, s = projected_moments(X, mean, second)
    np.testing.assert_allclose(m, X @ mean.T, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(s, np.einsum("nd,kde,ne->nk", X, second, X), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("N", [5, _ROWS, 2 * _ROWS + 17, 5 * _ROWS + 3])
@pytest.mark.parametrize("threads", [1, 2])
def test_weighted_grams(N, threads):
    """Columns of E ≤ 0 (the syrk branch) and of both signs (the general product)."""
    rng = np.random.default_rng(N * threads)
    D = 6
    X, H = rng.normal(size=(N, D)), rng.normal(size=(N, 3))
    E = np.stack([-rng.uniform(0.0, 1.0, N), rng.normal(size=N), -rng.uniform(0.0, 2.0, N)], 1)
    with row_threads(threads):
        lin, prec = weighted_grams(X, E, H)
    np.testing.assert_allclose(lin, H.T @ X, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(prec, np.einsum("nk,nd,ne->kde", E, X, X), rtol=1e-12, atol=1e-9)
    np.testing.assert_array_equal(prec[::2], prec[::2].transpose(0, 2, 1))  # syrk columns: exactly symmetric


def test_row_ranges_split_only_large_passes():
    with row_threads(2):
        assert _ranges(_MIN_WORK // 20 - 1, 20) == [(0, _MIN_WORK // 20 - 1)]
        r = _ranges(4 * _MIN_WORK + 1, 1)
        assert len(_ranges(_MIN_WORK // 50, 200)) == 2  # few rows, much work per row
    assert len(r) == 2 and r[0][0] == 0 and r[-1][1] == 4 * _MIN_WORK + 1 and r[0][1] == r[1][0]
    assert _ranges(10 * _MIN_WORK, 20) == [(0, 10 * _MIN_WORK)]  # outside row_threads: one range


def test_gram_blocked():
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(2 * _ROWS + 5, 4)), rng.normal(size=2 * _ROWS + 5)
    G, b = gram(X, y)
    np.testing.assert_allclose(G, X.T @ X, rtol=1e-12)
    np.testing.assert_allclose(b, X.T @ y, rtol=1e-12)
