"""A suite of small conjugate models shared by the engine tests (each returns a built fg.Model)."""

from __future__ import annotations

import numpy as np

import factorgraph as fg


def gaussian_mean_precision(rng):
    with fg.Model("gaussian-mean-precision") as m:
        n = fg.plate("n", 20)
        mu = fg.gaussian("mu", mean=0.0, precision=1e-2)
        tau = fg.gamma("tau", shape=1.0, rate=1.0)
        fg.gaussian("x", mean=mu, precision=tau, plates=[n], observed=rng.normal(2.0, 0.5, 20))
    return m


def chain(rng):
    with fg.Model("chain") as m:
        tau = fg.gamma("tau", shape=1.0, rate=1.0)
        mu = fg.gaussian("mu", mean=0.0, precision=10.0)
        x = fg.gaussian("x", mean=mu, precision=tau)
        fg.gaussian("y", mean=x, precision=1.0, observed=0.5)
    return m


def hierarchical_rate(rng):
    with fg.Model("hierarchical-rate") as m:
        n, g = fg.plate("n", 15), fg.plate("g", 3)
        beta = fg.gamma("beta", shape=2.0, rate=1.0)
        tau = fg.gamma("tau", shape=2.0, rate=beta, plates=[g])
        mu = fg.gaussian("mu", mean=0.0, precision=0.1, plates=[g])
        fg.gaussian("x", mean=mu, precision=tau, plates=[n, g], observed=rng.normal(size=(15, 3)) * [1, 2, 3])
    return m


def regression(rng, fused=True, ard=True):
    N, D = 40, 4
    X = rng.normal(size=(N, D))
    y = X @ np.array([1.0, 0.0, -2.0, 0.5]) + 0.3 * rng.normal(size=N)
    with fg.Model(f"regression-{'fused' if fused else 'unfused'}-{'ard' if ard else 'shared'}") as m:
        n, d = fg.plate("n", N), fg.plate("d", D)
        alpha = fg.gamma("alpha", shape=1e-2, rate=1e-4, plates=[d] if ard else [])
        w = fg.mv_gaussian("w", mean=0.0, precision=alpha)
        tau = fg.gamma("tau", shape=1e-2, rate=1e-4)
        z = fg.inner(X, w, plates=[n])
        fg.gaussian("y", mean=z if fused else z + 0.0, precision=tau, plates=[n], observed=y)
    return m


def regression_mean_field(rng):
    # strongly correlated inputs: simultaneous updates of the w_d would make the ELBO oscillate
    N, D = 40, 6
    X = rng.normal(size=(N, 1)) + 0.3 * rng.normal(size=(N, D))
    y = X @ rng.normal(size=D) + 0.1 * rng.normal(size=N)
    with fg.Model("regression-mean-field") as m:
        n, d = fg.plate("n", N), fg.plate("d", D)
        w = fg.gaussian("w", mean=0.0, precision=1.0, plates=[d])
        tau = fg.gamma("tau", shape=1.0, rate=1.0)
        fg.gaussian("y", mean=fg.inner(X, w, plates=[n]), precision=tau, plates=[n], observed=y)
    return m


def normal_gamma(rng, ard=True):
    N, D = 30, 3
    X = rng.normal(size=(N, D))
    y = X @ np.array([1.0, 0.0, -1.0]) + 0.2 * rng.normal(size=N)
    with fg.Model("normal-gamma") as m:
        n, d = fg.plate("n", N), fg.plate("d", D)
        alpha = fg.gamma("alpha", shape=1e-2, rate=1e-4, plates=[d] if ard else [])
        w = fg.gaussian_gamma("w", precision=alpha, shape=1e-2, rate=1e-4)
        fg.gaussian("y", mean=fg.inner(X, w, plates=[n]), precision=w.tau, plates=[n], observed=y)
    return m


def product_and_sum(rng):
    with fg.Model("product-and-sum") as m:
        n = fg.plate("n", 10)
        a = fg.gaussian("a", mean=1.0, precision=1.0)
        b = fg.gaussian("b", mean=0.5, precision=2.0)
        c = fg.gaussian("c", mean=0.0, precision=1.0, plates=[n])
        fg.gaussian("y", mean=a * b + 2.0 * c, precision=4.0, plates=[n], observed=rng.normal(1.0, 1.0, 10))
    return m


def mixture(rng):
    centers = np.array([[-4.0, 0.0], [4.0, 0.0], [0.0, 5.0]])
    lab = rng.integers(0, 3, 90)
    X = centers[lab] + rng.normal(size=(90, 2))
    with fg.Model("mixture") as m:
        n, k, d = fg.plate("n", 90), fg.plate("k", 3), fg.plate("d", 2)
        pi = fg.dirichlet("pi", concentration=np.ones(3))
        mus = fg.gaussian("mus", 0.0, precision=1e-2, plates=[k, d])
        taus = fg.gamma("taus", 1.0, 1.0, plates=[k, d])
        z = fg.categorical("z", probs=pi, plates=[n])
        fg.gaussian("x", mean=mus[z], precision=taus[z], plates=[n, d], observed=X)
    return m


def missing_values(rng):
    x = rng.normal(1.0, 1.0, 12)
    mask = np.ones(12, bool)
    mask[[2, 7]] = False
    x[~mask] = np.nan
    with fg.Model("missing") as m:
        n = fg.plate("n", 12)
        mu = fg.gaussian("mu", 0.0, precision=0.1)
        tau = fg.gamma("tau", 2.0, 2.0)
        fg.gaussian("x", mean=mu, precision=tau, plates=[n], observed=x, mask=mask)
    return m


def discrete(rng):
    with fg.Model("discrete") as m:
        n = fg.plate("n", 25)
        p = fg.beta("p", alpha=2.0, beta=1.0)
        fg.bernoulli("coin", probs=p, plates=[n], observed=rng.random(25) < 0.3)
        theta = fg.dirichlet("theta", concentration=np.ones(4))
        fg.categorical("c", probs=theta, plates=[n], observed=rng.integers(0, 4, 25))
    return m


ALL = {
    "gaussian_mean_precision": gaussian_mean_precision,
    "chain": chain,
    "hierarchical_rate": hierarchical_rate,
    "regression_fused_ard": lambda rng: regression(rng, True, True),
    "regression_unfused_ard": lambda rng: regression(rng, False, True),
    "regression_fused_shared": lambda rng: regression(rng, True, False),
    "regression_mean_field": regression_mean_field,
    "normal_gamma_ard": normal_gamma,
    "normal_gamma_shared": lambda rng: normal_gamma(rng, False),
    "product_and_sum": product_and_sum,
    "mixture": mixture,
    "missing_values": missing_values,
    "discrete": discrete,
}
