"""Canned models, built only with the public builder API.

``linear_regression`` is Drugowitsch's variational Bayesian linear regression (seed 004 §2):
y_n ~ N(wᵀx_n, τ⁻¹), w | τ ~ N(0, (τA)⁻¹), τ ~ Gam(a₀, b₀), A = αI (or diag(α) with ARD),
α ~ Gam(c₀, d₀), with the joint posterior q(w, τ) and a separate q(α).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from scipy.special import gammaln

from . import checks
from .builders import gamma, gaussian, gaussian_gamma, plate
from .expressions import inner
from .model import Model
from .nodes import ModelError
from .results import Result


class StudentT(NamedTuple):
    """Predictive Student-t: location ``mean``, ``precision`` (inverse squared scale), ``dof``."""

    mean: np.ndarray
    precision: np.ndarray
    dof: float

    def var(self) -> np.ndarray:
        return self.dof / (self.dof - 2.0) / self.precision

    def logpdf(self, y: np.ndarray) -> np.ndarray:
        nu, lam = self.dof, self.precision
        z = (np.asarray(y) - self.mean) ** 2 * lam / nu
        return (gammaln((nu + 1) / 2) - gammaln(nu / 2) + 0.5 * np.log(lam / (np.pi * nu))
                - (nu + 1) / 2 * np.log1p(z))


def _regression_data(X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    Xa = checks.constant(X, "X")
    ya = checks.constant(y, "y").reshape(-1)
    if Xa.ndim != 2:
        raise ModelError(f"X must be a matrix (N, D), got shape {Xa.shape}")
    if Xa.shape[0] != ya.shape[0]:
        raise ModelError(f"X has {Xa.shape[0]} rows but y has {ya.shape[0]} entries")
    return Xa, ya


def linear_regression_model(X: Any, y: Any, ard: bool = False, a0: float = 1e-2, b0: float = 1e-4,
                            c0: float = 1e-2, d0: float = 1e-4) -> Model:
    """The model of ``linear_regression``, for use with ``fg.infer`` or ``fg.compare``."""
    Xa, ya = _regression_data(X, y)
    N, D = Xa.shape
    with Model("linear_regression" + ("_ard" if ard else "")) as m:
        n, d = plate("n", N), plate("d", D)
        alpha = gamma("alpha", shape=c0, rate=d0, plates=[d] if ard else [])
        w = gaussian_gamma("w", mean=0.0, precision=alpha, shape=a0, rate=b0, dim=D)
        gaussian("y", mean=inner(Xa, w, plates=[n]), precision=w.tau, plates=[n], observed=ya)
    return m


def linear_regression(X: Any, y: Any, ard: bool = False, a0: float = 1e-2, b0: float = 1e-4,
                      c0: float = 1e-2, d0: float = 1e-4, *, tol: float | None = None,
                      max_iter: int = 500) -> Result:
    """Variational Bayesian linear regression, exactly as Drugowitsch (2014) §2.

    α starts at its prior mean c₀/d₀; each pass updates q(w, τ) and then q(α); by default the
    passes stop when the bound changes by less than 0.001 % (measured, as in the author's code, on
    the bound without its constant terms) or after 500 passes.  Give ``tol`` to iterate instead
    until the relative change of the full bound is below ``tol`` (a converged fixed point).

    Returns
    -------
    Result
        ``posterior("w")`` is the ``GaussianGamma`` q(w, τ): ``mean()`` is w_N,
        ``scale_matrix`` is V_N, ``shape`` a_N and ``rate`` b_N; ``posterior("alpha")`` is q(α);
        ``elbo`` is the variational bound L (seed 004 eq. 22, or 33 with ARD).
    """
    m = linear_regression_model(X, y, ard, a0, b0, c0, d0)
    from schedules import infer  # the engine sits to the right of this package

    if tol is not None:
        return infer(m, schedule=["w", "alpha"], max_iter=max_iter, tol=tol)
    N, D = np.shape(X)
    n_alpha = D if ard else 1
    # the constant part of L (eq. 22/33), which the author's stopping rule leaves out
    const = (-0.5 * N * np.log(2 * np.pi) + 0.5 * D - gammaln(a0) + a0 * np.log(b0)
             + n_alpha * (-gammaln(c0) + c0 * np.log(d0)))
    last = [-np.inf]

    def stop(it: int, elbo: float, engine: Any) -> bool:
        L = elbo - const
        done = abs(last[0] - L) < abs(1e-5 * L)
        last[0] = L
        return done

    r = infer(m, schedule=["w", "alpha"], max_iter=max_iter, tol=None, callbacks=[stop])
    r.converged = r.n_iter < max_iter or bool(abs(r.elbo_trace[-1] - r.elbo_trace[-2]) < abs(1e-5 * (
        r.elbo_trace[-1] - const))) if r.n_iter > 1 else False
    return r


def linear_predictive(result: Result, X_new: Any) -> StudentT:
    """Posterior predictive of ``linear_regression`` at new inputs (seed 004 eq. 23):
    Student-t with mean w_Nᵀx, precision (1 + xᵀV_N x)⁻¹ a_N/b_N and 2a_N degrees of freedom."""
    q = result.posterior("w")
    Xn = checks.constant(X_new, "X_new")
    if Xn.ndim == 1:
        Xn = Xn[None, :]
    V = q.scale_matrix
    if Xn.shape[-1] != V.shape[-1]:
        raise ModelError(f"X_new has {Xn.shape[-1]} columns but the model has {V.shape[-1]} weights")
    quad = np.einsum("nd,de,ne->n", Xn, V, Xn)
    return StudentT(Xn @ q.mean(), q.shape / q.rate / (1.0 + quad), 2.0 * float(q.shape))
