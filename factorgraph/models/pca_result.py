"""The result of ``models.pca`` (Bayesian PCA, factorgraph/models/bayesian_pca.py): a ``Result`` with what the
fitted q implies — loadings, scores, explained variance, principal axes, reconstruction, imputation of missing
entries, the predictive of a new row and q(z) of new rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from factorgraph.graph import checks
from factorgraph.graph.nodes import ModelError
from factorgraph.posterior.results import Result


@dataclass
class PCAResult(Result):
    """A fitted Bayesian PCA (``models.pca``): the ``fg.Result`` of its model (posteriors ``z``, ``w``,
    ``alpha``, ``tau``) with PCA's accessors, all in the units of X.

    Attributes
    ----------
    loadings
        E[W] (D, K): column k is component k's loading vector (in the ARD basis: switched-off columns ≈ 0).
    loadings_cov
        Cov(w_d) (D, K, K) of each row of W.
    latent_mean (``scores``), latent_cov
        E[z_n] (N, K) and the common Cov(z_n) (K, K); with missing entries each row has its own, (N, K, K).
    mean
        E[μ] (D,) (zeros when fitted with ``mean=False``).
    noise_precision
        E[τ] (D,), or a 1-vector with ``noise="isotropic"``; ``noise_variance`` is 1/E[τ].
    ard_precision
        E[α] (K,) (all equal without ARD).
    elbo, elbo_trace, n_iter, converged, time
        The final bound, the bound after each sweep, sweeps run, whether the stopping rule was met, seconds.
    observed
        The (N, D) mask of observed entries (True = observed), or None when X had no missing entry.
    """

    K: int = 0
    has_mean: bool = True
    total_variance: float = 0.0
    rotate: bool = True
    observed: np.ndarray | None = None
    data: np.ndarray | None = field(default=None, repr=False)  # X (missing entries zero), for ``impute``

    @classmethod
    def of(cls, result: Result, **extra: Any) -> PCAResult:
        """The ``Result`` of ``fg.infer`` on ``pca_model`` with PCA's accessors (``extra``: the fields above)."""
        out = cls.__new__(cls)
        out.__dict__.update(vars(result))
        out.__dict__.update(extra)
        return out

    @property
    def loadings(self) -> np.ndarray:
        return self.posteriors["w"].mean()[:, :self.K]

    @property
    def loadings_cov(self) -> np.ndarray:
        return self.posteriors["w"].cov()[:, :self.K, :self.K]

    @property
    def latent_mean(self) -> np.ndarray:
        return self.posteriors["z"].mean()

    @property
    def scores(self) -> np.ndarray:
        """E[z_n] (N, K), the same as ``latent_mean``."""
        return self.latent_mean

    @property
    def latent_cov(self) -> np.ndarray:
        q = self.posteriors["z"]  # GaussianRows keeps one covariance for every fully observed row
        return q.shared_cov() if hasattr(q, "shared_cov") else q.cov()

    @property
    def mean(self) -> np.ndarray:
        w = self.posteriors["w"].mean()
        return w[:, self.K].copy() if self.has_mean else np.zeros(w.shape[0])

    @property
    def noise_precision(self) -> np.ndarray:
        return np.atleast_1d(self.posteriors["tau"].mean())

    @property
    def ard_precision(self) -> np.ndarray:
        return np.broadcast_to(self.posteriors["alpha"].mean(), (self.K,)).copy()

    @property
    def _mean_cov(self) -> np.ndarray:
        """Cov(w_d, μ_d) (D, K+1, K+1) (μ's row and column zero without a mean)."""
        cov = self.posteriors["w"].cov()
        if self.has_mean:
            return cov
        out = np.zeros((cov.shape[0], self.K + 1, self.K + 1))
        out[:, :self.K, :self.K] = cov
        return out

    @property
    def _noise_ab(self) -> tuple[np.ndarray, np.ndarray]:
        """(shape, rate) of q(τ)."""
        q = self.posteriors["tau"]
        return np.atleast_1d(q.shape), np.atleast_1d(q.rate)

    @property
    def n_components(self) -> int:
        return self.loadings.shape[1]

    @property
    def noise_variance(self) -> np.ndarray:
        return 1.0 / self.noise_precision

    @property
    def relevance(self) -> np.ndarray:
        """Per component, the share Σ_d E[w_dk²] / Σ_dk E[w_dk²] of the expected squared loadings."""
        s = np.einsum("dk,dk->k", self.loadings, self.loadings) + np.einsum("dkk->k", self.loadings_cov)
        return s / s.sum()

    def active(self, threshold: float = 1e-3) -> np.ndarray:
        """Components ARD kept: those whose squared loadings exceed ``threshold`` × the largest component's."""
        s = np.einsum("dk,dk->k", self.loadings, self.loadings)
        return s > threshold * s.max()

    @property
    def explained_variance(self) -> np.ndarray:
        """The variances of the model's principal axes: the eigenvalues of E[W]E[W]ᵀ, largest first (K,)."""
        return np.sort(np.linalg.eigvalsh(self.loadings.T @ self.loadings))[::-1].clip(min=0.0)

    @property
    def explained_variance_ratio(self) -> np.ndarray:
        """``explained_variance`` over the data's total variance (the trace of the sample covariance)."""
        return self.explained_variance / self.total_variance

    @property
    def components(self) -> np.ndarray:
        """The principal axes (K, D), orthonormal, in the order of ``explained_variance``."""
        u, _, _ = np.linalg.svd(self.loadings, full_matrices=False)
        return u.T

    def reconstruct(self) -> np.ndarray:
        """E[W z_n + μ] for the training rows (N, D), missing entries included."""
        return self.latent_mean @ self.loadings.T + self.mean

    def impute(self) -> tuple[np.ndarray, np.ndarray]:
        """The training data with each missing entry replaced by its predictive mean, and the predictive
        variance of every entry (0 where observed), (N, D) each.

        Under q, x_nd = w̃_dᵀz̃_n + ε_nd has mean m̃_dᵀE[z̃_n] and variance
        tr(E[w̃_d w̃_dᵀ]E[z̃_n z̃_nᵀ]) − (m̃_dᵀE[z̃_n])² + E[1/τ_d] (E[1/τ] = b/(a − 1), the variance of the
        Student-t that integrating q(τ) gives)."""
        N, D = self.latent_mean.shape[0], self.loadings.shape[0]
        K = self.n_components
        mu = self.reconstruct()
        m = np.concatenate([self.loadings, self.mean[:, None]], axis=1)
        eww = self._mean_cov + m[:, :, None] * m[:, None, :]
        zt = np.concatenate([self.latent_mean, np.ones((N, 1))], axis=1)
        zc = np.zeros((N, K + 1, K + 1)) if self.latent_cov.ndim == 3 else np.zeros((K + 1, K + 1))
        zc[..., :K, :K] = self.latent_cov
        # tr(E[w̃w̃ᵀ]E[z̃z̃ᵀ]) − (m̃ᵀz̄)² = z̄ᵀCov(w̃)z̄ + tr(E[w̃w̃ᵀ]Cov(z̃))
        var = np.einsum("nj,djk,nk->nd", zt, self._mean_cov, zt)
        var += (np.einsum("djk,nkj->nd", eww, zc) if zc.ndim == 3 else np.einsum("djk,kj->d", eww, zc))
        a, b = self._noise_ab
        var = var + np.broadcast_to(b / (a - 1.0), (D,))
        if self.observed is None:
            return self.data.copy(), np.zeros((N, D))
        return np.where(self.observed, self.data, mu), np.where(self.observed, 0.0, var)

    def transform(self, X_new: Any) -> tuple[np.ndarray, np.ndarray]:
        """q(z) of new rows given the fitted q(W, μ, τ): (means (M, K), common covariance (K, K)); when X_new
        has missing entries (NaN) each row uses only its observed entries and gets its own covariance
        (M, K, K)."""
        Xn, hidden = checks.as_float_array(X_new, "X_new")
        Xn = Xn[None] if Xn.ndim == 1 else Xn
        D, K = self.loadings.shape
        if Xn.ndim != 2 or Xn.shape[1] != D:
            raise ModelError(f"X_new must be a vector of {D} values or a matrix with {D} columns, got shape "
                             f"{Xn.shape}")
        M = ~np.isnan(Xn)
        if hidden is not None:
            M &= ~hidden.reshape(Xn.shape)
        checks.constant(Xn[M], "X_new (its observed entries)")
        tau = np.broadcast_to(self.noise_precision, (D,))
        m = np.concatenate([self.loadings, self.mean[:, None]], axis=1)
        eww = self._mean_cov + m[:, :, None] * m[:, None, :]
        if not M.all():
            Mt = M * tau
            P = np.einsum("nd,dkl->nkl", Mt, eww[:, :K, :K]) + np.eye(K)
            cov = np.linalg.inv(P)
            h = np.where(M, Xn, 0.0) @ (tau[:, None] * self.loadings) - Mt @ eww[:, :K, K]
            return np.einsum("nkl,nl->nk", cov, h), cov
        cov = np.linalg.inv(np.eye(K) + np.einsum("d,dkl->kl", tau, eww[:, :K, :K]))
        h = (Xn * tau) @ self.loadings - np.einsum("d,dk->k", tau, eww[:, :K, K])
        return h @ cov, cov

    def predictive(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean (D,) and covariance (D, D) of a new row x* = Wz* + μ + ε under q (z* ~ N(0, I)):
        Cov = E[W]E[W]ᵀ + diag(tr Cov(w_d) + Var(μ_d) + E[1/τ_d])."""
        a, b = self._noise_ab
        D = self.loadings.shape[0]
        cov = self.loadings @ self.loadings.T
        diag = (np.einsum("dkk->d", self._mean_cov[:, :-1, :-1]) + self._mean_cov[:, -1, -1]
                + np.broadcast_to(b / (a - 1.0), (D,)))
        return self.mean.copy(), cov + np.diag(diag)


__all__ = ["PCAResult"]
