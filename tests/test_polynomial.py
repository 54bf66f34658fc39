"""Sums and products whose operands share variables (``a*b + b*c``): a multilinear polynomial of independent
leaves, exact under mean field (factors/polynomial.py).

* the messages are the gradients of η₁E[y] + η₂E[y²] (finite differences), with plated leaves;
* the moments are exact (Monte Carlo from independent Gaussians);
* a model with y = a·b + b·c runs the same iterates and bound as the same model written b·(a + c) (a product
  of independent operands, which the binary rules already handle exactly);
* a variable multiplied by itself is refused.
"""

from __future__ import annotations

import numpy as np
import pytest

import factorgraph as fg
from factors.polynomial import Polynomial


def _case(rng):
    # y over plates (n=4): c0·x0·x1 + c1·x1·x2 + c2·x0 + c3, x0 on (n), x1 scalar, x2 on (n)
    params = {"monomials": [(rng.normal(size=(4,)), frozenset({"x0", "x1"})), (1.5, frozenset({"x1", "x2"})),
                            (-0.7, frozenset({"x0"})), (0.3, frozenset())],
              "roles": ["x0", "x1", "x2"], "src": {"x0": (0,), "x1": (), "x2": (0,)}, "dst": (0,), "sizes": (4,),
              "shape": (4,)}

    def stats(shape):
        m = rng.normal(size=shape)
        return m, m**2 + rng.uniform(0.2, 1.0, shape)

    par = {"x0": stats((4,)), "x1": stats(()), "x2": stats((4,))}
    return params, par


def test_polynomial_pullback_is_gradient():
    rng = np.random.default_rng(0)
    params, par = _case(rng)
    h1, h2 = rng.normal(size=4), -rng.uniform(0.5, 2.0, 4)

    def objective(p):
        ey, ey2 = Polynomial.forward(p, params)
        return float(np.sum(h1 * ey) + np.sum(h2 * ey2))

    for role in params["roles"]:
        msg = Polynomial.pullback(role, (h1, h2), par, params)
        for i, s in enumerate(par[role]):
            grad = np.zeros(np.shape(s))
            for idx in np.ndindex(grad.shape):
                up = [np.array(a, float) for a in par[role]]
                dn = [np.array(a, float) for a in par[role]]
                up[i][idx] += 1e-6
                dn[i][idx] -= 1e-6
                grad[idx] = (objective({**par, role: tuple(up)}) - objective({**par, role: tuple(dn)})) / 2e-6
            np.testing.assert_allclose(msg[i], grad, rtol=1e-6, atol=1e-7, err_msg=f"{role}[{i}]")


def test_polynomial_moments_are_exact():
    rng = np.random.default_rng(1)
    params, par = _case(rng)
    ey, ey2 = Polynomial.forward(par, params)
    S = 400_000
    draw = {r: rng.normal(par[r][0], np.sqrt(par[r][1] - par[r][0] ** 2), size=(S,) + np.shape(par[r][0]))
            for r in params["roles"]}
    x0, x1, x2 = draw["x0"], draw["x1"][:, None], draw["x2"]
    c0 = params["monomials"][0][0]
    y = c0 * x0 * x1 + 1.5 * x1 * x2 - 0.7 * x0 + 0.3
    np.testing.assert_allclose(y.mean(0), ey, atol=5 * y.std(0).max() / np.sqrt(S))
    np.testing.assert_allclose((y**2).mean(0), ey2, atol=5 * (y**2).std(0).max() / np.sqrt(S))


def _model(data, shared: bool):
    with fg.Model("poly") as m:
        n = fg.plate("n", len(data))
        a = fg.gaussian("a", 1.0, precision=1.0)
        b = fg.gaussian("b", 0.5, precision=1.0)
        c = fg.gaussian("c", -1.0, precision=1.0, plates=[n])
        tau = fg.gamma("tau", 2.0, 1.0)
        mean = a * b + b * c if shared else b * (a + c)
        fg.gaussian("y", mean, precision=tau, plates=[n], observed=data)
    return m


def test_shared_variable_sum_matches_factored_form():
    data = np.random.default_rng(2).normal(1.0, 1.0, size=8)
    kw = {"schedule": ["a", "b", "c", "tau"], "max_iter": 300, "tol": 1e-10, "progress": False}
    r1 = fg.infer(_model(data, True), **kw)
    r2 = fg.infer(_model(data, False), **kw)
    np.testing.assert_allclose(r1.elbo_trace, r2.elbo_trace, rtol=1e-10)
    for v in ("a", "b", "c", "tau"):
        np.testing.assert_allclose(r1.posteriors[v].mean(), r2.posteriors[v].mean(), rtol=1e-9)
    assert np.all(np.diff(r1.elbo_trace) >= -1e-9 * np.abs(r1.elbo_trace[1:]))


def test_square_is_refused():
    with fg.Model("sq"):
        a = fg.gaussian("a", 0.0, precision=1.0)
        b = fg.gaussian("b", 0.0, precision=1.0)
        with pytest.raises(fg.ModelError, match=r"\['a'\] would be multiplied by itself"):
            _ = (a + b) * a
        y = a + a  # 2a: exact (E[y²] = 4E[a²])
        assert y.op.name == "polynomial" and [c for c, _ in y.params["monomials"]] == [2.0]


def test_prior_draws_evaluate_the_polynomial():
    data = np.zeros(8)
    d = fg.sample_prior(_model(data, True), draws=4000, seed=0)
    resid = (d["y"] - (d["a"][:, None] * d["b"][:, None] + d["b"][:, None] * d["c"])) * np.sqrt(d["tau"])[:, None]
    assert abs(resid.mean()) < 0.05 and abs(resid.std() - 1.0) < 0.05
