"""Moving arrays between plate spaces.

A node's array has one leading axis per plate of the node, in the model's global plate order
(plates are identified here by their global index), then its event axes.  A factor works in the
union of its neighbours' plates.  ``expand`` inserts singleton axes to bring an array into a
larger plate space; ``reduce`` sums a factor-space message back onto a node's plates.  A singleton
axis in a factor-space array stands for a value repeated over the whole plate, so reducing over
it multiplies by the plate's size instead of summing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def expand(arr: np.ndarray, src: Sequence[int], dst: Sequence[int], event_ndim: int) -> np.ndarray:
    """Insert singleton axes so an array on plates ``src`` (⊂ ``dst``) lines up with ``dst``."""
    arr = np.asarray(arr)
    batch_ndim = arr.ndim - event_ndim
    if batch_ndim < len(src):  # a value that is constant over the node's plates
        arr = arr.reshape((1,) * (len(src) - batch_ndim) + arr.shape)
    if tuple(src) == tuple(dst):
        return arr
    pos = {p: i for i, p in enumerate(src)}
    shape = [arr.shape[pos[p]] if p in pos else 1 for p in dst] + list(arr.shape[len(src):])
    return arr.reshape(shape)


def reduce(arr: np.ndarray, src: Sequence[int], dst: Sequence[int], sizes: Sequence[int],
           event_ndim: int) -> np.ndarray:
    """Sum a message on plates ``src`` onto the plates ``dst`` (⊂ ``src``).

    ``sizes[i]`` is the size of plate ``src[i]``.  Axes of ``dst`` keep their length (1 if the
    value is the same along the plate).
    """
    arr = np.asarray(arr, dtype=float)
    batch_ndim = arr.ndim - event_ndim
    if batch_ndim < len(src):
        arr = arr.reshape((1,) * (len(src) - batch_ndim) + arr.shape)
    keep = set(dst)
    axes = tuple(i for i, p in enumerate(src) if p not in keep)
    if not axes:
        return arr
    factor = 1.0
    summed = []
    for i in axes:
        if arr.shape[i] == 1:
            factor *= sizes[i]
        else:
            summed.append(i)
    out = arr.sum(axis=tuple(summed), keepdims=True) if summed else arr
    out = out.reshape([s for i, s in enumerate(out.shape) if i not in axes])
    return out * factor if factor != 1.0 else out


def move_plate_to_event(arr: np.ndarray, plates: Sequence[int], plate: int, event_ndim: int) -> np.ndarray:
    """Move the axis of ``plate`` to the front of the event axes (the plate becomes an event axis)."""
    i = list(plates).index(plate)
    return np.moveaxis(arr, i, arr.ndim - event_ndim - 1)


def move_event_to_plate(arr: np.ndarray, plates: Sequence[int], plate: int, event_ndim: int) -> np.ndarray:
    """Inverse of ``move_plate_to_event``: ``plates`` lists the node's plates including ``plate``,
    and ``event_ndim`` counts the event axes of the result."""
    i = list(plates).index(plate)
    return np.moveaxis(arr, arr.ndim - event_ndim - 1, i)


def weighted_reduce(arr: np.ndarray, weights: np.ndarray, src: Sequence[int], dst: Sequence[int],
                    sizes: Sequence[int], event_ndim: int) -> np.ndarray:
    """``reduce(arr · weights)`` without forming the product: one contraction (a matrix product where the
    shapes allow), so a message that is the same for every row (a singleton axis) times per-row gate
    weights never becomes an array over rows × categories × event.

    ``weights`` has one axis per plate of ``src`` (singletons allowed) and no event axes.
    """
    arr = np.asarray(arr, dtype=float)
    nb = len(src)
    if arr.ndim - event_ndim < nb:
        arr = arr.reshape((1,) * (nb - arr.ndim + event_ndim) + arr.shape)
    w = np.asarray(weights, dtype=float).reshape(np.shape(weights)[-nb:] if nb else ())
    w = w.reshape((1,) * (nb - w.ndim) + w.shape)
    event = list(range(nb, nb + event_ndim))
    a_axes = [i for i in range(nb) if arr.shape[i] != 1]
    w_axes = [i for i in range(nb) if w.shape[i] != 1]
    keep = set(dst)
    out_axes = [i for i, p in enumerate(src) if p in keep and (arr.shape[i] != 1 or w.shape[i] != 1)]
    factor = float(np.prod([sizes[i] for i, p in enumerate(src)
                            if p not in keep and arr.shape[i] == 1 and w.shape[i] == 1]))
    a_op = arr.reshape([arr.shape[i] for i in a_axes] + list(arr.shape[nb:]))
    w_op = w.reshape([w.shape[i] for i in w_axes])
    out = np.einsum(a_op, a_axes + event, w_op, w_axes, out_axes + event, optimize=True)
    shape = [max(arr.shape[i], w.shape[i]) for i, p in enumerate(src) if p in keep] + list(arr.shape[nb:])
    out = out.reshape(shape)
    return out * factor if factor != 1.0 else out
