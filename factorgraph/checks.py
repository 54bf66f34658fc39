"""Validation at the public boundary: every error is a ``ModelError`` naming the argument and the value.

Builders, ``fg.infer`` and the handlers' constructors validate their arguments here, once, so that bad
input never reaches numpy, scipy or numba (where it would fail with an error that names neither).
Helpers for new builders:

* ``number(value, what, low=..., high=...)``: one real number (Python or numpy scalar, 0-d array);
  ``integer(value, what, low=...)``: one integer (not a bool, not a float); ``flag``: a bool;
  ``choice``: one of a few strings; ``seed``: a random seed (None or an integer ≥ 0).
* ``constant(value, what)`` (and ``positive``, ``nonnegative``): a finite float array of parameters.
* ``observed_array(value, mask, shape, name)``: observed data, with missing entries from ``mask=``
  and from a ``numpy.ma`` masked array's own mask; ``integer_labels`` (class labels 0..K−1) and
  ``counts`` (non-negative integer counts) on top of it.
* ``plate_list``, ``plate_size`` and ``array_size``: plates and the size of the arrays they imply.

Every array is refused when it is complex (never silently truncated to its real part), holds strings,
objects, booleans (where numbers are meant) or dates, or has an entry whose magnitude exceeds
``MAX_ABS`` = 1e150: squares and products of such values (x², XᵀX, the sum of squares in a Gaussian's
evidence) overflow float64, which would otherwise surface as a nonsensical posterior of some other
variable.  Positive parameters below ``1/MAX_ABS`` are refused for the same reason (their reciprocal
squared overflows).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .nodes import Data, Gate, Indexed, ModelError, Node, Plate, PrecisionOf

#: largest magnitude of a value: its square (1e300) and sums of many squares stay finite in float64
MAX_ABS = 1e150
#: most numbers one array of the model may hold (a plate, or the product of a variable's plates and event)
MAX_ELEMENTS = 2**31


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


def _counts_block(block: np.ndarray, mask: np.ndarray | None, name: str, event_ndim: int) -> np.ndarray:
    return counts(block, mask, block.shape, name, event_ndim)[0]


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


def _constant_block(block: np.ndarray, what: str) -> np.ndarray:
    return constant(block, what)


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


def _short(value: Any) -> str:
    """repr of a value, cut to a readable length."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


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


# ------------------------------------------------------------------------------------ scalars and options
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


def plate_size(size: Any, name: str) -> int:
    """A plate's size: an integer in 1..``MAX_ELEMENTS``."""
    n = integer(size, f"plate {name!r}: size", low=1)
    if n > MAX_ELEMENTS:
        raise ModelError(f"plate {name!r}: size {n} is too large (at most {MAX_ELEMENTS}: one array over it "
                         f"would need {8 * n // 2**30} GiB)")
    return n


def array_size(shape: tuple[int, ...], what: str) -> None:
    """Refuse a shape (plates times event) whose float64 array would hold more than ``MAX_ELEMENTS``
    numbers: the model would not fit in memory."""
    n = 1
    for s in shape:
        n *= int(s)
    if n > MAX_ELEMENTS:
        raise ModelError(f"{what} spans plates of shape {tuple(shape)}: {n} numbers per array, more than the "
                         f"limit of {MAX_ELEMENTS} ({8 * n // 2**30} GiB each)")


def plate_list(plates: Any, model: Any, name: str) -> tuple[Plate, ...]:
    """The ``plates=`` argument of a builder: a plate or a sequence of plates declared in ``model``."""
    if isinstance(plates, Plate):
        plates = [plates]
    if plates is None or isinstance(plates, str | bytes | dict | set) or not hasattr(plates, "__iter__") \
            or (isinstance(plates, np.ndarray) and plates.ndim != 1):
        raise ModelError(f"{name!r}: plates must be a list of plates declared with fg.plate, got {_short(plates)}")
    out = tuple(plates)
    for p in out:
        if not isinstance(p, Plate) or model.plates.get(p.name) is not p:
            raise ModelError(f"{name!r}: plates must be plates declared in model {model.name!r} with "
                             f"fg.plate, got {_short(p)}")
    if len({p.name for p in out}) != len(out):
        raise ModelError(f"{name!r}: plates lists a plate twice: {[p.name for p in out]}")
    return out


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
        raise ModelError(f"{what} must be a positive integer, got {_short(value)}")
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
    the precision σ⁻²), or such a scale gated (``sigma[z]``) or indexed by labels (``sigma[g]``)."""
    if precision is not None or variance is not None:
        other = "precision" if precision is not None else variance_name
        given = precision if precision is not None else variance
        raise ModelError(f"{name!r}: give sd= or {other}=, not both (got sd={_describe(sd)} and "
                         f"{other}={_describe(given)})")
    if isinstance(sd, Gate) and isinstance(sd.source, np.ndarray):  # fg.select(sds, z): precisions 1/sd²
        return Gate(1.0 / positive(sd.source, f"{name!r}: sd (selected by {sd.selector.name!r})") ** 2, sd.selector,
                    sd.plate)
    node = sd.source if isinstance(sd, Gate | Indexed) else sd
    if isinstance(node, Node):
        if getattr(node, "base", None) is not None:
            raise ModelError(f"{name!r}: sd={node.name} — {node.name!r} is already a term of a sum or product "
                             "(inference works with σ itself there); a scale variable is either an sd= or such a "
                             "term, not both")
        if getattr(node, "scale_prior", None) is None:
            fam = getattr(node, "family", None)
            # the argument as the user wrote it: tau, tau[z] or tau[labels]
            written = (f"{node.name}[labels]" if isinstance(sd, Indexed) else
                       f"{node.name}[{sd.selector.name}]" if isinstance(sd, Gate) else node.name)
            hint = (f"; {node.name!r} is a Gamma variable over a precision: pass precision={written}"
                    if fam is not None and fam.__name__ == "Gamma" else "")
            raise ModelError(f"{name!r}: sd must be a positive constant or a scale variable made by fg.half_normal, "
                             "fg.half_cauchy, fg.half_student_t, fg.exponential or fg.uniform_scale, "
                             f"got {node!r}{hint}")
        return sd
    return 1.0 / positive(sd, f"{name!r}: sd") ** 2


def not_a_scale(precision: Any, name: str, role: str = "precision") -> None:
    """Refuse a scale variable σ (fg.half_normal, fg.half_cauchy, ...) given as ``precision=`` (or as a Gamma's or
    a Poisson's rate): it is a standard deviation, so it belongs in ``sd=``; its q is over σ⁻², so taking it
    for a precision or a rate would silently mean σ⁻²."""
    node = precision.source if isinstance(precision, Gate | Indexed) else precision
    kind = getattr(node, "scale_prior", None) if isinstance(node, Node) else None
    if kind is not None:
        kind = "uniform_scale" if kind == "uniform" else kind
        hint = f"pass sd={node.name}" if role == "precision" else "a scale can only be an sd= (or a term of a sum)"
        raise ModelError(f"{name!r}: {role}={node.name} is a scale σ (fg.{kind}), a standard deviation, not a "
                         f"{role}; {hint}")


def sequence_lengths(lengths: Any, seq_shape: tuple[int, ...], time: Plate, name: str) -> np.ndarray:
    """The lengths of a chain's sequences, one per element of the sequence plates ``seq_shape`` (all the time
    plate's size when None), checked to be integers in 1..T, as int64 of shape ``seq_shape``."""
    if lengths is None:
        return np.full(seq_shape, time.size, dtype=np.int64)
    lens = constant(lengths, f"{name!r}: lengths")
    if lens.shape not in (seq_shape, ()):
        raise ModelError(f"{name!r}: lengths must have the shape of the sequence plates {seq_shape}, got {lens.shape}")
    wrong = (lens != np.round(lens)) | (lens < 1) | (lens > time.size)
    if np.any(wrong):
        bad = lens[wrong].ravel()[0]
        bad = bad.astype(np.int64) if bad == np.round(bad) else bad
        raise ModelError(f"{name!r}: lengths must be integers in 1..{time.size} (the size of the time plate "
                         f"{time.name!r}), got {bad.item()!r}")
    return np.broadcast_to(lens, seq_shape).astype(np.int64)
