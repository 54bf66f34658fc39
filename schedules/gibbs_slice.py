"""Elliptical slice sampling of a Gaussian variable with non-conjugate children (a part of the Gibbs chain).

For a Gaussian (or mv_gaussian) v whose children include factors with no conditional in v's family
(``factors.slice_likelihoods.SLICED``: log-link Poisson, logit-link binomial, probit and robust sites), the full
conditional is p(v | rest) ∝ N(v; μ, Σ) L(v), with N(μ, Σ) the member of v's family whose natural parameters are
the sum of every other message at the current point (prior and conjugate children: those factors send zero) and
L(v) = Π_f f(v, rest) the non-conjugate factors, evaluated exactly as their evidence at point statistics.  One
elliptical slice sampling step (Murray, Adams & MacKay 2010) leaves it invariant:

    ν ~ N(0, Σ),  log y = log L(v) + log u (u ~ U(0, 1)),  θ ~ U(0, 2π), [θ_min, θ_max] = [θ − 2π, θ];
    v' = μ + (v − μ) cos θ + ν sin θ; accept if log L(v') > log y, else shrink the bracket towards 0 and redraw θ.

When every such factor takes v itself or a view v[g] by labels (not an expression of it), the entries of v are
conditionally independent and each entry runs its own step (its own ν, y and bracket; a view's rows summed onto
their entries) in one vectorised loop; otherwise v moves as one block.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from factorgraph.graph.nodes import Indexed, Variable
from factors import SLICED
from factors.index import scatter
from factors.plating import reduce, weighted_reduce, weighted_total

from .compiled import CFactor
from .errors import InferenceError
from .messages import _index_axes

MAX_SHRINKS = 200  # a bracket that has not found an acceptable point after this many shrinks is a numerical fault


class SliceSteps:
    """Elliptical slice steps of a ``GibbsChain`` (which provides the engine, ``rng``, ``values``, ``set_point`` and
    ``_proper``)."""

    rng: np.random.Generator
    values: dict[str, np.ndarray]

    def slice_factors(self, node: Any) -> list[CFactor]:
        """The non-conjugate factors downstream of ``node`` (directly, or through deterministic nodes and indexed
        views)."""
        found = []
        for cons in self.c.consumers.get(id(node), []):
            if cons.factor is not None:
                if cons.factor.node.ftype in SLICED and cons.factor not in found:
                    found.append(cons.factor)
            else:
                found += [f for f in self.slice_factors(cons.index if cons.index is not None else cons.det)
                          if f not in found]
        return found

    def _loglik(self, v: Variable, factors: list[CFactor], per_entry: bool) -> Any:
        """log L at the current state: per entry of v (on v's plates; a factor on a view v[g] has its rows'
        terms summed onto their labels' entries) or in total."""
        total = 0.0
        for f in factors:
            e = self.factor_evidence(f)
            w = self.instance_weights(f)
            if not per_entry:
                total = total + weighted_total(e, w, f.plates, f.sizes)
                continue
            arg = f.node.edges[SLICED[f.node.ftype]]
            dst = [p.index for p in (arg.plates if isinstance(arg, Indexed) else v.plates)]
            r = reduce(e, f.plates, dst, f.sizes, 0) if w is None else weighted_reduce(e, w, f.plates, dst, f.sizes, 0)
            if isinstance(arg, Indexed):
                axis, dest, k = _index_axes(arg)
                r = scatter(r, arg.labels, arg.counts, axis, dest, k, 0)
            total = total + r
        return np.broadcast_to(total, v.shape) if per_entry else float(total)

    def slice_step(self, v: Variable, factors: list[CFactor]) -> None:
        """One elliptical slice sampling step of v (see the module docstring)."""
        per_entry = v.name not in self.c.sequential and all(
            _takes(f.node.edges[SLICED[f.node.ftype]], v) for f in factors)
        prior = self._proper(v, self.natural_sum(v))
        mean = np.asarray(prior.mean(), float)
        x0 = np.asarray(self.values[v.name], float)
        nu = np.asarray(prior.sample(rng=self.rng), float) - mean
        shape = v.shape if per_entry else ()
        ev = (slice(None),) * len(shape) + (None,) * len(v.event_shape)  # angles broadcast over event axes
        logy = self._loglik(v, factors, per_entry) + np.log(self.rng.random(shape))
        theta = self.rng.uniform(0.0, 2 * np.pi, shape)
        lo, hi = theta - 2 * np.pi, theta.copy()
        done = np.zeros(shape, bool)
        accepted = x0
        for _ in range(MAX_SHRINKS):
            t = np.asarray(theta)[ev]
            x = np.where(np.asarray(done)[ev], accepted, mean + (x0 - mean) * np.cos(t) + nu * np.sin(t))
            self.set_point(v, x)
            ok = ~done & (self._loglik(v, factors, per_entry) > logy)
            accepted = np.where(np.asarray(ok)[ev], x, accepted)
            done = done | ok
            if np.all(done):
                return
            lo = np.where(~done & (theta < 0), theta, lo)
            hi = np.where(~done & (theta >= 0), theta, hi)
            theta = np.where(done, theta, self.rng.uniform(lo, hi))
        raise InferenceError(f"Gibbs: elliptical slice sampling of {v.name!r} found no point of higher likelihood "
                             f"after {MAX_SHRINKS} shrinks of its bracket (the likelihood of its non-conjugate "
                             f"factors {[f.name for f in factors]} may be non-finite at its current value)")


def _takes(arg: Any, v: Variable) -> bool:
    """Whether a factor's argument is v itself or a view v[g] of it by labels (each row reads one entry)."""
    return arg is v or (isinstance(arg, Indexed) and arg.source is v)


__all__ = ["MAX_SHRINKS", "SliceSteps"]
