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

from .nodes import Deterministic, Gate, Indexed, ModelError, Variable


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
                    event_ndim: int) -> Gate:
    """Validate ``fg.select(values, z)`` given for a constant argument: each of the K rows must pass
    ``check`` and have exactly ``event_ndim`` axes (the rows are selected, not broadcast over plates)."""
    vals = check(x.source, f"{name!r}: {what} (selected by {x.selector.name!r})")
    if vals.ndim != event_ndim + 1:
        raise ModelError(f"{name!r}: fg.select values for {what} must have shape (K{', D' * event_ndim}) (one row "
                         f"per category of {x.selector.name!r}), got shape {vals.shape}")
    return Gate(np.asarray(vals, float), x.selector, x.plate)


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


__all__ = ["constant_param", "is_random", "param_gates", "select_constant", "source_node", "source_plates"]
