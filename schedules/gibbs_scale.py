r"""Slice sampling of a positive scale in log space (a part of the Gibbs chain).

A scale σ made by ``fg.half_normal``, ``fg.half_cauchy``, ``fg.half_student_t``, ``fg.exponential`` or
``fg.uniform_scale`` has a prior h(σ) that is not conjugate to its children.  With every other variable at a
point, the children's messages are still exact: as the ``sd=`` of Gaussian terms the scale is held as its
precision τ = σ⁻², and the Gaussian terms send (η₁, η₂) = (−½ Σ (x − m)², ½ n) on (τ, log τ); as a term of a
product (θ = μ + σ·η) it is held as σ and the terms send (η₁, η₂) on (σ, σ²).  In u = log σ (Jacobian dσ/du = σ)
the full conditional is then closed form,

.. math:: \log p(u \mid \text{rest}) = \log h(e^u) + u + \begin{cases}
          \eta_1 e^{-2u} - 2\eta_2 u & \text{(held as } \tau = \sigma^{-2})\\
          \eta_1 e^{u} + \eta_2 e^{2u} & \text{(held as } \sigma)\end{cases} + \text{const},

for a Gaussian likelihood Π_i N(x_i; m_i, σ) that is σ⁻ⁿ exp(−Σ(x − m)²/(2σ²)).  Each entry of a plated scale
(one per group) has its own conditional given the rest, and moves by its own univariate slice sampling step
(Neal 2003): y = log p(u₀) − E with E ~ Exp(1); an interval of width w = 1 placed at random around u₀ and stepped
out by w at each end while the density there is above y (at most m − 1 = 49 steps in all, J = ⌊mV⌋ of them to the
left, V ~ U(0, 1): the bound keeps the step exact and bounds its cost when u₀ lies far in a tail, where the slice
of a density with a tail ∝ eᵘ is wide); then points drawn uniformly on the interval, which shrinks towards u₀ at
each rejection, until one lies above y.  All entries step out and shrink together, in one
vectorised loop (an entry that is done keeps its value).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distributions import Gamma, TiltedScale
from factorgraph.graph.nodes import Variable
from factors import SCALE_PRIORS
from factors.slice_likelihoods import scale_base

from .errors import InferenceError

WIDTH = 1.0  # the initial interval's width in log σ
STEPS = 50  # m: at most m − 1 steps out of width w in all, split at random between the two ends (Neal 2003, §4.1)
MAX_STEPS = 200  # shrinks after which the density is deemed non-finite


class ScaleSteps:
    """Slice steps of the scale variables of a ``GibbsChain`` (which provides the engine, ``rng``, ``values``,
    ``natural_sum`` and ``set_point``)."""

    rng: np.random.Generator
    values: dict[str, np.ndarray]

    def scale_prior(self, v: Variable) -> TiltedScale | None:
        """The prior h(σ) of a scale variable (as the base of a ``TiltedScale``, whose ``log_base`` is log h), or
        None when v is not a scale."""
        if v.prior is None or v.prior.ftype not in SCALE_PRIORS:
            return None
        base = scale_base(v.prior.params, v.shape)
        return TiltedScale(np.zeros(v.shape), -np.ones(v.shape), **base)

    def log_sigma(self, v: Variable) -> np.ndarray:
        """log σ at the current state (the value is τ = σ⁻² when v is held as a precision)."""
        x = np.asarray(self.values[v.name], float)
        return -0.5 * np.log(x) if v.family is Gamma else np.log(x)

    def scale_step(self, v: Variable, prior: TiltedScale) -> None:
        """One slice sampling step of u = log σ for every entry of v (see the module docstring)."""
        e1, e2 = (np.broadcast_to(np.asarray(a, float), v.shape) for a in self.natural_sum(v))
        on_tau = v.family is Gamma

        def logp(u: np.ndarray) -> np.ndarray:
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                s = np.exp(u)
                like = e1 * np.exp(-2.0 * u) - 2.0 * e2 * u if on_tau else e1 * s + e2 * s * s
                out = prior.log_base(s) + u + like
            return np.where(np.isnan(out), -np.inf, out)

        u0 = self.log_sigma(v)
        logy = logp(u0) - self.rng.exponential(size=v.shape)
        if not np.all(np.isfinite(logy)):
            bad = np.flatnonzero(~np.isfinite(logy))[0]
            raise InferenceError(f"Gibbs: the conditional density of the scale {v.name!r} is not finite at its current "
                                 f"value σ = {np.exp(u0).ravel()[bad]:.3g} (entry {bad})")
        lo = u0 - WIDTH * self.rng.random(v.shape)
        hi = lo + WIDTH
        left = np.floor(STEPS * self.rng.random(v.shape))  # Neal's bound on the steps out: J left, m − 1 − J right
        right = STEPS - 1 - left
        for k in range(STEPS):
            out_lo = (k < left) & (logp(lo) > logy)
            out_hi = (k < right) & (logp(hi) > logy)
            if not (out_lo.any() or out_hi.any()):
                break
            lo = np.where(out_lo, lo - WIDTH, lo)
            hi = np.where(out_hi, hi + WIDTH, hi)
        done = np.zeros(v.shape, bool)
        u = u0.copy()
        for _ in range(MAX_STEPS):
            cand = self.rng.uniform(lo, hi)
            ok = ~done & (logp(cand) > logy)
            u = np.where(ok, cand, u)
            done |= ok
            if done.all():
                break
            lo = np.where(~done & (cand < u0), cand, lo)
            hi = np.where(~done & (cand >= u0), cand, hi)
        else:
            raise InferenceError(f"Gibbs: slice sampling of the scale {v.name!r} found no point in its slice after "
                                 f"{MAX_STEPS} shrinks (its conditional density may be non-finite)")
        self.set_point(v, np.exp(-2.0 * u) if on_tau else np.exp(u))

    def reported(self, v: Variable) -> Any:
        """The value kept as v's draw: σ for a scale held as its precision, else the value itself."""
        x = self.values[v.name]
        if v.name in self.scales and v.family is Gamma:
            return np.asarray(x, float) ** -0.5
        return np.array(x)


__all__ = ["MAX_STEPS", "ScaleSteps"]
