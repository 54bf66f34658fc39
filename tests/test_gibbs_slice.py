"""fg.Gibbs on Gaussian variables with non-conjugate children: elliptical slice sampling against quadrature,
per entry (a log-normal Poisson effect per row) and as a block (a Poisson regression's weights)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import gammaln

import factorgraph as fg
from schedules.compile import compile_model
from schedules.gibbs_sampler import GibbsChain, _GibbsRules
from tests.test_gibbs import _within


def test_poisson_regression_block_matches_quadrature():
    """w ~ N(0, I), y_n ~ Poisson(exp(x_nᵀw)): w moves as one block; the means and variances by a 2-D grid."""
    rng = np.random.default_rng(0)
    X = np.column_stack([np.ones(30), rng.normal(size=30)])
    y = rng.poisson(np.exp(X @ np.array([0.5, 0.4])))
    with fg.Model("poisson-regression") as m:
        n = fg.plate("n", 30)
        w = fg.mv_gaussian("w", np.zeros(2), precision=np.eye(2))
        fg.poisson_log("y", fg.inner(X, w, plates=[n]), plates=[n], observed=y)
    r = fg.infer(m, algorithm=fg.Gibbs(draws=1000, burn=100, chains=2, seed=0))
    a, b = np.meshgrid(np.linspace(-0.5, 1.5, 401), np.linspace(-0.6, 1.2, 361), indexing="ij")
    eta = np.stack([a, b], -1) @ X.T
    logp = -0.5 * (a**2 + b**2) + (y * eta - np.exp(eta) - gammaln(y + 1)).sum(-1)
    p = np.exp(logp - logp.max())
    p /= p.sum()
    mean = np.array([(p * a).sum(), (p * b).sum()])
    _within(r, "w", mean, np.array([(p * a * a).sum(), (p * b * b).sum()]) - mean**2)


def test_per_row_effects_match_quadrature():
    """ψ_n ~ N(0.5, 1), y_n ~ Poisson(e^ψ_n): the rows are independent, each moved by its own slice step in one
    vectorised loop; each row's posterior mean and variance by 1-D quadrature."""
    y = np.array([0, 1, 3, 7, 12])
    with fg.Model("effects") as m:
        n = fg.plate("n", 5)
        psi = fg.gaussian("psi", 0.5, precision=1.0, plates=[n])
        fg.poisson_log("y", psi, plates=[n], observed=y)
    r = fg.infer(m, algorithm=fg.Gibbs(draws=1000, burn=50, chains=2, seed=1))
    g = np.linspace(-6.0, 6.0, 4001)[:, None]
    logp = stats.norm.logpdf(g, 0.5, 1.0) + y * g - np.exp(g)
    p = np.exp(logp - logp.max(0))
    p /= p.sum(0)
    mean = (p * g).sum(0)
    _within(r, "psi", mean, (p * g * g).sum(0) - mean**2)


def test_bound_method_is_refused():
    with fg.Model("tilted") as m:
        n = fg.plate("n", 4)
        x = fg.gaussian("x", 0.0, precision=1.0, plates=[n])
        fg.binomial_logit("y", 5, x, plates=[n], observed=np.arange(4), method="tilted")
    with pytest.raises(fg.ModelError, match="evaluates a bound, not its log-density"):
        fg.infer(m, algorithm=fg.Gibbs())


def test_varying_intercepts_by_labels_match_quadrature():
    """a_g ~ N(0.3, 1), y_n ~ Poisson(exp a[g_n]): each intercept's own slice step, its rows' log-likelihoods summed
    onto it; each a_g's posterior mean and variance by 1-D quadrature over its rows."""
    rng = np.random.default_rng(2)
    g = np.repeat(np.arange(4), 5)
    y = rng.poisson(np.exp(np.array([-1.0, 0.0, 1.0, 2.0]))[g])
    with fg.Model("poisson-intercepts") as m:
        groups, n = fg.plate("g", 4), fg.plate("n", 20)
        a = fg.gaussian("a", 0.3, precision=1.0, plates=[groups])
        fg.poisson_log("y", a[g], plates=[n], observed=y)
    chain = GibbsChain(compile_model(m, _GibbsRules()), np.random.default_rng(0))
    chain.start({})
    sliced = chain.sliced["a"]
    per_entry = chain._loglik(m.variables["a"], sliced, True)
    assert per_entry.shape == (4,) and np.isclose(per_entry.sum(), chain._loglik(m.variables["a"], sliced, False))
    r = fg.infer(m, algorithm=fg.Gibbs(draws=1000, burn=50, chains=2, seed=3))
    assert "drawn by elliptical slice sampling: ['a']" in r.notes
    grid = np.linspace(-6.0, 6.0, 4001)[:, None]
    sy, ny = np.bincount(g, weights=y), np.bincount(g)
    logp = stats.norm.logpdf(grid, 0.3, 1.0) + sy * grid - ny * np.exp(grid)
    p = np.exp(logp - logp.max(0))
    p /= p.sum(0)
    mean = (p * grid).sum(0)
    _within(r, "a", mean, (p * grid * grid).sum(0) - mean**2)
