"""The message-passing engine: messages, posterior updates, the ELBO and the iteration loop.

Each latent variable's posterior is the product of the messages of every factor around it (its
prior included): natural parameters add.  A factor's message to an edge is its registered rule
evaluated on the neighbours' current expected statistics, weighted by the selector's
responsibilities when the factor is gated, and summed over the plates the target lacks.  Messages
into deterministic nodes are pulled back to their parents.  The ELBO is
Σ_f E[log f] + Σ_i H[q_i].
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from functools import cache
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

from distributions import (
    Bernoulli,
    Categorical,
    Dirichlet,
    Gamma,
    Gaussian,
    GaussianGamma,
    MvGaussian,
    TiltedScale,
    TruncatedGamma,
)
from distributions.base import Distribution
from factorgraph import checks
from factorgraph.nodes import Deterministic, Gate, Indexed, ModelError, Variable
from factors.base import point_stats
from factors.data_products import row_threads
from factors.deterministic import Inner
from factors.index import gather, scatter
from factors.onehot import OneHot
from factors.plating import expand, move_event_to_plate, move_plate_to_event, reduce, weighted_reduce, weighted_total

from . import progress as _progress
from .compiled import CFactor, Compiled, categorical_init


class InferenceError(RuntimeError):
    """Numerical trouble during inference (an improper posterior, a NaN), naming the variable."""


_DET_EVENT = (0, 0)


def _event_ndims(node) -> tuple[int, ...]:
    return _DET_EVENT if isinstance(node, Deterministic) else node.family.event_ndims


class _Moments(dict):
    """Edge name -> statistics in the factor's plate space, computed on first access."""

    def __init__(self, engine: Engine, f: CFactor) -> None:
        super().__init__()
        self.engine, self.f = engine, f

    def __missing__(self, edge: str) -> tuple:
        value = self.engine.edge_stats(self.f, edge)
        self[edge] = value
        return value


class Engine:
    def __init__(self, c: Compiled) -> None:
        self.c = c
        self.q: dict[str, Any] = {}
        self.stats: dict[str, tuple] = {}
        self.version: dict[str, int] = {}
        self._det_cache: dict[int, tuple] = {}
        self._ev_cache: dict[str, tuple] = {}  # factor -> (its neighbours' versions, E[log f])
        self._obs_stats: dict[Any, tuple] = {}  # observed variable name, or (deterministic id, role) of a constant
        self._last: dict[tuple[str, str, str], tuple] = {}
        self._updating = ""  # the variable whose update is being computed
        # backtracking damps a retried sweep toward the messages of the last accepted one
        self._keep_last = bool(getattr(c.algorithm, "backtracking", False))
        self.max_change = 0.0
        self.changes: dict[str, float] = {}  # variable -> its max relative change of η in the current sweep
        self.raised: dict[str, float] = {}  # factor -> the highest damping backtracking raised it to
        self.abandoned = 0  # the sweep at which adaptive backtracking stood down (0: it did not)
        self.trace: list[float] = []
        self.block: dict[str, Any] = {}  # handled variable -> its handler's last BlockFit
        self.joint: dict[str, Any] = {}  # class-plated handled variable -> joint q over all its weights
        for v in c.model.variables.values():
            if v.mask is not None and not v.is_latent:
                self.version[v.name] = 0  # statistics of data are computed when first read
        # variables whose prior factor owns their posterior (a Markov chain): variable name -> factor
        self.structured = {f.node.edges["out"].name: f for f in c.factors if f.node.ftype.structured is not None}

    # ------------------------------------------------------------------------------ statistics
    def node_stats(self, node) -> tuple:
        if isinstance(node, Deterministic):
            key = tuple(self.version[v.name] for v in node.stochastic_parents())
            hit = self._det_cache.get(id(node))
            if hit is not None and hit[0] == key:
                return hit[1]
            par = self._det_parent_stats(node)
            value = node.op.forward(par, node.params)
            self._det_cache[id(node)] = (key, value)
            return value
        if isinstance(node, Indexed):
            return self._indexed_stats(node)
        try:
            return self.stats[node.name]
        except KeyError:
            if node.mask is not None and (not node.is_latent or node.name in self.c.dropped):
                self.stats[node.name] = self.observed_stats(node)
                return self.stats[node.name]
            raise InferenceError(f"{node.name!r} is used before it has a posterior") from None

    def _indexed_stats(self, node: Indexed) -> tuple:
        """The source's statistics gathered by the labels (cached until the source changes)."""
        src = node.source
        key = (self.version.get(src.name), id(self.stats.get(src.name)))
        hit = self._det_cache.get(id(node))
        if hit is not None and hit[0] == key:
            return hit[1]
        axis, dest, k = _index_axes(node)
        value = tuple(gather(a, node.labels, axis, dest, k) for a in self.node_stats(src))
        self._det_cache[id(node)] = (key, value)
        return value

    def index_message(self, node: Indexed) -> tuple:
        """Segment sums of the messages the indexed view receives, on its source's plates."""
        total = None
        for cons in self.c.consumers.get(id(node), []):
            m = self.consumer_message(cons)
            total = m if total is None else tuple(a + b for a, b in zip(total, m, strict=True))
        axis, dest, k = _index_axes(node)
        if total is None:
            return tuple(np.zeros(node.source.shape + (1,) * e) for e in node.family.event_ndims)
        return tuple(scatter(m, node.labels, node.counts, axis, dest, k, e)
                     for m, e in zip(total, node.family.event_ndims, strict=True))

    def consumer_message(self, cons) -> tuple:
        if cons.factor:
            return self.factor_message(cons.factor, cons.edge)
        if cons.index is not None:
            return self.index_message(cons.index)
        return self.det_message(cons.det, cons.role)

    def observed_stats(self, v: Variable) -> tuple:
        if v.name not in self._obs_stats:
            self._obs_stats[v.name] = _observed_stats(v)
        return self._obs_stats[v.name]

    def _det_parent_stats(self, d: Deterministic) -> dict[str, tuple]:
        par = {}
        for role, p in d.parents.items():
            if isinstance(p, Variable | Deterministic | Indexed):
                s = self.node_stats(p)
                if d.op is Inner and d.params["mean_field"]:
                    plates = [x.index for x in p.plates]
                    s = tuple(move_plate_to_event(a, plates, d.params["consumed"].index, 0) for a in s)
                par[role] = s
            else:  # a constant operand: its (c, c²) computed once
                key = (id(d), role)
                if key not in self._obs_stats:
                    self._obs_stats[key] = point_stats(Gaussian, p)
                par[role] = self._obs_stats[key]
        return par

    def edge_stats(self, f: CFactor, edge: str) -> tuple:
        arg = f.node.edges[edge]
        if edge in f.const_stats:
            s = f.const_stats[edge]
            if isinstance(arg, Gate):
                evs = f.node.ftype.edges[edge].event_ndims
                src = tuple(p.index for p in arg.value_plates())  # (K, [plates of fg.select's values])
                return tuple(expand(a, src, f.plates, k) for a, k in zip(s, evs, strict=True))
            return s
        node = arg.source if isinstance(arg, Gate) else arg
        stats = self.node_stats(node)
        src = [p.index for p in node.plates]
        evs = list(_event_ndims(node))
        consumed = f.node.consumed.get(edge)
        if consumed is not None:
            stats = tuple(move_plate_to_event(a, src, consumed.index, k) for a, k in zip(stats, evs, strict=True))
            src.remove(consumed.index)
            evs = [k + 1 for k in evs]
        return tuple(expand(a, src, f.plates, k) for a, k in zip(stats, evs, strict=True))

    def gate_weights(self, f: CFactor) -> np.ndarray:
        """q(z = k) on the factor's plates (the selector's categories on the gate's plate)."""
        g = f.gate
        z = g.selector
        r = self.node_stats(z)[0]
        if z.family is Bernoulli:  # selects like a two-category Categorical: (q(False), q(True))
            r = np.stack([1.0 - r, r], axis=-1)
        plates = sorted([p.index for p in z.plates] + [g.plate.index])
        r = np.moveaxis(r, -1, plates.index(g.plate.index))
        return expand(r, plates, f.plates, 0)

    def instance_weights(self, f: CFactor, edge: str = "") -> np.ndarray | None:
        """Weight of each factor instance on the factor's plates: q(z = k) for a gated factor, times 0 on
        the missing entries of a partly observed output (which drop out of the likelihood); None = all 1.
        The message to ``out`` is not weighted (a dropped selector entry keeps its prior as posterior)."""
        r = self.gate_weights(f) if f.gate is not None else None
        if f.weight is not None and edge != "out":
            r = f.weight if r is None else r * f.weight
        return r

    # ------------------------------------------------------------------------------ messages
    def factor_message(self, f: CFactor, edge: str) -> tuple:
        """Message from factor f along ``edge``, on the target's plates."""
        arg = f.node.edges[edge]
        node = arg.source if isinstance(arg, Gate) else arg
        first = f.initial.get(edge)
        if first is not None and not f.params["state"].get(("initial sent", edge)):
            f.params["state"][("initial sent", edge)] = True
            msg = first(_Moments(self, f), f.params)
        else:
            msg = f.rules[edge](_Moments(self, f), f.params)
        evs = list(_event_ndims(node))
        consumed = f.node.consumed.get(edge)
        if consumed is not None:
            evs = [k + 1 for k in evs]
        dst = [p.index for p in node.plates if p is not consumed]
        r = self.instance_weights(f, edge)
        if r is not None:  # weighted per instance and summed in one contraction
            out = tuple(weighted_reduce(m, r, f.plates, dst, f.sizes, k) for m, k in zip(msg, evs, strict=True))
        else:
            out = tuple(reduce(m, f.plates, dst, f.sizes, k) for m, k in zip(msg, evs, strict=True))
        if consumed is not None:
            full = [p.index for p in node.plates]
            out = tuple(move_event_to_plate(m, full, consumed.index, k - 1) for m, k in zip(out, evs, strict=True))
        if f.damping > 0.0 or self._keep_last:
            # one memory per updated variable: a factor feeding two variables (W and b through a sum)
            # must damp each one's update toward the message that variable last received
            key = (f.name, edge, self._updating)
            prev = self._last.get(key)
            if prev is not None and f.damping > 0.0:
                out = tuple((1.0 - f.damping) * m + f.damping * p for m, p in zip(out, prev, strict=True))
            self._last[key] = out
        return out

    def factor_evidence(self, f: CFactor) -> np.ndarray:
        """E[log f] per factor instance; a conjugate factor's (no kept state, every edge a variable) is
        cached until a neighbour's posterior changes, so a gated factor's selector message and the
        ELBO after the selector's update share one computation."""
        key = None
        if f.node.ftype.conjugate and not f.params.get("state"):
            nodes = [a.source if isinstance(a, Gate) else a for a in f.node.edges.values()]
            if all(type(n) is Variable for n in nodes):
                key = tuple((n.name, self.version.get(n.name), id(self.stats.get(n.name))) for n in nodes)
        if key is not None:
            hit = self._ev_cache.get(f.name)
            if hit is not None and hit[0] == key:
                return hit[1]
        e = f.evidence(_Moments(self, f), f.params)
        if key is not None:
            self._ev_cache[f.name] = (key, e)
        return e

    def selector_message(self, f: CFactor) -> tuple:
        """Message from a gated factor to its selector: E[log f] per category."""
        e = self.factor_evidence(f)
        g = f.gate
        plates = sorted([p.index for p in g.selector.plates] + [g.plate.index])
        e = reduce(e, f.plates, plates, f.sizes, 0) if f.weight is None else weighted_reduce(
            e, f.weight, f.plates, plates, f.sizes, 0)
        e = np.broadcast_to(e, e.shape[:plates.index(g.plate.index)] + (g.plate.size,)
                            + e.shape[plates.index(g.plate.index) + 1:])
        e = np.moveaxis(e, plates.index(g.plate.index), -1)
        if g.selector.family is Bernoulli:  # natural parameter: the log-odds of True
            return (e[..., 1] - e[..., 0],)
        return (e,)

    def det_incoming(self, d: Deterministic) -> tuple:
        total = None
        for cons in self.c.consumers.get(id(d), []):
            m = self.consumer_message(cons)
            total = m if total is None else tuple(a + b for a, b in zip(total, m, strict=True))
        if total is None:
            return (np.zeros(d.shape), np.zeros(d.shape))
        return tuple(np.broadcast_to(a, a.shape) if a.ndim == len(d.plates) else
                     a.reshape((1,) * (len(d.plates) - a.ndim) + a.shape) for a in total)

    def det_message(self, d: Deterministic, role: str) -> tuple:
        inc = self.det_incoming(d)
        par = self._det_parent_stats(d)
        out = d.op.pullback(role, inc, par, d.params)
        if d.op is Inner and d.params["mean_field"]:
            p = d.parents[role]
            out = tuple(move_event_to_plate(a, [x.index for x in p.plates], d.params["consumed"].index, 0)
                        for a in out)
        return out

    # ------------------------------------------------------------------------------ updates
    def natural_sum(self, v: Variable) -> tuple:
        zero = v.family._zero_natural(v.shape, v.event_shape)
        total = [z.copy() for z in zero]
        for cons in self.c.consumers.get(id(v), []):
            m = self.consumer_message(cons)
            for i, a in enumerate(m):
                total[i] = total[i] + a
        if id(v) in self.c.selector_factors:
            total[0] = total[0] + self.selector_total(v)
        return tuple(total)

    def selector_total(self, v: Variable) -> np.ndarray:
        """The gated factors' messages to the selector v (E[log f] per category, summed); a factor whose
        selector is v gathered by labels (``mu[z[g]]``) sends its rows' messages summed back onto v's elements
        (each element's update sums the factor instances of every row with its label)."""
        total = 0.0
        for f in self.c.selector_factors[id(v)]:
            m = self.selector_message(f)[0]
            sel = f.gate.selector
            if isinstance(sel, Indexed):
                axis, dest, k = _index_axes(sel)
                m = scatter(m, sel.labels, sel.counts, axis, dest, k, m.ndim - k)
            total = total + m
        return total

    def set_posterior(self, v: Variable, q: Any) -> None:
        if v.mask is not None and v.family in (Categorical, Bernoulli) and v.mask.any():
            q = _pin_observed(v, q)
        s = q.expected_stats()
        for a in s:
            if not np.all(np.isfinite(a)):
                raise InferenceError(f"the posterior of {v.name!r} has non-finite moments (natural parameters "
                                     f"{_summary(q.natural)}): the model may be improper or diverging")
        if v.mask is not None:
            obs = self.observed_stats(v)
            s = tuple(np.where(v.mask.reshape(v.mask.shape + (1,) * k), o, a)
                      for o, a, k in zip(obs, s, v.family.event_ndims, strict=True))
        old = self.q.get(v.name)
        if old is not None:
            # natural parameters where both have them; a handler's non-Gaussian q (a mixture, an
            # affine-independent density) is compared by its moments
            new_p, old_p = (q.natural, old.natural) if hasattr(q, "natural") and hasattr(old, "natural") else (
                s, self.stats[v.name])
            change = max(float(np.max(np.abs(a - b) / (1.0 + np.abs(b)), initial=0.0))
                         for a, b in zip(new_p, old_p, strict=True))
            self.max_change = max(self.max_change, change)
            self.changes[v.name] = max(self.changes.get(v.name, 0.0), change)
        self.q[v.name] = q
        self.stats[v.name] = s
        self.version[v.name] = self.version.get(v.name, 0) + 1

    def update(self, v: Variable) -> None:
        self._updating = v.name
        if v.name in self.c.handlers:
            self._update_block(v)
            return
        plate = self.c.sequential.get(v.name)
        if plate is not None:
            self._update_sequential(v, plate)
            return
        if v.name in self.structured:
            self._update_structured(v, self.structured[v.name])
            return
        nat = self.natural_sum(v)
        self._accept(v, nat)

    def _update_block(self, v: Variable) -> None:
        """Hand the block to its handler: the messages of every unclaimed factor form its Gaussian
        prior, the claimed factors its sites; the handler returns q(w) and the block's terms.

        A class-plated weight matrix (K rows of D) is one block of K·D weights, class-major: its
        prior is block-diagonal and its joint q is kept in ``self.joint``, while the rest of the
        graph sees the per-class marginals."""
        from scipy.linalg import block_diag

        from distributions import MvGaussian

        from .handlers import BlockTarget, Site

        eta1, eta2 = self.natural_sum(v)
        K = v.shape[0] if v.plates else 0
        if K:
            eta1, eta2 = eta1.reshape(-1), block_diag(*eta2)
        sites = []
        for f in self.c.claimed[v.name]:
            edge = next(e for e in f.node.edges if e in f.node.ftype.pointwise)
            mom = _Moments(self, f)
            others = {e: tuple(_rows(a, f.sizes) for a in mom[e]) for e in f.node.edges if e != edge}
            X = f.node.edges[edge].params["X"]
            sites.append(Site(X.reshape(-1, X.shape[-1]), f.node.ftype.pointwise[edge], others, f.params, K, f.name))
        target = BlockTarget(np.asarray(eta1, float), np.asarray(eta2, float), sites, self.c.block_prior.get(v.name))
        warm = self.block.get(v.name)
        x0 = np.asarray(self.q[v.name].mean()).reshape(-1)
        fit = self.c.handlers[v.name].fit(target, x0, None if warm is None else warm.info)
        self.block[v.name] = fit
        if K:
            D = v.event_shape[0]
            cov = fit.q.cov().reshape(K, D, K, D)
            marginal = MvGaussian(mean=fit.q.mean().reshape(K, D), cov=np.stack([cov[k, :, k] for k in range(K)]))
            self.joint[v.name] = fit.q
            self.set_posterior(v, marginal)
        else:
            self.set_posterior(v, fit.q)

    def _update_structured(self, v: Variable, f: CFactor, start: bool = False) -> None:
        """A structured prior factor computes q(v) from the sum of every other message into v (its node
        potentials); with ``start`` it builds its starting q from v's current statistics instead."""
        pot = None
        if not start:
            # zeros as broadcast views: none is allocated unless another factor sends a message
            pot = [np.broadcast_to(0.0, v.shape + tuple(v.event_shape[:1]) * k) for k in v.family.event_ndims]
            for cons in self.c.consumers.get(id(v), []):
                if cons.factor is not f:
                    pot = [a + b for a, b in zip(pot, self.consumer_message(cons), strict=True)]
            if id(v) in self.c.selector_factors:
                pot[0] = pot[0] + self.selector_total(v)
            # a one-parameter family (a categorical chain) gets its log-potentials, others the tuple (η₁, η₂)
            pot = pot[0] if len(pot) == 1 else tuple(pot)
        try:
            q = f.node.ftype.structured(_Moments(self, f), f.params, pot)
        except FloatingPointError as e:
            raise InferenceError(f"the update of {v.name!r}: {e}") from None
        f.params["state"]["q"] = q
        self.set_posterior(v, q)

    def _update_sequential(self, v: Variable, plate) -> None:
        """Gauss–Seidel over the elements of a coupled plate: each element's update sees the others'
        latest posteriors, so every step is a coordinate-ascent step."""
        axis = [p.index for p in v.plates].index(plate.index)
        for j in range(plate.size):
            nat = self.natural_sum(v)
            cur = self.q[v.name].natural
            idx = (slice(None),) * axis + (j,)
            mixed = []
            for a, b in zip(cur, nat, strict=True):
                a = np.array(np.broadcast_to(a, b.shape))
                a[idx] = b[idx]
                mixed.append(a)
            self._accept(v, tuple(mixed))

    def _accept(self, v: Variable, nat: tuple) -> None:
        q = _from_natural(v, nat)
        proper = np.asarray(q.is_proper())
        if v.mask is not None:
            proper = proper | v.mask
        if not np.all(proper):
            raise InferenceError(f"the update of {v.name!r} gave an improper posterior (natural parameters "
                                 f"{_summary(nat)}); check that it has a proper prior or enough data")
        self.set_posterior(v, q)

    # ------------------------------------------------------------------------------ backtracking
    def snapshot(self) -> tuple:
        states = {f.name: dict(f.params["state"]) for f in self.c.factors}
        return (dict(self.q), dict(self.stats), dict(self._last), states)

    def restore(self, snap: tuple) -> None:
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

    # ------------------------------------------------------------------------------ evidence
    def elbo_terms(self) -> tuple[float, float]:
        ef = 0.0
        for fit in self.block.values():
            ef += fit.site_term + fit.prior_shift
        for f in self.c.factors:
            if f.claimed_by is not None:
                continue
            ef += weighted_total(self.factor_evidence(f), self.instance_weights(f), f.plates, f.sizes)
        h = 0.0
        for v in self.c.latent:
            if v.name in self.block:
                h += self.block[v.name].entropy
                continue
            # H[q]; a scale on σ adds its prior's term too (factors/scale_sigma.py)
            ent = np.broadcast_to(self.q[v.name].elbo_term(), v.shape)
            if v.name in self.c.pruned:
                ent = ent * self.c.pruned[v.name]
            h += float(ent[~v.mask].sum()) if v.mask is not None else float(ent.sum())
        return ef, h

    def elbo(self, allow_minus_inf: bool = False) -> float:
        """The ELBO; a non-finite value raises, except −inf with ``allow_minus_inf`` (a q outside a factor's
        domain, e.g. a scale prior's E_q[log p(σ)] = −inf for a Gamma shape at or below its threshold, which
        backtracking undoes)."""
        ef, h = self.elbo_terms()
        value = ef + h
        if not np.isfinite(value) and not (allow_minus_inf and value == -np.inf):
            raise InferenceError(f"the ELBO is not finite ({value}); a posterior has become degenerate")
        return value

    # ------------------------------------------------------------------------------ initialisation
    def initialise(self, init: dict[str, Any], rng: np.random.Generator) -> None:
        model = self.c.model
        for name in init:
            if name not in model.variables or not model.variables[name].is_latent:
                raise ModelError(f"init: {name!r} is not a latent variable of model {model.name!r}")
        for v in model.variables.values():
            if not v.is_latent or v.name in self.c.dropped:
                continue
            if v.name in init:
                self.set_posterior(v, _coerce_init(v, init[v.name]))
            elif v.family is Categorical and (id(v) in self.c.selector_factors or v.name in self.structured):
                self.set_posterior(v, Categorical(probs=categorical_init(v, self.c.selector_factors.get(id(v), []),
                                                                         rng)))
            elif v.family is Bernoulli and id(v) in self.c.selector_factors:
                self.set_posterior(v, Bernoulli(probs=categorical_init(v, self.c.selector_factors[id(v)], rng)[..., 1]))
            elif v.lower is not None:  # its prior alone (a Pareto law over λ) has E[λ] = ∞: start at E[λ] = 4c
                self.set_posterior(v, TruncatedGamma(shape=1.0, rate=1.0 / (3.0 * v.lower), lower=v.lower))
            elif v.base is not None:  # a scale on σ: its prior times exp(−σ²/(2s₀²)) at the prior's scale s₀
                s0 = next(f for f in self.c.factors if f.node is v.prior).params["s0"]
                kernel = (np.zeros(v.shape), -0.5 / np.broadcast_to(s0, v.shape) ** 2)
                self.set_posterior(v, TiltedScale.from_natural(*kernel, prior=v.base))
            elif v.name in self.structured:
                continue  # a continuous chain starts from its prior chain, built below once its parents have q
            else:
                prior = next(f for f in self.c.factors if f.node is v.prior)
                q = v.family.from_natural(*self._prior_natural(v, prior))
                ok = np.asarray(q.is_proper())
                if v.mask is not None:
                    ok = ok | v.mask
                if not np.all(ok):
                    q = _default_init(v)
                self.set_posterior(v, q)
        for name, f in self.structured.items():
            self._update_structured(model.variables[name], f, start=True)
        self.max_change = 0.0
        self.changes = {}

    def _prior_natural(self, v: Variable, prior: CFactor) -> tuple:
        zero = v.family._zero_natural(v.shape, v.event_shape)
        m = self.factor_message(prior, "out")
        return tuple(z + a for z, a in zip(zero, m, strict=True))


# ------------------------------------------------------------------------------------ helpers
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


def _from_natural(v: Variable, nat: tuple) -> Any:
    """q(v) from its summed natural parameters: its family's, truncated where the variable has a bound."""
    if v.lower is not None:
        return TruncatedGamma.from_natural(*nat, lower=v.lower)
    if v.base is not None:
        return TiltedScale.from_natural(*nat, prior=v.base)
    return v.family.from_natural(*nat)


def _index_axes(node: Indexed) -> tuple[int, int, int]:
    """(indexed plate's axis in the source, gathered plate's axis in the view, number of plates)."""
    return node.source.plates.index(node.along), node.plates.index(node.plate), len(node.plates)


def _rows(a: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    """A factor-space statistic with one row per factor instance (event axes kept)."""
    a = np.asarray(a)
    if a.ndim < len(sizes):
        return np.broadcast_to(a, sizes).reshape(-1)
    event = a.shape[len(sizes):]
    return np.broadcast_to(a, sizes + event).reshape((-1,) + event)


def _observed_stats(v: Variable) -> tuple:
    if v.family is Categorical:  # labels held as labels (factors.onehot): missing rows as zeros
        return (v.value.zeroed(),) if isinstance(v.value, OneHot) else (np.nan_to_num(v.value),)
    safe = 0.5 if v.family.__name__ == "Beta" else 1.0
    val = np.where(np.isfinite(v.value), v.value, safe)
    if v.mask is not None and v.value.ndim > v.mask.ndim:
        val = np.where(v.mask.reshape(v.mask.shape + (1,) * (v.value.ndim - v.mask.ndim)), val, safe)
    return point_stats(v.family, val)


def _pin_observed(v: Variable, q: Any) -> Any:
    """A partly observed label's posterior: a point mass at each observed entry (semi-supervised)."""
    obs = np.nan_to_num(v.value)
    if v.family is Bernoulli:
        return Bernoulli(probs=np.where(v.mask, obs, np.broadcast_to(q.probs, v.mask.shape)))
    return Categorical(probs=np.where(v.mask[..., None], obs, np.broadcast_to(q.probs, obs.shape)))


def _default_init(v: Variable):
    """Proper starting point for a variable whose prior is improper (flat): N(0, 1), N(0, I), Gam(1, 1)."""
    if v.family is Gaussian:
        return Gaussian(mean=np.zeros(v.shape), var=np.ones(v.shape))
    if v.family is MvGaussian:
        D = v.event_shape[0]
        return MvGaussian(mean=np.zeros(v.shape + (D,)), cov=np.broadcast_to(np.eye(D), v.shape + (D, D)))
    if v.family is Gamma:
        return Gamma(shape=np.ones(v.shape), rate=np.ones(v.shape))
    raise InferenceError(f"cannot initialise {v.name!r}: its prior is improper; pass init={{{v.name!r}: ...}}")


def _coerce_init(v: Variable, value: Any):
    if v.lower is not None and isinstance(value, Gamma | TruncatedGamma):  # the variable's truncation applies
        value = _from_natural(v, tuple(np.broadcast_to(n, v.shape) for n in value.natural))
    if v.base is not None and isinstance(value, Gaussian | TiltedScale):  # a scale on σ: the prior is its base
        value = _from_natural(v, tuple(np.broadcast_to(n, v.shape) for n in value.natural))
    if isinstance(value, v.family | TruncatedGamma | TiltedScale):
        if value.batch_shape != v.shape:
            raise ModelError(f"init of {v.name!r} has batch shape {value.batch_shape}, expected {v.shape}")
        return value
    if v.family is Categorical:
        r = np.asarray(value, dtype=float)
        if r.shape != v.shape + v.event_shape or np.any(r < 0) or not np.allclose(r.sum(-1), 1.0):
            raise ModelError(f"init of {v.name!r} must be probabilities of shape {v.shape + v.event_shape} "
                             "with rows summing to 1")
        return Categorical(probs=r)
    if v.family is Dirichlet and not isinstance(value, Distribution):
        a = np.asarray(value, dtype=float)
        if a.shape != v.shape + v.event_shape or not np.all(np.isfinite(a)) or np.any(a <= 0):
            raise ModelError(f"init of {v.name!r} must be positive finite concentrations of shape "
                             f"{v.shape + v.event_shape}, got {checks._show(a)}")
        return Dirichlet(a)
    raise ModelError(f"init of {v.name!r} must be a {v.family.__name__} distribution, got {type(value).__name__}")


def _summary(nat: tuple) -> str:
    return ", ".join(f"[{np.min(a):.3g}, {np.max(a):.3g}]" for a in nat)


def run(c: Compiled, max_iter: int, tol: float | None, param_tol: float | None, init: dict,
        callbacks: list, progress: bool | None, seed: int | None, warmup: list[Variable]) -> dict[str, Any]:
    """Iterate the schedule until convergence; returns the pieces of a Result."""
    eng = Engine(c)
    t0 = time.perf_counter()
    eng.initialise(init, np.random.default_rng(seed))
    trace: list[float] = []
    eng.trace = trace  # callbacks may read the ELBO history (the current value is last)
    notes: list[str] = []
    if warmup:
        for v in warmup:
            eng.update(v)
        trace.append(eng.elbo())
    warnings: list[str] = []
    # a handled block that is the only latent variable sees the same messages every sweep: its first
    # fit is the fixed point (a second one would only move it within its optimiser's tolerance)
    single_block = len(c.order) == 1 and c.order[0].name in c.handlers
    # Numba's parallel kernels and BLAS's threads take turns within a sweep; OpenBLAS's idle threads spin
    # and hold the cores the kernels need (a sweep of the N = 1e4 logistic model: 8 ms with both pools, 5 ms
    # with one-thread BLAS).  The large passes over X then run their row ranges on threads of their own
    # (factors.data_products.row_threads), which sleep between passes.
    kernels = any(not f.node.ftype.conjugate and f.claimed_by is None for f in c.factors)
    # a handler's optimiser makes many small products (draws × D by D × N, gradients, D × D factors) that threaded
    # BLAS runs slower than one thread (MVI on a 3000-row logistic regression: benchmarks/handler_blas_threads.py)
    kernels = kernels or bool(c.handlers)
    with _progress.active(_progress.resolve(progress)):
        progress = _progress.bar(c.model.name, max_iter, unit="sweep", leave=True)
        with _one_thread_blas() if kernels else nullcontext(), row_threads() if kernels else nullcontext():
            it, converged, reason = _iterate(c, eng, trace, max_iter, tol, param_tol, callbacks, progress,
                                             single_block, warnings)
        progress.close()
    if eng.raised:
        final = {f.name: f.damping for f in c.factors if f.name in eng.raised}
        notes.append(f"backtracking raised damping to {eng.raised}" + (
            f" (at the end: {final})" if final != eng.raised else ""))
    if eng.abandoned:
        notes.append(f"adaptive backtracking stood down at iteration {eng.abandoned}: the ELBO fell there whatever "
                     "the damping, so the run went on as plain NCVMP at the initial damping")
    unconverged = []
    if not converged:
        unconverged.append(_unconverged_text(c, eng, trace, it, reason, tol, param_tol))
    for name, fit in eng.block.items():
        if fit.info.get("converged") is False:
            converged = False
            unconverged.append(f"{c.model.name}: the last fit of {name!r} by {c.handlers[name]!r} did not converge "
                               f"(its optimiser stopped after {fit.info.get('iterations', '?')} iterations); "
                               f"{name!r} has not settled")
    warnings += unconverged
    elapsed = time.perf_counter() - t0
    return {"engine": eng, "elbo_trace": np.array(trace), "n_iter": it, "converged": converged,
            "time": elapsed, "warnings": warnings, "notes": notes, "unconverged": unconverged}


@cache
def _blas_pools() -> ThreadpoolController:
    """The loaded BLAS thread pools, found once (a scan of the loaded libraries takes about 1 ms)."""
    return ThreadpoolController()


def _one_thread_blas():
    return _blas_pools().limit(limits=1, user_api="blas")


# adaptive backtracking: after this many accepted sweeps in a row, undo one step of raised damping
_RELAX_AFTER = 3


def _iterate(c: Compiled, eng: Engine, trace: list, max_iter: int, tol: float | None, param_tol: float | None,
             callbacks: list, progress: Any, single_block: bool, warnings: list[str]) -> tuple[int, bool, str]:
    """The sweeps of ``run``: (iterations, converged, why it stopped if not converged).

    Under NCVMP's backtracking (``True``, or ``"adaptive"``, the default) a sweep that lowers the ELBO by
    more than round-off (and the Monte Carlo noise of handled blocks) is undone and retried with the damping
    of the unclaimed non-conjugate factors raised (α ← (1 + α)/2).  ``"adaptive"`` lowers it again
    (α ← 2α − 1, never below the initial damping) after ``_RELAX_AFTER`` accepted sweeps in a row; if the
    lower damping fails (the ELBO falls, or, near a fixed point where the ELBO is flat, the parameter changes
    grow in two sweeps running: an unstable update) the damping goes back up and the next attempt waits
    twice as long.  If the ELBO falls whatever the damping (the fall is then not the messages' doing),
    ``True`` stops at the last accepted state and ``"adaptive"`` stands down: the run goes on as plain
    NCVMP at the initial damping.
    """
    converged = gave_up = False
    reason = ""
    mode = getattr(c.algorithm, "backtracking", False)
    active = [f for f in c.factors if f.claimed_by is None]
    # adaptive backtracking acts through the damping of unclaimed non-conjugate factors, and only where the
    # ELBO is an objective (every term exact or a bound: an approximation's fixed point need not maximise it)
    guard = mode is True or (mode == "adaptive" and any(not f.node.ftype.conjugate for f in active)
                             and all(f.evidence_kind in ("exact", "bound") for f in active))
    streak, need, probe = 0, _RELAX_AFTER, 0  # probe: sweeps left to watch a lowered damping
    changes: list[float] = []
    it = 0
    for it in range(1, max_iter + 1):
        snapshot = eng.snapshot() if guard and trace else None
        retried = False
        while True:
            eng.max_change = 0.0
            eng.changes = {}
            try:
                for v in c.order:
                    eng.update(v)
                for hook in getattr(c.model, "sweep_hooks", ()):
                    hook(eng)
                L = eng.elbo(allow_minus_inf=snapshot is not None)  # −inf: a fall like any other, retried damped
            except InferenceError:
                if snapshot is None:
                    raise
                L = -np.inf  # an update left some q improper: undone and retried damped, like a fall
            if snapshot is None:
                break
            noise = float(np.sqrt(sum(fit.site_se**2 for fit in eng.block.values())))
            if np.isfinite(L) and L >= trace[-1] - 1e-12 * max(1.0, abs(L)) - 3.0 * noise:
                break
            retried = True
            raised = eng.raise_damping()
            if not raised or (mode == "adaptive" and min(
                    (f.damping for f in c.factors if not f.node.ftype.conjugate and f.claimed_by is None),
                    default=1.0) > 1.0 - 1e-6):
                if mode == "adaptive":
                    # the fall is not the damped messages' doing (a bound's own variational parameters, say):
                    # adaptive backtracking stands down; the run goes on as plain NCVMP at the initial damping
                    eng.restore(snapshot)
                    for f in c.factors:
                        f.damping = f.initial_damping
                    eng.abandoned, guard, snapshot = it, False, None
                    continue
                reason = (f"backtracking could not stop the ELBO from decreasing at iteration {it} (it fell to "
                          f"{L:.10g} from {trace[-1]:.10g} with the damping of every non-conjugate factor at 1); "
                          "stopped at the last accepted state")
                warnings.append(f"iteration {it}: backtracking could not stop the ELBO from decreasing; "
                                "stopped at the last accepted state")
                eng.restore(snapshot)
                gave_up = True
                break
            eng.restore(snapshot)
        if gave_up:
            break
        if mode == "adaptive" and snapshot is not None:
            changes.append(eng.max_change)
            if probe and (retried or changes[-1] > changes[-2] > changes[-3]):
                if not retried:
                    eng.raise_damping()  # the lowered damping is unstable: back up, without undoing the sweep
                need, probe = 2 * need, 0
            elif probe:
                probe = probe - 1
            streak = 0 if retried else streak + 1
            if streak >= need and eng.raised and any(f.damping > f.initial_damping for f in c.factors):
                eng.relax_damping()
                streak, probe = 0, need
                changes = [np.inf, np.inf, eng.max_change]
        if trace and c.algorithm.monotone and L < trace[-1] - 1e-9 * max(1.0, abs(L)):
            warnings.append(f"iteration {it}: the ELBO decreased by {trace[-1] - L:.3g}")
        delta = abs(L - trace[-1]) if trace else np.inf
        trace.append(L)
        progress.update(L)
        stop = said_converged = False
        for cb in callbacks:
            answer = cb(it, L, eng)
            if isinstance(answer, str) and answer == "converged":
                said_converged = True
            stop = bool(answer) or stop
        share = _undamped_share(c)  # a damped update moves q only (1 − α) of the way: judge the full step
        if tol is not None and delta <= tol * max(abs(L), 1e-300) * share:
            converged = True
        if param_tol is not None and it > 1 and eng.max_change <= param_tol * share:
            converged = True
        if single_block or said_converged:
            converged = True
        if converged:
            break
        if stop:
            reason = f"a callback stopped the run at iteration {it}"
            break
    else:
        # with no stopping rule (tol and param_tol None) the run is a fixed number of sweeps: it converged if
        # the last one moved no natural parameter by more than 1e-8 relative (the full, undamped step)
        if tol is None and param_tol is None and it > 1 and eng.max_change <= 1e-8 * share:
            converged = True
        else:
            reason = f"max_iter reached: {max_iter} sweeps"
    return it, converged, reason


def _undamped_share(c: Compiled) -> float:
    """min (1 − α) over the damped factors that send messages (1 when none is damped)."""
    return min((1.0 - f.damping for f in c.factors if f.damping > 0.0 and f.claimed_by is None), default=1.0)


def _unconverged_text(c: Compiled, eng: Engine, trace: list, it: int, reason: str, tol: float | None,
                      param_tol: float | None) -> str:
    """The ConvergenceWarning of a run that stopped unconverged: why, and which variables had not settled."""
    from factorgraph.convergence import oscillation, unsettled

    text = f"{c.model.name}: not converged ({reason})"
    if eng.changes:
        threshold = param_tol if param_tol is not None else 1e-8
        share = _undamped_share(c)
        if share < 1.0:  # a damped sweep moves q only (1 − α) of the way: report the full step
            text += (f"; not settled (max relative change of the natural parameters in the last sweep, divided by "
                     f"1 − α for damping α up to {1.0 - share:.8g}): "
                     + unsettled({k: v / share for k, v in eng.changes.items()}, threshold))
        else:
            text += ("; not settled (max relative change of the natural parameters in the last sweep): "
                     + unsettled(eng.changes, threshold))
    if len(trace) > 1:
        text += f"; last ELBO change {trace[-1] - trace[-2]:.3g}"
        if tol is not None:
            text += f" (tol {tol:.3g}·|ELBO|)"
    cycle = oscillation(trace)
    if cycle:
        text += "; " + cycle
    if c.algorithm.name == "ncvmp" and not getattr(c.algorithm, "backtracking", False):
        text += "; try fg.NCVMP() (adaptive backtracking), damping= or a larger max_iter"
    else:
        text += "; try a larger max_iter" + (" or damping=" if c.algorithm.name == "ncvmp" else "")
    return text


__all__ = ["Engine", "InferenceError", "run", "GaussianGamma"]
