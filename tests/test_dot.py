"""Products of two random vectors: ``fg.dot(a, b)`` and ``fg.inner(Z, w)`` with a random Z.

* the messages are the gradients of η₁E[y] + η₂E[y²] (finite differences), plated as y_nd = z_nᵀw_d, on a
  shared plate (y_n = a_nᵀb_n) and with a plate on one side only;
* the moments are exact under mean field (Monte Carlo from independent Gaussians);
* Bayesian PCA written as a factor graph with ``fg.inner(z, w)`` runs the same iterates and bound as the
  blocked ``models.pca`` (no rotation), and as BayesPy's PCA;
* bad input is refused with clear errors.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import factorgraph as fg
from factorgraph import models
from factors.deterministic import Dot

K = 3


def _mv_stats(rng, plates):
    m = rng.normal(size=plates + (K,))
    B = rng.normal(size=plates + (K, K))
    cov = np.einsum("...ij,...kj->...ik", B, B) + np.eye(K)
    return m, cov + m[..., :, None] * m[..., None, :]


@pytest.mark.parametrize("sa,sb,sy", [("a", "b", "ab"), ("b", "a", "ab"), ("a", "a", "a"), ("ab", "b", "ab"),
                                      ("", "a", "a")])
def test_dot_pullback_is_gradient(sa, sb, sy):
    rng = np.random.default_rng(0)
    size = {"a": 4, "b": 2}
    shape = tuple(size[c] for c in sy)
    index = {"a": 0, "b": 1}
    params = {"src": {"a": tuple(index[c] for c in sa), "b": tuple(index[c] for c in sb)},
              "dst": tuple(index[c] for c in sy), "sizes": shape}
    par = {"a": _mv_stats(rng, tuple(size[c] for c in sa)), "b": _mv_stats(rng, tuple(size[c] for c in sb))}
    h1, h2 = rng.normal(size=shape), -rng.uniform(0.5, 2.0, shape)

    def objective(p):
        ey, ey2 = Dot.forward(p, params)
        return float(np.sum(h1 * ey) + np.sum(h2 * ey2))

    for role in ("a", "b"):
        msg = Dot.pullback(role, (h1, h2), par, params)
        for i, s in enumerate(par[role]):
            grad = np.zeros(s.shape)
            for idx in np.ndindex(s.shape):
                up, dn = [a.copy() for a in par[role]], [a.copy() for a in par[role]]
                up[i][idx] += 1e-6
                dn[i][idx] -= 1e-6
                grad[idx] = (objective({**par, role: tuple(up)}) - objective({**par, role: tuple(dn)})) / 2e-6
            np.testing.assert_allclose(msg[i], grad, rtol=1e-6, atol=1e-7, err_msg=f"{sa},{sb}->{sy}: {role}[{i}]")


def test_dot_moments_are_exact_under_mean_field():
    rng = np.random.default_rng(1)
    (ma, sa2), (mb, sb2) = _mv_stats(rng, ()), _mv_stats(rng, ())
    ca, cb = sa2 - np.outer(ma, ma), sb2 - np.outer(mb, mb)
    a = rng.multivariate_normal(ma, ca, size=400_000)
    b = rng.multivariate_normal(mb, cb, size=400_000)
    y = np.einsum("si,si->s", a, b)
    ey, ey2 = Dot.forward({"a": (ma, sa2), "b": (mb, sb2)}, {"src": {"a": (), "b": ()}, "dst": (), "sizes": ()})
    se = y.std() / np.sqrt(len(y))
    assert abs(y.mean() - ey) < 5 * se
    assert abs((y**2).mean() - ey2) < 5 * (y**2).std() / np.sqrt(len(y))


def _graph_pca(X, W0):
    N, D = X.shape
    Kc = W0.shape[1]
    with fg.Model("pca") as m:
        n, d, k = fg.plate("n", N), fg.plate("d", D), fg.plate("k", Kc)
        alpha = fg.gamma("alpha", 1e-3, 1e-3, plates=[k])
        w = fg.mv_gaussian("w", np.zeros(Kc), precision=alpha, plates=[d])
        z = fg.mv_gaussian("z", np.zeros(Kc), precision=np.eye(Kc), plates=[n])
        tau = fg.gamma("tau", 1e-3, 1e-3)
        fg.gaussian("x", fg.inner(z, w), precision=tau, plates=[n, d], observed=X)
    return m


def test_graph_pca_matches_blocked_pca():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(50, 2)) @ rng.normal(size=(2, 6)) + 0.3 * rng.normal(size=(50, 6))
    W0 = rng.normal(size=(6, 4))
    m = _graph_pca(X, W0)
    point = fg.MvGaussian(W0, precision=np.broadcast_to(1e14 * np.eye(4), (6, 4, 4)))  # q(W) a point mass
    for sweeps in (1, 3, 6):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fg.ConvergenceWarning)
            r = fg.infer(m, init={"w": point}, schedule=["z", "w", "alpha", "tau"], max_iter=sweeps, tol=None,
                         progress=False)
            p = models.pca(X, 4, rotate=False, noise="isotropic", mean=False, init=W0, max_iter=sweeps, tol=0.0,
                           scale=False)
        np.testing.assert_allclose(r.elbo, p.elbo, rtol=1e-9)
        np.testing.assert_allclose(r.posteriors["w"].mean(), p.loadings, atol=1e-8)
        np.testing.assert_allclose(r.posteriors["z"].mean(), p.latent_mean, atol=1e-8)


def test_bad_input():
    with fg.Model("bad"):
        n, d = fg.plate("n", 5), fg.plate("d", 4)
        z = fg.mv_gaussian("z", np.zeros(3), precision=np.eye(3), plates=[n])
        w = fg.mv_gaussian("w", np.zeros(2), precision=np.eye(2), plates=[d])
        g = fg.gaussian("g", 0.0, precision=1.0)
        with pytest.raises(fg.ModelError, match="'z' has dimension 3 but 'w' has dimension 2"):
            fg.dot(z, w)
        with pytest.raises(fg.ModelError, match=r"\['z'\] appear\(s\) on both sides"):
            fg.dot(z, z)
        with pytest.raises(fg.ModelError, match="'g' is Gaussian; dot products need fg.mv_gaussian"):
            fg.dot(g, w)
        with pytest.raises(fg.ModelError, match="not a random vector"):
            fg.dot(np.ones(2), w)
        with pytest.raises(fg.ModelError, match=r"'z' is plated over \['n'\], not over \['d'\]"):
            fg.inner(z, w, plates=[d])


def test_prior_draws_evaluate_the_dot_product():
    with fg.Model("draws") as m:
        n, d = fg.plate("n", 30), fg.plate("d", 5)
        w = fg.mv_gaussian("w", np.zeros(2), precision=np.eye(2), plates=[d])
        z = fg.mv_gaussian("z", np.zeros(2), precision=np.eye(2), plates=[n])
        tau = fg.gamma("tau", 20.0, 10.0)
        fg.gaussian("x", fg.dot(z, w), precision=tau, plates=[n, d], observed=np.zeros((30, 5)))
    s = fg.sample_prior(m, draws=500, seed=0)
    resid = (s["x"] - np.einsum("snk,sdk->snd", s["z"], s["w"])) * np.sqrt(s["tau"])[:, None, None]
    assert abs(resid.mean()) < 0.02 and abs(resid.std() - 1.0) < 0.02
