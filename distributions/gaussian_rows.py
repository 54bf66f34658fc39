"""Independent Gaussian rows held compactly: q(z_1..z_N) = Π_n N(z_n | m_n, Σ_n) with one shared Σ or one per row."""

from __future__ import annotations

import numpy as np

from .base import Distribution, RngLike, Shape, as_rng, as_shape

_LOG_2PI = float(np.log(2.0 * np.pi))


class GaussianRows(Distribution):
    r"""N independent Gaussian K-vectors, q(z) = Π_n N(z_n | m_n, Σ_n), kept by their means, covariances and
    precisions, where the covariance may be one matrix shared by every row.

    .. math::

        E[z_n] = m_n,\qquad E[z_n z_n^\top] = \Sigma_n + m_n m_n^\top,\qquad
        H[q(z_n)] = \tfrac K2(1 + \log 2\pi) + \tfrac12\log|\Sigma_n|.

    The latent scores of Bayesian PCA given their loadings have one covariance Σ = (I + Σ_d E[τ_d]E[w_dw_dᵀ])⁻¹
    for every fully observed row (``factors.factor_analysis`` builds this q).  Kept shared, the N × K × K second
    moments are never formed unless asked for: ``expected_stats`` gives them as a ``RowMoments``, which numpy
    forms on use, and ``second_sum`` gives their sum over the rows directly.

    Parameters
    ----------
    mean : array, shape (N, K)
        m_n.
    cov, precision : arrays, shape (K, K) (shared) or (N, K, K)
        Σ_n and Λ_n = Σ_n⁻¹ (both kept: the natural parameters are (Λ_n m_n, −½Λ_n)).
    logdet_cov : array, shape () or (N,)
        log|Σ_n|.
    shift : array, shape (N, K), optional
        Λ_n m_n, when known (an update has it: the rows' potentials).
    """

    __slots__ = ("_mean", "_cov", "_precision", "_logdet", "_shift")

    def __init__(self, mean: np.ndarray, cov: np.ndarray, precision: np.ndarray, logdet_cov: np.ndarray,
                 shift: np.ndarray | None = None) -> None:
        self._mean = np.asarray(mean, dtype=float)
        self._cov = np.asarray(cov, dtype=float)
        self._precision = np.asarray(precision, dtype=float)
        self._logdet = np.asarray(logdet_cov, dtype=float)
        self._shift = shift  # Λ_n m_n when the maker has it (else formed on demand)

    @classmethod
    def standard(cls, n: int, mean: np.ndarray, precision: np.ndarray) -> GaussianRows:
        """n rows, each N(mean, precision⁻¹) (a prior, or the start of a fit)."""
        lam = np.asarray(precision, dtype=float)
        cov = np.linalg.inv(lam)
        mean = np.broadcast_to(np.asarray(mean, dtype=float), (n, lam.shape[-1])).copy()
        return cls(mean, cov, lam, -np.linalg.slogdet(lam)[1])

    @property
    def shared(self) -> bool:
        """Whether every row has the same covariance."""
        return self._cov.ndim == 2

    @property
    def batch_shape(self) -> Shape:
        return self._mean.shape[:-1]

    @property
    def event_shape(self) -> Shape:
        return self._mean.shape[-1:]

    @property
    def natural(self) -> tuple[np.ndarray, np.ndarray]:
        """(Λ_n m_n (N, K), −½Λ_n ((K, K) shared, or (N, K, K)))."""
        if self._shift is None:
            self._shift = (self._mean @ self._precision if self.shared
                           else np.einsum("nkl,nl->nk", self._precision, self._mean, optimize=True))
        return self._shift, -0.5 * self._precision

    def mean(self) -> np.ndarray:
        """m_n, shape (N, K)."""
        return self._mean

    def cov(self) -> np.ndarray:
        """Σ_n, shape (N, K, K) (a read-only broadcast view when shared)."""
        return np.broadcast_to(self._cov, self._mean.shape + self._mean.shape[-1:])

    def shared_cov(self) -> np.ndarray:
        """The covariance as kept: (K, K) when shared, else (N, K, K)."""
        return self._cov

    def row_precision(self) -> np.ndarray:
        """Λ_n as kept: (K, K) when shared, else (N, K, K)."""
        return self._precision

    def logdet_cov(self) -> np.ndarray:
        """log|Σ_n|, shape (N,)."""
        return np.broadcast_to(self._logdet, self.batch_shape)

    def var(self) -> np.ndarray:
        """diag Σ_n, shape (N, K)."""
        return np.broadcast_to(np.diagonal(self._cov, axis1=-2, axis2=-1), self._mean.shape).copy()

    def entropy(self) -> np.ndarray:
        """H[q(z_n)] = (K/2)(1 + log 2π) + ½log|Σ_n|, shape (N,)."""
        K = self._mean.shape[-1]
        return np.broadcast_to(0.5 * K * (1.0 + _LOG_2PI) + 0.5 * self._logdet, self.batch_shape).copy()

    def expected_stats(self) -> tuple[np.ndarray, RowMoments]:
        """(m_n, E[z_nz_nᵀ]), the second as a ``RowMoments`` (formed when numpy uses it)."""
        return self._mean, RowMoments(self._mean, self._cov)

    def second_sum(self) -> np.ndarray:
        """Σ_n E[z_nz_nᵀ] (K, K), without forming the N second moments."""
        m = self._mean
        return (m.shape[0] * self._cov if self.shared else self._cov.sum(0)) + m.T @ m

    def transformed(self, R: np.ndarray, c: np.ndarray | None = None) -> GaussianRows:
        """The law of R z_n + c: means R m_n + c, covariances R Σ_n Rᵀ, precisions R⁻ᵀ Λ_n R⁻¹, log-determinants
        log|Σ_n| + 2 log|det R|."""
        R = np.asarray(R, dtype=float)
        U = np.linalg.inv(R)
        mean = self._mean @ R.T if c is None else self._mean @ R.T + c
        return GaussianRows(mean, R @ self._cov @ R.T, U.T @ self._precision @ U,
                            self._logdet + 2.0 * np.linalg.slogdet(R)[1])

    def shifted(self, c: np.ndarray) -> GaussianRows:
        """The law of z_n + c (covariances unchanged)."""
        return GaussianRows(self._mean + c, self._cov, self._precision, self._logdet)

    def logpdf(self, x) -> np.ndarray:
        """log N(x_n | m_n, Σ_n), shape of x's batch."""
        r = np.asarray(x, dtype=float) - self._mean
        quad = np.einsum("...k,...kl,...l->...", r, self._precision, r)
        return -0.5 * (self._mean.shape[-1] * _LOG_2PI + self._logdet + quad)

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        """Draws m_n + L_n e, e ~ N(0, I), Σ_n = L_nL_nᵀ, of shape ``shape + (N, K)``."""
        size = as_shape(shape) + self._mean.shape
        e = as_rng(rng).standard_normal(size)
        L = np.linalg.cholesky(self._cov)
        return self._mean + np.einsum("...kl,...l->...k", L, e)

    def __repr__(self) -> str:
        kind = "shared" if self.shared else "per-row"
        return f"GaussianRows(N={self._mean.shape[0]}, K={self._mean.shape[-1]}, {kind} covariance)"


class RowMoments:
    """E[z_nz_nᵀ] = Σ_n + m_nm_nᵀ of ``GaussianRows``, formed only when numpy needs the (N, K, K) array.

    ``np.asarray`` (and any numpy function or ufunc) forms it; ``np.isfinite`` is answered from the parts, in
    broadcast form (every entry is finite when the means and covariances are), so that checking the moments of
    a q costs nothing (``GaussianRows.second_sum`` gives Σ_n E[z_nz_nᵀ] without forming it).
    """

    __slots__ = ("_mean", "_cov")

    def __init__(self, mean: np.ndarray, cov: np.ndarray) -> None:
        self._mean, self._cov = mean, cov

    @property
    def shape(self) -> tuple[int, ...]:
        return self._mean.shape + self._mean.shape[-1:]

    @property
    def ndim(self) -> int:
        return self._mean.ndim + 1

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(float)

    def __len__(self) -> int:
        return self._mean.shape[0]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = self._cov + self._mean[..., :, None] * self._mean[..., None, :]
        return out if dtype is None else out.astype(dtype)

    def __getitem__(self, index) -> np.ndarray:
        return np.asarray(self)[index]

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if ufunc is np.isfinite and method == "__call__" and len(inputs) == 1 and not kwargs:
            ok = bool(np.isfinite(self._mean).all() and np.isfinite(self._cov).all())
            return np.full((1,) * self.ndim, ok)
        args = [np.asarray(x) if isinstance(x, RowMoments) else x for x in inputs]
        return getattr(ufunc, method)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"RowMoments(shape={self.shape})"


__all__ = ["GaussianRows", "RowMoments"]
