"""A finite mixture of multivariate Gaussians over R^D: the posterior family of boosting VI."""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from ._checks import as_array
from .base import Distribution, RngLike, Shape, as_rng, as_shape, describe
from .mv_gaussian import MvGaussian

_LOG_2PI = float(np.log(2.0 * np.pi))
_CHUNK = 2**21  # floats per (points × components × D) block in the vectorised kernels


class GaussianMixture(Distribution):
    r"""Finite Gaussian mixture q(x) = Σ_k π_k N(x | μ_k, Σ_k) on R^D (one mixture, no batch axes).

    .. math::

        \log q(x) = \operatorname{logsumexp}_k\big[\log\pi_k + \log N(x\mid\mu_k,\Sigma_k)\big],\qquad
        E[x] = \sum_k \pi_k\mu_k,\qquad
        E[xx^\top] = \sum_k \pi_k(\Sigma_k + \mu_k\mu_k^\top).

    The entropy H[q] = −E_q[log q] has no closed form: ``entropy_estimate(n, rng)`` returns a Monte
    Carlo estimate with its standard error, and ``entropy()`` that estimate with ``ENTROPY_SAMPLES``
    draws from the fixed seed ``ENTROPY_SEED`` (so it is a deterministic function of the mixture).

    Parameters
    ----------
    weights : array_like, shape (K,)
        Mixing proportions π_k ≥ 0 summing to 1 (within 1e-6; renormalised exactly).  Zero weights
        are allowed (such components are kept but carry no mass).
    means : array_like, shape (K, D)
        Component means μ_k.  A 1-D array of length K means D = 1.
    covs : array_like, shape (K, D, D)
        Symmetric positive-definite component covariances Σ_k.  With D = 1 a shape (K,) array of
        variances is accepted.

    Notes
    -----
    Components are stored by their Cholesky factors Σ_k = L_kL_kᵀ; log N(x | μ_k, Σ_k) uses
    z = L_k⁻¹(x − μ_k).  The kernels are vectorised over points and components (in blocks of at most
    ``2**21`` floats); only ``sample`` loops, over components, never over samples.
    """

    __slots__ = ("_w", "_mu", "_cov", "_chol", "_linv", "_logdet", "_prec")

    ENTROPY_SAMPLES = 20_000
    ENTROPY_SEED = 0

    def __init__(self, weights, means, covs) -> None:
        owner = "GaussianMixture"
        w = as_array(owner, "weights", weights, min_ndim=1)
        mu = as_array(owner, "means", means, min_ndim=1)
        cov = as_array(owner, "covs", covs, min_ndim=1)
        if mu.ndim == 1:  # K scalar components
            mu = mu[:, None]
            if cov.ndim == 1:
                cov = cov[:, None, None]
        if w.ndim != 1 or mu.ndim != 2 or cov.ndim != 3:
            raise ValueError(f"{owner}: need weights (K,), means (K, D) and covs (K, D, D); got shapes "
                             f"{w.shape}, {mu.shape}, {cov.shape}")
        K, D = mu.shape
        if w.shape[0] != K or cov.shape != (K, D, D):
            raise ValueError(f"{owner}: shapes disagree: weights {w.shape}, means {mu.shape}, covs {cov.shape} "
                             f"(expected ({K},), ({K}, {D}), ({K}, {D}, {D}))")
        if np.any(w < 0) or abs(w.sum() - 1.0) > 1e-6:
            raise ValueError(f"{owner}: weights must be non-negative and sum to 1, got {w.tolist()} "
                             f"(sum {w.sum()!r})")
        cov = 0.5 * (cov + np.swapaxes(cov, -1, -2))
        try:
            chol = np.linalg.cholesky(cov)
        except np.linalg.LinAlgError:
            eig = np.linalg.eigvalsh(cov).min(-1)
            bad = int(np.argmin(eig))
            raise ValueError(f"{owner}: covs[{bad}] is not positive definite (smallest eigenvalue "
                             f"{eig[bad]!r})") from None
        self._w = w / w.sum()
        self._mu = mu
        self._cov = cov
        self._chol = chol
        self._linv = np.linalg.inv(chol)
        self._logdet = 2.0 * np.log(np.diagonal(chol, axis1=-2, axis2=-1)).sum(-1)
        self._prec = None
        for a in (self._w, self._mu, self._cov, self._chol, self._linv, self._logdet):
            a.flags.writeable = False

    # ------------------------------------------------------------------------------ parameters
    @property
    def batch_shape(self) -> Shape:
        return ()

    @property
    def event_shape(self) -> Shape:
        return (self.dim,)

    @property
    def dim(self) -> int:
        """Event dimension D."""
        return self._mu.shape[1]

    @property
    def n_components(self) -> int:
        """Number of components K (zero-weight ones included)."""
        return self._mu.shape[0]

    @property
    def weights(self) -> np.ndarray:
        """Mixing proportions π, shape (K,)."""
        return self._w

    @property
    def means(self) -> np.ndarray:
        """Component means, shape (K, D)."""
        return self._mu

    @property
    def covs(self) -> np.ndarray:
        """Component covariances, shape (K, D, D)."""
        return self._cov

    def component(self, k: int) -> MvGaussian:
        """The k-th component N(μ_k, Σ_k)."""
        return MvGaussian(mean=self._mu[k], cov=self._cov[k])

    # ------------------------------------------------------------------------------ moments
    def mean(self) -> np.ndarray:
        """E[x] = Σ_k π_k μ_k, shape (D,)."""
        return self._w @ self._mu

    def expected_stats(self) -> tuple[np.ndarray, np.ndarray]:
        """(E[x], E[xxᵀ]) with E[xxᵀ] = Σ_k π_k (Σ_k + μ_kμ_kᵀ): the statistics the graph consumes."""
        second = np.einsum("k,kij->ij", self._w, self._cov + self._mu[:, :, None] * self._mu[:, None, :])
        return self.mean(), 0.5 * (second + second.T)

    def cov(self) -> np.ndarray:
        """Cov[x] = Σ_k π_k (Σ_k + μ_kμ_kᵀ) − E[x]E[x]ᵀ (the law of total covariance)."""
        m = self.mean()
        # centred form: numerically safer than s − mmᵀ when the means are large
        d = self._mu - m
        c = np.einsum("k,kij->ij", self._w, self._cov + d[:, :, None] * d[:, None, :])
        return 0.5 * (c + c.T)

    def var(self) -> np.ndarray:
        """Marginal variances diag(Cov[x])."""
        return np.diagonal(self.cov()).copy()

    # ------------------------------------------------------------------------------ densities
    def _points(self, x) -> tuple[np.ndarray, Shape]:
        x = np.asarray(x, dtype=float)
        if x.shape[-1:] != (self.dim,):
            raise ValueError(f"GaussianMixture: points need a trailing axis of length {self.dim}, got shape {x.shape}")
        return x.reshape(-1, self.dim), x.shape[:-1]

    def _z(self, x: np.ndarray) -> np.ndarray:
        """Whitened residuals z_nk = L_k⁻¹(x_n − μ_k), shape (N, K, D)."""
        return np.einsum("kij,nkj->nki", self._linv, x[:, None, :] - self._mu[None])

    def component_logpdf(self, x) -> np.ndarray:
        """log N(x | μ_k, Σ_k) for every component, shape ``x.shape[:-1] + (K,)``."""
        pts, lead = self._points(x)
        out = np.empty((pts.shape[0], self.n_components))
        step = max(1, _CHUNK // (self.n_components * self.dim))
        for i in range(0, pts.shape[0], step):
            z = self._z(pts[i:i + step])
            out[i:i + step] = -0.5 * (self.dim * _LOG_2PI + self._logdet) - 0.5 * np.einsum("nki,nki->nk", z, z)
        return out.reshape(lead + (self.n_components,))

    def logpdf(self, x) -> np.ndarray:
        """log q(x) = logsumexp_k [log π_k + log N(x | μ_k, Σ_k)], shape ``x.shape[:-1]``."""
        with np.errstate(divide="ignore"):
            logw = np.log(self._w)
        return logsumexp(self.component_logpdf(x) + logw, axis=-1)

    def responsibilities(self, x) -> np.ndarray:
        """r_k(x) = π_k N(x | μ_k, Σ_k) / q(x), shape ``x.shape[:-1] + (K,)``."""
        with np.errstate(divide="ignore"):
            lc = self.component_logpdf(x) + np.log(self._w)
        return np.exp(lc - logsumexp(lc, axis=-1, keepdims=True))

    def logpdf_and_grad(self, x) -> tuple[np.ndarray, np.ndarray]:
        r"""log q(x) and ∇ log q(x) = −Σ_k r_k(x) Σ_k⁻¹(x − μ_k) for points x of shape (N, D).

        Returns arrays of shapes (N,) and (N, D).
        """
        pts, lead = self._points(x)
        N, K, D = pts.shape[0], self.n_components, self.dim
        val, grad = np.empty(N), np.empty((N, D))
        with np.errstate(divide="ignore"):
            logw = np.log(self._w)
        step = max(1, _CHUNK // (K * D))
        for i in range(0, N, step):
            z = self._z(pts[i:i + step])
            lc = logw - 0.5 * (D * _LOG_2PI + self._logdet) - 0.5 * np.einsum("nki,nki->nk", z, z)
            lq = logsumexp(lc, axis=-1)
            r = np.exp(lc - lq[:, None])
            gk = -np.einsum("kji,nkj->nki", self._linv, z)  # −Σ_k⁻¹(x − μ_k) = −L_k⁻ᵀ z
            val[i:i + step] = lq
            grad[i:i + step] = np.einsum("nk,nki->ni", r, gk)
        return val.reshape(lead), grad.reshape(lead + (D,))

    def logpdf_hessian(self, x) -> np.ndarray:
        r"""∇² log q at one point x (D,):

        .. math:: \sum_k r_k (g_kg_k^\top - \Sigma_k^{-1}) - gg^\top,\quad g_k = -\Sigma_k^{-1}(x-\mu_k),\
                  g = \sum_k r_k g_k.
        """
        x = np.asarray(x, dtype=float).reshape(1, self.dim)
        if self._prec is None:
            self._prec = np.einsum("kji,kjl->kil", self._linv, self._linv)
        z = self._z(x)[0]
        gk = -np.einsum("kji,kj->ki", self._linv, z)
        r = self.responsibilities(x)[0]
        g = r @ gk
        H = np.einsum("k,ki,kj->ij", r, gk, gk) - np.einsum("k,kij->ij", r, self._prec) - np.outer(g, g)
        return 0.5 * (H + H.T)

    # ------------------------------------------------------------------------------ sampling
    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Draws of shape ``shape + (D,)``: a component index k ~ π, then μ_k + L_k z, z ~ N(0, I)."""
        rng = as_rng(rng)
        shape = as_shape(shape)
        n = int(np.prod(shape, dtype=int))
        idx = rng.choice(self.n_components, size=n, p=self._w)
        z = rng.standard_normal((n, self.dim))
        out = np.empty((n, self.dim))
        for k in np.unique(idx):  # a loop over components; the draws of one component are one product
            sel = idx == k
            out[sel] = self._mu[k] + z[sel] @ self._chol[k].T
        return out.reshape(shape + (self.dim,))

    def sample_stratified(self, n: int, rng: RngLike = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r"""Draws stratified by component: n_k = max(1, round(n π_k)) draws from each component with
        π_k > 0.  Returns the points (M, D), their weights π_k/n_k (summing to 1) and component indices.

        Σ_i w_i f(x_i) is an unbiased estimate of E_q[f] = Σ_k π_k E_{N_k}[f] whose variance lacks the
        between-component part: a component of small weight far from the rest (a broad initial
        component) no longer makes the estimate heavy-tailed through the random number of its draws.
        """
        rng = as_rng(rng)
        live = np.flatnonzero(self._w > 0)
        nk = np.maximum(1, np.rint(n * self._w[live]).astype(int))
        idx = np.repeat(live, nk)
        z = rng.standard_normal((idx.size, self.dim))
        out = np.empty_like(z)
        start = 0
        for k, m in zip(live, nk, strict=True):  # a loop over components, not samples
            out[start:start + m] = self._mu[k] + z[start:start + m] @ self._chol[k].T
            start += m
        return out, np.repeat(self._w[live] / nk, nk), idx

    # ------------------------------------------------------------------------------ entropy
    def entropy_estimate(self, n: int = 10_000, rng: RngLike = None) -> tuple[float, float]:
        r"""Monte Carlo entropy Ĥ = −(1/n) Σ_s log q(x_s), x_s ~ q, and its standard error sd/√n."""
        if n < 2:
            raise ValueError(f"GaussianMixture.entropy_estimate: n must be ≥ 2, got {n!r}")
        lq = self.logpdf(self.sample(n, rng))
        return float(-lq.mean()), float(lq.std(ddof=1) / np.sqrt(n))

    def entropy(self) -> float:
        """The Monte Carlo entropy estimate with ``ENTROPY_SAMPLES`` draws from seed ``ENTROPY_SEED``
        (deterministic; an estimate, not an exact value: use ``entropy_estimate`` for its error)."""
        return self.entropy_estimate(self.ENTROPY_SAMPLES, np.random.default_rng(self.ENTROPY_SEED))[0]

    # ------------------------------------------------------------------------------ constructions
    def add(self, alpha: float, mean, cov) -> GaussianMixture:
        """The mixture (1 − α) q + α N(mean, cov) (the new component is appended last)."""
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"GaussianMixture.add: alpha must lie in [0, 1], got {alpha!r}")
        mean = np.asarray(mean, dtype=float).reshape(1, self.dim)
        cov = np.asarray(cov, dtype=float).reshape(1, self.dim, self.dim)
        return GaussianMixture(np.append((1.0 - alpha) * self._w, alpha), np.concatenate([self._mu, mean]),
                               np.concatenate([self._cov, cov]))

    def head(self, k: int, alphas=None) -> GaussianMixture:
        r"""The first k components.

        Without ``alphas`` their weights are renormalised.  With the mixing weights α_1..α_K of a
        greedily grown mixture (q_j = (1 − α_j)q_{j−1} + α_j h_j, α_1 = 1 for the first component) the
        weights are those of q_k, π_j = α_j Π_{i=j+1..k}(1 − α_i); this equals the renormalised
        version unless some later α_i was 1 (which zeroes every earlier weight).
        """
        if not 1 <= k <= self.n_components:
            raise ValueError(f"GaussianMixture.head: k must lie in 1..{self.n_components}, got {k!r}")
        if alphas is not None:
            a = np.asarray(alphas, dtype=float)[:k].copy()
            if a.shape != (k,) or np.any((a < 0) | (a > 1)):
                raise ValueError(f"GaussianMixture.head: need {k} mixing weights in [0, 1], got {alphas!r}")
            a[0] = 1.0
            tail = np.concatenate([np.cumprod((1.0 - a[1:])[::-1])[::-1], [1.0]])
            return GaussianMixture(a * tail, self._mu[:k], self._cov[:k])
        w = self._w[:k]
        if w.sum() <= 0:
            raise ValueError(f"GaussianMixture.head: the first {k} components have no weight left")
        return GaussianMixture(w / w.sum(), self._mu[:k], self._cov[:k])

    def marginal(self, dims) -> GaussianMixture:
        """The marginal mixture of the coordinates ``dims`` (same weights)."""
        d = np.atleast_1d(np.asarray(dims, dtype=int))
        return GaussianMixture(self._w, self._mu[:, d], self._cov[:, d][:, :, d])

    @classmethod
    def from_gaussian(cls, q: MvGaussian) -> GaussianMixture:
        """A one-component mixture."""
        return cls(np.ones(1), np.asarray(q.mean(), dtype=float)[None], np.asarray(q.cov(), dtype=float)[None])

    def __repr__(self) -> str:
        return describe(self, ("weights", "means", "covs"))
