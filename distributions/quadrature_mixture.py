"""A mixture over quadrature nodes: the marginal q(x) = Σ_g w_g q_g(x) of a fit conditioned on each node."""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from .base import Distribution, RngLike, Shape, as_rng, as_shape, describe


class QuadratureMixture(Distribution):
    r"""q(x) = Σ_g w_g q_g(x): components of one shape, one per node of a quadrature over another variable.

    .. math::

        E[x] = \sum_g w_g E_g[x],\qquad
        \mathrm{Var}[x] = \sum_g w_g\bigl(\mathrm{Var}_g[x] + E_g[x]^2\bigr) - E[x]^2,\qquad
        \mathrm{Cov}[x] = \sum_g w_g\bigl(\mathrm{Cov}_g[x] + E_g[x]E_g[x]^\top\bigr) - E[x]E[x]^\top,\qquad
        \log q(x) = \operatorname{logsumexp}_g\bigl(\log w_g + \log q_g(x)\bigr).

    The weights are shared by every element of the batch (one node stands for the whole batch), so draws
    that must stay joint across variables pick the node first (``sample_at``).

    Parameters
    ----------
    weights : array_like, shape (G,)
        Node weights w_g ≥ 0 (normalised here).
    components : sequence of distributions
        q_g, all with the same batch and event shapes.
    """

    def __init__(self, weights, components) -> None:
        w = np.asarray(weights, dtype=float)
        if w.ndim != 1 or len(components) != w.size or w.size == 0 or np.any(w < 0) or not w.sum() > 0:
            raise ValueError(f"QuadratureMixture: need one non-negative weight per component, got {w.size} weights "
                             f"for {len(components)} components")
        shapes = {(c.batch_shape, c.event_shape) for c in components}
        if len(shapes) != 1:
            raise ValueError(f"QuadratureMixture: components differ in shape: {sorted(shapes)}")
        self._w = w / w.sum()
        self._q = list(components)

    @property
    def weights(self) -> np.ndarray:
        return self._w

    @property
    def components(self) -> list:
        return list(self._q)

    @property
    def batch_shape(self) -> Shape:
        return self._q[0].batch_shape

    @property
    def event_shape(self) -> Shape:
        return self._q[0].event_shape

    def _avg(self, values) -> np.ndarray:
        return np.tensordot(self._w, np.stack([np.asarray(v, float) for v in values]), axes=1)

    def mean(self) -> np.ndarray:
        return self._avg(q.mean() for q in self._q)

    def var(self) -> np.ndarray:
        m = self.mean()
        return np.maximum(self._avg(np.asarray(q.var()) + np.asarray(q.mean()) ** 2 for q in self._q) - m * m, 0.0)

    def cov(self) -> np.ndarray:
        r"""Cov[x] = Σ_g w_g (Cov_g[x] + E_g[x] E_g[x]ᵀ) − E[x] E[x]ᵀ, for components with a ``cov`` (vectors)."""
        if not all(hasattr(q, "cov") for q in self._q):
            raise AttributeError(f"{type(self._q[0]).__name__} components have no covariance")
        m = self.mean()
        second = self._avg(np.asarray(q.cov()) + np.einsum("...i,...j->...ij", q.mean(), q.mean()) for q in self._q)
        return second - np.einsum("...i,...j->...ij", m, m)

    def logpdf(self, x) -> np.ndarray:
        parts = np.stack([np.log(w) + np.asarray(q.logpdf(x)) if w > 0 else np.full(np.shape(q.logpdf(x)), -np.inf)
                          for w, q in zip(self._w, self._q, strict=True)])
        return logsumexp(parts, axis=0)

    def cdf(self, x) -> np.ndarray:
        """Σ_g w_g F_g(x) (components with a ``cdf``)."""
        if not hasattr(self._q[0], "cdf"):
            raise AttributeError(f"QuadratureMixture: its components ({type(self._q[0]).__name__}) have no cdf")
        return self._avg(q.cdf(x) for q in self._q)

    def sample_at(self, nodes: np.ndarray, rng: RngLike = None) -> np.ndarray:
        """One draw per entry of ``nodes`` (node indices), each from its node's component."""
        rng = as_rng(rng)
        nodes = np.asarray(nodes)
        out = np.empty(nodes.shape + self.batch_shape + self.event_shape)
        for g in np.unique(nodes):  # one vectorised draw per node used (G nodes, not one per draw)
            hit = nodes == g
            out[hit] = np.asarray(self._q[g].sample(int(hit.sum()), rng))
        return out

    def sample(self, shape: int | Shape = (), rng: RngLike = None) -> np.ndarray:
        rng = as_rng(rng)
        size = as_shape(shape)
        nodes = rng.choice(self._w.size, size=size, p=self._w)
        return self.sample_at(nodes, rng)

    #: draws and seed of ``entropy``'s Monte Carlo estimate (fixed, so it is a function of the mixture)
    ENTROPY_SAMPLES = 20_000
    ENTROPY_SEED = 0

    def entropy_estimate(self, n: int = 10_000, rng: RngLike = None) -> tuple[np.ndarray, np.ndarray]:
        """H[q] = −E_q[log q(x)] by n draws, and its standard error, batch-shaped (per element: the
        components' ``logpdf`` is elementwise).  A mixture's entropy has no closed form."""
        lp = -np.asarray(self.logpdf(self.sample(n, rng)), dtype=float)
        return lp.mean(0), lp.std(0) / np.sqrt(n)

    def entropy(self) -> np.ndarray:
        """``entropy_estimate`` with ``ENTROPY_SAMPLES`` draws from the fixed seed ``ENTROPY_SEED``."""
        return self.entropy_estimate(self.ENTROPY_SAMPLES, self.ENTROPY_SEED)[0]

    def __repr__(self) -> str:
        return describe(self, ("mean", "std"))
