"""The most probable state paths of a fit's hidden Markov chains: ``result.viterbi(name)``.

For a chain ``z = fg.markov_chain(...)`` the posterior q(z) is the exact chain posterior given the messages
into z (the per-step log evidence φ_t of its emissions, E[log π] and E[log A]):

    q(z) ∝ exp(E[log π](z_1) + Σ_{t≥2} E[log A](z_{t−1}, z_t) + Σ_t φ_t(z_t)),

and its most probable path z* = argmax_z q(z) is found by Viterbi on those same terms
(``factors.kernels.viterbi``), O(T·K²) per sequence.  With π, A and the emission parameters fixed, q(z) is
p(z | y) and z* is the classical Viterbi path.  The path maximises the joint q; the sequence of each step's
most probable state (``q.map_states()``) need not be a path of positive probability.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distributions.categorical_chain import CategoricalChain
from factorgraph.graph.nodes import ModelError


def viterbi(result: Any, name: str, return_log_prob: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """The most probable joint path of the Markov chain ``name`` under q, per sequence.

    Returns integer states of shape ``(*sequence plates, T)``, −1 past a sequence's length; with
    ``return_log_prob`` also log q(z*) per sequence (0 when q is certain of its path)."""
    if not isinstance(name, str):
        raise ModelError(f"viterbi: name must be the name of a fg.markov_chain variable, got {name!r}")
    q = result.posterior(name)
    if not isinstance(q, CategoricalChain):
        raise ModelError(f"viterbi: {name!r} is not a hidden Markov chain (fg.markov_chain); its posterior is "
                         f"{type(q).__name__}, whose most probable value is its mode")
    return q.viterbi(return_log_prob)


__all__ = ["viterbi"]
