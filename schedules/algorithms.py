"""Algorithm settings objects: ``fg.VMP()``."""

from __future__ import annotations

from dataclasses import dataclass


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
        if not 0.0 <= self.damping < 1.0:
            raise ValueError(f"VMP: damping must lie in [0, 1), got {self.damping!r}")
