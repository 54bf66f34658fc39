"""Progress bars for ``fg.infer`` sweeps and for the stages of global handlers.

``fg.infer(..., progress=None)`` (the default) shows progress when standard error is a terminal,
``progress=True`` always, ``progress=False`` never.  Bars are drawn by tqdm when it is installed
(``pip install fgvmp[after]``); without it a plain line on standard error is rewritten in place.

The engine switches progress on for the duration of a fit (``active``); handler code asks for a bar
with ``bar(desc, total)`` and gets one that does nothing when progress is off, so handlers called on
their own (outside ``fg.infer``) stay silent.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_STATE = {"on": False}


def resolve(progress: bool | None) -> bool:
    """``None`` → whether standard error is a terminal; otherwise ``bool(progress)``."""
    if progress is None:
        try:
            return bool(sys.stderr.isatty())
        except (AttributeError, ValueError):
            return False
    return bool(progress)


@contextmanager
def active(on: bool) -> Iterator[None]:
    """Progress on (or off) within the block; restores the previous state."""
    before = _STATE["on"]
    _STATE["on"] = bool(on)
    try:
        yield
    finally:
        _STATE["on"] = before


def enabled() -> bool:
    return _STATE["on"]


class _Null:
    """The bar used when progress is off: every method does nothing."""

    def update(self, value: float | None = None, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def callback(self, *args: Any, **kwargs: Any) -> None:
        pass


class _Line:
    """Fallback without tqdm: ``desc: n/total  ELBO x`` rewritten in place on standard error."""

    def __init__(self, desc: str, total: int | None, label: str) -> None:
        self.desc, self.total, self.label, self.n = desc, total, label, 0
        self.last, self.value = 0.0, None

    def update(self, value: float | None = None, n: int = 1) -> None:
        self.n += n
        self.value = value if value is not None else self.value
        now = time.perf_counter()
        if now - self.last < 0.1 and (self.total is None or self.n < self.total):
            return
        self.last = now
        self._show(end="")

    def _show(self, end: str) -> None:
        tot = f"/{self.total}" if self.total else ""
        val = f"  {self.label} {self.value: .10g}" if self.value is not None else ""
        print(f"\r{self.desc}: {self.n}{tot}{val}", end=end, file=sys.stderr, flush=True)

    def close(self) -> None:
        """End the line at the count reached (``n/n`` when the run stopped before its total)."""
        if self.total and self.n < self.total:
            self.total = self.n
        self._show(end="\n")

    def callback(self, *args: Any, **kwargs: Any) -> None:
        self.update()


class _Tqdm:
    def __init__(self, desc: str, total: int | None, label: str, unit: str, leave: bool) -> None:
        from tqdm.auto import tqdm

        self.label = label
        try:  # a terminal that reports no size (a bare pseudo-terminal) would get an empty bar
            size = os.get_terminal_size(sys.stderr.fileno())
            ncols, nrows = size.columns or 100, size.lines or 24
        except (OSError, AttributeError, ValueError):
            ncols = nrows = None
        self.bar = tqdm(total=total, desc=desc, unit=unit, leave=leave, file=sys.stderr, ncols=ncols, nrows=nrows)

    def update(self, value: float | None = None, n: int = 1) -> None:
        if value is not None:
            self.bar.set_postfix_str(f"{self.label} {value:.10g}", refresh=False)
        self.bar.update(n)

    def close(self) -> None:
        """Close the bar at the count reached: a run that stops before its total (converged early) ends at 100 %
        of the steps it made, not at the fraction of the budget."""
        if self.bar.total is not None and self.bar.n < self.bar.total:
            self.bar.total = self.bar.n
            self.bar.refresh()
        self.bar.close()

    def callback(self, *args: Any, **kwargs: Any) -> None:  # scipy.optimize.minimize(callback=...)
        self.update()


def bar(desc: str, total: int | None = None, *, label: str = "ELBO", unit: str = "it",
        leave: bool = False) -> _Null | _Line | _Tqdm:
    """A progress bar (tqdm, else a stderr line) when progress is on, else one that does nothing.

    ``update(value)`` advances it by one step and shows ``label value``; ``callback`` advances it by
    one step and can be passed as ``scipy.optimize.minimize(callback=...)``; ``close()`` ends it.
    """
    if not _STATE["on"]:
        return _Null()
    try:
        return _Tqdm(desc, total, label, unit, leave)
    except ImportError:
        return _Line(desc, total, label)

