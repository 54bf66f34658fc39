"""Indexing a plated variable by constant integer labels: ``fg.index(x, idx)`` or ``x[idx]``.

This is how hierarchical (multilevel) models are written: with ``county`` an integer array giving
each house's county,

    a = fg.gaussian("a", mean=mu, precision=tau_a, plates=[c])          # one intercept per county
    fg.gaussian("y", mean=a[county] + b * x, precision=tau, plates=[n], observed=y)

``a[county]`` has the family of ``a`` and lives on the house plate ``n``: element n is
a[county[n]].  Ragged groups need nothing more (the labels say which rows share a group), and
levels chain (``a ~ N(b_state[state_of_county], ...)``).  Under variational message passing each
a_g receives the sum of the messages of its rows (Winn & Bishop 2005: a variable's message is the
sum over the factors it appears in).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from factorgraph.graph import checks
from factorgraph.graph.context import current_model
from factorgraph.graph.nodes import (
    Data,
    Deterministic,
    Gate,
    Indexed,
    ModelError,
    Node,
    Plate,
    Variable,
    gated_arithmetic_error,
)


def index(x: Variable, idx: Any, plate: Plate | None = None, *, along: Plate | None = None) -> Indexed:
    """x gathered by integer labels: element n of the result is x[idx[n]].

    Parameters
    ----------
    x
        A random variable plated over ``along`` (size G); or an indexed variable, indexed again
        along its gathered plate (``a[county][k]`` is ``a[county[k]]``).
    idx
        Integer labels in [0, G), one per element of ``plate``: a 1-D integer array or list (floats
        equal to integers are accepted).
    plate
        The plate the labels run over (size N = len(idx)).  Default: the model's only plate of size
        N that ``x`` is not plated over (failing that, ``along`` itself: a reordering); give it when
        several plates have that size.
    along
        The plate of ``x`` the labels index.  Default: x's only plate (required when x has several).

    Returns
    -------
    Indexed
        A node usable wherever a variable of x's family may stand (a factor's parameter, a sum, a
        product, a scaling, ``fg.inner(X, w[idx])``), with x's plates and ``along`` replaced by ``plate``.

    Notes
    -----
    All elements of x are updated at once.  That is coordinate ascent when no factor couples two
    elements of x, as in the usual hierarchies.  ``a[i] + a[j]`` (allowed when i_n ≠ j_n in every row)
    couples a_{i_n} and a_{j_n}: the joint update is then a Jacobi step, which converges for weakly
    coupled elements but need not raise the ELBO at every sweep.
    """
    data = idx if isinstance(idx, Data) else None
    if data is not None:  # labels from a data node: set_data and fg.predict may replace them (new rows)
        if isinstance(x, Indexed):
            raise ModelError(f"index: {x.name!r} is already indexed; index {x.source.name!r} by data labels directly")
        idx = data.value
    if isinstance(x, Indexed):
        return _compose(x, idx, plate, along)
    if isinstance(x, Gate):
        raise gated_arithmetic_error(x, "index")
    if not isinstance(x, Variable):
        what = "a deterministic expression" if isinstance(x, Deterministic) else repr(x)
        raise ModelError(f"index: only a random variable can be indexed by labels, got {what}"
                         + (f" {x.name!r} (index its variables instead: a[i] + b[i], not (a + b)[i])"
                            if isinstance(x, Node) else ""))
    model = current_model(f"index of {x.name!r}")
    if x.model is not model:
        raise ModelError(f"index: {x.name!r} belongs to model {x.model.name!r}, not to the active model {model.name!r}")
    if not x.plates:
        raise ModelError(f"index: {x.name!r} has no plate, so it cannot be indexed by labels {_show(idx)}; "
                         f"declare it with plates=[...] (one element per group)")
    along = _along(x, along)
    labels = _labels(x.name, idx, along.size)
    plate = _plate(model, x, labels, plate, along)
    plates = model.sorted_plates([plate if p is along else p for p in x.plates])
    if data is not None:
        if data.model is not model:
            raise ModelError(f"index: the data node {data.name!r} belongs to model {data.model.name!r}")
        if data.axes.get(0, plate) is not plate:
            raise ModelError(f"data {data.name!r}: axis 0 runs over plate {data.axes[0].name!r} in one use and over "
                             f"{plate.name!r} as the labels of {x.name!r}")
    node = Indexed(model, model.fresh_name(f"{x.name}[{plate.name}]"), x, labels, along, plate, plates)
    if data is not None:
        data.axes[0] = plate
        data.uses.append(node)
        node.data = data.name
    return node


def _compose(x: Indexed, idx: Any, plate: Plate | None, along: Plate | None) -> Indexed:
    if along is not None and along is not x.plate:
        raise ModelError(f"index: {x.name!r} can only be indexed again along its gathered plate {x.plate.name!r}; "
                         f"index {x.source.name!r} directly")
    model = x.model
    labels = _labels(x.name, idx, x.plate.size)
    plate = _plate(model, x.source, labels, plate, x.along)
    plates = model.sorted_plates([plate if p is x.along else p for p in x.source.plates])
    return Indexed(model, model.fresh_name(f"{x.source.name}[{plate.name}]"), x.source, x.labels[labels],
                   x.along, plate, plates)


def _along(x: Variable, along: Plate | None) -> Plate:
    if along is None:
        if len(x.plates) > 1:
            raise ModelError(f"index: {x.name!r} has plates {[p.name for p in x.plates]}; say which one the labels "
                             "index with fg.index(x, idx, along=<plate>)")
        return x.plates[0]
    if not isinstance(along, Plate) or along not in x.plates:
        raise ModelError(f"index: along={along!r} is not a plate of {x.name!r}, whose plates are "
                         f"{[p.name for p in x.plates]}")
    return along


def _show(value: Any) -> str:
    try:
        arr = np.asarray(value, dtype=object)
    except (TypeError, ValueError):
        return checks._short(value)
    if arr.size <= 6:
        return repr(arr.tolist())
    return f"array of shape {arr.shape}"


def _labels(name: str, idx: Any, G: int) -> np.ndarray:
    """Validated integer labels in [0, G) as an int64 vector.

    Integer arrays of any width, integral floats and object arrays of Python or numpy integers are
    accepted; the range is checked before any conversion, so an error names the value as given.
    """
    if isinstance(idx, Plate):
        raise ModelError(f"index: {name!r}[{idx!r}]: index by an array of integer labels, not by a plate")
    if np.ma.isMaskedArray(idx):
        missing = np.ma.getmaskarray(idx)
        if missing.any():
            raise ModelError(f"index: labels of {name!r} cannot be missing, got a masked array with "
                             f"{int(missing.sum())} masked entr{'y' if missing.sum() == 1 else 'ies'} (first at "
                             f"position {int(np.argmax(missing.ravel()))}); drop those rows, or give every row "
                             "its group")
        idx = np.ma.getdata(idx)
    try:
        arr = np.asarray(idx)
    except (TypeError, ValueError):
        raise ModelError(f"index: labels of {name!r} must be a 1-D array of integers, got {_show(idx)}") from None
    if arr.dtype == bool:
        raise ModelError(f"index: labels of {name!r} must be integers in 0..{G - 1}, got booleans {_show(arr)}")
    if arr.ndim != 1:
        raise ModelError(f"index: labels of {name!r} must be a 1-D array (one label per row), got shape "
                         f"{arr.shape}: {_show(arr)}")
    if arr.size == 0:
        raise ModelError(f"index: labels of {name!r} are empty")
    if arr.dtype == object:  # Python numbers (an int column of a DataFrame, say) or anything else
        values = arr.tolist()
        wrong = [isinstance(v, bool | np.bool_ | complex | np.complexfloating)
                 or not isinstance(v, int | float | np.number) for v in values]
        if any(wrong):
            bad = values[wrong.index(True)]
            raise ModelError(f"index: labels of {name!r} must be integers in 0..{G - 1}, got {bad!r}"
                             + _encode_hint(bad))
        if all(isinstance(v, int | np.integer) for v in values):
            i = next((i for i, v in enumerate(values) if not 0 <= v < G), None)
            if i is not None:
                raise ModelError(f"index: labels of {name!r} must lie in 0..{G - 1}, got {int(values[i])!r} at "
                                 f"position {i}")
            return np.array(values, dtype=np.int64)
        arr = np.array(values, dtype=float)
    if not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.floating):
            bad = next((v for v in arr.tolist() if not isinstance(v, int | float) or isinstance(v, bool)), arr[0])
            raise ModelError(f"index: labels of {name!r} must be integers in 0..{G - 1}, got {bad!r}"
                             + _encode_hint(bad))
        bad = arr[~np.isfinite(arr) | (arr != np.round(arr))]
        if bad.size:
            raise ModelError(f"index: labels of {name!r} must be integers in 0..{G - 1}, got {bad[0].item()!r}")
    out = (arr < 0) | (arr >= G)  # in the labels' own dtype: no wrap-around of uint64 or huge floats
    if np.any(out):
        i = int(np.argmax(out))
        value = arr[i].item()
        raise ModelError(f"index: labels of {name!r} must lie in 0..{G - 1}, got "
                         f"{int(value) if isinstance(value, float) and abs(value) < 2**53 else value!r} at "
                         f"position {i}")
    return np.ascontiguousarray(arr.astype(np.int64))


def _encode_hint(value: Any) -> str:
    if isinstance(value, str | bytes):
        return ("; encode named groups as integer codes first: names, codes = np.unique(groups, "
                "return_inverse=True), then x[codes] (x's element k is the group names[k])")
    return ""


def _plate(model, x: Variable, labels: np.ndarray, plate: Plate | None, along: Plate) -> Plate:
    N = labels.shape[0]
    if plate is not None:
        if not isinstance(plate, Plate) or model.plates.get(plate.name) is not plate:
            raise ModelError(f"index: plate must be a plate of model {model.name!r}, got {plate!r}")
        if plate.size != N:
            raise ModelError(f"index: {len(labels)} labels for {x.name!r}, but plate {plate.name!r} has size "
                             f"{plate.size}")
    else:
        cands = [p for p in model.plates.values() if p.size == N and p not in x.plates]
        if not cands and along.size == N:
            cands = [along]  # a reordering of the groups themselves
        if not cands:
            raise ModelError(f"index: {N} labels for {x.name!r}, but the model has no plate of size {N} (plates "
                             f"{[(p.name, p.size) for p in model.plates.values()]}); declare the data plate first, "
                             "with one element per label")
        if len(cands) > 1:
            raise ModelError(f"index: {N} labels for {x.name!r} fit several plates {[p.name for p in cands]}; "
                             "say which with fg.index(x, idx, plate=<plate>)")
        plate = cands[0]
    if plate in x.plates and plate is not along:
        raise ModelError(f"index: {x.name!r} is already plated over {plate.name!r}; labels must map another "
                         "plate onto its groups")
    return plate
