"""Named deterministic nodes (fg.deterministic): exact posterior moments under q, joint draws, summary, ArviZ."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

import factorgraph as fg
from demos.eight_schools import MU_SD, TAU_SCALE, load, summary_noncentred, summary_quadrature


def _eight_schools() -> fg.Model:
    _, y, sigma = load()
    with fg.Model("eight schools, non-centred, theta named") as m:
        j = fg.plate("school", len(y))
        mu = fg.gaussian("mu", 0.0, sd=MU_SD)
        tau = fg.half_cauchy("tau", scale=TAU_SCALE)
        eta = fg.gaussian("eta", 0.0, sd=1.0, plates=[j])
        theta = fg.deterministic("theta", mu + tau * eta)
        fg.gaussian("y", mean=theta, sd=sigma, plates=[j], observed=y)
    return m


def _theta(d: dict) -> tuple[np.ndarray, np.ndarray]:
    return np.array([t[0] for t in d["theta"]]), np.array([t[1] for t in d["theta"]])


def test_eight_schools_theta_moments_are_exact():
    """θ_j = μ + τη_j under q(μ)q(τ)q(η): E = E[μ] + E[τ]E[η], Var = Var[μ] + E[τ²]E[η²] − E[τ]²E[η]²."""
    r = fg.infer(_eight_schools(), fg.VMP())
    q = r.posterior("theta")
    m, s = _theta(summary_noncentred(r))
    np.testing.assert_allclose(q.mean(), m, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(q.std(), s, rtol=1e-13)
    assert q.plates == ("school",) and q.batch_shape == (8,)
    draws = r.sample(100_000, seed=3)["theta"]
    assert draws.shape == (100_000, 8)
    z = (draws.mean(0) - q.mean()) / (q.std() / np.sqrt(draws.shape[0]))
    assert np.all(np.abs(z) < 5)
    np.testing.assert_allclose(draws.std(0), q.std(), rtol=0.02)


def test_eight_schools_theta_under_scale_quadrature_is_the_mixture():
    r = fg.infer(_eight_schools(), fg.VMP(), handlers={"tau": fg.ScaleQuadrature()})
    q = r.posterior("theta")
    m, s = _theta(summary_quadrature(r))
    np.testing.assert_allclose(q.mean(), m, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(q.std(), s, rtol=1e-12)
    draws = r.sample(100_000, seed=4)["theta"]
    z = (draws.mean(0) - q.mean()) / (q.std() / np.sqrt(draws.shape[0]))
    assert np.all(np.abs(z) < 5)


def test_summary_and_arviz_carry_the_named_node():
    r = fg.infer(_eight_schools(), fg.VMP())
    tab = r.summary()
    rows = tab.loc[[f"theta[{j}]" for j in range(8)]]
    np.testing.assert_allclose(rows["mean"].to_numpy(), r.posterior("theta").mean(), rtol=1e-13)
    np.testing.assert_allclose(rows["sd"].to_numpy(), r.posterior("theta").std(), rtol=1e-13)
    assert not rows["exact"].any()  # the interval comes from joint draws
    assert np.all(rows["3%"].to_numpy() < rows["mean"].to_numpy())
    idata = r.to_arviz(draws=300, seed=0)
    assert idata.posterior["theta"].dims == ("chain", "draw", "school")
    assert idata.posterior["theta"].shape == (4, 75, 8)


def test_linear_predictor_moments_and_fusion():
    """A named inner product stays fusable (the likelihood still runs on XᵀX) and its moments are
    E = Xm, Var = diag(XΣXᵀ)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3))
    y = X @ [1.0, -2.0, 0.5] + 0.3 * rng.normal(size=50)
    with fg.Model("regression") as m:
        n = fg.plate("n", 50)
        w = fg.mv_gaussian("w", np.zeros(3), precision=1.0)
        f = fg.deterministic("f", fg.inner(X, w, [n]))
        fg.gaussian("y", mean=f, precision=fg.gamma("tau", 1.0, 1.0), plates=[n], observed=y)
    r = fg.infer(m)
    assert any("fused linear-Gaussian" in note for note in r.notes)
    qw = r.posterior("w")
    np.testing.assert_allclose(r.posterior("f").mean(), X @ qw.mean(), rtol=1e-12)
    np.testing.assert_allclose(r.posterior("f").var(), np.einsum("nd,de,ne->n", X, qw.cov(), X), rtol=1e-10)


def test_varying_slopes_mean_stays_fused():
    rng = np.random.default_rng(1)
    N, G = 120, 5
    g = rng.integers(0, G, N)
    x = rng.normal(size=N)
    y = rng.normal(size=G)[g] + rng.normal(size=G)[g] * x + 0.3 * rng.normal(size=N)
    with fg.Model("slopes") as m:
        n, c = fg.plate("n", N), fg.plate("groups", G)
        a = fg.gaussian("a", 0.0, precision=1.0, plates=[c])
        b = fg.gaussian("b", 0.0, precision=1.0, plates=[c])
        mean = fg.deterministic("mean", a[g] + b[g] * x)
        fg.gaussian("y", mean=mean, precision=4.0, plates=[n], observed=y)
    r = fg.infer(m)
    assert any("grouped linear-Gaussian" in note for note in r.notes)
    qa, qb = r.posterior("a"), r.posterior("b")
    np.testing.assert_allclose(r.posterior("mean").mean(), qa.mean()[g] + qb.mean()[g] * x, rtol=1e-12)
    np.testing.assert_allclose(r.posterior("mean").var(), qa.var()[g] + qb.var()[g] * x**2, rtol=1e-10)


def test_a_named_quantity_that_no_factor_uses():
    """A contrast of two effects, reported but not in the likelihood."""
    rng = np.random.default_rng(2)
    with fg.Model("contrast") as m:
        n, k = fg.plate("n", 40), fg.plate("k", 2)
        mu = fg.gaussian("mu", 0.0, precision=0.01, plates=[k])
        fg.gaussian("y", mean=mu, precision=1.0, plates=[n, k], observed=rng.normal([0.0, 1.0], 1.0, (40, 2)))
        one = fg.plate("one", 1)
        d = fg.deterministic("diff", fg.index(mu, [1], plate=one) - fg.index(mu, [0], plate=one))
    assert d.name == "diff"
    r = fg.infer(m)
    q = r.posterior("mu")
    assert r.posterior("diff").mean()[0] == pytest.approx(q.mean()[1] - q.mean()[0], rel=1e-13)
    assert r.posterior("diff").var()[0] == pytest.approx(q.var().sum(), rel=1e-12)
    assert r.summary().loc["diff[0]", "mean"] == pytest.approx(q.mean()[1] - q.mean()[0], rel=1e-13)


def test_pickle_keeps_the_named_node():
    r = fg.infer(_eight_schools(), fg.VMP())
    r2 = pickle.loads(pickle.dumps(r))
    np.testing.assert_array_equal(r2.posterior("theta").mean(), r.posterior("theta").mean())
    np.testing.assert_array_equal(r2.sample(50, seed=1)["theta"], r.sample(50, seed=1)["theta"])


def test_bad_names_and_expressions():
    with fg.Model("bad") as m:
        mu = fg.gaussian("mu", 0.0, precision=1.0)
        with pytest.raises(fg.ModelError, match="'mu' is used twice"):
            fg.deterministic("mu", mu + 1.0)
        with pytest.raises(fg.ModelError, match=r"got the variable 'mu'.*own name"):
            fg.deterministic("m2", mu)
        with pytest.raises(fg.ModelError, match="got the constant 3.0"):
            fg.deterministic("three", 3.0)
        e = fg.deterministic("shifted", mu + 1.0)
        with pytest.raises(fg.ModelError, match="already named 'shifted'"):
            fg.deterministic("again", e)
    assert m.tracked == {"shifted": e}
    with pytest.raises(fg.ModelError, match="active model"):
        fg.deterministic("outside", e)


def _named_regression(name: str, N: int, seed: int, wrap=lambda a: a) -> fg.Model:
    """A regression with its linear predictor named "f"; ``wrap`` turns the arrays into dask arrays."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 2))
    y = X @ [1.0, -1.0] + 0.4 * rng.normal(size=N)
    with fg.Model(name) as m:
        n = fg.plate("n", N)
        w = fg.mv_gaussian("w", np.zeros(2), precision=1.0)
        f = fg.deterministic("f", fg.inner(wrap(X), w, [n]))
        fg.gaussian("y", mean=f, precision=fg.gamma("tau", 1.0, 1.0), plates=[n], observed=wrap(y))
    return m


def test_svi_reports_moments_from_its_final_pass_only():
    """SVI on in-memory rows ends with a full pass at its final q: the named node's moments are those of q(w)
    (f = Xw); without the pass (exact_elbo=False) there are none."""
    m = _named_regression("svi", 200, 3)
    X = m.tracked["f"].params["X"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        r = fg.infer(m, algorithm=fg.SVI(batch_size=50), max_iter=50)
        bare = fg.infer(m, algorithm=fg.SVI(batch_size=50, exact_elbo=False), max_iter=50)
    np.testing.assert_allclose(r.posterior("f").mean(), X @ r.posterior("w").mean(), rtol=1e-10)
    with pytest.raises(KeyError, match="no posterior for 'f'"):
        bare.posterior("f")
    assert np.isfinite(bare.posterior("w").mean()).all()


def test_sharded_reports_no_moments():
    """A sharded fit's Result carries no model: the named node has no posterior there (as under SVI)."""
    import dask.array as da

    m = _named_regression("sharded", 240, 5, wrap=lambda a: da.from_array(a, chunks=(80,) + a.shape[1:]))
    r = fg.infer(m, progress=False)
    assert r.sharding["chunks"] == 3
    with pytest.raises(KeyError, match="no posterior for 'f'"):
        r.posterior("f")
    assert "f" not in r.sample(5, seed=0)
