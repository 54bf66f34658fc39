"""A plate sharded over Dask chunks: the in-memory engine run per chunk, the global posteriors on the driver.

When observed values or ``fg.inner`` inputs are ``dask.array``s chunked along one plate (the sharded
plate), ``fg.infer`` runs here (docs/design.md §10).  Each chunk of rows becomes a *chunk model*: the user's
model with the sharded plate cut to the chunk's rows and its data the chunk's blocks, compiled and run by the
ordinary ``Engine`` in a ``ChunkState`` that lives where the chunk's data are (a thread of this process under
Dask's default scheduler, a Dask actor on a worker when a ``dask.distributed.Client`` is active).  The local
variables of the plate (responsibilities, per-row latents, NCVMP state) never leave it.

A variable off the sharded plate (a global) is updated on the driver.  Its natural parameters are the sum of
its messages: those of factors on the sharded plate are sums over rows, so each chunk returns its partial sum
(the same rules on its rows) and the driver adds them; the messages of factors off the plate (its prior) are
the same in every chunk and come from chunk 0.  The driver forms q, checks it as the engine does, and ships
it back with the next batch of commands.  The ELBO is split the same way.  ``ShardedEngine`` presents the
engine's interface to ``engine._iterate``, so the stopping rules, damping and NCVMP backtracking are the
in-memory ones.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distributions import Bernoulli, Categorical
from factorgraph.graph import checks
from factorgraph.graph.nodes import Indexed, ModelError, Plate, Variable

from .compile import compile_model
from .engine import Engine
from .seeding import gated_rows, gathered_selectors, token_responsibilities, token_selector


# ------------------------------------------------------------------------------------ finding the shards
@dataclass
class Sharding:
    """How the sharded plate is cut: its name, the chunk boundaries and the dask arrays that carry it."""

    plate: Plate
    bounds: list[tuple[int, int]]
    arrays: list[Any]  # the model's dask arrays, rechunked to ``bounds`` along the plate
    slots: list[tuple[Any, str, int]] = field(default_factory=list)  # (holder, attribute/key, plate axis)

    @property
    def n_chunks(self) -> int:
        return len(self.bounds)


def _holders(model) -> list[tuple[Any, str, tuple[Plate, ...], str]]:
    """Every place a node keeps plate-shaped data: (object, attribute or params key, the plates of its axes,
    what to call it in an error)."""
    out = []
    for v in model.variables.values():
        out.append((v, "value", v.plates, f"the observed data of {v.name!r}"))
        out.append((v, "mask", v.plates, f"the mask of {v.name!r}"))
    for d in model.deterministics:
        if "X" in d.params:
            xp = tuple(p for i, p in enumerate(d.plates) if i in d.params.get("x_axes", ()))
            out.append((d.params, "X", xp, f"the inputs X of {d.name!r}"))
        if d.op.name in ("sum", "product"):  # a constant operand given per row (b[g] * x)
            for role in ("a", "b"):
                src = d.params["src"][role]
                out.append((d.parents, role, tuple(p for p in d.plates if p.index in src),
                            f"the operand {role!r} of {d.name!r}"))
    return out


def find_sharding(model) -> Sharding | None:
    """The sharded plate of a model whose data include dask arrays (None when none do): the one plate along
    which they are chunked; every dask array is rechunked to the first one's chunks along it (observed values
    first, in declaration order, then inner products' inputs), and to one chunk along its other axes."""
    found = []
    for holder, key, plates, what in _holders(model):
        arr = holder[key] if isinstance(holder, dict) else getattr(holder, key)
        if checks.is_dask(arr):
            found.append((holder, key, plates, what, arr))
    if not found:
        return None
    gathered = gathered_selectors(model)
    if gathered:
        raise ModelError(f"the selector {gathered[0]} of a gate is not supported by a sharded (dask) run yet; give the "
                         "data as numpy arrays")
    on_sigma = [v.name for v in model.variables.values() if getattr(v, "base", None) is not None]
    if on_sigma:
        raise ModelError(f"{on_sigma[0]!r} is a scale used as a term of a sum or product (q over σ itself); sharded "
                         "fits do not support such scales yet: use it as an sd=, or fit in memory")
    ref: dict[Plate, tuple[int, ...]] = {}
    for _holder, _key, plates, what, arr in found:
        chunked = [p for p, c in zip(plates, arr.chunks, strict=False) if len(c) > 1]
        if len(chunked) > 1:
            raise ModelError(f"{what} is a dask array chunked along several plates {[p.name for p in chunked]}; "
                             "chunk it along one plate only (the sharded plate)")
        for p in chunked:
            ref.setdefault(p, arr.chunks[plates.index(p)])
    if len(ref) > 1:
        raise ModelError(f"the dask data are chunked along different plates {sorted(p.name for p in ref)}; "
                         "chunk every array along the same plate")
    plate = next(iter(ref)) if ref else found[0][2][0]  # one chunk: the first plate of the first array
    chunks = ref.get(plate, (plate.size,))
    cuts = np.concatenate([[0], np.cumsum(chunks)]).astype(int)
    sh = Sharding(plate, [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:], strict=True)], [])
    for holder, key, plates, what, arr in found:
        if plate not in plates:
            raise ModelError(f"{what} is a dask array without the sharded plate {plate.name!r}; give it as a numpy "
                             "array, or chunk every dask array along one plate they share")
        axis = plates.index(plate)
        sh.arrays.append(arr.rechunk({axis: tuple(chunks), **{i: -1 for i in range(arr.ndim) if i != axis}}))
        sh.slots.append((holder, key, axis))
    return sh


_DRAW_BLOCK = 1 << 16  # rows of random draws made at a time when a chunk replays the stream before its rows


class _Slot:
    """Stands for the k-th dask array in a pickled model skeleton."""

    def __init__(self, k: int) -> None:
        self.k = k


def skeleton(model, sh: Sharding) -> bytes:
    """The model pickled without its sharded data (dask arrays become slots; the all-true mask of dask data
    without missing entries is dropped, a lazy mask is a slot of its own)."""
    import cloudpickle

    saved = []
    for k, (holder, key, _axis) in enumerate(sh.slots):
        if holder is None:  # a local variable's init=, not part of the model
            continue
        if isinstance(holder, dict):
            saved.append((holder, key, holder[key]))
            holder[key] = _Slot(k)
        else:
            saved.append((holder, key, getattr(holder, key)))
            setattr(holder, key, _Slot(k))
            if key == "value" and not checks.is_dask(holder.mask):
                saved.append((holder, "mask", holder.mask))
                holder.mask = None
    try:
        return cloudpickle.dumps(model)
    finally:
        for holder, key, val in reversed(saved):
            if isinstance(holder, dict):
                holder[key] = val
            else:
                setattr(holder, key, val)


def chunk_model(blob: bytes, plate_name: str, start: int, stop: int, blocks: list[np.ndarray],
                rows: np.ndarray | None = None):
    """The model restricted to rows ``start:stop`` (or the given ``rows``) of the sharded plate, its data the
    chunk's blocks."""
    idx = np.arange(start, stop) if rows is None else np.asarray(rows)
    model = pickle.loads(blob)
    plate = model.plates[plate_name]
    n0 = plate.size
    object.__setattr__(plate, "size", len(idx))
    for v in model.variables.values():
        if isinstance(v.value, _Slot):
            v.value = blocks[v.value.k]
            v.mask = blocks[v.mask.k] if isinstance(v.mask, _Slot) else np.ones(v.shape, dtype=bool)
        elif plate in v.plates and v.value is not None:
            axis = v.plates.index(plate)
            v.value = _take(v.value, axis, idx)
            full = tuple(n0 if p is plate else p.size for p in v.plates)  # the plate's size before the cut
            v.mask = _take(np.broadcast_to(v.mask, full), axis, idx)
    for d in model.deterministics:
        if isinstance(d.params.get("X"), _Slot):
            d.params["X"] = blocks[d.params["X"].k]
        elif plate in d.plates and "X" in d.params:
            xp = [p for i, p in enumerate(d.plates) if i in d.params["x_axes"]]
            if plate in xp:
                d.params["X"] = _take(d.params["X"], xp.index(plate), idx)
        if d.op.name in ("sum", "product"):
            for role, a in list(d.parents.items()):
                if isinstance(a, _Slot):  # a dask operand: the chunk's block
                    d.parents[role] = blocks[a.k]
        if plate in d.plates and d.op.name in ("sum", "product"):  # a constant operand given per row (b[g] * x)
            for role, a in list(d.parents.items()):
                src = d.params["src"][role]
                if isinstance(a, np.ndarray) and plate.index in src and a.shape[src.index(plate.index)] == n0 > 1:
                    d.parents[role] = _take(a, src.index(plate.index), idx)
        if plate in d.plates and d.op.name == "polynomial":  # its coefficients, expanded onto the node's plates
            axis = list(d.params["dst"]).index(plate.index)
            d.params["monomials"] = [
                (_take(c, axis, idx) if np.ndim(c) > axis and np.shape(c)[axis] == n0 > 1 else c, roles)
                for c, roles in d.params["monomials"]]
        if "shape" in d.params:
            d.params["shape"] = tuple(p.size for p in d.plates)
        if "sizes" in d.params:
            d.params["sizes"] = tuple(p.size for p in d.plates)
        d.params["products"] = {}
    nodes, seen = [], set()
    for node in [*model.deterministics, *(q for d in model.deterministics for q in d.parents.values()),
                 *(a for f in model.factors for a in f.edges.values())]:
        if id(node) not in seen:  # an indexed view inside a sum or an inner product too, each cut once
            seen.add(id(node))
            nodes.append(node)
    for node in nodes:
        if isinstance(node, Indexed) and node.plate is plate:
            node.labels = node.labels[idx]
            node.counts = np.bincount(node.labels, minlength=node.along.size).astype(float)
        elif isinstance(node, Indexed) and node.along is plate:
            raise ModelError(f"{node.name!r} gathers the sharded plate {plate_name!r}: a sharded plate cannot be "
                             "indexed")
    for f in model.factors:  # constants given per row of the sharded plate
        if plate in f.plates:
            axis = f.plates.index(plate)
            for edge, arg in f.edges.items():
                if isinstance(arg, np.ndarray) and arg.ndim > axis and arg.shape[axis] == n0 > 1:
                    f.edges[edge] = _take(arg, axis, idx)
    return model


def _release_unused(c) -> None:
    """Drop the inputs X of inner products no compiled factor reads (a fused likelihood keeps XᵀX, Xᵀy): out of
    core, a chunk then holds its statistics, not its rows."""
    from .compile import _used_deterministics

    used = {id(d) for d in _used_deterministics(c, c.model)}
    for d in c.model.deterministics:
        if id(d) not in used and "X" in d.params:
            d.params["X"] = None


def _take(a: np.ndarray, axis: int, idx: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim <= axis or a.shape[axis] == 1:
        return a
    return np.take(a, idx, axis=axis)


def is_local(node_or_factor, plate_index: int) -> bool:
    plates = node_or_factor.plates
    return any((p.index if isinstance(p, Plate) else p) == plate_index for p in plates)


# ------------------------------------------------------------------------------------ a chunk's state
class ChunkState:
    """One chunk's model, compiled and run by the in-memory engine, with its local variables' posteriors.

    ``run(commands)`` executes a batch and returns the answers of those that have one:

    * ``("set", name, q)``: a global's new posterior from the driver;
    * ``("damp", {factor: α})``: the damping the driver's backtracking chose;
    * ``("update", name)``: update a local variable (the engine's own update);
    * ``("msg", name, with_global)``: the natural parameters the factors on the plate send the global
      ``name`` (summed over the chunk's rows), and with ``with_global`` those of the factors off it;
    * ``("elbo", with_global)``: (E[log f] on the plate, local entropies[, off-plate terms]);
    * ``("snap",)``, ``("restore",)``: the engine's backtracking snapshot;
    * ``("seeded",)``, ``("start", seeds)``, ``("info",)``: the start (``sharded_run._seed``: the requests
      ``moments``, ``centred``, ``row``, ``d2``, ``pick``, ``d2max``, ``assign`` of a selector's seeding);
    * ``("site", name, what, ...)``: sums over the chunk's sites of a handled global (``site_op``).
    """

    def __init__(self, blob: bytes, plate_name: str, start: int, stop: int, options: dict, *blocks) -> None:
        model = chunk_model(blob, plate_name, start, stop, list(blocks), options.get("rows"))
        self.rows = (start, stop)
        # the local variables' init=, this chunk's rows (sharded like the data: ``sharded_run._split_init``)
        self.init = {k: blocks[s.k] for k, s in options["local_init"].items()}
        c = compile_model(model, options["algorithm"], options["schedule"], {**options["init"], **self.init},
                          options["damping"], options.get("handlers"))
        self.c, self.eng = c, Engine(c)
        _release_unused(c)
        self.p = model.plates[plate_name].index
        # factors on the plate, by name (a fused factor keeps its name but sums the plate away)
        self.on_plate = {f.name for f in model.factors if model.plates[plate_name] in f.plates}
        for f in c.factors:
            if f.node.ftype.structured is not None and is_local(f, self.p):
                raise ModelError(f"{f.name}: a structured factor (a chain) along the sharded plate {plate_name!r} "
                                 "cannot be split into chunks")
        self.options = options
        self.plate_name, self.n_total = plate_name, options["n_rows"]
        self._snap = None
        self._data: dict[str, np.ndarray] = {}

    def local_of(self, v: Variable) -> bool:
        return is_local(v, self.p)

    def seeded(self) -> list[tuple[str, str]]:
        """The mixture selectors on the plate whose start the chunks must agree on (``seed`` below), in the order
        ``Engine.initialise`` draws their starts in memory, each with how: "kmeans" (k-means++ on a gated
        observed output, missing entries at their column's observed mean), "tokens" (one-hot rows of a gated
        Categorical, one word per label: responsibilities from random topics the driver draws) or "dirichlet"
        (Dirichlet(1) rows)."""
        c = self.c
        out = []
        for v in c.model.variables.values():
            if (v not in c.latent or not is_local(v, self.p) or v.name in self.init or v.name in c.dropped
                    or id(v) not in c.selector_factors or v.family not in (Categorical, Bernoulli)):
                continue
            tokens = token_selector(v, c.selector_factors[id(v)])
            out.append((v.name, "tokens" if tokens else "kmeans" if self._raw(v.name) is not None else "dirichlet"))
        return out

    def start(self, seeds: dict[str, np.ndarray]) -> None:
        model = self.c.model
        seeds = {k: Bernoulli(probs=r) if model.variables[k].family is Bernoulli else r for k, r in seeds.items()}
        self.eng.initialise({**self.options["init"], **self.init, **seeds}, np.random.default_rng(self.options["seed"]))

    # k-means++ seeding of a selector across chunks, the same draws as ``compiled.categorical_init`` in memory
    def _raw(self, name: str) -> np.ndarray | None:
        if name not in self._data:
            v = self.c.model.variables[name]
            self._data[name] = gated_rows(v, self.c.selector_factors[id(v)])
        return self._data[name]

    def _dirichlet(self, name: str, state: dict) -> np.ndarray:
        """This chunk's rows of the Dirichlet(1) start ``compiled.categorical_init`` draws for all rows in memory
        (``rng.dirichlet(ones(K), size=v.shape)``, row after row from ``state``): the draws of the rows before
        the chunk are made and dropped, a block of rows at a time (a gamma draw takes a variable number of
        random numbers, so the stream cannot be advanced by a count)."""
        v = self.c.model.variables[name]
        K = v.event_shape[0] if v.event_shape else 2
        bits = np.random.PCG64()
        bits.state = state
        rng = np.random.Generator(bits)
        axis = v.plates.index(self.c.model.plates[self.plate_name])
        shape = list(v.shape)
        shape[axis] = self.n_total
        rest = int(np.prod(shape[1:], dtype=int))
        if axis == 0:  # the rows before the chunk, then the chunk's
            skip = self.rows[0] * rest
            for a in range(0, skip, _DRAW_BLOCK):
                rng.dirichlet(np.ones(K), size=min(_DRAW_BLOCK, skip - a))
            r = rng.dirichlet(np.ones(K), size=tuple(v.shape))
        else:
            r = np.take(rng.dirichlet(np.ones(K), size=tuple(shape)), np.arange(*self.rows), axis=axis)
        return r[..., 1] if v.family is Bernoulli else r

    def seed_op(self, cmd: tuple) -> Any:
        op, name = cmd[0], cmd[1]
        if op == "dirichlet":
            return self._dirichlet(name, cmd[2])
        x = self._raw(name)
        if op == "width":
            return x.shape[1]
        if op == "tokens":  # the rows' responsibilities from the driver's random topics, as in memory
            v = self.c.model.variables[name]
            r = token_responsibilities(x, cmd[2]).reshape(v.shape + (cmd[2].shape[0],))
            return r[..., 1] if v.family is Bernoulli else r
        if op == "observed_sums":  # per column: how many entries are observed, and their sum
            seen = ~np.isnan(x)
            return seen.sum(0), np.where(seen, x, 0.0).sum(0)
        if op == "fill":  # missing entries at the columns' observed means over all chunks, as in memory
            self._data[name] = x = np.where(np.isnan(x), cmd[2], x)
            return None
        if op == "moments":
            return len(x), x.sum(0)
        if op == "centred":
            return ((x - cmd[2]) ** 2).sum(0)
        x = x / cmd[2]
        if op == "row":
            return x[cmd[3]]
        d2 = np.min([((x - c) ** 2).sum(-1) for c in cmd[3]], axis=0)
        if op == "d2":
            return d2.sum()
        if op == "pick":
            cdf = np.cumsum(d2 / cmd[4])
            return int(np.searchsorted(cdf, cmd[5], side="right"))
        D2 = np.stack([((x - c) ** 2).sum(-1) for c in cmd[3]], axis=-1)
        if op == "d2max":
            return D2.max()
        # "assign": the in-memory tie-breaking noise is rng.random((N, K)) in row order; this chunk's rows
        # take the draws from start·K on
        bits = np.random.PCG64()
        bits.state = cmd[4]
        K = D2.shape[1]
        bits.advance(self.rows[0] * K)
        D2 = D2 + np.random.Generator(bits).random(D2.shape) * 1e-9 * (1.0 + cmd[5])
        r = np.full(D2.shape, 0.1 / K)
        r[np.arange(len(x)), D2.argmin(-1)] += 0.9
        v = self.c.model.variables[name]
        return r.reshape(v.shape + (K,))[..., 1] if v.family is Bernoulli else r.reshape(v.shape + (K,))

    def info(self) -> dict:
        c = self.c
        return {"order": [v.name for v in c.order],
                "local": {v.name: is_local(v, self.p) for v in c.latent},
                "factors": [(f.name, f.node.ftype.conjugate, f.evidence_kind, f.initial_damping,
                             f.name in self.on_plate) for f in c.factors],
                "q": {v.name: self.eng.q[v.name] for v in c.latent if not is_local(v, self.p)},
                "sequential": {k: p.size for k, p in c.sequential.items()},
                "fused": list(c.fused),
                "claimed": {k: [f.name for f in fs] for k, fs in c.claimed.items()},
                "block_prior": dict(c.block_prior)}

    def run(self, commands: list) -> list:
        eng, c = self.eng, self.c
        out = []
        for cmd in commands:
            op = cmd[0]
            if op == "set":
                eng.set_posterior(c.model.variables[cmd[1]], cmd[2])
            elif op == "damp":
                for f in c.factors:
                    if f.name in cmd[1]:
                        f.damping = cmd[1][f.name]
            elif op == "update":
                eng.update(c.model.variables[cmd[1]])
            elif op == "msg":
                out.append(self._messages(c.model.variables[cmd[1]], cmd[2]))
            elif op == "elbo":
                out.append(self._elbo(cmd[1]))
            elif op == "snap":
                self._snap = eng.snapshot()
            elif op == "restore":
                eng.restore(self._snap)
            elif op == "start":
                self.start(cmd[1])
            elif op == "seeded":
                out.append(self.seeded())
            elif op == "info":
                out.append(self.info())
            elif op == "site":
                out.append(self.site_op(cmd))
            else:
                out.append(self.seed_op(cmd))
        return out

    def _messages(self, v: Variable, with_global: bool) -> tuple:
        eng = self.eng
        eng._updating = v.name
        local = [np.zeros_like(z) for z in v.family._zero_natural(v.shape, v.event_shape)]
        glob = [np.zeros_like(a) for a in local] if with_global else None
        for cons in self.c.consumers.get(id(v), []):
            here = (cons.factor.name in self.on_plate if cons.factor is not None
                    else is_local(cons.det or cons.index, self.p))
            if not here and not with_global:
                continue
            m = eng.consumer_message(cons)
            acc = local if here else glob
            for i, a in enumerate(m):
                acc[i] = acc[i] + a
        for f in self.c.selector_factors.get(id(v), []):
            here = f.name in self.on_plate
            if here or with_global:
                acc = local if here else glob
                acc[0] = acc[0] + eng.selector_message(f)[0]
        return tuple(local), (None if glob is None else tuple(glob))

    def _elbo(self, with_global: bool) -> tuple[float, float, float, float]:
        from factors.plating import weighted_total

        eng, c = self.eng, self.c
        ef = [0.0, 0.0]  # on the plate, off it
        for f in c.factors:
            here = f.name in self.on_plate
            if f.claimed_by is not None or (not here and not with_global):
                continue  # a handler's sites: the driver adds its BlockFit's terms
            ef[0 if here else 1] += weighted_total(eng.factor_evidence(f), eng.instance_weights(f), f.plates, f.sizes)
        h = [0.0, 0.0]
        for v in c.latent:
            here = is_local(v, self.p)
            if v.name in c.handlers or (not here and not with_global):
                continue
            ent = np.broadcast_to(eng.q[v.name].entropy(), v.shape)
            if v.name in c.pruned:
                ent = ent * c.pruned[v.name]
            h[0 if here else 1] += float(ent[~v.mask].sum()) if v.mask is not None else float(ent.sum())
        return ef[0], h[0], ef[1], h[1]

    def _target(self, name: str):
        """The chunk's rows as a ``BlockTarget`` of the handled global ``name``: its claimed sites only (the
        Gaussian part, the rest of the graph's message, is the driver's)."""
        from .handlers import BlockTarget, Site
        from .messages import _Moments, _rows

        v = self.c.model.variables[name]
        K = v.shape[0] if v.plates else 0
        D = v.event_shape[0]
        sites = []
        for f in self.c.claimed[name]:
            edge = next(e for e in f.node.edges if e in f.node.ftype.pointwise)
            mom = _Moments(self.eng, f)
            others = {e: tuple(_rows(a, f.sizes) for a in mom[e]) for e in f.node.edges if e != edge}
            X = f.node.edges[edge].params["X"]
            sites.append(Site(X.reshape(-1, X.shape[-1]), f.node.ftype.pointwise[edge], others, f.params, K, f.name))
        n = D * max(K, 1)
        return BlockTarget(np.zeros(n), np.zeros((n, n)), sites)

    def site_op(self, cmd: tuple) -> Any:
        """Sums over the chunk's claimed sites for a handler on the driver: ``("site", name, what, *args)``."""
        name, what = cmd[1], cmd[2]
        t = self._target(name)
        if what == "terms":
            return t._site_terms(*cmd[3:])
        if what == "hessian":
            return t.hessian(cmd[3]) - 2.0 * t.eta2
        if what == "laplace":
            return t.laplace_site_term(*cmd[3:])
        if what == "quadratic":
            return t.quadratic_site_term(*cmd[3:])
        if what == "mc":
            return t.mc_sites
        if what == "natural":  # the quadratic sites' (η₁, η₂, constant), summed
            e1, e2, c = t.gaussian_part()
            return e1, e2, c - t.prior_const
        raise ValueError(f"unknown site request {what!r}")

    def local_posterior(self, name: str) -> Any:
        return self.eng.q[name]
