"""The categorical Markov chain: a structured factor whose q over the whole chain is exact.

    p(z | π, A) = Π_n [ π(z_{n,1}) Π_{t=2}^{L_n} A(z_{n,t−1}, z_{n,t}) ]

with π a probability vector (a Dirichlet variable or a constant) and A a row-stochastic K×K matrix
(each row a Dirichlet variable, or a constant).  The factor's plates are the sequence plates; the
time plate of z and the "from" plate of A are consumed as event axes.

Unlike a mean-field factor, this one owns the posterior of z (``structured``): given the node
log-potentials φ_t(k) that every other factor sends to z (the emissions' per-state E[log f] through
the gates), q(z) ∝ exp(E[log p(z | π, A)] + Σ_t φ_t(z_t)) is found exactly by forward–backward
(MacKay 1997; Beal 2003, ch. 3).  Its expected statistics are the marginals γ_t, and the messages
up are the expected counts:

    to π:  γ_1 (per sequence);     to A:  Σ_t E[z_{t−1} z_tᵀ] (per sequence);
    E[log f] = γ_1·E[log π] + Σ_{jk} Σ_t ξ_t(j, k) E[log A_jk].

Its entropy follows from the normaliser: H[q] = log Z − Σ_t γ_t·φ_t − E[log p(z | π, A)].
"""

from __future__ import annotations

from functools import partial

import numpy as np

from distributions import Categorical, Dirichlet
from distributions.categorical_chain import CategoricalChain

from .base import FactorType, Moments
from .kernels.forward_backward import forward_backward, sample_chains
from .kernels.viterbi import viterbi

MARKOV_CHAIN = FactorType("MarkovChain", out=Categorical, initial=Dirichlet, transition=Dirichlet)


def _dot(w: np.ndarray, logp: np.ndarray, axes) -> np.ndarray:
    """Σ w·log p over ``axes`` with 0·(−∞) = 0 (a constant probability may be exactly 0)."""
    w, logp = np.broadcast_arrays(w, logp)
    return np.where(w > 0, w * np.where(np.isfinite(logp), logp, 0.0), 0.0).sum(axes) + np.where(
        (w > 0) & ~np.isfinite(logp), -np.inf, 0.0).sum(axes)


def _valid(T: int, lengths: np.ndarray) -> np.ndarray:
    """True at the steps that exist (t < L_n), shape lengths + (T, 1)."""
    return (np.arange(T) < np.asarray(lengths)[..., None])[..., None]


def _chain(m: Moments, p: dict) -> CategoricalChain:
    """The chain's current q; before it has one, the q with independent steps and the marginals in m["out"]
    (then the messages are the gradients of E[log f] under that mean-field q)."""
    q = p["state"].get("q")
    return chain_posterior(m, p, None) if q is None else q


def _parents(m: Moments) -> tuple[np.ndarray, np.ndarray]:
    """E[log π] (..., K) and E[log A] (..., K, K) in the factor's plate space."""
    return np.asarray(m["initial"][0]), np.asarray(m["transition"][0])


@MARKOV_CHAIN.rule("initial", "vmp")
def chain_to_initial(m: Moments, p: dict) -> tuple:
    return (_chain(m, p).marginals[..., 0, :],)


@MARKOV_CHAIN.rule("transition", "vmp")
def chain_to_transition(m: Moments, p: dict) -> tuple:
    return (_chain(m, p).pair_counts,)


@MARKOV_CHAIN.rule("out", "vmp")
def chain_to_out(m: Moments, p: dict) -> tuple:
    """The mean-field message to each step (what a factorised q(z_t) would receive): E[log π] at the
    first step plus E[log A]ᵀγ_{t−1} and E[log A]γ_{t+1} from the neighbours.  The chain's own update
    does not use it (its q is exact); it is the gradient of E[log f] in the marginals when the steps
    are independent."""
    valid = _valid(m["out"][0].shape[-2], p["lengths"])
    g = np.where(valid, m["out"][0], 0.0)
    lpi, la = _parents(m)
    out = np.zeros(g.shape)
    out[..., 0, :] += lpi
    out[..., 1:, :] += g[..., :-1, :] @ la
    out[..., :-1, :] += g[..., 1:, :] @ np.swapaxes(la, -1, -2)
    return (np.where(valid, out, 0.0),)


@MARKOV_CHAIN.evidence(kind="exact")
def chain_evidence(m: Moments, p: dict) -> np.ndarray:
    q = _chain(m, p)
    lpi, la = _parents(m)
    return _dot(q.marginals[..., 0, :], lpi, -1) + _dot(q.pair_counts, la, (-2, -1))


def chain_posterior(m: Moments, p: dict, potentials: np.ndarray | None) -> CategoricalChain:
    """q(z) given the node log-potentials (batch + (T, K)), by forward–backward over all sequences.

    With ``potentials=None`` returns the starting q: independent steps with the marginals in
    ``m["out"]`` (cut to each sequence's length)."""
    lengths = p["lengths"]
    if potentials is None:
        g = np.array(m["out"][0], dtype=float)
        g = np.where(_valid(g.shape[-2], lengths), g, 0.0)
        return CategoricalChain.independent(g)
    phi = np.asarray(potentials, dtype=float)
    batch, (T, K) = phi.shape[:-2], phi.shape[-2:]
    lpi, la = _parents(m)  # π and A are shared by the sequences (no plates of their own)
    flat = phi.reshape((-1, T, K))
    gamma, xi, logz = forward_backward(flat, lpi.reshape(-1, K)[0], la.reshape(-1, K, K)[0],
                                       np.broadcast_to(lengths, batch).reshape(-1))
    gamma, xi, logz = gamma.reshape(batch + (T, K)), xi.reshape(batch + (K, K)), logz.reshape(batch)
    if not np.all(np.isfinite(logz)):
        bad = int(np.argmin(np.isfinite(logz).reshape(-1)))
        raise FloatingPointError(f"sequence {bad} has no state path of positive probability (log Z = {logz.flat[bad]})")
    prior = _dot(gamma[..., 0, :], lpi, -1) + _dot(xi, la, (-2, -1))
    entropy = logz - np.where(gamma > 0, gamma * phi, 0.0).sum((-2, -1)) - prior
    lens = np.broadcast_to(lengths, batch).reshape(-1)
    lpi0, la0 = lpi.reshape(-1, K)[0].copy(), la.reshape(-1, K, K)[0].copy()

    sampler = partial(_draw_chains, flat, lpi0, la0, lens, batch, T)  # a partial pickles; a closure does not
    mode = partial(_mode_paths, flat, lpi0, la0, lens, batch, T)
    return CategoricalChain(gamma, xi, logz, np.maximum(entropy, 0.0), sampler=sampler, mode=mode)


def _draw_chains(flat, lpi0, la0, lens, batch, T, draws: int, rng: np.random.Generator) -> np.ndarray:
    """Joint draws of the state paths, (draws, *batch, T)."""
    return sample_chains(flat, lpi0, la0, lens, draws, rng).reshape((draws, *batch, T))


def _mode_paths(flat, lpi0, la0, lens, batch, T) -> tuple[np.ndarray, np.ndarray]:
    """The Viterbi paths of q (batch + (T,)) and their log-weights (batch): argmax_z of E[log π](z_1) +
    Σ_t E[log A](z_{t−1}, z_t) + Σ_t φ_t(z_t), the chain q was built from."""
    path, score = viterbi(flat, lpi0, la0, lens)
    return path.reshape((*batch, T)), score.reshape(batch)


MARKOV_CHAIN.structured = chain_posterior
