"""Fusing Gaussian likelihoods with fully observed outputs into factors that run on cached sums.

Three substitutions, made when a model is compiled (each keeps the replaced factor as ``source``, whose data
``bind`` reads again after ``model.set_data``):

* ``y ~ N(inner(X, w), τ⁻¹)``, w one MvGaussian: the linear-Gaussian factor on XᵀX, Xᵀy, yᵀy
  (factors/linear_gaussian.py);
* ``y ~ N(a[g], τ⁻¹)``: the grouped-Gaussian factor on per-group counts, sums and sums of squares
  (factors/grouped_gaussian.py);
* ``y ~ N(mean, τ⁻¹)`` with a mean linear in Gaussian coefficients, at least one gathered by labels, e.g.
  ``a[g] + b[g] * x + fg.inner(X, w)``: the grouped linear-Gaussian factor on per-group Gram matrices
  (factors/grouped_linear_gaussian.py).  The mean is read as Σ_terms (constant column) × (coefficient); a
  term that is not of that form (a product of two random nodes, a constant offset, a plated-over-rows
  variable, a gate), coefficients gathered by different labels, a variable used twice, or a variable taken
  over by a global handler leaves the factor to the generic path, which gives the same fixed point.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distributions import Gaussian, MvGaussian
from factorgraph.graph.nodes import Deterministic, FactorNode, Gate, Indexed, Variable
from factors.data_products import cached_gram, cached_yty
from factors.deterministic import Inner, Product, Sum
from factors.gaussian import GAUSSIAN
from factors.grouped_gaussian import GROUPED_GAUSSIAN
from factors.grouped_linear_gaussian import (
    GROUPED_LINEAR_GAUSSIAN,
    SCALAR_SLOTS,
    VECTOR_SLOTS,
    grouped_linear_stats,
)
from factors.linear_gaussian import LINEAR_GAUSSIAN
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
    out = []
    for f in model.factors:
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
