"""Factored plate contractions (factors/contract.py) equal the same sums of the formed arrays."""

import numpy as np
import pytest

from factors.contract import Terms, lazy_sum, pair_inner, pair_reduce, plate_product
from factors.plating import reduce, weighted_reduce, weighted_total

# plate shapes of the two operands (src plates 0, 1, 2), as in a gated factor: rows × components × other
SHAPES = [((4, 1, 1), (1, 3, 1)), ((4, 3, 1), (1, 3, 1)), ((4, 1, 2), (4, 3, 1)), ((1, 1, 1), (4, 3, 2)),
          ((4, 3, 2), (4, 3, 2)), ((1, 3, 2), (4, 1, 1))]


@pytest.mark.parametrize(("sa", "sb"), SHAPES)
@pytest.mark.parametrize("ev", [1, 2])
def test_pair_inner_equals_formed_sum(sa, sb, ev):
    rng = np.random.default_rng(0)
    e = (3,) * ev
    a, b = rng.normal(size=sa + e), rng.normal(size=sb + e)
    got = pair_inner(a, b, ev)
    np.testing.assert_allclose(got, (a * b).sum(axis=tuple(range(-ev, 0))), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("sa", "sb"), SHAPES)
@pytest.mark.parametrize("dst", [(), (0,), (1,), (0, 2), (1, 2), (0, 1, 2)])
def test_pair_reduce_equals_formed_sum(sa, sb, dst):
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=sa + (3,)), rng.normal(size=sb + (2,))
    sizes = (4, 3, 2)
    full = np.broadcast_to(a[..., :, None] * b[..., None, :], sizes + (3, 2))
    summed = tuple(i for i in range(3) if i not in dst)
    expected = full.sum(axis=summed)
    # kept plates where both operands are singletons stay singletons
    shape = [max(a.shape[i], b.shape[i]) for i in dst] + [3, 2]
    got = pair_reduce(a, 1, b, 1, (0, 1, 2), dst, sizes)
    assert list(got.shape) == shape
    np.testing.assert_allclose(np.broadcast_to(got, expected.shape), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("sa", "sb"), SHAPES)
@pytest.mark.parametrize("dst", [(), (0,), (1,), (1, 2)])
@pytest.mark.parametrize("weighted", [False, True])
def test_terms_reduce_like_the_formed_message(sa, sb, dst, weighted):
    rng = np.random.default_rng(2)
    D = 3
    x, mu = rng.normal(size=sa + (D,)), rng.normal(size=sb + (D,))
    xx, lam = rng.normal(size=sa + (D, D)), rng.normal(size=sb + (D, D))
    t = Terms((1.0, xx), (-1.0, "outer", x, mu), (-0.5, "outer", mu, x), (1.0, lam))
    mv = Terms((1.5, "matvec", lam, x))
    sizes, src = (4, 3, 2), (0, 1, 2)
    w = rng.uniform(size=(4, 3, 1)) if weighted else None
    for terms, ev in ((t, 2), (t.scaled(-0.5), 2), (mv, 1)):
        formed = np.asarray(terms)
        if w is None:
            got, expected = reduce(terms, src, dst, sizes, ev), reduce(formed, src, dst, sizes, ev)
        else:
            got, expected = (weighted_reduce(terms, w, src, dst, sizes, ev),
                             weighted_reduce(formed, w, src, dst, sizes, ev))
        np.testing.assert_allclose(np.broadcast_to(got, expected.shape), expected, rtol=1e-12, atol=1e-12)


def test_formed_terms():
    rng = np.random.default_rng(3)
    x, mu, lam = rng.normal(size=(4, 1, 3)), rng.normal(size=(1, 2, 3)), rng.normal(size=(1, 2, 3, 3))
    np.testing.assert_allclose(np.asarray(Terms((2.0, "outer", x, mu))), 2.0 * x[..., :, None] * mu[..., None, :])
    np.testing.assert_allclose(np.asarray(Terms((1.0, "matvec", lam, x))), np.einsum("...ij,...j->...i", lam, x))
    assert Terms((1.0, "outer", x, mu)).shape == (4, 2, 3, 3)


@pytest.mark.parametrize(("sa", "sb"), SHAPES)
@pytest.mark.parametrize("dst", [(), (0,), (1,), (0, 1), (1, 2), (0, 1, 2)])
@pytest.mark.parametrize("ev", [0, 1])
@pytest.mark.parametrize("weighted", [False, True])
def test_plate_product_reduces_like_the_formed_product(sa, sb, dst, ev, weighted):
    """a·b on different plates (a gated Bernoulli's E[x_nd](E[log p_kd] − E[log(1−p_kd)])), plus a plain term,
    summed over plates with or without per-instance weights, equals the same sum of the formed array."""
    rng = np.random.default_rng(4)
    e = (2,) * ev
    a, b, c = rng.normal(size=sa + e), rng.normal(size=sb + e), rng.normal(size=sb + e)
    lazy = lazy_sum(plate_product(a, b), c)
    dense = a * b + c
    pairs = list(zip(sa, sb, strict=True))
    if any(x != 1 and y == 1 for x, y in pairs) and any(y != 1 and x == 1 for x, y in pairs):
        assert isinstance(lazy, Terms)  # each has plates the other lacks: never formed
    else:
        assert isinstance(lazy, np.ndarray)  # no larger than an operand: formed at once
    np.testing.assert_allclose(np.asarray(lazy), dense, rtol=1e-12, atol=1e-12)
    sizes, src = (4, 3, 2), (0, 1, 2)
    w = rng.uniform(size=(4, 3, 1)) if weighted else None
    got = reduce(lazy, src, dst, sizes, ev) if w is None else weighted_reduce(lazy, w, src, dst, sizes, ev)
    expected = reduce(dense, src, dst, sizes, ev) if w is None else weighted_reduce(dense, w, src, dst, sizes, ev)
    np.testing.assert_allclose(np.broadcast_to(got, expected.shape), expected, rtol=1e-12, atol=1e-12)
    if ev == 0:
        full = np.broadcast_to(dense, sizes) * (1.0 if w is None else w)
        assert weighted_total(lazy, w, src, sizes) == pytest.approx(full.sum(), rel=1e-12, abs=1e-12)


def test_plate_product_on_fewer_plates_than_the_factor():
    """Operands with fewer leading axes than the factor's plates broadcast as numpy does (aligned right); a
    summed plate where every operand is a singleton multiplies by its size."""
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(4, 1)), rng.normal(size=(3,))  # plates (1, 2) of (0, 1, 2); plate 0 repeated
    t = plate_product(a, b)
    assert isinstance(t, Terms)
    sizes = (5, 4, 3)
    dense = np.broadcast_to(a * b, sizes)
    for dst in [(), (1,), (2,), (0, 2)]:
        expected = dense.sum(axis=tuple(i for i in range(3) if i not in dst))
        got = reduce(t, (0, 1, 2), dst, sizes, 0)
        np.testing.assert_allclose(np.broadcast_to(got, expected.shape), expected, rtol=1e-12)
