"""``fg.EP()``: expectation propagation (Minka 2001), as an algorithm that runs itself (``schedules.runners``).

q(x) is the product of the messages into x.  For each site (a factor with an EP rule, ``schedules.ep_graph``)
and each of its instances: the cavity is q divided by the site's message, the tilted distribution the factor
times the cavity, its projection the Gaussian with the tilted moments (moment matching), and the new message
the projection divided by the cavity.  Factors with every neighbour but one known are exact (their message is
the factor itself); factors with no EP rule send their VMP message (hybrid), and ``Result.notes`` says which
factors ran which.  The engine is ``schedules.ep_engine``; the kernels ``factors.kernels.ep_sites``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from factorgraph.graph import checks
from factorgraph.graph.convergence import oscillation, warn
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError
from factorgraph.posterior.predict import FitRecord
from factorgraph.posterior.results import EP_APPROXIMATION, Result

from .ep_engine import EPEngine
from .errors import InferenceError
from .runners.options import AUTO, RunOptions

_MAX_DAMPING = 0.95


@dataclass(frozen=True)
class EP:
    """Expectation propagation: ``fg.infer(model, algorithm=fg.EP())``.

    Each site f_a (a factor with an EP rule: a Gaussian with known precision on a linear form of Gaussians,
    ``fg.is_positive``, ``fg.probit``, ``fg.bernoulli_logit``, a gated Gaussian with known precisions: a mixture
    matched to its moments) keeps a Gaussian message t_a; q ∝ prior × Π t_a.
    An update of site a: cavity q\\a = q / t_a, tilted p̂ ∝ f_a q\\a, q_new = the Gaussian with p̂'s mean and
    variance, t_a ← q_new / q\\a.  Conjugate factors whose other neighbours are known are exact; factors
    without an EP rule send their VMP message (the result's notes list them).

    The evidence ``Result.elbo`` is the EP approximation of log p(D) (kind ``"EP approximation"``):
    log Z_EP = Σ_a Σ_n [log Z_an + κ(q\\an) − κ(q)] + Σ_exact c_f + κ(q), with Z_an = ∫ f_an q\\an the site
    normalisers, κ the log partitions (of the cavities and of q in each site's direction, then of q) and
    c_f the log normalisers of the exact factors.  It is neither a bound nor exact (exact for linear-Gaussian
    models that q can hold: one weight vector, or a tree of scalar Gaussians); ``fg.compare`` says so when it is
    set beside bounds.

    Parameters
    ----------
    damping
        α ∈ [0, 1): the new message is (1 − α)η_new + αη_old in natural parameters.  The fixed points are
        the same; a run whose messages oscillate raises α (α ← (1 + α)/2, at most 0.95) and warns.
    parallel
        False (default): sequential EP, the instances of a site updated one after the other in order, q
        updated after each (a numba pass over the rows).  True: all instances of a site from the same q at
        once (vectorised), then q.
    max_iter
        Sweeps at most (each visits every factor once); the run warns when it ends unconverged.
    tol
        Converged when no natural parameter of q changed by more than ``tol`` (relative to 1 + |η|) in a
        sweep.

    Notes
    -----
    ``Result.elbo_trace`` holds log Z_EP after every sweep (NaN after a sweep that left some q improper, as a
    hybrid factor's neighbour before its first message).  EP does not maximise it: it may rise or fall.
    """

    damping: float = 0.0
    parallel: bool = False
    max_iter: int = 100
    tol: float = 1e-9
    name = "ep"
    monotone = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "damping", checks.number(self.damping, "EP: damping (in [0, 1))", low=0.0,
                                                          high=1.0, high_open=True))
        object.__setattr__(self, "parallel", checks.flag(self.parallel, "EP: parallel"))
        object.__setattr__(self, "max_iter", checks.integer(self.max_iter, "EP: max_iter (a positive integer)",
                                                            low=1))
        object.__setattr__(self, "tol", checks.number(self.tol, "EP: tol (a number ≥ 0)", low=0.0))

    def admit(self, model: Model, options: RunOptions) -> RunOptions:
        """Refuse what EP does not take: streamed batches, handlers, a schedule, starting posteriors, warm-up
        and callbacks (per-factor damping is taken)."""
        for what, given in (("data=", options.data is not None), ("handlers=", bool(options.handlers)),
                            ("schedule=", options.schedule is not None), ("init=", bool(options.init)),
                            ("warmup=", bool(options.warmup)), ("callbacks=", bool(options.callbacks))):
            if given:
                raise ModelError(f"fg.EP() does not take {what} (it visits every factor in model order each sweep)")
        return options

    def run(self, model: Model, options: RunOptions) -> Result:
        """Fit ``model``: sweeps until converged or ``max_iter`` (fg.infer's max_iter and tol, when given, win)."""
        max_iter = self.max_iter if options.max_iter == RunOptions.max_iter else options.max_iter
        tol = self.tol if isinstance(options.tol, str) and options.tol == AUTO else options.tol
        t0 = time.perf_counter()
        eng = EPEngine(model, self.damping, self.parallel, options.damping)
        trace, changes, warnings_, notes = [], [], [], []
        damping_raised = 0.0
        prev = _snapshot(eng)
        step_prev = None
        flips: list[bool] = []
        converged = False
        it = 0
        while it < max_iter:
            it += 1
            eng.sweep()
            now = _snapshot(eng)
            change = max((float(np.max(np.abs(a - b) / (1.0 + np.abs(a)), initial=0.0))
                          for a, b in zip(now, prev, strict=True)), default=0.0)
            step = np.concatenate([(a - b).ravel() for a, b in zip(now, prev, strict=True)]) if now else np.zeros(0)
            if step_prev is not None:
                flips.append(float(step @ step_prev) < 0.0)  # the update reversed the last one
            prev, step_prev = now, step
            changes.append(change)
            trace.append(np.nan if eng.improper() else eng.log_evidence())  # undefined while a q is flat
            if tol is not None and change <= tol:
                converged = True
                break
            if _oscillating(changes, flips):
                new = {k: min(_MAX_DAMPING, 0.5 * (1.0 + a)) for k, a in eng.damping.items()}
                if new != eng.damping:
                    eng.damping = new
                    damping_raised = max(new.values())
                    changes.clear()
                    flips.clear()
                    text = (f"EP: the messages oscillate (each sweep reverses the last and the change of q stopped "
                            f"falling); damping raised to {damping_raised:.3g}")
                    warn(text)
                    warnings_.append(text)
        bad = eng.improper()
        if bad:
            raise InferenceError(f"EP: after {it} sweeps the posteriors of {bad} are not proper distributions: no "
                                 "factor gave them a proper message (a variable reached only through factors "
                                 "without an EP rule whose other neighbours are flat, or a prior of precision 0)")
        elbo = trace[-1]
        if not np.isfinite(elbo):
            text = ("EP: log Z_EP is not finite: a cavity of the final q is improper (the approximation has no "
                    "evidence there)")
            warn(text)
            warnings_.append(text)
        if not converged:
            cyc = oscillation([x for x in trace if np.isfinite(x)])
            text = (f"EP did not converge in {it} sweeps: the largest relative change of q's natural parameters in "
                    f"the last sweep was {changes[-1] if changes else float('nan'):.3g} (tol {tol})"
                    + (f"; {cyc}" if cyc else ""))
            warn(text)
            warnings_.append(text)
        notes += _role_notes(eng, self)
        if eng.skipped or eng.halved:
            notes.append(f"EP: updates refused because a cavity or q would be improper: {eng.skipped} instance "
                         f"updates skipped, {eng.halved} step halvings")
        if damping_raised:
            notes.append(f"EP: damping raised to {damping_raised:.3g} after oscillation")
        if options.note:
            notes.insert(0, options.note)
        posteriors = {v.name: eng.q[v.name] for v in eng.latent}
        result = Result(model.name, self.name, posteriors, elbo, EP_APPROXIMATION,
                        np.asarray(trace, dtype=float), it, converged, time.perf_counter() - t0, 0.0, warnings_, 0.0,
                        notes)
        result.model = model
        # for fg.predict: the model and the data of the fit (set_data may replace them later)
        result.fit_record = FitRecord(model, {k: d.value for k, d in model.data.items()}, model.data_version)
        return result


def _snapshot(eng: EPEngine) -> list[np.ndarray]:
    out = [eng.lin.copy(), eng.prec.copy()]
    for h, J in eng.vec.values():
        out += [h.copy(), J.copy()]
    for nat in eng.other.values():
        out += [np.array(a, dtype=float, copy=True) for a in nat]
    return out


def _oscillating(changes: list[float], flips: list[bool], window: int = 6) -> bool:
    """The last ``window`` sweeps each reversed the one before (a 2-cycle) and the largest change did not halve
    over them (a slow but steady drift, as of the unanchored mean of a ranking, is not oscillation)."""
    return (len(flips) >= window and all(flips[-window:]) and len(changes) > window
            and changes[-1] > 0.5 * changes[-window - 1])


def _role_notes(eng: EPEngine, alg: EP) -> list[str]:
    by = {"exact": [], "site": [], "gate": [], "vmp": []}
    for r in eng.roles:
        if r.kind in by:
            by[r.kind].append(r.factor.name)
    notes = [f"EP ({'parallel' if alg.parallel else 'sequential'}): sites updated by moment matching: "
             f"{by['site'] or 'none'}; exact factors (message = the factor): {by['exact'] or 'none'}"]
    if by["gate"]:
        notes.append(f"EP: mixtures (gated Gaussians) updated by matching the moments of the mixture: {by['gate']}")
    if by["vmp"]:
        notes.append(f"EP hybrid: these factors have no EP rule and send their VMP message: {by['vmp']}; log Z_EP "
                     "counts their E_q[log f] in place of a site normaliser")
    return notes


__all__ = ["EP", "EP_APPROXIMATION"]
