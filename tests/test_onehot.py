"""Observed class labels held as labels (factors.onehot.OneHot): its operations against the dense one-hot rows, and
LDA fitted without ever forming the tokens × vocabulary matrix, equal to the same model with one-hot counts."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import factorgraph as fg
from factors.contract import pair_inner
from factors.onehot import OneHot
from factors.plating import expand, reduce, weighted_reduce


def _labels(rng, shape, K, missing=0.1):
    lab = rng.integers(0, K, shape)
    return np.where(rng.uniform(size=shape) < missing, -1, lab)


def test_operations_match_the_dense_rows():
    rng = np.random.default_rng(0)
    lab = _labels(rng, (6, 5), 7)
    o = OneHot(lab, 7)
    dense = np.asarray(o)
    assert dense.shape == o.shape == (6, 5, 7) and o.ndim == 3 and o.size == 210
    assert np.isnan(dense[lab < 0]).all() and np.array_equal(dense[lab >= 0].sum(-1), np.ones((lab >= 0).sum()))
    z = o.zeroed()
    zd = np.nan_to_num(dense)
    np.testing.assert_array_equal(np.asarray(z), zd)
    np.testing.assert_array_equal(2.0 * z - 1.0, 2.0 * zd - 1.0)  # arithmetic sees the dense rows
    np.testing.assert_array_equal(z[2, 1:3], zd[2, 1:3])
    np.testing.assert_array_equal(np.asarray(pickle.loads(pickle.dumps(o))), dense, strict=False)
    # a factor on plates (doc, w, k): the rows on (doc, w), components on k
    rows = expand(z, (0, 1), (0, 1, 2), 1)
    assert isinstance(rows, OneHot) and rows.shape == (6, 5, 1, 7)
    b = rng.normal(size=(1, 1, 3, 7))
    np.testing.assert_allclose(pair_inner(rows, b, 1), pair_inner(zd[:, :, None, :], b, 1), rtol=1e-15)
    np.testing.assert_allclose(pair_inner(b, rows, 1), pair_inner(b, zd[:, :, None, :], 1), rtol=1e-15)
    w = rng.uniform(size=(6, 5, 3))
    for dst in [(2,), (0, 2), (0, 1, 2), (), (1,)]:
        np.testing.assert_allclose(weighted_reduce(rows, w, (0, 1, 2), dst, (6, 5, 3), 1),
                                   weighted_reduce(zd[:, :, None, :], w, (0, 1, 2), dst, (6, 5, 3), 1),
                                   rtol=1e-13, atol=1e-13, err_msg=str(dst))
        np.testing.assert_allclose(reduce(rows, (0, 1, 2), dst, (6, 5, 3), 1),
                                   reduce(zd[:, :, None, :], (0, 1, 2), dst, (6, 5, 3), 1), rtol=1e-13)
    # weights constant along a plate the rows vary over, and a plate along which both are singletons
    w1 = rng.uniform(size=(1, 5, 3))
    np.testing.assert_allclose(weighted_reduce(rows, w1, (0, 1, 2), (2,), (6, 5, 3), 1),
                               weighted_reduce(zd[:, :, None, :], w1, (0, 1, 2), (2,), (6, 5, 3), 1), rtol=1e-13)
    with pytest.raises(ValueError, match="last axis"):
        o.reshape(30, 6)


def _lda(words, mask, K, counts=False):
    D, L = words.shape
    V = 60
    with fg.Model("lda") as m:
        doc, w, k = fg.plate("doc", D), fg.plate("w", L), fg.plate("k", K)
        theta = fg.dirichlet("theta", np.full(K, 0.5), plates=[doc])
        phi = fg.dirichlet("phi", np.full(V, 0.1), plates=[k])
        z = fg.categorical("z", theta, plates=[doc, w], categories=k)
        if counts:  # the same likelihood with dense one-hot rows: a one-trial multinomial (coefficient 1)
            fg.multinomial("words", 1, phi[z], plates=[doc, w], observed=np.eye(V)[words] * mask[..., None],
                           mask=mask)
        else:
            fg.categorical("words", phi[z], plates=[doc, w], observed=words, mask=mask)
    return m


def test_lda_never_forms_the_token_rows_and_equals_one_hot_counts():
    """LDA's fit from given starting responsibilities: the Categorical with labels held as labels gives the same
    fixed point and ELBO as a one-trial Multinomial with dense one-hot rows, and never forms its rows × vocabulary
    matrix (not in the fit, its start, the pointwise log-likelihood nor the predictive)."""
    from distributions import Categorical

    rng = np.random.default_rng(1)
    words = rng.integers(0, 60, (15, 12))
    mask = rng.uniform(size=words.shape) > 0.1
    r0 = rng.dirichlet(np.ones(3), size=words.shape)
    a_model, b_model = _lda(words, mask, 3), _lda(words, mask, 3, counts=True)
    a = fg.infer(a_model, init={"z": Categorical(probs=r0)}, tol=None, param_tol=1e-12, max_iter=3000)
    b = fg.infer(b_model, init={"z": Categorical(probs=r0)}, tol=None, param_tol=1e-12, max_iter=3000)
    assert a.elbo == pytest.approx(b.elbo, abs=1e-9)
    np.testing.assert_allclose(a.posterior("phi").concentration, b.posterior("phi").concentration, rtol=1e-9)
    fg.infer(a_model, seed=0, max_iter=5)  # the default start (token responsibilities from random topics)
    a.to_arviz(draws=4, chains=1)
    fg.predict(a, draws=2)
    assert a_model["words"].value._dense is None


def test_benchmark_runs_small():
    from benchmarks.lda_vocabulary import main

    rows = main(small=True)
    assert rows[0]["N"] == 20_000 and rows[0]["sec_per_sweep"] > 0 and rows[0]["peak_mb"] < rows[0]["dense_gb"] * 1e3
