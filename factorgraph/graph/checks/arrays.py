"""Checks of constant arrays: parameters that must be finite real numbers (``constant``, ``positive``,
``nonnegative``, ``open_unit``, ``positive_number``, ``precision_matrix``), and the short renderings of a value
that every check's message uses (``_show``, ``_short``, ``_item``, ``_where``, ``_describe``).

``as_float_array`` refuses complex numbers (never truncated to their real part), strings, objects, booleans and
dates; ``constant`` refuses, besides, missing entries, non-finite entries and entries beyond ``MAX_ABS`` = 1e150,
whose squares and products (x², XᵀX, a Gaussian's sum of squares) would overflow float64.  A dask array stays
lazy (``lazy``): each chunk passes the same check when it is computed, its error naming the chunk's rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from factorgraph.graph.nodes import Data, Gate, ModelError, Node, PrecisionOf
from factors.kernels.scan import first_out_of_range

#: largest magnitude of a value: its square (1e300) and sums of many squares stay finite in float64
MAX_ABS = 1e150
# arrays from this size are checked by one read in numba (smaller ones by numpy, without building the kernel)
_SCAN_FROM = 1 << 16
def _show(value: Any) -> str:
    arr = np.asarray(value)
    if arr.size <= 6:
        return repr(arr.item() if arr.ndim == 0 else arr.tolist())
    return f"array of shape {arr.shape}"


def _where(value: Any) -> str:
    return "" if np.size(value) == 1 else f" in {_show(value)}"


def _item(x: Any) -> Any:
    """A numpy scalar as a plain Python value, so messages read ``-1.0`` rather than ``np.float64(-1.0)``."""
    return x.item() if isinstance(x, np.generic) else x


def _short(value: Any) -> str:
    """repr of a value, cut to a readable length."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _describe(node: Any) -> str:
    if isinstance(node, Gate):
        src = node.source.name if isinstance(node.source, Node) else "constant array"
        return f"the gate {src}[{node.selector.name}]"
    if isinstance(node, PrecisionOf):
        return f"{node.variable.name!r}.tau"
    return repr(node)


def is_dask(value: Any) -> bool:
    """Whether ``value`` is a ``dask.array`` (checked without importing dask)."""
    return type(value).__module__.startswith("dask.array") and hasattr(value, "chunks")


def lazy(value: Any, check: Any, what: str, *args: Any) -> Any:
    """A dask array whose blocks pass through ``check(block, *args)`` (which returns the block's values)
    when they are computed: the in-memory validation, run per chunk, its ``ModelError`` naming the chunk's
    rows.  Only the dtype is checked now (reading the data would load it)."""
    if value.dtype.kind not in "biuf":
        raise ModelError(f"{what} must be numeric, got a dask array of dtype {value.dtype}")
    return value.map_blocks(_checked_block, check, args, dtype=float, meta=np.empty((0,) * value.ndim))


def _checked_block(block: np.ndarray, check: Any, args: tuple, block_info: dict | None = None) -> np.ndarray:
    try:
        return check(block if np.ma.isMaskedArray(block) else np.asarray(block), *args)
    except ModelError as e:
        where = ""
        if block_info and None in block_info:
            info = block_info[None]
            parts = [f"{a}–{b - 1} along axis {i}" for i, ((a, b), n) in
                     enumerate(zip(info["array-location"], info["shape"], strict=True)) if (a, b) != (0, n)]
            where = f" (in the chunk at rows {', '.join(parts)})" if parts else " (in its only chunk)"
        raise ModelError(f"{e}{where}") from None


def _constant_block(block: np.ndarray, what: str) -> np.ndarray:
    return constant(block, what)


# the arrays found finite and in range inside ``scanned_once`` blocks (innermost last): id -> the array
_SCANNED: list[dict[int, np.ndarray]] = []


@contextmanager
def scanned_once() -> Iterator[None]:
    """Within the block, an array that ``constant`` has found finite and in range is not read again when it is
    checked again (a canned model checks X, then ``fg.inner`` checks the same X).  For code that runs no user
    code between the checks, so that the array cannot change in between."""
    _SCANNED.append(_SCANNED[-1] if _SCANNED else {})
    try:
        yield
    finally:
        _SCANNED.pop()


def constant(value: Any, what: str) -> np.ndarray:
    """A finite float array (parameters: no missing entries, no magnitude beyond ``MAX_ABS``).

    A dask array stays lazy: each chunk is checked when it is computed (``lazy``)."""
    if isinstance(value, Node | Gate | PrecisionOf):
        raise ModelError(f"{what} must be a constant here, got {_describe(value)}")
    if is_dask(value):
        return lazy(value, _constant_block, what, what)
    arr, missing = as_float_array(value, what)
    if missing is not None and missing.any():
        raise ModelError(f"{what} is a masked array with {int(missing.sum())} masked entries; a parameter "
                         "cannot have missing values")
    if arr.size == 0:
        raise ModelError(f"{what} is empty")
    if arr.size >= _SCAN_FROM:
        if _SCANNED and _SCANNED[-1].get(id(arr)) is arr:
            return arr  # found good in this block already
        if first_out_of_range(arr, MAX_ABS) < 0:  # finite and within ±MAX_ABS, in one read (an input matrix)
            if _SCANNED:
                _SCANNED[-1][id(arr)] = arr
            return arr
    if not _all_finite(arr):
        bad = _item(arr[~np.isfinite(arr)].ravel()[0])
        raise ModelError(f"{what} must be finite, got {bad!r}{_where(value)}")
    _not_huge(arr, what, value)
    return arr


def as_float_array(value: Any, what: str) -> tuple[np.ndarray, np.ndarray | None]:
    """``value`` as a float array, and the mask of a ``numpy.ma`` masked array (True = masked) or None.

    Refuses, naming ``what``: complex numbers (never truncated to their real part), booleans, strings,
    bytes, dates, objects that are not numbers, ragged nested lists and integers too large for a float.
    Data frames and series convert through ``numpy.asarray``."""
    missing = None
    if isinstance(value, Data):
        raise ModelError(f"{what}: the data node {value.name!r} cannot be used here; data nodes are accepted as the "
                         "X of fg.inner, as operands of sums and products, and as array arguments of the builders "
                         "(fg.gaussian(..., observed=...), ...)")
    if isinstance(value, str | bytes | dict | set) or callable(value):
        raise ModelError(f"{what} must be numeric (a number or an array of numbers), got {_short(value)}")
    if np.ma.isMaskedArray(value):
        missing = np.ma.getmaskarray(value)
        value = np.ma.getdata(value)
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError, OverflowError):
        raise ModelError(f"{what} must be numeric (a number or a regular, not ragged, array of numbers), got "
                         f"{_short(value)}") from None
    kind = raw.dtype.kind
    if kind == "c":
        raise ModelError(f"{what} must be real, got the complex value {_short(value)}")
    if kind == "b":
        raise ModelError(f"{what} must be numbers, got booleans {_short(value)}")
    if kind not in "iuf":
        if kind == "O":
            try:
                raw = np.asarray(value, dtype=float)
            except (TypeError, ValueError, OverflowError):
                raise ModelError(f"{what} must be numeric (a number or an array of numbers), got "
                                 f"{_short(value)}") from None
            if any(isinstance(x, complex | np.complexfloating | bool | np.bool_ | str)
                   for x in np.asarray(value, dtype=object).ravel()):
                raise ModelError(f"{what} must be real numbers, got {_short(value)}")
        else:
            raise ModelError(f"{what} must be numeric (a number or an array of numbers), got {_short(value)} (dtype "
                             f"{raw.dtype})")
    try:
        arr = np.asarray(raw, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ModelError(f"{what} must be numeric (a number or an array of numbers), got {_short(value)}") from None
    if kind in "iu" and arr.size and np.any(np.isinf(arr)):
        raise ModelError(f"{what} holds an integer too large for a float: {_short(value)}")
    return arr, missing


def _not_huge(arr: np.ndarray, what: str, value: Any) -> None:
    with np.errstate(invalid="ignore"):
        big = np.abs(arr) > MAX_ABS
    if np.any(big):
        bad = _item(arr[big].ravel()[0])
        raise ModelError(f"{what} has the value {bad!r}{_where(value)}, too large in magnitude: its square "
                         f"overflows float64 (values must lie within ±{MAX_ABS:g}; rescale the data)")


def _all_finite(arr: np.ndarray) -> bool:
    """Whether every entry is finite.  A nan or ±inf entry makes the sum non-finite, so a finite sum
    settles it in one read of a large array (an input matrix of the data); a non-finite sum may also be
    an overflow of finite entries, so that case is checked entry by entry."""
    if arr.size >= 1 << 16:
        with np.errstate(over="ignore", invalid="ignore"):
            if np.isfinite(arr.sum()):
                return True
    return bool(np.all(np.isfinite(arr)))


def positive(value: Any, what: str) -> np.ndarray:
    """A finite array of positive numbers, none below ``1/MAX_ABS`` (a reciprocal that overflows)."""
    arr = constant(value, what)
    if np.any(arr <= 0):
        bad = _item(arr[arr <= 0].ravel()[0])
        raise ModelError(f"{what} must be positive, got {bad!r}{_where(value)}")
    if np.any(arr < 1.0 / MAX_ABS):
        bad = _item(arr[arr < 1.0 / MAX_ABS].ravel()[0])
        raise ModelError(f"{what} has the value {bad!r}{_where(value)}, too small: its reciprocal squared "
                         f"overflows float64 (positive values must be at least {1.0 / MAX_ABS:g})")
    return arr


def open_unit(value: Any, what: str) -> np.ndarray:
    """A finite array of probabilities strictly inside (0, 1) (a Bernoulli's or a Binomial's ``probs``)."""
    arr = constant(value, what)
    out = (arr <= 0) | (arr >= 1)
    if np.any(out):
        raise ModelError(f"{what} must lie in (0, 1), got {_item(arr[out].ravel()[0])!r}{_where(value)}")
    return arr


def positive_number(value: Any, what: str) -> float:
    """One positive number (as ``positive``, but a single value) as a Python float."""
    arr = positive(value, what)
    if arr.size != 1:
        raise ModelError(f"{what} must be one positive number, got {_show(value)}")
    return float(arr.reshape(()))


def nonnegative(value: Any, what: str) -> np.ndarray:
    arr = constant(value, what)
    if np.any(arr < 0):
        bad = _item(arr[arr < 0].ravel()[0])
        raise ModelError(f"{what} must be non-negative, got {bad!r}{_where(value)}")
    return arr


def precision_matrix(value: np.ndarray, what: str) -> np.ndarray:
    """A square, symmetric, positive definite matrix (all zeros is allowed: an improper flat prior)."""
    if value.shape[0] != value.shape[1]:
        raise ModelError(f"{what} must be a square matrix, got shape {value.shape}")
    if not np.allclose(value, value.T):
        i, j = np.unravel_index(np.argmax(np.abs(value - value.T)), value.shape)
        raise ModelError(f"{what} must be symmetric, got entry [{i}, {j}] = {_item(value[i, j])!r} but "
                         f"[{j}, {i}] = {_item(value[j, i])!r} in {_show(value)}")
    if value.any():
        try:
            np.linalg.cholesky(value)
        except np.linalg.LinAlgError:
            lo = _item(np.linalg.eigvalsh(value).min())
            raise ModelError(f"{what} must be positive definite, got smallest eigenvalue {lo!r} in "
                             f"{_show(value)}") from None
    return value
