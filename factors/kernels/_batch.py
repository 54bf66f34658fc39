"""Broadcasting helpers shared by the numpy-facing wrappers (flatten in, reshape out)."""

from __future__ import annotations

import numpy as np


def as_flat(x) -> tuple[np.ndarray, tuple[int, ...]]:
    """Return ``x`` as a contiguous 1-D float64 array and its original shape."""
    a = np.asarray(x, dtype=np.float64)
    return np.ascontiguousarray(a.reshape(-1)), a.shape


def broadcast_flat(*arrays) -> tuple[list[np.ndarray], tuple[int, ...]]:
    """Broadcast the inputs together; return contiguous 1-D float64 copies and the broadcast shape."""
    bs = np.broadcast_arrays(*[np.asarray(a, dtype=np.float64) for a in arrays])
    shape = bs[0].shape
    return [np.ascontiguousarray(b).reshape(-1) for b in bs], shape


def broadcast_rows(*arrays) -> tuple[list[np.ndarray], tuple[int, ...]]:
    """Broadcast inputs with a trailing axis K; return contiguous ``(N, K)`` float64 arrays and the shape."""
    bs = np.broadcast_arrays(*[np.atleast_1d(np.asarray(a, dtype=np.float64)) for a in arrays])
    shape = bs[0].shape
    k = shape[-1]
    return [np.ascontiguousarray(b).reshape(-1, k) for b in bs], shape


def restore(out: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Reshape a flat kernel output back to the broadcast shape."""
    return out.reshape(shape)
