"""The posterior of a Gaussian Markov chain: q(x_1..x_T) held by its smoothed moments."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .base import ChainPosterior

_LOG_2PI = float(np.log(2.0 * np.pi))


class ChainResiduals(NamedTuple):
    r"""The residual sums of a Gaussian chain about the dynamics (m₀, A) it was smoothed with, each per sequence
    (batch + (D, D)) and accurate to rounding relative to its own size (so nearly deterministic dynamics keep
    their evidence): with η_t = x_{t+1} − A x_t,

    .. math::

        E_0 = E[(x_1 - m_0)(x_1 - m_0)^\top],\quad W = \sum_t E[\eta_t\eta_t^\top],\quad
        X = \sum_t E[x_t\eta_t^\top].
    """

    initial_mean: np.ndarray
    transition: np.ndarray
    initial: np.ndarray
    noise: np.ndarray
    cross: np.ndarray


class GaussianChain(ChainPosterior):
    r"""A Gaussian distribution over state sequences x_1..x_T ∈ R^D (batched over sequences), Markov in t.

    .. math::

        q(x) = \frac1Z \exp\Big(-\tfrac12 x^\top\Lambda x + h^\top x\Big),

    with Λ block-tridiagonal (a Gaussian Markov chain).  It is kept by what message passing needs: the
    smoothed means μ_t = E[x_t], second moments E[x_t x_tᵀ] = Σ_t + μ_tμ_tᵀ, the pairwise moments
    E[x_t x_{t−1}ᵀ], the log-normaliser log Z and the joint entropy

    .. math::

        H[q] = \tfrac{LD}{2}(1 + \log 2\pi) - \tfrac12\log|\Lambda|.

    Built by the square-root Kalman filter and Rauch–Tung–Striebel smoother (the q of
    ``fg.gaussian_markov_chain``).

    Parameters
    ----------
    mean : array, shape batch + (T, D)
        μ_t (0 past a sequence's length).
    second : array, shape batch + (T, D, D)
        E[x_t x_tᵀ].
    pair : array, shape batch + (T, D, D)
        E[x_t x_{t−1}ᵀ]; 0 at t = 0 and past a sequence's length.
    log_normalizer, joint_entropy : arrays, shape batch
        log Z and H[q(x_1..x_L)] per sequence.
    sampler : callable, optional
        ``sampler(draws, rng)`` → joint draws of shape (draws,) + batch + (T, D) (forward filtering,
        backward sampling).  Without it steps are drawn independently from their marginals.
    residuals : ChainResiduals, optional
        The residual sums about the chain's own dynamics (the smoother's); without them the factor's evidence
        is formed from the moments above.
    """

    event_ndims = (1, 2)

    def __init__(self, mean: np.ndarray, second: np.ndarray, pair: np.ndarray, log_normalizer: np.ndarray,
                 joint_entropy: np.ndarray, sampler=None, residuals: ChainResiduals | None = None) -> None:
        self._mean = np.asarray(mean, dtype=float)
        self.second = np.asarray(second, dtype=float)
        self.pair = np.asarray(pair, dtype=float)
        self.log_normalizer = np.asarray(log_normalizer, dtype=float)
        self.joint_entropy = np.asarray(joint_entropy, dtype=float)
        self._sampler = sampler
        self.residuals = residuals

    @classmethod
    def independent(cls, mean: np.ndarray, second: np.ndarray) -> GaussianChain:
        """The chain whose steps are independent with the given moments (a starting point): pairwise
        moments μ_tμ_{t−1}ᵀ, entropy Σ_t ½ log det(2πe Σ_t), log-normaliser 0."""
        mu, m2 = np.asarray(mean, dtype=float), np.asarray(second, dtype=float)
        pair = np.zeros(m2.shape)
        pair[..., 1:, :, :] = mu[..., 1:, :, None] * mu[..., :-1, None, :]
        cov = m2 - mu[..., :, None] * mu[..., None, :]
        D = mu.shape[-1]
        sign, ld = np.linalg.slogdet(cov)
        h = np.where(sign > 0, 0.5 * D * (1.0 + _LOG_2PI) + 0.5 * ld, 0.0).sum(-1)
        return cls(mu, m2, pair, np.zeros(mu.shape[:-2]), h)

    @property
    def _steps(self) -> np.ndarray:
        return self._mean

    def mean(self) -> np.ndarray:
        """The smoothed means E[x_t], shape batch + (T, D)."""
        return self._mean

    def cov(self) -> np.ndarray:
        """The smoothed covariances Cov(x_t), shape batch + (T, D, D)."""
        return self.second - self._mean[..., :, None] * self._mean[..., None, :]

    def var(self) -> np.ndarray:
        """The smoothed marginal variances diag Cov(x_t)."""
        return np.diagonal(self.cov(), axis1=-2, axis2=-1).copy()

    def lag_one_cov(self) -> np.ndarray:
        """Cov(x_t, x_{t−1}) = E[x_t x_{t−1}ᵀ] − μ_tμ_{t−1}ᵀ (0 at t = 0), shape batch + (T, D, D)."""
        out = self.pair.copy()
        out[..., 1:, :, :] -= self._mean[..., 1:, :, None] * self._mean[..., :-1, None, :]
        return out

    def expected_stats(self) -> tuple[np.ndarray, np.ndarray]:
        """E[u(x_t)] = (μ_t, E[x_t x_tᵀ]), as for an MvGaussian per step."""
        return self._mean, self.second

    def _independent_draws(self, S: int, rng: np.random.Generator) -> np.ndarray:
        """Each step from its Gaussian marginal (0 past a sequence's length); ``sample`` gives joint draws of
        shape ``shape + batch_shape + (D,)``."""
        cov = self.cov()
        ok = np.trace(cov, axis1=-2, axis2=-1) > 0
        chol = np.linalg.cholesky(np.where(ok[..., None, None], cov, np.eye(cov.shape[-1])))
        z = rng.standard_normal((S,) + self._mean.shape)
        return self._mean + np.where(ok[..., None], np.einsum("...ij,...j->...i", chol, z), 0.0)

    def __repr__(self) -> str:
        return f"GaussianChain(batch_shape={self.batch_shape}, D={self._mean.shape[-1]})"
