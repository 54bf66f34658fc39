"""fg.likelihood / fg.potential: any log density, by Gauss–Hermite quadrature and NCVMP gradient messages."""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest
from scipy import integrate
from scipy.special import gammaln

import factorgraph as fg
from factors.user_likelihood import USER_LIKELIHOOD as _TYPES
from factors.user_likelihood import LogDensityError, evidence, user_params

N, D = 300, 3


def _data(kind, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D)) / np.sqrt(D)
    w = np.array([1.0, -1.5, 0.5])
    eta = X @ w
    if kind == "logit":
        return X, (rng.uniform(size=N) < 1.0 / (1.0 + np.exp(-eta))).astype(float)
    if kind == "poisson":
        return X, rng.poisson(np.exp(eta)).astype(float)
    return X, eta + 0.5 * rng.normal(size=N)


def _fit(kind, user):
    X, y = _data(kind)
    with fg.Model(kind) as m:
        n, d = fg.plate("n", N), fg.plate("d", D)
        w = fg.gaussian("w", 0.0, precision=1.0, plates=[d])
        eta = fg.inner(X, w, plates=[n])
        if kind == "logit" and user:
            fg.likelihood("y", lambda y, x: y * x - np.logaddexp(0.0, x), observed=y, plates=[n], x=eta)
        elif kind == "logit":
            fg.bernoulli_logit("y", eta, observed=y, method="quadrature")
        elif kind == "poisson" and user:
            fg.likelihood("y", lambda y, x: y * x - np.exp(x) - gammaln(y + 1.0), observed=y, plates=[n], x=eta)
        elif kind == "poisson":
            fg.poisson_log("y", eta, observed=y)
        elif user:
            fg.likelihood("y", lambda y, mu, tau: 0.5 * np.log(tau / (2 * np.pi)) - 0.5 * tau * (y - mu) ** 2,
                          observed=y, plates=[n], mu=eta, tau=4.0)
        else:
            fg.gaussian("y", eta, precision=4.0, observed=y)
    return fg.infer(m, tol=None, param_tol=1e-13, max_iter=1000)


@pytest.mark.parametrize("kind", ["logit", "poisson", "gaussian"])
def test_same_fixed_point_as_the_builtin_factor(kind):
    a, b = _fit(kind, True), _fit(kind, False)
    assert a.converged and b.converged
    qa, qb = a.posterior("w"), b.posterior("w")
    np.testing.assert_allclose(qa.mean(), qb.mean(), atol=1e-8, rtol=0)
    np.testing.assert_allclose(qa.var(), qb.var(), atol=1e-8, rtol=0)
    assert abs(a.elbo - b.elbo) < 1e-8 * max(1.0, abs(b.elbo))
    assert a.evidence_kind == b.evidence_kind


def test_gamma_precision_reaches_the_conjugate_fixed_point():
    """y ~ N(x_nᵀw, 1/τ) with τ ~ Gam(2, 1) written out: the Gaussian and Gamma messages by quadrature equal the
    conjugate VMP messages, so NCVMP reaches the built-in fit's fixed point."""
    X, y = _data("gaussian")

    def fit(user):
        with fg.Model("tau") as m:
            n, d = fg.plate("n", N), fg.plate("d", D)
            w = fg.gaussian("w", 0.0, precision=1.0, plates=[d])
            tau = fg.gamma("tau", 2.0, 1.0)
            eta = fg.inner(X, w, plates=[n])
            if user:
                fg.likelihood("y", lambda y, mu, tau: 0.5 * np.log(tau / (2 * np.pi)) - 0.5 * tau * (y - mu) ** 2,
                              observed=y, plates=[n], mu=eta, tau=tau)
            else:
                fg.gaussian("y", eta, precision=tau, observed=y)
        return fg.infer(m, fg.NCVMP() if user else fg.VMP(), tol=None, param_tol=1e-13, max_iter=1000)

    a, b = fit(True), fit(False)
    assert a.converged and b.converged
    np.testing.assert_allclose(a.posterior("w").mean(), b.posterior("w").mean(), atol=1e-8, rtol=0)
    np.testing.assert_allclose(a.posterior("w").var(), b.posterior("w").var(), atol=1e-8, rtol=0)
    np.testing.assert_allclose(a.posterior("tau").mean(), b.posterior("tau").mean(), rtol=1e-8)
    np.testing.assert_allclose(a.posterior("tau").shape, b.posterior("tau").shape, rtol=1e-8)
    assert abs(a.elbo - b.elbo) < 1e-8 * abs(b.elbo)


def test_gamma_expectation_matches_scipy_quad():
    """E over Gam(a, b) of a log density with log λ, λ and log(1 + λ²) terms, for small and large shapes."""
    from scipy.special import digamma
    from scipy.stats import gamma as gamma_dist

    from factors.user_likelihood import USER_LIKELIHOOD_POSITIVE
    from factors.user_positive import gamma_nodes

    def f(y, lam):
        return 0.5 * np.log(lam) - 0.5 * lam * y * y + np.log1p(lam * lam)

    ev, _ = USER_LIKELIHOOD_POSITIVE[(0, 1)].get_evidence("default")
    for a in (1.5, 4.0, 30.0, 400.0):
        for b in (0.5, 3.0):
            p = {**user_params(f, "t", (), {}, True, None, positive=("lam",)), "state": {}}
            stats = (np.array([a / b]), np.array([digamma(a) - np.log(b)]))
            got = ev({"out": (np.array([0.7]),), "p0": stats}, p)[0]
            dist = gamma_dist(a, scale=1 / b)
            ref = integrate.quad(lambda t, dist=dist: f(0.7, t) * dist.pdf(t), dist.ppf(1e-16), dist.isf(1e-16),
                                 epsabs=1e-13, epsrel=1e-13, limit=500, points=[dist.mean()])[0]
            assert abs(got - ref) < 1e-9, (a, b, got, ref)
    assert gamma_nodes(np.array([2.0]), np.array([1.0]), 8)[1].sum() == pytest.approx(1.0)


def _moments(mean, var):
    mean, var = np.atleast_1d(mean).astype(float), np.atleast_1d(var).astype(float)
    return (mean, var + mean * mean)


@pytest.mark.parametrize("name", ["logit", "poisson", "student"])
def test_expectation_matches_scipy_quad_on_a_grid(name):
    f = {"logit": lambda y, x: y * x - np.logaddexp(0.0, x),
         "poisson": lambda y, x: y * x - np.exp(x) - gammaln(y + 1.0),
         "student": lambda y, x: -2.5 * np.log1p((y - x) ** 2 / 4.0)}[name]
    y = 1.0 if name != "poisson" else 3.0
    for mean in (-2.0, 0.0, 1.5):
        for var in (0.01, 0.3, 2.0):
            p = {**user_params(f, "test", ("x",), {}, True, None), "state": {}}
            got = evidence({"out": (np.array([y]),), "x0": _moments(mean, var)}, p)[0]
            sd = np.sqrt(var)

            def integrand(x, mean=mean, sd=sd):
                return f(y, x) * np.exp(-0.5 * ((x - mean) / sd) ** 2) / (sd * np.sqrt(2 * np.pi))
            ref = integrate.quad(integrand, mean - 30 * sd, mean + 30 * sd, epsabs=1e-13,
                                 epsrel=1e-13, limit=200)[0]
            assert abs(got - ref) < 1e-9, (name, mean, var, got, ref)


def test_two_argument_expectation_matches_scipy_dblquad():
    """A Gaussian density with a Gaussian mean and a Gaussian log-sd: the tensor grid against dblquad."""
    def f(y, mu, s):
        return -s - 0.5 * np.log(2 * np.pi) - 0.5 * (y - mu) ** 2 * np.exp(-2 * s)
    p = {**user_params(f, "test", ("mu", "s"), {}, True, None), "state": {}}
    (m1, v1), (m2, v2), y = (0.3, 0.2), (-0.2, 0.05), 1.1
    got = evidence({"out": (np.array([y]),), "x0": _moments(m1, v1), "x1": _moments(m2, v2)}, p)[0]
    def nd(x, m, v):
        return np.exp(-0.5 * (x - m) ** 2 / v) / np.sqrt(2 * np.pi * v)
    ref = integrate.dblquad(lambda s, mu: f(y, mu, s) * nd(mu, m1, v1) * nd(s, m2, v2),
                            m1 - 12 * np.sqrt(v1), m1 + 12 * np.sqrt(v1), m2 - 12 * np.sqrt(v2), m2 + 12 * np.sqrt(v2),
                            epsabs=1e-13, epsrel=1e-13)[0]
    assert abs(got - ref) < 1e-9


def test_messages_equal_finite_difference_gradients_with_the_adaptive_order():
    def f(y, mu, s):
        return -s - 0.5 * (y - mu) ** 2 * np.exp(-2 * s)
    rng = np.random.default_rng(3)
    y = rng.normal(size=4)
    m = {"out": (y,), "x0": _moments(rng.normal(size=4), rng.uniform(0.1, 1, 4)),
         "x1": _moments(rng.normal(size=4) * 0.3, rng.uniform(0.01, 0.2, 4))}
    ft = _TYPES[1]
    ev, _ = ft.get_evidence("default")
    for j in range(2):
        p = {**user_params(f, "test", ("mu", "s"), {}, True, None), "state": {}}
        msg = ft.get_rule(f"x{j}", "ncvmp")(m, p)
        for i in range(2):
            h = 1e-6
            for r in range(4):
                up = [a.copy() for a in m[f"x{j}"]]
                dn = [a.copy() for a in m[f"x{j}"]]
                up[i][r] += h
                dn[i][r] -= h
                q = {**user_params(f, "test", ("mu", "s"), {}, True, None), "state": {}}
                g = (ev({**m, f"x{j}": tuple(up)}, q)[r] - ev({**m, f"x{j}": tuple(dn)}, q)[r]) / (2 * h)
                assert abs(g - msg[i][r]) < 1e-6 * (1 + abs(g)), (j, i, r, g, msg[i][r])


def test_potential_adds_a_prior_term():
    """A N(0, 1) prior times the potential exp(−w²/2 + ½ log 2) is the N(0, ½) prior: same posterior and evidence."""
    X, y = _data("gaussian")

    def model(extra):
        with fg.Model("pot") as m:
            n, d = fg.plate("n", N), fg.plate("d", D)
            w = fg.gaussian("w", 0.0, precision=1.0 if extra else 2.0, plates=[d])
            if extra:
                fg.potential("w_extra", lambda w: -0.5 * w * w + 0.5 * np.log(2.0), w=w)
            fg.gaussian("y", fg.inner(X, w, plates=[n]), precision=4.0, observed=y)
        return fg.infer(m, tol=None, param_tol=1e-13, max_iter=1000)

    a, b = model(True), model(False)
    np.testing.assert_allclose(a.posterior("w").mean(), b.posterior("w").mean(), atol=1e-9)
    np.testing.assert_allclose(a.posterior("w").var(), b.posterior("w").var(), atol=1e-9)
    assert abs(a.elbo - b.elbo) < 1e-8


# ------------------------------------------------------------------------------------ bad input
def _bad(logpdf, **kw):
    X, y = _data("logit")
    with fg.Model("bad") as m:
        n, d = fg.plate("n", N), fg.plate("d", D)
        w = fg.gaussian("w", 0.0, precision=1.0, plates=[d])
        fg.likelihood("y", logpdf, observed=y, plates=[n], x=fg.inner(X, w, plates=[n]), **kw)
    return fg.infer(m, max_iter=5)


def test_wrong_shape_is_named():
    with pytest.raises(LogDensityError, match=r"fg.likelihood\('y'\).*returned shape \(\)"):
        _bad(lambda y, x: np.sum(y * x))


def test_nan_at_a_node_is_named():
    with pytest.raises(LogDensityError, match=r"likelihood\(.y.\): the log density is NaN at a quadrature node.*x ="):
        _bad(lambda y, x: np.log(x))


def test_plus_inf_at_a_node_is_named():
    with pytest.raises(LogDensityError, match=r"is \+inf at a quadrature node, fg.likelihood\('y'\) at row \(\d+,\)"):
        _bad(lambda y, x: np.where(x > 0.5, np.inf, -x * x))


@pytest.mark.parametrize(("value", "match"), [
    ("abc", r"'y': parameter 'c' must be a Gaussian variable or expression, a number or an array, got 'abc'"),
    (np.ones(7), r"'y': parameter 'c'"),
    (np.nan, r"'y': parameter 'c'"),
])
def test_bad_constant_parameter_at_build_time(value, match):
    with pytest.raises(fg.ModelError, match=match):
        _bad(lambda y, x, c: y * x, c=value)


def test_unsupported_parameter_kinds_at_build_time():
    X, y = _data("logit")
    with fg.Model("bad") as m:
        n, d = fg.plate("n", N), fg.plate("d", D)
        w = fg.gaussian("w", 0.0, precision=1.0, plates=[d])
        sigma = fg.half_cauchy("sigma", 1.0)
        z = fg.bernoulli("z", 0.5)
        eta = fg.inner(X, w, plates=[n])
        with pytest.raises(fg.ModelError, match=r"'y': parameter 's' is the scale variable 'sigma'.*np.exp"):
            fg.likelihood("y", lambda y, x, s: y * x, observed=y, plates=[n], x=eta, s=sigma)
        with pytest.raises(fg.ModelError, match=r"'y': parameter 'z' is the Bernoulli variable 'z'"):
            fg.likelihood("y", lambda y, x, z: y * x, observed=y, plates=[n], x=eta, z=z)
        with pytest.raises(fg.ModelError, match=r"'y': parameters 'x' and 'z' are both functions of .* perfectly"):
            fg.likelihood("y", lambda y, x, z: y * x, observed=y, plates=[n], x=eta, z=eta * 2.0)
        with pytest.raises(fg.ModelError, match=r"'y': no parameter of the log density is random"):
            fg.likelihood("y", lambda y, c: y * c, observed=y, plates=[n], c=1.0)
        with pytest.raises(fg.ModelError, match=r"'y': the log density must be a function"):
            fg.likelihood("y", 3.0, observed=y, plates=[n], x=eta)
    assert m is not None


# ------------------------------------------------------------------------------------ compiled log densities
@numba.vectorize(["float64(float64, float64, float64, float64)"])
def _nb_gauss(y, c, mu, s):
    """A Gaussian with mean mu + c and log-sd s, arguments in an order that mixes constants and Gaussians."""
    return -s - 0.5 * math.log(2 * math.pi) - 0.5 * (y - mu - c) ** 2 * math.exp(-2 * s)


def test_numba_log_density_is_fused_and_agrees_with_numpy():
    rng = np.random.default_rng(5)
    y, c = rng.normal(size=6), rng.normal(size=6)
    m = {"out": (y,), "x0": _moments(rng.normal(size=6), rng.uniform(0.05, 1, 6)),
         "x1": _moments(rng.normal(size=6) * 0.2, rng.uniform(0.01, 0.1, 6))}
    fused = {**user_params(_nb_gauss, "t", ("mu", "s"), {"c": c}, True, None, ("c", "mu", "s")), "state": {}}
    plain = {**user_params(lambda y, c, mu, s: _nb_gauss(y, c, mu, s) + 0.0, "t", ("mu", "s"), {"c": c}, True, None,
                           ("c", "mu", "s")), "state": {}}
    assert fused["compiled"] is not None and plain["compiled"] is None
    np.testing.assert_allclose(evidence(m, fused), evidence(m, plain), rtol=0, atol=1e-12)
    for j in range(2):
        rule = _TYPES[1].get_rule(f"x{j}", "ncvmp")
        for a, b in zip(rule(m, fused), rule(m, plain), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@numba.vectorize(["float64(float64, float64)"])
def _nb_log(y, x):
    return math.log(x) if x > -1.0 else math.nan


def test_nan_in_a_numba_log_density_is_named():
    with pytest.raises(LogDensityError, match=r"is NaN at a quadrature node, .* row \(\d+,\): y = .*x ="):
        _bad(_nb_log)


def test_parameter_names_are_checked_against_the_log_density():
    with pytest.raises(fg.ModelError, match=r"'y': the log density takes \(y, x\), not the parameter 'c'"):
        _bad(lambda y, x: y * x, c=1.0)
    with pytest.raises(fg.ModelError, match=r"'y': the log density needs the parameter 'scale', which was not given"):
        _bad(lambda y, x, scale: y * x)


def test_dose_response_demo_small():
    """The demo's nonlinear curves: converged, the posterior EC50s and slopes near per-compound least squares."""
    from demos import dose_response

    out = dose_response.main(small=True)
    r = out["result"]
    assert r.converged and not any("clipped" in note for note in r.notes)
    np.testing.assert_allclose(r.posterior("log_ec50").mean(), out["least_squares"][:, 0], atol=0.03)
    np.testing.assert_allclose(r.posterior("log_slope").mean(), out["least_squares"][:, 1], atol=0.03)
    assert 3.0 < np.exp(float(r.posterior("log_sigma").mean())) < 7.0


# ------------------------------------------------------------------------------------ handlers
@pytest.mark.parametrize("handler", ["Laplace", "MVI"])
def test_a_handler_claims_a_user_likelihood(handler):
    """fg.Laplace / fg.MVI on the weights of a logistic regression written out: the same q(w) as with the
    built-in factor, to the accuracy of the finite-difference derivatives."""
    X, y = _data("logit")

    def fit(user):
        with fg.Model("h") as m:
            n = fg.plate("n", N)
            w = fg.mv_gaussian("w", np.zeros(D), 1.0)
            eta = fg.inner(X, w, plates=[n])
            if user:
                fg.likelihood("y", lambda y, x: y * x - np.logaddexp(0.0, x), observed=y, plates=[n], x=eta)
            else:
                fg.bernoulli_logit("y", eta, observed=y)
        h = fg.Laplace() if handler == "Laplace" else fg.MVI("lr", seed=3)
        return fg.infer(m, handlers={"w": h})

    a, b = fit(True), fit(False)
    assert any("handlers" in note for note in a.notes)
    np.testing.assert_allclose(a.posterior("w").mean(), b.posterior("w").mean(), atol=1e-6)
    np.testing.assert_allclose(a.posterior("w").cov(), b.posterior("w").cov(), atol=1e-6)
    assert abs(a.elbo - b.elbo) < 1e-5


def test_pointwise_log_likelihood_of_a_user_likelihood_equals_the_builtin():
    """log p(y_i | θ⁽ˢ⁾) at the same draws: the written-out Poisson equals the built-in's; a potential is not data."""
    from factorgraph.posterior.loglik import pointwise_log_likelihood

    X, y = _data("poisson")
    draws = {"w": np.random.default_rng(4).normal(size=(5, D))}
    out = {}
    for user in (True, False):
        with fg.Model("ll") as m:
            n, d = fg.plate("n", N), fg.plate("d", D)
            w = fg.gaussian("w", 0.0, precision=1.0, plates=[d])
            eta = fg.inner(X, w, plates=[n])
            if user:
                fg.likelihood("y", lambda y, x: y * x - np.exp(x) - gammaln(y + 1.0), observed=y, plates=[n], x=eta)
                fg.potential("pen", lambda w: -0.5 * w * w, w=w)
            else:
                fg.poisson_log("y", eta, observed=y)
        out[user] = pointwise_log_likelihood(m, draws)
    assert sorted(out[True]) == ["y"]
    np.testing.assert_allclose(out[True]["y"], out[False]["y"], rtol=1e-12)


def test_data_nodes_as_parameters_and_set_data():
    """Data nodes as the observations and as a constant parameter: model.set_data (to another size) refits as a
    model built from the new arrays."""
    rng = np.random.default_rng(2)

    def logpdf(y, eta, off):
        return y * (eta + off) - np.exp(eta + off) - gammaln(y + 1.0)

    def build(x, y, off, nodes):
        with fg.Model("d") as m:
            n = fg.plate("n", x.size)
            a, b = fg.gaussian("a", 0.0, precision=1.0), fg.gaussian("b", 0.0, precision=1.0)
            wrap = (lambda k, v: fg.data(k, v)) if nodes else (lambda k, v: v)
            fg.likelihood("y", logpdf, observed=wrap("y", y), plates=[n], eta=a + b * wrap("x", x),
                          off=wrap("off", off))
        return m

    x, x2 = rng.normal(size=40), rng.normal(size=70)
    y, y2 = rng.poisson(np.exp(0.5 + 0.3 * x)) * 1.0, rng.poisson(np.exp(0.5 + 0.3 * x2)) * 1.0
    m = build(x, y, np.full(40, 0.1), True)
    fg.infer(m)
    m.set_data(x=x2, y=y2, off=np.full(70, -0.2))
    a, b = fg.infer(m), fg.infer(build(x2, y2, np.full(70, -0.2), False))
    np.testing.assert_allclose(a.posterior("b").mean(), b.posterior("b").mean(), rtol=1e-12)
    assert a.elbo == pytest.approx(b.elbo, rel=1e-12)


def test_missing_observations_drop_out_as_in_the_builtin():
    """A mask: the missing rows (NaN in the data) drop out of E[log f] and the messages, as in poisson_log."""
    X, y = _data("poisson")
    mask = np.random.default_rng(6).uniform(size=N) > 0.3
    y = np.where(mask, y, np.nan)

    def fit(user):
        with fg.Model("mask") as m:
            n, d = fg.plate("n", N), fg.plate("d", D)
            w = fg.gaussian("w", 0.0, precision=1.0, plates=[d])
            eta = fg.inner(X, w, plates=[n])
            if user:
                fg.likelihood("y", lambda y, x: y * x - np.exp(x) - gammaln(y + 1.0), observed=y, mask=mask,
                              plates=[n], x=eta)
            else:
                fg.poisson_log("y", eta, observed=np.where(mask, y, 0.0), mask=mask)
        return fg.infer(m, tol=None, param_tol=1e-13, max_iter=1000)

    a, b = fit(True), fit(False)
    np.testing.assert_allclose(a.posterior("w").mean(), b.posterior("w").mean(), atol=1e-8, rtol=0)
    assert abs(a.elbo - b.elbo) < 1e-8 * abs(b.elbo)


@numba.njit
def _nj_poisson(y, x):
    return y * x - math.exp(x) - math.lgamma(y + 1.0)


def test_an_njit_scalar_log_density_is_taken_as_it_is():
    """An @njit scalar function: fused in the sweeps, made a ufunc for the pointwise log-likelihood."""
    from factorgraph.posterior.loglik import pointwise_log_likelihood

    X, y = _data("poisson")
    with fg.Model("nj") as m:
        n, d = fg.plate("n", N), fg.plate("d", D)
        w = fg.gaussian("w", 0.0, precision=1.0, plates=[d])
        fg.likelihood("y", _nj_poisson, observed=y, plates=[n], x=fg.inner(X, w, plates=[n]))
    a = fg.infer(m, tol=None, param_tol=1e-13, max_iter=1000)
    b = _fit("poisson", False)
    np.testing.assert_allclose(a.posterior("w").mean(), b.posterior("w").mean(), atol=1e-8, rtol=0)
    ll = pointwise_log_likelihood(m, {"w": np.zeros((2, D))})["y"]
    np.testing.assert_allclose(ll, np.broadcast_to(-1.0 - gammaln(y + 1.0), (2, N)), rtol=1e-12)


def test_a_kink_the_rule_cannot_resolve_is_reported_and_a_fixed_order_is_used():
    """A Laplace log density −|y − x| under a broad q: no rule up to 128 nodes reaches 1e-10, which the result
    says (a RuntimeWarning and a note with the error); order= fixes the rule instead."""
    y = np.random.default_rng(8).normal(size=5)

    def fit(order):
        with fg.Model("kink") as m:
            n = fg.plate("n", 5)
            mu = fg.gaussian("mu", 0.0, precision=1.0)
            fg.likelihood("y", lambda y, x: -np.abs(y - x), observed=y, plates=[n], x=mu, order=order)
        return fg.infer(m)

    with pytest.warns(RuntimeWarning, match="less accurate than 1e-10"):
        r = fit(None)
    assert any("less accurate than 1e-10" in note for note in r.notes)
    fixed = fit(20)
    assert any("{'UserLikelihood1(y)': 20}" in note for note in fixed.notes)


def test_a_product_of_random_variables_is_labelled_an_approximation():
    """mu = a·b is not Gaussian under q: the quadrature takes the Gaussian with its moments, and the evidence is an
    approximation; an affine mu keeps the lower bound."""
    rng = np.random.default_rng(9)
    x = rng.normal(size=30)
    y = 1.0 + 0.5 * x + 0.5 * rng.normal(size=30)

    def fit(product):
        with fg.Model("prod") as m:
            n = fg.plate("n", 30)
            a, b = fg.gaussian("a", 1.0, precision=100.0), fg.gaussian("b", 1.0, precision=1.0)
            mu = a * b if product else a + b * x
            fg.likelihood("y", lambda y, mu: -0.5 * (y - mu) ** 2, observed=y, plates=[n], mu=mu)
        return fg.infer(m)

    assert fit(True).evidence_kind == "approximation"
    assert fit(False).evidence_kind == "lower bound"


def test_parameters_sharing_a_variable_are_jointly_gaussian():
    """u = a + b·x₁ and v = a + c·x₂ share a: the 2-D quadrature over their joint Gaussian (covariance Var(a)) reaches
    the fixed point of the same model written in one argument t = u + v, to 1e-8."""
    rng = np.random.default_rng(12)
    x1, x2 = rng.normal(size=100), rng.normal(size=100)
    y = (rng.uniform(size=100) < 1.0 / (1.0 + np.exp(-(0.5 + x1 - x2)))) * 1.0

    def fit(shared):
        with fg.Model("shared") as m:
            n = fg.plate("n", 100)
            a, b, c = (fg.gaussian(k, 0.0, precision=1.0) for k in "abc")
            if shared:
                fg.likelihood("y", lambda y, u, v: y * (u + v) - np.logaddexp(0.0, u + v), observed=y, plates=[n],
                              u=a + b * x1, v=a + c * x2)
            else:
                fg.likelihood("y", lambda y, t: y * t - np.logaddexp(0.0, t), observed=y, plates=[n],
                              t=2.0 * a + b * x1 + c * x2)
        return fg.infer(m, tol=None, param_tol=1e-13, max_iter=1000)

    s, one = fit(True), fit(False)
    assert s.converged and one.converged
    for v in "abc":
        np.testing.assert_allclose(s.posterior(v).mean(), one.posterior(v).mean(), atol=1e-8)
        np.testing.assert_allclose(s.posterior(v).var(), one.posterior(v).var(), atol=1e-8)
    assert abs(s.elbo - one.elbo) < 1e-8 * abs(one.elbo)


def test_sharing_refused_where_the_joint_is_not_tracked():
    X, y = _data("logit")
    with fg.Model("bad") as m:
        n, d = fg.plate("n", N), fg.plate("d", D)
        g = fg.plate("g", 3)
        w = fg.gaussian("w", 0.0, precision=1.0, plates=[d])
        a = fg.gaussian("a", 0.0, precision=1.0, plates=[g])
        b = fg.gaussian("b", 0.0, precision=1.0)
        lab1, lab2 = np.arange(N) % 3, (np.arange(N) + 1) % 3
        with pytest.raises(fg.ModelError, match=r"'y': the parameters use the variable 'a' through two different"):
            fg.likelihood("y", lambda y, u, v: y * u, observed=y, plates=[n], u=a[lab1], v=a[lab2])
        with pytest.raises(fg.ModelError, match=r"'y': parameter 'u' shares a variable .* not affine"):
            fg.likelihood("y", lambda y, u, v: y * u, observed=y, plates=[n], u=b * fg.inner(X, w, plates=[n]),
                          v=b + 1.0)
    assert m is not None


def test_indexed_gamma_precisions_reach_the_conjugate_fixed_point():
    """One precision per group, tau[g], as a positive parameter: the built-in Gaussian's VMP fixed point."""
    rng = np.random.default_rng(13)
    g = np.arange(60) % 3
    y = rng.normal(size=60) / np.sqrt(np.array([1.0, 4.0, 0.25])[g]) + 1.0

    def fit(user):
        with fg.Model("taug") as m:
            n, k = fg.plate("n", 60), fg.plate("k", 3)
            mu = fg.gaussian("mu", 0.0, precision=0.1)
            tau = fg.gamma("tau", 2.0, 1.0, plates=[k])
            if user:
                fg.likelihood("y", lambda y, m, t: 0.5 * np.log(t / (2 * np.pi)) - 0.5 * t * (y - m) ** 2,
                              observed=y, plates=[n], m=mu, t=tau[g])
            else:
                fg.gaussian("y", mu, precision=tau[g], plates=[n], observed=y)
        return fg.infer(m, fg.NCVMP() if user else fg.VMP(), tol=None, param_tol=1e-13, max_iter=1000)

    a, b = fit(True), fit(False)
    np.testing.assert_allclose(a.posterior("tau").mean(), b.posterior("tau").mean(), rtol=1e-8)
    np.testing.assert_allclose(a.posterior("mu").mean(), b.posterior("mu").mean(), atol=1e-8)
    assert abs(a.elbo - b.elbo) < 1e-8 * abs(b.elbo)
    assert not any("less accurate" in note for note in a.notes)
