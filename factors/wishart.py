"""Wishart prior factor W(out | ν, V) with constant degrees of freedom ν and inverse scale V.

With u(Λ) = (Λ, log|Λ|):

    E[log f] = ((ν − D − 1)/2) E[log|Λ|] − ½ tr(V E[Λ]) + (ν/2) log|V| − (νD/2) log 2 − log Γ_D(ν/2).

Message to out: (−½V, (ν − D − 1)/2).  ``p["scale"]`` is V, of shape (…, D, D) broadcasting
against the factor's plates; ``p["dof"]`` broadcasts likewise; ``p["log_norm"]`` is the constant
(ν/2) log|V| − (νD/2) log 2 − log Γ_D(ν/2).
"""

from __future__ import annotations

import numpy as np

from distributions import Wishart
from distributions.wishart import log_multigamma

from .base import FactorType, Moments

WISHART = FactorType("Wishart", out=Wishart)


def log_norm(dof: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """(ν/2) log|V| − (νD/2) log 2 − log Γ_D(ν/2): the Wishart's log normaliser."""
    d = scale.shape[-1]
    _, logdet = np.linalg.slogdet(scale)
    return 0.5 * dof * logdet - 0.5 * dof * d * np.log(2.0) - log_multigamma(0.5 * dof, d)


@WISHART.rule("out", "vmp")
def wishart_to_out(m: Moments, p: dict) -> tuple:
    v, nu = p["scale"], np.asarray(p["dof"], dtype=float)
    d = v.shape[-1]
    batch = np.broadcast_shapes(v.shape[:-2], nu.shape)
    return (np.broadcast_to(-0.5 * v, batch + (d, d)), np.broadcast_to(0.5 * (nu - d - 1.0), batch))


@WISHART.evidence(kind="exact")
def wishart_evidence(m: Moments, p: dict) -> np.ndarray:
    lam, logdet = m["out"]
    v, nu = p["scale"], p["dof"]
    d = v.shape[-1]
    return 0.5 * (nu - d - 1.0) * logdet - 0.5 * np.einsum("...ij,...ji->...", v, lam) + log_norm(nu, v)
