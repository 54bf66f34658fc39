"""Checks of single values and options: ``number`` (one real number, within bounds), ``integer``, ``positive_int``,
``flag`` (a bool), ``choice`` (one of a few strings) and ``seed`` (None or an integer ≥ 0)."""

from __future__ import annotations

from typing import Any

import numpy as np

from factorgraph.graph.checks.arrays import _item, _short
from factorgraph.graph.nodes import ModelError


def number(value: Any, what: str, *, low: float | None = None, high: float | None = None,
           low_open: bool = False, high_open: bool = False, none: bool = False) -> float | None:
    """One finite real number as a Python float: a Python or numpy scalar or a 0-d array (not a bool,
    a string or a complex number), within [low, high] (an open end with ``low_open``/``high_open``).
    ``none=True`` lets None through."""
    if value is None and none:
        return None
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer | np.floating):
        raise ModelError(f"{what} must be a real number{' or None' if none else ''}, got {_short(value)}")
    try:
        x = float(value)
    except OverflowError:
        raise ModelError(f"{what} is too large, got {_short(value)}") from None
    if not np.isfinite(x):
        raise ModelError(f"{what} must be finite, got {x!r}")
    if low is not None and (x < low or (low_open and x == low)):
        raise ModelError(f"{what} must be {'>' if low_open else '≥'} {low:g}, got {_item(value)!r}")
    if high is not None and (x > high or (high_open and x == high)):
        raise ModelError(f"{what} must be {'<' if high_open else '≤'} {high:g}, got {_item(value)!r}")
    return x


def integer(value: Any, what: str, *, low: int | None = None, high: int | None = None,
            none: bool = False) -> int | None:
    """One integer as a Python int (Python or numpy integer types; bools and floats are refused), within
    [low, high].  ``none=True`` lets None through."""
    if value is None and none:
        return None
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise ModelError(f"{what} must be an integer{' or None' if none else ''}, got {_short(value)}")
    x = int(value)
    if low is not None and x < low:
        raise ModelError(f"{what} must be an integer ≥ {low}, got {x!r}")
    if high is not None and x > high:
        raise ModelError(f"{what} must be an integer ≤ {high}, got {x!r}")
    return x


def flag(value: Any, what: str) -> bool:
    """A bool (Python or numpy)."""
    if not isinstance(value, bool | np.bool_):
        raise ModelError(f"{what} must be True or False, got {_short(value)}")
    return bool(value)


def choice(value: Any, options: Any, what: str) -> str:
    """One of the strings ``options``."""
    options = tuple(options)
    if not isinstance(value, str) or value not in options:
        raise ModelError(f"{what} must be one of {options}, got {_short(value)}")
    return value


def seed(value: Any, what: str = "seed") -> int | None:
    """A random seed: None (fresh entropy) or an integer ≥ 0 (Python or numpy)."""
    if value is None:
        return None
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer) or value < 0:
        raise ModelError(f"{what} must be None or an integer ≥ 0, got {_short(value)}")
    return int(value)


def positive_int(value: Any, what: str) -> int:
    """A positive integer (bools and non-integral floats are refused)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer) or value <= 0:
        raise ModelError(f"{what} must be a positive integer, got {_short(value)}")
    return int(value)
