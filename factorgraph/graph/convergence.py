"""Reporting runs that end unconverged: the ``ConvergenceWarning`` class and the text it carries."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Mapping, Sequence


class ConvergenceWarning(UserWarning):
    """Inference stopped before its stopping rule was met (``max_iter`` reached, backtracking gave up,
    a handler's optimiser failed to converge, a callback stopped the run).

    The message names the variables that had not settled: those whose natural parameters η still
    changed, in the last sweep, by more than the tolerance relative to 1 + |η|.  The same text is in
    ``Result.warnings``.  Silence it, if you must, with
    ``warnings.simplefilter("ignore", fg.ConvergenceWarning)``.
    """


def unsettled(changes: Mapping[str, float], threshold: float | None, limit: int = 5) -> str:
    """The variables whose last-sweep relative change exceeds ``threshold`` (the largest, if none does),
    largest change first: ``'w' (3.1e-01), 'alpha' (2e-05)``."""
    order = sorted(changes.items(), key=lambda kv: -kv[1])
    above = [(k, v) for k, v in order if threshold is None or v > threshold] or order[:1]
    text = ", ".join(f"{k!r} ({v:.2g})" for k, v in above[:limit])
    if len(above) > limit:
        text += f" and {len(above) - limit} more"
    return text


def oscillation(trace: Sequence[float]) -> str:
    """A description of a 2-cycle at the end of an ELBO trace ("" if there is none)."""
    if len(trace) < 6:
        return ""
    a, b, c, d = trace[-4:]
    scale = max(1.0, abs(d))
    if abs(c - a) <= 1e-6 * scale and abs(d - b) <= 1e-6 * scale and abs(d - c) > 1e-4 * scale:
        return f"the ELBO alternates between {min(c, d):.6g} and {max(c, d):.6g} (a 2-cycle)"
    diffs = [y - x for x, y in zip(trace[-6:-1], trace[-5:], strict=True)]
    flips = sum(1 for x, y in zip(diffs[:-1], diffs[1:], strict=True) if x * y < 0)
    if flips >= 3 and max(abs(x) for x in diffs) > 1e-4 * scale:
        return f"the ELBO oscillates (last values {', '.join(f'{x:.6g}' for x in trace[-4:])})"
    return ""


# the library's packages: a warning is attributed to the first frame outside them (the user's call)
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIBRARY = tuple(os.path.join(_ROOT, p) + os.sep for p in ("factorgraph", "schedules", "factors", "distributions"))


def warn(text: str) -> None:
    """Emit ``text`` as a ``ConvergenceWarning`` attributed to the user's line that called the library."""
    level, frame = 1, sys._getframe(0)
    while frame is not None and frame.f_code.co_filename.startswith(_LIBRARY):
        frame, level = frame.f_back, level + 1
    warnings.warn(text, ConvergenceWarning, stacklevel=level)


__all__ = ["ConvergenceWarning", "oscillation", "unsettled", "warn"]
