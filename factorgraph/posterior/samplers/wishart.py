"""Forward samplers of Wishart precision matrices and of the Gaussians that use them.

* ``Wishart``: Λ ~ Wishart(ν, V⁻¹) by Bartlett's decomposition.
* ``NormalWishart``: Λ ~ Wishart(ν₀, V₀⁻¹), μ | Λ ~ N(m₀, (β₀Λ)⁻¹); μ under the name, Λ as ``"<name>.precision"``.
* ``MvGaussianWishart``: y ~ N(m, Λ⁻¹) at the drawn Λ (per row when gated); ``MvGaussianNormalWishart``:
  y ~ N(μ, Λ⁻¹) at a normal–Wishart block's joint draw (μ, Λ).  Their variants for rows with some
  coordinates missing (own factor types only for the likelihood) draw from the same law.

Draws given a precision: x = m + L⁻ᵀz, z ~ N(0, I), L Lᵀ = Λ (so Cov x = L⁻ᵀL⁻¹ = Λ⁻¹).
"""

from __future__ import annotations

import numpy as np

from factorgraph.graph.nodes import FactorNode, Gate, Node, Plate, Variable
from factorgraph.posterior.samplers.forward import Forward, expand, sampler


def _wishart_draw(rng: np.random.Generator, dof, scale, full: tuple[int, ...], D: int) -> np.ndarray:
    """Λ ~ Wishart(ν, V⁻¹) (E[Λ] = ν·V⁻¹, V the inverse scale matrix) by Bartlett's decomposition:
    Λ = L A Aᵀ Lᵀ with L L ᵀ = V⁻¹, A lower triangular, A_ii² ~ χ²(ν − i), A_ij ~ N(0, 1) below the diagonal."""
    nu = np.broadcast_to(np.asarray(dof, float), full)
    L = np.linalg.cholesky(np.linalg.inv(np.broadcast_to(np.asarray(scale, float), full + (D, D))))
    A = np.tril(rng.standard_normal(full + (D, D)), -1)
    idx = np.arange(D)
    A[..., idx, idx] = np.sqrt(rng.chisquare(nu[..., None] - idx))
    LA = L @ A
    return LA @ np.swapaxes(LA, -1, -2)


def _mv_given_precision(rng: np.random.Generator, mean: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """x ~ N(mean, Λ⁻¹) for a batch of precision matrices: x = mean + L⁻ᵀz with L Lᵀ = Λ."""
    L = np.linalg.cholesky(lam)
    z = rng.standard_normal(mean.shape)
    return mean + np.linalg.solve(np.swapaxes(L, -1, -2), z[..., None])[..., 0]


@sampler("Wishart")
def _wishart(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    D = v.event_shape[0]
    s.put(v, _wishart_draw(s.rng, f.params["dof"], f.params["scale"], full, D), full)


@sampler("NormalWishart")
def _normal_wishart(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    """Λ ~ Wishart(ν₀, V₀⁻¹), μ | Λ ~ N(m₀, (β₀Λ)⁻¹); μ under the name, Λ as "<name>.precision"."""
    p, D = f.params, v.event_shape[0]
    lam = _wishart_draw(s.rng, p["dof"], p["scale"], full, D)
    beta = np.broadcast_to(np.asarray(p["beta"], float), full)
    s.out[v.name] = _mv_given_precision(s.rng, np.broadcast_to(p["mean"], full + (D,)), beta[..., None, None] * lam)
    s.out[f"{v.name}.precision"] = lam


@sampler("MvGaussianWishart", "MvGaussianWishartMissing")
def _mv_gaussian_wishart(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...],
                         full: tuple[int, ...]) -> None:
    D = v.event_shape[0]
    m = np.broadcast_to(s.arg(f.edges["mean"], frame, v.name), full + (D,))
    lam = np.broadcast_to(s.arg(f.edges["precision"], frame, v.name), full + (D, D))
    s.put(v, _mv_given_precision(s.rng, m, lam), full)


class _Alias:
    """The precision half "<θ>.precision" of a normal–Wishart block θ, addressable like a node."""

    def __init__(self, node: Node) -> None:
        self.name, self.plates = f"{node.name}.precision", node.plates


@sampler("MvGaussianNormalWishart", "MvGaussianNormalWishartMissing")
def _mv_gaussian_normal_wishart(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...],
                                full: tuple[int, ...]) -> None:
    D = v.event_shape[0]
    a = f.edges["params"]
    m = np.broadcast_to(s.arg(a, frame, v.name), full + (D,))
    if isinstance(a, Gate):
        lam = s.arg(Gate(_Alias(a.source), a.selector, a.plate), frame, v.name)
    else:
        lam = expand(s.out[f"{a.name}.precision"], a.plates, frame, v.name)
    s.put(v, _mv_given_precision(s.rng, m, np.broadcast_to(lam, full + (D, D))), full)
