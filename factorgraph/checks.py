"""Build-time validation helpers: every error names the variable and the offending value."""

from __future__ import annotations

from typing import Any

import numpy as np

from .nodes import ModelError


def _show(value: Any) -> str:
    arr = np.asarray(value)
    if arr.size <= 6:
        return repr(value if np.ndim(value) == 0 else arr.tolist())
    return f"array of shape {arr.shape}"


def constant(value: Any, what: str) -> np.ndarray:
    """A finite float array."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"{what} must be a number or an array of numbers, got {value!r}") from None
    if arr.size == 0:
        raise ModelError(f"{what} is empty")
    if not np.all(np.isfinite(arr)):
        bad = arr[~np.isfinite(arr)].ravel()[0]
        raise ModelError(f"{what} must be finite, got {bad!r} in {_show(value)}")
    return arr


def positive(value: Any, what: str) -> np.ndarray:
    arr = constant(value, what)
    if np.any(arr <= 0):
        bad = arr[arr <= 0].ravel()[0]
        raise ModelError(f"{what} must be positive, got {bad!r} in {_show(value)}")
    return arr


def nonnegative(value: Any, what: str) -> np.ndarray:
    arr = constant(value, what)
    if np.any(arr < 0):
        bad = arr[arr < 0].ravel()[0]
        raise ModelError(f"{what} must be non-negative, got {bad!r} in {_show(value)}")
    return arr


def observed_array(value: Any, mask: Any, shape: tuple[int, ...], name: str,
                   event_ndim: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Validate observed data against the variable's shape; returns (values, mask).

    ``mask`` (plate-shaped, True where observed) may mark entries as missing; only observed
    entries must be finite.  Without a mask every entry must be finite.
    """
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"observed data of {name!r} must be numeric, got {value!r}") from None
    if arr.size == 0:
        raise ModelError(f"observed data of {name!r} is empty")
    if arr.shape != shape:
        raise ModelError(f"observed data of {name!r} has shape {arr.shape}, but the variable's plates "
                         f"and event give shape {shape}")
    plate_shape = shape[: len(shape) - event_ndim]
    if mask is None:
        m = np.ones(plate_shape, dtype=bool)
    else:
        m = np.asarray(mask)
        if m.dtype != bool:
            raise ModelError(f"mask of {name!r} must be boolean (True = observed), got dtype {m.dtype}")
        if m.shape != plate_shape:
            raise ModelError(f"mask of {name!r} has shape {m.shape}, expected {plate_shape}")
    seen = arr[m] if event_ndim == 0 else arr[m].reshape(-1)
    if not np.all(np.isfinite(seen)):
        bad = seen[~np.isfinite(seen)][0]
        raise ModelError(f"observed data of {name!r} contains {bad!r}; mark missing entries with "
                         "mask=... (True = observed)")
    return arr, m
