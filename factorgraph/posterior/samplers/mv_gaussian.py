"""Forward sampler of the multivariate Gaussian with a known or Gamma-distributed precision.

x = m + L z, z ~ N(0, I_D), with L L ᵀ = Λ⁻¹ for the precision Λ of the factor: αI or diag(α) from a Gamma
variable (plain, ARD over the consumed plate, or gated ``alpha[z]``: each row's component's α), a constant
scalar, vector or matrix, or ``fg.select(values, z)``: each row's category's matrix.  (Wishart precisions:
``factorgraph.posterior.samplers.wishart``.)
"""

from __future__ import annotations

import numpy as np

from factorgraph.graph.gates import precision_matrices
from factorgraph.graph.nodes import FactorNode, Gate, ModelError, Plate, Variable
from factorgraph.posterior.samplers.forward import Forward, expand, sampler


def _mv_precision_chol(lam: np.ndarray, D: int) -> np.ndarray:
    """Cholesky factor of the covariance Λ⁻¹ for a constant precision (scalar, vector or matrix)."""
    lam = np.asarray(lam, float)
    if lam.ndim == 2:
        return np.linalg.cholesky(np.linalg.inv(lam))
    return np.diag(np.broadcast_to(1.0 / np.sqrt(lam), (D,)))


def gated_gamma_precision(s: Forward, f: FactorNode, gate: Gate, frame: tuple[Plate, ...], what: str) -> np.ndarray:
    """α of a gated Gamma precision ``alpha[z]`` at each draw and row, (S, *frame sizes, D or 1): the
    component z_n of each row; with ARD (``alpha`` plated over the consumed plate too) the vector diag(α)."""
    src = gate.source
    alpha, pl = s.value(src), tuple(src.plates)
    if f.params.get("ard"):  # the consumed plate becomes the last (event) axis
        ard = f.consumed["precision"]
        alpha = np.moveaxis(alpha, 1 + pl.index(ard), -1)
        pl = tuple(p for p in pl if p is not ard)
    else:
        alpha = alpha[..., None]
    full = (s.S, *(p.size for p in frame))
    x = np.broadcast_to(expand(alpha, pl, (*frame, gate.plate), what), (*full, gate.plate.size, alpha.shape[-1]))
    z = expand(s.value(gate.selector), gate.selector.plates, frame, what)
    z = np.broadcast_to(z, full).astype(np.intp)
    return np.take_along_axis(x, z[..., None, None], axis=-2)[..., 0, :]


@sampler("MvGaussian", "MvGaussianFixedPrecision")
def _mv_gaussian(s: Forward, v: Variable, f: FactorNode, frame: tuple[Plate, ...], full: tuple[int, ...]) -> None:
    D = v.event_shape[0]
    if D is None:
        raise ModelError(f"sampling: the dimension of {v.name!r} is not known (give dim=...)")
    m = np.broadcast_to(s.arg(f.edges["mean"], frame, v.name), full + (D,))
    z = s.rng.standard_normal(full + (D,))
    if isinstance(f.edges.get("precision"), Gate):  # a gated Gamma precision alpha[z]: each row's component
        alpha = gated_gamma_precision(s, f, f.edges["precision"], frame, v.name)
        s.put(v, m + z / np.sqrt(alpha), full)
        return
    if "precision" in f.edges:  # a Gamma variable: αI, or ARD diag(α) over the consumed plate
        alpha = s.value(f.edges["precision"])
        if f.params.get("ard"):
            pl = f.edges["precision"].plates
            alpha = np.moveaxis(alpha, 1 + list(pl).index(f.consumed["precision"]), -1)
            rest = tuple(p for p in pl if p is not f.consumed["precision"])
            alpha = expand(alpha, rest, frame, v.name)
        else:
            alpha = expand(alpha, f.edges["precision"].plates, frame, v.name)[..., None]
        tail = f.params.get("tail")
        if tail is not None:  # Λ = diag(α, c): α for the first D − T coordinates, the constants c for the rest
            alpha = np.broadcast_to(alpha, alpha.shape[:-1] + (D - tail.size,))
            alpha = np.concatenate([alpha, np.broadcast_to(tail, alpha.shape[:-1] + tail.shape)], axis=-1)
        s.put(v, m + z / np.sqrt(alpha), full)
        return
    lam = f.params["precision_raw"]
    if isinstance(lam, Gate):  # fg.select(values, z): each row's category's matrix
        mats = s.arg(Gate(precision_matrices(lam.source, D), lam.selector, lam.plate), frame, v.name)
        s.put(v, m + np.einsum("...ij,...j->...i", np.linalg.cholesky(np.linalg.inv(mats)), z), full)
        return
    if not np.any(lam):
        raise ModelError(f"sampling: {v.name!r} has an improper flat prior (precision 0), which cannot be sampled")
    s.put(v, m + z @ _mv_precision_chol(lam, D).T, full)
