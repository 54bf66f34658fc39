"""Data nodes (fg.data) and model.set_data: refits reuse the compiled structure and equal fresh builds."""

import numpy as np
import pytest

import factorgraph as fg
from factorgraph import ModelError


def _regression_data(N, seed=0, D=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    y = X @ np.array([1.0, -2.0, 0.5])[:D] + 0.5 * rng.normal(size=N)
    return X, y


def _linear(X, y, use_data=True):
    """A linear regression with a Gamma noise precision: its Gaussian factor is fused (XᵀX, Xᵀy)."""
    wrap = fg.data if use_data else (lambda name, v: v)
    with fg.Model("lr") as m:
        n = fg.plate("n", len(y))
        w = fg.mv_gaussian("w", 0.0, precision=1e-2, dim=X.shape[1])
        tau = fg.gamma("tau", 1e-2, 1e-2)
        fg.gaussian("y", mean=fg.inner(wrap("X", X), w, plates=[n]), precision=tau, plates=[n],
                    observed=wrap("y", y))
    return m


def _logistic(X, y, use_data=True):
    wrap = fg.data if use_data else (lambda name, v: v)
    with fg.Model("logit") as m:
        n = fg.plate("n", len(y))
        w = fg.mv_gaussian("w", 0.0, precision=1.0, dim=X.shape[1])
        fg.bernoulli_logit("y", logit=fg.inner(wrap("X", X), w, plates=[n]), observed=wrap("y", y))
    return m


def _mixture(X, y, use_data=True):
    """A two-component mixture of the rows of y (X unused: the data plate is defined by y alone)."""
    wrap = fg.data if use_data else (lambda name, v: v)
    with fg.Model("mix") as m:
        n, k = fg.plate("n", len(y)), fg.plate("k", 2)
        pi = fg.dirichlet("pi", np.ones(2))
        mu = fg.gaussian("mu", 0.0, precision=0.01, plates=[k])
        tau = fg.gamma("tau", 1.0, 1.0)
        z = fg.categorical("z", pi, plates=[n])
        fg.gaussian("y", mean=mu[z], precision=tau, plates=[n], observed=wrap("y", y))
    return m


def _same(a, b, names):
    assert abs(a.elbo - b.elbo) <= 1e-12 * max(1.0, abs(b.elbo))
    assert a.n_iter == b.n_iter
    for k in names:
        qa, qb = a.posterior(k), b.posterior(k)
        np.testing.assert_allclose(qa.mean(), qb.mean(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(qa.var(), qb.var(), rtol=1e-12, atol=1e-12)


def test_data_nodes_build_the_same_model_as_arrays():
    X, y = _regression_data(30)
    a = fg.infer(_linear(X, y))
    b = fg.infer(_linear(X, y, use_data=False))
    _same(a, b, ["w", "tau"])
    m = _linear(X, y)
    assert [p.name for p in m.data["X"].plates] == ["n"] and [p.name for p in m.data["y"].plates] == ["n"]
    assert "data 'X'" in repr(m.data["X"])


@pytest.mark.parametrize("build, names", [(_linear, ["w", "tau"]), (_logistic, ["w"]),
                                          (_mixture, ["pi", "mu", "tau", "z"])])
def test_set_data_refit_reuses_the_compilation_and_equals_a_fresh_build(build, names):
    X, y = _regression_data(40, seed=1)
    if build is _logistic:
        y = (y > 0).astype(float)
    m = build(X, y)
    fg.infer(m)
    assert m.compilations == 1
    X2, y2 = _regression_data(55, seed=2)  # a new size of the data plate
    if build is _logistic:
        y2 = (y2 > 0).astype(float)
    m.set_data(**({"y": y2} if build is _mixture else {"X": X2, "y": y2}))
    assert m.plates["n"].size == 55
    refit = fg.infer(m)
    assert m.compilations == 1  # not compiled again
    assert any("compiled structure reused" in n for n in refit.notes)
    fresh = fg.infer(build(X2, y2))
    _same(refit, fresh, names)
    # and back to the first data, the first fit again
    m.set_data(**({"y": y} if build is _mixture else {"X": X, "y": y}))
    _same(fg.infer(m), fg.infer(build(X, y)), names)
    assert m.compilations == 1


def test_set_data_of_a_normal_gamma_regression_recomputes_its_statistics():
    X, y = _regression_data(30)
    X2, y2 = _regression_data(45, seed=3)

    def build(X, y):
        with fg.Model("ng") as m:
            n = fg.plate("n", len(y))
            alpha = fg.gamma("alpha", 1e-2, 1e-4)
            w = fg.gaussian_gamma("w", precision=alpha, dim=3)
            fg.gaussian("y", mean=fg.inner(fg.data("X", X), w, plates=[n]), precision=w.tau, plates=[n],
                        observed=fg.data("y", y))
        return m

    m = build(X, y)
    fg.infer(m, schedule=["w", "alpha"])
    m.set_data(y=y2, X=X2)
    _same(fg.infer(m, schedule=["w", "alpha"]), fg.infer(build(X2, y2), schedule=["w", "alpha"]), ["w", "alpha"])
    assert m.compilations == 1


def test_a_data_node_as_a_constant_parameter_and_a_mask():
    X, y = _regression_data(30)
    rng = np.random.default_rng(4)
    prec = rng.uniform(0.5, 2.0, 30)
    mask = rng.random(30) > 0.2

    def build(X, y, prec, mask, use_data=True):
        wrap = fg.data if use_data else (lambda name, v: v)
        with fg.Model("het") as m:
            n = fg.plate("n", len(y))
            w = fg.mv_gaussian("w", 0.0, precision=1e-2, dim=3)
            fg.gaussian("y", mean=fg.inner(wrap("X", X), w, plates=[n]), precision=wrap("prec", prec), plates=[n],
                        observed=wrap("y", y), mask=wrap("mask", mask))
        return m

    m = build(X, y, prec, mask)
    _same(fg.infer(m), fg.infer(build(X, y, prec, mask, False)), ["w"])
    X2, y2 = _regression_data(20, seed=5)
    prec2, mask2 = rng.uniform(0.5, 2.0, 20), rng.random(20) > 0.5
    with pytest.raises(ModelError, match=r"'y': precision must be positive"):
        m.set_data(prec=-prec)  # the constant's build-time check, naming the variable
    with pytest.raises(ModelError, match=r"'mask' \(shape \(30,\)\) also spans it"):
        m.set_data(X=X2, y=y2, prec=prec2)
    m.set_data(X=X2, y=y2, prec=prec2, mask=mask2)
    _same(fg.infer(m), fg.infer(build(X2, y2, prec2, mask2, False)), ["w"])
    assert m.compilations == 1


def test_set_data_errors_name_the_node_and_leave_the_model_as_it_was():
    X, y = _regression_data(30)
    m = _linear(X, y)
    before = fg.infer(m)
    X2, y2 = _regression_data(40, seed=6)
    with pytest.raises(ModelError, match=r"no data node 'Z'.*\['X', 'y'\]"):
        m.set_data(Z=X2)
    resize = r"plate 'n' changes size from 30 to 40 .*'X'.*data node 'y' \(shape \(30,\)\)"
    with pytest.raises(ModelError, match=resize):
        m.set_data(X=X2)  # y spans n too
    with pytest.raises(ModelError, match=r"plate 'n' would get size 40 from 'X' but 39 from 'y'"):
        m.set_data(X=X2, y=y2[:39])
    with pytest.raises(ModelError, match=r"'X' has shape \(40,\)"):
        m.set_data(X=X2[:, 0], y=y2)
    with pytest.raises(ModelError, match=r"axis 1 spans no plate and must keep its size 3"):
        m.set_data(X=X2[:, :2], y=y2)
    bad = y2.copy()
    bad[3] = np.nan
    with pytest.raises(ModelError, match=r"observed data of 'y' contains nan"):
        m.set_data(X=X2, y=bad)  # the build-time check, naming the variable (not its scratch copy)
    with pytest.raises(ModelError, match=r"data 'y' must hold numbers"):
        m.set_data(y=np.array(["a"] * 30))
    with pytest.raises(ModelError, match=r"give at least one data node"):
        m.set_data()
    assert m.plates["n"].size == 30 and m.data["y"].value is not bad
    _same(fg.infer(m), before, ["w", "tau"])


def test_bad_labels_are_refused_as_at_construction():
    X, y = _regression_data(30)
    m = _logistic(X, (y > 0).astype(float))
    with pytest.raises(ModelError, match=r"'y'"):
        m.set_data(y=np.full(30, 2.0))


def test_data_nodes_are_refused_where_they_cannot_be_replaced():
    X, y = _regression_data(10)
    with fg.Model("m"):
        n = fg.plate("n", 10)
        d = fg.data("X", X)
        with pytest.raises(ModelError, match="declared twice"):
            fg.data("X", X)
        with pytest.raises(ModelError, match="must hold numbers"):
            fg.data("s", np.array(["a", "b"]))
        z = fg.categorical("z", np.ones(3) / 3, plates=[n])
        with pytest.raises(ModelError, match=r"data node 'X' cannot be used here"):
            fg.select(d, z)
        mu = fg.gaussian("mu", 0.0, precision=1.0)
        with pytest.raises(ModelError, match=r"shape \(10, 3\).*no plate of model 'm' has size 3"):
            mu + d  # a data operand of a sum: its second axis is on no plate
    with fg.Model("other"), pytest.raises(ModelError, match="belongs to model 'm'"):
        n = fg.plate("n", 10)
        w = fg.mv_gaussian("w", 0.0, precision=1.0, dim=3)
        fg.inner(d, w, plates=[n])


def test_a_plate_with_constant_labels_cannot_be_resized():
    rng = np.random.default_rng(0)
    g = rng.integers(0, 3, 20)
    y = rng.normal(size=20)
    with fg.Model("groups") as m:
        n, k = fg.plate("n", 20), fg.plate("k", 3)
        a = fg.gaussian("a", 0.0, precision=1.0, plates=[k])
        fg.gaussian("y", mean=a[g], precision=1.0, plates=[n], observed=fg.data("y", y))
    m.set_data(y=y + 1.0)  # same size: fine
    with pytest.raises(ModelError, match=r"indexed view .* constant labels"):
        m.set_data(y=np.zeros(25))
    assert m.plates["n"].size == 20


def test_a_handler_refit_after_set_data_equals_a_fresh_build():
    X, y = _regression_data(40, seed=7)
    m = _logistic(X, (y > 0).astype(float))
    fg.infer(m, handlers={"w": fg.Laplace()})
    X2, y2 = _regression_data(25, seed=8)
    m.set_data(X=X2, y=(y2 > 0).astype(float))
    refit = fg.infer(m, handlers={"w": fg.Laplace()})  # a new handler object: the claims are the same
    assert m.compilations == 1
    _same(refit, fg.infer(_logistic(X2, (y2 > 0).astype(float)), handlers={"w": fg.Laplace()}), ["w"])


def test_a_data_node_on_two_plates_is_refused_and_leaves_no_node_behind():
    y = np.arange(4.0)
    with fg.Model("two") as m:
        n, k = fg.plate("n", 4), fg.plate("k", 4)
        d = fg.data("y", y)
        fg.gaussian("a", 0.0, precision=1.0, plates=[n], observed=d)
        with pytest.raises(ModelError, match=r"data 'y': axis 0 runs over plate 'n' in one use and over 'k'"):
            fg.gaussian("b", 0.0, precision=1.0, plates=[k], observed=d)
        assert "b" not in m.variables and len(m.factors) == 1
        fg.gaussian("b", 0.0, precision=1.0, plates=[k], observed=y)  # the name is free again
    assert [p.name for p in d.plates] == ["n"] and d.uses == [m["a"]]


def _groups(g, y, use_data=True):
    wrap = fg.data if use_data else (lambda name, v: v)
    with fg.Model("groups") as m:
        n, k = fg.plate("n", len(y)), fg.plate("k", 4)
        mu = fg.gaussian("mu", 0.0, precision=0.01)
        a = fg.gaussian("a", mu, precision=1.0, plates=[k])
        tau = fg.gamma("tau", 1.0, 1.0)
        fg.gaussian("y", mean=a[wrap("g", g)], precision=tau, plates=[n], observed=wrap("y", y))
    return m


def test_labels_as_data_resize_their_plate():
    rng = np.random.default_rng(2)
    g, g2 = rng.integers(0, 4, 30), rng.integers(0, 4, 45)
    effects = np.array([-1.0, 0.0, 1.0, 2.0])
    y, y2 = effects[g] + rng.normal(size=30), effects[g2] + rng.normal(size=45)
    m = _groups(g, y)
    _same(fg.infer(m), fg.infer(_groups(g, y, False)), ["mu", "a", "tau"])
    with pytest.raises(ModelError, match=r"data node 'y' \(shape \(30,\)\) also spans it"):
        m.set_data(g=g2)
    with pytest.raises(ModelError, match=r"labels of 'a' must lie in 0..3, got 4"):
        m.set_data(g=np.full(45, 4), y=y2)
    m.set_data(g=g2, y=y2)
    _same(fg.infer(m), fg.infer(_groups(g2, y2, False)), ["mu", "a", "tau"])
    assert m.compilations == 1


def test_student_t_rows_missing_before_and_not_after():
    X, y = _regression_data(30)
    mask = np.ones(30, bool)
    mask[:5] = False

    def build(X, y, mask, use_data=True):
        wrap = fg.data if use_data else (lambda name, v: v)
        with fg.Model("robust") as m:
            n = fg.plate("n", len(y))
            w = fg.mv_gaussian("w", 0.0, precision=1e-2, dim=3)
            fg.student_t("y", mean=fg.inner(wrap("X", X), w, plates=[n]), precision=4.0,
                         observed=wrap("y", y), mask=wrap("mask", mask))
        return m

    m = build(X, y, mask)
    _same(fg.infer(m), fg.infer(build(X, y, mask, False)), ["w"])
    full = np.ones(30, bool)
    m.set_data(mask=full)
    _same(fg.infer(m), fg.infer(build(X, y, full, False)), ["w"])
    assert "present" not in m["y"].prior.params
