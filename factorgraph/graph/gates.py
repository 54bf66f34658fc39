"""Gated arguments shared by every builder: ``v[z]`` (a plated variable selected by z) and
``fg.select(values, z)`` (constants selected by z), for edges and for constant parameters.

A factor with a gated argument is a mixture over the selector's categories: it is replicated over the
gate's plate and replicate k is weighted by q(z = k), in its messages, in its E[log f] and in the
message to the selector (E[log f] per category).  The selector is a Categorical, or a Bernoulli, which
selects like a two-category Categorical (category 0 = False, 1 = True: Infer.NET's If/IfNot gates).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from factorgraph.graph.nodes import Deterministic, Gate, Indexed, ModelError, Variable


def is_random(x: Any) -> bool:
    """Whether an argument is a random node or a gate over one (as opposed to a constant)."""
    return isinstance(x, Variable | Deterministic | Indexed) or (
        isinstance(x, Gate) and not isinstance(x.source, np.ndarray))


def source_plates(x: Any) -> tuple:
    """Plates a random argument brings to its factor, a gate's category plate excluded."""
    if isinstance(x, Gate):
        src = () if isinstance(x.source, np.ndarray) else tuple(p for p in x.source.plates if p is not x.plate)
        return src + tuple(x.selector.plates)
    return tuple(x.plates)


def source_node(x: Any) -> Any:
    """The node an argument points at: the gated variable for ``v[z]``."""
    return x.source if isinstance(x, Gate) else x


def select_constant(x: Gate, name: str, what: str, check: Callable[[Any, str], np.ndarray],
                    event_ndim: int, over_plates: bool = False) -> Gate:
    """Validate ``fg.select(values, z)`` given for a constant argument: each of the K rows must pass
    ``check`` and have exactly ``event_ndim`` axes (the rows are selected, not broadcast over plates)."""
    vals = check(x.source, f"{name!r}: {what} (selected by {x.selector.name!r})")
    if vals.ndim < event_ndim + 1 or (vals.ndim > event_ndim + 1 and not over_plates):
        raise ModelError(f"{name!r}: fg.select values for {what} must have shape (K{', D' * event_ndim}) (one row "
                         f"per category of {x.selector.name!r}), got shape {vals.shape}")
    # with ``over_plates`` (an edge), axes beyond the categories and before the event run over the variable's
    # last plates (``plated``, applied by the builder)
    return Gate(np.asarray(vals, float), x.selector, x.plate)


def plated(g: Gate, var_plates: tuple, event_ndim: int, name: str, what: str) -> Gate:
    """``fg.select(values, z)`` whose values have axes between the categories and the event axes, e.g. (K, D)
    prototypes for a Bernoulli over pixels: those axes line up with the variable's last plates (as numpy
    broadcasting aligns trailing axes).  The array is transposed to the model's plate order and the gate
    records its plates (``Gate.layout``)."""
    extra = g.source.ndim - 1 - event_ndim
    if extra <= 0:
        return g
    sizes = g.source.shape[1:1 + extra]
    aligned = var_plates[-extra:] if extra <= len(var_plates) else ()
    if not aligned or any(s not in (p.size, 1) for s, p in zip(sizes, aligned, strict=True)):
        raise ModelError(f"{name!r}: fg.select values for {what} have shape {g.source.shape}: one row per category "
                         f"of {g.selector.name!r}, then axes {sizes} that must match the variable's last plates "
                         f"{[(p.name, p.size) for p in var_plates]} (or be 1), then the {event_ndim} event axes")
    values = g.source.reshape((g.source.shape[0],) + tuple(s for s in sizes if s != 1)
                              + g.source.shape[1 + extra:])  # a size-1 axis: the same along that plate
    own = (g.plate, *(p for s, p in zip(sizes, aligned, strict=True) if s != 1))
    layout = tuple(sorted(own, key=lambda p: p.index))
    perm = [own.index(p) for p in layout] + list(range(len(own), values.ndim))
    return Gate(np.transpose(values, perm), g.selector, g.plate, layout)


def constant_param(x: Any, name: str, what: str, check: Callable[[Any, str], np.ndarray],
                   event_ndim: int = 0) -> Any:
    """A parameter that must be constant, possibly selected by ``fg.select(values, z)``.

    A gate over a random variable (``v[z]``) or a random variable itself is refused: this parameter
    has no message rule, so it cannot be random."""
    if isinstance(x, Gate):
        if not isinstance(x.source, np.ndarray):
            raise ModelError(f"{name!r}: {what} cannot be gated by a random variable ({x.source.name!r}"
                             f"[{x.selector.name!r}]): it must be a constant, or constants selected with "
                             f"fg.select(values, {x.selector.name!r})")
        return select_constant(x, name, what, check, event_ndim)
    if isinstance(x, Variable | Deterministic | Indexed):
        raise ModelError(f"{name!r}: {what} must be a constant (or fg.select of constants), got the random "
                         f"variable {x.name!r}")
    return check(x, f"{name!r}: {what}")


def param_gates(params: dict[str, Any]) -> list[Gate]:
    return [v for v in params.values() if isinstance(v, Gate)]


def precision_matrices(values: np.ndarray, D: int) -> np.ndarray:
    """(K, D, D) precision matrices from K scalars (λI), K vectors (diagonal) or K matrices."""
    values = np.asarray(values, float)
    if values.ndim == 1:
        return values[:, None, None] * np.eye(D)
    if values.ndim == 2:
        return values[:, :, None] * np.eye(values.shape[1])
    return values


__all__ = ["constant_param", "is_random", "param_gates", "plated", "precision_matrices", "select_constant",
           "source_node", "source_plates"]
