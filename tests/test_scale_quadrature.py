"""fg.ScaleQuadrature: a scale integrated out by quadrature in log σ, q(σ, rest) = q(σ) q(rest | σ)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import factorgraph as fg
from demos.eight_schools import build, build_noncentred
from distributions import GridDensity, QuadratureMixture
from factorgraph.graph.nodes import ModelError
from tests.test_tilted_scale import SIGMA, Y


def noncentred():
    return build_noncentred(Y, SIGMA)


def centred():
    return build(Y, SIGMA)


def _conditional_bound(tau: float) -> tuple[float, float, np.ndarray]:
    """Mean-field coordinate ascent on (μ, η) with τ fixed, in numpy: (its ELBO, E[μ], E[η])."""
    p = 1 / SIGMA**2
    m_mu, m_eta = 0.0, np.zeros(8)
    v_mu = 1 / (1 / 25 + p.sum())
    for _ in range(100_000):
        v_eta = 1 / (1 + tau * tau * p)
        m_eta = v_eta * tau * (Y - m_mu) * p
        new = v_mu * np.sum((Y - tau * m_eta) * p)
        if abs(new - m_mu) < 1e-15 * (1 + abs(m_mu)):
            m_mu = new
            break
        m_mu = new
    e_sq = (Y - m_mu) ** 2 + v_mu - 2 * (Y - m_mu) * tau * m_eta + tau * tau * (m_eta**2 + v_eta)
    elbo = (np.sum(-0.5 * np.log(2 * np.pi / p) - 0.5 * p * e_sq)
            - 0.5 * np.log(2 * np.pi * 25) - 0.5 * (m_mu**2 + v_mu) / 25 + 0.5 * np.log(2 * np.pi * np.e * v_mu)
            + np.sum(-0.5 * np.log(2 * np.pi) - 0.5 * (m_eta**2 + v_eta) + 0.5 * np.log(2 * np.pi * np.e * v_eta)))
    return float(elbo), m_mu, m_eta


def test_noncentred_matches_numpy_quadrature():
    """The bound and the node weights equal a plain numpy computation on the same grid: conditional coordinate
    ascent at each σ_g, L_g = ELBO_g + log p(σ_g) + u_g, log Z by the trapezoid rule; the bound lies between
    the mean-field one and the exact log evidence (−31.3113, by quadrature in the demo), within 0.05 of it."""
    mf = fg.infer(noncentred(), fg.VMP())
    r = fg.infer(noncentred(), fg.VMP(), handlers={"tau": fg.ScaleQuadrature()})
    assert r.converged and not r.warnings
    u = r.quadrature["u"]
    L, mus = [], []
    for ug in u:
        t = math.exp(ug)
        e, m_mu, _ = _conditional_bound(t)
        L.append(e + math.log(2 / (5 * math.pi)) - math.log1p((t / 5) ** 2) + ug)
        mus.append(m_mu)
    L = np.array(L)
    log_z = float(np.log(np.sum(np.exp(L - L.max()))) + L.max() + np.log(u[1] - u[0]))
    w = np.exp(L - L.max())
    w /= w.sum()
    assert abs(r.elbo - log_z) < 1e-8
    np.testing.assert_allclose(r.quadrature["weights"], w, atol=1e-9)
    assert abs(float(r.posterior("mu").mean()) - float(w @ np.array(mus))) < 1e-8
    assert mf.elbo < r.elbo < -31.3113 and r.elbo > -31.3113 - 0.05
    assert r.evidence_kind == "lower bound"
    tau = r.posterior("tau")
    assert isinstance(tau, GridDensity) and isinstance(r.posterior("eta"), QuadratureMixture)
    # the exact posterior has E[τ] = 3.598, sd 3.220 (quadrature in the demo); mean field 2.977, 2.286
    assert 3.3 < float(tau.mean()) < 3.6 and 2.9 < float(tau.std()) < 3.3


def test_joint_draws_keep_the_dependence():
    """Draws pick a node, then σ = σ_g and the rest from q_g: given a small τ, η is drawn from the node's
    conditional (near its prior), so the draws of τ and of τ·η_j's spread are dependent."""
    r = fg.infer(noncentred(), fg.VMP(), handlers={"tau": fg.ScaleQuadrature(points=41)})
    d = r.sample(4000, seed=3)
    assert d["tau"].shape == (4000,) and d["eta"].shape == (4000, 8) and d["mu"].shape == (4000,)
    nodes = np.exp(r.quadrature["u"])
    assert np.all(np.isin(d["tau"], nodes))
    se = float(r.posterior("mu").std()) / math.sqrt(4000)
    assert abs(d["mu"].mean() - float(r.posterior("mu").mean())) < 5 * se
    theta = d["mu"][:, None] + d["tau"][:, None] * d["eta"]
    small = d["tau"] < 1.0
    spread_small = np.std(theta[small] - d["mu"][small, None])
    spread_large = np.std(theta[~small] - d["mu"][~small, None])
    assert spread_small < 0.5 * spread_large
    table = r.summary()
    assert table.loc["tau", "exact"]
    pred = fg.predict(r, draws=30, seed=0)
    assert pred["y"].shape == (30, 8)


@pytest.mark.slow
def test_centred_gains_less():
    """On the centred model the fit given σ is mean field over μ and θ (strongly coupled when σ is small), so
    integrating σ out gains about 1 nat of the 2.1 that the centred mean field loses."""
    mf = fg.infer(centred(), fg.NCVMP())
    r = fg.infer(centred(), fg.NCVMP(), handlers={"tau": fg.ScaleQuadrature(points=41, max_iter=3000)})
    assert mf.elbo + 0.5 < r.elbo < -31.3113 - 0.5
    assert isinstance(r.posterior("theta"), QuadratureMixture)


def test_bad_input():
    with pytest.raises(ModelError, match="cannot be combined with other handlers"):
        fg.infer(noncentred(), handlers={"tau": fg.ScaleQuadrature(), "mu": fg.Laplace()})
    with pytest.raises(ModelError, match=r"ScaleQuadrature\('mu'\): 'mu' must be a scale"):
        fg.infer(noncentred(), handlers={"mu": fg.ScaleQuadrature()})
    with fg.Model("plated") as m:
        g = fg.plate("g", 2)
        s = fg.half_cauchy("s", scale=1.0, plates=[g])
        fg.gaussian("x", 0.0, sd=s, plates=[g], observed=[0.3, -1.0])
    with pytest.raises(ModelError, match=r"'s' is plated over \['g'\]"):
        fg.infer(m, handlers={"s": fg.ScaleQuadrature()})
    for bad in (8, 3, "9"):
        with pytest.raises(ModelError, match="points must be an odd integer"):
            fg.ScaleQuadrature(points=bad)


def test_unconverged_nodes_warn():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = fg.infer(centred(), fg.NCVMP(), handlers={"tau": fg.ScaleQuadrature(points=21, max_iter=5)})
    assert not r.converged and "did not converge at" in r.warnings[0]
    assert any(issubclass(w.category, fg.ConvergenceWarning) for w in caught)
