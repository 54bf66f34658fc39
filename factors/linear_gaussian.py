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


def sums_to_precision(sse: np.ndarray, n: np.ndarray | float) -> tuple:
    """The message to τ of n Gaussian terms with expected squared error E[SSE]: (−½E[SSE], n/2).  Shared by the
    fused factors (this one, grouped_gaussian, grouped_linear_gaussian)."""
    return (-0.5 * sse, np.broadcast_to(0.5 * np.asarray(n, dtype=float), np.shape(sse)))


def sums_evidence(tau: tuple, sse: np.ndarray, n: np.ndarray | float) -> np.ndarray:
    """E[log f] of n Gaussian terms: (n/2)(E[log τ] − log 2π) − ½E[τ]E[SSE], τ's statistics (E[τ], E[log τ])."""
    return 0.5 * n * (tau[1] - LOG_2PI) - 0.5 * tau[0] * sse


@LINEAR_GAUSSIAN.rule("precision", "vmp")
def lg_to_precision(m: Moments, p: dict) -> tuple:
    return sums_to_precision(_sse(m, p), p["n"])


@LINEAR_GAUSSIAN.evidence(kind="exact")
def lg_evidence(m: Moments, p: dict) -> np.ndarray:
    return sums_evidence(m["precision"], _sse(m, p), p["n"])
