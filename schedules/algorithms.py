"""Algorithm settings objects ``fg.VMP()``, ``fg.NCVMP()``, which run themselves (``schedules.runners``), and the
choice between them when ``fg.infer`` is given none."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from factorgraph.graph import checks
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import Deterministic, Gate, Indexed, ModelError, Variable
from factorgraph.posterior.results import Result
from factors.base import RuleNotFound

from .acceleration import acceleration_option
from .compile import _feeds_handler, _needs_messages
from .ep import EP
from .runners.message_passing import admit_message_passing, run_message_passing
from .runners.options import RunOptions


class _MessagePassing:
    """The run VMP and NCVMP share (``runners.message_passing``): in memory, or sharded over Dask chunks."""

    def admit(self, model: Model, options: RunOptions) -> RunOptions:
        """Refuse a stream of batches (``data=``); every other option is checked by ``fg.infer``."""
        return admit_message_passing(model, options)

    def run(self, model: Model, options: RunOptions) -> Result:
        """Fit ``model`` with checked ``options``."""
        return run_message_passing(model, self, options)


@dataclass(frozen=True)
class VMP(_MessagePassing):
    """Variational message passing (Winn & Bishop 2005): coordinate ascent on the ELBO.

    Parameters
    ----------
    damping
        Global damping α ∈ [0, 1) of factor messages, η_sent = (1 − α)η_new + αη_previous
        (per-factor values may be given to ``fg.infer(damping={...})``).  Conjugate VMP needs none.
    accelerate
        Before each sweep, move to the Anderson extrapolation of the last sweeps,
        x̃ = f_k − Σ_j γ_j (f_{j+1} − f_j) with γ the least-squares fit of the residuals f_i − x_i
        (``schedules.acceleration``), when its ELBO is no lower than the current one and every q proper;
        otherwise keep the plain sweep.  The ELBO still never decreases and the fixed points are the same;
        fits that crawl along a ridge (intercept and slope of an uncentred covariate under mean field, a
        scale per group) converge in far fewer sweeps.  ``"auto"`` (the default) starts extrapolating only
        after 50 sweeps without convergence, so a fit that converges within them runs exactly as
        without acceleration, and one that crawls is accelerated from there; ``True`` extrapolates from the
        start, ``False`` never.  While it runs, a sweep costs one more ELBO evaluation and the run keeps 14
        copies of the state (the last 7 sweeps' start and end); a multimodal fit may end at another of its
        optima, so ``"auto"`` leaves a model with discrete latent variables (a mixture, a hidden Markov
        chain) unaccelerated.  ``Result.notes`` counts the extrapolations accepted and rejected.
    """

    damping: float = 0.0
    accelerate: bool | str = "auto"
    name = "vmp"
    monotone = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "damping", checks.number(self.damping, "VMP: damping (in [0, 1))", low=0.0,
                                                          high=1.0, high_open=True))
        object.__setattr__(self, "accelerate", acceleration_option(self.accelerate, "VMP: accelerate"))


@dataclass(frozen=True)
class NCVMP(_MessagePassing):
    """Non-conjugate variational message passing (Knowles & Minka 2011).

    A non-conjugate factor sends φ = C(θ)⁻¹ ∂S/∂θ, the gradient of S = E_q[log f] with respect to
    the target's mean parameters; a conjugate factor's message is its VMP message (Theorem 2).
    Fixed points are stationary points of the ELBO, but an undamped update may lower it, and may
    oscillate for ever (a 2-cycle between two ELBOs).  Damping, η_sent = (1 − α)η_new + αη_previous,
    leaves the fixed points unchanged; with it an update is a natural-gradient step of length 1 − α on
    the ELBO, which rises for a short enough step.

    By default (``backtracking="adaptive"``) the engine undoes any sweep that lowers the ELBO (by more
    than round-off and the Monte Carlo error of handled blocks), raises the damping of the unclaimed
    non-conjugate factors (α ← (1 + α)/2) and retries, so the ELBO never decreases; after 3 accepted
    sweeps in a row it lowers the damping again (α ← 2α − 1, never below ``damping``), so a fit that
    needed heavy damping once does not crawl for the rest of the run.  ``backtracking=True`` raises
    the damping the same way but never lowers it; ``backtracking=False`` runs plain NCVMP (the ELBO
    may fall or cycle; a run that ends unconverged still warns).  If the ELBO keeps falling with the
    damping at 1, the run stops at the last accepted state with a ``fg.ConvergenceWarning``.  The
    result's notes say how far the damping was raised.

    Parameters
    ----------
    damping
        Initial (and minimum) global damping α ∈ [0, 1) (per-factor values go to
        ``fg.infer(damping={...})``).
    backtracking
        ``"adaptive"`` (default), ``True`` or ``False``, as described above.
    accelerate
        As for ``fg.VMP``: an extrapolation is proposed before a sweep while backtracking guards the
        sweeps (never with ``backtracking=False``, whose sweeps need not raise the ELBO), and a sweep from
        it that lowers the ELBO undoes it before any damping is raised.
    """

    damping: float = 0.0
    backtracking: bool | str = "adaptive"
    accelerate: bool | str = "auto"
    name = "ncvmp"
    monotone = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "damping", checks.number(self.damping, "NCVMP: damping (in [0, 1))", low=0.0,
                                                          high=1.0, high_open=True))
        object.__setattr__(self, "accelerate", acceleration_option(self.accelerate, "NCVMP: accelerate"))
        if isinstance(self.backtracking, np.bool_):
            object.__setattr__(self, "backtracking", bool(self.backtracking))
        if not (isinstance(self.backtracking, bool) or (isinstance(self.backtracking, str)
                                                       and self.backtracking == "adaptive")):
            raise ModelError(f"NCVMP: backtracking must be 'adaptive', True or False, got {self.backtracking!r}")


def default_algorithm(model: Model, handlers: Any) -> tuple[VMP | NCVMP | EP, str]:
    """VMP if every factor that sends messages has a VMP rule for its method, else EP when some factor has only
    an EP rule (``fg.is_positive``), else NCVMP, with a note why."""
    handled = set(handlers) if isinstance(handlers, dict) else set()
    lacking = []
    for f in model.factors:
        for edge, arg in f.edges.items():
            target = arg.source if isinstance(arg, Gate) else arg
            if (isinstance(target, Variable | Deterministic | Indexed) and _needs_messages(target)
                    and not _feeds_handler(target, handled, edge, f)):
                try:
                    f.ftype.get_rule(edge, "vmp", f.method)
                except RuleNotFound:
                    lacking.append(f"{f.name} (method {f.method!r})")
                    break
    if not lacking:
        return VMP(), ""
    only_ep = [f.name for f in model.factors if _only_ep(f)]
    if only_ep:
        return EP(), (f"algorithm: fg.EP(), chosen by default because these factors have only an expectation "
                      f"propagation rule: {', '.join(only_ep)}")
    return NCVMP(), (f"algorithm: fg.NCVMP(), chosen by default because these factors have no VMP rule: "
                     f"{', '.join(lacking)}")


def _only_ep(f) -> bool:
    """Whether a factor has EP rules and no VMP or NCVMP rule for its method."""
    algs = {a for (_, a, m) in f.ftype.rules() if m == f.method}
    return "ep" in algs and not algs & {"vmp", "ncvmp"}
