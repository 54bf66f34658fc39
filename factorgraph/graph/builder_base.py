"""What every builder shares: checking a parent argument, the plates a variable gets from its parents, and
attaching the variable with its prior factor (``_finish``).

A builder (``builders``, ``discrete``, ``counts``, ``covariance``, ``scales``, ...) checks its arguments, makes
the ``Variable`` on the union of its own and its parents' plates, and hands it to ``_finish``, which checks the
observed data, refuses gated arguments with different selectors, checks that constants fit the factor's
plates, and registers the variable and the factor in the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distributions import Gaussian
from factorgraph.graph import checks
from factorgraph.graph.gates import param_gates, plated, select_constant
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import (
    Deterministic,
    FactorNode,
    Gate,
    Indexed,
    ModelError,
    Node,
    Plate,
    PrecisionOf,
    Variable,
)
from factors.onehot import OneHot


def _plates(model: Model, plates: Sequence[Plate], name: str) -> tuple[Plate, ...]:
    return checks.plate_list(plates, model, name)


def _check_parent(model: Model, x: Any, name: str, edge: str, families: tuple[type, ...]) -> None:
    node = x.source if isinstance(x, Gate) else x
    if isinstance(x, Gate) and isinstance(node, np.ndarray):
        node = None
    if isinstance(node, Variable | Deterministic | Indexed):
        if node.model is not model:
            raise ModelError(f"{name!r}: {edge} {node.name!r} belongs to another model")
        fam = Gaussian if isinstance(node, Deterministic) else node.family
        if fam not in families:
            raise ModelError(f"{name!r}: {edge} must be {' or '.join(f.__name__ for f in families)}, got "
                             f"{'a Gaussian expression' if isinstance(node, Deterministic) else node.family.__name__} "
                             f"{node.name!r}")
    if isinstance(x, Gate) and x.selector.model is not model:
        raise ModelError(f"{name!r}: the selector {x.selector.name!r} belongs to another model")


def _parent_plates(args: Sequence[Any]) -> list[Plate]:
    out: list[Plate] = []
    for a in args:
        if isinstance(a, Gate):
            if isinstance(a.source, Variable):
                out += [p for p in a.source.plates if p is not a.plate]
            out += list(a.selector.plates)
        elif isinstance(a, Node):
            out += list(a.plates)
    return out


def _selector_key(sel: Any) -> tuple:
    """A gate's selector up to equivalence: z itself, or z gathered by the same labels onto the same plate (two
    writings of ``z[g]`` in one factor, ``mu[z[g]]`` and ``L[z[g]]``, are one selector)."""
    if isinstance(sel, Indexed):
        return (id(sel.source), sel.along, sel.plate, sel.labels.tobytes())
    return (id(sel),)


def _finish(model: Model, var: Variable, ftype: Any, edges: dict[str, Any], params: dict[str, Any],
            observed: Any, mask: Any, consumed: dict[str, Plate] | None = None) -> Variable:
    """Attach observations, create the prior factor and register both."""
    labels_only = isinstance(observed, OneHot)  # observed class labels are held as labels, never as rows × K
    checks.array_size(var.shape + (() if labels_only else tuple(d or 1 for d in var.event_shape)), repr(var.name))
    if isinstance(observed, OneHot):  # class labels, checked by checks.integer_labels
        var.value, var.mask = observed, mask
    elif observed is not None:
        value, m = checks.observed_array(observed, mask, var.shape + var.event_shape, var.name,
                                         len(var.event_shape))
        var.value, var.mask = value, m
    elif mask is not None:
        raise ModelError(f"{var.name!r}: a mask was given without observed data")
    gates = [a for a in edges.values() if isinstance(a, Gate)] + param_gates(params)
    if len({_selector_key(g.selector) for g in gates}) > 1:
        raise ModelError(f"{var.name!r}: all gated arguments of one factor must share one selector")
    fplates = [*var.plates, *_parent_plates([*edges.values(), *param_gates(params)])]
    fplates += [g.plate for g in gates]
    consumed = consumed or {}
    fplates = [p for p in fplates if p not in consumed.values()]
    fshape = tuple(p.size for p in model.sorted_plates(fplates))
    checks.array_size(fshape, f"the prior factor of {var.name!r}")
    for edge, arg in edges.items():  # constants never add plates (an ARD vector is over components, not plates)
        if isinstance(arg, np.ndarray) and edge in ftype.edges and edge not in consumed and not params.get("ard"):
            k = ftype.edges[edge].event_ndims[0]
            checks.fits(arg.shape[: max(arg.ndim - k, 0)], fshape, f"{var.name!r}: {edge}")
        elif isinstance(arg, Gate) and isinstance(arg.source, np.ndarray) and edge in ftype.edges:
            # fg.select(values, z): one row per category, then axes over the variable's last plates, then the
            # edge's event axes
            edges[edge] = plated(arg, tuple(var.plates), ftype.edges[edge].event_ndims[0], var.name, edge)
    factor = FactorNode(ftype, f"{ftype.name}({var.name})", {"out": var, **edges},
                        model.sorted_plates(fplates), "default", params, consumed)
    var.prior = factor
    model.add_variable(var)
    model.add_factor(factor)
    return var


def _var_plates(model: Model, given: Sequence[Plate], name: str, parents: Sequence[Any]) -> tuple[Plate, ...]:
    given = _plates(model, given, name)
    return model.sorted_plates([*given, *_parent_plates(parents)])


def _scalar_arg(model: Model, x: Any, name: str, edge: str, families: tuple[type, ...],
                positive: bool = False) -> Any:
    if isinstance(x, Gate) and isinstance(x.source, np.ndarray):  # fg.select(values, z): check the values
        return select_constant(x, name, edge, checks.positive if positive else checks.constant, 0, True)
    if isinstance(x, Variable | Deterministic | Gate | Indexed):
        _check_parent(model, x, name, edge, families)
        return x
    if isinstance(x, PrecisionOf):
        raise ModelError(f"{name!r}: {x.variable.name!r}.tau can only be the precision of a Gaussian "
                         f"whose mean is inner(X, {x.variable.name!r})")
    return (checks.positive if positive else checks.constant)(x, f"{name!r}: {edge}")
