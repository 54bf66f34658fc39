"""Gamma factor Gam(out | shape a, rate b) with a constant shape and a constant or random rate.

E[log f] = a E[log b] − log Γ(a) + (a − 1)E[log x] − E[b]E[x].
Messages in the Gamma stats (·, log ·): to x: (−E[b], a − 1); to b: (−E[x], a).
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln

from distributions import Gamma

from .base import FactorType, Moments
from .contract import lazy_sum, plate_product

GAMMA = FactorType("Gamma", out=Gamma, rate=Gamma)


@GAMMA.rule("out", "vmp")
def gamma_to_out(m: Moments, p: dict) -> tuple:
    a = p["shape"]
    b = m["rate"][0]
    return (-b, np.asarray(a - 1.0, dtype=float))  # not broadcast: a singleton axis stands for a repeated value


@GAMMA.rule("rate", "vmp")
def gamma_to_rate(m: Moments, p: dict) -> tuple:
    a = p["shape"]
    return (-m["out"][0], np.asarray(a, dtype=float))  # not broadcast: a singleton axis stands for a repeated value


@GAMMA.evidence(kind="exact")
def gamma_evidence(m: Moments, p: dict) -> np.ndarray:
    a = p["shape"]
    x, b = m["out"], m["rate"]
    # the products of a rate and the data kept factored when a gate puts them on different plates
    return lazy_sum(plate_product(-b[0], x[0]), plate_product(a, b[1]), (a - 1.0) * x[1] - gammaln(a))
