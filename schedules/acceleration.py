"""Acceleration of the sweeps: Anderson extrapolation of the natural parameters, guarded by the ELBO.

A sweep maps the state θ of the run — the natural parameters of every posterior, and the messages that
damped factors mix their new ones with — to F(θ).  Coordinate ascent over strongly correlated blocks (the
intercept and the slope of a regression on an uncentred covariate, a group's mean and its scale) makes F
a contraction with rates λ close to 1 along the ridges, and the sweeps crawl: the error shrinks by λ per
sweep, so that λ = 0.996 needs thousands of sweeps.

Before each sweep the run proposes, from its last m + 1 sweeps (x_i the state a sweep started from,
f_i = F(x_i), residuals g_i = f_i − x_i), the Anderson (type II) extrapolation (Anderson 1965; Walker &
Ni 2011)

    x̃ = f_k − Σ_j γ_j (f_{j+1} − f_j),    γ = argmin_γ ‖g_k − Σ_j γ_j (g_{j+1} − g_j)‖,

the combination of the last sweeps whose residual, linearised, is least; the norm weighs each coordinate
by 1/(1 + |f_k|), the scale of the engine's convergence test.  Where F is linear with one slow mode, one
difference already gives its fixed point (as the squared extrapolation of SQUAREM, Varadhan & Roland 2008,
does, from two differences and a step length fitted to them); with up to m slow modes the m differences
remove them all, where a step that removes the slowest multiplies a mode of rate λ' by (1 − s(1 − λ'))²,
s = 1/(1 − λ), and so amplifies the faster ones (damped NCVMP updates of a scale per group make many
such modes, and there SQUAREM hardly shortens the run).

The guard keeps the ELBO monotone: the proposal is kept only if every posterior it gives is proper with
finite moments and its ELBO is at least that of f_k, the state the plain sweep reached; otherwise the run
stays at f_k (the plain sweep kept) and the rejection is counted.  Under NCVMP, whose sweeps need not
raise the ELBO, a sweep from a kept proposal that lowers the ELBO undoes the proposal first (before
backtracking raises any damping), and it counts as rejected.  A proposal moves the path, never the fixed
points: at a fixed point every residual is 0 and so is the step, and every sweep is still F.  The stopping
rules judge the plain sweeps, as without acceleration; a change of damping (backtracking) changes F, and
the history starts again.

Variables fitted by a handler (their q is a handler's fit, and its terms of the ELBO were computed against
the others' moments at that fit) and variables whose prior factor builds their q (a Markov chain) keep their
state through a proposal; the rules' kept state (a bound's variational parameters) is not extrapolated
either, which the guard allows for: the ELBO is a bound at any such state.  Where the ELBO is not an
objective (a factor's term is an approximation, neither exact nor a bound) nothing could guard a proposal,
and the run is not accelerated.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distributions import Bernoulli, Categorical
from factorgraph.graph.nodes import ModelError

from .errors import InferenceError

# m: the number of past differences an extrapolation combines
_MEMORY = 6
# accelerate="auto": the sweeps a run makes before extrapolating (a fit converged by then runs as without)
AUTO_AFTER = 50


def acceleration_option(value: Any, what: str) -> bool | str:
    """``accelerate``: ``True``, ``False`` (Python or numpy bools) or ``"auto"``."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, str) and value == "auto":
        return value
    raise ModelError(f"{what} must be True, False or 'auto', got {value!r}")


class Acceleration:
    """The Anderson extrapolation of an in-memory engine's sweeps (see the module docstring).

    ``before_sweep`` proposes and returns the state before a kept proposal (None if none was kept);
    ``after_sweep`` records the sweep; ``undo`` is called when the sweep from a kept proposal lowered
    the ELBO (NCVMP) and the engine went back.  ``accepted`` and ``rejected`` count the proposals kept and
    refused, and ``note()`` says so for ``Result.notes``.

    Parameters
    ----------
    c
        The compiled model: the variables extrapolated are those of its schedule that the engine updates
        from their summed messages (neither handled nor ``structured``).
    structured
        The variables whose prior factor builds their q (``Engine.structured``).
    memory
        m, the number of past differences combined.
    after
        The sweeps made before the first is recorded (``accelerate="auto"``: ``AUTO_AFTER``; 0 for ``True``).
    """

    def __init__(self, c: Any, structured: dict, memory: int = _MEMORY, after: int = 0) -> None:
        self.c = c
        self.after = after
        self.sweeps = 0  # the sweeps begun
        self.variables = [v for v in c.order if v.name not in c.handlers and v.name not in structured]
        self.memory = memory
        self.pairs: list[tuple[np.ndarray, np.ndarray]] = []  # (state a sweep started from, state it reached)
        self.start: np.ndarray | None = None
        self.keys: list = []  # the damping memory in the state: (factor, edge, variable) of damped factors
        self.damping: tuple = ()
        self.accepted = 0
        self.rejected = 0

    # ------------------------------------------------------------------------------ the state, flat
    def _flat(self, eng: Any) -> np.ndarray:
        parts = [np.ravel(np.asarray(a, dtype=float)) for v in self.variables for a in eng.q[v.name].natural]
        parts += [np.ravel(np.asarray(a, dtype=float)) for k in self.keys for a in eng._last[k]]
        return np.concatenate(parts) if parts else np.zeros(0)

    def _set(self, eng: Any, x: np.ndarray) -> None:
        """Put the flat state ``x`` (the layout of ``_flat``) into the engine: the damping memory, then every
        q (``_accept`` raises ``InferenceError`` on an improper one)."""
        i = 0
        nats = []
        for v in self.variables:
            nat = []
            for a in eng.q[v.name].natural:
                a = np.asarray(a)
                nat.append(x[i:i + a.size].reshape(a.shape))
                i += a.size
            nats.append(tuple(nat))
        for k in self.keys:
            out = []
            for a in eng._last[k]:
                a = np.asarray(a)
                out.append(x[i:i + a.size].reshape(a.shape))
                i += a.size
            eng._last[k] = tuple(out)
        for v, nat in zip(self.variables, nats, strict=True):
            eng._accept(v, nat)

    # ------------------------------------------------------------------------------ the hooks of the sweep loop
    def before_sweep(self, eng: Any, elbo: float | None, ascending: bool) -> tuple | None:
        """Propose an extrapolation when the sweeps ascend (VMP, or NCVMP under backtracking) and two sweeps
        of the same map are recorded, and keep it if the ELBO stays at least ``elbo`` (that of the current
        state); then note the state the sweep starts from.  Returns the engine's snapshot before a kept
        proposal, else None.  Before sweep ``after`` + 1 it does nothing."""
        self.sweeps += 1
        if self.sweeps <= self.after:
            return None
        damped = {f.name for f in self.c.factors if f.damping > 0.0}
        keys = [k for k in eng._last if k[0] in damped]
        damping = tuple(f.damping for f in self.c.factors)
        if damping != self.damping or keys != self.keys:  # another map (damping raised or lowered): start again
            self.pairs, self.damping, self.keys = [], damping, keys
        before = None
        if ascending and elbo is not None and len(self.pairs) >= 2:
            before = self._propose(eng, elbo)
        self.start = self._flat(eng)
        return before

    def after_sweep(self, eng: Any) -> None:
        """Record the accepted sweep: the state it started from and the state it reached."""
        if self.start is None or any(k not in eng._last for k in self.keys):
            self.pairs, self.start = [], None
            return
        self.pairs.append((self.start, self._flat(eng)))
        del self.pairs[:-(self.memory + 1)]

    def undo(self, eng: Any) -> None:
        """The sweep from a kept proposal lowered the ELBO and the engine went back to the state before it:
        the proposal counts as rejected, and the sweep starts from that state."""
        self.accepted -= 1
        self.rejected += 1
        self.start = self._flat(eng)

    # ------------------------------------------------------------------------------ the proposal
    def _propose(self, eng: Any, elbo: float) -> tuple | None:
        X = np.array([p[0] for p in self.pairs])
        F = np.array([p[1] for p in self.pairs])
        with np.errstate(all="ignore"):
            G = (F - X) / (1.0 + np.abs(F[-1]))
            ok = np.all(np.isfinite(G), axis=0)  # a coordinate at ±∞ (a pinned label's log-probability) stays
            dG = np.diff(G[:, ok], axis=0).T
            if not np.any(dG):
                return None  # nothing moved: at a fixed point already
            gamma = np.linalg.lstsq(dG, G[-1, ok], rcond=1e-12)[0]
            x = np.where(ok, F[-1] - np.diff(F, axis=0).T @ gamma, F[-1])
        if not np.all(np.isfinite(x)) or not np.any(x != F[-1]):
            return None
        snap = eng.snapshot()
        try:
            with np.errstate(all="ignore"):
                self._set(eng, x)
                value = eng.elbo(allow_minus_inf=True)
            good = bool(np.isfinite(value) and value >= elbo)
        except (InferenceError, ValueError, FloatingPointError, ZeroDivisionError):
            good = False  # an improper q, or moments out of range
        if good:
            self.accepted += 1
            return snap
        eng.restore(snap)
        self.rejected += 1
        return None

    def note(self, stopped: int = 0) -> str:
        """The line of ``Result.notes``: how many proposals were kept and how many refused ("" when
        ``accelerate="auto"`` never began)."""
        if self.after and self.sweeps <= self.after + 2:
            return ""
        when = f" from sweep {self.after + 1}, the run not having converged by then" if self.after else ""
        text = (f"acceleration (Anderson extrapolation of the last {self.memory + 1} sweeps, guarded by the "
                f"ELBO{when}): "
                f"{self.accepted + self.rejected} extrapolations tried, {self.accepted} accepted, {self.rejected} "
                "rejected (the plain sweep kept)")
        if stopped:
            text += f"; none after iteration {stopped}, where backtracking stood down"
        return text


def accelerator(c: Any, structured: dict) -> tuple[Acceleration | None, str]:
    """The run's ``Acceleration`` if its algorithm asks for one (``accelerate=True`` or ``"auto"``) and the ELBO
    can guard it, else None; and the note that says why an acceleration asked for by ``True`` is off (empty
    otherwise: ``"auto"`` is off without a word where it cannot run)."""
    asked = getattr(c.algorithm, "accelerate", False)
    if asked is False:
        return None, ""
    found, off = _guarded(c, structured)
    if asked == "auto":
        if found is None or any(v.family in (Categorical, Bernoulli) for v in c.latent):
            return None, ""  # a mixture's or a chain's ELBO has many optima: accelerated only when asked
        found.after = AUTO_AFTER
        return found, ""
    return found, off


def _guarded(c: Any, structured: dict) -> tuple[Acceleration | None, str]:
    """An ``Acceleration`` where the ELBO can guard it, else None and why."""
    active = [f for f in c.factors if f.claimed_by is None]
    if c.handlers:
        return None, ("acceleration off: the handled blocks' terms of the ELBO are computed at their fits, so the "
                      "ELBO of an extrapolated state could not guard it")
    loose = sorted({f.name for f in active if f.evidence_kind not in ("exact", "bound")})
    if loose:
        return None, (f"acceleration off: the ELBO is not an objective here (the terms of {loose} are "
                      "approximations, neither exact nor bounds), so it could not guard an extrapolation")
    if (not c.algorithm.monotone and getattr(c.algorithm, "backtracking", False) is False
            and any(not f.node.ftype.conjugate for f in active)):
        return None, ("acceleration off: without backtracking the NCVMP sweeps need not raise the ELBO, so it "
                      "could not guard an extrapolation")
    return Acceleration(c, structured), ""


__all__ = ["AUTO_AFTER", "Acceleration", "acceleration_option", "accelerator"]
