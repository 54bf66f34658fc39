"""Gates on every factor, observed and partly observed selectors, and missing values.

* The VMP identity on every gated model: the natural parameters a latent variable receives (its prior,
  the q(z)-weighted messages of gated factors, the selector's E[log f] per category, pull-backs through
  expressions) equal the gradient of Σ_f E[log f] with respect to its expected statistics, by central
  finite differences.
* The ELBO never decreases under VMP on any gated model.
* Missing entries drop out of the likelihood: the evidence equals the exact marginal likelihood of the
  observed entries wherever mean field is exact.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import betaln, logsumexp
from scipy.stats import multivariate_normal

import factorgraph as fg
from distributions import Bernoulli, MvGaussian
from schedules.compile import compile_model
from schedules.engine import Engine

from .gated_models import GATED, NCVMP


def _algorithm(name):
    return fg.NCVMP() if name in NCVMP else fg.VMP()


@pytest.mark.parametrize("name", sorted(GATED))
def test_elbo_never_decreases_on_gated_models(name):
    m = GATED[name](np.random.default_rng(0))
    for seed in (0, 1):
        r = fg.infer(m, algorithm=_algorithm(name), seed=seed, max_iter=60, tol=1e-12)
        steps = np.diff(r.elbo_trace)
        assert np.all(steps >= -1e-9 * np.abs(r.elbo_trace[1:])), (name, seed, steps.min())
        assert not any("decrease" in w for w in r.warnings)


def _fd_check(eng: Engine, v, h=1e-6):
    nat = eng.natural_sum(v)
    stats = eng.stats[v.name]
    for i, s in enumerate(stats):
        grad = np.zeros(s.shape)
        for idx in np.ndindex(s.shape):
            vals = []
            for sign in (1.0, -1.0):
                pert = [np.array(a, dtype=float, copy=True) for a in stats]
                pert[i][idx] += sign * h
                eng.stats[v.name] = tuple(pert)
                eng.version[v.name] += 1  # expressions of v recompute their moments
                vals.append(eng.elbo_terms()[0])
            grad[idx] = (vals[0] - vals[1]) / (2 * h)
        eng.stats[v.name] = stats
        eng.version[v.name] += 1
        expected = np.broadcast_to(nat[i], grad.shape)
        keep = eng.c.pruned.get(v.name)
        if keep is not None:  # dropped selector entries (no observed descendant) are not in the bound
            grad, expected = grad[keep], expected[keep]
        if v.family is MvGaussian and i == 1:  # symmetric matrix statistic
            grad = 0.5 * (grad + np.swapaxes(grad, -1, -2))
            expected = 0.5 * (expected + np.swapaxes(expected, -1, -2))
        np.testing.assert_allclose(expected, grad, rtol=1e-5, atol=1e-5, err_msg=f"{v.name}, statistic {i}")


@pytest.mark.parametrize("name", sorted(GATED))
def test_messages_are_gradients_of_the_gated_evidence(name):
    """Every latent variable of every gated model receives ∂Σ_f E[log f]/∂E[u(v)] (weights q(z = k),
    selector messages, missing-entry weights and coordinate masks included)."""
    m = GATED[name](np.random.default_rng(0))
    c = compile_model(m, _algorithm(name))
    eng = Engine(c)
    eng.initialise({}, np.random.default_rng(0))
    for v in c.order:  # two sweeps away from the starting point (NCVMP's first messages are sent)
        eng.update(v)
    for v in c.order:
        eng.update(v)
    for v in c.latent:
        _fd_check(eng, v)


# ------------------------------------------------------------------------------------ missing values
def _mixture_with_constant_components(x, mask):
    mus, pi = np.array([-2.0, 2.0]), np.array([0.4, 0.6])
    with fg.Model("constant-components") as m:
        n = fg.plate("n", len(x))
        z = fg.categorical("z", pi, plates=[n])
        fg.gaussian("x", fg.select(mus, z), precision=1.0, plates=[n], observed=np.where(mask, x, np.nan), mask=mask)
    exact = logsumexp(np.log(pi) - 0.5 * np.log(2 * np.pi) - 0.5 * (x[mask, None] - mus) ** 2, axis=1).sum()
    return m, exact


def test_missing_entries_of_a_gated_factor_drop_out_exactly():
    """10 points, constant components, 2 entries masked: the ELBO is the exact log evidence of the 8
    observed points (imputing the 2 under mean field gave a lower bound, 1.8 nats below here)."""
    rng = np.random.default_rng(3)
    x = np.r_[rng.normal(-2, 1, 5), rng.normal(2, 1, 5)]
    mask = np.ones(10, bool)
    mask[[1, 7]] = False
    m, exact = _mixture_with_constant_components(x, mask)
    r = fg.infer(m)
    assert abs(r.elbo - exact) < 1e-10
    # the missing entries' selectors stay at the prior: nothing is learned about them
    np.testing.assert_allclose(r.posterior("z").probs[~mask], [[0.4, 0.6]] * 2, atol=1e-12)
    with pytest.raises(KeyError):
        r.posterior("x")


def test_missing_values_equal_dropping_them():
    """Scalar Gaussian with latent mean and precision: masking entries gives the fit without them."""
    rng = np.random.default_rng(1)
    x = rng.normal(1.0, 2.0, 12)
    mask = rng.random(12) < 0.7

    def fit(data, msk):
        with fg.Model() as m:
            n = fg.plate("n", len(data))
            mu = fg.gaussian("mu", 0.0, precision=0.1)
            tau = fg.gamma("tau", 1.0, 1.0)
            fg.gaussian("x", mu, precision=tau, plates=[n], observed=data, mask=msk)
        return fg.infer(m, tol=1e-14, max_iter=500)

    a, b = fit(np.where(mask, x, np.nan), mask), fit(x[mask], None)
    assert abs(a.elbo - b.elbo) < 1e-9
    np.testing.assert_allclose(a.posterior("mu").mean(), b.posterior("mu").mean(), rtol=1e-9)


def test_mv_gaussian_missing_coordinates_are_marginalised_exactly():
    """Known full precision Λ, mean μ ~ N(0, I/λ₀): the evidence is the exact Gaussian marginal of the observed
    coordinates (whole rows and single coordinates missing), and q(μ) is the exact posterior."""
    rng = np.random.default_rng(2)
    D, N = 3, 7
    A = rng.normal(size=(D, D))
    Lam = A @ A.T + D * np.eye(D)
    S = np.linalg.inv(Lam)
    Y = rng.multivariate_normal(np.ones(D), S, N)
    cm = rng.random((N, D)) < 0.6
    cm[0] = True
    cm[3] = False  # a whole row missing
    with fg.Model() as m:
        n = fg.plate("n", N)
        mu = fg.mv_gaussian("mu", np.zeros(D), precision=0.5)
        fg.mv_gaussian("y", mu, precision=Lam, plates=[n], observed=Y, mask=cm)
    r = fg.infer(m, tol=1e-14)
    # exact: the observed coordinates stacked are Gaussian with covariance B (I/0.5) Bᵀ + blockdiag(S_oo)
    rows = [(i, np.flatnonzero(cm[i])) for i in range(N) if cm[i].any()]
    B = np.concatenate([np.eye(D)[o] for _, o in rows])
    C = B @ (2.0 * np.eye(D)) @ B.T
    at = 0
    for _, o in rows:
        C[at:at + len(o), at:at + len(o)] += S[np.ix_(o, o)]
        at += len(o)
    yo = np.concatenate([Y[i, o] for i, o in rows])
    exact = multivariate_normal(np.zeros(len(yo)), C).logpdf(yo)
    assert abs(r.elbo - exact) < 1e-9


def test_mv_gaussian_missing_coordinates_match_scalar_gaussians():
    """Λ = αI with α ~ Gamma and a constant mean: the masked mv_gaussian equals the same data as a plated
    scalar Gaussian with the same mask (two code paths: coordinate masks vs instance weights)."""
    rng = np.random.default_rng(4)
    Y = rng.normal(size=(6, 3))
    cm = rng.random((6, 3)) < 0.6
    cm[2] = False
    with fg.Model() as a:
        n = fg.plate("n", 6)
        alpha = fg.gamma("alpha", 2.0, 1.0)
        fg.mv_gaussian("y", np.array([0.5, 0.0, -0.5]), precision=alpha, plates=[n], observed=Y, mask=cm)
    with fg.Model() as b:
        n, d = fg.plate("n", 6), fg.plate("d", 3)
        alpha = fg.gamma("alpha", 2.0, 1.0)
        fg.gaussian("y", np.array([0.5, 0.0, -0.5]), precision=alpha, plates=[n, d], observed=np.where(cm, Y, np.nan),
                    mask=cm)
    ra, rb = fg.infer(a), fg.infer(b)
    assert abs(ra.elbo - rb.elbo) < 1e-10
    np.testing.assert_allclose(ra.posterior("alpha").mean(), rb.posterior("alpha").mean(), rtol=1e-12)


def test_normal_gamma_regression_with_missing_responses():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(20, 3))
    y = X @ np.array([1.0, -1.0, 0.5]) + 0.2 * rng.normal(size=20)
    mask = rng.random(20) < 0.75

    def fit(Xd, yd, msk):
        with fg.Model() as m:
            n = fg.plate("n", len(yd))
            w = fg.gaussian_gamma("w", dim=3)
            fg.gaussian("y", fg.inner(Xd, w, plates=[n]), precision=w.tau, plates=[n], observed=yd, mask=msk)
        return fg.infer(m)

    a, b = fit(X, np.where(mask, y, np.nan), mask), fit(X[mask], y[mask], None)
    assert abs(a.elbo - b.elbo) < 1e-10


# ------------------------------------------------------------------------------------ selectors
def test_observed_selector_is_a_fixed_assignment():
    """Observed labels: the ELBO is the exact evidence log p(z) + Σ_k log p(x_k) (conjugate, known precision)."""
    rng = np.random.default_rng(6)
    z = np.array([0, 1, 1, 0, 1, 1, 0, 1])
    x = np.where(z == 1, 2.0, -2.0) + rng.normal(size=8)
    with fg.Model() as m:
        k, n = fg.plate("k", 2), fg.plate("n", 8)
        zz = fg.categorical("z", fg.dirichlet("pi", np.ones(2)), plates=[n], observed=z)
        mu = fg.gaussian("mu", 0.0, precision=0.1, plates=[k])
        fg.gaussian("x", mu[zz], precision=1.0, plates=[n], observed=x)
    r = fg.infer(m, tol=1e-14)
    counts = np.bincount(z, minlength=2)
    exact = betaln(1 + counts[0], 1 + counts[1]) - betaln(1, 1)
    for kk in range(2):
        xs = x[z == kk]
        exact += multivariate_normal(np.zeros(len(xs)), np.eye(len(xs)) + 10.0).logpdf(xs)
    assert abs(r.elbo - exact) < 1e-9


@pytest.mark.parametrize("family", ["categorical", "bernoulli"])
def test_partly_observed_selector_is_a_point_mass_where_observed(family):
    """Semi-supervised: an entry observed as 0 (here against its data point) has q(z = 0) = 1, the
    clusters are named after the observed labels, and the fit is monotone."""
    rng = np.random.default_rng(7)
    x = np.r_[rng.normal(-2, 1, 10), rng.normal(2, 1, 10)]
    mask = np.zeros(20, bool)
    mask[[0, 1, 15]] = True
    lab = np.full(20, np.nan)
    lab[[0, 1, 15]] = [1, 0, 1]  # entry 0 lies with the "0" cluster but is observed as 1
    with fg.Model() as m:
        k, n = fg.plate("k", 2), fg.plate("n", 20)
        if family == "categorical":
            z = fg.categorical("z", fg.dirichlet("pi", np.ones(2)), plates=[n], observed=lab, mask=mask)
        else:
            z = fg.bernoulli("z", 0.5, plates=[n], observed=lab, mask=mask)
        mu = fg.gaussian("mu", 0.0, precision=0.01, plates=[k])
        fg.gaussian("x", mu[z], precision=1.0, plates=[n], observed=x)
    for seed in range(4):
        r = fg.infer(m, seed=seed)
        q = r.posterior("z")
        p1 = q.probs[:, 1] if family == "categorical" else q.probs
        np.testing.assert_allclose(p1[[0, 1, 15]], [1.0, 0.0, 1.0], atol=1e-12)
        assert r.posterior("mu").mean()[0] < 0 < r.posterior("mu").mean()[1]
        assert np.all(np.diff(r.elbo_trace) >= -1e-9 * np.abs(r.elbo_trace[1:]))


def test_bernoulli_selector_equals_two_category_categorical():
    """v[b] with a Bernoulli b is v[z] with z ~ Categorical(1 − p, p): same fixed point and bound."""
    rng = np.random.default_rng(8)
    x = np.r_[rng.normal(-2, 1, 6), rng.normal(2, 1, 6)]
    init = rng.dirichlet(np.ones(2), 12)

    def fit(bern):
        with fg.Model() as m:
            k, n = fg.plate("k", 2), fg.plate("n", 12)
            z = fg.bernoulli("z", 0.3, plates=[n]) if bern else fg.categorical("z", [0.7, 0.3], plates=[n])
            mu = fg.gaussian("mu", 0.0, precision=0.1, plates=[k])
            tau = fg.gamma("tau", 2.0, 2.0)
            fg.gaussian("x", mu[z], precision=tau, plates=[n], observed=x)
        start = Bernoulli(probs=init[:, 1]) if bern else init
        return fg.infer(m, init={"z": start}, tol=1e-14, max_iter=500)

    a, b = fit(True), fit(False)
    assert abs(a.elbo - b.elbo) < 1e-10
    np.testing.assert_allclose(a.posterior("z").probs, b.posterior("z").probs[:, 1], atol=1e-10)
    np.testing.assert_allclose(a.posterior("mu").mean(), b.posterior("mu").mean(), rtol=1e-9)


# ------------------------------------------------------------------------------------ models.mixture
def test_mixture_families_run_and_agree():
    """models.mixture for every family; the diagonal mv_gaussian mixture equals the per-coordinate Gaussian
    mixture (same model, two factor types), and missing entries are accepted."""
    from factorgraph import models

    rng = np.random.default_rng(9)
    X = np.r_[rng.normal(-2, 1, (15, 2)), rng.normal(2, 1, (15, 2))]
    a, b = models.mixture("mv_gaussian", 2, X), models.mixture("gaussian", 2, X)
    assert abs(a.elbo - b.elbo) < 1e-8
    np.testing.assert_allclose(a.posterior("mu").mean(), b.posterior("mu").mean(), atol=1e-7)
    mask = rng.random(X.shape) < 0.8
    for family, data in [("mv_gaussian", X), ("gaussian", X), ("bernoulli", (X > 0).astype(float)),
                         ("categorical", (X > 0).astype(int) + (X > 1))]:
        r = models.mixture(family, 2, data, mask=mask)
        assert r.converged and np.all(np.diff(r.elbo_trace) >= -1e-9 * np.abs(r.elbo_trace[1:]))
    with pytest.raises(fg.ModelError, match="family must be one of"):
        models.mixture("poisson", 2, X)


def test_one_component_is_the_model_without_a_mixture():
    """K = 1, the baseline when K is chosen by the evidence: a Dirichlet over one category is the point mass
    π = 1 and q(z_n = 0) = 1, so the bound is the evidence of the single component: for Bernoulli columns with
    Beta(1, 1) priors, Σ_d log B(1 + s_d, 1 + N − s_d) exactly; a one-category gate equals no gate."""
    from scipy.special import betaln

    from factorgraph import models

    rng = np.random.default_rng(4)
    B = (rng.random((20, 3)) < 0.3).astype(float)
    r = models.mixture("bernoulli", 1, B)
    s = B.sum(0)
    assert r.elbo == pytest.approx(float(np.sum(betaln(1 + s, 1 + len(B) - s))), rel=1e-12)
    x = rng.normal(size=7)

    def fit(gated):
        with fg.Model("one") as m:
            n = fg.plate("n", 7)
            if gated:
                z = fg.categorical("z", fg.dirichlet("pi", [2.0]), plates=[n])
                mean = fg.gaussian("mu", 0.0, precision=1.0, plates=[fg.plate("k", 1)])[z]
            else:
                mean = fg.gaussian("mu", 0.0, precision=1.0)
            fg.gaussian("x", mean, precision=fg.gamma("tau", 1.0, 1.0), plates=[n], observed=x)
        return fg.infer(m, tol=1e-13)

    a, b = fit(True), fit(False)
    assert a.elbo == pytest.approx(b.elbo, rel=1e-12)
    assert float(a.posterior("mu").mean()[0]) == pytest.approx(float(b.posterior("mu").mean()), rel=1e-10)


@pytest.mark.parametrize("family", ["poisson", "binomial", "multinomial"])
def test_missing_counts_equal_dropping_them(family):
    """Counts are observed-only families: their missing entries drop out of the likelihood exactly."""
    rng = np.random.default_rng(10)
    mask = rng.random(10) < 0.6
    if family == "multinomial":
        y = rng.multinomial(6, [0.2, 0.3, 0.5], size=10).astype(float)
    else:
        y = (rng.poisson(3.0, 10) if family == "poisson" else rng.binomial(6, 0.3, 10)).astype(float)

    def fit(data, msk):
        with fg.Model() as m:
            n = fg.plate("n", len(data))
            if family == "poisson":
                fg.poisson("y", fg.gamma("lam", 1.0, 0.2), plates=[n], observed=data, mask=msk)
            elif family == "binomial":
                fg.binomial("y", 6, fg.beta("p"), plates=[n], observed=data, mask=msk)
            else:
                fg.multinomial("y", 6, fg.dirichlet("p", np.ones(3)), plates=[n], observed=data, mask=msk)
        return fg.infer(m)

    missing = np.where(mask[:, None] if y.ndim == 2 else mask, y, np.nan)
    assert abs(fit(missing, mask).elbo - fit(y[mask], None).elbo) < 1e-10


def test_bernoulli_selector_names_its_plate():
    """A Bernoulli selector over a variable with two plates of size 2 says which with categories= (as
    fg.categorical does); the fit equals the two-category Categorical selector's."""
    X = np.array([[1, 0], [1, 1], [0, 0], [0, 1], [1, 1], [0, 0]])

    def fit(kind):
        with fg.Model(kind) as m:
            k, n, d = fg.plate("k", 2), fg.plate("n", 6), fg.plate("d", 2)
            if kind == "bernoulli":
                z = fg.bernoulli("z", 0.5, plates=[n], categories=k)
            else:
                z = fg.categorical("z", [0.5, 0.5], plates=[n], categories=k)
            p = fg.beta("p", 1.0, 1.0, plates=[k, d])
            fg.bernoulli("x", p[z], plates=[n, d], observed=X)
        return fg.infer(m, seed=0, tol=1e-13)

    b, c = fit("bernoulli"), fit("categorical")
    assert b.elbo == pytest.approx(c.elbo, rel=1e-12)
    np.testing.assert_allclose(b.posterior("z").probs, c.posterior("z").probs[:, 1], atol=1e-10)
    with fg.Model("ambiguous"):
        k, n, d = fg.plate("k", 2), fg.plate("n", 6), fg.plate("d", 2)
        p = fg.beta("p", 1.0, 1.0, plates=[k, d])
        with pytest.raises(fg.ModelError, match=r"pass categories=<plate> to fg\.bernoulli"):
            p[fg.bernoulli("z", 0.5, plates=[n])]
        with pytest.raises(fg.ModelError, match=r"'w': categories must be a plate of size 2"):
            fg.bernoulli("w", 0.5, plates=[n], categories=fg.plate("three", 3))


def test_select_values_over_the_variables_plates():
    """fg.select(values, z) with values of shape (K, D) over the variable's last plate (per-pixel prototypes),
    or (K, D, 1) when the plates run (d, n): with π and the values known the mean-field q(z) is the exact
    posterior, so the ELBO is the exact log evidence Σ_n log Σ_k π_k Π_d p(x_nd | k), and the pointwise
    log-likelihood is each row's term."""
    from scipy.special import logsumexp
    from scipy.stats import norm

    rng = np.random.default_rng(8)
    N, D = 40, 3
    M = np.array([[0.0, 1.0, 2.0], [2.0, 0.5, -1.0]])
    zt = rng.integers(0, 2, N)
    X = M[zt] + rng.normal(size=(N, D))
    with fg.Model("prototypes") as m:
        n, d, k = fg.plate("n", N), fg.plate("d", D), fg.plate("k", 2)
        z = fg.categorical("z", [0.3, 0.7], plates=[n], categories=k)
        fg.gaussian("x", mean=fg.select(M, z), precision=1.0, plates=[n, d], observed=X)
    r = fg.infer(m)
    rows = logsumexp(np.stack([norm.logpdf(X, M[j]).sum(1) for j in range(2)], 1) + np.log([0.3, 0.7]), axis=1)
    assert r.elbo == pytest.approx(rows.sum(), abs=1e-10)
    np.testing.assert_allclose(r.to_arviz(draws=2, chains=1).log_likelihood["x"].values[0, 0], rows, rtol=1e-12)
    P = np.array([[0.1, 0.9, 0.2], [0.8, 0.1, 0.7]])
    B = (rng.uniform(size=(N, D)) < P[zt]).astype(float)
    with fg.Model("bernoulli prototypes, plates (d, n)") as m:
        k, d, n = fg.plate("k", 2), fg.plate("d", D), fg.plate("n", N)
        z = fg.categorical("z", [0.5, 0.5], plates=[n], categories=k)
        fg.bernoulli("b", fg.select(P[:, :, None], z), plates=[d, n], observed=B.T)
    r = fg.infer(m)
    lik = np.stack([(B * np.log(P[j]) + (1 - B) * np.log1p(-P[j])).sum(1) for j in range(2)], 1)
    assert r.elbo == pytest.approx(logsumexp(lik + np.log(0.5), axis=1).sum(), abs=1e-10)
    assert fg.predict(r, draws=3)["b"].shape == (3, D, N)
    with fg.Model("bad"), pytest.raises(fg.ModelError, match=r"'y': fg.select values for mean have shape \(2, 4\)"):
        n, d, k = fg.plate("n", N), fg.plate("d", D), fg.plate("k", 2)
        z = fg.categorical("z", [0.5, 0.5], plates=[n], categories=k)
        fg.gaussian("y", mean=fg.select(np.zeros((2, 4)), z), precision=1.0, plates=[n, d], observed=X)


def test_select_constant_mv_gaussian_precisions():
    """mv_gaussian(mean=fg.select(M, z), precision=fg.select(L, z)): K known precision matrices (or scalars, or
    diagonals).  With π, means and precisions known, q(z) is the exact posterior: the ELBO is the exact log
    evidence, the pointwise log-likelihood each row's, and a confidently assigned row's predictive covariance
    is its category's L⁻¹."""
    from scipy.special import logsumexp
    from scipy.stats import multivariate_normal as mvn

    rng = np.random.default_rng(10)
    N = 50
    M = np.array([[0.0, 0.0], [3.0, 3.0]])
    L = np.array([[[4.0, 1.0], [1.0, 2.0]], [[0.5, 0.0], [0.0, 0.5]]])
    zt = rng.integers(0, 2, N)
    X = np.array([rng.multivariate_normal(M[k], np.linalg.inv(L[k])) for k in zt])
    for values, mats in [(L, L), (np.array([2.0, 0.5]), np.array([2.0, 0.5])[:, None, None] * np.eye(2)),
                         (np.array([[1.0, 3.0], [0.5, 0.2]]), np.array([np.diag([1.0, 3.0]), np.diag([0.5, 0.2])]))]:
        with fg.Model("known components") as m:
            n, k = fg.plate("n", N), fg.plate("k", 2)
            z = fg.categorical("z", [0.4, 0.6], plates=[n], categories=k)
            fg.mv_gaussian("x", fg.select(M, z), precision=fg.select(values, z), plates=[n], observed=X)
        r = fg.infer(m)
        rows = logsumexp(np.stack([mvn(M[j], np.linalg.inv(mats[j])).logpdf(X) for j in range(2)], 1)
                         + np.log([0.4, 0.6]), axis=1)
        assert r.elbo == pytest.approx(rows.sum(), abs=1e-9)
        np.testing.assert_allclose(r.to_arviz(draws=2, chains=1).log_likelihood["x"].values[0, 0], rows, rtol=1e-12)
    q = r.posterior("z").probs
    i = int(np.argmax(q[:, 1]))
    draws = fg.predict(r, draws=20_000, seed=0)["x"][:, i]
    np.testing.assert_allclose(np.cov(draws.T), np.linalg.inv(mats[1]), atol=0.15)
