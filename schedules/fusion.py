"""Fusing Gaussian likelihoods of observed outputs into factors that run on cached sums.

Four substitutions, made when a model is compiled (each keeps the replaced factor as ``source``, whose data
``bind`` reads again after ``model.set_data``; the first three need every output observed):

* ``y ~ N(inner(X, w), τ⁻¹)``, w one MvGaussian: the linear-Gaussian factor on XᵀX, Xᵀy, yᵀy
  (factors/linear_gaussian.py);
* ``y ~ N(a[g], τ⁻¹)``: the grouped-Gaussian factor on per-group counts, sums and sums of squares
  (factors/grouped_gaussian.py);
* ``y ~ N(mean, τ⁻¹)`` with a mean linear in Gaussian coefficients, at least one gathered by labels, e.g.
  ``a[g] + b[g] * x + fg.inner(X, w)``: the grouped linear-Gaussian factor on per-group Gram matrices
  (factors/grouped_linear_gaussian.py).  The mean is read as Σ_terms (constant column) × (coefficient); a
  term that is not of that form (a product of two random nodes, a constant offset, a plated-over-rows
  variable, a gate), coefficients gathered by different labels, a variable used twice, or a variable taken
  over by a global handler leaves the factor to the generic path, which gives the same fixed point;
* ``x ~ N(fg.inner(z, w), τ⁻¹)`` over plates (n, d) with x observed (entries may be missing), latent scores z_n
  whose only other factor is their constant prior N(m₀, Λ₀⁻¹), loadings w_d (``intercept=True`` allowed) and
  τ a Gamma per column or one: the scores' prior and the likelihood become one factor that owns q(z)
  (factors/factor_analysis.py; Bayesian PCA), whose sweep costs O(NDK + DK³) and never forms N × K × K arrays;
  the missing entries of x drop out of it (schedules/missing.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.linalg.blas import dsyrk

from distributions import Gamma, Gaussian, MvGaussian
from factorgraph.graph import checks
from factorgraph.graph.nodes import Deterministic, FactorNode, Gate, Indexed, Variable
from factors.data_products import cached_gram, cached_yty
from factors.deterministic import Dot, Inner, Product, Sum
from factors.factor_analysis import FACTOR_ANALYSIS
from factors.gaussian import GAUSSIAN
from factors.grouped_gaussian import GROUPED_GAUSSIAN
from factors.grouped_linear_gaussian import (
    GROUPED_LINEAR_GAUSSIAN,
    SCALAR_SLOTS,
    VECTOR_SLOTS,
    grouped_linear_stats,
)
from factors.linear_gaussian import LINEAR_GAUSSIAN
from factors.mv_gaussian import MV_GAUSSIAN_FIXED
from factors.plating import expand


def fuse(model, handled: set[str] = frozenset()) -> list[FactorNode]:
    """The model's factors, with fusable Gaussian likelihoods replaced (see the module docstring)."""
    uses: dict[int, int] = {}
    for f in model.factors:
        for a in f.edges.values():
            a = a.source if isinstance(a, Gate) else a
            if isinstance(a, Deterministic):
                uses[id(a)] = uses.get(id(a), 0) + 1
    for d in model.deterministics:
        for p in d.parents.values():
            if isinstance(p, Deterministic):
                uses[id(p)] = uses.get(id(p), 0) + 1
    scores = _factor_analyses(model, uses, handled)
    out = []
    for f in model.factors:
        if id(f) in scores:  # a factor-analysis likelihood (fused) or its scores' prior (absorbed into it)
            if scores[id(f)] is not None:
                out.append(scores[id(f)])
            continue
        fused = _fuse_grouped(f) or _fuse_grouped_linear(f, uses, handled)
        if fused is not None:
            out.append(fused)
            continue
        y, mean, prec = f.edges.get("out"), f.edges.get("mean"), f.edges.get("precision")
        ok = (f.ftype is GAUSSIAN and isinstance(y, Variable) and y.is_observed
              and isinstance(mean, Deterministic) and mean.op.name == "inner" and uses.get(id(mean)) == 1
              and not mean.params["mean_field"] and mean.parents["w"].family is MvGaussian
              and not mean.parents["w"].plates and mean.plates == y.plates == f.plates
              and (isinstance(prec, np.ndarray) and prec.size == 1
                   or isinstance(prec, Variable) and not prec.plates))
        if not ok:
            out.append(f)
            continue
        precision = prec.reshape(()) if isinstance(prec, np.ndarray) else prec
        fused = FactorNode(LINEAR_GAUSSIAN, f.name, {"w": mean.parents["w"], "precision": precision},
                           (), f.method, {})  # its statistics: bind
        fused.source = f  # the factor it replaces, whose data rebind() reads again
        out.append(fused)
    return out


def fused_stats(f: FactorNode) -> dict[str, Any]:
    """A fused factor's parameters, read again from the data of the factor it replaces."""
    if f.ftype is LINEAR_GAUSSIAN:
        return _linear_stats(f.source)
    if f.ftype is GROUPED_GAUSSIAN:
        return _grouped_stats(f.source)
    if f.ftype is FACTOR_ANALYSIS:
        return _factor_analysis_stats(f)
    return _grouped_linear_stats(f.source)


def _linear_stats(f: FactorNode) -> dict[str, Any]:
    """XᵀX, Xᵀy, yᵀy and n of a Gaussian factor on inner(X, w) with fully observed outputs y."""
    yv = f.edges["out"].value.reshape(-1)
    xtx, xty = cached_gram(f.edges["mean"].params, yv)
    return {"xtx": xtx, "xty": xty, "yty": cached_yty(f.edges["mean"].params, yv), "n": yv.size}


def _precision_on_groups(prec: Any, along: Any, plate: Any, labels: np.ndarray) -> Any:
    """The precision edge of a factor fused onto the group plate: a constant, an unplated Gamma, or ``tau[g]``
    with the mean's labels (then ``tau`` itself); None if it is none of these."""
    if isinstance(prec, np.ndarray) and prec.size == 1:
        return prec.reshape(())
    if isinstance(prec, Variable) and not prec.plates:
        return prec
    if (isinstance(prec, Indexed) and prec.along is along and prec.source.plates == (along,)
            and prec.plate is plate and np.array_equal(prec.labels, labels)):
        return prec.source
    return None


def _fuse_grouped(f: FactorNode) -> FactorNode | None:
    """A Gaussian factor on a[g] (a plated over the groups only) with a fully observed output becomes the
    grouped-Gaussian factor on a, fed by per-group sums of y and y² (one pass over the rows, once)."""
    y, mean, prec = f.edges.get("out"), f.edges.get("mean"), f.edges.get("precision")
    if not (f.ftype is GAUSSIAN and isinstance(y, Variable) and y.is_observed and isinstance(mean, Indexed)
            and mean.family is Gaussian and mean.source.plates == (mean.along,) and f.plates == y.plates
            and y.plates == mean.plates == (mean.plate,)):
        return None
    precision = _precision_on_groups(prec, mean.along, mean.plate, mean.labels)
    if precision is None:
        return None
    fused = FactorNode(GROUPED_GAUSSIAN, f.name, {"mean": mean.source, "precision": precision}, (mean.along,),
                       f.method, {})
    fused.source = f
    return fused


def _grouped_stats(f: FactorNode) -> dict[str, Any]:
    """Per-group counts, sums of y and of y² of a Gaussian factor on a[g] with fully observed y."""
    mean = f.edges["mean"]
    yv = f.edges["out"].value.reshape(-1)
    G = mean.along.size
    return {"count": mean.counts, "sum": np.bincount(mean.labels, weights=yv, minlength=G),
            "sumsq": np.bincount(mean.labels, weights=yv * yv, minlength=G)}


# ------------------------------------------------------------------------ grouped linear
class _NotLinear(Exception):
    """The mean is not a sum of (constant column) × (Gaussian coefficient) terms the fused factor takes."""


def _terms(node: Any, coef: np.ndarray, rows: Any, uses: dict[int, int]) -> list[tuple]:
    """The mean ``node`` (on the rows' plate only) as terms (kind, variable, indexed view or None, column(s)):
    kind "s" a scalar Gaussian coefficient (one column), "c" a scalar Gaussian plated over a consumed column
    plate (N × D columns), "v" an MvGaussian (N × D columns)."""
    if isinstance(node, Deterministic):
        if uses.get(id(node)) != 1 or not set(node.plates) <= {rows}:
            raise _NotLinear
        if node.op in (Sum, Product):
            a, b = node.parents["a"], node.parents["b"]
            if node.op is Sum:
                if not (isinstance(a, Deterministic | Variable | Indexed) and isinstance(b, Deterministic | Variable
                                                                                          | Indexed)):
                    raise _NotLinear  # a constant offset: left to the generic path
                return _terms(a, coef, rows, uses) + _terms(b, coef, rows, uses)
            const = [r for r in ("a", "b") if not isinstance(node.parents[r], Deterministic | Variable | Indexed)]
            if len(const) != 1:
                raise _NotLinear  # a product of two random nodes
            c = np.asarray(node.parents[const[0]], dtype=float)
            c = np.broadcast_to(expand(c, node.params["src"][const[0]], node.params["dst"], 0), node.params["sizes"])
            other = node.parents["b" if const[0] == "a" else "a"]
            return _terms(other, coef * c.reshape(-1), rows, uses)
        if node.op is Inner:
            X = node.params["X"]
            w = node.parents["w"]
            if node.plates != (rows,) or X.ndim != 2:
                raise _NotLinear
            cols = X * coef[:, None]
            src = w.source if isinstance(w, Indexed) else w
            if node.params["mean_field"]:
                consumed = node.params["consumed"]
                if isinstance(w, Indexed) and src.plates == (w.along, consumed) and node.params["rowwise"]:
                    return [("c", src, w, cols)]
                if isinstance(w, Variable) and w.plates == (consumed,):
                    return [("c", w, None, cols)]
                raise _NotLinear
            if src.family is not MvGaussian:
                raise _NotLinear
            if isinstance(w, Indexed) and src.plates == (w.along,) and node.params["rowwise"]:
                return [("v", src, w, cols)]
            if isinstance(w, Variable) and not w.plates:
                return [("v", w, None, cols)]
            raise _NotLinear
        raise _NotLinear
    if isinstance(node, Indexed):
        if node.family is Gaussian and node.source.plates == (node.along,) and node.plates == (rows,):
            return [("s", node.source, node, coef[:, None])]
        raise _NotLinear
    if isinstance(node, Variable) and node.family is Gaussian and not node.plates:
        return [("s", node, None, coef[:, None])]
    raise _NotLinear


def _grouped_linear_plan(f: FactorNode, uses: dict[int, int], handled: set[str] = frozenset()) -> dict | None:
    """How a Gaussian factor maps onto the grouped linear-Gaussian factor, or None if it does not."""
    y, mean, prec = f.edges.get("out"), f.edges.get("mean"), f.edges.get("precision")
    if not (f.ftype is GAUSSIAN and f.method == "default" and isinstance(y, Variable) and y.is_observed
            and isinstance(mean, Deterministic) and mean.op in (Sum, Product, Inner) and len(f.plates) == 1
            and y.plates == f.plates == mean.plates):
        return None
    rows = f.plates[0]
    try:
        terms = _terms(mean, np.ones(rows.size), rows, uses)
    except _NotLinear:
        return None
    views = [t[2] for t in terms if t[2] is not None]
    if not views:
        return None  # no gathered coefficient: the linear-Gaussian fusion (or the generic path) applies
    first = views[0]
    if any(v.along is not first.along or v.plate is not rows or not np.array_equal(v.labels, first.labels)
           for v in views[1:]):
        return None
    names = [t[1].name for t in terms]
    if len(set(names)) != len(names) or set(names) & set(handled):
        return None
    scalars = [t for t in terms if t[0] in "sc"]
    vectors = [t for t in terms if t[0] == "v"]
    if len(scalars) > len(SCALAR_SLOTS) or len(vectors) > len(VECTOR_SLOTS):
        return None
    precision = _precision_on_groups(prec, first.along, rows, first.labels)
    if precision is None:
        return None
    edges, consumed, layout, columns = {}, {}, [], []
    start = 0
    for slot, t in [*zip(SCALAR_SLOTS, scalars, strict=False), *zip(VECTOR_SLOTS, vectors, strict=False)]:
        kind, var, view, cols = t
        edges[slot] = var
        if kind == "c":
            consumed[slot] = next(p for p in var.plates if p is not first.along)
        size = cols.shape[1]
        layout.append((slot, start, size, kind == "v"))
        columns.append(cols)
        start += size
    edges["precision"] = precision
    return {"edges": edges, "consumed": consumed, "layout": tuple(layout), "columns": columns,
            "labels": first.labels, "groups": first.along}


def _fuse_grouped_linear(f: FactorNode, uses: dict[int, int], handled: set[str]) -> FactorNode | None:
    plan = _grouped_linear_plan(f, uses, handled)
    if plan is None:
        return None
    fused = FactorNode(GROUPED_LINEAR_GAUSSIAN, f.name, plan["edges"], (plan["groups"],), f.method, {})
    fused.consumed.update(plan["consumed"])
    fused.source = f
    return fused


def _grouped_linear_stats(f: FactorNode) -> dict[str, Any]:
    """Per-group Gram matrices of the design columns, their products with y, Σy² and counts."""
    plan = _grouped_linear_plan(f, {id(d): 1 for d in _dets(f.edges["mean"])})
    R = np.concatenate(plan["columns"], axis=1)
    return grouped_linear_stats(plan["labels"], R, f.edges["out"].value.reshape(-1), plan["groups"].size,
                                plan["layout"])


def _dets(node: Any) -> list[Deterministic]:
    if not isinstance(node, Deterministic):
        return []
    return [node] + [d for p in node.parents.values() for d in _dets(p)]


# ------------------------------------------------------------------------ factor analysis
def _factor_analyses(model, uses: dict[int, int], handled: set[str]) -> dict[int, FactorNode | None]:
    """The factor-analysis fusions: id(likelihood) -> the fused factor, id(the scores' prior) -> None."""
    out: dict[int, FactorNode | None] = {}
    users: dict[int, int] = {}  # node -> how many factor edges and expression operands use it
    for a in [*(a for f in model.factors for a in f.edges.values()),
              *(a for d in model.deterministics for a in d.parents.values())]:
        users[id(a)] = users.get(id(a), 0) + 1
    for f in model.factors:
        y, mean, prec = f.edges.get("out"), f.edges.get("mean"), f.edges.get("precision")
        if not (f.ftype is GAUSSIAN and f.method == "default" and isinstance(y, Variable)
                and isinstance(y.mask, np.ndarray) and users.get(id(y)) == 1 and not checks.is_dask(y.value)
                and isinstance(mean, Deterministic) and mean.op is Dot and uses.get(id(mean)) == 1
                and len(f.plates) == 2 and y.plates == f.plates == mean.plates
                and isinstance(prec, Variable) and prec.family is Gamma):
            continue
        roles = [("a", "b")] if mean.params.get("intercept") else [("a", "b"), ("b", "a")]
        for zr, wr in roles:
            z, w = mean.parents[zr], mean.parents[wr]
            if _scores_and_loadings(z, w, prec, users, handled):
                consumed = {"out": z.plates[0], "loadings": w.plates[0]}
                if prec.plates:
                    consumed["precision"] = w.plates[0]
                fused = FactorNode(FACTOR_ANALYSIS, f.name, {"out": z, "loadings": w, "precision": prec}, (),
                                   f.method, {}, consumed)
                fused.source, fused.scores_prior = f, z.prior  # what it replaces, whose data rebind() reads again
                out[id(f)], out[id(z.prior)] = fused, None
                break
    return out


def _scores_and_loadings(z: Any, w: Any, prec: Variable, users: dict[int, int], handled: set[str]) -> bool:
    """Whether z can be the fused factor's scores and w its loadings: latent vectors on one plate each (two
    plates), z used only by its constant proper prior and this product, τ one Gamma or one per column of w."""
    if not all(isinstance(v, Variable) and v.family is MvGaussian and len(v.plates) == 1 and v.mask is None
               and v.name not in handled for v in (z, w)) or z.plates[0] is w.plates[0]:
        return False
    prior = z.prior
    lam = prior.params.get("precision_raw") if prior is not None else None
    return (prior is not None and prior.ftype is MV_GAUSSIAN_FIXED and prior.plates == z.plates
            and users.get(id(z)) == 2 and isinstance(prior.edges.get("mean"), np.ndarray)
            and isinstance(lam, np.ndarray) and bool(np.any(lam)) and prec.plates in ((), w.plates))


def _factor_analysis_stats(f: FactorNode) -> dict[str, Any]:
    """The data of a factor-analysis likelihood as (N, D) rows × columns (missing entries 0, their mask), its
    column sums, and the scores' prior."""
    src, prior = f.source, f.scores_prior
    y, mean, z = src.edges["out"], src.edges["mean"], f.edges["out"]
    rows_first = y.plates[0] is z.plates[0]
    X = np.asarray(y.value, dtype=float)
    M = None if y.mask is None or y.mask.all() else np.asarray(y.mask, dtype=bool)
    if not rows_first:
        X, M = X.T, (None if M is None else M.T)
    X = np.ascontiguousarray(np.where(M, X, 0.0) if M is not None else X)
    K = z.event_shape[0]
    lam = np.asarray(prior.params["precision_raw"], dtype=float)
    lam = lam * np.eye(K) if lam.ndim == 0 else (np.diag(lam) if lam.ndim == 1 else lam)
    m0 = np.broadcast_to(np.asarray(prior.edges["mean"], dtype=float), (K,)).copy()
    count = np.full(X.shape[1], float(X.shape[0])) if M is None else M.sum(0).astype(float)
    colmean = X.sum(0) / np.maximum(count, 1.0)
    gram = None
    if M is None:  # the centred Gram matrix, for the sums over the rows (factors.factor_analysis._gram_sums)
        upper = dsyrk(1.0, (X - colmean).T)  # one triangle of X_cᵀX_c (the transpose is Fortran-ordered: no copy)
        gram = np.triu(upper) + np.triu(upper, 1).T
    return {"X": X, "mask": None if M is None else np.ascontiguousarray(M, dtype=float), "gram": gram,
            "colmean": colmean,
            "xx": np.einsum("nd,nd->d", X, X), "colsum": X.sum(0), "count": count, "K": K,
            "intercept": bool(mean.params.get("intercept")), "shared_noise": not f.edges["precision"].plates,
            "prior_precision": lam, "prior_logdet": float(np.linalg.slogdet(lam)[1]), "prior_mean": m0,
            "prior_shift": lam @ m0 if m0.any() else None}
