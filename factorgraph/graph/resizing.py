"""Which plates new data resize, and whether they may: the checks ``model.set_data`` and ``fg.predict`` run
before any builder is re-run.

A data node spans the plates of its leading axes (``Data.axes``); a plate's new size is read off the new
arrays, and must agree between them.  Every other data node on a resized plate must be given too (except
the observed values and masks of the variables ``fg.predict`` draws), and nothing else may pin the plate's
size: constant labels of ``x[idx]``, the constant X of an ``fg.inner``, a constant operand of an expression,
an observed variable that no public builder made.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from factorgraph.graph.nodes import Data, Deterministic, Indexed, ModelError, Node, Plate, Variable


def observed_roles(v: Variable) -> set[str]:
    """The names of the data nodes holding the observed values or the mask of ``v``."""
    return {n for r, n in getattr(v, "data_roles", {}).items() if r in _OBSERVED}


_OBSERVED = ("observed", "mask")


def new_sizes(model: Any, new: dict[str, Any]) -> dict[Plate, tuple[int, str]]:
    sizes: dict[Plate, tuple[int, str]] = {}
    for name, arr in new.items():
        d = model.data[name]
        shape = np.shape(arr)
        if len(shape) != len(d.shape):
            raise ModelError(f"set_data: {name!r} has shape {shape}, but the data node has {len(d.shape)} axes "
                             f"(shape {d.shape})")
        for i in range(len(shape)):
            if i not in d.axes and shape[i] != d.shape[i]:
                raise ModelError(f"set_data: {name!r} has shape {shape}; its axis {i} spans no plate and must keep "
                                 f"its size {d.shape[i]} (shape {d.shape})")
        for i, p in d.axes.items():
            s = shape[i]
            if p in sizes and sizes[p][0] != s:
                raise ModelError(f"set_data: plate {p.name!r} would get size {sizes[p][0]} from {sizes[p][1]!r} but "
                                 f"{s} from {name!r}: data on one plate must agree")
            sizes[p] = (s, name)
    return sizes


def check_resizable(model: Any, new: dict[str, Any], sizes: dict, resized: dict[Plate, int],
                     predicted: frozenset[str]) -> None:
    for p, s in resized.items():
        src = sizes[p][1]
        for d in model.data.values():
            if d.name in new or p not in d.plates:
                continue
            if all(isinstance(u, Variable) and u.name in predicted and d.name in observed_roles(u) for u in d.uses):
                continue
            raise ModelError(f"set_data: plate {p.name!r} changes size from {p.size} to {s} (from {src!r}), but the "
                             f"data node {d.name!r} (shape {d.shape}) also spans it{_role(d)}: give its new values in "
                             "the same call")
        for d in model.deterministics:
            if d.op.name == "inner":
                X = d.params["X"]
                if d.params.get("data") is None and any(
                        q is p for q in d.plates if d.plates.index(q) in d.params["x_axes"]):
                    raise ModelError(f"set_data: plate {p.name!r} changes size from {p.size} to {s}, but the inputs "
                                     f"of {d.name!r} (shape {X.shape}) are a constant: declare them with fg.data")
            else:
                for role, a in d.parents.items():
                    if d.params.get("data", {}).get(role) in new:
                        continue
                    if not isinstance(a, Node) and p.index in d.params["src"][role] and np.size(a) > 1:
                        axis = np.ndim(a) - len(d.params["src"][role]) + d.params["src"][role].index(p.index)
                        if np.shape(a)[axis] != 1:
                            raise ModelError(f"set_data: plate {p.name!r} changes size from {p.size} to {s}, but "
                                             f"{d.name!r} has a constant operand of shape {np.shape(a)} on it")
        for x in indexed(model):
            if p is x.plate and getattr(x, "data", None) in new:
                continue
            if p is x.plate or p is x.along:
                raise ModelError(f"set_data: plate {p.name!r} changes size from {p.size} to {s}, but the indexed view "
                                 f"{x.name!r} has constant labels on it")
        for v in model.variables.values():
            if p in v.plates and v.name not in model.calls and v.name not in predicted and v.mask is not None:
                raise ModelError(f"set_data: plate {p.name!r} changes size from {p.size} to {s}, but the observed "
                                 f"{v.name!r} was not built by a public builder and cannot be rebuilt")


def _role(d: Data) -> str:
    """How the data node is read, for messages: " (the exposure of 'y')", " (the inputs of 'inner_1')", ..."""
    for u in d.uses:
        if isinstance(u, Variable):
            roles = [r for r, n in getattr(u, "data_roles", {}).items() if n == d.name]
            if roles:
                what = "observed values" if roles[0] == "observed" else roles[0]
                return f" (the {what} of {u.name!r})"
        elif isinstance(u, Indexed):
            return f" (the labels of {u.source.name!r} in {u.name!r})"
        elif isinstance(u, Deterministic):
            return f" (the {'inputs' if u.op.name == 'inner' else 'operand'} of {u.name!r})"
    return ""


def indexed(model: Any) -> list[Indexed]:
    args = [a for f in model.factors for a in f.edges.values()] + [
        a for d in model.deterministics for a in d.parents.values()]
    seen: dict[int, Indexed] = {}
    for a in args:
        while isinstance(a, Indexed) and id(a) not in seen:
            seen[id(a)] = a
            a = a.source
    return list(seen.values())


def data_plates(model: Any, names: Any) -> set[Plate]:
    """The plates spanned by the named data nodes."""
    return {p for n in names for p in model.data[n].plates}


__all__ = ["check_resizable", "data_plates", "indexed", "new_sizes", "observed_roles"]
