"""Messages: the statistics a rule reads and the messages it sends, on the target's plates.

A factor's message to an edge is its registered rule evaluated on the neighbours' current expected
statistics, weighted by the selector's responsibilities when the factor is gated (and by 0 on the missing
entries of a partly observed output), and summed over the plates the target lacks.  Messages into
deterministic nodes are pulled back to their parents; an indexed view x[idx] sums its messages back onto
its source's elements.  A latent variable's natural parameters are the sum of every message into it,
η_v = Σ_{f ∋ v} m_{f→v}, its prior's included.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distributions import Bernoulli, Categorical, Gaussian
from factorgraph.graph.nodes import Deterministic, Gate, Indexed, Variable
from factors.base import point_stats
from factors.deterministic import Inner
from factors.index import gather, scatter
from factors.onehot import OneHot
from factors.plating import expand, move_event_to_plate, move_plate_to_event, reduce, weighted_reduce

from .compiled import CFactor, Compiled
from .errors import InferenceError

_DET_EVENT = (0, 0)


def _event_ndims(node) -> tuple[int, ...]:
    return _DET_EVENT if isinstance(node, Deterministic) else node.family.event_ndims


class _Moments(dict):
    """Edge name -> statistics in the factor's plate space, computed on first access."""

    def __init__(self, engine: MessagePassing, f: CFactor) -> None:
        super().__init__()
        self.engine, self.f = engine, f

    def __missing__(self, edge: str) -> tuple:
        value = self.engine.edge_stats(self.f, edge)
        self[edge] = value
        return value


class MessagePassing:
    """The statistics and messages of an engine (a part of ``schedules.engine.Engine``).

    Reads the state ``Engine.__init__`` sets: the compiled model ``c``, the posteriors' statistics ``stats``
    and their ``version`` counters, the caches ``_det_cache`` and ``_obs_stats``, and the damping memory
    ``_last`` (keyed by factor, edge and the variable being updated, ``_updating``).  A damped factor's
    message is m ← (1 − α) m + α m_prev, m_prev the message the same variable last received from it.
    ``selector_message`` reads E[log f] from ``Evidence.factor_evidence``.
    """

    c: Compiled
    q: dict[str, Any]
    stats: dict[str, tuple]
    version: dict[str, int]

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

    # ------------------------------------------------------------------------------ messages into a variable
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


__all__ = ["MessagePassing"]
