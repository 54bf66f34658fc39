r"""The fits of the rest of the model at the nodes of ``fg.ScaleQuadrature``'s grid, with σ clamped.

``NodeFits`` runs the algorithm at σ = e^u, warm-started from the nearest node fitted, and finds the first
look's mode and width of L(u); ``Stopper`` is the callback that stops a node's fit once its error, weighted by
the node's share of the integral, is below the handler's ``tol``, and restarts a slowly converging fit from the
extrapolation of its iterates.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from distributions import TiltedScale
from distributions.base import ExponentialFamily
from factorgraph.graph import convergence
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError
from factorgraph.posterior.results import Result

from .runners.options import RunOptions


class NodeFits:
    """The fits of the rest of the model with σ = e^u clamped, each warm-started from the fitted node nearest
    in u, and stopped by ``Stopper``."""

    def __init__(self, model: Model, name: str, h: Any, algorithm: Any, seed: int | None,
                 base: Result) -> None:
        self.model, self.name, self.h, self.algorithm, self.seed = model, name, h, algorithm, seed
        v = model.variables[name]
        self.latent = [n for n, x in model.variables.items() if x.is_latent and n != name]
        self.on_sigma = v.base is not None
        self.prior_kernel = TiltedScale(0.0, -1.0, **v.base) if self.on_sigma else None
        self.done: list[tuple[float, float, Result]] = []  # (u, L, fit) of every node fitted, first look included
        self.base = base
        self.top = -np.inf  # the largest L so far: the weights e^{L − top} of nodes relative to the heaviest
        self.sweeps = 0
        self.unsettled: list[float] = []
        self.compiled = None
        self.jumps = 0  # restarts of node fits from extrapolated iterates

    def jacobian(self, u: float) -> float:
        """What L adds to the clamped fit's ELBO: log p(σ) + u for a scale on σ, log |dλ/du| = log 2λ for sd=."""
        return float(self.prior_kernel.log_base(np.exp(u))) + u if self.on_sigma else float(np.log(2.0) - 2.0 * u)

    def fit(self, u: float) -> tuple[float, Result]:
        """L(u) and the fit of the rest at σ = e^u, warm-started from the nearest node fitted so far (and
        restarted from the geometric extrapolation of its own iterates when they converge slowly: ``Stopper``)."""
        start = min(self.done, key=lambda d: abs(d[0] - u))[2] if self.done else self.base
        v, jac = self.model.variables[self.name], self.jacobian(u)
        init = {n: start.posteriors[n] for n in self.latent if n in start.posteriors}
        # a scale on σ is fixed at σ (its prior factor then adds nothing: log h(σ) + u is in the Jacobian);
        # one used as sd= at λ = σ⁻², its prior factor adding log p_λ(λ)
        v.value, v.mask = np.array(np.exp(u) if self.on_sigma else np.exp(-2.0 * u)), np.array(True)
        self.model._compiled = self.compiled  # the clamped model's compilation, kept across nodes (rebound to σ)
        sweeps, origin, retreats = 0, None, 0
        try:
            while True:
                stop = Stopper(self, jac, self.h.max_iter - sweeps, origin, retreats < _RETREATS)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", convergence.ConvergenceWarning)
                    r = self.algorithm.run(self.model, RunOptions(
                        max_iter=self.h.max_iter - sweeps, tol=None, param_tol=None, seed=self.seed, progress=False,
                        callbacks=[stop], init=init))
                sweeps += r.n_iter
                if stop.jump is None or sweeps >= self.h.max_iter:
                    break
                init, origin, retreats = stop.jump, stop.origin, retreats + stop.retreated
                self.jumps += 1
        finally:
            v.value, v.mask = None, None
            self.compiled, self.model._compiled = self.model._compiled, None
        self.sweeps += sweeps
        if not (r.converged and stop.jump is None):
            self.unsettled.append(float(np.exp(u)))
        L = r.elbo + jac
        self.top = max(self.top, L)
        self.done.append((u, L, r))
        return L, r

    def first_look(self, u0: float, s0: float) -> tuple[float, float]:
        """The mode û of L and its width s = (−L″(û))^{-1/2}, by parabolas through the best node and its
        neighbours: from u0 ± s0 (the mean-field q(σ)'s log-mean and sd of log σ), stepping outward (doubling)
        until the best node is inside, then at each parabola's vertex until the bracket is a few widths across."""
        pts = [(u, self.fit(u)[0]) for u in (u0 - s0, u0, u0 + s0)]
        step = s0
        for _ in range(40):
            pts.sort()
            us, Ls = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
            i = int(np.argmax(Ls))
            if i in (0, len(pts) - 1):  # the peak is not bracketed: step outward
                step *= 2.0
                u_new = us[i] + (step if i else -step)
                if abs(u_new - u0) > MAX_LOG_RANGE:
                    raise ModelError(f"ScaleQuadrature({self.name!r}): the bound keeps rising towards log σ = "
                                     f"{u_new:.3g}; is the posterior of {self.name!r} proper?")
                pts.append((u_new, self.fit(u_new)[0]))
                continue
            vertex, width = _parabola(us[i - 1:i + 2], Ls[i - 1:i + 2])
            if width is None:
                return float(us[i]), float(min(us[i + 1] - us[i], us[i] - us[i - 1]))
            if us[i + 1] - us[i - 1] <= 8.0 * width and abs(vertex - us[i]) <= 0.25 * width:
                return float(vertex), float(width)
            near = np.min(np.abs(us - vertex))
            if near < 1e-3 * width:  # the vertex is a node: narrow the bracket on its wider side
                vertex = us[i] + 0.5 * (us[i + 1] - us[i] if us[i + 1] - us[i] > us[i] - us[i - 1] else
                                        us[i - 1] - us[i])
            pts.append((float(vertex), self.fit(float(vertex))[0]))
        pts.sort()
        i = int(np.argmax([p[1] for p in pts]))
        return pts[i][0], s0


class Stopper:
    r"""The stopping rule of a node's fit (a callback of the engine), and its acceleration.

    The fit is a fixed-point iteration that converges geometrically: with c_k the largest relative change of
    a natural parameter in sweep k and ρ = max(c_k/c_{k−1}, c_{k−1}/c_{k−2}) its rate, the error left is
    about c_k ρ/(1 − ρ), and what the n sweeps left of the fit's budget (``max_iter``) could still remove is
    at most c_k n (the bound that counts where ρ cannot be told from 1: changes at the rounding level).  A
    node's error moves the integral in proportion to its weight e^{L − L_top} (relative to the heaviest node),
    so the fit stops when

    .. math:: e^{L - L_\mathrm{top}}\; c_k \min(\rho / (1 - \rho),\, n) \le \mathrm{tol},

    or at once (after three sweeps) when the weight is below ``_LIGHT``: such a node, started at its
    neighbour's fit, cannot move the integral by a measurable amount.

    Where the rest is strongly coupled given σ (a small scale ties every effect to their mean: the centred
    eight schools), the iteration crawls along one direction, ρ → 1.  When the last two changes of the
    natural parameters η (each relative to 1 + |η|) point the same way (cosine > 0.999) at a steady rate
    0.5 < ρ < 1, the run is stopped and restarted from the geometric extrapolation of its iterates,

    .. math:: \eta_\infty = \eta_k + (\eta_k - \eta_{k-1})\, \rho / (1 - \rho)

    (Aitken's Δ² along that direction: exact for a linear iteration with one slow mode), if every
    extrapolated posterior is proper.  The ELBO judges the jump: if the first sweep from the extrapolated point
    ends below the ELBO before the jump, the step factor ρ/(1 − ρ) is divided by 4 and the jump retried, and
    below a factor of 1 the fit goes back to where it was and sweeps on; after ``_RETREATS`` such returns it
    jumps no more (the iteration has no single slow mode).  The algorithm's fixed point is unchanged; only the
    way to it is shorter.
    """

    def __init__(self, nodes: NodeFits, jac: float, budget: int, origin: dict | None = None,
                 allow: bool = True) -> None:
        # ``origin``: the state before the jump this run starts from (None: not from a jump); ``allow``: whether
        # this run may jump
        self.nodes, self.jac, self.budget, self.origin, self.allow = nodes, jac, budget, origin, allow
        self.hist: list[float] = []
        self.nat: list[dict[str, tuple]] = []
        self.rates: list[float] = []
        self.jump: dict[str, Any] | None = None
        self.retreated = False

    def __call__(self, it: int, elbo: float, eng: Any) -> str | bool:
        hist = self.hist
        hist.append(float(eng.max_change))
        if self.origin is not None and len(hist) == 1 and not elbo >= self.origin["elbo"]:
            return self._retreat(eng)  # the jump lowered the ELBO
        c = hist[-1]
        if c <= 4.0 * np.finfo(float).eps:
            return "converged"
        self._snapshot(eng)
        if len(hist) < 3:
            return False
        weight = float(np.exp(min(0.0, elbo + self.jac - self.nodes.top)))
        if weight <= _LIGHT:
            return "converged"
        # the error left: the geometric tail of the changes, or what the sweeps left could remove at most
        # (changes at the rounding level with a rate of 1 to within rounding say nothing more)
        left = float(self.budget - it)
        if hist[-2] > 0.0 and hist[-3] > 0.0:
            rho = max(hist[-1] / hist[-2], hist[-2] / hist[-3])
            if rho < 1.0:
                left = min(left, rho / (1.0 - rho))
        if weight * c * left <= self.nodes.h.tol:
            return "converged"
        return self._extrapolate(eng, float(elbo)) if self.allow else False

    def _snapshot(self, eng: Any) -> None:
        self.nat.append({n: tuple(np.array(a, dtype=float) for a in eng.q[n].natural)
                         for n in self.nodes.latent if n in eng.q and _extrapolable(eng.q[n])})
        del self.nat[:-3]

    def _extrapolate(self, eng: Any, elbo: float) -> bool:
        """Stop the run with ``jump`` set when the iterates' changes are steady (see the class docstring)."""
        if len(self.nat) < 3 or not self.nat[-1]:
            return False
        a, b, c = self.nat

        def change(x: dict, y: dict) -> np.ndarray:
            return np.concatenate([((q - p) / (1.0 + np.abs(p))).ravel()
                                   for n in x for p, q in zip(x[n], y[n], strict=True)])

        d0, d1 = change(a, b), change(b, c)
        n0, n1, cross = float(d0 @ d0), float(d1 @ d1), float(d0 @ d1)
        if not (n0 > 0.0 and n1 > 0.0) or cross < 0.999 * np.sqrt(n0 * n1):
            self.rates.clear()
            return False
        rho = cross / n0
        self.rates.append(rho)
        if not (0.5 < rho < 1.0 and len(self.rates) >= 2 and abs(rho - self.rates[-2]) <= 0.01 * (1.0 - rho)):
            return False
        origin = {"q": {n: eng.q[n] for n in self.nodes.latent if n in eng.q}, "elbo": elbo, "at": c,
                  "step": {n: tuple(y - x for x, y in zip(b[n], c[n], strict=True)) for n in c},
                  "factor": rho / (1.0 - rho)}
        return self._jump(origin)

    def _jump(self, origin: dict) -> bool:
        """Set ``jump`` to origin's posteriors moved by ``factor`` × ``step`` in natural parameters, if proper."""
        jump = dict(origin["q"])  # the variables not extrapolated restart as they are
        for n, nat in origin["at"].items():
            q = origin["q"][n]
            try:
                with np.errstate(all="ignore"):
                    new = type(q).from_natural(*(y + d * origin["factor"]
                                                 for y, d in zip(nat, origin["step"][n], strict=True)))
                    ok = bool(np.all(np.asarray(new.is_proper()))) and all(np.all(np.isfinite(e)) for e in new.natural)
            except (TypeError, ValueError, FloatingPointError):
                ok = False
            if not ok:
                self.rates.clear()
                return False
            jump[n] = new
        self.jump, self.origin = jump, origin
        return True

    def _retreat(self, eng: Any) -> bool:
        """After a jump that lowered the ELBO: the jump again with a quarter of the factor, or, below a factor of
        1, back to the state before it."""
        origin = {**self.origin, "factor": self.origin["factor"] / 4.0}
        if origin["factor"] >= 1.0 and self._jump(origin):
            return True
        self.jump, self.origin, self.retreated = dict(self.origin["q"]), None, True
        return True


def _extrapolable(q: Any) -> bool:
    """Whether q's natural parameters alone make it (``ExponentialFamily.from_natural``) and it says when they
    are proper: the families whose iterates ``Stopper`` extrapolates (the others restart as they are)."""
    t = type(q)
    return (isinstance(q, ExponentialFamily) and t.from_natural.__func__ is ExponentialFamily.from_natural.__func__
            and t.is_proper is not ExponentialFamily.is_proper)


_RETREATS = 3  # a node's fit jumps no more after this many jumps that could not raise the ELBO
_LIGHT = 1e-8  # a node whose weight relative to the heaviest is below this stops after three sweeps
MAX_LOG_RANGE = 40.0  # units of log σ the search may go from the mean-field E[σ]


def _parabola(u: np.ndarray, L: np.ndarray) -> tuple[float, float | None]:
    """Vertex and width (−L″)^{-1/2} of the parabola through three points; width None if it is not concave."""
    d1 = (L[1] - L[0]) / (u[1] - u[0])
    d2 = (L[2] - L[1]) / (u[2] - u[1])
    curv = 2.0 * (d2 - d1) / (u[2] - u[0])
    if not curv < 0.0:
        return float(u[1]), None
    slope_mid = d1 + 0.5 * curv * (u[1] - u[0])  # L′ at u[1]
    return float(u[1] - slope_mid / curv), float(1.0 / np.sqrt(-curv))
