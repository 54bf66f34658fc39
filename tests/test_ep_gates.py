"""EP on gated Gaussian factors (mixtures with known precisions): Minka's clutter problem against a plain numpy EP
and the exact posterior by quadrature, the site's rule against quadrature, a one-observation mixture (EP exact),
and what EP refuses."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

import factorgraph as fg
from factorgraph.graph.nodes import ModelError
from factors.kernels.ep_gates import gate_rows

MODES = [False, True]  # sequential, parallel
PRIOR_VAR, CLUTTER_VAR = 100.0, 10.0


def _clutter_data(N=20, w=0.25, seed=0):
    rng = np.random.default_rng(seed)
    clutter = rng.random(N) < w
    return np.where(clutter, rng.normal(0.0, np.sqrt(CLUTTER_VAR), N), rng.normal(2.0, 1.0, N))


def clutter_model(y, w):
    """x ~ N(0, 100); y_i ~ (1 − w) N(x, 1) + w N(0, 10): z_i ~ Bernoulli(w), True = clutter."""
    with fg.Model("clutter") as m:
        k, n = fg.plate("k", 2), fg.plate("n", len(y))
        x = fg.gaussian("x", 0.0, precision=1.0 / PRIOR_VAR)
        z = fg.bernoulli("z", w, plates=[n], categories=k)
        fg.gaussian("y", (x * np.array([1.0, 0.0]))[z], precision=fg.select([1.0, 1.0 / CLUTTER_VAR], z),
                    plates=[n], observed=y)
    return m


def _numpy_clutter_ep(y, w, parallel, sweeps=300):
    """Minka (2001), §3.3: EP for the clutter problem with Gaussian site terms (τ_i, ν_i)."""
    N = len(y)
    tau, nu = np.zeros(N), np.zeros(N)
    t0 = 1.0 / PRIOR_VAR
    clut = np.log(w) + norm.logpdf(y, 0.0, np.sqrt(CLUTTER_VAR))

    def site(tc, nc, i):
        m, v = nc / tc, 1.0 / tc
        lin = np.log1p(-w) + norm.logpdf(y[i], m, np.sqrt(v + 1.0))
        logz = np.logaddexp(lin, clut[i])
        r = np.exp(lin - logz)
        mean = m + r * v * (y[i] - m) / (v + 1.0)
        var = v - r * v**2 / (v + 1.0) + r * (1.0 - r) * v**2 * (y[i] - m) ** 2 / (v + 1.0) ** 2
        return logz, 1.0 / var - tc, mean / var - nc

    idx = np.arange(N)
    for _ in range(sweeps):
        if parallel:
            T, V = t0 + tau.sum(), nu.sum()
            _, tau, nu = site(T - tau, V - nu, idx)
        else:
            for i in range(N):
                T, V = t0 + tau.sum(), nu.sum()
                _, tau[i], nu[i] = site(T - tau[i], V - nu[i], i)
    T, V = t0 + tau.sum(), nu.sum()

    def kappa(nat, prec):
        return nat**2 / (2 * prec) - 0.5 * np.log(prec) + 0.5 * np.log(2 * np.pi)

    logz = site(T - tau, V - nu, idx)[0]
    log_ep = kappa(V, T) - kappa(0.0, t0) + np.sum(logz + kappa(V - nu, T - tau) - kappa(V, T))
    return V / T, 1.0 / T, log_ep


def _exact(y, w):
    g = np.linspace(-60, 60, 240001)
    lp = norm.logpdf(g, 0, np.sqrt(PRIOR_VAR)) + np.logaddexp(
        np.log1p(-w) + norm.logpdf(y[:, None], g, 1.0),
        (np.log(w) + norm.logpdf(y, 0, np.sqrt(CLUTTER_VAR)))[:, None]).sum(0)
    top = lp.max()
    p = np.exp(lp - top)
    z = np.trapezoid(p, g)
    mean = np.trapezoid(p * g, g) / z
    return mean, np.trapezoid(p * (g - mean) ** 2, g) / z, top + np.log(z)


@pytest.mark.parametrize("parallel", MODES)
def test_clutter_is_the_ep_fixed_point(parallel):
    y, w = _clutter_data(), 0.25
    r = fg.infer(clutter_model(y, w), algorithm=fg.EP(parallel=parallel, tol=1e-13, max_iter=500))
    assert r.converged and r.evidence_kind == "EP approximation"
    mean, var, logz = _numpy_clutter_ep(y, w, parallel)
    q = r.posterior("x")
    assert abs(q.mean() - mean) < 1e-8 and abs(q.var() - var) < 1e-8
    assert abs(r.elbo - logz) < 1e-8
    assert any("mixtures (gated Gaussians)" in s and "Gaussian(y)" in s for s in r.notes)
    # q(z): the responsibilities of the tilted distributions (the site's message times the prior)
    pz = r.posterior("z").mean()
    assert np.all((pz > 0) & (pz < 1)) and pz[np.argmax(np.abs(y - mean))] > 0.9


def test_clutter_ep_is_much_closer_to_the_exact_posterior_than_vmp():
    y, w = _clutter_data(N=30, seed=3), 0.25
    m = clutter_model(y, w)
    ep = fg.infer(m, algorithm=fg.EP())
    vmp = fg.infer(m, tol=1e-12, max_iter=1000)
    mean, var, logz = _exact(y, w)
    err = {}
    for name, r in (("ep", ep), ("vmp", vmp)):
        q = r.posterior("x")
        err[name] = (abs(q.mean() - mean), abs(q.var() - var) / var, abs(r.elbo - logz))
    assert err["ep"][0] < 0.1 * err["vmp"][0]
    assert err["ep"][1] < 0.1 * err["vmp"][1]
    assert err["ep"][2] < 0.1 * err["vmp"][2]


def _quadrature(logf, mu, v):
    sd = np.sqrt(v)
    d = np.linspace(mu - 14 * sd, mu + 14 * sd, 400001)
    lw = logf(d) - 0.5 * (d - mu) ** 2 / v - 0.5 * np.log(2 * np.pi * v)
    top = lw.max()
    p = np.exp(lw - top)
    h = d[1] - d[0]
    z = np.trapezoid(p, dx=h)
    mean = np.trapezoid(p * d, dx=h) / z
    return top + np.log(z), mean, np.trapezoid(p * (d - mean) ** 2, dx=h) / z


@pytest.mark.parametrize(("mu", "v"), [(0.3, 2.0), (-2.0, 0.5), (4.0, 9.0), (-1.0, 25.0), (6.0, 0.01)])
def test_clutter_site_message_times_cavity_has_the_tilted_moments(mu, v):
    """The site with the selector summed out, f(x) = (1 − w)N(y; x, 1) + w N(y; 0, 10): one row of the kernel
    from the cavity N(μ, v) gives q with the moments and normaliser of f(x)N(x; μ, v) by quadrature."""
    y, w = 1.3, 0.3
    q_lin, q_prec = np.array([mu / v]), np.array([1.0 / v])
    h, lam, zeta = np.zeros((1, 1)), np.zeros((1, 1)), np.zeros((1, 2))
    zq = np.log([[1 - w, w]])
    out = np.empty((1, 1)), np.empty((1, 1)), np.empty((1, 2)), np.empty(1)
    C = np.array([[[-1.0], [0.0]]])  # d_k = y − mean_k: −x in component 0, absent in component 1
    skipped = gate_rows(np.zeros((1, 1), np.int64), C, np.array([[y, y]]), np.array([[1.0, 1.0 / CLUTTER_VAR]]),
                        h, lam, q_lin, q_prec, np.zeros(1, np.int64), zeta, zq, False, 0.0, True, *out)
    assert skipped == 0

    def logf(x):
        return np.logaddexp(np.log1p(-w) + norm.logpdf(y, x, 1.0), np.log(w) + norm.logpdf(y, 0, np.sqrt(10)))

    ql, qm, qv = _quadrature(logf, mu, v)
    np.testing.assert_allclose([out[3][0], q_lin[0] / q_prec[0], 1.0 / q_prec[0]], [ql, qm, qv], rtol=1e-7,
                               atol=1e-9)
    # the selector's new q: the tilted probability of clutter
    lin = np.log1p(-w) + norm.logpdf(y, mu, np.sqrt(v + 1))
    clut = np.log(w) + norm.logpdf(y, 0, np.sqrt(10))
    pz = np.exp(zq[0] - np.logaddexp(*zq[0]))
    np.testing.assert_allclose(pz[1], np.exp(clut - np.logaddexp(lin, clut)), rtol=1e-12)


@pytest.mark.parametrize("parallel", MODES)
def test_one_observation_of_a_mixture_is_exact(parallel):
    """One y from N(mu[z], 1/a_z) with two latent means and a Categorical z: the one site's tilted distribution is
    the posterior, so EP gives the exact marginal moments of each mean, exact q(z) and the exact log p(y)."""
    y, p, a, m0, v0 = 0.8, np.array([0.3, 0.7]), np.array([2.0, 0.5]), np.array([-1.0, 1.5]), np.array([1.0, 4.0])
    with fg.Model("one") as m:
        k, n = fg.plate("k", 2), fg.plate("n", 1)
        mu = fg.gaussian("mu", m0, precision=1 / v0, plates=[k])
        z = fg.categorical("z", p, plates=[n], categories=k)
        fg.gaussian("y", mu[z], precision=fg.select(a, z), plates=[n], observed=[y])
    r = fg.infer(m, algorithm=fg.EP(parallel=parallel))
    s = v0 + 1 / a
    lz = norm.logpdf(y, m0, np.sqrt(s))
    post = p * np.exp(lz - lz.max())
    post /= post.sum()
    # under component j, mu_j is updated and the other mean keeps its prior
    mean = np.where(np.eye(2, dtype=bool), m0 + v0 * (y - m0) / s, m0[:, None] * np.ones(2))  # [element, comp]
    var = np.where(np.eye(2, dtype=bool), v0 - v0**2 / s, v0[:, None] * np.ones(2))
    Em = mean @ post
    Vm = (var + mean**2) @ post - Em**2
    q = r.posterior("mu")
    np.testing.assert_allclose(q.mean(), Em, atol=1e-12)
    np.testing.assert_allclose(q.var(), Vm, atol=1e-12)
    np.testing.assert_allclose(r.posterior("z").mean()[0], post, atol=1e-12)
    assert abs(r.elbo - np.log(p @ np.exp(lz))) < 1e-10


def test_mixture_of_means_sequential_and_parallel_share_the_fixed_point():
    rng = np.random.default_rng(4)
    y = np.r_[rng.normal(-2, 1, 15), rng.normal(2.5, 1, 15)]
    with fg.Model("mix") as m:
        k, n = fg.plate("k", 2), fg.plate("n", 30)
        mu = fg.gaussian("mu", [-1.0, 1.0], precision=0.1, plates=[k])
        z = fg.categorical("z", [0.5, 0.5], plates=[n], categories=k)
        fg.gaussian("y", mu[z], precision=1.0, plates=[n], observed=y)
    rs = fg.infer(m, algorithm=fg.EP(tol=1e-12, max_iter=500))
    rp = fg.infer(m, algorithm=fg.EP(parallel=True, tol=1e-12, max_iter=500))
    assert rs.converged and rp.converged
    np.testing.assert_allclose(rs.posterior("mu").mean(), rp.posterior("mu").mean(), atol=1e-7)
    np.testing.assert_allclose(rs.posterior("mu").var(), rp.posterior("mu").var(), atol=1e-7)
    assert abs(rs.elbo - rp.elbo) < 1e-7
    assert np.all(np.abs(rs.posterior("mu").mean() - [-2, 2.5]) < 0.8)


def test_gated_gaussian_with_a_random_precision_is_refused_by_name():
    y = _clutter_data(N=6)
    with fg.Model("bad") as m:
        k, n = fg.plate("k", 2), fg.plate("n", 6)
        mu = fg.gaussian("mu", 0.0, precision=0.1, plates=[k])
        tau = fg.gamma("tau", 2.0, 2.0, plates=[k])
        z = fg.categorical("z", [0.5, 0.5], plates=[n], categories=k)
        fg.gaussian("y", mu[z], precision=tau[z], plates=[n], observed=y)
    with pytest.raises(ModelError, match=r"Gaussian\(y\).*precision .tau. is random"):
        fg.infer(m, algorithm=fg.EP())


def test_clutter_demo_small():
    import importlib

    out = importlib.import_module("demos.clutter_ep").main(small=True, seed=0)
    assert out["done"]  # the datasets where every method converged
    ep, vmp = out["summary"]["EP (sequential)"], out["summary"]["VMP"]
    assert ep[0] < 0.1 * vmp[0] and ep[1] < 0.1 * vmp[1] and ep[2] < 0.1 * vmp[2]
    for row in out["rows"]:
        if row["data"] in out["done"] and row["method"].startswith("EP"):
            assert row["mean_err"] < 1e-3 and abs(row["sd_ratio"] - 1) < 0.02 and abs(row["logz_err"]) < 0.01



def test_mixture_with_learned_weights_runs_hybrid():
    """Dirichlet weights over the selector: Categorical(z | pi) sends its VMP message (hybrid EP), the gated
    Gaussians are mixture sites; both schedules reach one fixed point near the generating components."""
    rng = np.random.default_rng(4)
    y = np.r_[rng.normal(-2, 1, 10), rng.normal(2.5, 1, 20)]
    with fg.Model("mix-pi") as m:
        k, n = fg.plate("k", 2), fg.plate("n", 30)
        pi = fg.dirichlet("pi", np.ones(2))
        mu = fg.gaussian("mu", [-1.0, 1.0], precision=0.1, plates=[k])
        z = fg.categorical("z", pi, plates=[n], categories=k)
        fg.gaussian("y", mu[z], precision=1.0, plates=[n], observed=y)
    rs = fg.infer(m, algorithm=fg.EP(tol=1e-12, max_iter=500))
    rp = fg.infer(m, algorithm=fg.EP(parallel=True, tol=1e-12, max_iter=500))
    assert rs.converged and rp.converged
    assert any("Categorical(z)" in s and "VMP message" in s for s in rs.notes)
    np.testing.assert_allclose(rs.posterior("mu").mean(), rp.posterior("mu").mean(), atol=1e-7)
    np.testing.assert_allclose(rs.posterior("pi").mean(), rp.posterior("pi").mean(), atol=1e-7)
    assert abs(rs.elbo - rp.elbo) < 1e-7
    assert np.all(np.abs(rs.posterior("mu").mean() - [-2, 2.5]) < 0.5)
    assert abs(rs.posterior("pi").mean()[1] - 2 / 3) < 0.1


def test_a_gate_fixes_the_selector_category_plate_for_a_later_select():
    """(x * c)[z] picks z's category plate by its size; fg.select(values, z) after it selects along the same plate
    (it made a second category plate before, and the factor ran over both: VMP's fit was wrong)."""
    y, w = _clutter_data(), 0.25
    with fg.Model("clutter-no-categories") as m:
        k, n = fg.plate("k", 2), fg.plate("n", len(y))
        x = fg.gaussian("x", 0.0, precision=1.0 / PRIOR_VAR)
        z = fg.bernoulli("z", w, plates=[n])
        fg.gaussian("y", (x * np.array([1.0, 0.0]))[z], precision=fg.select([1.0, 1.0 / CLUTTER_VAR], z),
                    plates=[n], observed=y)
    assert z.category_plate is k and "z.category" not in m.plates
    ref = clutter_model(y, w)
    for alg in (fg.VMP(), fg.EP()):
        r, r0 = fg.infer(m, algorithm=alg), fg.infer(ref, algorithm=alg)
        assert abs(r.posterior("x").mean() - r0.posterior("x").mean()) < 1e-10 and abs(r.elbo - r0.elbo) < 1e-9


@pytest.mark.parametrize("parallel", MODES)
def test_one_element_in_both_components_is_one_slot(parallel):
    """y ~ N(x, 1) if z else N(1 − 2x, 1/4): both components read x (one slot, coefficients −1 and 2 in
    d = y − mean).  One observation: EP is exact, q(x) the moments of the two-component posterior of x."""
    y, m0, v0, p1 = 0.7, 0.2, 3.0, 0.4
    with fg.Model("shared") as m:
        k, n = fg.plate("k", 2), fg.plate("n", 1)
        x = fg.gaussian("x", m0, precision=1 / v0)
        z = fg.bernoulli("z", p1, plates=[n], categories=k)
        mean = x * np.array([-2.0, 1.0]) + np.array([1.0, 0.0])
        fg.gaussian("y", mean[z], precision=fg.select([4.0, 1.0], z), plates=[n], observed=[y])
    r = fg.infer(m, algorithm=fg.EP(parallel=parallel))
    g = np.linspace(-30, 30, 600001)
    lp = norm.logpdf(g, m0, np.sqrt(v0)) + np.logaddexp(np.log(1 - p1) + norm.logpdf(y, 1 - 2 * g, 0.5),
                                                        np.log(p1) + norm.logpdf(y, g, 1.0))
    p = np.exp(lp - lp.max())
    zz = np.trapezoid(p, g)
    mean_x = np.trapezoid(p * g, g) / zz
    var_x = np.trapezoid(p * (g - mean_x) ** 2, g) / zz
    q = r.posterior("x")
    assert abs(q.mean() - mean_x) < 1e-8 and abs(q.var() - var_x) < 1e-8
    assert abs(r.elbo - (lp.max() + np.log(zz))) < 1e-8


def test_observed_selector_is_a_plain_gaussian_site():
    """z observed: each row is the Gaussian of its component, as the model with mu[labels] by indexing (exact)."""
    rng = np.random.default_rng(5)
    lab = rng.integers(0, 2, 12)
    y = np.array([-1.0, 2.0])[lab] + rng.normal(size=12)
    with fg.Model("observed-z") as m:
        k, n = fg.plate("k", 2), fg.plate("n", 12)
        mu = fg.gaussian("mu", 0.0, precision=0.2, plates=[k])
        z = fg.categorical("z", [0.5, 0.5], plates=[n], categories=k, observed=lab)
        fg.gaussian("y", mu[z], precision=fg.select([1.0, 3.0], z), plates=[n], observed=y)
    with fg.Model("indexed") as m2:
        k, n = fg.plate("k", 2), fg.plate("n", 12)
        mu = fg.gaussian("mu", 0.0, precision=0.2, plates=[k])
        fg.gaussian("y", mu[lab], precision=np.array([1.0, 3.0])[lab], plates=[n], observed=y)
    r, r2 = fg.infer(m, algorithm=fg.EP()), fg.infer(m2, algorithm=fg.EP())
    np.testing.assert_allclose(r.posterior("mu").mean(), r2.posterior("mu").mean(), atol=1e-12)
    np.testing.assert_allclose(r.posterior("mu").var(), r2.posterior("mu").var(), atol=1e-12)
    assert abs(r.elbo - r2.elbo - np.log(0.5) * 12) < 1e-9  # the observed labels' prior probabilities


def test_observed_gamma_precisions_are_known():
    """tau[z] with tau an observed (fixed) Gamma variable is the same site as fg.select(tau's values, z)."""
    y, w = _clutter_data(N=10), 0.25
    with fg.Model("fixed-tau") as m:
        k, n = fg.plate("k", 2), fg.plate("n", len(y))
        x = fg.gaussian("x", 0.0, precision=1.0 / PRIOR_VAR)
        z = fg.bernoulli("z", w, plates=[n], categories=k)
        tau = fg.gamma("tau", 2.0, 1.0, plates=[k], observed=[1.0, 1.0 / CLUTTER_VAR])
        fg.gaussian("y", (x * np.array([1.0, 0.0]))[z], precision=tau[z], plates=[n], observed=y)
    r, r0 = fg.infer(m, algorithm=fg.EP()), fg.infer(clutter_model(y, w), algorithm=fg.EP())
    assert abs(r.posterior("x").mean() - r0.posterior("x").mean()) < 1e-12
    assert abs(r.posterior("x").var() - r0.posterior("x").var()) < 1e-12


def test_other_gated_factors_are_refused_by_name():
    """A gated Bernoulli (a mixture of Bernoullis) and a gated regression (fg.inner on an MvGaussian) are refused
    naming the factor."""
    with fg.Model("bern-mix") as m:
        k, n = fg.plate("k", 2), fg.plate("n", 6)
        z = fg.categorical("z", [0.5, 0.5], plates=[n], categories=k)
        p = fg.beta("p", 1.0, 1.0, plates=[k])
        fg.bernoulli("x", p[z], plates=[n], observed=[1, 0, 1, 1, 0, 1])
    with pytest.raises(ModelError, match=r"Bernoulli\(x\) is gated"):
        fg.infer(m, algorithm=fg.EP())
    X = np.c_[np.linspace(-1, 1, 6), np.ones(6)]
    with fg.Model("reg-mix") as m:
        k, n = fg.plate("k", 2), fg.plate("n", 6)
        z = fg.categorical("z", [0.5, 0.5], plates=[n], categories=k)
        w = fg.mv_gaussian("w", np.zeros(2), precision=1.0, plates=[k])
        fg.gaussian("y", fg.inner(X, w, plates=[n])[z], precision=1.0, plates=[n], observed=np.arange(6.0))
    with pytest.raises(ModelError, match=r"Gaussian\(y\)"):
        fg.infer(m, algorithm=fg.EP())
