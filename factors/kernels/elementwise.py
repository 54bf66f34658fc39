"""Fused elementwise arithmetic of the Gaussian factor and of sums, as numba ufuncs.

The generic (not fused) Gaussian path evaluates a few polynomial expressions in the moments once per
element of a plate per sweep.  Written in numpy, each operator makes a temporary and a pass over memory;
as one ufunc each expression is a single pass (about 4× faster at 10⁶ elements), with numpy's
broadcasting and the same operations in the same order, so the same floating-point results.

Each ufunc is built (compiled, or loaded from numba's cache) on its first call, not when the module is
imported: building the first one starts numba's code generator, about a second that ``import factorgraph``
need not pay when no model is fitted.  The call then goes to the plain numpy ufunc (``.ufunc`` of numba's).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from numba import vectorize

LOG_2PI = math.log(2.0 * math.pi)


class _OnFirstCall:
    """A numba ufunc of ``fn`` with the signatures ``sigs``, built on the first call."""

    __slots__ = ("fn", "sigs", "ufunc")

    def __init__(self, fn: Callable[..., float], sigs: list[str]) -> None:
        self.fn, self.sigs, self.ufunc = fn, sigs, None

    def __call__(self, *args: Any) -> Any:
        if self.ufunc is None:
            self.ufunc = vectorize(self.sigs, cache=True)(self.fn).ufunc
        return self.ufunc(*args)


def _lazy(sigs: list[str]) -> Callable[[Callable[..., float]], _OnFirstCall]:
    return lambda fn: _OnFirstCall(fn, sigs)


@_lazy(["f8(f8, f8, f8, f8)"])
def _gaussian_sq_dev(x1, x0, m0, m1):  # pragma: no cover - compiled
    """E[(x − μ)²] = E[x²] − 2E[x]E[μ] + E[μ²] of independent x and μ."""
    return x1 - 2.0 * x0 * m0 + m1


@_lazy(["f8(f8, f8, f8, f8)"])
def _gaussian_precision_message(x1, x0, m0, m1):  # pragma: no cover - compiled
    """The first natural parameter of a Gaussian factor's message to its precision: −½E[(x − μ)²]."""
    return -0.5 * (x1 - 2.0 * x0 * m0 + m1)


@_lazy(["f8(f8, f8, f8, f8, f8, f8)"])
def _gaussian_log_density(t0, t1, x1, x0, m0, m1):  # pragma: no cover - compiled
    """E[log N(x | μ, τ⁻¹)] = ½(E[log τ] − log 2π) − ½E[τ]E[(x − μ)²]."""
    return 0.5 * (t1 - LOG_2PI) - 0.5 * t0 * (x1 - 2.0 * x0 * m0 + m1)


@_lazy(["f8(f8, f8, f8, f8)"])
def _sum_second_moment(a0, a1, b0, b1):  # pragma: no cover - compiled
    """E[(a + b)²] = E[a²] + 2E[a]E[b] + E[b²] of independent a and b."""
    return a1 + 2.0 * a0 * b0 + b1


@_lazy(["f8(f8, f8, f8)"])
def _sum_pullback_first(h, eta2, other0):  # pragma: no cover - compiled
    """The first natural parameter of a sum's message to one operand: η₁ + 2η₂E[other]."""
    return h + 2.0 * eta2 * other0


gaussian_sq_dev = _gaussian_sq_dev
gaussian_precision_message = _gaussian_precision_message
gaussian_log_density = _gaussian_log_density
sum_second_moment = _sum_second_moment
sum_pullback_first = _sum_pullback_first
