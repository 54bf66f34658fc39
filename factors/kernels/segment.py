"""Segment reductions: sums of rows that share an integer label (the scatter half of indexing)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def segment_sum_rows(labels: np.ndarray, values: np.ndarray, n_segments: int) -> np.ndarray:
    """out[g, j] = Σ_{i : labels[i] = g} values[i, j], in one pass over the rows."""
    out = np.zeros((n_segments, values.shape[1]))
    for i in range(values.shape[0]):
        g = labels[i]
        for j in range(values.shape[1]):
            out[g, j] += values[i, j]
    return out


def segment_sum(labels: np.ndarray, values: np.ndarray, n_segments: int) -> np.ndarray:
    """Σ of ``values`` over its first axis within each label: shape (n_segments,) + values.shape[1:].

    A vector goes through ``np.bincount``; trailing axes through one numba pass over the rows.
    """
    values = np.asarray(values, dtype=float)
    if values.ndim == 1:
        return np.bincount(labels, weights=values, minlength=n_segments)
    flat = np.ascontiguousarray(values.reshape(values.shape[0], -1))
    return segment_sum_rows(labels, flat, n_segments).reshape((n_segments,) + values.shape[1:])
