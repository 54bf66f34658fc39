"""Builders for random covariance structure: ``fg.wishart``, ``fg.gaussian_wishart``, and the
multivariate Gaussian whose precision is a Wishart matrix (reached through ``fg.mv_gaussian``).

Wishart convention (Infer.NET, BayesPy): ``scale`` is the *inverse* scale matrix V, so that

    p(Λ) ∝ |Λ|^((ν − D − 1)/2) exp(−½ tr(VΛ)),   E[Λ] = ν V⁻¹.

scipy's ``wishart(df=ν, scale=S)`` is the same law with S = V⁻¹; scikit-learn's
``covariance_prior`` is V.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distributions import GaussianWishart, MvGaussian, Wishart
from factorgraph.graph import checks
from factorgraph.graph.builder_base import _check_parent, _finish, _parent_plates, _plates
from factorgraph.graph.model import current_model
from factorgraph.graph.nodes import Gate, Indexed, ModelError, Plate, Variable
from factors.mv_gaussian_wishart import MV_GAUSSIAN_WISHART
from factors.mv_gaussian_wishart_missing import MV_GAUSSIAN_NORMAL_WISHART_MISSING, MV_GAUSSIAN_WISHART_MISSING
from factors.normal_wishart import MV_GAUSSIAN_NORMAL_WISHART, NORMAL_WISHART, prior_natural
from factors.wishart import WISHART


def _source(x: Any) -> Any:
    return x.source if isinstance(x, Gate | Indexed) else x


def _family(x: Any) -> type | None:
    s = _source(x)
    return s.family if isinstance(s, Variable) else None


def uses_wishart(mean: Any, precision: Any) -> bool:
    """Whether an ``fg.mv_gaussian`` call has a Wishart precision or a normal–Wishart mean."""
    return _family(precision) is Wishart or _family(mean) is GaussianWishart


def _scale_matrix(value: Any, name: str, dims: set[int]) -> np.ndarray:
    """The inverse scale V: a positive scalar (V = s·I, D from ``dims``) or symmetric positive definite
    matrices of trailing shape (D, D)."""
    v = checks.constant(value, f"{name!r}: scale")
    if v.ndim == 0:
        if not v > 0:
            raise ModelError(f"{name!r}: scale must be positive definite, got {v.item()!r}")
        if len(dims) != 1:
            raise ModelError(f"{name!r}: a scalar scale needs the dimension: pass dim=D or a D×D scale matrix")
        return float(v) * np.eye(next(iter(dims)))
    if v.ndim < 2 or v.shape[-1] != v.shape[-2]:
        raise ModelError(f"{name!r}: scale must be a positive scalar or square D×D matrices, got shape {v.shape}")
    if np.any(np.abs(v - np.swapaxes(v, -1, -2)) > 1e-8 * (1.0 + np.abs(v))):
        raise ModelError(f"{name!r}: scale must be symmetric, got {checks._show(v)}")
    v = 0.5 * (v + np.swapaxes(v, -1, -2))
    lo = np.linalg.eigvalsh(v)[..., 0]
    if np.any(lo <= 0):
        raise ModelError(f"{name!r}: scale must be positive definite, got smallest eigenvalue "
                         f"{float(lo.min())!r} in {checks._show(v)}")
    dims.add(v.shape[-1])
    return v


def _dof(value: Any, name: str, D: int) -> np.ndarray:
    nu = checks.constant(value, f"{name!r}: dof")
    if np.any(nu <= D - 1):
        raise ModelError(f"{name!r}: dof must exceed D − 1 = {D - 1}, got {float(nu[nu <= D - 1].ravel()[0])!r}")
    return nu


def _one_dim(dims: set[int], name: str) -> int:
    if len(dims) > 1:
        raise ModelError(f"{name!r}: inconsistent dimensions {sorted(dims)} from dim, mean and scale")
    if not dims:
        raise ModelError(f"{name!r}: the dimension D is unknown: pass dim=D or a D×D scale matrix")
    return dims.pop()


def wishart(name: str, dof: Any = None, scale: Any = 1.0, *, plates: Sequence[Plate] = (),
            dim: int | None = None) -> Variable:
    """A random D×D precision matrix Λ ~ Wishart(dof, scale), with ``scale`` the INVERSE scale matrix V.

    The density is p(Λ) ∝ |Λ|^((ν − D − 1)/2) exp(−½ tr(VΛ)), so E[Λ] = ν V⁻¹ (Infer.NET and BayesPy
    convention; scipy.stats.wishart(df=ν, scale=V⁻¹) is the same law).  Use it as the precision of
    ``fg.mv_gaussian(..., precision=L)``, or gated, ``precision=L[z]``.

    Parameters
    ----------
    dof : float or array
        Degrees of freedom ν > D − 1 (default D).
    scale : float or array
        V: a positive scalar s (V = s·I, needs ``dim``) or symmetric positive definite matrices of
        trailing shape (D, D), broadcasting against the plates.
    plates, dim
        Replication plates; D when ``scale`` is a scalar.
    """
    model = current_model(f"wishart {name!r}")
    model.check_name(name)
    dims = set() if dim is None else {checks.positive_int(dim, f"{name!r}: dim")}
    v = _scale_matrix(scale, name, dims)
    D = _one_dim(dims, name)
    nu = _dof(float(D) if dof is None else dof, name, D)
    var = Variable(model, name, Wishart, _plates(model, plates, name), (D, D))
    checks.fits(v.shape[:-2], var.shape, f"{name!r}: scale (without its matrix axes)")
    checks.fits(nu.shape, var.shape, f"{name!r}: dof")
    return _finish(model, var, WISHART, {}, {"dof": nu, "scale": v}, None, None)


def gaussian_wishart(name: str, mean: Any = 0.0, beta: Any = 1.0, dof: Any = None, scale: Any = 1.0, *,
                     plates: Sequence[Plate] = (), dim: int | None = None) -> Variable:
    """A joint normal–Wishart block (μ, Λ): μ | Λ ~ N(mean, (beta·Λ)⁻¹), Λ ~ Wishart(dof, scale).

    ``scale`` is the inverse scale matrix V of the Wishart (E[Λ] = dof·V⁻¹; see ``fg.wishart``).  The
    block is the mean and precision of a Gaussian: ``fg.mv_gaussian("x", theta, plates=[n],
    observed=X)``, or a mixture component, ``fg.mv_gaussian("x", theta[z], ...)``.  Its posterior
    q(μ, Λ) is joint (not mean field), so with Gaussian data the ELBO is the exact log marginal
    likelihood (Bishop 2006 §2.3.6, §10.2).

    Parameters
    ----------
    mean : array, shape (D,) or plates + (D,)
        m₀.
    beta : float or array
        β₀ > 0.
    dof : float or array
        ν₀ > D − 1 (default D).
    scale : float or array
        V₀ (scalar s means s·I).
    """
    model = current_model(f"gaussian_wishart {name!r}")
    model.check_name(name)
    dims = set() if dim is None else {checks.positive_int(dim, f"{name!r}: dim")}
    m0 = checks.constant(mean, f"{name!r}: mean")
    if m0.ndim:
        dims.add(m0.shape[-1])
    v = _scale_matrix(scale, name, dims)
    D = _one_dim(dims, name)
    b0 = checks.positive(beta, f"{name!r}: beta")
    nu = _dof(float(D) if dof is None else dof, name, D)
    var = Variable(model, name, GaussianWishart, _plates(model, plates, name), (D,))
    m0 = np.broadcast_to(m0, m0.shape[:-1] + (D,)) if m0.ndim else np.full(D, float(m0))
    for what, shape in (("mean (without its last axis)", m0.shape[:-1]), ("beta", b0.shape), ("dof", nu.shape),
                        ("scale (without its matrix axes)", v.shape[:-2])):
        checks.fits(shape, var.shape, f"{name!r}: {what}")
    params = {"mean": m0, "beta": b0, "dof": nu, "scale": v}
    params["log_partition"] = GaussianWishart.from_natural(*prior_natural(params)).log_partition()
    return _finish(model, var, NORMAL_WISHART, {}, params, None, None)


def mv_gaussian_wishart(name: str, mean: Any, precision: Any, plates: Sequence[Plate], dim: int | None,
                        observed: Any, mask: Any = None) -> Variable:
    """``fg.mv_gaussian`` with a Wishart precision (``precision=L`` or ``L[z]``) or a normal–Wishart mean
    (``mean=theta`` or ``theta[z]``, precision omitted).

    ``mask`` (True = observed) marks missing data: whole rows (plate-shaped) or single coordinates
    (plates + (D,); a ``numpy.ma`` mask of ``observed`` counts too).  A missing row drops out of the
    likelihood (its factor instance is weighted by 0).  A partly observed row keeps the marginal density
    N(x_o | μ_o, Σ_oo) of its observed coordinates o (Σ = Λ⁻¹), so its missing coordinates are
    integrated out exactly.  That term is not linear in the Wishart statistics (Λ, log|Λ|), so its message
    to Λ is NCVMP's gradient message (``factors.mv_gaussian_wishart_missing``) and the default algorithm
    becomes ``fg.NCVMP()``.  The variable must then be a leaf (nothing else uses it).
    """
    model = current_model(f"mv_gaussian {name!r}")
    model.check_name(name)
    vplates = _plates(model, plates, name)
    dims = set() if dim is None else {checks.positive_int(dim, f"{name!r}: dim")}
    if _family(mean) is GaussianWishart:
        if precision is not None:
            raise ModelError(f"{name!r}: the mean is the normal–Wishart block {_source(mean).name!r}, which also "
                             "gives the precision; do not pass precision=")
        _check_parent(model, mean, name, "mean", (GaussianWishart,))
        dims.add(_source(mean).event_shape[0])
        ftype, edges = MV_GAUSSIAN_NORMAL_WISHART, {"params": mean}
    else:
        _check_parent(model, precision, name, "precision", (Wishart,))
        dims.add(_source(precision).event_shape[0])
        if isinstance(mean, Variable | Gate | Indexed):
            _check_parent(model, mean, name, "mean", (MvGaussian,))
            dims.add(_source(mean).event_shape[0])
        else:
            mean = checks.constant(mean, f"{name!r}: mean")
            if mean.ndim:
                dims.add(mean.shape[-1])
        ftype, edges = MV_GAUSSIAN_WISHART, {"mean": mean, "precision": precision}
    if len(dims) > 1:
        raise ModelError(f"{name!r}: inconsistent dimensions {sorted(dims)} from dim, mean and precision")
    D = dims.pop()
    parents = [a for a in edges.values() if isinstance(a, Variable | Gate | Indexed)]
    var = Variable(model, name, MvGaussian, model.sorted_plates([*vplates, *_parent_plates(parents)]), (D,))
    coords = None
    if observed is not None:
        mask, coords = _row_mask(observed, mask, var.shape + (D,), name)
    if coords is None:
        return _finish(model, var, ftype, edges, {"D": D}, observed, mask)
    # rows with some coordinates missing keep their observed coordinates' marginal density (non-conjugate in Λ)
    ftype = MV_GAUSSIAN_WISHART_MISSING if ftype is MV_GAUSSIAN_WISHART else MV_GAUSSIAN_NORMAL_WISHART_MISSING
    data = np.ma.getdata(observed)
    _finish(model, var, ftype, edges, {"D": D}, np.where(coords, data, 0.0), mask)
    var.coord_mask = coords
    var.value = np.where(coords, var.value, np.nan)
    return var


def _row_mask(observed: Any, mask: Any, shape: tuple[int, ...], name: str) -> tuple[Any, np.ndarray | None]:
    """A missing-value mask from ``mask`` and any ``numpy.ma`` mask of ``observed``: (the row mask, None) when
    every row is all observed or all missing (a per-coordinate mask then becomes a row mask), else (the rows
    with any coordinate observed, the per-coordinate mask, plates + (D,))."""
    if mask is not None and np.ndim(mask) == len(shape):
        coords = checks.mask_array(mask, shape, name)
    else:
        coords = None
    hidden = np.ma.getmaskarray(observed) if np.ma.isMaskedArray(observed) else None
    if hidden is not None and hidden.shape == shape and hidden.any():  # numpy.ma: True = hidden
        if coords is None:
            coords = np.broadcast_to(checks.mask_array(mask, shape[:-1], name)[..., None], shape)
        coords = coords & ~hidden
    if coords is None:
        return mask, None
    partial = coords.any(-1) & ~coords.all(-1)
    if not partial.any():
        return coords.all(-1), None
    if checks.is_dask(observed):
        row = tuple(int(i) for i in np.argwhere(partial)[0])
        raise ModelError(f"{name!r}: row {row[0] if len(row) == 1 else row} has some coordinates observed and some "
                         "missing; under a Wishart precision or a normal–Wishart mean such rows need numpy data, "
                         "not a dask array (a sharded run takes whole missing rows only)")
    return coords.any(-1), coords


__all__ = ["gaussian_wishart", "mv_gaussian_wishart", "uses_wishart", "wishart"]
