"""Validation helpers for the keyword constructors: every error names the parameter and the value."""

from __future__ import annotations

import numpy as np


def _describe(a: np.ndarray, bad: np.ndarray) -> str:
    """The offending value (and its index when ``a`` is an array)."""
    if a.ndim == 0:
        return repr(a.item())
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    n = int(np.count_nonzero(bad))
    more = f" ({n} of {a.size} entries invalid)" if n > 1 else ""
    return f"{a[idx].item()!r} at index {idx}{more}"


def as_array(owner: str, name: str, value, *, min_ndim: int = 0) -> np.ndarray:
    """``value`` as a finite float array with at least ``min_ndim`` axes."""
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{owner}: {name} must be numeric, got {value!r}") from err
    if a.ndim < min_ndim:
        raise ValueError(f"{owner}: {name} must have at least {min_ndim} axis/axes, got shape {a.shape} "
                         f"(value {value!r})")
    if a.size == 0 and min_ndim and a.shape[-1] == 0:
        raise ValueError(f"{owner}: {name} has an empty event axis, shape {a.shape}")
    bad = ~np.isfinite(a)
    if bad.any():
        raise ValueError(f"{owner}: {name} must be finite, got {_describe(a, bad)}")
    return a


def positive(owner: str, name: str, value, *, min_ndim: int = 0) -> np.ndarray:
    """``value`` as a finite, strictly positive float array."""
    a = as_array(owner, name, value, min_ndim=min_ndim)
    bad = ~(a > 0)
    if bad.any():
        raise ValueError(f"{owner}: {name} must be positive, got {_describe(a, bad)}")
    return a


def in_unit_interval(owner: str, name: str, value) -> np.ndarray:
    """``value`` as a float array with entries in [0, 1]."""
    a = as_array(owner, name, value)
    bad = ~((a >= 0) & (a <= 1))
    if bad.any():
        raise ValueError(f"{owner}: {name} must lie in [0, 1], got {_describe(a, bad)}")
    return a


def broadcast(owner: str, **arrays: np.ndarray) -> list[np.ndarray]:
    """Broadcast scalar-event arrays to a common shape, naming them when impossible."""
    try:
        return [np.array(b) for b in np.broadcast_arrays(*arrays.values())]
    except ValueError as err:
        shapes = ", ".join(f"{k} {np.shape(v)}" for k, v in arrays.items())
        raise ValueError(f"{owner}: shapes do not broadcast: {shapes}") from err


def batch_of(owner: str, **shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast of several batch shapes, naming the parameters when impossible."""
    try:
        return tuple(np.broadcast_shapes(*shapes.values()))
    except ValueError as err:
        desc = ", ".join(f"{k} batch shape {v}" for k, v in shapes.items())
        raise ValueError(f"{owner}: batch shapes do not broadcast: {desc}") from err


def exactly_one(owner: str, **options) -> str:
    """The name of the single option that is not None (error if none or several are given)."""
    given = [k for k, v in options.items() if v is not None]
    if len(given) != 1:
        names = " or ".join(options)
        raise ValueError(f"{owner}: give exactly one of {names}, got {given or 'none'}")
    return given[0]
