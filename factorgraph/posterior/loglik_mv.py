"""Log densities of multivariate Gaussian observations for the pointwise log-likelihood
(``factorgraph.posterior.loglik``).

y_n ~ N(m, Λ⁻¹) per row, Λ = αI or diag(α) (a Gamma variable, plain, ARD or gated), a constant scalar,
vector or matrix, a Wishart draw (plain or gated) or a normal–Wishart block's joint draw.  A row observed by
coordinate (``v.coord_mask``, plates + (D,)) with some coordinates missing has the marginal density of its
observed coordinates o, log N(y_o | m_o, Σ_oo) with Σ = Λ⁻¹, as in its likelihood (``schedules.missing``);
whole rows keep the full density.
"""

from __future__ import annotations

import numpy as np

from factorgraph.graph.gates import precision_matrices
from factorgraph.graph.nodes import Gate, Node, Variable
from factorgraph.posterior.samplers.forward import Forward, expand
from factorgraph.posterior.samplers.mv_gaussian import gated_gamma_precision

_LOG2PI = np.log(2.0 * np.pi)


def _partial_rows(v: Variable, y: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """An ``mv_gaussian`` observed by coordinate: its coordinate mask o (y-shaped, True = observed) and its
    partly observed rows (plate-shaped: some coordinates observed, some missing), or None when it has no
    such row (no ``coord_mask``; every row whole or wholly missing), so the full density is used as is."""
    o = getattr(v, "coord_mask", None)
    if o is None:
        return None
    o = np.broadcast_to(np.asarray(o, bool), y.shape)
    part = o.any(-1) & ~o.all(-1)
    return (o, part) if part.any() else None


def _marginal_diagonal(full: np.ndarray, r: np.ndarray, alpha: np.ndarray, o: np.ndarray,
                       part: np.ndarray) -> np.ndarray:
    """``full`` (the rows' full log densities) with each partly observed row's replaced by the marginal of
    its observed coordinates o under Λ = diag(α): log N(y_o | m_o, diag(α_o)⁻¹) =
    ½ Σ_{d∈o} (log α_d − log 2π − α_d r_d²), r = y − m (the terms of the missing coordinates drop out)."""
    alpha = np.broadcast_to(alpha, np.broadcast_shapes(alpha.shape, r.shape))
    r = np.where(o, r, 0.0)  # r is NaN at the missing coordinates
    lp = 0.5 * (np.where(o, np.log(alpha), 0.0).sum(-1) - o.sum(-1) * _LOG2PI - (alpha * r * r).sum(-1))
    return np.where(part, lp, full)


def _marginal_matrix(full: np.ndarray, r: np.ndarray, lam: np.ndarray, o: np.ndarray,
                     part: np.ndarray) -> np.ndarray:
    """``full`` (the rows' full log densities) with each partly observed row's replaced by the marginal of
    its observed coordinates o under a precision matrix Λ (per draw, and per row when gated):
    log N(y_o | m_o, Σ_oo) = −½ (log|Σ_oo| + |o| log 2π + r_oᵀ Σ_oo⁻¹ r_o), Σ = Λ⁻¹, r = y − m.

    Computed in D × D by embedding: with O = diag(o), M = O Σ O + (I − O) has inverse
    blockdiag(Σ_oo⁻¹, I) and log|M| = log|Σ_oo|, so r̃ᵀ M⁻¹ r̃ (r̃ = r with 0 at the missing coordinates) is
    the quadratic form; only the partly observed rows are formed (batched over draws and those rows)."""
    if part.ndim == 0:  # an unplated observation: its one row
        one = _marginal_matrix(np.asarray(full)[..., None], r[..., None, :], lam[..., None, :, :], o[None], part[None])
        return one[..., 0]
    nf = part.ndim
    D = r.shape[-1]
    batch = np.broadcast_shapes(r.shape[:-1], lam.shape[:-2], part.shape)
    lead = (slice(None),) * (len(batch) - nf)  # the draw axis, when the parameters have one
    rows = np.nonzero(part)
    sigma = np.linalg.inv(lam)  # at its own shape: once per draw (per row only when Λ is)
    sigma = np.broadcast_to(sigma, batch + (D, D))[lead + rows]  # (*lead, P, D, D)
    o_p = o[rows]  # (P, D)
    r_p = np.where(o_p, np.broadcast_to(r, batch + (D,))[lead + rows], 0.0)
    m = sigma * (o_p[:, :, None] & o_p[:, None, :]) + np.eye(D) * ~o_p[:, None, :]
    _, logdet = np.linalg.slogdet(m)
    quad = (r_p * np.linalg.solve(m, r_p[..., None])[..., 0]).sum(-1)
    out = np.array(np.broadcast_to(full, batch), dtype=float)
    out[lead + rows] = -0.5 * (logdet + o_p.sum(-1) * _LOG2PI + quad)
    return out


def mv_gaussian_logpdf(s: Forward, v, f, frame, y):
    """y ~ N(m, Λ⁻¹) per row, Λ = αI or diag(α) (a Gamma variable, scalar or ARD), a constant scalar,
    vector or matrix, or a Wishart draw; a row observed by coordinate (``v.coord_mask``) has the marginal
    density of its observed coordinates, log N(y_o | m_o, Σ_oo) with Σ = Λ⁻¹."""
    D = y.shape[-1]
    m = s.arg(f.edges["mean"], frame, v.name)
    r = y - m
    partial = _partial_rows(v, y)
    if "precision" in f.edges and isinstance(f.edges["precision"], Node | Gate):
        edge = f.edges["precision"]
        if f.ftype.name in ("MvGaussianWishart", "MvGaussianWishartMissing"):  # a Wishart Λ per draw (and row if gated)
            lam = s.arg(edge, frame, v.name)
            _, logdet = np.linalg.slogdet(lam)
            quad = np.einsum("...i,...ij,...j->...", r, lam, r)
            lp = 0.5 * (logdet - D * _LOG2PI - quad)
            return lp if partial is None else _marginal_matrix(lp, r, lam, *partial)
        if isinstance(edge, Gate):  # α[z]: each row's component
            alpha = gated_gamma_precision(s, f, edge, frame, v.name)
        else:
            alpha = s.value(edge)
            if f.params.get("ard"):  # diag(α) over the consumed plate
                pl = edge.plates
                alpha = np.moveaxis(alpha, 1 + list(pl).index(f.consumed["precision"]), -1)
                rest = tuple(p for p in pl if p is not f.consumed["precision"])
                alpha = expand(alpha, rest, frame, v.name)
            else:
                alpha = expand(alpha, edge.plates, frame, v.name)[..., None]
        alpha = np.broadcast_to(alpha, np.broadcast_shapes(alpha.shape, r.shape))  # r lacks S for a constant mean
        lp = 0.5 * (np.log(alpha).sum(-1) - D * _LOG2PI - (alpha * r * r).sum(-1))
        return lp if partial is None else _marginal_diagonal(lp, r, alpha, *partial)
    lam = f.params["precision_raw"]
    if isinstance(lam, Gate):  # fg.select(values, z): each row's category's matrix, (S, *frame, D, D)
        lam = s.arg(Gate(precision_matrices(lam.source, D), lam.selector, lam.plate), frame, v.name)
        _, logdet = np.linalg.slogdet(lam)
        lp = 0.5 * (logdet - D * _LOG2PI - np.einsum("...i,...ij,...j->...", r, lam, r))
        return lp if partial is None else _marginal_matrix(lp, r, lam, *partial)
    lam = np.asarray(lam, float)
    if lam.ndim == 2:
        _, logdet = np.linalg.slogdet(lam)
        quad = np.einsum("...i,ij,...j->...", r, lam, r)
        lp = 0.5 * (logdet - D * _LOG2PI - quad)
        return lp if partial is None else _marginal_matrix(lp, r, lam, *partial)
    lam = np.broadcast_to(lam, (D,))
    logdet, quad = np.log(lam).sum(), (lam * r * r).sum(-1)
    lp = 0.5 * (logdet - D * _LOG2PI - quad)
    return lp if partial is None else _marginal_diagonal(lp, r, lam, *partial)


def mv_gaussian_normal_wishart_logpdf(s: Forward, v, f, frame, y):
    """y ~ N(μ, Λ⁻¹) with (μ, Λ) a normal–Wishart block's joint draw (``"theta"``, ``"theta.precision"``); a
    row observed by coordinate (``v.coord_mask``) has log N(y_o | μ_o, Σ_oo), Σ = Λ⁻¹."""
    edge = f.edges["params"]
    src = edge.source if isinstance(edge, Gate) else edge
    m = s.arg(edge, frame, v.name)
    mean_draws = s.out[src.name]
    s.out[src.name] = s.out[f"{src.name}.precision"]  # the same gate and plates select Λ
    try:
        lam = s.arg(edge, frame, v.name)
    finally:
        s.out[src.name] = mean_draws
    r = y - m
    _, logdet = np.linalg.slogdet(lam)
    lp = 0.5 * (logdet - y.shape[-1] * _LOG2PI - np.einsum("...i,...ij,...j->...", r, lam, r))
    partial = _partial_rows(v, y)
    return lp if partial is None else _marginal_matrix(lp, r, lam, *partial)


__all__ = ["mv_gaussian_logpdf", "mv_gaussian_normal_wishart_logpdf"]
