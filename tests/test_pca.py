"""Bayesian PCA with ARD (``models.pca``) and the rotation speed-up (``schedules.rotation``).

* the rotation terms' gradients are the finite differences of their values, and the rotation's reported
  gain is exactly the rise of the ELBO it causes;
* the blocked updates and the ELBO coincide with BayesPy's PCA (same model, start and order) sweep by
  sweep to 1e-9 without rotation; with rotation both reach the same fixed point and bound (1e-10);
* at convergence every block is at its optimum (perturbing any block's q lowers the ELBO), the ELBO never
  decreases, the principal subspace of synthetic data is recovered and ARD switches the unneeded
  components off within 100 sweeps with rotation (not without);
* bad input is refused with a clear ModelError;
* missing entries (NaN, ``mask=``, masked arrays): the fit equals a row-by-row numpy implementation and
  BayesPy's PCA with ``mask`` sweep by sweep, and the factor graph with ``fg.inner`` and a masked observation;
  with every entry observed the per-row path reproduces the shared one; the translation and rotation gains
  are the bound's rises, the bound never falls, ARD prunes, the imputations are calibrated;
* the fit (``fg.infer`` on ``models.pca_model``, the fused factor analysis and ``schedules.rotation``) reaches
  the fixed point of the hand-written blocked VMP it replaced, recorded from it, to 1e-8; the fused factor runs
  the engine's generic iterates; the fit is a ``fg.Result`` (summary, to_arviz, predict, compare).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.linalg import subspace_angles

import factorgraph as fg
from distributions import Gamma
from distributions.gaussian_rows import GaussianRows
from factorgraph import models
from factorgraph.models.bayesian_pca import pca_model, start
from factors.factor_analysis import FACTOR_ANALYSIS
from schedules.compile import compile_model
from schedules.engine import Engine
from schedules.rotation import ScoresRotation, ard_term, evaluate, gaussian_term, optimal_rotation


def _synthetic(seed=0, N=400, D=10, K=3, noise=0.3):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(D, K)) * np.linspace(3.0, 1.5, K)
    X = rng.normal(size=(N, K)) @ W.T + rng.normal(size=D) * 2.0 + noise * rng.normal(size=(N, D))
    return X, W


def _fd_grad(term, R, h=1e-6):
    g = np.zeros_like(R)
    for i in range(R.shape[0]):
        for j in range(R.shape[1]):
            E = np.zeros_like(R)
            E[i, j] = h
            g[i, j] = (evaluate([term], R + E)[0] - evaluate([term], R - E)[0]) / (2 * h)
    return g


@pytest.mark.parametrize("make", [
    lambda A: gaussian_term(A, 37.0),
    lambda A: ard_term(A, 11.0, 1e-3, 1e-3),
    lambda A: ard_term(A, 11.0, 2.0, 0.5, shared=True),
])
def test_rotation_term_gradient_is_finite_difference(make):
    rng = np.random.default_rng(3)
    B = rng.normal(size=(4, 6))
    term = make(B @ B.T + np.eye(4))
    R = np.eye(4) + 0.3 * rng.normal(size=(4, 4))
    np.testing.assert_allclose(evaluate([term], R)[1], _fd_grad(term, R), rtol=1e-5, atol=1e-6)


class _Engine:
    """The engine on ``pca_model(X)`` (priors as given: scale=False) at ``models.pca``'s start (q(W) a point mass
    at N(0, 1) draws from ``seed``), run sweep by sweep; ``rotate`` and ``translate`` make ScoresRotation's two
    moves and return their gains; ``q``/``put`` read and replace a posterior.  ``per_row``: the fused factor
    takes its missing-data path (a covariance per row) with every entry observed."""

    def __init__(self, X, K, *, mean=True, iso=False, ard=True, seed=0, M=None, per_row=False):
        Xm = X if M is None else np.where(M, X, np.nan)
        model = pca_model(Xm, K, ard, noise="isotropic" if iso else "diagonal", mean=mean, scale=False)
        W0 = np.random.default_rng(seed).standard_normal((X.shape[1], K))
        init = {"w": start(X if M is None else np.where(M, X, 0.0), M, W0, mean, 1.0)}
        c = compile_model(model, fg.VMP(), ["z", "w", "alpha", "tau"], init)
        self.factor = next(f for f in c.factors if f.node.ftype is FACTOR_ANALYSIS)
        if per_row:
            self.factor.params["mask"] = np.ones(X.shape)
        self.eng = Engine(c)
        self.eng.initialise(init, np.random.default_rng(0))
        self.K = K
        self.rot = ScoresRotation("z", "w", "alpha", 1e-3, 1e-3, shared=not ard, translate=1e-6 if mean else None)

    def sweep(self):
        for v in self.eng.c.order:
            self.eng.update(v)

    def elbo(self):
        return self.eng.elbo()

    def rotate(self):
        R, gain = optimal_rotation(self.rot.terms(self.eng), self.K)
        if gain > 0.0:
            self.rot.apply(self.eng, R)
        return gain

    def translate(self):
        return self.rot.prepare(self.eng)

    def q(self, name):
        return self.eng.q[name]

    def put(self, name, q):
        if name == "z":
            self.factor.params["state"]["q"] = q  # the fused factor owns q(z)
        self.eng.set_posterior(self.eng.c.model.variables[name], q)


@pytest.mark.parametrize("ard", [True, False])
def test_rotation_gain_is_the_elbo_rise(ard):
    X, _ = _synthetic(1, N=200, D=8)
    st = _Engine(X, 5, ard=ard)
    for _ in range(3):
        st.sweep()
    before = st.elbo()
    gain = st.rotate()
    assert gain > 0
    np.testing.assert_allclose(st.elbo() - before, gain, rtol=1e-6)


def test_optimal_rotation_is_identity_at_an_optimum():
    # −½tr(RARᵀ) + n log|det R| is maximised at R = I when A = nI
    R, gain = optimal_rotation([gaussian_term(5.0 * np.eye(3), 5.0)], 3)
    np.testing.assert_allclose(R, np.eye(3), atol=1e-6)
    assert gain < 1e-10


@pytest.mark.parametrize("mean,iso", [(True, False), (False, True), (True, True)])
def test_fixed_point_every_block_at_its_optimum(mean, iso):
    X, _ = _synthetic(2, N=150, D=6)
    st = _Engine(X, 4, mean=mean, iso=iso)
    last = -np.inf
    for _ in range(3000):
        st.sweep()
        st.rotate()
        L = st.elbo()
        if abs(L - last) < 1e-12 * abs(L):
            break
        last = L
    L = st.elbo()
    rng = np.random.default_rng(0)

    def moved(name, part, d):  # q with one block of its parameters moved by d
        q = st.q(name)
        if name == "w":
            return fg.MvGaussian(q.mean() + d, cov=q.cov())
        if name in ("tau", "alpha"):
            return Gamma(shape=q.shape, rate=q.rate + d)
        if part == "mean":
            return GaussianRows(q.mean() + d, q.shared_cov(), q.row_precision(), q.logdet_cov()[0])
        cov = q.shared_cov() + d + d.T
        return GaussianRows(q.mean(), cov, np.linalg.inv(cov), np.linalg.slogdet(cov)[1])

    for name, part, scale in [("w", "mean", 1e-3), ("z", "mean", 1e-3), ("tau", "rate", 1e-3),
                              ("alpha", "rate", 1e-3), ("z", "cov", 1e-4)]:
        for _ in range(3):
            old = st.q(name)
            value = {"mean": old.mean(), "rate": getattr(old, "rate", None), "cov": old.shared_cov()
                     if name == "z" else None}[part]
            d = rng.normal(size=np.shape(value)) * scale * (1 + np.abs(value))
            st.put(name, moved(name, part, d))
            assert st.elbo() < L + 1e-9 * abs(L), (name, part)
            st.put(name, old)


def test_same_sweeps_and_bound_as_bayespy():
    pytest.importorskip("bayespy")  # part of the test extra, installed by .ci/run
    from benchmarks.peers.bayespy_peer import pca_nodes

    X, _ = _synthetic(4, N=60, D=6, K=2)
    K = 4
    W0 = np.random.default_rng(5).normal(size=(6, K))
    Q, order, W, _ = pca_nodes(X, K, W0)
    for it in range(1, 9):
        Q.update(*order, verbose=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fg.ConvergenceWarning)
            r = models.pca(X, K, rotate=False, noise="isotropic", mean=False, init=W0, max_iter=it, tol=0.0,
                               scale=False)
        np.testing.assert_allclose(r.elbo, Q.compute_lowerbound(), rtol=1e-9)
        np.testing.assert_allclose(r.loadings, W.get_moments()[0][:, 0, :], atol=1e-9)
    # with rotation (each library its own optimiser, K = the true 3 so that no component is being pruned):
    # the same fixed point and bound
    X, _ = _synthetic(4, N=60, D=6, K=3)
    W0 = W0[:, :3]
    Q, order, W, _ = pca_nodes(X, 3, W0, rotate=True)
    Q.update(*order, repeat=2000, tol=1e-14, verbose=False)
    r = models.pca(X, 3, rotate=True, noise="isotropic", mean=False, init=W0, max_iter=2000, tol=1e-14,
                   scale=False)
    assert r.converged
    np.testing.assert_allclose(r.elbo, Q.compute_lowerbound(), rtol=1e-10)
    WW = W.get_moments()[0][:, 0, :]
    np.testing.assert_allclose(r.loadings @ r.loadings.T, WW @ WW.T, atol=1e-4)


# recorded from the hand-written blocked VMP that models.pca ran before it was built on fg.infer
# (factorgraph/models/bayesian_pca.py at commit 5fc8572), 400 sweeps with no stopping rule: bound, eigenvalues of
# E[W]ᵀE[W], E[τ], E[μ], sorted E[α]
_HAND_PATH = {
    "missing": (-456.59652706462725, [19.101984629647458, 0.0],
                [11.663576286477056, 1.8365871166080394, 0.6133083703387936, 0.6321183040056089, 6.9338164174980665],
                [0.4131777194892401, 1.1369990611600642, -1.561810734336123, -0.36598134436894736, 1.6859908144669091],
                [0.260372929292503, 210.9032393771076]),
    "iso_shared": (-375.36119322385025, [19.02660955769274, 2.9506075842521793], [12.094503282551855], [0.0] * 5,
                   [0.45462823198906943, 0.45462823198906943]),
}


@pytest.mark.parametrize("case", sorted(_HAND_PATH))
def test_fixed_point_is_the_hand_paths(case):
    """The fit through fg.infer reaches the fixed point of the hand-written blocked VMP it replaced (to 1e-8 here;
    to ~1e-11 in the numbers themselves): with rotation, translation, missing entries, a mean, per-column noise
    and ARD switching a component off; and with one noise precision, no mean and one shared α."""
    X, _ = _synthetic(31, N=60, D=5, K=2)
    if case == "missing":
        X, _ = _with_missing(X, 0.2, 32)
        kw = {}
    else:
        X = X - X.mean(0)
        kw = {"noise": "isotropic", "mean": False, "ard": False}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        r = models.pca(X, 2, tol=None, max_iter=400, **kw)
    elbo, ev, noise, mean, ard = _HAND_PATH[case]
    np.testing.assert_allclose(r.elbo, elbo, rtol=1e-8)
    np.testing.assert_allclose(np.sort(np.linalg.eigvalsh(r.loadings.T @ r.loadings))[::-1], ev, rtol=1e-8,
                               atol=1e-8 * ev[0])
    np.testing.assert_allclose(r.noise_precision, noise, rtol=1e-8)
    np.testing.assert_allclose(r.mean, mean, rtol=1e-8)
    np.testing.assert_allclose(np.sort(r.ard_precision), ard, rtol=1e-8)


@pytest.mark.parametrize("shared", [True, False])
def test_gaussian_rows_are_the_dense_rows(shared):
    """GaussianRows (the fused factor's q(z)) against the same rows as an MvGaussian: moments, natural parameters,
    entropy, log density, the moved laws Rz + c, and the lazily formed second moments."""
    rng = np.random.default_rng(38)
    N, K = 6, 3
    B = rng.normal(size=(K, K + 2)) if shared else rng.normal(size=(N, K, K + 2))
    cov = B @ np.swapaxes(B, -1, -2) / 5
    mean = rng.normal(size=(N, K))
    q = GaussianRows(mean, cov, np.linalg.inv(cov), np.linalg.slogdet(cov)[1])
    dense = fg.MvGaussian(mean, cov=np.broadcast_to(cov, (N, K, K)))
    first, second = q.expected_stats()
    np.testing.assert_allclose(np.asarray(second), dense.expected_stats()[1], rtol=1e-12)
    np.testing.assert_allclose(first, dense.mean())
    assert np.isfinite(second).all() and second.shape == (N, K, K)
    for a, b in zip(q.natural, dense.natural, strict=True):
        np.testing.assert_allclose(np.broadcast_to(a, b.shape), b, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(q.entropy(), dense.entropy(), rtol=1e-12)
    x = rng.normal(size=(N, K))
    np.testing.assert_allclose(q.logpdf(x), dense.logpdf(x), rtol=1e-12)
    np.testing.assert_allclose(q.second_sum(), dense.expected_stats()[1].sum(0), rtol=1e-12)
    R, c = np.eye(K) + 0.3 * rng.normal(size=(K, K)), rng.normal(size=K)
    moved = q.transformed(R, c)
    np.testing.assert_allclose(moved.mean(), mean @ R.T + c, rtol=1e-12)
    np.testing.assert_allclose(moved.cov(), R @ dense.cov() @ R.T, rtol=1e-12)
    np.testing.assert_allclose(moved.entropy(), q.entropy() + np.linalg.slogdet(R)[1], rtol=1e-12)
    np.testing.assert_allclose(moved.natural[1], -0.5 * np.linalg.inv(moved.shared_cov()), rtol=1e-9)
    np.testing.assert_allclose(q.shifted(c).mean(), mean + c)
    draws = q.sample(4000, rng=1)
    assert draws.shape == (4000, N, K) and np.abs(draws.mean(0) - mean).max() < 0.2
    bad = GaussianRows(np.where(np.arange(N)[:, None] == 2, np.nan, mean), cov, np.linalg.inv(cov), 0.0)
    assert not np.all(np.isfinite(bad.expected_stats()[1]))


@pytest.mark.parametrize("missing", [False, True])
def test_fused_factor_runs_the_generic_paths_iterates(missing, monkeypatch):
    """The fused factor analysis (schedules.fusion, factors/factor_analysis.py) computes what the engine's generic
    path computes on the same model (fg.dot with an intercept, the scores' own prior, Λ = diag(α, c)): the same
    bounds and posteriors, sweep by sweep."""
    import schedules.fusion

    X, _ = _synthetic(33, N=40, D=5, K=2)
    if missing:
        X, _ = _with_missing(X, 0.2, 34)
    W0 = np.random.default_rng(35).normal(size=(5, 3))
    kw = dict(rotate=False, init=W0, max_iter=6, tol=0.0, scale=False, noise="isotropic" if missing else "diagonal")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        fused = models.pca(X, 3, **kw)
        monkeypatch.setattr(schedules.fusion, "_factor_analyses", lambda *args: {})
        generic = models.pca(X, 3, **kw)
    assert type(fused.posteriors["z"]).__name__ == "GaussianRows" and type(generic.posteriors["z"]) is fg.MvGaussian
    np.testing.assert_allclose(fused.elbo_trace, generic.elbo_trace, rtol=1e-10)
    for name in ("loadings", "mean", "latent_mean", "noise_precision", "ard_precision"):
        np.testing.assert_allclose(getattr(fused, name), getattr(generic, name), rtol=1e-9, atol=1e-10, err_msg=name)
    np.testing.assert_allclose(np.broadcast_to(fused.latent_cov, generic.latent_cov.shape), generic.latent_cov,
                               rtol=1e-9, atol=1e-12)


def test_a_pca_fit_is_a_result():
    """models.pca returns a fg.Result: summary (the scores' marginals exact), to_arviz, fg.predict and fg.compare
    work on it."""
    X, _ = _synthetic(36, N=50, D=5, K=2)
    Xm, _ = _with_missing(X, 0.2, 37)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        r3, r1, rm = models.pca(X, 3), models.pca(X, 1), models.pca(Xm, 3)
    assert isinstance(r3, fg.Result) and isinstance(r3, models.PCAResult)
    table = r3.summary(var_names=["z", "w"])  # z is per-row: the default summary leaves it out
    np.testing.assert_allclose(table.loc["z[7, 1]", "mean"], r3.scores[7, 1])
    assert table.loc["z[7, 1]", "exact"] and table.loc["w[2, 0]", "exact"]
    np.testing.assert_allclose(table.loc["w[2, 3]", "mean"], r3.mean[2])  # the column's mean: w's last coordinate
    pytest.importorskip("arviz")
    groups = set(r3.to_arviz(draws=20).groups())
    assert {"posterior", "log_likelihood", "observed_data"} <= groups
    assert rm.to_arviz(draws=20).posterior["z"].shape[-2:] == (50, 3)
    draws = fg.predict(r3, draws=30)["x"]
    assert draws.shape == (30, 50, 5)
    np.testing.assert_allclose(draws.mean(0), r3.reconstruct(), atol=0.7 * np.abs(X).std())
    comparison = fg.compare({"K = 3": r3, "K = 1": r1})
    assert comparison.names == ["K = 3", "K = 1"]
    np.testing.assert_allclose(comparison.evidence, [r3.elbo, r1.elbo])


@pytest.mark.parametrize("noise", ["diagonal", "isotropic"])
def test_elbo_never_decreases(noise):
    X, _ = _synthetic(5, N=200, D=8)
    for rotate in (True, False):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fg.ConvergenceWarning)
            r = models.pca(X, 6, rotate=rotate, noise=noise, max_iter=300)
        assert np.all(np.diff(r.elbo_trace) >= -1e-9 * np.abs(r.elbo_trace[1:])), rotate


def test_recovers_subspace_and_ard_switches_off_within_100_sweeps():
    X, W = _synthetic(6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        r = models.pca(X, 8, max_iter=100)
        slow = models.pca(X, 8, rotate=False, max_iter=100)
    assert r.active().sum() == 3
    assert np.degrees(subspace_angles(W, r.loadings[:, r.active()])).max() < 2.0
    assert slow.active().sum() > 3  # without the rotation, 100 sweeps leave spurious components on
    assert r.elbo > slow.elbo
    # the learned noise, mean and predictive covariance against the data
    np.testing.assert_allclose(r.noise_variance, 0.09, rtol=0.3)
    np.testing.assert_allclose(r.mean, X.mean(0), atol=0.05)
    _, cov = r.predictive()
    np.testing.assert_allclose(cov, np.cov(X.T), atol=0.1 * np.abs(cov).max())
    assert r.explained_variance_ratio[:3].sum() > 0.95 and np.all(r.explained_variance_ratio[3:] < 1e-3)
    assert np.abs(r.reconstruct() - X).std() < 0.35
    m, c = r.transform(X[:5])
    assert m.shape == (5, 8) and c.shape == (8, 8)
    np.testing.assert_allclose(r.components @ r.components.T, np.eye(8), atol=1e-8)


def test_results_follow_the_units_of_x():
    """With ``scale`` the fit of cX is the fit of X in other units: loadings, mean, noise scale by c, the ARD
    precisions by c⁻², the bound shifts by −ND log c; ARD prunes alike at any scale."""
    X, _ = _synthetic(8, N=200, D=6)
    r = models.pca(X, 5)
    for c in (1e-6, 1e6):
        rc = models.pca(c * X, 5)
        assert rc.n_iter == r.n_iter and rc.active().sum() == r.active().sum() == 3
        big = c * np.abs(r.loadings).max()
        # (the L-BFGS path of the rotation differs in the last digits: loadings agree to the convergence level)
        np.testing.assert_allclose(rc.loadings, c * r.loadings, atol=1e-4 * big)
        np.testing.assert_allclose(rc.mean, c * r.mean, rtol=1e-6, atol=1e-6 * big)
        np.testing.assert_allclose(rc.noise_variance, c**2 * r.noise_variance, rtol=1e-6)
        np.testing.assert_allclose(rc.ard_precision, r.ard_precision / c**2, rtol=1e-4)
        np.testing.assert_allclose(rc.elbo, r.elbo - X.size * np.log(c), rtol=1e-9)


def test_results_follow_the_units_of_x_with_missing_entries():
    """The scale s is the root mean square of the centred observed entries; the bound shifts by −(number of
    observed entries) × log c."""
    X, _ = _synthetic(9, N=100, D=6)
    Xm, M = _with_missing(X, 0.3, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        r = models.pca(Xm, 4, rotate=False, max_iter=15, tol=0.0)  # (L-BFGS would magnify the rounding)
        rc = models.pca(1e3 * Xm, 4, rotate=False, max_iter=15, tol=0.0)
    np.testing.assert_allclose(rc.elbo_trace, r.elbo_trace - M.sum() * np.log(1e3), rtol=1e-9)
    np.testing.assert_allclose(rc.loadings, 1e3 * r.loadings, rtol=1e-5, atol=1e-6 * 1e3 * np.abs(r.loadings).max())
    np.testing.assert_allclose(rc.noise_variance, 1e6 * r.noise_variance, rtol=1e-6)
    cm = np.nanmean(Xm, 0)
    np.testing.assert_allclose(r.total_variance, (np.nansum((Xm - cm) ** 2, 0) / M.sum(0)).sum())


def test_unconverged_run_warns():
    X, _ = _synthetic(7, N=100, D=6)
    with pytest.warns(fg.ConvergenceWarning, match="not converged after 3 sweeps"):
        r = models.pca(X, 4, max_iter=3)
    assert not r.converged and r.warnings


@pytest.mark.parametrize("kwargs,match", [
    ({"X": np.ones(5), "n_components": 1}, "matrix"),
    ({"n_components": 0}, "between 1 and D = 6"),
    ({"n_components": 7}, "between 1 and D = 6"),
    ({"n_components": 2.0}, "integer"),
    ({"n_components": 2, "noise": "full"}, "noise"),
    ({"n_components": 2, "init": np.ones((5, 2))}, r"shape \(D, K\) = \(6, 2\)"),
    ({"n_components": 2, "init": "svd"}, "init"),
    ({"X": np.array([[1.0, np.inf], [0.0, 1.0]]), "n_components": 1}, r"X \(its observed entries\) must be finite"),
    ({"X": np.array([[1.0, np.nan], [0.0, np.nan], [2.0, np.nan]]), "n_components": 1},
     r"column\(s\) \[1\] of X have no observed entry"),
    ({"X": np.full((3, 2), np.nan), "n_components": 1}, r"X \(its observed entries\) is empty"),
    ({"n_components": 2, "mask": np.ones((20, 5), bool)}, r"mask of 'X' has shape \(20, 5\)"),
    ({"n_components": 2, "mask": np.ones((20, 6))}, "mask of 'X' must be boolean"),
])
def test_bad_input(kwargs, match):
    X = np.random.default_rng(0).normal(size=(20, 6))
    kwargs = {"X": X, **kwargs}
    with pytest.raises(fg.ModelError, match=match):
        models.pca(**kwargs)


# ---------------------------------------------------------------- missing entries

def _with_missing(X, frac, seed):
    rng = np.random.default_rng(seed)
    M = rng.random(X.shape) > frac
    M[np.arange(min(X.shape)), np.arange(min(X.shape))] = True  # no column entirely missing
    return np.where(M, X, np.nan), M


def _brute_force_pca(X, M, W0, sweeps, a0=1e-3, b0=1e-3, beta0=1e-6, iso=False):
    """Blocked VMP for Bayesian PCA with missing entries written row by row and column by column (loops, no
    sharing with factorgraph.models.bayesian_pca): returns the bound after each sweep and the final q."""
    from scipy.special import digamma, gammaln

    def kl_gamma(a, b):
        return (a - a0) * digamma(a) - gammaln(a) + gammaln(a0) + a0 * (np.log(b) - np.log(b0)) + a * (b0 - b) / b

    N, D = X.shape
    K = W0.shape[1]
    J = K + 1
    Wm = np.zeros((D, J))
    Wm[:, :K] = W0
    Wm[:, K] = [X[M[:, d], d].mean() for d in range(D)]
    Wc = np.zeros((D, J, J))
    ta, tb = np.full(D, a0), np.full(D, b0)
    aa, ab = np.full(K, a0), np.full(K, b0)
    Zm, Zc = np.zeros((N, K)), np.zeros((N, K, K))
    trace = []
    for _ in range(sweeps):
        etau = np.full(D, ta.sum() / tb.sum()) if iso else ta / tb
        Eww = [Wc[d] + np.outer(Wm[d], Wm[d]) for d in range(D)]
        for n in range(N):
            P, h = np.eye(K), np.zeros(K)
            for d in range(D):
                if M[n, d]:
                    P += etau[d] * Eww[d][:K, :K]
                    h += etau[d] * (X[n, d] * Wm[d, :K] - Eww[d][:K, K])
            Zc[n] = np.linalg.inv(P)
            Zm[n] = Zc[n] @ h
        Ezz = []
        for n in range(N):
            zt = np.append(Zm[n], 1.0)
            E = np.outer(zt, zt)
            E[:K, :K] += Zc[n]
            Ezz.append(E)
        alpha = aa / ab
        for d in range(D):
            S, xz = np.zeros((J, J)), np.zeros(J)
            for n in range(N):
                if M[n, d]:
                    S += Ezz[n]
                    xz += X[n, d] * np.append(Zm[n], 1.0)
            Wc[d] = np.linalg.inv(np.diag(np.append(alpha, beta0)) + etau[d] * S)
            Wm[d] = Wc[d] @ (etau[d] * xz)
        Eww = [Wc[d] + np.outer(Wm[d], Wm[d]) for d in range(D)]
        aa = np.full(K, a0 + 0.5 * D)
        ab = b0 + 0.5 * np.array([sum(Eww[d][k, k] for d in range(D)) for k in range(K)])
        # E[(x_nd − w̃_dᵀz̃_n)²] of each observed entry
        e2 = np.zeros((N, D))
        for n in range(N):
            zt = np.append(Zm[n], 1.0)
            for d in range(D):
                if M[n, d]:
                    e2[n, d] = X[n, d] ** 2 - 2 * X[n, d] * Wm[d] @ zt + np.trace(Eww[d] @ Ezz[n])
        cnt = M.sum(0)
        if iso:
            ta, tb = np.full(D, (a0 + 0.5 * cnt.sum()) / D), np.full(D, (b0 + 0.5 * e2.sum()) / D)
        else:
            ta, tb = a0 + 0.5 * cnt, b0 + 0.5 * e2.sum(0)
        # the bound, term by term
        ta1, tb1 = (ta.sum(), tb.sum()) if iso else (ta, tb)
        etau, elogtau = ta1 / tb1, digamma(ta1) - np.log(tb1)
        L = 0.0
        for n in range(N):
            for d in range(D):
                if M[n, d]:
                    et, elt = (etau, elogtau) if iso else (etau[d], elogtau[d])
                    L += 0.5 * (elt - np.log(2 * np.pi)) - 0.5 * et * e2[n, d]
        for n in range(N):
            L -= 0.5 * (np.trace(Zc[n]) + Zm[n] @ Zm[n] - K - np.linalg.slogdet(Zc[n])[1])
        ealpha, elogalpha = aa / ab, digamma(aa) - np.log(ab)
        for d in range(D):
            L += 0.5 * np.sum(elogalpha - np.log(2 * np.pi) - ealpha * np.diag(Eww[d])[:K])
            L += 0.5 * (np.log(beta0) - np.log(2 * np.pi) - beta0 * Eww[d][K, K])
            L += 0.5 * np.linalg.slogdet(2 * np.pi * np.e * Wc[d])[1]
        L -= kl_gamma(aa, ab).sum()
        L -= kl_gamma(ta1, tb1) if iso else kl_gamma(ta, tb).sum()
        trace.append(L)
    return np.array(trace), Wm, Wc, Zm, Zc, ta1 / tb1


@pytest.mark.parametrize("iso", [False, True])
def test_missing_entries_match_a_row_by_row_implementation(iso):
    X, _ = _synthetic(11, N=40, D=6, K=2)
    Xm, M = _with_missing(X, 0.3, 12)
    M[3] = False  # one row entirely missing: q(z_3) stays N(0, I)
    Xm[3] = np.nan
    W0 = np.random.default_rng(13).normal(size=(6, 4))
    sweeps = 5
    trace, Wm, Wc, Zm, Zc, etau = _brute_force_pca(Xm, M, W0, sweeps, iso=iso)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        r = models.pca(Xm, 4, rotate=False, noise="isotropic" if iso else "diagonal", init=W0, max_iter=sweeps,
                       tol=0.0, scale=False)
    np.testing.assert_allclose(r.elbo_trace, trace, rtol=1e-10)
    np.testing.assert_allclose(r.loadings, Wm[:, :4], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(r.mean, Wm[:, 4], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(r.loadings_cov, Wc[:, :4, :4], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(r.latent_mean, Zm, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(r.latent_cov, Zc, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(r.noise_precision, etau, rtol=1e-10)
    np.testing.assert_allclose(r.latent_cov[3], np.eye(4), atol=1e-15)
    assert np.all(np.diff(trace) > 0)
    # the same fit with the missing entries given by mask= (their values ignored) or by a masked array
    for kw in ({"X": np.where(M, X, 1e3), "mask": M}, {"X": np.ma.masked_array(X, ~M)}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fg.ConvergenceWarning)
            r2 = models.pca(n_components=4, rotate=False, noise="isotropic" if iso else "diagonal", init=W0,
                            max_iter=sweeps, tol=0.0, scale=False, **kw)
        np.testing.assert_array_equal(r2.elbo_trace, r.elbo_trace)


@pytest.mark.parametrize("mean,iso,ard", [(True, False, True), (False, True, True), (True, True, False)])
def test_complete_data_on_the_missing_data_path_is_the_complete_data_fit(mean, iso, ard):
    """The per-row code path run with every entry observed reproduces the shared-covariance path (to rounding),
    rotation included; ``mask`` all True takes the complete-data path itself."""
    X, _ = _synthetic(14, N=80, D=7)
    a, b = _Engine(X, 5, mean=mean, iso=iso, ard=ard), _Engine(X, 5, mean=mean, iso=iso, ard=ard, per_row=True)
    for sweep in range(8):
        a.sweep()
        b.sweep()
        assert a.q("z").shared and not b.q("z").shared
        np.testing.assert_allclose(b.elbo(), a.elbo(), rtol=1e-12)
        np.testing.assert_allclose(b.q("w").mean(), a.q("w").mean(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(b.q("z").mean(), a.q("z").mean(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(b.q("z").shared_cov(), a.q("z").cov(), rtol=1e-10, atol=1e-14)
        if sweep >= 4:  # the rotation: the same gain (its optimum R is found by L-BFGS, which magnifies rounding
            # along the bound's flat directions, so R itself is compared through the bound only)
            ga, gb = a.rotate(), b.rotate()
            np.testing.assert_allclose(gb, ga, rtol=0, atol=1e-10 * abs(a.elbo()))
            np.testing.assert_allclose(b.elbo(), a.elbo(), rtol=1e-10)
            qz = a.q("z")  # b takes a's q (the per-row copy of its shared covariance)
            N = qz.mean().shape[0]
            b.put("z", GaussianRows(qz.mean(), qz.cov().copy(), np.broadcast_to(qz.row_precision(), qz.cov().shape),
                                    qz.logdet_cov().copy()))
            for name in ("w", "alpha", "tau"):
                b.put(name, a.q(name))
            assert b.q("z").mean().shape[0] == N
            np.testing.assert_allclose(b.elbo(), a.elbo(), rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        r1, r2 = models.pca(X, 5, max_iter=30), models.pca(X, 5, max_iter=30, mask=np.ones(X.shape, bool))
    np.testing.assert_array_equal(r1.elbo_trace, r2.elbo_trace)
    assert r2.observed is None and r2.latent_cov.shape == (5, 5)


@pytest.mark.parametrize("ard", [True, False])
def test_rotation_gain_is_the_elbo_rise_with_missing_entries(ard):
    X, _ = _synthetic(15, N=120, D=8)
    _, M = _with_missing(X, 0.25, 16)
    st = _Engine(X, 5, ard=ard, M=M)
    for _ in range(3):
        st.sweep()
    before = st.elbo()
    gain = st.translate()  # z → z + c, μ → μ − cᵀw: its closed-form gain is the rise of the bound, and it is
    assert gain > 0  # the optimum (a second translation gains nothing, nor does any perturbation of it)
    np.testing.assert_allclose(st.elbo() - before, gain, rtol=1e-8)
    assert abs(st.translate()) < 1e-10 * abs(before)
    L = st.elbo()
    for c in np.random.default_rng(1).normal(size=(3, 5)) * 1e-3:
        qz, qw = st.q("z"), st.q("w")
        V = np.eye(6)  # w̃ → V w̃: μ_d → μ_d − cᵀw_d
        V[5, :5] = -c
        st.put("z", qz.shifted(c))
        st.put("w", fg.MvGaussian(qw.mean() @ V.T, cov=V @ qw.cov() @ V.T))
        assert st.elbo() < L
        st.put("z", qz)
        st.put("w", qw)
    before = st.elbo()
    gain = st.rotate()
    assert gain > 0
    np.testing.assert_allclose(st.elbo() - before, gain, rtol=1e-6)


@pytest.mark.parametrize("noise", ["diagonal", "isotropic"])
def test_elbo_never_decreases_with_missing_entries(noise):
    X, _ = _synthetic(17, N=150, D=8)
    Xm, _ = _with_missing(X, 0.3, 18)
    for rotate in (True, False):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fg.ConvergenceWarning)
            r = models.pca(Xm, 6, rotate=rotate, noise=noise, max_iter=200)
        assert np.all(np.diff(r.elbo_trace) >= -1e-9 * np.abs(r.elbo_trace[1:])), rotate


def test_graph_pca_with_mask_runs_the_same_bound():
    """``fg.gaussian(..., mask=M)`` on x_nd = z_nᵀw_d (the factor graph of Bayesian PCA) marginalises the
    missing entries as ``models.pca`` does: the same bound after each sweep (no rotation)."""
    rng = np.random.default_rng(19)
    X = rng.normal(size=(50, 2)) @ rng.normal(size=(2, 6)) + 0.3 * rng.normal(size=(50, 6))
    Xm, M = _with_missing(X, 0.3, 20)
    W0 = rng.normal(size=(6, 4))
    with fg.Model("pca_missing") as m:
        n, d, k = fg.plate("n", 50), fg.plate("d", 6), fg.plate("k", 4)
        alpha = fg.gamma("alpha", 1e-3, 1e-3, plates=[k])
        w = fg.mv_gaussian("w", np.zeros(4), precision=alpha, plates=[d])
        z = fg.mv_gaussian("z", np.zeros(4), precision=np.eye(4), plates=[n])
        tau = fg.gamma("tau", 1e-3, 1e-3)
        fg.gaussian("x", fg.inner(z, w), tau, plates=[n, d], observed=np.where(M, X, 0.0), mask=M)
    point = fg.MvGaussian(W0, precision=np.broadcast_to(1e14 * np.eye(4), (6, 4, 4)))  # q(W) a point mass
    for sweeps in (1, 3, 6):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fg.ConvergenceWarning)
            r = fg.infer(m, init={"w": point}, schedule=["z", "w", "alpha", "tau"], max_iter=sweeps, tol=None,
                         progress=False)
            p = models.pca(Xm, 4, rotate=False, noise="isotropic", mean=False, init=W0, max_iter=sweeps, tol=0.0,
                           scale=False)
        np.testing.assert_allclose(r.elbo, p.elbo, rtol=1e-9)
        np.testing.assert_allclose(r.posteriors["w"].mean(), p.loadings, atol=1e-8)
        np.testing.assert_allclose(r.posteriors["z"].mean(), p.latent_mean, atol=1e-8)


def test_missing_entries_recovered_imputed_and_transformed():
    """30% of the entries missing at random: the subspace is still found and ARD prunes, the imputed entries
    lie within their predictive spread of the truth, and ``transform`` of the training rows (NaN included)
    returns their fitted q(z_n)."""
    X, W = _synthetic(21, N=300, D=10)
    Xm, M = _with_missing(X, 0.3, 22)
    r = models.pca(Xm, 6, max_iter=2000)
    assert r.converged and r.active().sum() == 3 and r.n_iter < 150  # (about 400 sweeps without the translation)
    assert np.degrees(subspace_angles(W, r.loadings[:, r.active()])).max() < 3.0
    np.testing.assert_allclose(r.noise_variance, 0.09, rtol=0.35)
    filled, var = r.impute()
    np.testing.assert_array_equal(filled[M], X[M])
    assert np.all(var[M] == 0) and np.all(var[~M] > 0)
    z = (filled[~M] - X[~M]) / np.sqrt(var[~M])  # standardised errors of the imputed entries
    assert 0.8 < z.std() < 1.2 and abs(z.mean()) < 0.1
    colmean = np.where(M, X, 0).sum(0) / M.sum(0)
    rmse, rmse_mean = np.sqrt(np.mean((filled - X)[~M] ** 2)), np.sqrt(np.mean((colmean - X)[~M] ** 2))
    assert rmse < 0.2 * rmse_mean  # far better than filling in the column means
    np.testing.assert_allclose(filled[~M], r.reconstruct()[~M])
    m, c = r.transform(Xm)
    assert c.shape == (300, 6, 6)
    np.testing.assert_allclose(m, r.latent_mean, atol=1e-3 * np.abs(r.latent_mean).max())
    np.testing.assert_allclose(c, r.latent_cov, atol=1e-3)
    # complete data: impute returns X itself, transform one common covariance
    rc = models.pca(X, 6, max_iter=300)
    np.testing.assert_array_equal(rc.impute()[0], X)
    assert rc.transform(X[:4])[1].shape == (6, 6)


def test_missing_row_is_a_dropped_row():
    """A row with no observed entry keeps q(z_n) = N(0, I) and adds nothing to the bound: the fit equals that
    of the data without the row (no rotation, which would also move the empty row's z)."""
    X, _ = _synthetic(23, N=60, D=6)
    W0 = np.random.default_rng(0).normal(size=(6, 4))
    Xm = np.insert(X, 7, np.nan, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fg.ConvergenceWarning)
        a = models.pca(X, 4, rotate=False, init=W0, max_iter=20)
        b = models.pca(Xm, 4, rotate=False, init=W0, max_iter=20)
    np.testing.assert_allclose(b.elbo_trace, a.elbo_trace, rtol=1e-12)
    np.testing.assert_allclose(np.delete(b.latent_mean, 7, 0), a.latent_mean, atol=1e-10)
    np.testing.assert_allclose(b.latent_mean[7], 0.0, atol=1e-15)
    np.testing.assert_allclose(b.latent_cov[7], np.eye(4), atol=1e-15)


def test_missing_entries_same_sweeps_and_bound_as_bayespy():
    """BayesPy's PCA observed with ``mask=`` (its missing values) runs the same iterates and bound."""
    pytest.importorskip("bayespy")  # part of the test extra, installed by .ci/run
    from benchmarks.peers.bayespy_peer import pca_nodes

    X, _ = _synthetic(24, N=60, D=6, K=2)
    Xm, M = _with_missing(X, 0.3, 25)
    W0 = np.random.default_rng(26).normal(size=(6, 4))
    Q, order, W, Z = pca_nodes(X, 4, W0, mask=M)
    for it in range(1, 7):
        Q.update(*order, verbose=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fg.ConvergenceWarning)
            r = models.pca(Xm, 4, rotate=False, noise="isotropic", mean=False, init=W0, max_iter=it, tol=0.0,
                           scale=False)
        np.testing.assert_allclose(r.elbo, Q.compute_lowerbound(), rtol=1e-9)
        np.testing.assert_allclose(r.loadings, W.get_moments()[0][:, 0, :], atol=1e-9)
        np.testing.assert_allclose(r.latent_mean, Z.get_moments()[0][0], atol=1e-9)


def test_row_kernel_matches_numpy_and_names_a_bad_row():
    from factors.kernels.rows import logdets, row_posteriors

    rng = np.random.default_rng(27)
    B = rng.normal(size=(7, 4, 4))
    P = B @ B.transpose(0, 2, 1) + 0.1 * np.eye(4)
    h = rng.normal(size=(7, 4))
    cov, mean, ld, bad = row_posteriors(P, h)
    assert bad == -1
    np.testing.assert_allclose(cov, np.linalg.inv(P), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(mean, np.linalg.solve(P, h[:, :, None])[:, :, 0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ld, -np.linalg.slogdet(P)[1], rtol=1e-12)
    np.testing.assert_allclose(logdets(P)[0], np.linalg.slogdet(P)[1], rtol=1e-12)
    P[5, 2, 2] = -1.0
    assert row_posteriors(P, h)[3] == 5 and logdets(P)[1] == 5
