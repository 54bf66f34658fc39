"""Forward samplers of chains: hidden Markov label sequences and linear-Gaussian state sequences.

* ``MarkovChain``: z_1 ~ π, z_t | z_{t−1} ~ A[z_{t−1}], one (π, A) per draw; label −1 past a sequence's length.
* ``GaussianMarkovChain`` (and its diagonal-noise variant): x_1 ~ N(m₀, P₀⁻¹), x_t | x_{t−1} ~ N(A x_{t−1}, Q⁻¹),
  one (m₀, P₀, A, Q) per draw; 0 past a sequence's length.
"""

from __future__ import annotations

import numpy as np

from factorgraph.graph.nodes import FactorNode, Node, Plate, Variable
from factorgraph.posterior.samplers.forward import Forward, sampler
from factors.kernels.forward_backward import forward_sample_chains
from factors.kernels.kalman import forward_sample


@sampler("MarkovChain")
def _markov_chain(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    """z_1 ~ π, z_t ~ A[z_{t−1}] with one (π, A) per draw; labels −1 past a sequence's length."""
    K = v.event_shape[0]
    pi, A = f.edges["initial"], f.edges["transition"]
    pi = s.value(pi).reshape(s.S, K) if isinstance(pi, Node) else np.broadcast_to(np.asarray(pi, float), (s.S, K))
    A = (s.value(A).reshape(s.S, K, K) if isinstance(A, Node)
         else np.broadcast_to(np.asarray(A, float), (s.S, K, K)))
    lengths = np.asarray(f.params["lengths"]).reshape(-1)
    z = forward_sample_chains(pi, A, lengths, full[-1], s.rng)  # (S, sequences, T)
    s.put(v, z.reshape(full), full)


@sampler("GaussianMarkovChain", "GaussianMarkovChainDiag")
def _gaussian_markov_chain(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...],
                           full: tuple[int, ...]) -> None:
    """x_1 ~ N(m₀, P₀⁻¹), x_t ~ N(A x_{t−1}, Q⁻¹) with one (m₀, P₀, A, Q) per draw; 0 past a sequence's length."""
    D = v.event_shape[0]

    def per_draw(arg, shape):
        if isinstance(arg, Node):
            return np.asarray(s.value(arg), float).reshape((s.S, *shape)) if arg.family.__name__ != "Gamma" else \
                np.asarray(s.value(arg), float).reshape(s.S, -1)
        return np.broadcast_to(np.asarray(arg, float), (s.S, *shape))

    e = f.edges
    m0, P0, A = per_draw(e["initial_mean"], (D,)), per_draw(e["initial_precision"], (D, D)), per_draw(
        e["transition"], (D, D))
    Q = per_draw(e["noise_precision"], (D, D))
    if Q.ndim == 2:  # Gamma precisions: τ per dimension, or one τ for all (a draw τ = 0 gives an infinite state)
        with np.errstate(divide="ignore"):
            LQ = np.broadcast_to(1.0 / np.sqrt(Q), (s.S, D))[:, :, None] * np.eye(D)
    else:
        LQ = np.linalg.cholesky(np.linalg.inv(Q))
    L0 = np.linalg.cholesky(np.linalg.inv(P0))
    lengths = np.asarray(f.params["lengths"], dtype=np.int64).reshape(-1)
    z = s.rng.standard_normal((s.S, lengths.size, full[-1], D))
    x = forward_sample(np.ascontiguousarray(m0), np.ascontiguousarray(L0), np.ascontiguousarray(A),
                       np.ascontiguousarray(LQ), lengths, z)
    s.put(v, x.reshape(full + (D,)), full)
