"""An independent NCVMP coordinate ascent for a Gaussian-weights model with one non-conjugate likelihood per row,
in plain numpy, to check the library's fixed points and ELBOs against.

Model: w ~ N(μ₀, Λ₀⁻¹) (D weights), x_n = X_n·w, y_n | x_n ~ f.  With q(w) = N(μ, Σ), x_n has mean m_n = X_n μ and
variance v_n = X_n Σ X_nᵀ; ``terms(m, v)`` returns the rows' S_n = E[log f_n], ∂S_n/∂m_n and ∂S_n/∂v_n.  The
NCVMP update sets q(w)'s natural parameters to the prior's plus the rows' gradient messages:

    Λ = Λ₀ − 2 Σ_n (∂S_n/∂v_n) X_nX_nᵀ,   Λμ = Λ₀μ₀ + Σ_n (∂S_n/∂m_n − 2m_n ∂S_n/∂v_n) X_n,

repeated to a fixed point (halving the step on the natural parameters when the ELBO would fall).  The ELBO is
Σ_n S_n − KL(q(w) ‖ p(w)).
"""

from __future__ import annotations

import numpy as np


def gauss_hermite(n: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of E[g(z)], z ~ N(0, 1)."""
    t, w = np.polynomial.hermite.hermgauss(n)
    return t * np.sqrt(2.0), w / np.sqrt(np.pi)


def kl_gaussian(mu, cov, mu0, prec0) -> float:
    d = len(mu)
    diff = mu - mu0
    return 0.5 * (np.trace(prec0 @ cov) + diff @ prec0 @ diff - d - np.linalg.slogdet(prec0)[1]
                  - np.linalg.slogdet(cov)[1])


def ncvmp_fit(X, mu0, prec0, terms, iters: int = 2000, tol: float = 1e-14):
    """(μ, Σ, ELBO) at the NCVMP fixed point."""
    X = np.asarray(X, float)
    mu, cov = np.array(mu0, float), np.linalg.inv(prec0)

    def elbo(mu, cov):
        m = X @ mu
        v = np.einsum("nd,de,ne->n", X, cov, X)
        return terms(m, v)[0].sum() - kl_gaussian(mu, cov, mu0, prec0)

    nat = (prec0 @ mu0, prec0)
    last = elbo(mu, cov)
    for _ in range(iters):
        m = X @ mu
        v = np.einsum("nd,de,ne->n", X, cov, X)
        _, dm, dv = terms(m, v)
        prec_new = prec0 - 2.0 * (X.T * dv) @ X
        h_new = prec0 @ mu0 + X.T @ (dm - 2.0 * m * dv)
        step = 1.0
        while True:
            prec = (1 - step) * nat[1] + step * prec_new
            h = (1 - step) * nat[0] + step * h_new
            cov_try = np.linalg.inv(prec)
            mu_try = cov_try @ h
            val = elbo(mu_try, cov_try)
            if val >= last - 1e-12 * abs(last) or step < 1e-3:
                break
            step *= 0.5
        change = np.max(np.abs(mu_try - mu)) + np.max(np.abs(cov_try - cov))
        mu, cov, nat, last = mu_try, cov_try, (h, prec), val
        if change < tol:
            break
    return mu, cov, last


def quad_expectation(g, m: float, v: float) -> float:
    """E[g(x)], x ~ N(m, v), by adaptive quadrature (scipy.integrate.quad) over m ± 12√v."""
    from scipy import integrate, stats

    sd = np.sqrt(v)
    return integrate.quad(lambda x: g(x) * stats.norm.pdf(x, m, sd), m - 12 * sd, m + 12 * sd,
                          epsabs=1e-13, epsrel=1e-13, limit=400)[0]
