"""A scale used on σ itself (θ = μ + τ·η, the non-centred parametrisation): the TiltedScale family, its
quadrature kernel, and the eight-schools model against an independent coordinate ascent in numpy/scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

import factorgraph as fg
from distributions import TiltedScale
from factorgraph.graph.nodes import ModelError

Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])

# base measures in the kernel's form (see distributions/_tilted_scale_kernel.py)
PRIORS = {
    "half_cauchy(5)": {"prior": "half_t", "p0": math.log(25.0), "p1": 1.0, "const": math.log(2 / (5 * math.pi))},
    "half_t(3, 2)": {"prior": "half_t", "p0": math.log(12.0), "p1": 2.0,
                     "const": float(np.log(2 * stats.t(3).pdf(0) / 2.0))},
    "half_normal(2)": {"prior": "half_normal", "p0": 1 / 8, "p1": 0.0,
                       "const": 0.5 * math.log(2 / math.pi) - math.log(2)},
    "exponential(0.7)": {"prior": "exponential", "p0": 0.7, "p1": 0.0, "const": math.log(0.7)},
    "uniform(0, 10)": {"prior": "uniform", "p0": 10.0, "p1": 0.0, "const": -math.log(10.0)},
}
ETAS = [(e1, e2) for e1 in (-50.0, -3.0, 0.0, 0.5, 4.0, 200.0) for e2 in (-1e4, -2.0, -0.05, -1e-3)]


def _log_h(p: dict, s: float) -> float:
    if p["prior"] == "half_t":
        return p["const"] - p["p1"] * math.log1p(s * s * math.exp(-p["p0"]))
    if p["prior"] == "half_normal":
        return p["const"] - p["p0"] * s * s
    if p["prior"] == "exponential":
        return p["const"] - p["p0"] * s
    return p["const"] if s < p["p0"] else -math.inf


def _quad_reference(p: dict, e1: float, e2: float) -> tuple[float, float, float, float]:
    """(log Z, E[σ], Var[σ], E[log h]) by scipy.integrate.quad, split at the mode, scaled by its value."""
    upper = p["p0"] if p["prior"] == "uniform" else np.inf
    grid = np.exp(np.linspace(-30, 15, 40001))
    grid = grid[grid < upper]
    with np.errstate(over="ignore"):
        k = {"half_t": -p["p1"] * np.log1p(grid**2 * math.exp(-p["p0"])), "half_normal": -p["p0"] * grid**2,
             "exponential": -p["p0"] * grid, "uniform": 0.0 * grid}[p["prior"]]
    logf = k + e1 * grid + e2 * grid * grid
    mode = grid[np.argmax(logf + np.log(grid))]
    top = _log_h(p, mode) + e1 * mode + e2 * mode * mode

    def integral(fn):
        f = lambda s: math.exp(_log_h(p, s) + e1 * s + e2 * s * s - top) * fn(s)  # noqa: E731
        kw = {"epsabs": 0.0, "epsrel": 1e-13, "limit": 500}
        return integrate.quad(f, 0.0, mode, **kw)[0] + integrate.quad(f, mode, upper, **kw)[0]

    z = integral(lambda s: 1.0)
    m = integral(lambda s: s) / z
    v = integral(lambda s: (s - m) ** 2) / z
    elh = integral(lambda s: _log_h(p, s)) / z
    return math.log(z) + top, m, v, elh


@pytest.mark.parametrize("name", list(PRIORS))
def test_kernel_matches_adaptive_quadrature(name):
    """κ, E[σ], Var[σ] and E[log h] of q(σ) ∝ h(σ) e^(η₁σ + η₂σ²) agree with scipy.integrate.quad to 1e-10,
    on a grid of kernels from very concentrated to broader than the prior."""
    p = PRIORS[name]
    e1 = np.array([e[0] for e in ETAS])
    e2 = np.array([e[1] for e in ETAS])
    q = TiltedScale(e1, e2, p["prior"], p["p0"], p["p1"], p["const"])
    lz, m, v, elh = q.log_partition(), q.mean(), q.var(), q.mean_log_prior()
    for i, (a, b) in enumerate(ETAS):
        r = _quad_reference(p, a, b)
        assert abs(lz[i] - r[0]) <= 1e-10 * (1 + abs(r[0])), (a, b, lz[i], r[0])
        assert abs(m[i] - r[1]) <= 1e-10 * r[1], (a, b, m[i], r[1])
        assert abs(v[i] - r[2]) <= 1e-8 * r[2], (a, b, v[i], r[2])  # quad's own variance is good to ~1e-9
        assert abs(elh[i] - r[3]) <= 1e-10 * (1 + abs(r[3])), (a, b, elh[i], r[3])


def test_distribution_object():
    """logpdf integrates to 1 and is the cdf's derivative; ppf inverts cdf; draws have the right moments;
    entropy = −∫ q log q."""
    p = PRIORS["half_cauchy(5)"]
    q = TiltedScale(np.array([0.3, -1.0]), np.array([-0.02, -0.5]), p["prior"], p["p0"], p["p1"], p["const"])
    for i in range(2):
        qi = q[i]
        total = integrate.quad(lambda s, qi=qi: math.exp(qi.logpdf(s)), 0, np.inf, epsabs=0, epsrel=1e-12)[0]
        assert abs(total - 1.0) < 1e-10
        ent = integrate.quad(lambda s, qi=qi: -math.exp(qi.logpdf(s)) * qi.logpdf(s), 0, np.inf, epsrel=1e-12)[0]
        assert abs(float(qi.entropy()) - ent) < 1e-9
        for x in (0.1, 1.0, 4.0, 20.0):
            c = integrate.quad(lambda s, qi=qi: math.exp(qi.logpdf(s)), 0, x, epsabs=0, epsrel=1e-12)[0]
            assert abs(float(qi.cdf(x)) - c) < 1e-10
        for u in (1e-4, 0.1, 0.5, 0.97):
            assert abs(float(qi.cdf(qi.ppf(u))) - u) < 1e-10
    draws = q.sample(200_000, rng=np.random.default_rng(3))
    assert draws.shape == (200_000, 2) and np.all(draws > 0)
    se = q.std() / math.sqrt(draws.shape[0])
    assert np.all(np.abs(draws.mean(0) - q.mean()) < 5 * se)
    lo, hi = q.interval(0.9)
    assert np.allclose(q.cdf(hi) - q.cdf(lo), 0.9, atol=1e-10)


def test_uniform_prior_is_a_truncated_normal():
    """With a U(0, 10) prior, q(σ) is N(m, v) truncated to (0, 10): scipy.stats.truncnorm's moments."""
    m, v = 3.0, 4.0
    p = PRIORS["uniform(0, 10)"]
    q = TiltedScale(m / v, -0.5 / v, p["prior"], p["p0"], p["p1"], p["const"])
    ref = stats.truncnorm((0 - m) / 2.0, (10 - m) / 2.0, loc=m, scale=2.0)
    assert abs(float(q.mean()) - ref.mean()) < 1e-12
    assert abs(float(q.var()) - ref.var()) < 1e-11
    assert abs(float(q.entropy()) - ref.entropy()) < 1e-11
    assert abs(float(q.ppf(0.3)) - ref.ppf(0.3)) < 1e-10


def test_q_is_the_coordinate_optimum():
    """Given incoming Gaussian messages m, the variable's part of the ELBO, mᵀE_η[u] + κ(η) − ηᵀE_η[u]
    (its prior term and entropy together), is stationary and maximal at η = m."""
    p = PRIORS["half_cauchy(5)"]

    def part(eta, msg):
        q = TiltedScale(eta[0], eta[1], p["prior"], p["p0"], p["p1"], p["const"])
        u = q.expected_stats()
        return float(msg[0] * u[0] + msg[1] * u[1] + q.elbo_term())

    msg = np.array([0.8, -0.03])
    f0 = part(msg, msg)
    for i, h in ((0, 1e-5), (1, 1e-7)):
        up, dn = msg.copy(), msg.copy()
        up[i] += h
        dn[i] -= h
        assert abs(part(up, msg) - part(dn, msg)) / (2 * h) < 1e-5
    rng = np.random.default_rng(0)
    for _ in range(10):
        d = rng.normal(size=2) * np.array([0.1, 0.005])
        assert part(msg + d, msg) < f0


def noncentred(prior: str = "half_cauchy"):
    with fg.Model("eight schools, non-centred") as m:
        j = fg.plate("school", 8)
        mu = fg.gaussian("mu", 0.0, sd=5.0)
        tau = {"half_cauchy": lambda: fg.half_cauchy("tau", scale=5.0),
               "half_normal": lambda: fg.half_normal("tau", scale=5.0),
               "exponential": lambda: fg.exponential("tau", rate=0.2),
               "uniform": lambda: fg.uniform_scale("tau", upper=30.0)}[prior]()
        eta = fg.gaussian("eta", 0.0, sd=1.0, plates=[j])
        fg.gaussian("y", mean=mu + tau * eta, sd=SIGMA, plates=[j], observed=Y)
    return m


def _numpy_cavi(tol: float = 1e-15) -> dict:
    """Mean-field coordinate ascent on the non-centred eight schools with a half-Cauchy(0, 5) on τ, written
    out: q(η_j), q(μ) Gaussian in closed form, q(τ) ∝ p(τ) exp(Aτ − Bτ²/2) by scipy.integrate.quad."""
    p = 1.0 / SIGMA**2

    def tau_moments(a, b):
        logp = lambda t: math.log(2 / (5 * math.pi)) - math.log1p((t / 5.0) ** 2)  # noqa: E731
        mode = max(a / b, 1e-3)
        top = logp(mode) + a * mode - 0.5 * b * mode * mode

        def integral(k):
            f = lambda t: t**k * math.exp(logp(t) + a * t - 0.5 * b * t * t - top)  # noqa: E731
            kw = {"epsabs": 0.0, "epsrel": 1e-13, "limit": 500}
            return integrate.quad(f, 0, mode, **kw)[0] + integrate.quad(f, mode, np.inf, **kw)[0]

        z = integral(0)
        return integral(1) / z, integral(2) / z, math.log(z) + top

    et, et2 = 5.0, 50.0
    m_mu = 0.0
    for _ in range(1000):
        v_eta = 1.0 / (1.0 + et2 * p)
        m_eta = v_eta * et * (Y - m_mu) * p
        v_mu = 1.0 / (1 / 25 + p.sum())
        m_mu = v_mu * np.sum((Y - et * m_eta) * p)
        a = np.sum((Y - m_mu) * m_eta * p)
        b = np.sum((m_eta**2 + v_eta) * p)
        new, new2, logz = tau_moments(a, b)
        done = abs(new - et) < tol * et and abs(new2 - et2) < tol * et2
        et, et2 = new, new2
        if done:
            break
    e_sq = (Y - m_mu) ** 2 + v_mu - 2 * (Y - m_mu) * et * m_eta + et2 * (m_eta**2 + v_eta)
    elbo = (np.sum(-0.5 * np.log(2 * np.pi * SIGMA**2) - 0.5 * e_sq * p)
            - 0.5 * np.log(2 * np.pi * 25) - 0.5 * (m_mu**2 + v_mu) / 25 + 0.5 * np.log(2 * np.pi * np.e * v_mu)
            + np.sum(-0.5 * np.log(2 * np.pi) - 0.5 * (m_eta**2 + v_eta) + 0.5 * np.log(2 * np.pi * np.e * v_eta))
            + logz - a * et + 0.5 * b * et2)  # E[log p(τ)] + H[q(τ)] = log Z − ηᵀE[u]
    return {"mu": (m_mu, v_mu), "eta": (m_eta, v_eta), "tau": (et, et2 - et**2), "elbo": elbo}


def test_noncentred_eight_schools_matches_numpy_cavi():
    """Posteriors and ELBO to 1e-9 against the independent coordinate ascent; the ELBO never decreases."""
    ref = _numpy_cavi()
    r = fg.infer(noncentred(), fg.VMP(), max_iter=500, tol=None, param_tol=1e-14)
    assert r.converged
    mu, eta, tau = r.posterior("mu"), r.posterior("eta"), r.posterior("tau")
    assert isinstance(tau, TiltedScale)
    np.testing.assert_allclose(mu.mean(), ref["mu"][0], rtol=1e-9)
    np.testing.assert_allclose(mu.var(), ref["mu"][1], rtol=1e-9)
    np.testing.assert_allclose(eta.mean(), ref["eta"][0], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(eta.var(), ref["eta"][1], rtol=1e-9)
    np.testing.assert_allclose(tau.mean(), ref["tau"][0], rtol=1e-9)
    np.testing.assert_allclose(tau.var(), ref["tau"][1], rtol=1e-9)
    assert abs(r.elbo - ref["elbo"]) < 1e-9
    assert r.evidence_kind == "lower bound"
    assert np.all(np.diff(r.elbo_trace) > -1e-10)


@pytest.mark.parametrize("prior", ["half_normal", "exponential", "uniform"])
def test_noncentred_other_priors(prior):
    """Every scale prior works on σ: positive draws, a monotone ELBO, and q(τ) inside the prior's support."""
    r = fg.infer(noncentred(prior), fg.VMP(), max_iter=500, tol=None, param_tol=1e-12)
    tau = r.posterior("tau")
    assert r.converged and isinstance(tau, TiltedScale)
    assert np.all(np.diff(r.elbo_trace) > -1e-10)
    assert 0.0 < float(tau.mean()) < 30.0 and float(tau.std()) > 0
    if prior == "uniform":
        assert float(tau.ppf(0.999999)) < 30.0


def test_noncentred_after_the_fit():
    """summary, ArviZ export and the posterior predictive see q(τ) on σ."""
    r = fg.infer(noncentred(), fg.VMP(), max_iter=500)
    table = r.summary()
    assert table.loc["tau", "exact"] and table.loc["tau", "mean"] == pytest.approx(float(r.posterior("tau").mean()))
    idata = r.to_arviz(draws=300, seed=1)
    tau = idata.posterior["tau"].values
    assert tau.size == 300 and np.all(tau > 0)
    assert abs(tau.mean() - float(r.posterior("tau").mean())) < 5 * float(r.posterior("tau").std()) / math.sqrt(300)
    pred = fg.predict(r, draws=50, seed=0)
    assert pred["y"].shape == (50, 8) and np.all(np.isfinite(pred["y"]))


def test_a_scale_is_an_sd_or_a_term_not_both():
    with fg.Model("both"):
        j = fg.plate("j", 3)
        tau = fg.half_cauchy("tau", scale=1.0)
        fg.gaussian("x", 0.0, sd=tau, plates=[j])
        eta = fg.gaussian("eta", 0.0, sd=1.0, plates=[j])
        with pytest.raises(ModelError, match="'tau' is already the sd= of"):
            _ = tau * eta
    with fg.Model("both, other order"):
        j = fg.plate("j", 3)
        tau = fg.half_cauchy("tau", scale=1.0)
        eta = fg.gaussian("eta", 0.0, sd=1.0, plates=[j])
        _ = tau * eta
        with pytest.raises(ModelError, match="sd=tau .* already a term of a sum or product"):
            fg.gaussian("x", 0.0, sd=tau, plates=[j])


def test_svi_refuses_a_scale_on_sigma():
    """SVI's global updates build q from Gaussian messages alone: refused, with the variable named."""
    with pytest.raises(ModelError, match="SVI: 'tau' is a scale used as a term of a sum or product"):
        fg.infer(noncentred(), fg.SVI(plate="school", batch_size=4), max_iter=3)


def test_sharding_refuses_a_scale_on_sigma():
    import dask.array as da

    with fg.Model("sharded") as m:
        j = fg.plate("school", 8)
        mu = fg.gaussian("mu", 0.0, sd=5.0)
        tau = fg.half_cauchy("tau", scale=5.0)
        eta = fg.gaussian("eta", 0.0, sd=1.0, plates=[j])
        fg.gaussian("y", mean=mu + tau * eta, sd=SIGMA, plates=[j], observed=da.from_array(Y, chunks=4))
    with pytest.raises(ModelError, match="'tau' is a scale used as a term of a sum or product"):
        fg.infer(m, fg.VMP(), max_iter=3)


def test_result_pickles():
    import pickle

    r = fg.infer(noncentred(), fg.VMP(), max_iter=200)
    back = pickle.loads(pickle.dumps(r))
    assert float(back.posterior("tau").mean()) == float(r.posterior("tau").mean())
    assert back.posterior("tau").prior["prior"] == "half_t"
