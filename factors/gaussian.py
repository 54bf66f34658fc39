"""Scalar Gaussian factor N(out | mean, precision⁻¹) with constant or random mean and precision.

E[log f] = ½(E[log τ] − log 2π) − ½E[τ]·E[(x − μ)²],  E[(x − μ)²] = E[x²] − 2E[x]E[μ] + E[μ²].
Messages (natural parameters): to x and to μ: (E[τ]E[·], −½E[τ]); to τ (Gamma, stats (τ, log τ)):
(−½E[(x − μ)²], ½).

When the data and the mean sit on different plates (a mixture: x_n on the rows, μ_k on the components)
the products E[x]E[μ], E[τ]E[x] and E[τ]E[x²] are kept factored (``factors.contract.plate_product``), so
rows × components arrays are never formed: the engine's sums over rows, weighted by q(z), are matrix
products.  Otherwise each expression is one numba ufunc pass (``kernels.elementwise``).
"""

from __future__ import annotations

import numpy as np

from distributions import Gamma, Gaussian

from .base import LOG_2PI, FactorType, Moments
from .contract import disjoint, lazy_sum, plate_product
from .is_positive import ep_site_rule
from .kernels.elementwise import gaussian_log_density, gaussian_precision_message, gaussian_sq_dev
from .kernels.ep_sites import SITE_GAUSS

GAUSSIAN = FactorType("Gaussian", out=Gaussian, mean=Gaussian, precision=Gamma)


def _sq_dev(m: Moments) -> np.ndarray:
    x, mu = m["out"], m["mean"]
    return gaussian_sq_dev(x[1], x[0], mu[0], mu[1])


@GAUSSIAN.rule("out", "vmp")
def gaussian_to_out(m: Moments, p: dict) -> tuple:
    tau = m["precision"][0]
    return (plate_product(tau, m["mean"][0]), -0.5 * tau)


@GAUSSIAN.rule("mean", "vmp")
def gaussian_to_mean(m: Moments, p: dict) -> tuple:
    tau = m["precision"][0]
    return (plate_product(tau, m["out"][0]), -0.5 * tau)


@GAUSSIAN.rule("precision", "vmp")
def gaussian_to_precision(m: Moments, p: dict) -> tuple:
    x, mu = m["out"], m["mean"]
    if disjoint(x[0], mu[0]):  # −½E[x²] + E[x]E[μ] − ½E[μ²], the cross term factored
        d = lazy_sum(plate_product(x[0], mu[0]), -0.5 * x[1], -0.5 * mu[1])
        shape = np.broadcast_shapes(np.shape(x[0]), np.shape(mu[0]))
    else:
        d = gaussian_precision_message(x[1], x[0], mu[0], mu[1])
        shape = d.shape
    return (d, np.full((1,) * len(shape), 0.5))  # the same ½ for every instance (a singleton axis)


@GAUSSIAN.evidence(kind="exact")
def gaussian_evidence(m: Moments, p: dict) -> np.ndarray:
    tau, x, mu = m["precision"], m["out"], m["mean"]
    if disjoint(x[0], mu[0]) or disjoint(x[0], tau[0]):
        # ½(E[log τ] − log 2π) − ½E[τ]E[μ²] + E[τ]E[μ]·E[x] − ½E[τ]·E[x²], the products with x factored
        t0 = tau[0]
        return lazy_sum(plate_product(t0 * mu[0], x[0]), plate_product(-0.5 * t0, x[1]),
                        0.5 * (tau[1] - LOG_2PI) - 0.5 * t0 * mu[1])
    return gaussian_log_density(tau[0], tau[1], x[1], x[0], mu[0], mu[1])


@GAUSSIAN.point("mean")
def gaussian_point(u: np.ndarray, m: Moments, p: dict, order: int = 2) -> tuple:
    """E_q(τ)[log N(x | u, τ⁻¹)] pointwise in the mean u: ½(E[log τ] − log 2π) − ½E[τ](E[x²] − 2E[x]u + u²)."""
    x, tau = m["out"], m["precision"]
    val = 0.5 * (tau[1] - LOG_2PI) - 0.5 * tau[0] * (x[1] - 2.0 * x[0] * u + u * u)
    return val, tau[0] * (x[0] - u), -tau[0] * np.ones_like(u)


gaussian_point.quadratic = True  # log f is quadratic in u: handlers take its expectation in closed form


def _ep_site(m: Moments, p: dict) -> tuple:
    """EP: the factor is a Gaussian site N(d; 0, 1/τ) on d = out − mean (known τ): ``m["mean"]`` holds d's cavity."""
    return SITE_GAUSS, m["precision"][0], 0.0


gaussian_ep = ep_site_rule(GAUSSIAN, "mean", _ep_site)
