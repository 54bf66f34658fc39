r"""Monte Carlo estimators of boosting variational inference (Guo et al. 2016; docs/maths.md §8).

With q_α = (1 − α)q_{t−1} + αh and γ_α = log q_α − log p̃, the discrepancy D(α) = E_{q_α}[γ_α] (= −ELBO of
q_α) has ∂D/∂α = E_h[γ_α] − E_{q_{t−1}}[γ_α]; both are estimated from draws of h and of q_{t−1}
(``weight_gradient``, ``mc_discrepancy``), the ELBO gain of a component D(0) − D(α) with common random
numbers (``elbo_gain``), and the ELBO E_q[log p̃ − log q] of a mixture and the importance-sampling log Ẑ
from draws stratified by component (``stratified_mean``, ``elbo_estimate``).  ``residual`` is the
tail-stabilised residual log density of the component step (``bvi_search``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import logsumexp

from distributions import GaussianMixture

from .laplace import HandlerError

__all__ = ["elbo_estimate", "elbo_gain", "mc_discrepancy", "residual", "stratified_mean", "weight_gradient"]


# ---------------------------------------------------------------------------------------- kernels
def _log_density(target: Any, W: np.ndarray) -> np.ndarray:
    """log p̃ at the rows of W (values only where the target can skip its gradient work); −inf stays."""
    values = getattr(target, "log_values", None)
    with np.errstate(all="ignore"):
        v = values(W)[0] if values is not None else target.logp_grad(W)[0]
    v = np.asarray(v, dtype=float).reshape(W.shape[0])
    return np.where(np.isnan(v), -np.inf, v)


def residual(log_p: np.ndarray, log_q: np.ndarray, eps: float) -> np.ndarray:
    r"""Tail-stabilised residual r = log(p̃ + ε) − log(q + ε) (the paper's eq. 23), by log-sum-exp.

    Parameters
    ----------
    log_p, log_q
        log p̃ (already rescaled to a normalised scale) and log q at the same points.
    eps
        The stabiliser ε > 0.
    """
    le = np.log(eps)
    return np.logaddexp(log_p, le) - np.logaddexp(log_q, le)


def _gamma(alpha: float, log_q: np.ndarray, log_h: np.ndarray, log_p: np.ndarray) -> np.ndarray:
    """γ_α = log((1 − α) q + α h) − log p̃ at points (finite: +1e6 where p̃ = 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.logaddexp(np.log1p(-alpha) + log_q, np.log(alpha) + log_h) - log_p
    return np.nan_to_num(g, nan=1e6, posinf=1e6, neginf=-1e6)


def _mean(values: np.ndarray, weights: np.ndarray | None) -> float:
    return float(values.mean() if weights is None else weights @ values)


def weight_gradient(alpha: float, at_h: tuple[np.ndarray, ...], at_q: tuple[np.ndarray, ...],
                    q_weights: np.ndarray | None = None) -> float:
    r"""Monte Carlo estimate of ∂D/∂α = E_h[γ_α] − E_q[γ_α] (the paper's eq. 11).

    Parameters
    ----------
    alpha
        The weight α ∈ [0, 1] of the new component h.
    at_h, at_q
        (log q_{t−1}, log h, log p̃) at draws from h and from q_{t−1} respectively.
    q_weights
        Weights of the q draws when they are stratified by component (``GaussianMixture.sample_stratified``);
        plain means when None.

    Notes
    -----
    With the same draws (common random numbers) the derivative of ``mc_discrepancy`` is this value plus
    (1 − α)·Ê_q[(h − q)/q_α] + α·Ê_h[(h − q)/q_α], an importance-sampling estimate of ∫(h − q) = 0; the two
    agree up to that zero-mean term.
    """
    return _mean(_gamma(alpha, *at_h), None) - _mean(_gamma(alpha, *at_q), q_weights)


def mc_discrepancy(alpha: float, at_h: tuple[np.ndarray, ...], at_q: tuple[np.ndarray, ...],
                   q_weights: np.ndarray | None = None) -> float:
    r"""Monte Carlo estimate of D(q_α) = E_{q_α}[γ_α] = (1 − α)E_q[γ_α] + αE_h[γ_α] (= −ELBO of q_α)
    from fixed draws of h and q_{t−1} (arguments as in ``weight_gradient``)."""
    return (1.0 - alpha) * _mean(_gamma(alpha, *at_q), q_weights) + alpha * _mean(_gamma(alpha, *at_h), None)


def elbo_gain(alpha: float, at_h: tuple[np.ndarray, ...], at_q: tuple[np.ndarray, ...], q_idx: np.ndarray,
              q_pi: np.ndarray) -> tuple[float, float]:
    r"""ELBO((1 − α)q + αh) − ELBO(q) = D(0) − D(α) and its standard error, from one set of draws (common
    random numbers):

        D(0) − D(α) = E_q[γ₀ − (1 − α)γ_α] − α E_h[γ_α],

    with ``at_h``, ``at_q`` as in ``weight_gradient`` (the q draws stratified by component: ``q_idx``,
    ``q_pi``).  The log p̃ terms cancel in the first expectation except for a share α, so the error scales
    with α: a component of small weight is judged precisely, where two independent ELBO estimates would
    differ by their noise."""
    a = _gamma(0.0, *at_q) - (1.0 - alpha) * _gamma(alpha, *at_q)
    b = _gamma(alpha, *at_h)
    ma, sa = stratified_mean(a, q_idx, q_pi)
    return ma - alpha * float(b.mean()), float(np.hypot(sa, alpha * b.std() / np.sqrt(b.size)))


def stratified_mean(values: np.ndarray, idx: np.ndarray, pi: np.ndarray) -> tuple[float, float]:
    r"""Σ_k π_k v̄_k and its standard error √(Σ_k π_k² s_k²/n_k) from draws stratified by component
    (``idx`` the component of each value; the pooled within-component variance where n_k = 1)."""
    K = pi.shape[0]
    nk = np.bincount(idx, minlength=K)
    mk = np.bincount(idx, weights=values, minlength=K) / np.maximum(nk, 1)
    ss = np.bincount(idx, weights=(values - mk[idx]) ** 2, minlength=K)
    dof = values.size - np.count_nonzero(nk)
    pooled = float(ss.sum() / dof) if dof > 0 else 0.0
    var_k = np.where(nk > 1, ss / np.maximum(nk - 1, 1), pooled)
    live = nk > 0
    return float(pi[live] @ mk[live]), float(np.sqrt(np.sum(pi[live] ** 2 * var_k[live] / nk[live])))


def elbo_estimate(target: Any, q: GaussianMixture, n: int,
                  rng: np.random.Generator) -> tuple[float, float, float, np.ndarray, np.ndarray, np.ndarray]:
    r"""ELBO = E_q[log p̃ − log q] from about n draws stratified by component (``stratified_mean``), and
    the importance-sampling log Ẑ = log Σ_i w_i e^{d_i}, d = log p̃ − log q.

    Returns (ELBO, se, log Ẑ, draws, component indices, log q at the draws).
    """
    W, w, idx = q.sample_stratified(n, rng)
    lq = q.logpdf(W)
    d = _log_density(target, W) - lq
    if not np.any(np.isfinite(d)):
        raise HandlerError("BVI: the target is −inf (or not finite) on every draw of the current approximation")
    d = np.where(np.isfinite(d), d, -1e300)
    elbo, se = stratified_mean(d, idx, q.weights)
    return elbo, se, float(logsumexp(d, b=w)), W, idx, lq
