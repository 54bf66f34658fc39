"""The build-time checks of large inputs: one read in numba (``factors.kernels.scan``), the same errors as the
numpy checks of small arrays, and ``checks.scanned_once`` (a canned model reads its X once)."""

from __future__ import annotations

import numpy as np
import pytest

import factorgraph as fg
from factorgraph import models
from factorgraph.graph import checks
from factors.kernels.scan import first_out_of_range

BIG = (1 << 16) + 7  # above the size from which the numba scan runs


@pytest.mark.parametrize("order", ["C", "F"])
def test_scan_finds_the_first_bad_entry_in_either_memory_order(order):
    X = np.asarray(np.random.default_rng(0).normal(size=(BIG // 4 + 1, 4)), order=order)
    assert first_out_of_range(X, 1e150) == -1
    flat = np.ravel(X, order="K")
    for bad in (np.nan, np.inf, -np.inf, 2e150):
        Y = X.copy(order=order)
        Y[-3, 2] = bad
        i = first_out_of_range(Y, 1e150)
        assert i >= 0 and not abs(np.ravel(Y, order="K")[i]) <= 1e150
        assert np.sum(~(np.abs(flat) <= 1e150)) == 0
    assert first_out_of_range(np.array([1e150, -1e150]), 1e150) == -1  # the limit itself is allowed


@pytest.mark.parametrize("bad, message", [(np.nan, r"X must be finite, got nan"),
                                          (-np.inf, r"X must be finite, got -inf"),
                                          (3e160, r"X has the value 3e\+160.*too large in magnitude")])
def test_a_large_input_gets_the_same_errors_as_a_small_one(bad, message):
    for n in (10, BIG):
        X = np.ones((n, 1))
        X[n - 2, 0] = bad
        with pytest.raises(fg.ModelError, match=message):
            checks.constant(X, "X")
    with pytest.raises(fg.ModelError, match=message):
        models.linear_regression(X, np.ones(BIG))


def test_scanned_once_reads_an_array_once_inside_the_block_only():
    X = np.ones((BIG, 1))
    with checks.scanned_once():
        checks.constant(X, "X")
        X[5, 0] = np.nan  # (no user code runs inside a canned model's block: this only shows the memo)
        checks.constant(X, "X")  # remembered as good: not read again
        with checks.scanned_once():  # nested blocks share the memo
            checks.constant(X, "X")
    with pytest.raises(fg.ModelError, match="X must be finite, got nan"):
        checks.constant(X, "X")  # outside the block every check reads the array
    with checks.scanned_once(), pytest.raises(fg.ModelError, match="X must be finite"):
        checks.constant(X, "X")


def test_linear_regression_input_scale_from_the_gram_matrix():
    """The start at the data's scale, (c₀/d₀)·s with s the mean square of X's entries (per column with ARD), takes
    s from diag(XᵀX)/N, which the model's build computed: the same s as from X itself."""
    from factorgraph.models.regression import _input_scale

    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 3)) * [1e-3, 1.0, 50.0]
    y = X @ [1.0, 2.0, 0.01] + rng.normal(size=300)
    for ard in (False, True):
        m = models.linear_regression_model(X, y, ard=ard)
        np.testing.assert_allclose(_input_scale(None, ard, "auto", m), _input_scale(X, ard, "auto"), rtol=1e-12)
        r = models.linear_regression(X, y, ard=ard, init="data")
        assert any(n.startswith("q(α) started at the data's scale") for n in r.notes)
