"""Backtracking and damping: NCVMP's step control.

A damped factor sends m ← (1 − α) m_new + α m_prev.  Backtracking undoes a sweep that lowered the ELBO
(``snapshot``/``restore`` of the posteriors, the damping memory and the rules' kept state) and retries it
with the damping of the non-conjugate factors raised, α ← (1 + α)/2; adaptive backtracking lowers it again,
α ← 2α − 1 (never below the initial damping), after ``_RELAX_AFTER`` accepted sweeps in a row.  The loop that
decides is ``schedules.engine._iterate``.
"""

from __future__ import annotations

from typing import Any

from .compiled import Compiled

# adaptive backtracking: after this many accepted sweeps in a row, undo one step of raised damping
_RELAX_AFTER = 3


class Backtracking:
    """Undo and retry (a part of ``schedules.engine.Engine``): reads the posteriors ``q``, ``stats`` and
    ``version``, the damping memory ``_last`` and ``raised``, each factor's highest damping so far."""

    c: Compiled
    q: dict[str, Any]
    stats: dict[str, tuple]
    version: dict[str, int]
    _last: dict
    raised: dict[str, float]

    def snapshot(self) -> tuple:
        """The state a retried sweep starts from: posteriors, statistics, damping memory, the rules' kept state."""
        states = {f.name: dict(f.params["state"]) for f in self.c.factors}
        return (dict(self.q), dict(self.stats), dict(self._last), states)

    def restore(self, snap: tuple) -> None:
        """Go back to a ``snapshot``; every cached deterministic moment is invalidated."""
        q, stats, last, states = snap
        self.q, self.stats, self._last = dict(q), dict(stats), dict(last)
        for f in self.c.factors:
            f.params["state"] = dict(states[f.name])
        for name in self.version:  # invalidate every cached deterministic moment
            self.version[name] += 1

    def raise_damping(self) -> bool:
        return raise_damping(self.c.factors, self.raised)

    def relax_damping(self) -> None:
        relax_damping(self.c.factors)


def raise_damping(factors: list, raised: dict[str, float]) -> bool:
    """Halve the undamped share of every non-conjugate factor's messages (α ← (1 + α)/2), recording the highest
    damping reached per factor in ``raised``; False if none is left to raise."""
    out = False
    for f in factors:
        if not f.node.ftype.conjugate and f.damping < 1.0 - 1e-10:
            f.damping = 0.5 * (1.0 + f.damping)
            raised[f.name] = max(raised.get(f.name, 0.0), f.damping)
            out = True
    return out


def relax_damping(factors: list) -> None:
    """Undo one ``raise_damping`` step (α ← 2α − 1), never below each factor's initial damping."""
    for f in factors:
        if f.damping > f.initial_damping:
            f.damping = max(f.initial_damping, 2.0 * f.damping - 1.0)


def _undamped_share(c: Compiled) -> float:
    """min (1 − α) over the damped factors that send messages (1 when none is damped)."""
    return min((1.0 - f.damping for f in c.factors if f.damping > 0.0 and f.claimed_by is None), default=1.0)


__all__ = ["Backtracking", "raise_damping", "relax_damping"]
