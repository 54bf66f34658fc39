"""The posterior of a categorical Markov chain: q(z_1..z_T) held by its marginals and pair counts."""

from __future__ import annotations

from functools import partial

import numpy as np

from .base import ChainPosterior


class CategoricalChain(ChainPosterior):
    r"""A distribution over K-state sequences z_1..z_T (batched over sequences), Markov in t.

    .. math::

        q(z) = \frac{1}{Z}\,\tilde\pi(z_1)\prod_{t\ge 2}\tilde A(z_{t-1}, z_t)\prod_t e^{\phi_t(z_t)}

    It is kept by what message passing needs: the one-step marginals γ_t(k) = q(z_t = k), the expected
    transition counts Σ_t q(z_{t−1} = j, z_t = k) of each sequence, its log-normaliser log Z and its
    entropy H[q].  Built by forward–backward (the q of ``fg.markov_chain``).

    Parameters
    ----------
    marginals : array, shape batch + (T, K)
        γ_t(k); rows past a sequence's length are all zero (those steps do not exist).
    pair_counts : array, shape batch + (K, K)
        Σ_{t≥2} q(z_{t−1} = j, z_t = k) per sequence.
    log_normalizer : array, shape batch
        log Z per sequence.
    joint_entropy : array, shape batch
        H[q(z_1..z_L)] per sequence.
    sampler : callable, optional
        ``sampler(draws, rng)`` → joint draws of every sequence, integer labels of shape
        (draws,) + batch + (T,) with −1 past a sequence's length (forward filtering, backward sampling,
        supplied by the factor that built the chain).  Without it the steps are drawn independently
        from their marginals, which is exact only for a chain whose steps are independent.
    mode : callable, optional
        ``mode()`` → (paths, scores): the most probable path of each sequence, integer labels batch + (T,)
        with −1 past a sequence's length, and its log-weight max_z log p̃(z) (Viterbi, supplied by the factor
        that built the chain).  Without it the steps are independent and the path is each step's mode.
    """

    event_ndims = (1,)

    def __init__(self, marginals: np.ndarray, pair_counts: np.ndarray, log_normalizer: np.ndarray,
                 joint_entropy: np.ndarray, sampler=None, mode=None) -> None:
        self.marginals = np.asarray(marginals, dtype=float)
        self.pair_counts = np.asarray(pair_counts, dtype=float)
        self.log_normalizer = np.asarray(log_normalizer, dtype=float)
        self.joint_entropy = np.asarray(joint_entropy, dtype=float)
        self._sampler = sampler
        self._mode = mode

    @classmethod
    def independent(cls, marginals: np.ndarray) -> CategoricalChain:
        """The chain whose steps are independent with the given marginals (a starting point):
        pair counts Σ_t γ_{t−1} γ_tᵀ, entropy Σ_t H[γ_t], log-normaliser 0."""
        g = np.asarray(marginals, dtype=float)
        pairs = np.einsum("...tj,...tk->...jk", g[..., :-1, :], g[..., 1:, :])
        with np.errstate(divide="ignore", invalid="ignore"):
            h = -np.where(g > 0, g * np.log(g), 0.0).sum((-1, -2))
        return cls(g, pairs, np.zeros(g.shape[:-2]), h)

    @classmethod
    def concatenate(cls, parts: list[CategoricalChain], axis: int = 0) -> CategoricalChain:
        """The chains of several batches of sequences side by side along the batch axis ``axis`` (the chunks of a
        sharded fit, each q over its own sequences): marginals, pair counts, log Z and entropies concatenated;
        joint draws and Viterbi paths are each part's, concatenated (the draws of the parts in turn from one
        random stream)."""
        return cls(*(np.concatenate([getattr(p, a) for p in parts], axis=axis)
                    for a in ("marginals", "pair_counts", "log_normalizer", "joint_entropy")),
                  sampler=partial(_joined_draws, tuple(parts), axis), mode=partial(_joined_modes, tuple(parts), axis))

    @property
    def _steps(self) -> np.ndarray:
        return self.marginals

    def mean(self) -> np.ndarray:
        """The smoothed marginals q(z_t = k), shape batch + (T, K)."""
        return self.marginals

    def var(self) -> np.ndarray:
        """Variance of each step's one-hot vector, γ_t(1 − γ_t)."""
        return self.marginals * (1.0 - self.marginals)

    def expected_stats(self) -> tuple[np.ndarray]:
        """E[one-hot(z_t)] = γ_t, as for a Categorical per step."""
        return (self.marginals,)

    def _independent_draws(self, S: int, rng: np.random.Generator) -> np.ndarray:
        """Each step's label from its marginal (−1 at steps past a sequence's length); ``sample`` gives joint
        draws: integer labels of shape ``shape + batch_shape``."""
        g = self.marginals
        u = rng.random((S,) + g.shape[:-1] + (1,))
        x = (u > np.cumsum(g, -1)).sum(-1)
        return np.where(g.sum(-1) > 0, np.minimum(x, g.shape[-1] - 1), -1)

    def map_states(self) -> np.ndarray:
        """The most probable state of each step under its marginal (−1 past a sequence's length)."""
        lab = self.marginals.argmax(-1)
        return np.where(self.marginals.sum(-1) > 0, lab, -1)

    def viterbi(self, return_log_prob: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """The most probable joint path z* = argmax_z q(z) of each sequence (Viterbi), not the sequence of the
        steps' own modes (``map_states``), which may be a path q gives probability 0.

        Returns integer labels of shape batch + (T,), −1 past a sequence's length; with ``return_log_prob``
        also log q(z*) = max_z log p̃(z) − log Z per sequence."""
        if self._mode is None:  # independent steps: the joint mode is the steps' modes
            path = self.map_states()
            g = np.take_along_axis(self.marginals, np.maximum(path, 0)[..., None], -1)[..., 0]
            with np.errstate(divide="ignore"):
                logp = np.where(path >= 0, np.log(g), 0.0).sum(-1)
        else:
            path, score = self._mode()
            logp = score - self.log_normalizer
        return (path, logp) if return_log_prob else path

    def __repr__(self) -> str:
        return f"CategoricalChain(batch_shape={self.batch_shape}, K={self.marginals.shape[-1]})"


def _joined_draws(parts: tuple, axis: int, S: int, rng: np.random.Generator) -> np.ndarray:
    """Joint draws of every part's sequences, (S,) + the joined batch + (T,)."""
    return np.concatenate([p.sample(S, rng) for p in parts], axis=axis + 1)


def _joined_modes(parts: tuple, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Every part's Viterbi paths and their log-weights max_z log p̃(z) (= log q(z*) + log Z), joined."""
    found = [p.viterbi(return_log_prob=True) for p in parts]
    return (np.concatenate([f[0] for f in found], axis=axis),
            np.concatenate([f[1] + p.log_normalizer for f, p in zip(found, parts, strict=True)], axis=axis))
