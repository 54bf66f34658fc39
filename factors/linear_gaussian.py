"""Fused linear-Gaussian likelihood Π_n N(y_n | x_nᵀw, τ⁻¹) with observed X and y.

The engine substitutes this factor for a Gaussian factor on ``inner(X, w)`` whose output is fully
observed, so the data enter only through the cached products XᵀX, Xᵀy, yᵀy and an iteration
costs O(D³) whatever N.  With E[SSE] = yᵀy − 2E[w]ᵀXᵀy + tr(XᵀX E[wwᵀ]):

    E[log f] = (N/2)(E[log τ] − log 2π) − ½E[τ] E[SSE],
    to w: (E[τ]Xᵀy, −½E[τ]XᵀX),   to τ: (−½E[SSE], N/2).
"""

from __future__ import annotations

import numpy as np

from distributions import Gamma, MvGaussian

from .base import LOG_2PI, FactorType, Moments

LINEAR_GAUSSIAN = FactorType("LinearGaussian", w=MvGaussian, precision=Gamma)


def _sse(m: Moments, p: dict) -> np.ndarray:
    ew, eww = m["w"]
    return p["yty"] - 2.0 * (ew * p["xty"]).sum(-1) + np.einsum("ij,...ji->...", p["xtx"], eww)


@LINEAR_GAUSSIAN.rule("w", "vmp")
def lg_to_w(m: Moments, p: dict) -> tuple:
    tau = m["precision"][0]
    return (tau[..., None] * p["xty"], -0.5 * tau[..., None, None] * p["xtx"])


@LINEAR_GAUSSIAN.rule("precision", "vmp")
def lg_to_precision(m: Moments, p: dict) -> tuple:
    s = _sse(m, p)
    return (-0.5 * s, np.full_like(s, 0.5 * p["n"]))


@LINEAR_GAUSSIAN.evidence(kind="exact")
def lg_evidence(m: Moments, p: dict) -> np.ndarray:
    logt = m["precision"][1]
    return 0.5 * p["n"] * (logt - LOG_2PI) - 0.5 * m["precision"][0] * _sse(m, p)
