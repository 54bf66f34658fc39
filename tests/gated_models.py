"""Small gated (mixture) models shared by the gate tests: every kind of gate, selector and missing value."""

from __future__ import annotations

import numpy as np

import factorgraph as fg


def _mix_data(rng, N=8, K=2):
    z = rng.integers(0, K, N)
    return z, np.array([-2.0, 2.0, 5.0][:K])[z] + rng.normal(size=N)


def gaussian_mixture(rng):
    _, x = _mix_data(rng)
    with fg.Model("gaussian-mixture") as m:
        k, n = fg.plate("k", 2), fg.plate("n", 8)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(2)), plates=[n])
        mu = fg.gaussian("mu", 0.0, precision=0.1, plates=[k])
        tau = fg.gamma("tau", 2.0, 2.0, plates=[k])
        fg.gaussian("x", mu[z], precision=tau[z], plates=[n], observed=x)
    return m


def bernoulli_mixture(rng):
    X = (rng.random((8, 3)) < np.where(np.arange(8)[:, None] < 4, 0.85, 0.15)).astype(float)
    with fg.Model("bernoulli-mixture") as m:
        k, n, d = fg.plate("k", 2), fg.plate("n", 8), fg.plate("d", 3)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(2)), plates=[n])
        p = fg.beta("p", 1.0, 1.0, plates=[k, d])
        fg.bernoulli("x", p[z], plates=[n, d], observed=X)
    return m


def lda(rng):
    words = rng.integers(0, 4, (3, 5))
    with fg.Model("lda") as m:
        k, doc, w = fg.plate("k", 2), fg.plate("doc", 3), fg.plate("w", 5)
        phi = fg.dirichlet("phi", np.full(4, 0.5), plates=[k])
        theta = fg.dirichlet("theta", np.ones(2), plates=[doc])
        z = fg.categorical("z", theta, plates=[doc, w])
        fg.categorical("words", phi[z], plates=[doc, w], observed=words)
    return m


def mv_mixture(rng, ard=False):
    Y = np.where(np.arange(6)[:, None] < 3, -2.0, 2.0) + rng.normal(size=(6, 2))
    with fg.Model(f"mv-mixture{'-ard' if ard else ''}") as m:
        k, n, d = fg.plate("k", 2), fg.plate("n", 6), fg.plate("d", 2)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(2)), plates=[n], categories=k)
        mu = fg.mv_gaussian("mu", np.zeros(2), precision=0.1, plates=[k])
        a = fg.gamma("a", 2.0, 2.0, plates=[k, d] if ard else [k])
        fg.mv_gaussian("y", mu[z], precision=a[z], plates=[n], observed=Y)
    return m


def gamma_rate_mixture(rng):
    x = np.r_[rng.gamma(2.0, 1.0, 4), rng.gamma(2.0, 0.1, 4)]
    with fg.Model("gamma-rate-mixture") as m:
        k, n = fg.plate("k", 2), fg.plate("n", 8)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(2)), plates=[n])
        b = fg.gamma("b", 1.0, 1.0, plates=[k])
        fg.gamma("x", 2.0, b[z], plates=[n], observed=x)
    return m


def selected_constants(rng):
    """Beta, Dirichlet and Gamma-shape parameters selected by fg.select (constants gated)."""
    with fg.Model("selected-constants") as m:
        n = fg.plate("n", 4)
        s = fg.bernoulli("s", 0.3, plates=[n])
        p = fg.beta("p", fg.select([1.0, 6.0], s), fg.select([6.0, 1.0], s), plates=[n])
        fg.bernoulli("c", p, plates=[n], observed=[1, 0, 1, 1])
        c = fg.categorical("c2", [0.5, 0.5], plates=[n])
        th = fg.dirichlet("th", fg.select([[5.0, 1.0, 1.0], [1.0, 1.0, 5.0]], c), plates=[n])
        fg.categorical("w", th, plates=[n], observed=[0, 2, 2, 1])
        g = fg.gamma("g", fg.select([2.0, 9.0], c), 1.0, plates=[n])
        fg.gaussian("y", 0.0, precision=g, plates=[n], observed=rng.normal(size=4))
    return m


def spike_and_slab(rng):
    X = rng.normal(size=(10, 3))
    y = X @ np.array([1.5, 0.0, -1.0]) + 0.3 * rng.normal(size=10)
    with fg.Model("spike-and-slab") as m:
        d, n = fg.plate("d", 3), fg.plate("n", 10)
        s = fg.bernoulli("s", 0.5, plates=[d])
        w = fg.gaussian("w", 0.0, precision=fg.select([100.0, 0.5], s), plates=[d])
        fg.gaussian("y", fg.inner(X, w, plates=[n]), precision=10.0, plates=[n], observed=y)
    return m


def logistic_mixture(rng, method="quadratic"):
    X = np.c_[rng.normal(size=(10, 1)), np.ones(10)]
    y = (rng.random(10) < 0.5).astype(float)
    with fg.Model(f"logistic-mixture-{method}") as m:
        k, n = fg.plate("k", 2), fg.plate("n", 10)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(2)), plates=[n])
        w = fg.mv_gaussian("w", np.zeros(2), precision=1.0, plates=[k])
        fg.bernoulli_logit("y", fg.inner(X, w, plates=[n])[z], observed=y, method=method)
    return m


def observed_selector(rng):
    _, x = _mix_data(rng)
    with fg.Model("observed-selector") as m:
        k, n = fg.plate("k", 2), fg.plate("n", 8)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(2)), plates=[n], observed=[0, 1] * 4)
        mu = fg.gaussian("mu", 0.0, precision=0.1, plates=[k])
        fg.gaussian("x", mu[z], precision=1.0, plates=[n], observed=x)
    return m


def semi_supervised(rng):
    _, x = _mix_data(rng)
    mask = np.array([True, False, False, True, False, False, False, False])
    with fg.Model("semi-supervised") as m:
        k, n = fg.plate("k", 2), fg.plate("n", 8)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(2)), plates=[n],
                           observed=np.where(mask, [1, 0, 0, 0, 0, 0, 0, 0], np.nan), mask=mask)
        mu = fg.gaussian("mu", 0.0, precision=0.1, plates=[k])
        fg.gaussian("x", mu[z], precision=1.0, plates=[n], observed=x)
    return m


def missing_in_mixture(rng):
    _, x = _mix_data(rng)
    mask = np.ones(8, bool)
    mask[[2, 5]] = False
    with fg.Model("missing-in-mixture") as m:
        k, n = fg.plate("k", 2), fg.plate("n", 8)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(2)), plates=[n])
        mu = fg.gaussian("mu", 0.0, precision=0.1, plates=[k])
        fg.gaussian("x", mu[z], precision=1.0, plates=[n], observed=np.where(mask, x, np.nan), mask=mask)
    return m


def mv_missing_coordinates(rng, precision="shared"):
    """Missing coordinates under Λ_k = α_k I, Λ_k = diag(α_k) (ARD) or a constant full Λ (Schur complement)."""
    Y = np.where(np.arange(6)[:, None] < 3, -2.0, 2.0) + rng.normal(size=(6, 3))
    cm = np.ones((6, 3), bool)
    cm[1, 0] = cm[4, 1] = cm[2, 1] = cm[2, 2] = False
    cm[5] = False
    with fg.Model(f"mv-missing-coordinates-{precision}") as m:
        k, n, d = fg.plate("k", 2), fg.plate("n", 6), fg.plate("d", 3)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(2)), plates=[n], categories=k)
        mu = fg.mv_gaussian("mu", np.zeros(3), precision=0.1, plates=[k])
        if precision == "fixed":
            lam = np.array([[2.0, 0.5, 0.2], [0.5, 1.5, 0.3], [0.2, 0.3, 1.0]])
        else:
            lam = fg.gamma("a", 2.0, 2.0, plates=[k] if precision == "shared" else [k, d])[z]
        fg.mv_gaussian("y", mu[z], precision=lam, plates=[n], observed=Y, mask=cm)
    return m


def wishart_missing_rows(rng, kind="wishart"):
    """Whole rows missing under gated Wishart precisions L[z] (mean-field mu[z]) or normal–Wishart theta[z]."""
    Y = np.where(np.arange(7)[:, None] < 4, -2.0, 2.0) + rng.normal(size=(7, 2))
    keep = np.array([True, True, False, True, True, False, True])
    with fg.Model(f"{kind}-missing-rows") as m:
        k, n = fg.plate("k", 2), fg.plate("n", 7)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(2)), plates=[n], categories=k)
        if kind == "wishart":
            mu = fg.mv_gaussian("mu", np.zeros(2), precision=0.1, plates=[k])
            L = fg.wishart("L", dof=3.0, scale=np.eye(2), plates=[k])
            mean, prec = mu[z], L[z]
        else:
            mean, prec = fg.gaussian_wishart("theta", np.zeros(2), 0.1, 3.0, np.eye(2), plates=[k])[z], None
        fg.mv_gaussian("y", mean, precision=prec, plates=[n], observed=np.where(keep[:, None], Y, np.nan), mask=keep)
    return m


def poisson_mixtures(rng, link=False):
    """A Poisson mixture (gated Gamma rate) or a mixture of Poisson regressions (gated log-rate, NCVMP)."""
    X = np.c_[rng.normal(size=10), np.ones(10)]
    y = rng.poisson(np.where(np.arange(10) < 5, 1.0, 6.0))
    with fg.Model(f"poisson-mixture{'-log' if link else ''}") as m:
        k, n = fg.plate("k", 2), fg.plate("n", 10)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(2)), plates=[n])
        if link:
            w = fg.mv_gaussian("w", np.zeros(2), precision=1.0, plates=[k])
            fg.poisson_log("y", fg.inner(X, w, plates=[n])[z], observed=y)
        else:
            lam = fg.gamma("lam", 1.0, 0.2, plates=[k])
            fg.poisson("y", lam[z], plates=[n], observed=y)
    return m


def student_t_mixture(rng):
    """A mixture of Student-t components (gated mean and precision, constant dof), one row missing."""
    _, x = _mix_data(rng)
    x[2] = 9.0  # an outlier
    mask = np.ones(8, bool)
    mask[5] = False
    with fg.Model("student-t-mixture") as m:
        k, n = fg.plate("k", 2), fg.plate("n", 8)
        z = fg.categorical("z", fg.dirichlet("pi", np.ones(2)), plates=[n])
        mu = fg.gaussian("mu", 0.0, precision=0.1, plates=[k])
        tau = fg.gamma("tau", 2.0, 2.0, plates=[k])
        fg.student_t("x", mu[z], tau[z], dof=3.0, plates=[n], observed=x, mask=mask)
    return m


GATED = {
    "student-t-mixture": student_t_mixture,
    "gaussian-mixture": gaussian_mixture,
    "bernoulli-mixture": bernoulli_mixture,
    "lda": lda,
    "mv-mixture": mv_mixture,
    "mv-mixture-ard": lambda rng: mv_mixture(rng, ard=True),
    "gamma-rate-mixture": gamma_rate_mixture,
    "selected-constants": selected_constants,
    "spike-and-slab": spike_and_slab,
    "logistic-mixture-quadratic": logistic_mixture,
    "logistic-mixture-quadrature": lambda rng: logistic_mixture(rng, "quadrature"),
    "observed-selector": observed_selector,
    "semi-supervised": semi_supervised,
    "missing-in-mixture": missing_in_mixture,
    "mv-missing-coordinates": mv_missing_coordinates,
    "poisson-mixture": poisson_mixtures,
    "poisson-log-mixture": lambda rng: poisson_mixtures(rng, link=True),
    "mv-missing-coordinates-ard": lambda rng: mv_missing_coordinates(rng, "ard"),
    "mv-missing-coordinates-fixed": lambda rng: mv_missing_coordinates(rng, "fixed"),
    "wishart-missing-rows": wishart_missing_rows,
    "normal-wishart-missing-rows": lambda rng: wishart_missing_rows(rng, "normal_wishart"),
}
NCVMP = {"logistic-mixture-quadrature", "poisson-log-mixture"}
