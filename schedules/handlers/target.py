"""Targets for global handlers: an unnormalised log density with its gradient (and Hessian).

``BlockTarget`` is a weight vector's block of a model: the Gaussian message the rest of the graph
sends it (its prior) times the site factors on projections u_n = x_nᵀw that the handler claimed,

    log p̃(w) = log N(w | prior) + Σ_n log f_n(x_nᵀw),
    ∇ = η₁ + 2η₂w + Xᵀg′,   ∇² = 2η₂ + Xᵀdiag(g″)X            (MATH.md §6)

with the prior in natural parameters (η₁, η₂).  ``DensityTarget`` wraps a user's log density (of one
point or of a batch of points), with central differences where no gradient is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Site:
    """Claimed factors on one projection matrix: log f at u = Xw, with the factor's pointwise rule."""

    X: np.ndarray  # (N, D)
    point: Callable  # point(u, m, p) -> (log f, g′, g″), u of shape (..., N)
    moments: dict  # statistics of the factor's other edges, flattened to (N,)
    params: dict


@dataclass
class BlockTarget:
    """log N(w | η₁, η₂) + Σ sites, normalised in the prior part (improper flat prior: constant 0)."""

    eta1: np.ndarray
    eta2: np.ndarray
    sites: list[Site] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.dim = self.eta1.shape[-1]
        lam = -2.0 * self.eta2
        self.proper_prior = bool(np.any(lam))
        if self.proper_prior:
            chol = np.linalg.cholesky(lam)
            mu = np.linalg.solve(lam, self.eta1)
            self.prior_const = (np.log(np.diag(chol)).sum() - 0.5 * self.dim * np.log(2 * np.pi)
                                - 0.5 * mu @ self.eta1)
        else:
            self.prior_const = 0.0

    def sites_value_grad(self, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Σ_n log f_n at each row of W (S, D) and its gradient (S, D)."""
        S = W.shape[0]
        val, grad = np.zeros(S), np.zeros_like(W)
        for s in self.sites:
            u = W @ s.X.T
            f, g1, _ = s.point(u, s.moments, s.params)
            val += f.sum(-1)
            grad += g1 @ s.X
        return val, grad

    def logp_grad(self, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        W = np.atleast_2d(W)
        sv, sg = self.sites_value_grad(W)
        prior = W @ self.eta1 + np.einsum("sd,de,se->s", W, self.eta2, W) + self.prior_const
        return prior + sv, self.eta1 + 2.0 * W @ self.eta2 + sg

    def hessian(self, w: np.ndarray) -> np.ndarray:
        H = 2.0 * self.eta2.copy()
        for s in self.sites:
            _, _, g2 = s.point(s.X @ w, s.moments, s.params)
            H += s.X.T @ (g2[:, None] * s.X)
        return H

    def site_terms(self, w: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per site: (log f_n, g″_n) at w and the projection matrix (for Laplace's site term)."""
        out = []
        for s in self.sites:
            f, _, g2 = s.point(s.X @ w, s.moments, s.params)
            out.append((f, g2, s.X))
        return out


class DensityTarget:
    """A user's log density p̃(x): called on a batch (S, D) if it accepts one, else point by point."""

    def __init__(self, log_density: Callable, dim: int, grad: Callable | None = None, eps: float = 1e-5) -> None:
        self.f, self.g, self.dim, self.eps = log_density, grad, dim, eps
        self.prior_const = 0.0
        probe = np.zeros((2, dim))
        try:
            out = np.asarray(log_density(probe), dtype=float)
            self.batched = out.shape == (2,)
        except Exception:  # noqa: BLE001 — a function of one point only
            self.batched = False

    def _values(self, W: np.ndarray) -> np.ndarray:
        if self.batched:  # some densities squeeze a batch of one to a scalar
            return np.asarray(self.f(W), dtype=float).reshape(len(W))
        return np.array([float(self.f(w)) for w in W])

    def _grads(self, W: np.ndarray) -> np.ndarray:
        if self.g is not None:
            if self.batched:
                return np.asarray(self.g(W), dtype=float).reshape(W.shape)
            return np.array([np.asarray(self.g(w), dtype=float) for w in W])
        h = self.eps * np.maximum(1.0, np.abs(W))
        G = np.empty_like(W)
        for d in range(self.dim):
            up, dn = W.copy(), W.copy()
            up[:, d] += h[:, d]
            dn[:, d] -= h[:, d]
            G[:, d] = (self._values(up) - self._values(dn)) / (2.0 * h[:, d])
        return G

    def logp_grad(self, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        W = np.atleast_2d(np.asarray(W, dtype=float))
        vals = self._values(W)
        if not np.all(np.isfinite(vals)):
            bad = W[~np.isfinite(vals)][0]
            raise FloatingPointError(f"the log density is not finite at {bad.tolist()}")
        return vals, self._grads(W)

    def hessian(self, w: np.ndarray) -> np.ndarray:
        """Central differences of the gradient, symmetrised."""
        h = self.eps * max(1.0, float(np.max(np.abs(w))))
        H = np.empty((self.dim, self.dim))
        for d in range(self.dim):
            up, dn = w.copy(), w.copy()
            up[d] += h
            dn[d] -= h
            H[:, d] = (self._grads(up[None])[0] - self._grads(dn[None])[0]) / (2.0 * h)
        return 0.5 * (H + H.T)

