"""Canned linear-Gaussian state-space models (re-exported from ``factorgraph.models``):
``local_level``, ``linear_state_space`` and their accessor ``state_space_predictive``."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from distributions import MvGaussian
from factorgraph.graph import checks
from factorgraph.graph.builders import gamma, gaussian, mv_gaussian, plate
from factorgraph.graph.expressions import inner
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError
from factorgraph.graph.state_space import gaussian_markov_chain
from factorgraph.posterior.results import Result
from schedules import infer
from schedules.rotation import StateRotation


class StatePredictive(NamedTuple):
    """Smoothed states for t = 1..T followed by ``steps`` forecasts, and the observations' predictive moments.

    ``state_mean`` (T + steps, D), ``state_cov`` (T + steps, D, D), ``obs_mean`` and ``obs_var``
    (T + steps, P); for one observed series P = 1 and D = 1 (the local level)."""

    state_mean: np.ndarray
    state_cov: np.ndarray
    obs_mean: np.ndarray
    obs_var: np.ndarray


def _series(y: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    """(T, P) values with NaN as missing -> (values with 0 filler, mask)."""
    Y = np.array(y, dtype=float)
    if Y.ndim == 1:
        Y = Y[:, None]
    if Y.ndim != 2 or Y.shape[0] < 1:
        raise ModelError(f"{what}: y must be a series (T,) or (T, P) with T ≥ 1, got shape {np.shape(y)}")
    if np.any(np.isinf(Y)):
        raise ModelError(f"{what}: y has an infinite value (mark missing values with NaN)")
    mask = np.isfinite(Y)
    if not mask.any():
        raise ModelError(f"{what}: y has no observed value")
    return np.where(mask, Y, 0.0), mask


def local_level_model(y: Any, a0: float = 1e-3, initial_variance: float | None = None) -> Model:
    """The model of ``local_level``, for ``fg.infer`` or ``fg.compare``."""
    Y, mask = _series(y, "local_level")
    if Y.shape[1] != 1:
        raise ModelError(f"local_level: y must be one series (T,), got shape {np.shape(y)}")
    a0 = checks.positive_number(a0, "local_level: a0")
    obs = Y[mask[:, 0], 0]
    v = float(obs.var()) if obs.size > 1 and obs.var() > 0 else 1.0
    p0 = 1e6 * v if initial_variance is None else checks.positive_number(initial_variance,
                                                                         "local_level: initial_variance")
    with Model("local_level") as m:
        t = plate("t", Y.shape[0])
        tau_level = gamma("tau_level", a0, a0 * v)
        tau_obs = gamma("tau_obs", a0, a0 * v)
        x = gaussian_markov_chain("x", initial_mean=float(obs[0]), initial_precision=1.0 / p0, transition=1.0,
                                  noise_precision=tau_level, plates=[t])
        gaussian("y", mean=inner(np.ones(1), x), precision=tau_obs, plates=[t], observed=Y[:, 0], mask=mask[:, 0])
    return m


def local_level(y: Any, *, a0: float = 1e-3, initial_variance: float | None = None, max_iter: int = 2000,
                tol: float = 1e-10) -> Result:
    """The local-level model (random walk plus noise; Durbin & Koopman 2001, ch. 2) by VMP:

        y_t = x_t + ε_t,  ε_t ~ N(0, τ_obs⁻¹);    x_t = x_{t−1} + η_t,  η_t ~ N(0, τ_level⁻¹),

    with x_1 ~ N(y_1, P₀), P₀ = ``initial_variance`` (default 10⁶ times the sample variance s²: nearly diffuse),
    and Gamma priors τ_obs, τ_level ~ Gam(a₀, a₀s²) (prior mean 1/s², weak for small a₀).  q(x) is the exact
    Kalman-smoothed chain given E[τ]; q(τ_obs) and q(τ_level) are Gamma (Beal 2003, ch. 5).  NaN marks a missing
    value (its level is still smoothed).  ``state_space_predictive(result, steps)`` gives the smoothed levels
    and forecasts; ``result.posterior("tau_obs")`` and ``"tau_level"`` the noise precisions.
    """

    return infer(local_level_model(y, a0, initial_variance), max_iter=max_iter, tol=tol)


def _pca_loadings(Y: np.ndarray, mask: np.ndarray, D: int) -> np.ndarray:
    """The first D principal directions of the (mean-imputed) data scaled by their singular values / √T: a
    start for C that breaks the rotation symmetry of the states."""
    mean = np.nanmean(np.where(mask, Y, np.nan), axis=0)
    Z = np.where(mask, Y, mean) - mean
    _, s, vt = np.linalg.svd(Z, full_matrices=False)
    C = np.zeros((Y.shape[1], D))
    k = min(D, len(s))
    C[:, :k] = vt[:k].T * (s[:k] / np.sqrt(len(Y)))
    return C


def linear_state_space_model(y: Any, state_dim: int, a0: float = 1e-3) -> Model:
    """The model of ``linear_state_space``, for ``fg.infer`` or ``fg.compare``."""
    Y, mask = _series(y, "linear_state_space")
    D = checks.positive_int(state_dim, "linear_state_space: state_dim")
    a0 = checks.positive_number(a0, "linear_state_space: a0")
    T, P = Y.shape
    v = np.array([Y[mask[:, j], j].var() if mask[:, j].sum() > 1 else 1.0 for j in range(P)])
    v = np.where(v > 0, v, 1.0)
    with Model(f"linear_state_space_D{D}") as m:
        t, p = plate("t", T), plate("p", P)
        row, col = plate("row", D), plate("col", D)
        alpha = gamma("alpha", a0, a0, plates=[col])  # ARD over the columns of A (Beal 2003, ch. 5)
        A = mv_gaussian("A", np.zeros(D), precision=alpha, plates=[row])
        gam = gamma("gamma", a0, a0, plates=[col])  # ARD over the columns of C: unused state dimensions switch off
        C = mv_gaussian("C", np.zeros(D), precision=gam, plates=[p])
        x = gaussian_markov_chain("x", initial_mean=np.zeros(D), initial_precision=1.0, transition=A,
                                  noise_precision=np.eye(D), plates=[t])
        tau = gamma("tau_obs", a0, a0 * v, plates=[p])
        gaussian("y", mean=inner(C, x), precision=tau, plates=[t, p], observed=Y, mask=mask)
    return m


def linear_state_space(y: Any, state_dim: int, *, a0: float = 1e-3, max_iter: int = 2000, tol: float = 1e-9,
                       seed: int | None = 0, rotate: bool | str = False) -> Result:
    """Variational Bayesian linear-Gaussian state-space model (Ghahramani & Beal 2001; Beal 2003, ch. 5):

        x_1 ~ N(0, I),  x_t = A x_{t−1} + η_t,  η_t ~ N(0, I);    y_t = C x_t + ε_t,  ε_t ~ N(0, diag(τ)⁻¹),

    x_t ∈ R^D (D = ``state_dim``), y_t ∈ R^P.  The rows of A and of C are Gaussian with ARD precisions
    α_j, γ_j ~ Gam(a₀, a₀) over their columns (state dimensions the data do not need are switched off); τ_p ~
    Gam(a₀, a₀ s_p²).  Q = I fixes the scale of the states (any other Q is a reparametrisation).  q(x) is the
    exact Kalman-smoothed chain; q(A) row-wise, q(C) row-wise and the Gammas mean-field.  C starts at the data's
    principal directions (plus a little noise from ``seed``).  NaN marks missing values.  Returns the ``Result``;
    ``state_space_predictive(result, steps)`` gives the smoothed states and forecasts.

    ``rotate=True`` ends every sweep with the bound-maximising rotation of the state space
    (``schedules.rotation.StateRotation``;
    Luttinen & Ilin 2010; docs/maths.md §12): the ELBO still never falls, and the fit converges in far fewer
    sweeps.  ``rotate="right"`` applies the smaller move A → AR⁻¹ instead of
    A → RAR⁻¹ (for comparison).
    """

    model = linear_state_space_model(y, state_dim, a0)
    if rotate:
        if rotate not in (True, "right"):
            raise ModelError(f"linear_state_space: rotate must be True, False or 'right', got {rotate!r}")
        model.sweep_hooks.append(StateRotation(a0, full=rotate is True))
    Y, mask = _series(y, "linear_state_space")
    D = int(state_dim)
    rng = np.random.default_rng(seed)
    C0 = _pca_loadings(Y, mask, D) + 1e-2 * rng.standard_normal((Y.shape[1], D))
    init = {"C": MvGaussian(mean=C0, cov=np.broadcast_to(1e-2 * np.eye(D), C0.shape + (D,)))}
    return infer(model, max_iter=max_iter, tol=tol, init=init)


def state_space_predictive(result: Result, steps: int = 0) -> StatePredictive:
    """Smoothed states and observation moments for t = 1..T, then ``steps`` forecasts, of a ``local_level`` or
    ``linear_state_space`` fit.

    Smoothed: q(x_t) (mean μ_t, covariance Σ_t); E[y_t] = E[C]μ_t and Var(y_tp) = tr(E[c_pc_pᵀ]E[x_tx_tᵀ]) −
    E[y_tp]² + E[τ_p⁻¹].  Forecasts: μ_{T+k} = Āμ_{T+k−1}, Σ_{T+k} = ĀΣ_{T+k−1}Āᵀ + E[Q⁻¹] with the posterior
    means Ā of A (a plug-in for A; exact for the local level, where A = 1) and E[Q⁻¹] (E[τ_level⁻¹] for the
    local level, I for ``linear_state_space``).
    """
    steps = checks.integer(steps, "state_space_predictive: steps", low=0)
    post = result.posteriors
    if "x" not in post or "tau_obs" not in post:
        raise ModelError(f"state_space_predictive: {result.model_name!r} is not a local_level or linear_state_space "
                         "fit (it has no 'x' and 'tau_obs')")
    q = post["x"]
    mu, cov = q.mean(), q.cov()
    D = mu.shape[-1]
    if "A" in post:
        Abar, Qinv = post["A"].mean(), np.eye(D)
        C1, C2 = post["C"].expected_stats()
    else:
        tl = post["tau_level"]
        Abar, Qinv = np.eye(1), np.full((1, 1), _inverse_mean(tl))
        C1, C2 = np.ones((1, 1)), np.ones((1, 1, 1))
    means, covs = [mu], [cov]
    m, S = mu[-1], cov[-1]
    fm, fc = np.zeros((steps, D)), np.zeros((steps, D, D))
    for k in range(steps):
        m, S = Abar @ m, Abar @ S @ Abar.T + Qinv
        fm[k], fc[k] = m, S
    means.append(fm)
    covs.append(fc)
    mean, cov = np.concatenate(means), np.concatenate(covs)
    second = cov + mean[:, :, None] * mean[:, None, :]
    ey = mean @ C1.T
    ey2 = np.einsum("pde,tde->tp", C2, second)
    return StatePredictive(mean, cov, ey, ey2 - ey**2 + _inverse_mean(post["tau_obs"]))


def _inverse_mean(g: Any) -> np.ndarray:
    """E[τ⁻¹] = b/(a − 1) of a Gamma (a > 1; else the plug-in 1/E[τ])."""
    a, b = np.asarray(g.shape, dtype=float), np.asarray(g.rate, dtype=float)
    return np.where(a > 1.0, b / np.maximum(a - 1.0, 1e-300), b / a)
