"""One chunk of a sharded plate: its model compiled and run by the in-memory engine where its data are.

``ChunkState`` is built from the model's skeleton and the chunk's blocks (``sharding.chunk_model``), in this
process under Dask's threaded scheduler or as a Dask actor on a worker (``sharded_backends``).  It answers
the driver's batches of commands (``ShardedEngine`` in ``sharded_engine``): updates of the local variables,
the partial sums of the messages to the globals and of the ELBO over its rows, the sums over its sites of a
handled global, and the requests that start the mixture selectors (``sharded_seeding``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distributions import Bernoulli
from factorgraph.graph.nodes import ModelError, Variable
from factors.plating import weighted_total

from .blas import chunk_threads
from .compile import _used_deterministics, compile_model
from .engine import Engine
from .handlers import BlockTarget, Site
from .messages import _Moments, _rows
from .sharded_seeding import SelectorSeeding
from .sharding import chunk_model, is_local


class ChunkState(SelectorSeeding):
    """One chunk's model, compiled and run by the in-memory engine, with its local variables' posteriors.

    ``run(commands)`` executes a batch and returns the answers of those that have one:

    * ``("set", name, q)``: a global's new posterior from the driver;
    * ``("damp", {factor: α})``: the damping the driver's backtracking chose;
    * ``("update", name)``: update a local variable (the engine's own update);
    * ``("msg", name, with_global)``: the natural parameters the factors on the plate send the global
      ``name`` (summed over the chunk's rows), and with ``with_global`` those of the factors off it;
    * ``("elbo", with_global)``: (E[log f] on the plate, local entropies[, off-plate terms]);
    * ``("snap",)``, ``("restore",)``: the engine's backtracking snapshot;
    * ``("seeded",)``, ``("start", seeds)``, ``("info",)``: the start (``sharded_seeding``: the requests
      ``moments``, ``centred``, ``row``, ``d2``, ``pick``, ``d2max``, ``assign`` of a selector's seeding, and
      ``prior_support``, ``prior_scores``, ``set_start`` of one started from its components' priors);
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
        for f in c.factors:  # a chain along the plate would be cut; chains *over* it (one per row) are whole
            along = [q.name for q in f.node.consumed.values()]
            if f.node.ftype.structured is not None and plate_name in along:
                raise ModelError(f"{f.name}: a structured factor (a chain) runs along the sharded plate {plate_name!r}"
                                 " and cannot be split into chunks; chunk the data along the sequence plates only")
        self.options = options
        self.plate_name, self.n_total = plate_name, options["n_rows"]
        self._snap = None
        self._data: dict[str, np.ndarray] = {}

    def local_of(self, v: Variable) -> bool:
        return is_local(v, self.p)

    def start(self, seeds: dict[str, np.ndarray]) -> None:
        model = self.c.model
        seeds = {k: Bernoulli(probs=r) if model.variables[k].family is Bernoulli else r for k, r in seeds.items()}
        # a selector started from its components' priors keeps that start here: whether some component has no
        # row is for the driver to tell from all chunks (``sharded_seeding.lead_selectors``)
        self.eng.initialise({**self.options["init"], **self.init, **seeds}, np.random.default_rng(self.options["seed"]),
                            fallback=False)

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
        """The batch's answers, computed under the thread policy of a sweep (``chunk_threads``)."""
        with chunk_threads(self.c, self.options.get("threads")):
            return self._run(commands)

    def _run(self, commands: list) -> list:
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


def _release_unused(c) -> None:
    """Drop the inputs X of inner products no compiled factor reads (a fused likelihood keeps XᵀX, Xᵀy): out of
    core, a chunk then holds its statistics, not its rows."""
    used = {id(d) for d in _used_deterministics(c, c.model)}
    for d in c.model.deterministics:
        if id(d) not in used and "X" in d.params:
            d.params["X"] = None
