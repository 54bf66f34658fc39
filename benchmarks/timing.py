"""Timing helpers shared by the benchmark scripts."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np


def median_time(fn: Callable[[], object], repeat: int = 3) -> float:
    """Median wall-clock seconds of ``repeat`` calls of ``fn``."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


class SweepTimer:
    """An ``fg.infer`` callback stamping the wall clock after every sweep (ELBO included); created just
    before the run, so the first interval is the first sweep."""

    def __init__(self) -> None:
        self.stamps = [time.perf_counter()]

    def __call__(self, it, elbo, engine) -> bool:
        self.stamps.append(time.perf_counter())
        return False

    def per_iter(self) -> float:
        """Median seconds per sweep, the first (warm-up) one left out."""
        d = np.diff(self.stamps)
        return float(np.median(d[1:] if d.size > 1 else d))
