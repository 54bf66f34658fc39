"""fg.Gibbs on positive scales with non-conjugate priors (fg.half_normal, fg.half_cauchy, fg.uniform_scale, ...):
slice sampling in log σ against 1-D quadrature, per entry of a plated scale, and the eight schools against NUTS."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import factorgraph as fg
from tests.test_gibbs import _within

ROOT = Path(__file__).resolve().parents[1]
PRIORS = {"half_normal": (lambda name, plates=(): fg.half_normal(name, 3.0, plates=plates),
                          lambda g: stats.halfnorm(scale=3.0).logpdf(g)),
          "half_cauchy": (lambda name, plates=(): fg.half_cauchy(name, 3.0, plates=plates),
                          lambda g: stats.halfcauchy(scale=3.0).logpdf(g)),
          "uniform": (lambda name, plates=(): fg.uniform_scale(name, 10.0, plates=plates),
                      lambda g: np.where(g < 10.0, -np.log(10.0), -np.inf)),
          "exponential": (lambda name, plates=(): fg.exponential(name, 0.5, plates=plates),
                          lambda g: stats.expon(scale=2.0).logpdf(g))}


def _quadrature(y, mean, log_prior):
    """Posterior mean and variance of σ for y_i ~ N(mean, σ²), on a grid in σ (per column of y)."""
    g = np.linspace(1e-3, 20.0, 40001)[:, None]
    lp = log_prior(g) + stats.norm.logpdf(y[:, None, :], mean, g).sum(0)
    p = np.exp(lp - lp.max(0))
    p /= p.sum(0)
    m = (p * g).sum(0)
    return m, (p * g * g).sum(0) - m**2


@pytest.mark.parametrize("kind", sorted(PRIORS))
def test_scale_with_known_mean_matches_quadrature(kind):
    """y_i ~ N(1, σ²), 12 points: the draws of σ (reported as σ, not σ⁻²) have the quadrature mean and variance."""
    y = np.random.default_rng(0).normal(1.0, 2.0, size=12)
    make, log_prior = PRIORS[kind]
    with fg.Model("scale") as m:
        n = fg.plate("n", 12)
        fg.gaussian("y", 1.0, sd=make("sigma"), plates=[n], observed=y)
    r = fg.infer(m, algorithm=fg.Gibbs(draws=1500, burn=100, chains=2, seed=0))
    assert any("slice sampling in log σ" in note for note in r.notes)
    mean, var = _quadrature(y[:, None], 1.0, log_prior)
    _within(r, "sigma", mean[0], var[0])


def test_plated_scales_move_together_and_match_quadrature():
    """One half-Cauchy σ_g per group (5 groups with 3 to 40 points and true sds 0.1 to 10): every entry's own slice
    step in one vectorised loop; each σ_g's mean and variance by quadrature."""
    rng = np.random.default_rng(1)
    counts, sds = np.array([3, 8, 15, 40, 6]), np.array([0.1, 1.0, 3.0, 10.0, 0.5])
    g = np.repeat(np.arange(5), counts)
    y = rng.normal(0.0, sds[g])
    with fg.Model("groups") as m:
        k = fg.plate("group", 5)
        n = fg.plate("n", len(y))
        sigma = fg.half_cauchy("sigma", 3.0, plates=[k])
        fg.gaussian("y", 0.0, sd=sigma[g], plates=[n], observed=y)
    r = fg.infer(m, algorithm=fg.Gibbs(draws=1500, burn=100, chains=2, seed=2))
    moments = np.array([_quadrature(y[g == j][:, None], 0.0, PRIORS["half_cauchy"][1]) for j in range(5)])[..., 0]
    _within(r, "sigma", moments[:, 0], moments[:, 1])


@pytest.mark.slow
def test_eight_schools_centred_matches_nuts():
    """The centred eight schools, τ ~ half-Cauchy(0, 5): means and variances of μ, τ and θ_j within 4 MC standard
    errors of NUTS (100 000 draws: its own error is negligible beside these chains')."""
    rows = [r.split(",") for r in (ROOT / "data/eight_schools/data.csv").read_text().splitlines()[1:] if r.strip()]
    y, s = np.array([float(r[1]) for r in rows]), np.array([float(r[2]) for r in rows])
    nuts = json.loads((ROOT / "data/eight_schools/reference.json").read_text())["nuts"]
    with fg.Model("eight schools") as m:
        j = fg.plate("school", 8)
        mu = fg.gaussian("mu", 0.0, sd=5.0)
        tau = fg.half_cauchy("tau", scale=5.0)
        theta = fg.gaussian("theta", mean=mu, sd=tau, plates=[j])
        fg.gaussian("y", mean=theta, sd=s, plates=[j], observed=y)
    with warnings.catch_warnings():  # τ's bulk ESS is about 300 of 20 000 draws (the funnel): the fit says so
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        r = fg.infer(m, algorithm=fg.Gibbs(draws=5000, burn=500, chains=4, seed=1))
    for name in ("mu", "tau", "theta"):
        ms = np.array(nuts[name], float)
        _within(r, name, ms[..., 0], ms[..., 1] ** 2)


def _radon():
    import csv
    with open(ROOT / "data" / "radon" / "data.csv") as fh:
        rows = list(csv.DictReader(fh))
    return np.array([int(r["county_idx"]) for r in rows]), np.array([float(r["log_radon"]) for r in rows])


def _radon_exact(county, y, s0=10.0, scale=1.0, n_grid=240):
    """Posterior means and variances of σ_y, σ_a and μ for the varying-intercept model, by a 2-D grid over
    (σ_y, σ_a): given both, μ and the intercepts are Gaussian and integrate out in closed form (per county the
    mean ȳ_c ~ N(μ, σ_a² + σ_y²/n_c), the within-county sum of squares SS_c ~ σ_y² χ²(n_c − 1); μ ~ N(0, s0²))."""
    J = county.max() + 1
    n = np.bincount(county, minlength=J).astype(float)
    ybar = np.bincount(county, y, minlength=J) / n
    ss = np.bincount(county, (y - ybar[county]) ** 2, minlength=J)
    sy = np.linspace(0.6, 0.95, n_grid)[:, None, None]
    sa = np.linspace(0.05, 0.75, n_grid)[None, :, None]
    v = sa**2 + sy**2 / n  # (grid, grid, J)
    prec = 1.0 / s0**2 + (1.0 / v).sum(-1)
    b = (ybar / v).sum(-1)
    loglik = (-(n - 1).sum() * np.log(sy[..., 0]) - ss.sum() / (2 * sy[..., 0] ** 2)
              - 0.5 * np.log(v).sum(-1) - 0.5 * (ybar**2 / v).sum(-1) + 0.5 * b**2 / prec - 0.5 * np.log(prec))
    logp = loglik + stats.halfnorm(scale=scale).logpdf(sy[..., 0]) + stats.halfnorm(scale=scale).logpdf(sa[..., 0])
    w = np.exp(logp - logp.max())
    w /= w.sum()
    out = {}
    for name, x, x2 in (("sigma_y", sy[..., 0], sy[..., 0] ** 2), ("sigma_a", sa[..., 0], sa[..., 0] ** 2),
                        ("mu", b / prec, (b / prec) ** 2 + 1 / prec)):
        m = (w * x).sum()
        out[name] = (m, (w * x2).sum() - m**2)
    return out


@pytest.mark.slow
def test_radon_varying_intercepts_match_the_exact_posterior():
    """Gelman & Hill's radon (919 houses, 85 counties), log radon ~ N(a[county], σ_y²), a ~ N(μ, σ_a²),
    σ_y, σ_a ~ half-normal(1), μ ~ N(0, 10²): σ_y, σ_a and μ against the exact posterior (2-D quadrature)."""
    county, y = _radon()
    with fg.Model("radon") as m:
        c, n = fg.plate("county", county.max() + 1), fg.plate("n", len(y))
        mu = fg.gaussian("mu", 0.0, sd=10.0)
        a = fg.gaussian("a", mu, sd=fg.half_normal("sigma_a", 1.0), plates=[c])
        fg.gaussian("y", a[county], sd=fg.half_normal("sigma_y", 1.0), plates=[n], observed=y)
    r = fg.infer(m, algorithm=fg.Gibbs(draws=1500, burn=200, chains=2, seed=3))
    for name, (mean, var) in _radon_exact(county, y).items():
        _within(r, name, mean, var)


def test_noncentred_scale_as_a_product_term_matches_quadrature():
    """θ_j = μ + τ·η_j (τ used as a term of a product, held as σ itself), y_j ~ N(θ_j, 1), 20 groups: τ's
    conditional reads the Gaussian messages on (τ, τ²); its mean and variance against 1-D quadrature of
    p(τ | y) ∝ p(τ) N(y; 0, (1 + τ²) I + 25·11ᵀ)."""
    rng = np.random.default_rng(5)
    y = rng.normal(2.0 + 3.0 * rng.normal(size=20), 1.0)
    with fg.Model("non-centred") as m:
        j = fg.plate("j", 20)
        mu = fg.gaussian("mu", 0.0, sd=5.0)
        tau = fg.half_normal("tau", 5.0)
        fg.gaussian("y", mean=mu + tau * fg.gaussian("eta", 0.0, sd=1.0, plates=[j]), sd=1.0, plates=[j], observed=y)
    r = fg.infer(m, algorithm=fg.Gibbs(draws=1500, burn=200, chains=2, seed=4))
    g = np.linspace(0.5, 12.0, 2301)
    ones = np.ones((20, 20))
    logp = np.array([stats.multivariate_normal.logpdf(y, np.zeros(20), (1 + t * t) * np.eye(20) + 25 * ones)
                     for t in g]) + stats.halfnorm(scale=5.0).logpdf(g)
    p = np.exp(logp - logp.max())
    p /= p.sum()
    mean = (p * g).sum()
    _within(r, "tau", mean, (p * g * g).sum() - mean**2)
