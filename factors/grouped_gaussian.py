"""Fused grouped Gaussian likelihood Π_n N(y_n | a_{g(n)}, τ⁻¹) with observed y and integer labels g.

The engine substitutes this factor for a Gaussian factor whose mean is an indexed view ``a[g]`` of a
Gaussian plated over the groups and whose output is fully observed (the precision a constant, an
unplated Gamma or ``tau[g]`` with the same labels).  The rows then enter only through per-group sums
computed once, c_g = #{n : g(n) = g}, s_g = Σ_{g(n)=g} y_n and q_g = Σ_{g(n)=g} y_n², so an iteration costs
O(G) whatever N.  The factor lives on the group plate; with Q_g = q_g − 2E[a_g]s_g + c_g E[a_g²]
(= Σ_{g(n)=g} E[(y_n − a_g)²]):

    E[log f_g] = (c_g/2)(E[log τ] − log 2π) − ½E[τ] Q_g,
    to a_g: (E[τ]s_g, −½E[τ]c_g),   to τ: (−½Q_g, c_g/2).
"""

from __future__ import annotations

import numpy as np

from distributions import Gamma, Gaussian

from .base import FactorType, Moments
from .linear_gaussian import sums_evidence, sums_to_precision

GROUPED_GAUSSIAN = FactorType("GroupedGaussian", mean=Gaussian, precision=Gamma)


def _q(m: Moments, p: dict) -> np.ndarray:
    ea, ea2 = m["mean"]
    return p["sumsq"] - 2.0 * ea * p["sum"] + p["count"] * ea2


@GROUPED_GAUSSIAN.rule("mean", "vmp")
def grouped_to_mean(m: Moments, p: dict) -> tuple:
    tau = m["precision"][0]
    return (tau * p["sum"], -0.5 * tau * p["count"])


@GROUPED_GAUSSIAN.rule("precision", "vmp")
def grouped_to_precision(m: Moments, p: dict) -> tuple:
    return sums_to_precision(_q(m, p), p["count"])


@GROUPED_GAUSSIAN.evidence(kind="exact")
def grouped_evidence(m: Moments, p: dict) -> np.ndarray:
    return sums_evidence(m["precision"], _q(m, p), p["count"])
