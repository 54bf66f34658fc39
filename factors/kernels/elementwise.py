"""Fused elementwise arithmetic of the Gaussian factor and of sums, as numba ufuncs.

The generic (not fused) Gaussian path evaluates a few polynomial expressions in the moments once per
element of a plate per sweep.  Written in numpy, each operator makes a temporary and a pass over memory;
as one ufunc each expression is a single pass (about 4× faster at 10⁶ elements), with numpy's
broadcasting and the same operations in the same order, so the same floating-point results.  The module
exports the plain numpy ufuncs (``.ufunc`` of numba's dynamic ufuncs), which skip a Python call layer.
"""

from __future__ import annotations

import math

from numba import vectorize

LOG_2PI = math.log(2.0 * math.pi)


@vectorize(["f8(f8, f8, f8, f8)"], cache=True)
def _gaussian_sq_dev(x1, x0, m0, m1):  # pragma: no cover - compiled
    """E[(x − μ)²] = E[x²] − 2E[x]E[μ] + E[μ²] of independent x and μ."""
    return x1 - 2.0 * x0 * m0 + m1


@vectorize(["f8(f8, f8, f8, f8)"], cache=True)
def _gaussian_precision_message(x1, x0, m0, m1):  # pragma: no cover - compiled
    """The first natural parameter of a Gaussian factor's message to its precision: −½E[(x − μ)²]."""
    return -0.5 * (x1 - 2.0 * x0 * m0 + m1)


@vectorize(["f8(f8, f8, f8, f8, f8, f8)"], cache=True)
def _gaussian_log_density(t0, t1, x1, x0, m0, m1):  # pragma: no cover - compiled
    """E[log N(x | μ, τ⁻¹)] = ½(E[log τ] − log 2π) − ½E[τ]E[(x − μ)²]."""
    return 0.5 * (t1 - LOG_2PI) - 0.5 * t0 * (x1 - 2.0 * x0 * m0 + m1)


@vectorize(["f8(f8, f8, f8, f8)"], cache=True)
def _sum_second_moment(a0, a1, b0, b1):  # pragma: no cover - compiled
    """E[(a + b)²] = E[a²] + 2E[a]E[b] + E[b²] of independent a and b."""
    return a1 + 2.0 * a0 * b0 + b1


@vectorize(["f8(f8, f8, f8)"], cache=True)
def _sum_pullback_first(h, eta2, other0):  # pragma: no cover - compiled
    """The first natural parameter of a sum's message to one operand: η₁ + 2η₂E[other]."""
    return h + 2.0 * eta2 * other0


gaussian_sq_dev = _gaussian_sq_dev.ufunc
gaussian_precision_message = _gaussian_precision_message.ufunc
gaussian_log_density = _gaussian_log_density.ufunc
sum_second_moment = _sum_second_moment.ufunc
sum_pullback_first = _sum_pullback_first.ufunc
