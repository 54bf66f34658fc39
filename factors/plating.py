"""Moving arrays between plate spaces.

A node's array has one leading axis per plate of the node, in the model's global plate order
(plates are identified here by their global index), then its event axes.  A factor works in the
union of its neighbours' plates.  ``expand`` inserts singleton axes to bring an array into a
larger plate space; ``reduce`` sums a factor-space message back onto a node's plates.  A singleton
axis in a factor-space array stands for a value repeated over the whole plate, so reducing over
it multiplies by the plate's size instead of summing.  A message given in factored form
(``factors.contract.Terms``) is reduced term by term (``reduce_terms``), never formed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .contract import Terms, _lift, _prod, pair_reduce
from .onehot import OneHot


def expand(arr: np.ndarray, src: Sequence[int], dst: Sequence[int], event_ndim: int) -> np.ndarray:
    """Insert singleton axes so an array on plates ``src`` (⊂ ``dst``) lines up with ``dst``."""
    if not isinstance(arr, OneHot):  # observed labels stay labels (factors.onehot)
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
    if isinstance(arr, Terms):  # a sum of factored terms, reduced term by term
        return reduce_terms(arr, None, src, dst, sizes, event_ndim)
    if isinstance(arr, OneHot) and event_ndim == 1:  # observed labels: a bincount
        return arr.weighted_sum(None, src, dst, sizes)
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
    i, j = list(plates).index(plate), arr.ndim - event_ndim - 1
    return arr if i == j else np.moveaxis(arr, i, j)


def move_event_to_plate(arr: np.ndarray, plates: Sequence[int], plate: int, event_ndim: int) -> np.ndarray:
    """Inverse of ``move_plate_to_event``: ``plates`` lists the node's plates including ``plate``,
    and ``event_ndim`` counts the event axes of the result."""
    i, j = list(plates).index(plate), arr.ndim - event_ndim - 1
    return arr if i == j else np.moveaxis(arr, j, i)


def weighted_reduce(arr: np.ndarray, weights: np.ndarray, src: Sequence[int], dst: Sequence[int],
                    sizes: Sequence[int], event_ndim: int) -> np.ndarray:
    """``reduce(arr · weights)`` without forming the product: one batched matrix product, so a message that
    is the same for every row (a singleton axis) times per-row gate weights never becomes an array over
    rows × categories × event.

    ``weights`` has one axis per plate of ``src`` (singletons allowed) and no event axes.
    """
    if isinstance(arr, Terms):
        return reduce_terms(arr, weights, src, dst, sizes, event_ndim)
    if isinstance(arr, OneHot) and event_ndim == 1:  # observed labels: a weighted bincount
        return arr.weighted_sum(weights, src, dst, sizes)
    arr = np.asarray(arr, dtype=float)
    nb = len(src)
    if arr.ndim - event_ndim < nb:
        arr = arr.reshape((1,) * (nb - arr.ndim + event_ndim) + arr.shape)
    w = np.asarray(weights, dtype=float)
    w = w.reshape((1,) * (nb - w.ndim) + w.shape)
    keep = {i for i, p in enumerate(src) if p in set(dst)}
    ev_shape = arr.shape[nb:]
    # plates where both are singletons and that are summed: a factor of the plate's size
    factor = float(np.prod([sizes[i] for i in range(nb) if i not in keep and arr.shape[i] == 1 and w.shape[i] == 1]))
    # sum each operand alone over the summed plates only it has
    a_only = tuple(i for i in range(nb) if i not in keep and arr.shape[i] != 1 and w.shape[i] == 1)
    w_only = tuple(i for i in range(nb) if i not in keep and w.shape[i] != 1 and arr.shape[i] == 1)
    if a_only:
        arr = arr.sum(axis=a_only, keepdims=True)
    if w_only:
        w = w.sum(axis=w_only, keepdims=True)
    common = [i for i in range(nb) if i not in keep and arr.shape[i] != 1 and w.shape[i] != 1]  # contracted
    batch = [i for i in sorted(keep) if arr.shape[i] != 1 and w.shape[i] != 1]
    a_keep = [i for i in sorted(keep) if arr.shape[i] != 1 and w.shape[i] == 1]
    w_keep = [i for i in sorted(keep) if w.shape[i] != 1 and arr.shape[i] == 1]
    bshape = [arr.shape[i] for i in batch]
    csize = int(np.prod([arr.shape[i] for i in common]))
    a_rest = [arr.shape[i] for i in a_keep] + list(ev_shape)
    w_rest = [w.shape[i] for i in w_keep]
    rest_a = [i for i in range(nb) if i not in batch + common + a_keep]
    rest_w = [i for i in range(nb) if i not in batch + common + w_keep]
    A = np.transpose(arr, batch + common + a_keep + rest_a + list(range(nb, arr.ndim)))
    A = A.reshape(bshape + [csize, int(np.prod(a_rest))])
    W = np.transpose(w, batch + common + w_keep + rest_w).reshape(bshape + [csize, int(np.prod(w_rest))])
    out = np.swapaxes(W, -1, -2) @ A  # batch + (w_keep, a_keep + event)
    out = out.reshape(bshape + w_rest + a_rest)
    # axes now: batch, w_keep, a_keep, event; put the kept plates back in src order
    order = batch + w_keep + a_keep
    perm = [order.index(i) for i in sorted(order)]
    out = np.transpose(out, perm + list(range(len(order), out.ndim)))
    shape = [max(arr.shape[i], w.shape[i]) for i in sorted(keep)] + list(ev_shape)
    out = out.reshape(shape)
    return out * factor if factor != 1.0 else out


def weighted_total(arr: np.ndarray, weights: np.ndarray | None, src: Sequence[int], sizes: Sequence[int],
                   event_ndim: int = 0) -> float:
    """Σ over every plate of weights · arr (weights None: all 1), e.g. a factor's E[log f] summed over its
    instances, each weighted by its gate's q(z = k) and its observed-entry mask."""
    out = reduce(arr, src, (), sizes, event_ndim) if weights is None else weighted_reduce(
        arr, weights, src, (), sizes, event_ndim)
    return float(np.sum(out))


def _prod_reduce(arrays: Sequence[np.ndarray], src: Sequence[int], dst: Sequence[int], sizes: Sequence[int],
                 event_ndim: int) -> np.ndarray:
    """Σ over the plates of ``src`` not in ``dst`` of the elementwise product of ``arrays`` (each on the plates
    ``src``, singletons allowed, then ``event_ndim`` event axes; the last may be plate-only weights), by one
    ``np.einsum``: singleton axes are left out of its subscripts, so nothing broadcast is formed."""
    nb = len(src)
    keep = {i for i, p in enumerate(src) if p in set(dst)}
    ops, subs, full = [], [], [1] * (nb + event_ndim)
    for x in arrays:  # aligned on the right, as numpy broadcasts
        x = np.asarray(x, dtype=float)
        x = x.reshape((1,) * (nb + event_ndim - x.ndim) + x.shape)
        axes = [i for i in range(x.ndim) if x.shape[i] != 1]
        for i in axes:
            full[i] = x.shape[i]
        ops.append(x.reshape([x.shape[i] for i in axes]))
        subs.append(axes)
    factor = float(_prod([sizes[i] for i in range(nb) if i not in keep and full[i] == 1]))
    out_axes = [i for i in range(nb + event_ndim) if full[i] != 1 and (i in keep or i >= nb)]
    args = [a for pair in zip(ops, subs, strict=True) for a in pair]
    out = np.einsum(*args, out_axes, optimize=True)
    shape = [full[i] for i in sorted(keep)] + full[nb:]
    out = np.asarray(out).reshape(shape)
    return out * factor if factor != 1.0 else out


def reduce_terms(terms: Terms, weights: np.ndarray | None, src: Sequence[int], dst: Sequence[int],
                 sizes: Sequence[int], event_ndim: int) -> np.ndarray:
    """Σ over the plates of ``src`` not in ``dst`` of weights · terms (weights None: all 1), term by term
    without forming the broadcast arrays (``factors.contract.Terms``)."""
    nb = len(src)
    total = None
    for t in terms.terms:
        c = t[0]
        if len(t) == 2:
            val = reduce(t[1], src, dst, sizes, event_ndim) if weights is None else weighted_reduce(
                t[1], weights, src, dst, sizes, event_ndim)
        elif t[1] == "outer":
            a, b = _lift(t[2], nb, 1), _lift(t[3], nb, 1)
            if weights is not None:  # fold the weights into the smaller of the two products
                w = _lift(weights, nb, 0)
                sa = _prod(np.broadcast_shapes(a.shape[:nb], w.shape))
                sb = _prod(np.broadcast_shapes(b.shape[:nb], w.shape))
                if sa <= sb:
                    a = a * w[..., None]
                else:
                    b = b * w[..., None]
            val = pair_reduce(a, 1, b, 1, src, dst, sizes)
        elif t[1] == "prod":
            ops = [t[2], t[3]]
            if weights is not None:
                ops.append(_lift(weights, nb, 0).reshape(_lift(weights, nb, 0).shape + (1,) * event_ndim))
            val = _prod_reduce(ops, src, dst, sizes, event_ndim)
        else:
            M, v = _lift(t[2], nb, 2), _lift(t[3], nb, 1)
            dset = set(dst)
            summed_in_m = [i for i, p in enumerate(src) if p not in dset and M.shape[i] != 1]
            if summed_in_m:  # M varies along a summed plate: form M v (no larger than the event × plates)
                mv = np.einsum("...ij,...j->...i", M, v)
                val = reduce(mv, src, dst, sizes, 1) if weights is None else weighted_reduce(
                    mv, weights, src, dst, sizes, 1)
            else:  # Σ w M v = M Σ w v
                sv = reduce(v, src, dst, sizes, 1) if weights is None else weighted_reduce(
                    v, weights, src, dst, sizes, 1)
                Md = M.reshape([M.shape[i] for i, p in enumerate(src) if p in dset] + list(M.shape[nb:]))
                val = np.einsum("...ij,...j->...i", Md, sv)
        val = c * val
        total = val if total is None else total + val
    return total
