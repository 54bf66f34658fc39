r"""The interface of the univariate bases q_v(v | θ) of an affine independent density (docs/maths.md §9).

An ``AffineIndependent`` q(w) is w = Av + b with independent components v_d ~ q_v(· | θ_d); a base family
supplies, per component, the density and its derivatives in v and θ, the moments E v, Var v and the entropy
H[q_v] with their θ-derivatives, a tail half-width for the lattice, and ``grid``: log q_v at the lattice nodes
v = E v + kδ (with ∂/∂δ and ∂/∂θ for the gradients of the lattice expectations).  The families themselves
are in ``distributions.affine_bases``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from .base import Shape


class BaseDensity(ABC):
    r"""A univariate base family q_v(v | θ) with at most one shape parameter θ per component.

    Every method is vectorised: ``theta`` broadcasts against ``v``.  The optimiser works with an
    unconstrained ρ (``to_free`` / ``from_free``, with dθ/dρ from ``dtheta_dfree``).
    """

    name: ClassVar[str] = ""
    n_params: ClassVar[int] = 0  # 0: no shape parameter (θ is ignored), 1: one per component
    gaussian_theta: ClassVar[float | None] = None  # θ at which the base is N(0, 1), if any
    default_theta: ClassVar[float] = 0.0  # the default of ``AffineIndependent`` (the Gaussian member if any)
    start_theta: ClassVar[float] = 0.0  # where an optimiser starts θ (see ``SkewNormalBase``)

    # --- parameter transforms ------------------------------------------------------------------
    def check(self, theta: np.ndarray) -> None:
        """Raise ValueError if θ is outside the family's parameter space (here: any θ; a family with a
        constrained shape parameter overrides this)."""
        return None

    def to_free(self, theta: np.ndarray) -> np.ndarray:
        return np.asarray(theta, dtype=float)

    def from_free(self, rho: np.ndarray) -> np.ndarray:
        return np.asarray(rho, dtype=float)

    def dtheta_dfree(self, rho: np.ndarray) -> np.ndarray:
        return np.ones_like(np.asarray(rho, dtype=float))

    #: box on the free parameter ρ for an optimiser (keeps the lattice and special functions sane)
    free_bounds: ClassVar[tuple[float | None, float | None]] = (None, None)

    # --- density -------------------------------------------------------------------------------
    @abstractmethod
    def logpdf(self, v: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """log q_v(v | θ)."""

    @abstractmethod
    def score(self, v: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """∂ log q_v(v | θ)/∂v (0 at a cusp of a symmetric base)."""

    def dlogpdf(self, v: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """∂ log q_v(v | θ)/∂θ (0 without a shape parameter)."""
        return np.zeros(np.broadcast_shapes(np.shape(v), np.shape(theta)))

    @abstractmethod
    def sample(self, theta: np.ndarray, shape: Shape, rng: np.random.Generator) -> np.ndarray:
        """Draws of v of the given shape."""

    # --- moments and entropy -------------------------------------------------------------------
    def mean(self, theta: np.ndarray) -> np.ndarray:
        return np.zeros(np.shape(theta))

    def dmean(self, theta: np.ndarray) -> np.ndarray:
        return np.zeros(np.shape(theta))

    def var(self, theta: np.ndarray) -> np.ndarray:
        return np.ones(np.shape(theta))

    def dvar(self, theta: np.ndarray) -> np.ndarray:
        return np.zeros(np.shape(theta))

    @abstractmethod
    def entropy(self, theta: np.ndarray) -> np.ndarray:
        """H[q_v(· | θ)] per component."""

    def dentropy(self, theta: np.ndarray) -> np.ndarray:
        return np.zeros(np.shape(theta))

    def half_width(self, theta: np.ndarray) -> np.ndarray:
        """A half-width (in units of v's standard deviation) outside which the mass is negligible (≲ 1e-10)."""
        return np.full(np.shape(theta), 6.5)

    def grid(self, k: np.ndarray, delta: np.ndarray, theta: np.ndarray, scores: int = 0):
        r"""log q_v at the nodes v = E v + kδ of a uniform grid, and optionally its derivatives.

        Parameters
        ----------
        k : (K,)
            Integer offsets.
        delta : (..., D)
            Signed spacings in v (δ = Δ/α for a component u = α(v − E v) on a lattice of spacing Δ).
        theta : (D,)
            Base parameters.
        scores : int
            0: log q only; 1: also ∂ log q/∂δ = k·score(v); 2: also ∂ log q(v_k)/∂θ at fixed δ (the nodes
            move with E v(θ)).

        Returns
        -------
        lq, and with ``scores`` g_delta, g_theta (None unless ``scores`` = 2), each (..., D, K).
        """
        th = np.asarray(theta, dtype=float)[:, None]
        v = self.mean(theta)[:, None] + np.asarray(delta, dtype=float)[..., None] * k
        lq = self.logpdf(v, th)
        if not scores:
            return lq
        sc = self.score(v, th)
        g_theta = self.dlogpdf(v, th) + sc * self.dmean(theta)[:, None] if scores > 1 else None
        return lq, sc * k, g_theta

    def cusp_correction(self, theta: np.ndarray, delta: np.ndarray) -> tuple[np.ndarray, ...] | None:
        """(κ, ∂κ/∂θ, ∂κ/∂log δ) of the centre-node log-weight correction for a density with a cusp at its
        mean (see ``GenNormalBase``) at v-spacings δ; None for a smooth base."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
