"""A constant operand with more axes than its random operands' plates: ``beta * x`` with an unplated beta and
one x per row puts x on the model's plate of its size (factorgraph/graph/expressions.py ``_on_plates_by_size``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import factorgraph as fg
from factorgraph.graph.nodes import ModelError

N, G, D = 60, 5, 3


def _fit(m: fg.Model) -> fg.Result:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        return fg.infer(m, max_iter=500, tol=None, param_tol=1e-12)


def test_common_slope_is_on_the_rows_plate():
    rng = np.random.default_rng(0)
    x = rng.normal(size=N)
    with fg.Model("slope") as m:
        n = fg.plate("n", N)
        beta = fg.gaussian("beta", 0.5, precision=4.0)
        left, right = fg.deterministic("left", beta * x), fg.deterministic("right", x * beta)
        fg.gaussian("y", mean=left + fg.gaussian("nu", 0.0, precision=1.0), precision=1.0, plates=[n],
                    observed=rng.normal(size=N))
    assert left.plates == right.plates == (n,)
    r = _fit(m)
    q = r.posterior("beta")
    for name in ("left", "right"):
        np.testing.assert_allclose(r.posterior(name).mean(), x * q.mean(), rtol=1e-13)
        np.testing.assert_allclose(r.posterior(name).var(), x**2 * q.var(), rtol=1e-10)


@pytest.mark.parametrize("order", ["rows first", "columns first"])
def test_a_matrix_on_two_plates_follows_the_plate_order(order):
    """X (N × D) times b plated over d: X's first axis goes on n, whichever plate the model made first."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(N, D))
    with fg.Model("matrix") as m:
        if order == "rows first":
            n, d = fg.plate("n", N), fg.plate("d", D)
        else:
            d, n = fg.plate("d", D), fg.plate("n", N)
        b = fg.gaussian("b", np.arange(D, dtype=float), precision=1.0, plates=[d])
        prod = fg.deterministic("prod", b * X)
        rows_first = order == "rows first"
        fg.gaussian("y", mean=prod, precision=1.0, plates=[n, d] if rows_first else [d, n],
                    observed=rng.normal(size=(N, D) if rows_first else (D, N)))
    assert set(prod.plates) == {n, d}
    r = _fit(m)
    want = X * r.posterior("b").mean()
    np.testing.assert_allclose(r.posterior("prod").mean(), want if rows_first else want.T, rtol=1e-12)


def test_common_slope_fit_equals_the_inner_product_form():
    """a[g] + beta·x and a[g] + fg.inner(x[:, None], w) with a one-dimensional w are the same model."""
    rng = np.random.default_rng(2)
    g = np.r_[np.arange(G), rng.integers(0, G, N - G)]
    x = rng.normal(size=N)
    y = rng.normal(size=G)[g] + 0.7 * x + 0.3 * rng.normal(size=N)

    def fit(form):
        with fg.Model(form) as m:
            n, c = fg.plate("n", N), fg.plate("c", G)
            a = fg.gaussian("a", fg.gaussian("mu", 0.0, precision=0.01), precision=fg.gamma("ta", 1.0, 1.0), plates=[c])
            if form == "scalar":
                slope = fg.gaussian("beta", 0.0, precision=1.0) * x
            else:
                slope = fg.inner(x[:, None], fg.mv_gaussian("beta", np.zeros(1), precision=1.0), [n])
            fg.gaussian("y", mean=a[g] + slope, precision=fg.gamma("tau", 1.0, 1.0), plates=[n], observed=y)
        return _fit(m)

    s, v = fit("scalar"), fit("inner")
    assert s.elbo == pytest.approx(v.elbo, rel=1e-12)
    assert float(s.posterior("beta").mean()) == pytest.approx(float(v.posterior("beta").mean()[0]), rel=1e-10)
    assert float(s.posterior("beta").mean()) == pytest.approx(0.7, abs=0.1)
    np.testing.assert_allclose(s.posterior("a").mean(), v.posterior("a").mean(), rtol=1e-10)


def test_no_plate_of_that_size_is_named():
    with fg.Model("none"):
        fg.plate("n", N)
        beta = fg.gaussian("beta", 0.0, precision=1.0)
        with pytest.raises(ModelError, match=r"shape \(7,\).*no plate of model 'none' has size 7.*\('n', 60\)"):
            beta * np.ones(7)


def test_two_plates_of_that_size_are_ambiguous():
    with fg.Model("two"):
        fg.plate("n", N)
        fg.plate("m", N)
        beta = fg.gaussian("beta", 0.0, precision=1.0)
        with pytest.raises(ModelError, match=r"plates \['n', 'm'\] all have size 60.*ambiguous.*fg\.inner"):
            beta * np.ones(N)


def test_a_singleton_leading_axis_is_dropped():
    with fg.Model("singleton") as m:
        n = fg.plate("n", N)
        beta = fg.gaussian("beta", 0.0, precision=1.0)
        prod = beta * np.ones((1, N))
    assert prod.plates == (n,)
    assert m.deterministics[-1] is prod


def _slope_model(x, g, y, generic=False, G=G):
    """a[county] + beta·x with x, the labels and y data nodes, so set_data and fg.predict can replace them."""
    with fg.Model("data slope") as m:
        n, c = fg.plate("n", len(y)), fg.plate("c", G)
        xd, gd, yd = fg.data("x", x), fg.data("county", g), fg.data("y", y)
        a = fg.gaussian("a", fg.gaussian("mu", 0.0, precision=0.01), precision=fg.gamma("ta", 1.0, 1.0), plates=[c])
        mean = xd * fg.gaussian("beta", 0.0, precision=1.0) + a[gd]
        fg.gaussian("y", mean=mean + 0.0 if generic else mean, precision=fg.gamma("tau", 1.0, 1.0), plates=[n],
                    observed=yd)
    return m


def _slope_data(seed=3, n=N):
    rng = np.random.default_rng(seed)
    g = np.r_[np.arange(G), rng.integers(0, G, n - G)]
    x = rng.normal(size=n)
    return x, g, rng.normal(size=G)[g] + 0.7 * x + 0.3 * rng.normal(size=n)


def test_a_data_operand_is_replaced_by_set_data():
    """set_data on a product's data operand (new rows) gives the fit of a model built on the new data."""
    x, g, y = _slope_data()
    m = _slope_model(x, g, y)
    before = _fit(m).elbo
    m.set_data(x=x[:40], county=g[:40], y=y[:40])
    after = _fit(m)
    fresh = _fit(_slope_model(x[:40], g[:40], y[:40]))
    assert after.elbo != pytest.approx(before, rel=1e-3)
    assert after.elbo == pytest.approx(fresh.elbo, rel=1e-12)
    np.testing.assert_allclose(after.posterior("a").mean(), fresh.posterior("a").mean(), rtol=1e-10)
    assert any("grouped linear-Gaussian" in note for note in after.notes)
    generic = _fit(_slope_model(x[:40], g[:40], y[:40], generic=True))
    assert after.elbo == pytest.approx(generic.elbo, rel=1e-10)


def test_predict_at_new_rows_of_a_data_operand():
    x, g, y = _slope_data()
    r = _fit(_slope_model(x, g, y))
    xn, gn = np.array([-1.0, 0.0, 2.0]), np.array([0, 1, 4])
    draws = fg.predict(r, data={"x": xn, "county": gn}, draws=20000, seed=1)["y"]
    assert draws.shape == (20000, 3)
    mean = r.posterior("a").mean()[gn] + r.posterior("beta").mean() * xn
    se = draws.std(0) / np.sqrt(draws.shape[0])
    assert np.all(np.abs(draws.mean(0) - mean) < 5 * se)


def test_a_data_operand_must_span_its_plates():
    with fg.Model("broadcast"):
        fg.plate("n", N)
        d = fg.plate("d", D)
        b = fg.gaussian("b", 0.0, precision=1.0, plates=[d])
        with pytest.raises(ModelError, match=r"data 'x' of shape \(60, 1\) broadcasts along plate 'd' \(size 3\)"):
            b * fg.data("x", np.ones((N, 1)))


def test_a_failed_set_data_leaves_the_operand():
    x, g, y = _slope_data()
    m = _slope_model(x, g, y)
    before = _fit(m).elbo
    with pytest.raises(ModelError, match="plate 'n'"):
        m.set_data(x=x[:40], county=g[:50], y=y[:40])
    bad = x[:40].copy()
    bad[3] = np.nan  # refused while the operand is replaced, after the plates were resized
    with pytest.raises(ModelError, match="product: data 'x' must be finite, got nan"):
        m.set_data(x=bad, county=g[:40], y=y[:40])
    assert m.plates["n"].size == N
    assert _fit(m).elbo == pytest.approx(before, rel=1e-14)


def test_data_node_arithmetic():
    """A data node combines with random nodes on either side (x * b, b - x, x - b: expressions set_data can
    replace) and refuses untracked arithmetic with constants by name (a raw TypeError before)."""
    x0 = np.arange(5.0)
    with fg.Model("data arithmetic") as m:
        n = fg.plate("n", 5)
        x = fg.data("x", x0)
        b = fg.gaussian("b", 0.0, precision=1.0)
        for name, expr in (("xb", x * b), ("bx", b * x), ("b_minus_x", b - x), ("x_minus_b", x - b),
                           ("x_plus_b", x + b)):
            fg.deterministic(name, expr)
        fg.gaussian("y", b, precision=1.0, plates=[n], observed=np.ones(5))
        for bad, match in ((lambda: 0.3 * x, r"data 'x': arithmetic between a data node and a constant \(0.3\)"),
                           (lambda: 1 - x, r"data 'x': arithmetic .* constant \(1\)"),
                           (lambda: -x, r"data 'x': -x is not tracked"),
                           (lambda: x / 2.0, r"data 'x': division")):
            with pytest.raises(ModelError, match=match):
                bad()
    for scale in (1.0, 2.0):
        if scale == 2.0:
            m.set_data(x=2.0 * x0)
        r = _fit(m)
        eb, xs = float(r.posterior("b").mean()), scale * x0
        for name, want in (("xb", xs * eb), ("bx", xs * eb), ("b_minus_x", eb - xs), ("x_minus_b", xs - eb),
                           ("x_plus_b", xs + eb)):
            np.testing.assert_allclose(r.posterior(name).mean(), want, rtol=1e-12, atol=1e-12, err_msg=name)
