"""Targets for global handlers: an unnormalised log density with its gradient (and Hessian).

``BlockTarget`` is a weight vector's block of a model: the Gaussian message the rest of the graph
sends it (its prior) times the site factors on projections u_n = x_nᵀw that the handler claimed,

    log p̃(w) = log N(w | prior) + Σ_n log f_n(x_nᵀw),
    ∇ = η₁ + 2η₂w + Xᵀg′,   ∇² = 2η₂ + Xᵀdiag(g″)X            (docs/maths.md §7)

with the prior in natural parameters (η₁, η₂).  ``DensityTarget`` wraps a user's log density (of one
point or of a batch of points), with central differences where no gradient is given.

A site with a scale s (``params["scale"]``: the Laplace, Cauchy and Student-t sites) is a location-scale
density f(u) = g((u − μ)/s)/s with μ on its ``out`` edge, so ∂log f/∂log s = −1 − (u − μ)(log f)′(u):
the derivative a handler needs to learn s (``hyper.py``) comes from the site's own first derivative.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from factorgraph.graph.nodes import ModelError
from factors.base import DiagPlusOuter
from factors.data_products import weighted_grams

_CHUNK = 1 << 21


@dataclass
class Site:
    """Claimed factors on one projection matrix: log f at u = Xw, with the factor's pointwise rule.

    A scalar site has u_n = x_nᵀw; a vector site (a softmax over K classes, ``classes = K``) has
    u_nk = x_nᵀw_k for a weight matrix w of K rows, flattened class-major into the block's vector.
    """

    X: np.ndarray  # (N, D)
    point: Callable  # point(u, m, p) -> (log f, g′, g″); u of shape (..., N) or (..., N, K)
    moments: dict  # statistics of the factor's other edges, one row per data point
    params: dict
    classes: int = 0  # K for a vector site, 0 for a scalar one
    name: str = ""  # the claimed factor's name (reports of learned scales)

    @property
    def quadratic(self) -> bool:
        """Whether log f is quadratic in u (a Gaussian likelihood): its expectation under a Gaussian q is
        closed-form, so handlers fold it into the block's Gaussian part instead of sampling it."""
        return bool(getattr(self.point, "quadratic", False)) and not self.classes

    def natural(self) -> tuple[np.ndarray, np.ndarray, float]:
        """A quadratic site as a Gaussian factor on w: log f = a + b u + ½c u² summed over rows gives
        (Xᵀb, ½Xᵀdiag(c)X, Σa), the (η₁, η₂, constant) it adds to the block's Gaussian part."""
        cached = self.__dict__.get("_natural")
        if cached is None:
            a, b, c = self.point(np.zeros(self.X.shape[0]), self.moments, self.params)
            c = np.ascontiguousarray(np.broadcast_to(c, a.shape), dtype=float)
            cached = (b @ self.X, 0.5 * weighted_grams(self.X, c[:, None])[1][0], float(np.sum(a)))
            self.__dict__["_natural"] = cached
        return cached

    @property
    def scaled(self) -> bool:
        """Whether the site is a location-scale density with a scale parameter s."""
        return "scale" in self.params and not self.classes

    def dlog_scale(self, u: np.ndarray, g1: np.ndarray) -> np.ndarray:
        """∂log f/∂log s = −1 − (u − μ)·(log f)′(u) at the points u, from the first derivative g1 there.

        Laplace: −1 + |r|/τ;  Cauchy: −1 + 2r²/(γ² + r²);  Student-t: −1 + (ν + 1)r²/(νs² + r²)  (r = u − μ).
        """
        return -1.0 - (u - self.moments["out"][0]) * g1

    def project(self, W: np.ndarray) -> np.ndarray:
        """u for each row of W (S, dim): (S, N) or (S, N, K)."""
        if not self.classes:
            return W @ self.X.T
        Wk = W.reshape(W.shape[0] * self.classes, -1)
        return (Wk @ self.X.T).reshape(W.shape[0], self.classes, -1).swapaxes(1, 2)  # one BLAS product

    def pull(self, g: np.ndarray) -> np.ndarray:
        """Gradient in the block's vector from the gradient in u."""
        if not self.classes:
            return g @ self.X
        S, N, K = g.shape
        return (np.ascontiguousarray(g.swapaxes(1, 2)).reshape(S * K, N) @ self.X).reshape(S, -1)

    def hessian(self, g2: np.ndarray | DiagPlusOuter) -> np.ndarray:
        """Σ_n G_n ⊗ x_n x_nᵀ (class-major) from the per-row Hessians G_n = g″ in u."""
        if not self.classes:
            return weighted_grams(self.X, g2[:, None])[1][0]
        (N, D), K = self.X.shape, self.classes
        if isinstance(g2, DiagPlusOuter):
            # G_n = diag(a_n) + v_n v_nᵀ: K weighted Gram matrices on the diagonal blocks plus BᵀB with
            # B's rows v_n ⊗ x_n, one symmetric rank-k update per chunk of rows
            H = np.zeros((K * D, K * D))
            for k, block in enumerate(weighted_grams(self.X, g2.diag)[1]):
                H[k * D:(k + 1) * D, k * D:(k + 1) * D] = block
            step = max(1, _CHUNK // (K * D))
            for a in range(0, N, step):
                B = (g2.vec[a:a + step, :, None] * self.X[a:a + step, None, :]).reshape(-1, K * D)
                H += np.dot(B.T, B)
            return H
        # H[k,d,l,e] = Σ_n X[n,d]·(g″[n,k,l] X[n,e]): one BLAS product per chunk of rows
        H = np.zeros((D, K * K * D))
        step = max(1, _CHUNK // (K * K * D))
        for a in range(0, N, step):
            Xa = self.X[a:a + step]
            H += Xa.T @ (g2[a:a + step, :, :, None] * Xa[:, None, None, :]).reshape(len(Xa), -1)
        return H.reshape(D, K, K, D).transpose(1, 0, 2, 3).reshape(K * D, K * D)

    def expansion(self, w: np.ndarray, cov: np.ndarray) -> float:
        """Second-order expansion of Σ_n E_q[log f_n] at the mode w for q = N(w, cov)."""
        f, _, g2 = self.point(self.project(w[None])[0], self.moments, self.params)
        if isinstance(g2, DiagPlusOuter):
            g2 = g2.dense()
        if not self.classes:
            return float(f.sum() + 0.5 * np.einsum("n,nd,de,ne->", g2, self.X, cov, self.X))
        (N, D), K = self.X.shape, self.classes
        Ct = cov.reshape(K, D, K, D).transpose(1, 0, 2, 3).reshape(D, K * K * D)
        total = float(f.sum())
        step = max(1, _CHUNK // (K * K * D))
        for a in range(0, N, step):  # Cov(u_n)[k,l] = x_nᵀ C[k,·,l,·] x_n, by one BLAS product per chunk
            Xa = self.X[a:a + step]
            cu = np.einsum("nkle,ne->nkl", (Xa @ Ct).reshape(len(Xa), K, K, D), Xa)
            total += 0.5 * float(np.einsum("nkl,nlk->", g2[a:a + step], cu))
        return total


@dataclass
class BlockTarget:
    """η₁ᵀw + wᵀη₂w + c + Σ sites: c normalises the Gaussian part when its precision −2η₂ is positive
    definite (``proper_prior``); otherwise (an improper flat prior, or a rank-deficient message such as
    one data point's under a flat prior) c = 0 and the Gaussian part is an unnormalised factor."""

    eta1: np.ndarray
    eta2: np.ndarray
    sites: list[Site] = field(default_factory=list)
    # the part (Λ₀m₀, −½Λ₀) of (η₁, η₂) that is the block's own constant prior N(m₀, Λ₀⁻¹), given when a
    # handler learns its precision multiplier (``hyper.py``)
    prior: tuple[np.ndarray, np.ndarray] | None = None

    def __post_init__(self) -> None:
        self.dim = self.eta1.shape[-1]
        lam = -2.0 * self.eta2
        self.has_prior = bool(np.any(lam) or np.any(self.eta1))
        ev = np.linalg.eigvalsh(lam) if self.has_prior else np.zeros(1)
        self.proper_prior = bool(ev[0] > 1e-12 * ev[-1] > 0.0)
        if self.proper_prior:
            chol = np.linalg.cholesky(lam)
            mu = np.linalg.solve(lam, self.eta1)
            self.prior_const = (np.log(np.diag(chol)).sum() - 0.5 * self.dim * np.log(2 * np.pi)
                                - 0.5 * mu @ self.eta1)
        else:
            self.prior_const = 0.0

    @property
    def mc_sites(self) -> bool:
        """Whether the block has sites whose expectations need sampling (any that is not quadratic)."""
        return any(not s.quadratic for s in self.sites)

    def gaussian_part(self) -> tuple[np.ndarray, np.ndarray, float]:
        """(η₁, η₂, c) of the block's Gaussian part, log N(w | prior) + Σ quadratic sites = η₁ᵀw + wᵀη₂w + c:
        its expectation under q = N(μ, Σ) is η₁ᵀμ + μᵀη₂μ + tr(η₂Σ) + c, with no sampling."""
        e1, e2, c = self.eta1, self.eta2, float(self.prior_const)
        for s in self.sites:
            if s.quadratic:
                b, q, a = s.natural()
                e1, e2, c = e1 + b, e2 + q, c + a
        return e1, e2, c

    def gaussian_expectation(self, mu: np.ndarray, L: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """E_q of the Gaussian part for q = N(μ, LLᵀ), and its gradients in μ and in L (2η₂L)."""
        e1, e2, c = self.gaussian_part()
        E2L = e2 @ L
        value = float(e1 @ mu + mu @ e2 @ mu + np.sum(E2L * L) + c)
        return value, e1 + 2.0 * e2 @ mu, 2.0 * E2L

    def quadratic_site_term(self, mu: np.ndarray, cov: np.ndarray) -> float:
        """Σ over the quadratic sites of E_q[log f_n] under N(μ, cov) (exact: their expansion has no remainder)."""
        return sum(s.expansion(mu, cov) for s in self.sites if s.quadratic)

    def mc_site_terms(self, W: np.ndarray, scales: bool = False, grads: bool = True
                      ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """``_site_terms`` over the sites that are not quadratic (the part of the objective to sample)."""
        return self._site_terms(W, scales, grads, skip_quadratic=True)

    def sites_value_grad(self, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Σ_n log f_n at each row of W (S, D) and its gradient (S, D)."""
        val, grad, _ = self._site_terms(W, False)
        return val, grad

    def _site_terms(self, W: np.ndarray, scales: bool, grads: bool = True, skip_quadratic: bool = False
                    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """Σ_n log f_n, its gradient (unless ``grads`` is false) and (``scales``) Σ_n ∂log f_n/∂log s per site
        (S, n_sites; 0 for a site without a scale), in chunks of rows so that the (rows, N[, K]) temporaries
        stay near 2²² elements (S = 1000 draws × N = 10⁴ × K = 10 would be 0.8 GB each)."""
        S = W.shape[0]
        val, grad = np.zeros(S), (np.zeros_like(W) if grads else None)
        gs = np.zeros((S, len(self.sites))) if scales else None
        for j, s in enumerate(self.sites):
            if skip_quadratic and s.quadratic:
                continue
            per_row = s.X.shape[0] * max(s.classes, 1)
            step = max(1, _CHUNK // per_row)
            for a in range(0, S, step):
                u = s.project(W[a:a + step])
                f, g1, _ = s.point(u, s.moments, s.params, order=1)
                val[a:a + step] += f.sum(-1)
                if grads:
                    grad[a:a + step] += s.pull(g1)
                if scales and s.scaled:
                    gs[a:a + step, j] = s.dlog_scale(u, g1).sum(-1)
        return val, grad, gs

    def logp_grad(self, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        v, g, _ = self._logp(W, False)
        return v, g

    def log_values(self, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """log p̃ and its site part Σ_n log f_n at the rows of W, values only (one pass over the sites, no
        gradients): what an ELBO estimate on fresh draws needs."""
        W = np.atleast_2d(W)
        sv = self._site_terms(W, False, grads=False)[0]
        prior = W @ self.eta1 + np.einsum("sd,sd->s", W @ self.eta2, W) + self.prior_const
        return prior + sv, sv

    def logp_grad_scales(self, W: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """log p̃ at each row of W, its gradient in w, and Σ_n ∂log f_n/∂log s per site (S, n_sites)."""
        return self._logp(W, True)

    def _logp(self, W: np.ndarray, scales: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        W = np.atleast_2d(W)
        sv, sg, gs = self._site_terms(W, scales)
        WE = W @ self.eta2  # BLAS; the quadratic form and the gradient share it
        prior = W @ self.eta1 + np.einsum("sd,sd->s", WE, W) + self.prior_const
        return prior + sv, self.eta1 + 2.0 * WE + sg, gs

    def magnitude(self, w: np.ndarray) -> float:
        """The sum of the magnitudes of the terms of log p̃(w), |η₁|ᵀ|w| + |w|ᵀ|η₂||w| + |c| + Σ_n |log f_n|:
        log p̃ is known to a few ulps of this, not of |log p̃| (its terms can cancel)."""
        w = np.asarray(w, dtype=float)
        total = float(np.abs(self.eta1) @ np.abs(w) + np.abs(w) @ np.abs(self.eta2) @ np.abs(w) + abs(self.prior_const))
        for s in self.sites:
            f = s.point(s.project(w[None])[0], s.moments, s.params, order=1)[0]
            total += float(np.sum(np.abs(f)))
        return total

    def hessian(self, w: np.ndarray) -> np.ndarray:
        H = 2.0 * self.eta2.copy()
        for s in self.sites:
            _, _, g2 = s.point(s.project(w[None])[0], s.moments, s.params)
            H += s.hessian(g2)
        return H

    def laplace_site_term(self, w: np.ndarray, cov: np.ndarray) -> float:
        """Σ over sites of the second-order expansion of E_q[log f] at the mode (Laplace's site term)."""
        return sum(s.expansion(w, cov) for s in self.sites)


class DensityNotFinite(FloatingPointError):
    """A user's log density returned nan or ±inf (the message says where)."""


class DensityTarget:
    """A user's log density p̃(x), called as the user says (no guessing from output shapes).

    ``vectorized=False``: ``log_density(x)`` takes one point x of shape (D,) and returns a scalar (a size-1
    array is accepted), ``grad(x)`` returns (D,).  ``vectorized=True``: ``log_density(W)`` takes a batch W of
    shape (S, D) and returns (S,) (a scalar is accepted for S = 1), ``grad(W)`` returns (S, D).  Any other
    output shape raises ModelError naming the shape and the convention.
    """

    def __init__(self, log_density: Callable, dim: int, grad: Callable | None = None, eps: float = 1e-5,
                 vectorized: bool = False) -> None:
        self.f, self.g, self.dim, self.eps = log_density, grad, dim, eps
        self.vectorized = bool(vectorized)
        self.prior_const = 0.0

    def _shape_error(self, what: str, got: tuple, want: tuple, arg: tuple) -> ModelError:
        other = ("vectorized=False (log_density takes one point (D,) and returns a scalar)" if self.vectorized
                 else "vectorized=True (log_density takes a batch (S, D) and returns (S,))")
        return ModelError(f"approximate: {what} returned an array of shape {got} for an input of shape {arg}; "
                          f"expected {want or 'a scalar'} with vectorized={self.vectorized}. If your function "
                          f"follows the other convention, pass {other}")

    def log_values(self, W: np.ndarray) -> tuple[np.ndarray, None]:
        """log p̃ at the rows of W, values only (a density has no site part: None)."""
        return self._values(W), None

    def _values(self, W: np.ndarray) -> np.ndarray:
        W = np.atleast_2d(W)
        if self.vectorized:
            out = np.asarray(self.f(W), dtype=float)
            if out.shape != (len(W),) and not (out.ndim == 0 and len(W) == 1):
                raise self._shape_error("log_density", out.shape, (len(W),), W.shape)
            return out.reshape(len(W))
        vals = np.empty(len(W))
        for i, w in enumerate(W):
            out = np.asarray(self.f(w), dtype=float)
            if out.size != 1:
                raise self._shape_error("log_density", out.shape, (), w.shape)
            vals[i] = out.reshape(())
        return vals

    def _grads(self, W: np.ndarray) -> np.ndarray:
        if self.g is not None:
            if self.vectorized:
                out = np.asarray(self.g(W), dtype=float)
                if out.shape != W.shape and not (len(W) == 1 and out.shape == (self.dim,)):
                    raise self._shape_error("grad", out.shape, W.shape, W.shape)
                return out.reshape(W.shape)
            G = np.empty_like(W)
            for i, w in enumerate(W):
                out = np.asarray(self.g(w), dtype=float)
                if out.size != self.dim or out.ndim > 2:
                    raise self._shape_error("grad", out.shape, (self.dim,), w.shape)
                G[i] = out.reshape(self.dim)
            return G
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
            raise DensityNotFinite(f"the log density is {float(vals[~np.isfinite(vals)][0])!r} (not finite) at "
                                   f"{bad.tolist()}")
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

