"""Compiling a model: resolve rules, fuse linear-Gaussian parts, claim handled blocks, plan the schedule.

Compilation fixes the structure of a run (``schedules.compiled.Compiled``): each factor edge that carries
messages gets its rule for the algorithm, every latent variable its consumers (the factor edges and
deterministic nodes its messages come from), each handled variable the factors it claims, and the latent
variables their update order.  What the data determine is bound by ``schedules.binding``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distributions import Bernoulli, Categorical, GaussianGamma, MvGaussian
from factorgraph.graph.nodes import Deterministic, FactorNode, Gate, Indexed, ModelError, Variable
from factors.base import RuleNotFound
from factors.grouped_linear_gaussian import GROUPED_LINEAR_GAUSSIAN
from factors.linear_gaussian import LINEAR_GAUSSIAN

from .binding import _bind, _check_learn
from .compiled import CFactor, Compiled, Consumer
from .fusion import fuse
from .missing import drop_missing, prune_selectors


class MissingRule(ModelError):
    """A factor has no message rule under the chosen algorithm (the message names the fix)."""


def compile_model(model, algorithm, schedule=None, init=None, damping: dict | None = None,
                  handlers: dict | None = None) -> Compiled:
    if not model.variables:
        raise ModelError(f"model {model.name!r} has no variables")
    latent = [v for v in model.variables.values() if v.is_latent]
    for v in model.variables.values():
        if v.family in (MvGaussian, GaussianGamma) and v.event_shape == (None,):
            raise ModelError(f"the dimension of {v.name!r} is unknown: give dim=, a mean vector or use it "
                             "in fg.inner")
    _check_handlers(model, handlers or {})
    handled = set(handlers or {})
    factors = [_compile_factor(f, algorithm, model, handled) for f in fuse(model, handled)]
    damping = damping or {}
    names = {f.name for f in factors}
    for key, val in damping.items():
        if key not in names:
            raise ModelError(f"damping given for unknown factor {key!r}; factors are {sorted(names)}")
        if not 0.0 <= val < 1.0:
            raise ModelError(f"damping of {key!r} must lie in [0, 1), got {val!r}")
    for f in factors:
        f.damping = f.initial_damping = damping.get(f.name, algorithm.damping)
    model.compilations += 1
    c = Compiled(model, algorithm, factors, latent, [])
    c.fused = [f.name for f in factors if f.node.ftype is LINEAR_GAUSSIAN]
    c.grouped = [f.name for f in factors if f.node.ftype is GROUPED_LINEAR_GAUSSIAN]
    for f in factors:
        for edge, arg in f.node.edges.items():
            target = arg.source if isinstance(arg, Gate) else arg
            if isinstance(target, Variable | Deterministic | Indexed):
                c.consumers.setdefault(id(target), []).append(Consumer(factor=f, edge=edge))
        if f.gate is not None:  # keyed by the selector variable (z of a selector gathered by labels, z[g])
            sel = f.gate.selector
            c.selector_factors.setdefault(id(sel.source if isinstance(sel, Indexed) else sel), []).append(f)
    used = _used_deterministics(c, model)
    for d in used:
        if d.op.name == "inner" and d.params["mean_field"]:
            w = d.parents["w"]
            c.sequential[w.source.name if isinstance(w, Indexed) else w.name] = d.params["consumed"]
    for f in factors:  # a fused mean-field inner product: its coefficients are coupled the same way
        if f.node.ftype is GROUPED_LINEAR_GAUSSIAN:
            for edge, plate in f.node.consumed.items():
                c.sequential[f.node.edges[edge].name] = plate
    for d in used:
        for role, parent in d.parents.items():
            if isinstance(parent, Variable | Deterministic | Indexed):
                c.consumers.setdefault(id(parent), []).append(Consumer(det=d, role=role))
    _register_indexed(c, used)
    _claim(c, handlers or {})
    drop_missing(c)
    prune_selectors(c)
    c.order = _schedule(c, schedule, init or {})
    return c


def _register_indexed(c: Compiled, used: list[Deterministic]) -> None:
    """Each indexed view x[idx] that is used sends its (segment-summed) messages to its latent source."""
    seen: set[int] = set()
    args = [a for f in c.factors for a in f.node.edges.values()] + [p for d in used for p in d.parents.values()]
    for a in args:
        if isinstance(a, Indexed) and id(a) not in seen:
            seen.add(id(a))
            if a.source.is_latent:
                c.consumers.setdefault(id(a.source), []).append(Consumer(index=a))


def _check_handlers(model, handlers: dict) -> None:
    for name, handler in handlers.items():
        v = model.variables.get(name)
        if v is None or not v.is_latent:
            raise ModelError(f"handlers: {name!r} is not a latent variable of model {model.name!r}")
        if v.family is not MvGaussian or len(v.plates) > 1:
            raise ModelError(f"handlers: {name!r} must be an mv_gaussian weight vector (or a class-plated weight "
                             f"matrix under a softmax), it is {v.family.__name__} with plates "
                             f"{[p.name for p in v.plates]}")
        if not hasattr(handler, "fit"):
            raise ModelError(f"handlers: {name!r} needs a handler such as fg.Laplace(), got {handler!r}")


def _claim(c: Compiled, handlers: dict) -> None:
    """Give each handled variable the factors on inner(X, w) that have pointwise rules; every other
    factor around it keeps sending messages, which form the block's Gaussian prior (a Gaussian
    likelihood fused into a conjugate factor is such a message: exact, and cheaper than a site)."""
    model = c.model
    for name, handler in handlers.items():
        v = model.variables[name]
        claimed, dets = [], []
        for cons in c.consumers.get(id(v), []):
            d = cons.det
            if d is None or d.op.name != "inner" or d.params["mean_field"]:
                continue
            users = c.consumers.get(id(d), [])
            # one factor instance per row of X; a softmax consumes the weight matrix's class plate
            rows = tuple(p.index for p in d.plates if p not in v.plates)
            ok = users and all(u.factor is not None and u.factor.gate is None and u.factor.plates == rows
                               and u.edge in u.factor.node.ftype.pointwise
                               and tuple(u.factor.node.consumed.values()) == v.plates for u in users)
            if ok:
                claimed += [u.factor for u in users]
                dets.append(d)
        if v.plates and not claimed:
            raise ModelError(f"handlers: the class-plated {name!r} needs a softmax whose logits are exactly "
                             f"fg.inner(X, {name!r}) (no bias term: add a column of ones to X)")
        for f in claimed:
            f.claimed_by = name
        c.consumers[id(v)] = [x for x in c.consumers[id(v)] if x.det not in dets]
        c.handlers[name] = handler
        c.claimed[name] = claimed
        _check_learn(c, v, handler)


def _used_deterministics(c: Compiled, model) -> list[Deterministic]:
    used: list[Deterministic] = []
    frontier = [a.source if isinstance(a, Gate) else a for f in c.factors for a in f.node.edges.values()]
    frontier = [a for a in frontier if isinstance(a, Deterministic)]
    while frontier:
        d = frontier.pop()
        if d in used:
            continue
        used.append(d)
        frontier += [p for p in d.parents.values() if isinstance(p, Deterministic)]
    return used


# ------------------------------------------------------------------------------------ factors
def _compile_factor(f: FactorNode, algorithm, model, handled: set[str] = frozenset()) -> CFactor:
    params: dict[str, Any] = {}
    rules, initial = {}, {}
    for edge, arg in f.edges.items():
        target = arg.source if isinstance(arg, Gate) else arg
        if isinstance(target, Variable | Deterministic | Indexed) and _needs_messages(target):
            if _feeds_handler(target, handled, edge, f):
                continue  # a handler will evaluate this factor pointwise instead
            try:
                rules[edge] = f.ftype.get_rule(edge, algorithm.name, f.method)
            except RuleNotFound as e:
                if edge == "out" and getattr(target, "mask", None) is not None:
                    continue  # partly observed data of an observed-only family: schedules.missing drops them
                raise MissingRule(f"{f.name}: {e}") from None
            if algorithm.name == "ncvmp" and (edge, f.method) in f.ftype.initial_rules:
                initial[edge] = f.ftype.initial_rules[(edge, f.method)]
    try:
        evidence, kind = f.ftype.get_evidence(f.method)
    except RuleNotFound as e:
        raise ModelError(f"{f.name}: {e}") from None
    gates = [a for a in (*f.edges.values(), *f.params.values()) if isinstance(a, Gate)]
    cf = CFactor(f, tuple(p.index for p in f.plates), (), params, rules, evidence, kind, {},
                 gates[0] if gates else None, initial=initial)
    _bind(cf)
    return cf


def _feeds_handler(node, handled: set[str], edge: str, f: FactorNode) -> bool:
    return (isinstance(node, Deterministic) and node.op.name == "inner" and not node.params["mean_field"]
            and node.parents["w"].name in handled and edge in f.ftype.pointwise)


def _needs_messages(node) -> bool:
    if isinstance(node, Deterministic):
        return True
    return node.is_latent


# ------------------------------------------------------------------------------------ schedule
def _schedule(c: Compiled, schedule, init: dict) -> list[Variable]:
    model = c.model
    if schedule is not None:
        order = []
        for name in schedule:
            v = model.variables.get(name)
            if v is None or not v.is_latent:
                raise ModelError(f"schedule: {name!r} is not a latent variable of model {model.name!r}; latent "
                                 f"variables are {[x.name for x in c.latent]}")
            order.append(v)
        missing = [v.name for v in c.latent if v not in order]
        if missing:
            raise ModelError(f"schedule: latent variables {missing} are never updated")
        return order
    # breadth-first distance from the data: variables next to observations are updated first; the selectors
    # that break a mixture's symmetry next to last, and the variables the user initialised last, so that
    # every other update in the first sweep uses the given starts
    g = model.graph
    observed = [v.name for v in model.variables.values() if not v.is_latent or v.mask is not None]
    dist = {}
    if observed:
        import networkx as nx

        lengths = nx.multi_source_dijkstra_path_length(g, observed)
        dist = {k: v for k, v in lengths.items()}
    decl = {v.name: i for i, v in enumerate(model.variables.values())}
    selectors = {v.name for v in c.latent if v.family in (Categorical, Bernoulli) and id(v) in c.selector_factors}

    def key(v: Variable):
        tier = 2 if v.name in init else 1 if v.name in selectors else 0
        return (tier, dist.get(v.name, np.inf), decl[v.name])

    return sorted(c.latent, key=key)


__all__ = ["MissingRule", "compile_model"]
