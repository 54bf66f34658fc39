"""The fused grouped linear-Gaussian likelihood (factors/grouped_linear_gaussian.py, schedules/fusion.py).

A Gaussian likelihood whose mean is linear in Gaussian coefficients, some gathered by labels (varying
intercepts and slopes, fixed effects beside them), runs on per-group Gram matrices.  It must reach the same
fixed point, sweep for sweep, as the generic gather/scatter path, which the same model takes when a constant
offset (``+ 0.0``) is added to its mean.  The rule-level identity (message = gradient of E[log f]) is in
test_rules.py.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import factorgraph as fg
from factorgraph import models

N, G, D = 240, 9, 2


def _data(seed: int = 0):
    rng = np.random.default_rng(seed)
    g = np.r_[np.arange(G), rng.integers(0, G, N - G)]
    x = rng.normal(size=N)
    X = rng.normal(size=(N, D))
    X3 = rng.normal(size=(N, 3))
    y = (rng.normal(size=G)[g] + rng.normal(size=G)[g] * x + X3 @ np.array([0.5, -1.0, 0.3])
         + 0.5 * rng.normal(size=N))
    return g, x, X, X3, y


def _build(kind: str, generic: bool, seed: int = 0, precision: str = "gamma") -> fg.Model:
    g, x, X, X3, y = _data(seed)
    with fg.Model(f"{kind}{' generic' if generic else ''}") as m:
        n, c, d = fg.plate("n", N), fg.plate("groups", G), fg.plate("d", D)
        mu = fg.gaussian("mu", 0.0, precision=0.01)
        ta = fg.gamma("ta", 1.0, 1.0)
        a = fg.gaussian("a", mean=mu, precision=ta, plates=[c])
        if kind == "slopes":  # the radon form: a[county] + b[county]·x
            b = fg.gaussian("b", 0.0, precision=1.0, plates=[c])
            mean = a[g] + b[g] * x
        elif kind == "scaled":  # constants on either side of a product, and a product of a product
            b = fg.gaussian("b", 0.0, precision=1.0, plates=[c])
            mean = x * a[g] + 2.0 * (b[g] * x)  # x * a[g]: numpy defers to the node
        elif kind == "common":  # the radon form with one slope: a[county] + beta·x, x put on n by its size
            beta = fg.gaussian("beta", 0.0, precision=1.0)
            mean = a[g] + beta * x
        elif kind == "fixed":  # varying intercepts beside fixed effects (an MvGaussian)
            w = fg.mv_gaussian("w", np.zeros(3), precision=1.0)
            mean = a[g] + fg.inner(X3, w, [n])
        elif kind == "everything":  # every kind of block in one mean
            s = fg.gaussian("s", 0.0, precision=1.0, plates=[c, d])
            w = fg.mv_gaussian("w", np.zeros(3), precision=1.0)
            nu = fg.gaussian("nu", 0.0, precision=1.0)
            v = fg.mv_gaussian("v", np.zeros(D), precision=1.0, plates=[c])
            mean = (a[g] + fg.inner(X, fg.index(s, g, plate=n, along=c), [n]) + fg.inner(X3, w, [n]) + 2.0 * nu
                    + fg.inner(X, v[g], [n]))
        elif kind == "global_plated":  # a mean-field weight vector shared by the groups
            s = fg.gaussian("s", 0.0, precision=1.0, plates=[d])
            mean = a[g] + fg.inner(X, s, [n])
        else:
            raise AssertionError(kind)
        if generic:
            mean = mean + 0.0
        if precision == "gamma":
            prec = fg.gamma("tau", 1.0, 1.0)
        elif precision == "per group":
            prec = fg.gamma("tau", 1.0, 1.0, plates=[c])[g]
        else:
            prec = 4.0
        fg.gaussian("y", mean=mean, precision=prec, plates=[n], observed=y)
    return m


def _fit(m: fg.Model, **kw) -> fg.Result:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        return fg.infer(m, fg.VMP(), **{"max_iter": 400, "tol": None, "param_tol": 1e-12, **kw})


def _fused(r: fg.Result) -> bool:
    return any("grouped linear-Gaussian" in n for n in r.notes)


def _assert_same(a: fg.Result, b: fg.Result, tol: float = 1e-10) -> None:
    assert a.elbo == pytest.approx(b.elbo, rel=0, abs=tol * max(1.0, abs(b.elbo)))
    assert set(a.posteriors) == set(b.posteriors)
    for k in a.posteriors:
        pa, pb = a.posterior(k), b.posterior(k)
        np.testing.assert_allclose(pa.mean(), pb.mean(), rtol=tol, atol=tol, err_msg=k)
        np.testing.assert_allclose(pa.var(), pb.var(), rtol=tol, atol=tol, err_msg=k)


@pytest.mark.parametrize("kind", ["slopes", "common", "scaled", "fixed", "everything", "global_plated"])
def test_fused_matches_generic_path(kind):
    fused, generic = _fit(_build(kind, False)), _fit(_build(kind, True))
    assert _fused(fused) and not _fused(generic)
    _assert_same(fused, generic)


@pytest.mark.parametrize("kind", ["slopes", "everything"])
def test_fused_matches_generic_sweep_by_sweep(kind):
    """Not only the fixed point: the same schedule of coordinate updates, so the same iterates."""
    for sweeps in (1, 3):
        _assert_same(_fit(_build(kind, False), max_iter=sweeps), _fit(_build(kind, True), max_iter=sweeps), 1e-9)


@pytest.mark.parametrize("precision", ["per group", "constant"])
def test_fused_precisions(precision):
    fused, generic = _fit(_build("slopes", False, precision=precision)), _fit(_build("slopes", True,
                                                                                     precision=precision))
    assert _fused(fused)
    _assert_same(fused, generic)


def test_elbo_never_decreases():
    r = _fit(_build("everything", False), max_iter=60)
    assert np.all(np.diff(r.elbo_trace) > -1e-9 * np.abs(r.elbo_trace[1:]))


def _with_data(generic: bool) -> fg.Model:
    """Varying intercepts beside fixed effects, with labels, inputs and outputs as data nodes."""
    g, x, X, X3, y = _data(0)
    with fg.Model("data nodes") as m:
        n, c = fg.plate("n", N), fg.plate("groups", G)
        a = fg.gaussian("a", 0.0, precision=1.0, plates=[c])
        w = fg.mv_gaussian("w", np.zeros(3), precision=1.0)
        mean = a[fg.data("g", g)] + fg.inner(fg.data("X", X3), w, [n])
        fg.gaussian("y", mean=mean + 0.0 if generic else mean, precision=fg.gamma("tau", 1.0, 1.0), plates=[n],
                    observed=fg.data("y", y))
    return m


def test_set_data_rebinds_the_group_sums():
    """After model.set_data (new labels, inputs and outputs) the fused factor's Gram matrices are read again."""
    g2, _, _, X2, y2 = _data(1)
    g2 = (g2 + 4) % G
    fits = []
    for generic in (False, True):
        m = _with_data(generic)
        _fit(m)
        m.set_data(g=g2, X=X2, y=y2)
        fits.append(_fit(m))
        assert m.compilations == 1
    assert _fused(fits[0]) and not _fused(fits[1])
    _assert_same(*fits)


def test_canned_hierarchical_regression_is_fused():
    g, x, X, X3, y = _data(2)
    r = models.hierarchical_regression(X, y, g, varying=("intercept", "slope"))
    assert _fused(r)
    ref = fg.infer(_canned_generic(X, y, g), fg.VMP(), max_iter=r.n_iter, tol=None)
    assert r.elbo == pytest.approx(ref.elbo, abs=1e-8)
    np.testing.assert_allclose(r.posterior("slope").mean(), ref.posterior("slope").mean(), atol=1e-9)


def _canned_generic(X, y, g):
    """models.hierarchical_regression's varying-intercept-and-slope model with ``+ 0.0`` on its mean."""
    m = models.hierarchical_regression_model(X, y, g, varying=("intercept", "slope"))
    f = next(f for f in m.factors if f.edges.get("out") is m.variables["y"])
    with m:
        f.edges["mean"] = f.edges["mean"] + 0.0
    return m


@pytest.mark.parametrize("case", ["offset", "two labellings", "variable twice", "product of variables",
                                  "rows-plated term", "handled"])
def test_not_fused(case):
    """Means the fused factor does not take run the generic path (and still fit)."""
    g, x, X, X3, y = _data(3)
    handlers = None
    with fg.Model(case) as m:
        n, c = fg.plate("n", N), fg.plate("groups", G)
        a = fg.gaussian("a", 0.0, precision=1.0, plates=[c])
        b = fg.gaussian("b", 0.0, precision=1.0, plates=[c])
        if case == "offset":
            mean = a[g] + b[g] * x + 1.5
        elif case == "two labellings":
            mean = a[g] + b[(g + 1) % G]
        elif case == "variable twice":
            ag = a[g]
            mean = ag + ag * x
        elif case == "product of variables":
            mean = a[g] * b[g]
        elif case == "rows-plated term":
            e = fg.gaussian("e", 0.0, precision=1.0, plates=[n])
            mean = a[g] + e
        else:
            w = fg.mv_gaussian("w", np.zeros(3), precision=1.0)
            mean = a[g] + fg.inner(X3, w, [n])
            handlers = {"w": fg.Laplace()}
        fg.gaussian("y", mean=mean, precision=4.0, plates=[n], observed=y)
    r = _fit(m, handlers=handlers) if handlers else _fit(m)
    assert not _fused(r)
    assert np.isfinite(r.elbo)
