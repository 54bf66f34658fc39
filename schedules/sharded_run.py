"""The driver of a sharded fit: where the chunk states live, and the engine interface ``_iterate`` runs.

Two backends hold the ``ChunkState``s (``schedules.sharding``): ``_Threads`` (Dask's default, threaded
scheduler: the chunks' blocks are computed by ``dask.compute`` and their states kept in this process, run on
a thread pool) and ``_Actors`` (an active ``dask.distributed.Client``: one Dask actor per chunk, created on a
worker from the chunk's blocks, which the scheduler computes there; nothing but the small command batches and
their answers crosses to the client).  A chunk whose worker is lost is rebuilt from its data (recomputed by
Dask from their graph) and the commands it had received are replayed: the computation is deterministic, so
the fit goes on as if nothing had happened.
"""

from __future__ import annotations

import os
import pickle
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from types import SimpleNamespace
from typing import Any

import numpy as np

from factorgraph.graph import checks
from factorgraph.graph.nodes import ModelError

from . import progress as _progress
from .backtracking import raise_damping, relax_damping
from .blas import _one_thread_blas
from .engine import _iterate, _unconverged_text
from .errors import InferenceError
from .seeding import observed_centre, token_topics
from .sharding import _DRAW_BLOCK, ChunkState, Sharding, _Slot, find_sharding, skeleton
from .updates import _summary


def _client():
    """The active ``dask.distributed.Client``, or None (also when ``dask.config.set(scheduler=...)`` chose a
    local scheduler)."""
    import dask

    if dask.config.get("scheduler", None) not in (None, "dask.distributed", "distributed"):
        return None
    try:
        from distributed import get_client
    except ImportError:
        return None
    try:
        return get_client()
    except ValueError:
        return None


class _Threads:
    """Chunk states in this process (Dask's local scheduler computes their blocks)."""

    name = "threads"

    def __init__(self, blob: bytes, sh: Sharding, options: dict) -> None:
        import dask

        self.pool = ThreadPoolExecutor(max_workers=max(1, min(sh.n_chunks, os.cpu_count() or 1)))

        def make(i: int) -> ChunkState:
            blocks = dask.compute(*_blocks(sh, i))
            return ChunkState(blob, sh.plate.name, *sh.bounds[i], options, *blocks)

        self.states = list(self.pool.map(make, range(sh.n_chunks)))
        self.workers = 1

    def call(self, batches: list[list]) -> list[list]:
        return list(self.pool.map(lambda sb: sb[0].run(sb[1]), zip(self.states, batches, strict=True)))

    def local(self, name: str) -> list:
        return [s.local_posterior(name) for s in self.states]

    def close(self) -> None:
        self.pool.shutdown()


class _Actors:
    """One Dask actor per chunk on the cluster of the active client."""

    name = "distributed"

    def __init__(self, client, blob: bytes, sh: Sharding, options: dict) -> None:
        self.client, self.blob, self.sh, self.options = client, blob, sh, options
        self.actors = [self._make(i) for i in range(sh.n_chunks)]
        self.log: list[list[list]] = [[] for _ in range(sh.n_chunks)]
        self.retries = 0
        self.workers = self._count_workers()

    def _count_workers(self, tries: int = 20) -> int:
        """The cluster's workers as the scheduler lists them.  The list was once seen empty just after the actors
        were placed (a transient in the scheduler's view, seen once in a CI run): ask again briefly, then fall
        back to the workers that hold the actors."""
        import time

        for _ in range(tries):
            n = len(self.client.scheduler_info(n_workers=-1)["workers"])
            if n:
                return n
            time.sleep(0.05)
        return len({getattr(a, "_address", None) for a in self.actors})

    def _make(self, i: int):
        """The actor of chunk i, built on a worker from its blocks; the blocks are computed there (read from
        storage, or taken from the user's persisted array) and released once the chunk model holds what it
        needs, so that a fit out of core keeps only the chunks' statistics in memory."""
        blocks = self.client.compute(_blocks(self.sh, i))
        fut = self.client.submit(ChunkState, self.blob, self.sh.plate.name, *self.sh.bounds[i], self.options,
                                 *blocks, actor=True, pure=False)
        actor = fut.result()
        del blocks
        return actor

    def call(self, batches: list[list]) -> list[list]:
        futs = []
        for a, b in zip(self.actors, batches, strict=True):
            try:
                futs.append(a.run(b))
            except RuntimeError as e:  # "Worker holding Actor was lost"
                futs.append(e)
        out = []
        for i, f in enumerate(futs):
            try:
                if isinstance(f, Exception):
                    raise f
                out.append(f.result())
            except (ModelError, InferenceError):
                raise
            except Exception:  # the chunk's worker is gone: rebuild it there or elsewhere and replay
                out.append(self._recover(i, batches[i]))
            self.log[i].append(batches[i])
        return out

    def _recover(self, i: int, batch: list, attempts: int = 3) -> list:
        for attempt in range(attempts):
            try:
                self.retries += 1
                self.actors[i] = self._make(i)
                for old in self.log[i]:
                    self.actors[i].run(old).result()
                return self.actors[i].run(batch).result()
            except (ModelError, InferenceError):
                raise
            except Exception:
                if attempt == attempts - 1:
                    raise
                time.sleep(0.5)
        raise RuntimeError("unreachable")

    def local(self, name: str) -> list:
        return [a.local_posterior(name).result() for a in self.actors]

    def close(self) -> None:
        self.actors = []


def _blocks(sh: Sharding, i: int) -> list:
    """The dask blocks of chunk i, one per sharded array."""
    return [arr.blocks[tuple(i if k == slot[2] else 0 for k in range(arr.ndim))]
            for arr, slot in zip(sh.arrays, sh.slots, strict=True)]


class _Factor(SimpleNamespace):
    """What ``_iterate`` reads of a compiled factor: its name, damping and kind."""


class ShardedTarget:
    """A handled global's ``BlockTarget`` whose sites are the chunks' rows: the Gaussian part (the rest of the
    graph's message) here, the site sums Σ_n log f_n, their gradients and Hessians (and Laplace's expansion) as
    reductions over the chunks, each a round trip that ships w and brings back D + D² numbers per chunk."""

    def __new__(cls, eng, name: str, eta1, eta2, prior):
        from .handlers import BlockTarget

        class _Sharded(BlockTarget):
            def _site_terms(self, W, scales, grads=True, skip_quadratic=False):
                parts = eng.ask(("site", name, "terms", W, scales, grads, skip_quadratic))
                val = sum(p[0] for p in parts)
                grad = None if not grads else sum(p[1] for p in parts)
                gs = None if not scales else sum(p[2] for p in parts)
                return val, grad, gs

            def hessian(self, w):
                return 2.0 * self.eta2 + sum(eng.ask(("site", name, "hessian", w)))

            def laplace_site_term(self, w, cov):
                return float(sum(eng.ask(("site", name, "laplace", w, cov))))

            def quadratic_site_term(self, mu, cov):
                return float(sum(eng.ask(("site", name, "quadratic", mu, cov))))

            @property
            def mc_sites(self):
                return any(eng.ask(("site", name, "mc")))

            def gaussian_part(self):
                e1, e2, c = self.eta1, self.eta2, float(self.prior_const)
                for b, q, a in eng.ask(("site", name, "natural")):
                    e1, e2, c = e1 + b, e2 + q, c + a
                return e1, e2, c

        return _Sharded(np.asarray(eta1, float), np.asarray(eta2, float), [], prior)


class ShardedEngine:
    """The engine's interface over chunk states: globals updated here, locals in their chunks."""

    def __init__(self, backend, info: dict, algorithm, model, handlers: dict | None = None) -> None:
        self.backend = backend
        self.local = info["local"]
        self.sequential = info["sequential"]
        self.q: dict[str, Any] = dict(info["q"])
        self.variables = model.variables
        factors = [_Factor(name=n, node=SimpleNamespace(ftype=SimpleNamespace(conjugate=conj)), evidence_kind=kind,
                           damping=d, initial_damping=d, claimed_by=None, on_plate=loc)
                   for n, conj, kind, d, loc in info["factors"]]
        self.c = SimpleNamespace(model=model, algorithm=algorithm, factors=factors, handlers=dict(handlers or {}),
                                 order=[model.variables[n] for n in info["order"]], fused=info["fused"],
                                 claimed=info["claimed"], block_prior=info["block_prior"])
        for f in factors:
            f.claimed_by = next((k for k, names in info["claimed"].items() if f.name in names), None)
        self.max_change = 0.0
        self.changes: dict[str, float] = {}
        self.raised: dict[str, float] = {}
        self.abandoned = 0
        self.block: dict = {}
        self.joint: dict = {}
        self.trace: list[float] = []
        self.pending: list = []
        self.bytes_out = self.bytes_in = 0
        self.sweep_bytes: list[int] = []
        self._mark = 0
        self._snap = None
        self._damp_sent: dict[str, float] = {}

    # ------------------------------------------------------------------------------ the round trip
    def _send(self, final: tuple | None, answers: bool = False) -> list:
        """Ship the pending commands (and ``final``, whose answers are returned) to every chunk."""
        damp = {f.name: f.damping for f in self.c.factors}
        if damp != self._damp_sent:
            self.pending.insert(0, ("damp", damp))
            self._damp_sent = damp
        batches = []
        for i in range(len(self.backend_states())):
            b = list(self.pending)
            if final is not None:
                b.append(final if final[0] not in ("msg", "elbo") else final[:-1] + (i == 0,))
            batches.append(b)
        self.pending = []
        out = self.backend.call(batches)
        self.bytes_out += sum(len(pickle.dumps(b)) for b in batches)
        self.bytes_in += sum(len(pickle.dumps(o)) for o in out)
        return [o[-1] if o else None for o in out]

    def ask(self, cmd: tuple) -> list:
        """One request to every chunk (after the pending commands); their answers."""
        self.pending.append(cmd)
        return self._send(None, answers=True)

    def backend_states(self) -> list:
        return self.backend.states if hasattr(self.backend, "states") else self.backend.actors

    # ------------------------------------------------------------------------------ engine interface
    def update(self, v) -> None:
        if self.local[v.name]:
            self.pending.append(("update", v.name))
            return
        if v.name in self.c.handlers:
            self._update_block(v)
            return
        size = self.sequential.get(v.name)
        if size is None:
            self._accept(v, self._natural(v))
            return
        axis = [p.name for p in v.plates].index(next(p.name for p in v.plates if p.size == size))
        for j in range(size):  # Gauss–Seidel over a coupled plate, as the engine does
            nat = self._natural(v)
            idx = (slice(None),) * axis + (j,)
            mixed = []
            for a, b in zip(self.q[v.name].natural, nat, strict=True):
                a = np.array(np.broadcast_to(a, b.shape))
                a[idx] = b[idx]
                mixed.append(a)
            self._accept(v, tuple(mixed))

    def _update_block(self, v) -> None:
        """The handler fits the block on the driver against a target whose sites are the chunks' rows."""
        from scipy.linalg import block_diag

        from distributions import MvGaussian

        eta1, eta2 = self._natural(v)
        K = v.shape[0] if v.plates else 0
        if K:
            eta1, eta2 = eta1.reshape(-1), block_diag(*eta2)
        target = ShardedTarget(self, v.name, eta1, eta2, self.c.block_prior.get(v.name))
        warm = self.block.get(v.name)
        x0 = np.asarray(self.q[v.name].mean()).reshape(-1)
        fit = self.c.handlers[v.name].fit(target, x0, None if warm is None else warm.info)
        self.block[v.name] = fit
        q = fit.q
        if K:
            D = v.event_shape[0]
            cov = fit.q.cov().reshape(K, D, K, D)
            q = MvGaussian(mean=fit.q.mean().reshape(K, D), cov=np.stack([cov[k, :, k] for k in range(K)]))
            self.joint[v.name] = fit.q
        self._accept_q(v, q)

    def _natural(self, v) -> tuple:
        answers = self._send(("msg", v.name, False))
        zero = v.family._zero_natural(v.shape, v.event_shape)
        total = [z.copy() for z in zero]
        for i, a in enumerate(answers[0][1]):  # the factors off the plate (its prior), from chunk 0
            total[i] = total[i] + a
        for local, _ in answers:
            for i, a in enumerate(local):
                total[i] = total[i] + a
        return tuple(total)

    def _accept(self, v, nat: tuple) -> None:
        q = v.family.from_natural(*nat)
        if not np.all(np.asarray(q.is_proper())):
            raise InferenceError(f"the update of {v.name!r} gave an improper posterior (natural parameters "
                                 f"{_summary(nat)}); check that it has a proper prior or enough data")
        self._accept_q(v, q)

    def _accept_q(self, v, q) -> None:
        for a in q.expected_stats():
            if not np.all(np.isfinite(a)):
                raise InferenceError(f"the posterior of {v.name!r} has non-finite moments (natural parameters "
                                     f"{_summary(q.natural)}): the model may be improper or diverging")
        old = self.q[v.name]
        change = max(float(np.max(np.abs(a - b) / (1.0 + np.abs(b)), initial=0.0))
                     for a, b in zip(q.natural, old.natural, strict=True))
        self.max_change = max(self.max_change, change)
        self.changes[v.name] = max(self.changes.get(v.name, 0.0), change)
        self.q[v.name] = q
        self.pending.append(("set", v.name, q))

    def elbo(self, allow_minus_inf: bool = False) -> float:
        """The ELBO summed over the shards; as ``Engine.elbo`` (−inf allowed where backtracking will undo it)."""
        answers = self._send(("elbo", False))
        value = sum(a[0] + a[1] for a in answers) + answers[0][2] + answers[0][3]
        value += sum(fit.site_term + fit.prior_shift + fit.entropy for fit in self.block.values())
        total = self.bytes_out + self.bytes_in
        self.sweep_bytes.append(total - self._mark)
        self._mark = total
        if not np.isfinite(value) and not (allow_minus_inf and value == -np.inf):
            raise InferenceError(f"the ELBO is not finite ({value}); a posterior has become degenerate")
        return float(value)

    def snapshot(self) -> tuple:
        self.pending.append(("snap",))
        return (dict(self.q), {f.name: f.damping for f in self.c.factors})

    def restore(self, snap: tuple) -> None:
        self.q = dict(snap[0])
        self.pending.append(("restore",))

    def raise_damping(self) -> bool:
        return raise_damping(self.c.factors, self.raised)

    def relax_damping(self) -> None:
        relax_damping(self.c.factors)


def run_sharded(model, algorithm, sh: Sharding, max_iter: int, tol, param_tol, init: dict, schedule, damping,
                callbacks: list, progress, seed, warmup: list, handlers: dict | None = None) -> dict[str, Any]:
    """Iterate a sharded model to convergence; returns the pieces of a Result (as ``engine.run``)."""
    t0 = time.perf_counter()
    local_init, init = _split_init(model, sh, init)
    blob = skeleton(model, sh)
    options = {"algorithm": algorithm, "schedule": schedule, "init": init, "damping": damping, "seed": seed,
               "local_init": local_init, "handlers": handlers, "n_rows": sh.plate.size}
    client = _client()
    backend = _Actors(client, blob, sh, options) if client is not None else _Threads(blob, sh, options)
    n = sh.n_chunks
    names = backend.call([[("seeded",)]] * n)[0][0]
    seeds = _seed(backend, sh, names, np.random.default_rng(seed), model) if names else [{} for _ in range(n)]
    infos = [i[0] for i in backend.call([[("start", seeds[i]), ("info",)] for i in range(n)])]
    _same_schedule(infos, sh)
    info = infos[0]
    eng = ShardedEngine(backend, info, algorithm, model, handlers)
    trace: list[float] = []
    eng.trace = trace
    for v in warmup:
        eng.update(v)
    if warmup:
        trace.append(eng.elbo())
    warnings: list[str] = []
    kernels = any(not f.node.ftype.conjugate for f in eng.c.factors)
    with _progress.active(_progress.resolve(progress)):
        bar = _progress.bar(model.name, max_iter, unit="sweep", leave=True)
        with _one_thread_blas() if kernels else nullcontext():
            single = len(eng.c.order) == 1 and eng.c.order[0].name in eng.c.handlers
            it, converged, reason = _iterate(eng.c, eng, trace, max_iter, tol, param_tol, callbacks, bar, single,
                                             warnings)
        bar.close()
    notes = []
    if eng.raised:
        notes.append(f"backtracking raised damping to {eng.raised}")
    unconverged = [] if converged else [_unconverged_text(eng.c, eng, trace, it, reason, tol, param_tol)]
    warnings += unconverged
    sweeps = eng.sweep_bytes[1:] or eng.sweep_bytes
    report = {"plate": sh.plate.name, "rows": sh.plate.size, "chunks": sh.n_chunks,
              "chunk_rows": [b - a for a, b in sh.bounds], "backend": backend.name, "workers": backend.workers,
              "bytes_per_sweep": float(np.mean(sweeps)) if sweeps else 0.0,
              "retries": getattr(backend, "retries", 0)}
    notes.append(f"sharded plate {sh.plate.name!r}: {sh.n_chunks} chunks on {backend.workers} worker(s) "
                 f"({backend.name}); {report['bytes_per_sweep']:.0f} bytes moved per sweep")
    return {"engine": eng, "elbo_trace": np.array(trace), "n_iter": it, "converged": converged,
            "time": time.perf_counter() - t0, "warnings": warnings, "notes": notes, "unconverged": unconverged,
            "sharding": report, "backend": backend}


def collect_local(backend, v, sh: Sharding):
    """A function that collects a local variable's posterior from its chunks (concatenated along the plate)."""
    axis = v.plates.index(sh.plate)

    def fetch():
        parts = backend.local(v.name)
        evs = v.family.event_ndims
        nat = [np.concatenate([np.broadcast_to(p.natural[k], p.batch_shape + np.shape(p.natural[k])[
            np.ndim(p.natural[k]) - evs[k]:]) for p in parts], axis=axis) for k in range(len(evs))]
        return v.family.from_natural(*nat)

    return fetch


def _split_init(model, sh: Sharding, init: dict) -> tuple[dict, dict]:
    """init= split into the variables on the sharded plate and the rest.  A local variable's start (an array of
    responsibilities, numpy or dask) becomes one more sharded array, cut like the data: each chunk receives its
    rows only (``ChunkState`` finds them in the slot named here)."""
    import dask.array as da

    local, glob = {}, {}
    for name, value in init.items():
        v = model.variables.get(name)
        if v is None or sh.plate not in v.plates:
            glob[name] = value
            continue
        if not (checks.is_dask(value) or isinstance(value, np.ndarray | list)):
            raise ModelError(f"init of {name!r} (on the sharded plate {sh.plate.name!r}) must be an array of "
                             f"probabilities (numpy or dask), got {type(value).__name__}")
        if not checks.is_dask(value):
            value = checks.constant(value, f"init of {name!r}")
        want = tuple(v.shape) + tuple(v.event_shape)
        if tuple(value.shape) != want:
            raise ModelError(f"init of {name!r} must be probabilities of shape {want} with rows summing to 1, got "
                             f"shape {tuple(value.shape)}")
        axis = v.plates.index(sh.plate)
        chunks = tuple(b - a for a, b in sh.bounds)
        arr = value if checks.is_dask(value) else da.from_array(value, chunks=-1)
        sh.arrays.append(arr.astype(float).rechunk({axis: chunks, **{i: -1 for i in range(arr.ndim) if i != axis}}))
        sh.slots.append((None, name, axis))
        local[name] = _Slot(len(sh.arrays) - 1)
    return local, glob


def _same_schedule(infos: list[dict], sh: Sharding) -> None:
    """The chunks must compile to the same schedule (the driver walks chunk 0's): a variable whose missing
    entries are latent variables in some chunks but all observed in others would not."""
    for i, other in enumerate(infos[1:], 1):
        if other["order"] != infos[0]["order"] or other["local"] != infos[0]["local"]:
            diff = sorted(set(other["local"]) ^ set(infos[0]["local"])) or sorted(
                set(other["order"]) ^ set(infos[0]["order"]))
            raise ModelError(f"the chunks of the sharded plate {sh.plate.name!r} give different models: chunk 0 "
                             f"(rows {sh.bounds[0][0]}–{sh.bounds[0][1] - 1}) and chunk {i} (rows {sh.bounds[i][0]}–"
                             f"{sh.bounds[i][1] - 1}) differ in the latent variables {diff}; missing entries of a "
                             "variable that something else uses are latent and must then be missing in every chunk, "
                             "or give the data in memory")


def _seed(backend, sh: Sharding, names: list[tuple[str, str]], rng: np.random.Generator, model) -> list[dict]:
    """Start each mixture selector on the plate as ``compiled.categorical_init`` does in memory (k-means++ on
    the standardised gated data), the chunks computing their rows' distances and the driver drawing: the same
    random numbers in the same order, so the sharded fit starts where the in-memory one does."""
    n = sh.n_chunks
    seeds: list[dict] = [{} for _ in range(n)]

    def ask(cmd: tuple, only: int | None = None) -> list:
        out = backend.call([[cmd] if only is None or i == only else [] for i in range(n)])
        return [o[0] if o else None for o in out]

    def row(idx: int, scale: np.ndarray) -> np.ndarray:
        i = next(k for k, (a, b) in enumerate(sh.bounds) if a <= idx < b)
        return ask(("row", name, scale, idx - sh.bounds[i][0]), only=i)[i]

    for name, kind in names:
        v = model.variables[name]
        K = v.event_shape[0] if v.event_shape else 2
        if kind == "tokens":  # random topics drawn here as in memory, each chunk's rows' responsibilities from them
            lam = token_topics(rng, K, ask(("width", name), only=0)[0])
            for i, r in enumerate(ask(("tokens", name, lam))):
                seeds[i][name] = r
            continue
        if kind == "dirichlet":  # rng.dirichlet(ones(K), size=v.shape) in memory: the chunks take their rows
            for i, r in enumerate(ask(("dirichlet", name, rng.bit_generator.state))):
                seeds[i][name] = r
            size = int(np.prod(v.shape, dtype=int))
            for a in range(0, size, _DRAW_BLOCK):  # the driver's stream moves past the same draws
                rng.dirichlet(np.ones(K), size=min(_DRAW_BLOCK, size - a))
            continue
        sums = ask(("observed_sums", name))  # missing entries stand at their column's observed mean
        centre = observed_centre(sum(c for c, _ in sums), sum(t for _, t in sums))
        ask(("fill", name, centre))
        moments = ask(("moments", name))
        N = sum(m[0] for m in moments)
        mean = sum(m[1] for m in moments) / N
        std = np.sqrt(sum(ask(("centred", name, mean))) / N)
        scale = np.where(std > 0, std, 1.0)
        centres = [row(int(rng.integers(N)), scale)]
        for _ in range(1, K):
            sums = np.array(ask(("d2", name, scale, centres)))
            total = sums.sum()
            if total > 0:
                cum = np.cumsum(sums / total)
                t = rng.random() * cum[-1]
                i = min(int(np.searchsorted(cum, t, side="right")), n - 1)
                base = cum[i - 1] if i else 0.0
                j = ask(("pick", name, scale, centres, total, t - base), only=i)[i]
                idx = sh.bounds[i][0] + min(j, sh.bounds[i][1] - sh.bounds[i][0] - 1)
            else:
                idx = int(rng.integers(N))
            centres.append(row(idx, scale))
        top = max(ask(("d2max", name, scale, centres)))
        state = rng.bit_generator.state
        rng.bit_generator.advance(N * K)  # the draws of the tie-breaking noise, taken by the chunks
        for i, r in enumerate(ask(("assign", name, scale, centres, state, top))):
            seeds[i][name] = r
    return seeds


__all__ = ["ShardedEngine", "find_sharding", "run_sharded"]
