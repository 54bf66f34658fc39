"""Gather and scatter for variables indexed by constant integer labels (``x[idx]``).

With labels g(n) ∈ {0, …, G−1} for the N elements of a plate n, the indexed node y_n = x_{g(n)}
has statistics E[u(y_n)] = E[u(x_{g(n)})] (a gather along x's plate), and since every factor on
y_n is a factor on x_{g(n)}, the message to x_g is the sum of the messages to the rows labelled g:

    m(x_g) = Σ_{n : g(n) = g} m(y_n)

(a segment sum; Winn & Bishop 2005, a variable's message is the sum of its factors' messages).
This is exactly the gradient of Σ_n ⟨m(y_n), E[u(x_{g(n)})]⟩ with respect to E[u(x_g)].
Arrays carry their plates first (in the model's order), then event axes; ``axis`` is the indexed
plate's position among the source's plates and ``dest`` the gathered plate's position among the
indexed node's plates.
"""

from __future__ import annotations

import numpy as np

from .kernels.segment import segment_sum


def gather(stat: np.ndarray, labels: np.ndarray, axis: int, dest: int, n_plates: int) -> np.ndarray:
    """E[u(x)] on the source's plates → on the indexed node's plates (``n_plates`` of them)."""
    stat = np.asarray(stat)
    if stat.ndim < n_plates:  # the same value on every plate element
        return stat
    if stat.shape[axis] == 1:  # constant along the indexed plate: nothing to gather
        out = stat
    else:
        out = np.take(stat, labels, axis=axis)
    return np.moveaxis(out, axis, dest) if axis != dest else out


def scatter(msg: np.ndarray, labels: np.ndarray, counts: np.ndarray, axis: int, dest: int,
            n_plates: int, event_ndim: int) -> np.ndarray:
    """A message on the indexed node's plates → its segment sums on the source's plates.

    A message that is the same for every row (size 1 along the gathered plate) sums to the
    label counts times that value, without a pass over the rows.
    """
    msg = np.asarray(msg, dtype=float)
    if msg.ndim - event_ndim < n_plates:
        msg = msg.reshape((1,) * (n_plates + event_ndim - msg.ndim) + msg.shape)
    if axis != dest:
        msg = np.moveaxis(msg, dest, axis)
    if msg.shape[axis] > 1 and msg.strides[axis] == 0:  # broadcast along the rows: one value repeated
        msg = msg[(slice(None),) * axis + (slice(0, 1),)]
    if msg.shape[axis] == 1:
        shape = [1] * msg.ndim
        shape[axis] = counts.shape[0]
        return msg * counts.reshape(shape)
    if msg.ndim == 1:
        return segment_sum(labels, msg, counts.shape[0])
    front = np.moveaxis(msg, axis, 0)
    return np.moveaxis(segment_sum(labels, front, counts.shape[0]), 0, axis)
