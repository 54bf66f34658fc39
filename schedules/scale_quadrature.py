r"""A global handler that integrates one scale variable out by quadrature: q(σ, rest) = q(σ) q(rest | σ).

Mean field makes q(σ) independent of the effects σ scales, which is what it cannot do in a funnel (eight
schools: small σ pulls every θ_j to μ).  ``handlers={"tau": fg.ScaleQuadrature()}`` keeps the dependence:

* at each node σ_g = e^{u_g} of a uniform grid in u = log σ the rest of the model is fitted with σ fixed
  (the algorithm given to ``fg.infer``), which gives q_g(rest) and its bound
  L(u_g) = ELBO_g + log 2λ_g, where ELBO_g holds the prior's log density over λ = σ⁻² at λ_g and
  log 2λ is log |dλ/du|;
  (for a scale used as a term of a product, fixed at σ itself: L(u) = ELBO_g + log p(σ_g) + u);
* q(u) ∝ e^{L(u)} is the optimal q(σ) for those conditionals, and the bound of the whole is

  .. math::

      \mathcal L = E_{q(u)}[L(u)] + H[q(u)] = \log\int e^{L(u)}\,du \le \log p(D),

  computed by the trapezoid rule on the grid (geometrically convergent for this smooth, decaying integrand;
  the rule on every other node gives the error estimate reported in ``Result.notes``);
* every other variable's posterior is the mixture Σ_g w_g q_g (``distributions.QuadratureMixture``,
  w_g ∝ e^{L(u_g)}), and σ's is the density e^{L(u)} (``distributions.GridDensity`` on a grid eight times
  finer than the nodes, L interpolated there by the cubic spline through them).

The grid is placed and sized from the posterior of u: a first look finds the mode û of L and its width
s = (−L″(û))^{-1/2} by parabolas through nodes (starting at the mean-field fit's E[σ] ± its sd of log σ);
the first grid, u_k = û + k·h with k an integer and h = 2√(2·span)·s/(points − 1), is extended while L at its
ends is within ``span`` of the peak, and its step is halved (new nodes at the odd k) until the error
estimate (``_Grid.error``) is below 1e-4.  A scale whose posterior sd of log σ is 0.01 (many rows) and one
whose posterior spans decades of σ are treated alike.  The cost is one fit of the rest per node, each
warm-started from the nearest node already fitted and stopped as soon as its error, weighted by the node's
share of the integral, is below ``tol`` (``Stopper``, which also restarts a slowly converging fit from the
extrapolation of its iterates).

Joint draws (``result.sample``, ``fg.predict``, ``to_arviz``) pick a node first, then σ = σ_g and every
other variable from q_g, so they keep the dependence.  Only an unplated scale, used as ``sd=`` (a Gamma over
σ⁻²) or on σ itself (a term of a product, the non-centred form) can be integrated out; the other variables
keep whatever factorisation their fit uses, so the gain is largest where, given σ, that factorisation is
nearly exact (the non-centred eight schools: KL(q ‖ p) from 0.156 to 0.040 nats).  Where it is not, L(u)
falls short of log p(D | σ) p(σ) σ by the fit's own gap KL(q_g ‖ p(rest | σ, D)), and q(σ) follows that: on
the centred eight schools (q(μ)q(θ) given τ, a gap that grows like −log τ as τ → 0) E[τ] is 5.73 against the
exact 3.60.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import Any

import numpy as np
from scipy.interpolate import CubicSpline
from scipy.special import logsumexp

from distributions import GridDensity, QuadratureMixture
from factorgraph.graph import convergence
from factorgraph.graph.derived import mixture_moments
from factorgraph.graph.model import Model
from factorgraph.graph.nodes import ModelError
from factorgraph.posterior.predict import FitRecord
from factorgraph.posterior.results import Result, combine_kinds

from .quadrature_fits import MAX_LOG_RANGE, NodeFits
from .runners.options import RunOptions


class ScaleQuadrature:
    """Integrate a scale variable (``fg.half_cauchy`` and kin, used as ``sd=``) out by quadrature in log σ.

    Parameters
    ----------
    points : int
        Nodes of the first grid across the range where L is within ``span`` of its peak, as a Gaussian of
        the width found by the first look would have it (odd, ≥ 9); the grid is then extended to the tails
        and refined (its step halved, up to three times) until the error estimate is below 1e-4.
    span : float
        The grid covers the u = log σ where the bound L(u) is within ``span`` nats of its peak.
    max_iter, tol
        Each node's fit of the rest of the model runs until its error (the relative change of its natural
        parameters extrapolated at the fit's geometric rate), times the node's weight relative to the heaviest
        node, is below ``tol``, or ``max_iter`` sweeps.
    """

    def __init__(self, points: int = 81, span: float = 20.0, max_iter: int = 20_000, tol: float = 1e-11) -> None:
        if not (isinstance(points, int | np.integer) and points >= 9 and points % 2 == 1):
            raise ModelError(f"ScaleQuadrature: points must be an odd integer ≥ 9, got {points!r}")
        if not span > 5:
            raise ModelError(f"ScaleQuadrature: span must exceed 5 nats, got {span!r}")
        self.points, self.span, self.max_iter, self.tol = int(points), float(span), int(max_iter), float(tol)

    def fit(self, *args: Any, **kwargs: Any) -> None:
        raise ModelError("ScaleQuadrature integrates its variable out around whole fits of the rest; fg.infer "
                         "runs it (handlers={name: fg.ScaleQuadrature()}), not the engine")

    def runner(self, algorithm: Any) -> QuadratureRunner:
        """The runner ``fg.infer`` uses in place of ``algorithm``: fits of the rest by ``algorithm`` at each node."""
        return QuadratureRunner(self, algorithm)

    def __repr__(self) -> str:
        return f"ScaleQuadrature(points={self.points}, span={self.span:g})"


def _check(model, name: str, handlers: dict) -> Any:
    if len(handlers) != 1:
        raise ModelError(f"ScaleQuadrature cannot be combined with other handlers; got {sorted(handlers)}")
    v = model.variables.get(name)
    if v is None:
        raise ModelError(f"handlers: {name!r} is not a variable of model {model.name!r}")
    if not getattr(v, "scale_prior", None):
        raise ModelError(f"ScaleQuadrature({name!r}): {name!r} must be a scale made by fg.half_cauchy, fg.half_normal, "
                         f"fg.half_student_t, fg.exponential or fg.uniform_scale, got a {v.family.__name__} variable")
    if v.shape != ():
        raise ModelError(f"ScaleQuadrature({name!r}): {name!r} is plated over {[p.name for p in v.plates]}; only a "
                         "single scale can be integrated out")
    if v.mask is not None:
        raise ModelError(f"ScaleQuadrature({name!r}): {name!r} is observed")
    return v


class QuadratureRunner:
    """The run of ``fg.infer(model, algorithm, handlers={name: fg.ScaleQuadrature()})``: ``algorithm`` fits the
    rest of the model at each node (``run_scale_quadrature``)."""

    def __init__(self, handler: ScaleQuadrature, algorithm: Any) -> None:
        if getattr(algorithm, "accelerate", None) == "auto":
            # the node fits have their own stopping rule and extrapolation (``quadrature_fits.Stopper``)
            algorithm = dataclasses.replace(algorithm, accelerate=False)
        self.handler, self.algorithm = handler, algorithm
        self.name = algorithm.name

    def admit(self, model: Model, options: RunOptions) -> RunOptions:
        """The options the algorithm admits."""
        return self.algorithm.admit(model, options)

    def run(self, model: Model, options: RunOptions) -> Result:
        """Integrate the handler's variable out (options checked; of them the quadrature uses ``max_iter``, the
        tolerances, ``init`` and ``seed``, for the starting mean-field fit)."""
        name = next(k for k, x in options.handlers.items() if x is self.handler)
        _check(model, name, options.handlers)
        # the starting fit has no handler: its "auto" tolerances are those of a plain fit
        start = options.resolved(self.algorithm, handled=False)
        return run_scale_quadrature(model, name, self.handler, self.algorithm, start.max_iter, start.tol,
                                    start.param_tol, start.init, start.seed)


def run_scale_quadrature(model: Model, name: str, h: ScaleQuadrature, algorithm: Any, max_iter: int, tol: Any,
                         param_tol: Any, init: dict | None, seed: int | None) -> Result:
    """Integrate the scale ``name`` out by quadrature with the handler ``h``, the rest fitted by ``algorithm``
    (see the module docstring); ``max_iter``, ``tol``, ``param_tol`` and ``init`` are those of the mean-field fit
    that the first look starts from."""
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", convergence.ConvergenceWarning)
        base = algorithm.run(model, RunOptions(max_iter=max_iter, tol=tol, param_tol=param_tol, init=init, seed=seed,
                                               progress=False))
    nodes = NodeFits(model, name, h, algorithm, seed, base)
    q_sigma = base.posterior(name)
    m_sigma = float(q_sigma.mean())
    u0 = float(np.log(m_sigma))
    s0 = float(q_sigma.std()) / m_sigma  # sd of log σ by the delta method
    s0 = float(np.clip(s0, 1e-6, 10.0)) if np.isfinite(s0) else 1.0
    centre, scale = nodes.first_look(u0, s0)
    grid = _Grid(nodes, centre, 2.0 * np.sqrt(2.0 * h.span) * scale / (h.points - 1))
    grid.cover()
    err = grid.error()
    refinements = 0
    while err > _QUAD_TOL and refinements < _MAX_REFINE:
        grid.refine()
        grid.cover()
        err = grid.error()
        refinements += 1
    return _result(model, name, h, base, nodes, grid, err, refinements, time.perf_counter() - t0)


_QUAD_TOL = 1e-4  # refine while the error estimate (``_Grid.error``: nats, or posterior sd) is above this, and
# warn if it still is after _MAX_REFINE halvings of the step
_MAX_REFINE = 3


class _Grid:
    """Nodes u_k = c + k·step of a uniform grid, k an integer (the fits kept by k)."""

    def __init__(self, nodes: NodeFits, centre: float, step: float) -> None:
        self.nodes, self.c, self.step = nodes, centre, step
        self.fits: dict[int, tuple[float, Result]] = {}

    def u(self, k: int) -> float:
        return self.c + k * self.step

    def get(self, k: int) -> float:
        if k not in self.fits:
            self.fits[k] = self.nodes.fit(self.u(k))
        return self.fits[k][0]

    def cover(self) -> None:
        """Fit every node between the current ends, then extend each end (by pairs, keeping both ends even)
        while L there is within ``span`` of the peak."""
        span = self.nodes.h.span
        if not self.fits:
            self.get(0)
        lo, hi = min(self.fits), max(self.fits)
        for k in sorted(range(lo, hi + 1), key=abs):
            self.get(k)
        for side in (1, -1):
            k = hi if side > 0 else lo
            while self.get(k) >= self.nodes.top - span or k % 2:
                if abs(self.u(k) - self.c) > MAX_LOG_RANGE:
                    raise ModelError(f"ScaleQuadrature({self.nodes.name!r}): the bound does not fall {span:g} nats "
                                     f"below its peak within {MAX_LOG_RANGE:g} units of log σ; is the posterior "
                                     f"of {self.nodes.name!r} proper?")
                k += side
                self.get(k)

    def refine(self) -> None:
        """Halve the step: node k becomes 2k, the new nodes are the odd ones."""
        self.fits = {2 * k: f for k, f in self.fits.items()}
        self.step *= 0.5

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Result]]:
        ks = np.array(sorted(self.fits))
        return ks, self.c + ks * self.step, np.array([self.fits[k][0] for k in ks]), [self.fits[k][1] for k in ks]

    def error(self) -> float:
        r"""The error estimate of the quadrature, the largest of

        * the trapezoid rule on every node against the rule on the even ones: log Z (nats), and the mean and sd
          of u = log σ (in units of that sd);
        * q(σ)'s moments (the piecewise log-linear ``GridDensity``, exact to O(step²)) against the rule's:
          the mean and sd of σ, in units of that sd.
        """
        ks, u, L, _ = self.arrays()
        even = ks % 2 == 0
        out = []
        for sel, hh in ((slice(None), self.step), (even, 2.0 * self.step)):
            Ls, us = L[sel], u[sel]
            w = np.exp(Ls - Ls.max())
            w /= w.sum()
            m = float(w @ us)
            out.append((float(logsumexp(Ls) + np.log(hh)), m, float(np.sqrt(max(w @ (us - m) ** 2, 0.0)))))
        (z1, m1, s1), (z2, m2, s2) = out
        w = np.exp(L - L.max())
        w /= w.sum()
        sig = np.exp(u)
        mean = float(w @ sig)
        sd = float(np.sqrt(max(w @ (sig - mean) ** 2, 0.0)))
        q = sigma_density(u, L)
        return max(abs(z1 - z2), abs(m1 - m2) / s1, abs(s1 - s2) / s1,
                   abs(float(q.mean()) - mean) / sd, abs(float(q.std()) - sd) / sd)


_FINE = 8  # q(σ)'s grid has this many segments per node interval


def sigma_density(u: np.ndarray, L: np.ndarray) -> GridDensity:
    """q(σ) ∝ e^{L(u)} as a ``GridDensity``: L interpolated by the cubic spline through the nodes (error O(h⁴)
    for this smooth function) onto a grid ``_FINE`` times finer, on which the density is piecewise log-linear
    (moments exact to O((h/_FINE)²))."""
    fine = np.linspace(u[0], u[-1], _FINE * (u.size - 1) + 1)
    return GridDensity(fine, CubicSpline(u, L)(fine))


def _result(model: Model, name: str, h: ScaleQuadrature, base: Result, nodes: NodeFits, grid: _Grid, quad_err: float,
            refinements: int, elapsed: float) -> Result:
    """The Result of the quadrature: q(σ) on the grid, the other posteriors as mixtures of the node fits."""
    _, u, L, fits = grid.arrays()
    log_z = float(logsumexp(L) + np.log(grid.step))
    w = np.exp(L - L.max())
    w /= w.sum()
    latent = nodes.latent
    posteriors: dict[str, Any] = {name: sigma_density(u, L)}
    scales = {n for n in latent if getattr(model.variables[n], "scale_prior", None) and model.variables[n].base is None}
    for n in latent:
        posteriors[n] = QuadratureMixture(w, [r.posterior(n) if n in scales else r.posteriors[n] for r in fits])
    kind = combine_kinds({r.evidence_kind for r in fits})
    sd_u = float(np.sqrt(w @ (u - w @ u) ** 2))
    notes = [f"ScaleQuadrature: {name!r} integrated out on {u.size} nodes of log σ in [{u[0]:.4g}, {u[-1]:.4g}] "
             f"(σ from {np.exp(u[0]):.4g} to {np.exp(u[-1]):.4g}, step {grid.step:.3g} = {grid.step / sd_u:.3g} sd of "
             f"log σ, {refinements} refinement(s)); the rest fitted by {fits[0].algorithm} at each node "
             f"({nodes.sweeps} sweeps at {len(nodes.done)} fits in all, each started from its nearest neighbour's, "
             f"{nodes.jumps} restarted from extrapolated iterates); "
             f"trapezoid error estimate {quad_err:.2g} (against the rule on every other node: for a geometrically "
             f"convergent rule the full one's error is far smaller); the mean-field fit's bound was {base.elbo:.6f}"]
    warns = []
    if nodes.unsettled:
        s = nodes.unsettled
        warns.append(f"ScaleQuadrature({name!r}): the fit of the rest did not converge at {len(s)} node(s) "
                     f"(σ = {', '.join(f'{x:.3g}' for x in s[:5])}{', ...' if len(s) > 5 else ''}); "
                     "raise max_iter of fg.ScaleQuadrature")
    if quad_err > _QUAD_TOL:
        warns.append(f"ScaleQuadrature({name!r}): the quadrature error estimate is {quad_err:.2g} after "
                     f"{refinements} refinements of the grid; use more points")
    result = Result(model.name, fits[0].algorithm, posteriors, log_z, kind, np.array([base.elbo, log_z]),
                    nodes.sweeps, not warns, elapsed, 0.0, warns, 0.0, notes)
    result.quadrature = {"variable": name, "u": u, "weights": w, "sweeps": nodes.sweeps, "fits": len(nodes.done),
                         "error": quad_err, "refinements": refinements, "restarts": nodes.jumps}
    result.derived = mixture_moments(w, [r.derived for r in fits]) if fits[0].derived else {}
    result.fit_record = FitRecord(model, {k: d.value for k, d in model.data.items()}, model.data_version)
    result.model = model
    for text in warns:
        convergence.warn(text)
    return result
