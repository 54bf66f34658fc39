r"""A prior on a scale σ that enters Gaussian terms linearly (θ = μ + σ·η): a factor on σ itself.

A variable made by ``fg.half_cauchy`` (and kin) is normally a Gamma over the precision σ⁻² (the ``sd=`` of
Gaussian terms; :mod:`.scale_priors`).  Used as a factor of a product instead — the non-centred
parametrisation θ_j = μ + τ η_j — it needs E[σ] and E[σ²], and the Gaussian terms send it Gaussian
messages (η₁, η₂) on (σ, σ²).  Its posterior is then the prior tilted by those messages,

.. math:: q(\sigma) \propto h(\sigma)\,\exp(\eta_1\sigma + \eta_2\sigma^2),\qquad \sigma > 0,

(:class:`distributions.TiltedScale`: the prior is q's base measure), which is the exact mean-field
coordinate optimum, so the factor sends nothing (the message (0, 0)) under VMP and NCVMP alike.  Its
evidence term E_q[log h] is carried by the variable: ``TiltedScale.elbo_term`` = E_q[log h] + H[q] =
κ(η) − ηᵀE[u], both exact by quadrature, is what the ELBO adds for the variable, and this factor adds 0.
"""

from __future__ import annotations

import numpy as np

from distributions import Gaussian

from .base import FactorType, Moments

SCALE_SIGMA = FactorType("ScaleSigma", conjugate=True, out=Gaussian)


@SCALE_SIGMA.rule("out", "vmp")
def scale_sigma_message(m: Moments, p: dict) -> tuple:
    """(0, 0): the prior is the base measure of q(σ), not a message."""
    z = np.zeros(np.shape(p["base"]["p0"]))
    return (z, z)


@SCALE_SIGMA.evidence(kind="exact")
def scale_sigma_evidence(m: Moments, p: dict) -> np.ndarray:
    """0: E_q[log h(σ)] is counted with q(σ)'s entropy (``TiltedScale.elbo_term``)."""
    return np.zeros(np.shape(p["base"]["p0"]))
