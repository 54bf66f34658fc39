"""Build-time validation helpers: every error names the variable and the offending value."""

from __future__ import annotations

from typing import Any

import numpy as np

from .nodes import Gate, ModelError, Node, PrecisionOf


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


def _describe(node: Any) -> str:
    if isinstance(node, Gate):
        src = node.source.name if isinstance(node.source, Node) else "constant array"
        return f"the gate {src}[{node.selector.name}]"
    if isinstance(node, PrecisionOf):
        return f"{node.variable.name!r}.tau"
    return repr(node)


def constant(value: Any, what: str) -> np.ndarray:
    """A finite float array."""
    if isinstance(value, Node | Gate | PrecisionOf):
        raise ModelError(f"{what} must be a constant here, got {_describe(value)}")
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"{what} must be a number or an array of numbers, got {value!r}") from None
    if arr.size == 0:
        raise ModelError(f"{what} is empty")
    if not _all_finite(arr):
        bad = _item(arr[~np.isfinite(arr)].ravel()[0])
        raise ModelError(f"{what} must be finite, got {bad!r}{_where(value)}")
    return arr


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
    arr = constant(value, what)
    if np.any(arr <= 0):
        bad = _item(arr[arr <= 0].ravel()[0])
        raise ModelError(f"{what} must be positive, got {bad!r}{_where(value)}")
    return arr


def nonnegative(value: Any, what: str) -> np.ndarray:
    arr = constant(value, what)
    if np.any(arr < 0):
        bad = _item(arr[arr < 0].ravel()[0])
        raise ModelError(f"{what} must be non-negative, got {bad!r}{_where(value)}")
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
    m = mask_array(mask, shape[: len(shape) - event_ndim], name)
    seen = arr[m] if event_ndim == 0 else arr[m].reshape(-1)
    if not np.all(np.isfinite(seen)):
        bad = _item(seen[~np.isfinite(seen)][0])
        raise ModelError(f"observed data of {name!r} contains {bad!r}; mark missing entries with "
                         "mask=... (True = observed)")
    return arr, m


def mask_array(mask: Any, plate_shape: tuple[int, ...], name: str) -> np.ndarray:
    """A boolean missing-value mask of the variable's plate shape (True = observed); None = all observed."""
    if mask is None:
        return np.ones(plate_shape, dtype=bool)
    m = np.asarray(mask)
    if m.dtype != bool:
        raise ModelError(f"mask of {name!r} must be boolean (True = observed), got dtype {m.dtype}: {_show(mask)}")
    if m.shape != plate_shape:
        raise ModelError(f"mask of {name!r} has shape {m.shape}, expected {plate_shape}")
    return m


def fits(vshape: tuple[int, ...], shape: tuple[int, ...], what: str) -> None:
    """A constant of shape ``vshape`` must broadcast (numpy-style, trailing axes) to ``shape`` without
    growing it: constants never add plates."""
    vshape = tuple(vshape)
    try:
        ok = np.broadcast_shapes(vshape, shape) == tuple(shape)
    except ValueError:
        ok = False
    if not ok:
        raise ModelError(f"{what} has shape {vshape}, which does not broadcast to the shape {tuple(shape)} "
                         "given by the plates")


def positive_int(value: Any, what: str) -> int:
    """A positive integer (bools and non-integral floats are refused)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer) or value <= 0:
        raise ModelError(f"{what} must be a positive integer, got {value!r}")
    return int(value)


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


def sd_as_precision(sd: Any, precision: Any, variance: Any, name: str, variance_name: str = "variance") -> Any:
    """The precision that ``sd=`` stands for: 1/sd² for a positive constant, the variable itself for a
    scale made by fg.half_normal, fg.half_cauchy, fg.half_student_t or fg.exponential (which is a Gamma over
    the precision σ⁻²), or such a scale gated (``sigma[z]``)."""
    if precision is not None or variance is not None:
        other = "precision" if precision is not None else variance_name
        given = precision if precision is not None else variance
        raise ModelError(f"{name!r}: give sd= or {other}=, not both (got sd={_describe(sd)} and "
                         f"{other}={_describe(given)})")
    node = sd.source if isinstance(sd, Gate) else sd
    if isinstance(node, Node):
        if getattr(node, "scale_prior", None) is None:
            fam = getattr(node, "family", None)
            hint = (f"; {node.name!r} is a Gamma variable over a precision: pass precision={node.name}"
                    if fam is not None and fam.__name__ == "Gamma" else "")
            raise ModelError(f"{name!r}: sd must be a positive constant or a scale variable made by fg.half_normal, "
                             f"fg.half_cauchy, fg.half_student_t or fg.exponential, got {node!r}{hint}")
        return sd
    return 1.0 / positive(sd, f"{name!r}: sd") ** 2
