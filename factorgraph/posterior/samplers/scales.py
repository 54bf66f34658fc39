"""Forward samplers of positive scalars: Gamma precisions and the scales σ of ``fg.half_cauchy`` and kin.

* ``Gamma``: τ ~ Gam(a, b) (shape a, rate b; numpy's scale is 1/b).
* ``ScalePrior`` (``fg.half_normal``, ``fg.half_cauchy``, ``fg.half_student_t``, ``fg.exponential``) and
  ``UniformScale`` (σ ~ U(0, upper)): σ from its prior, and the precision σ⁻² as the variable's children see it.
* ``ScaleSigma``: σ from its prior, for a scale used on σ itself (a term of a sum or product).
"""

from __future__ import annotations

import numpy as np

from factorgraph.graph.nodes import FactorNode, Plate, Variable
from factorgraph.posterior.samplers.forward import Forward, param, sampler


@sampler("Gamma")
def _gamma(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    a = np.broadcast_to(param(s, v, f, "shape", frame), full)
    b = np.broadcast_to(s.arg(f.edges["rate"], frame, v.name), full)
    s.put(v, s.rng.gamma(a, 1.0 / b), full)


def _sigma_from_prior(rng: np.random.Generator, prior: str, p0, p1, full: tuple[int, ...]) -> np.ndarray:
    """Draws of σ from a scale prior in the kernels' parameters (factors/scale_priors.py): half_t p0 = log(ν s²),
    p1 = (ν + 1)/2; half_normal p0 = 1/(2s²); exponential p0 = rate; uniform p0 = upper."""
    p0 = np.broadcast_to(np.asarray(p0, float), full)
    if prior == "uniform":
        return p0 * (1.0 - rng.uniform(size=full))
    if prior == "half_normal":
        return np.abs(rng.standard_normal(full)) / np.sqrt(2.0 * p0)
    if prior == "half_t":
        nu = 2.0 * np.broadcast_to(np.asarray(p1, float), full) - 1.0
        return np.abs(np.sqrt(np.exp(p0) / nu) * rng.standard_t(nu))
    return rng.exponential(1.0 / p0)


@sampler("ScalePrior")
def _scale_prior(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    """σ from a half-normal, half-t (half-Cauchy) or exponential prior; parents see the precision σ⁻²."""
    p = f.params
    s.put(v, _sigma_from_prior(s.rng, p["prior"], p["p0"], p["p1"], full), full)
    s.precision[v.name] = s.out[v.name] ** -2.0


@sampler("ScaleSigma")
def _scale_sigma(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    """σ from its prior, for a scale used on σ itself (a term of a sum or product: factors/scale_sigma.py)."""
    b = f.params["base"]
    s.put(v, _sigma_from_prior(s.rng, b["prior"], b["p0"], b["p1"], full), full)


@sampler("UniformScale")
def _uniform_scale(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    """σ ~ U(0, upper); parents see the precision σ⁻²."""
    s.put(v, _sigma_from_prior(s.rng, "uniform", f.params["upper"], 0.0, full), full)
    s.precision[v.name] = s.out[v.name] ** -2.0
