"""Algorithm settings objects: ``fg.VMP()``."""

from __future__ import annotations

from dataclasses import dataclass

from factorgraph.nodes import ModelError


@dataclass(frozen=True)
class VMP:
    """Variational message passing (Winn & Bishop 2005): coordinate ascent on the ELBO.

    Parameters
    ----------
    damping
        Global damping α ∈ [0, 1) of factor messages, η_sent = (1 − α)η_new + αη_previous
        (per-factor values may be given to ``fg.infer(damping={...})``).  Conjugate VMP needs none.
    """

    damping: float = 0.0
    name = "vmp"
    monotone = True

    def __post_init__(self) -> None:
        if not (isinstance(self.damping, int | float) and 0.0 <= self.damping < 1.0):
            raise ModelError(f"VMP: damping must lie in [0, 1), got {self.damping!r}")


@dataclass(frozen=True)
class NCVMP:
    """Non-conjugate variational message passing (Knowles & Minka 2011).

    A non-conjugate factor sends φ = C(θ)⁻¹ ∂S/∂θ, the gradient of S = E_q[log f] with respect to
    the target's mean parameters; a conjugate factor's message is its VMP message (Theorem 2).
    Fixed points are stationary points of the ELBO, but an update may lower it: ``damping``
    (η_sent = (1 − α)η_new + αη_previous) leaves the fixed points unchanged and usually restores
    convergence, and ``backtracking=True`` undoes any sweep that lowers the ELBO and raises the
    damping of the non-conjugate factors (α ← (1 + α)/2) until it does not, so the ELBO never
    decreases (the result says how far damping was raised).

    Parameters
    ----------
    damping
        Global damping α ∈ [0, 1) (per-factor values go to ``fg.infer(damping={...})``).
    backtracking
        Enforce a non-decreasing ELBO as described above.
    """

    damping: float = 0.0
    backtracking: bool = False
    name = "ncvmp"
    monotone = False

    def __post_init__(self) -> None:
        if not (isinstance(self.damping, int | float) and 0.0 <= self.damping < 1.0):
            raise ModelError(f"NCVMP: damping must lie in [0, 1), got {self.damping!r}")
