"""Compiling a model: resolve rules, fix parameters, fuse linear-Gaussian parts, plan the schedule.

The compiled model keeps, for every latent variable, the list of places its messages come from:
factor edges pointing at it (directly or through a gate) and deterministic nodes it feeds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distributions import Bernoulli, Categorical, GaussianGamma, MvGaussian
from factorgraph.graph import checks
from factorgraph.graph.gates import precision_matrices
from factorgraph.graph.nodes import Deterministic, FactorNode, Gate, Indexed, ModelError, Plate, Variable
from factors.base import RuleNotFound, one_hot, point_stats
from factors.discrete import CATEGORICAL
from factors.grouped_linear_gaussian import GROUPED_LINEAR_GAUSSIAN
from factors.index import segment_sum
from factors.linear_gaussian import LINEAR_GAUSSIAN
from factors.mv_gaussian import MV_GAUSSIAN_FIXED
from factors.normal_gamma import NORMAL_GAMMA
from factors.onehot import OneHot
from factors.plating import expand

from .fusion import fuse, fused_stats
from .missing import drop_missing, prune_selectors


class MissingRule(ModelError):
    """A factor has no message rule under the chosen algorithm (the message names the fix)."""


@dataclass(eq=False)
class CFactor:
    """A factor instance ready to run: plates as global indices, rules resolved per edge."""

    node: FactorNode
    plates: tuple[int, ...]
    sizes: tuple[int, ...]
    params: dict[str, Any]
    rules: dict[str, Any]
    evidence: Any
    evidence_kind: str
    const_stats: dict[str, tuple]  # edge -> statistics of a constant argument
    gate: Gate | None = None
    claimed_by: str | None = None  # the handled variable whose handler owns this factor
    damping: float = 0.0
    initial_damping: float = 0.0
    initial: dict[str, Any] = field(default_factory=dict)  # edge -> NCVMP's first message (``FactorType.initial``)
    weight: np.ndarray | None = None  # 1 = observed, 0 = missing output entry, on the factor's plates (or None)

    @property
    def name(self) -> str:
        return self.node.name


@dataclass(eq=False)
class Consumer:
    """Something that sends messages to a node: a factor edge, or a deterministic child."""

    factor: CFactor | None = None
    edge: str = ""
    det: Deterministic | None = None
    role: str = ""
    index: Indexed | None = None  # an indexed view x[idx] of the node: its messages, segment-summed


@dataclass(eq=False)
class Compiled:
    model: Any
    algorithm: Any
    factors: list[CFactor]
    latent: list[Variable]
    order: list[Variable]
    consumers: dict[int, list[Consumer]] = field(default_factory=dict)  # id(node) -> consumers
    selector_factors: dict[int, list[CFactor]] = field(default_factory=dict)
    fused: list[str] = field(default_factory=list)
    grouped: list[str] = field(default_factory=list)  # fused onto per-group Gram matrices
    # variable name -> plate whose elements are coupled (summed over by a mean-field inner
    # product): updating them all at once is not coordinate ascent, so they go one at a time
    sequential: dict[str, Plate] = field(default_factory=dict)
    # global handlers: variable name -> handler, and the factors each one claimed
    handlers: dict[str, Any] = field(default_factory=dict)
    claimed: dict[str, list[CFactor]] = field(default_factory=dict)
    # handled variable -> natural parameters (Λ₀m₀, −½Λ₀) of its constant prior, for a handler that learns
    # the prior's precision multiplier (flattened class-major for a class-plated block)
    block_prior: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    # partly observed leaves whose missing entries drop out of their likelihood (schedules.missing)
    dropped: set[str] = field(default_factory=set)
    # latent selectors with entries that have no observed descendant: name -> True where an entry is kept
    pruned: dict[str, np.ndarray] = field(default_factory=dict)


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


def _check_learn(c: Compiled, v: Variable, handler: Any) -> None:
    """Check a handler's ``learn=`` against its block: "scale" needs a claimed site with a scale, and
    "prior_precision" a constant proper prior N(m₀, Λ₀⁻¹), whose natural parameters go to ``c.block_prior``."""
    learn = getattr(handler, "learn", ())
    claimed = c.claimed[v.name]
    if "scale" in learn and not any("scale" in f.params for f in claimed):
        raise ModelError(f"handlers: {v.name!r} ← {handler!r} learns 'scale', but no factor it claims "
                         f"({[f.name for f in claimed]}) has a scale; sites with one are fg.laplace_site, "
                         "fg.cauchy_site and fg.student_t_site")
    if "prior_precision" not in learn:
        return
    prior = next(f for f in c.factors if f.node is v.prior)
    for edge, arg in prior.node.edges.items():
        if edge != "out" and not isinstance(arg, np.ndarray):
            source = arg.source if isinstance(arg, Gate) else arg
            raise ModelError(f"handlers: {v.name!r} ← {handler!r} learns 'prior_precision', but the {edge} of "
                             f"{v.name!r}'s prior is the variable {source.name!r}, not a constant: a latent prior "
                             f"is already learned by message passing; drop 'prior_precision' or make the {edge} "
                             "a constant")
    if prior.node.ftype is not MV_GAUSSIAN_FIXED:
        raise ModelError(f"handlers: {v.name!r} ← {handler!r} learns 'prior_precision', which needs an "
                         f"fg.mv_gaussian prior with a constant precision; {v.name!r} has {prior.node.ftype.name}")
    if prior.gate is not None:
        raise ModelError(f"handlers: {v.name!r} ← {handler!r} learns 'prior_precision', but {v.name!r}'s prior is "
                         "gated (a mixture): there is no one precision to scale")
    if prior.params["logdet"] is None:
        raise ModelError(f"handlers: {v.name!r} ← {handler!r} learns 'prior_precision', but {v.name!r} has an "
                         "improper flat prior (precision 0): there is no precision to scale")
    lam = prior.params["precision"]
    m0 = prior.const_stats["mean"][0]
    if v.plates:
        K = v.shape[0]
        c.block_prior[v.name] = ((np.broadcast_to(m0, (K, lam.shape[0])) @ lam).reshape(-1),
                                 -0.5 * np.kron(np.eye(K), lam))
    else:
        c.block_prior[v.name] = (lam @ m0, -0.5 * lam)



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


def _bind(cf: CFactor) -> None:
    """The parts of a compiled factor that the data determine: sizes, parameters and constants' statistics."""
    f = cf.node
    if hasattr(f, "source"):  # a fused factor: its sufficient statistics, read again from the data
        f.params = fused_stats(f)
    params = {k: (v() if callable(v) else v) for k, v in f.params.items()}
    _finalize(f, params)
    params["state"] = {}  # variational parameters a rule keeps between calls (ξ, a), fresh per run
    fplates = cf.plates
    for k, g in list(params.items()):  # constants selected by fg.select: (K, event...) onto the factor's plates
        if isinstance(g, Gate):
            params[k] = expand(g.source, (g.plate.index,), fplates, g.source.ndim - 1)
    const = {}
    for edge, arg in f.edges.items():
        if isinstance(arg, np.ndarray):
            const[edge] = _const_stats(f, edge, arg, params)
        elif isinstance(arg, Gate) and isinstance(arg.source, np.ndarray):
            const[edge] = _const_stats(f, edge, arg.source, params)
    cf.sizes, cf.params, cf.const_stats = tuple(p.size for p in f.plates), params, const
    cf.weight, cf.damping = None, cf.initial_damping


def rebind(c: Compiled) -> None:
    """Make a compiled model current with its model's data (after ``model.set_data``, or before a refit).

    The structure (rules, consumers, handlers' claims, the schedule) stays; what the data determine is
    derived again: plate sizes, parameters, fused statistics, the weights of missing entries."""
    for f in c.factors:
        _bind(f)
    c.latent = [v for v in c.model.variables.values() if v.is_latent]
    c.dropped, c.pruned, c.block_prior = set(), {}, {}
    for name, handler in c.handlers.items():
        _check_learn(c, c.model.variables[name], handler)
    drop_missing(c)
    prune_selectors(c)
    latent = {id(v) for v in c.latent}
    if any(id(v) not in latent for v in c.order) or len(c.order) != len(c.latent):
        raise ModelError("the compiled schedule no longer matches the model's latent variables")  # see infer's key


def _feeds_handler(node, handled: set[str], edge: str, f: FactorNode) -> bool:
    return (isinstance(node, Deterministic) and node.op.name == "inner" and not node.params["mean_field"]
            and node.parents["w"].name in handled and edge in f.ftype.pointwise)


def _needs_messages(node) -> bool:
    if isinstance(node, Deterministic):
        return True
    return node.is_latent


def _finalize(f: FactorNode, p: dict[str, Any]) -> None:
    """Turn build-time parameters into the arrays the rules use, now that dimensions are known."""
    if f.ftype is MV_GAUSSIAN_FIXED and isinstance(p["precision_raw"], Gate):  # one matrix per category
        D, g = p["D"], p.pop("precision_raw")
        mats = precision_matrices(g.source, D)
        if mats.shape[1:] != (D, D):
            raise ModelError(f"{f.name}: selected precisions have shape {g.source.shape}, expected (K,), (K, {D}) or "
                             f"(K, {D}, {D})")
        p["precision"] = Gate(mats, g.selector, g.plate)
        p["logdet"] = Gate(np.linalg.slogdet(mats)[1], g.selector, g.plate)
    elif f.ftype is MV_GAUSSIAN_FIXED:
        D, lam = p["D"], p.pop("precision_raw")
        mat = lam * np.eye(D) if lam.ndim == 0 else (np.diag(lam) if lam.ndim == 1 else lam)
        if mat.shape != (D, D):
            raise ModelError(f"{f.name}: precision has shape {lam.shape}, expected a scalar, ({D},) or ({D}, {D})")
        if not mat.any():
            p["precision"], p["logdet"] = mat, None
        else:
            sign, logdet = np.linalg.slogdet(mat)
            if sign <= 0 or np.any(np.linalg.eigvalsh(mat) <= 0):
                raise ModelError(f"{f.name}: precision matrix must be positive definite (or 0 for a flat prior)")
            p["precision"], p["logdet"] = mat, logdet
    if f.ftype is NORMAL_GAMMA:
        D = p["D"]
        mu0 = p.pop("mean_raw")
        if mu0.ndim and mu0.shape[-1] != D:
            raise ModelError(f"{f.name}: mean has {mu0.shape[-1]} entries, expected {D}")
        p["mean"] = np.broadcast_to(mu0, (D,)).astype(float)


def _const_stats(f: FactorNode, edge: str, value: np.ndarray, params: dict[str, Any]) -> tuple:
    family = f.ftype.edges[edge]
    if family is MvGaussian:
        D = params["D"]
        value = np.broadcast_to(value, value.shape[:-1] + (D,)) if value.ndim else np.full(D, float(value))
    return point_stats(family, value)


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


def categorical_init(v: Variable, factors: list[CFactor], rng: np.random.Generator) -> np.ndarray:
    """Starting responsibilities that break a mixture's symmetry.

    When a factor gated by ``v`` has an observed output (fully or partly: a missing entry stands at its
    column's observed mean), seed K prototypes among the data by k-means++ (D² sampling) and assign each
    data point mostly to its nearest prototype; otherwise draw Dirichlet(1) rows.  When each label gates one
    observed word of a Categorical (LDA's topic per token), k-means++ says nothing (every one-hot token is
    equally far from every prototype but its own word): the labels start from their update given random
    near-uniform topics, q(φ_k) = Dirichlet(λ_k), λ_kv ~ Gamma(100, 0.01) (``token_responsibilities``).  Random soft
    responsibilities make every component start at the data mean, from where VMP often merges clusters;
    data-driven seeding avoids most such optima.
    """
    K = v.event_shape[0] if v.event_shape else 2  # a Bernoulli selector has two categories
    tokens = gated_rows(v, factors) if token_selector(v, factors) else None
    data = None if tokens is not None else _gated_data(v, factors)
    if tokens is not None:  # one word per label (LDA): k-means++ on one-hot rows says nothing; random topics
        r = token_responsibilities(tokens, token_topics(rng, K, tokens.shape[1])).reshape(v.shape + (K,))
    elif data is None:
        r = rng.dirichlet(np.ones(K), size=v.shape)
    else:
        centres = [data[rng.integers(len(data))]]
        for _ in range(1, K):
            d2 = np.min([((data - c) ** 2).sum(-1) for c in centres], axis=0)
            total = d2.sum()
            idx = rng.choice(len(data), p=d2 / total) if total > 0 else rng.integers(len(data))
            centres.append(data[idx])
        d2 = np.stack([((data - c) ** 2).sum(-1) for c in centres], axis=-1)
        # ties (one-hot data such as word tokens: every non-prototype is equally far) go to a random nearest
        d2 = d2 + rng.random(d2.shape) * 1e-9 * (1.0 + d2.max())
        r = np.full(d2.shape, 0.1 / K)
        r[np.arange(len(data)), d2.argmin(-1)] += 0.9
        r = r.reshape(v.shape + (K,))
    if v.mask is not None:
        obs = np.nan_to_num(v.value)
        if not v.event_shape:  # Bernoulli: observed 0/1 as (q(False), q(True))
            obs = np.stack([1.0 - obs, obs], axis=-1)
        if v.mask.any():  # name the seeded clusters after the observed labels they hold most of
            from scipy.optimize import linear_sum_assignment

            agree = np.where(v.mask[..., None], r, 0.0).reshape(-1, K).T @ obs.reshape(-1, K)
            r = r[..., linear_sum_assignment(-agree)[1].argsort()]
        r = np.where(v.mask[..., None], obs, r)
    return r


def token_selector(v: Variable, factors: list[CFactor]) -> bool:
    """Whether the factor ``gated_rows`` reads is a Categorical whose every observation has its own label (one
    token per row of ``gated_rows``: no plate of the output beyond the selector's, save size-1 ones)."""
    f = _gated_source(v, factors)
    return f is not None and f.node.ftype is CATEGORICAL and all(
        p in v.plates or p.size == 1 for p in f.node.edges["out"].plates)


def token_topics(rng: np.random.Generator, K: int, V: int) -> np.ndarray:
    """Random near-uniform topics for a start, Dirichlet(λ_k) with λ_kv ~ Gamma(100, 0.01) (scikit-learn's start
    for its batch LDA)."""
    return rng.gamma(100.0, 0.01, (K, V))


def token_responsibilities(tokens: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """q(z_n = k) ∝ exp E[log φ_k,w_n] under q(φ_k) = Dirichlet(λ_k), for one-hot token rows (a missing row: uniform):
    the selector's update from random topics alone."""
    from scipy.special import digamma, softmax

    elog = digamma(lam) - digamma(lam.sum(-1, keepdims=True))
    if isinstance(tokens, OneHot):  # a gather E[log φ_k,w_n], not a product with one-hot rows
        return softmax(tokens.zeroed().reshape(-1, 1, tokens.K).inner(elog[None]), axis=-1)
    return softmax(np.nan_to_num(tokens) @ elog.T, axis=-1)


def _gated_source(v: Variable, factors: list[CFactor]) -> CFactor | None:
    """The first factor gated by v with an observed output that ``gated_rows`` reads."""
    for f in factors:
        out = f.node.edges.get("out")
        sel = None if f.gate is None else f.gate.selector
        if sel is None or _selector_source(sel) is not v or not isinstance(out, Variable) or out.value is None:
            continue
        if not isinstance(out.mask, np.ndarray) or checks.is_dask(out.value):
            continue
        if set(p.index for p in sel.plates) <= set(p.index for p in out.plates):
            return f
    return None


def gathered_selectors(model) -> list[str]:
    """The selectors gathered by labels (``mu[z[g]]``) among the model's gates, as "'z' (gathered onto 'n')"."""
    return sorted({f"{a.selector.source.name!r} (gathered by labels onto {a.selector.plate.name!r})"
                   for f in model.factors for a in (*f.edges.values(), *f.params.values())
                   if isinstance(a, Gate) and isinstance(a.selector, Indexed)})


def _selector_source(sel: Any) -> Any:
    """The selector variable of a gate: z itself, or z of a selector gathered by labels (z[g])."""
    return sel.source if isinstance(sel, Indexed) else sel


def gated_rows(v: Variable, factors: list[CFactor]) -> np.ndarray | None:
    """The outputs of a factor gated by v, one row per element of v's plates, NaN where an entry is missing
    (the output's mask, or an mv_gaussian's coordinate mask); None when no gated factor has observed outputs."""
    f = _gated_source(v, factors)
    if f is None:
        return None
    out = f.node.edges["out"]
    sel = f.gate.selector
    zp = [p.index for p in sel.plates]
    op = [p.index for p in out.plates]
    if isinstance(out.value, OneHot) and not isinstance(sel, Indexed):  # word tokens: keep them as labels
        first = [op.index(i) for i in zp]
        rest = [i for i in range(len(op)) if i not in first]
        lab = np.transpose(out.value.labels, first + rest).reshape(int(np.prod(v.shape, dtype=int)), -1)
        if lab.shape[1] == 1:  # one token per label (``token_selector``)
            return OneHot(lab[:, 0], out.value.K)
    value = np.asarray(out.value, dtype=float)
    seen = out.mask.reshape(out.mask.shape + (1,) * (value.ndim - out.mask.ndim))
    coords = getattr(out, "coord_mask", None)
    if coords is not None and np.shape(coords) == value.shape:
        seen = seen & coords
    value = np.where(np.broadcast_to(seen, value.shape), value, np.nan)
    first = [op.index(i) for i in zp]
    rest = [i for i in range(value.ndim) if i not in first]
    rows = np.transpose(value, first + rest)
    if isinstance(sel, Indexed):  # z[g]: each element of z stands for the mean of its rows (NaN: none observed)
        ax = sel.plates.index(sel.plate)
        front = np.moveaxis(rows, ax, 0)
        flat = front.reshape(front.shape[0], -1)
        have = ~np.isnan(flat)
        sums = segment_sum(sel.labels, np.where(have, flat, 0.0), sel.along.size)
        counts = segment_sum(sel.labels, have.astype(float), sel.along.size)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = (sums / counts).reshape((sel.along.size,) + front.shape[1:])
        rows = np.moveaxis(means, 0, sel.source.plates.index(sel.along))  # z's own plate order
    return rows.reshape(int(np.prod(v.shape, dtype=int)), -1)


def observed_centre(counts: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """Each column's mean over its observed entries (0 for a column with none): where missing entries stand
    for the seeding."""
    return np.where(counts > 0, sums / np.where(counts > 0, counts, 1.0), 0.0)


def _gated_data(v: Variable, factors: list[CFactor]) -> np.ndarray | None:
    """``gated_rows`` with each missing entry at its column's observed mean (a row with nothing observed sits at
    the centre), each column scaled to unit spread."""
    data = gated_rows(v, factors)
    if data is None:
        return None
    missing = np.isnan(data)
    if missing.any():
        data = np.where(missing, observed_centre((~missing).sum(0), np.where(missing, 0.0, data).sum(0)), data)
    scale = data.std(0)
    return data / np.where(scale > 0, scale, 1.0)


__all__ = ["CFactor", "Compiled", "Consumer", "Plate", "categorical_init", "compile_model", "gated_rows",
           "gathered_selectors",
           "observed_centre", "one_hot", "rebind", "token_responsibilities", "token_selector",
           "token_topics"]
