"""Checks of plates and shapes: a plate's size (``plate_size``), the ``plates=`` argument of a builder
(``plate_list``), the size of the arrays a variable's plates imply (``array_size``, at most ``MAX_ELEMENTS``
numbers), a constant that must broadcast to them (``fits``) and the lengths of a chain's sequences
(``sequence_lengths``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from factorgraph.graph.checks.arrays import _short, constant
from factorgraph.graph.checks.options import integer
from factorgraph.graph.nodes import ModelError, Plate

#: most numbers one array of the model may hold (a plate, or the product of a variable's plates and event)
MAX_ELEMENTS = 2**31
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
