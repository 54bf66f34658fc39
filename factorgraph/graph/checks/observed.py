"""Checks of observed data: ``observed_array`` (values of the variable's shape, with missing entries from
``mask=`` and from a ``numpy.ma`` masked array's own mask), ``integer_labels`` (class labels 0..K−1),
``binary_labels`` (bool, 0/1 or ±1), ``counts``
(non-negative integer counts), ``bool_as_float`` and ``mask_array``.

Dask observed data stay lazy: ``lazy_observed`` checks each chunk when it is computed, against its rows of the
mask (``dask_mask``, a lazy boolean array), and ``one_hot_labels`` turns dask labels into lazy one-hot rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from factorgraph.graph.checks.arrays import (
    _checked_block,
    _item,
    _not_huge,
    _short,
    _show,
    as_float_array,
    is_dask,
    lazy,
)
from factorgraph.graph.nodes import ModelError


def observed_array(value: Any, mask: Any, shape: tuple[int, ...], name: str,
                   event_ndim: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Validate observed data against the variable's shape; returns (values, mask).

    ``mask`` (plate-shaped, True where observed) may mark entries as missing, and so may the mask of
    a ``numpy.ma`` masked array (True = masked): an entry is observed where both say so, and a masked
    entry's hidden value is never used.  Only observed entries must be finite and within ``MAX_ABS``.
    A variable that cannot have missing values checks ``mask.all()`` itself.  A dask array stays lazy (its
    chunks are checked when computed, ``lazy``); its mask (``dask_mask``) is then a lazy boolean array, or an
    all-true numpy array when no entry is missing.
    """
    if is_dask(value):
        return lazy_observed(value, mask, shape, name, event_ndim)
    arr, hidden = as_float_array(value, f"observed data of {name!r}")
    if arr.size == 0:
        raise ModelError(f"observed data of {name!r} is empty")
    if arr.shape != shape:
        raise ModelError(f"observed data of {name!r} has shape {arr.shape}, but the variable's plates "
                         f"and event give shape {shape}")
    m = mask_array(mask, shape[: len(shape) - event_ndim], name)
    if hidden is not None and hidden.any():
        hidden = hidden.any(axis=tuple(range(hidden.ndim - event_ndim, hidden.ndim))) if event_ndim else hidden
        m = m & ~hidden
        arr = np.where(np.expand_dims(m, tuple(range(m.ndim, arr.ndim))), arr, np.nan)
    seen = arr if m.all() else arr[m] if event_ndim == 0 else arr[m].reshape(-1)  # (no copy when all are seen)
    if not np.all(np.isfinite(seen)):
        bad = _item(seen[~np.isfinite(seen)][0])
        raise ModelError(f"observed data of {name!r} contains {bad!r}; mark missing entries with "
                         "mask=... (True = observed)")
    _not_huge(seen, f"observed data of {name!r}", value)
    return arr, m


def _binary_block(block: np.ndarray, mask: np.ndarray | None, name: str) -> np.ndarray:
    return binary_labels(block, mask, name)[0]


def binary_labels(observed: Any, mask: Any, name: str,
                  shape: tuple[int, ...] | None = None) -> tuple[Any, Any]:
    """Binary labels as bool, 0/1 or ±1 → (floats 0/1, NaN where missing; the mask, True = observed), missing
    entries from ``mask=`` and from a masked array's own mask; of ``shape`` when given, else of the data's.
    The same labels are accepted by ``fg.bernoulli``, ``fg.bernoulli_logit`` and ``fg.probit`` (−1 is 0)."""
    if observed is None:
        raise ModelError(f"{name!r}: observed labels are required, got None")
    if is_dask(observed):  # each chunk is checked and recoded when it is computed
        if observed.dtype.kind not in "biuf":
            raise ModelError(f"labels of {name!r} must be numeric, got a dask array of dtype {observed.dtype}")
        return lazy_observed(observed, mask, shape or tuple(observed.shape), name, 0, _binary_block, (name,))
    lab = bool_as_float(observed)
    if shape is None:
        shape = np.shape(np.ma.getdata(lab)) if np.ma.isMaskedArray(lab) else None
    if shape is None:
        try:
            shape = np.shape(lab)
        except (TypeError, ValueError):
            shape = ()
    vals, m = observed_array(lab, mask, shape, name)
    seen = np.unique(vals[m])
    if np.all(np.isin(seen, (0.0, 1.0))):
        return np.where(m, vals, np.nan), m
    if np.all(np.isin(seen, (-1.0, 1.0))):
        return np.where(m, (vals + 1.0) / 2.0, np.nan), m
    bad = seen[~np.isin(seen, (-1.0, 0.0, 1.0))]
    raise ModelError(f"labels of {name!r} must be bool, 0/1 or -1/+1, got "
                     f"{_item(bad[0]) if bad.size else 'both 0 and -1'!r}")


def mask_array(mask: Any, plate_shape: tuple[int, ...], name: str) -> np.ndarray:
    """A boolean missing-value mask of the variable's plate shape (True = observed); None = all observed."""
    if mask is None:
        return np.ones(plate_shape, dtype=bool)
    try:
        m = np.asarray(np.ma.filled(mask, False) if np.ma.isMaskedArray(mask) else mask)
    except (TypeError, ValueError):
        raise ModelError(f"mask of {name!r} must be a boolean array (True = observed), got {_short(mask)}") from None
    if m.dtype != bool:
        raise ModelError(f"mask of {name!r} must be boolean (True = observed), got dtype {m.dtype}: {_show(m)}")
    if m.shape != plate_shape:
        raise ModelError(f"mask of {name!r} has shape {m.shape}, expected {plate_shape}")
    return m


def integer_labels(value: Any, mask: Any, shape: tuple[int, ...], K: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Class labels in 0..K−1 of the given shape (missing entries as in ``observed_array``).

    Returns (labels as an int array, 0 where missing; the mask, True = observed).  Labels must be integers
    (integral floats are accepted); strings, booleans and anything else get a ModelError naming ``name``."""
    raw = np.ma.getdata(value) if np.ma.isMaskedArray(value) else value
    try:
        kind = np.asarray(raw).dtype.kind if not isinstance(raw, str | bytes) else "U"
        strings = kind in "US" or (kind == "O" and any(isinstance(x, str | bytes)
                                                         for x in np.asarray(raw, dtype=object).ravel()))
    except (TypeError, ValueError):
        strings = False  # ragged: observed_array says so
    if strings:
        raise ModelError(f"observed labels of {name!r} must be integers 0..{K - 1}, got strings "
                         f"{_short(value)}; encode the classes as integers first (e.g. numpy.unique(y, "
                         "return_inverse=True))")
    lab, m = observed_array(value, mask, shape, name)
    seen = lab[m]
    bad = seen[seen != np.round(seen)]
    if bad.size:
        raise ModelError(f"observed labels of {name!r} must be integers 0..{K - 1}, got {_item(bad[0])!r}")
    bad = seen[(seen < 0) | (seen >= K)]
    if bad.size:
        raise ModelError(f"observed labels of {name!r} must lie in 0..{K - 1}, got {_item(bad[0])!r}")
    return np.where(m, lab, 0).astype(int), m


def bool_as_float(value: Any) -> Any:
    """Boolean observations (of a binary variable) as 0.0/1.0, keeping a masked array's mask; anything else
    unchanged."""
    if np.ma.isMaskedArray(value) and np.ma.getdata(value).dtype == bool:
        return np.ma.masked_array(np.ma.getdata(value).astype(float), mask=np.ma.getmaskarray(value))
    if isinstance(value, np.ndarray | np.bool_ | bool | list | tuple):
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError):
            return value
        if arr.dtype == bool:
            return arr.astype(float)
    return value


def counts(value: Any, mask: Any, shape: tuple[int, ...], name: str, event_ndim: int = 0
           ) -> tuple[np.ndarray, np.ndarray]:
    """Non-negative integer counts (as floats) of the given shape; returns (values, mask) as
    ``observed_array`` does (a dask array stays lazy, checked per chunk)."""
    if is_dask(value):
        return lazy_observed(value, mask, shape, name, event_ndim, _counts_block, (name, event_ndim))
    arr, m = observed_array(value, mask, shape, name, event_ndim)
    seen = arr[m]
    bad = seen[(seen < 0) | (seen != np.round(seen))]
    if bad.size:
        raise ModelError(f"counts of {name!r} must be non-negative integers, got {_item(bad.ravel()[0])!r}")
    return arr, m


def _counts_block(block: np.ndarray, mask: np.ndarray | None, name: str, event_ndim: int) -> np.ndarray:
    return counts(block, mask, block.shape, name, event_ndim)[0]


def dask_mask(value: Any, mask: Any, plate_shape: tuple[int, ...], name: str) -> Any:
    """The mask (True = observed) of dask observed data as a lazy boolean array chunked like the value along its
    plates, from ``mask=`` (a boolean numpy or dask array) and from a dask masked array's own mask (an entry
    whose event has a masked coordinate is missing); None when neither marks an entry missing (a numpy mask
    that is all true)."""
    import dask.array as da

    nd = len(plate_shape)
    chunks = value.chunks[:nd]
    m = None
    if mask is not None:
        if is_dask(mask):
            if mask.dtype != bool:
                raise ModelError(f"mask of {name!r} must be boolean (True = observed), got a dask array of dtype "
                                 f"{mask.dtype}")
            if tuple(mask.shape) != tuple(plate_shape):
                raise ModelError(f"mask of {name!r} has shape {tuple(mask.shape)}, expected {plate_shape}")
            m = mask.rechunk(chunks)
        else:
            arr = mask_array(mask, plate_shape, name)
            m = None if arr.all() else da.from_array(arr, chunks=chunks)
    if isinstance(getattr(value, "_meta", None), np.ma.MaskedArray):  # dask.array.ma
        hidden = da.ma.getmaskarray(value)
        hidden = hidden.any(axis=tuple(range(nd, value.ndim))) if value.ndim > nd else hidden
        m = ~hidden if m is None else m & ~hidden
    return m


def lazy_observed(value: Any, mask: Any, shape: tuple[int, ...], name: str, event_ndim: int = 0,
                  check: Any = None, args: tuple = ()) -> tuple[Any, Any]:
    """Dask observed data and their mask (``dask_mask``), the data checked per chunk when computed by
    ``check(block, block_mask, *args)``, the in-memory validation of a block against its rows of the mask (None
    when nothing is missing); by default ``observed_array``'s."""
    if tuple(value.shape) != tuple(shape):
        raise ModelError(f"observed data of {name!r} has shape {tuple(value.shape)}, but the variable's plates "
                         f"and event give shape {shape}")
    if value.dtype.kind not in "biuf":
        raise ModelError(f"observed data of {name!r} must be numeric, got a dask array of dtype {value.dtype}")
    if check is None:
        check, args = _masked_observed, (name, event_ndim)
    plate_shape = tuple(shape[: len(shape) - event_ndim])
    m = dask_mask(value, mask, plate_shape, name)
    if m is None:
        return lazy(value, check, f"observed data of {name!r}", None, *args), np.broadcast_to(np.True_, plate_shape)
    per_entry = m[(...,) + (None,) * event_ndim]  # the value's axes, one chunk of 1 along the event
    arr = value.map_blocks(_checked_masked_block, per_entry, event_ndim, check, args, dtype=float,
                           meta=np.empty((0,) * value.ndim))
    return arr, m


def _checked_masked_block(block: Any, mask: np.ndarray, event_ndim: int, check: Any, args: tuple,
                          block_info: dict | None = None) -> np.ndarray:
    m = np.asarray(mask).reshape(np.shape(mask)[: np.ndim(mask) - event_ndim])
    return _checked_block(block, check, (m, *args), block_info)


def _masked_observed(block: Any, m: np.ndarray | None, name: str, event_ndim: int) -> np.ndarray:
    """A block's values as ``observed_array`` gives them: missing entries are not checked, and those of a masked
    array become nan."""
    return observed_array(block, m, np.shape(block), name, event_ndim)[0]


def one_hot_labels(value: Any, K: int, name: str, mask: Any = None) -> tuple[Any, Any]:
    """Integer labels of a dask array as lazy one-hot rows (checked per chunk, as ``integer_labels``; nan rows
    where missing) and their mask (``dask_mask``)."""
    if value.dtype.kind not in "iuf":
        raise ModelError(f"observed labels of {name!r} must be integers 0..{K - 1}, got a dask array of dtype "
                         f"{value.dtype}")
    shape = tuple(value.shape)
    m = dask_mask(value, mask, shape, name)
    kw = {"dtype": float, "new_axis": value.ndim, "chunks": value.chunks + ((K,),),
          "meta": np.empty((0,) * (value.ndim + 1))}
    if m is None:
        return value.map_blocks(_checked_block, _one_hot_block, (None, K, name), **kw), np.broadcast_to(np.True_, shape)
    return value.map_blocks(_checked_masked_block, m, 0, _one_hot_block, (K, name), **kw), m


def _one_hot_block(block: np.ndarray, mask: np.ndarray | None, K: int, name: str) -> np.ndarray:
    lab, m = integer_labels(block, mask, block.shape, K, name)
    return np.where(m[..., None], lab[..., None] == np.arange(K), np.nan)
