"""Where the chunk states of a sharded fit live: in this process, or one Dask actor per chunk on a cluster.

Two backends hold the ``ChunkState``s (``chunk_state``): ``ThreadBackend`` (Dask's default, threaded
scheduler: the chunks' blocks are computed by ``dask.compute`` and their states kept in this process, run on
a thread pool) and ``ActorBackend`` (an active ``dask.distributed.Client``: one Dask actor per chunk, created on a
worker from the chunk's blocks, which the scheduler computes there; nothing but the small command batches and
their answers crosses to the client).  A chunk whose worker is lost is rebuilt from its data (recomputed by
Dask from their graph) and the commands it had received are replayed: the computation is deterministic, so
the fit goes on as if nothing had happened.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor

from factorgraph.graph.nodes import ModelError

from .chunk_state import ChunkState
from .errors import InferenceError
from .sharding import Sharding


def active_client():
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


class ThreadBackend:
    """Chunk states in this process (Dask's local scheduler computes their blocks)."""

    name = "threads"

    def __init__(self, blob: bytes, sh: Sharding, options: dict) -> None:
        import dask

        workers = max(1, min(sh.n_chunks, os.cpu_count() or 1))
        self.pool = ThreadPoolExecutor(max_workers=workers)
        options = {**options, "threads": max(1, (os.cpu_count() or 1) // workers)}  # each chunk's share of the cores

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


class ActorBackend:
    """One Dask actor per chunk on the cluster of the active client."""

    name = "distributed"

    def __init__(self, client, blob: bytes, sh: Sharding, options: dict) -> None:
        # each chunk's kernels get the threads of the smallest worker (Dask runs one task per worker thread)
        options = {**options, "threads": min(client.nthreads().values(), default=1)}
        self.client, self.blob, self.sh, self.options = client, blob, sh, options
        self.actors = [self._make(i) for i in range(sh.n_chunks)]
        self.log: list[list[list]] = [[] for _ in range(sh.n_chunks)]
        self.retries = 0
        self.workers = self._count_workers()

    def _count_workers(self, tries: int = 20) -> int:
        """The cluster's workers as the scheduler lists them.  The list was once seen empty just after the actors
        were placed (a transient in the scheduler's view, seen once in a CI run): ask again briefly, then fall
        back to the workers that hold the actors."""
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


def backend_for(blob: bytes, sh: Sharding, options: dict) -> ThreadBackend | ActorBackend:
    """The chunk states of a fit, built from the model's skeleton ``blob`` and the chunks' blocks: actors on the
    cluster of the active ``dask.distributed.Client``, or states in this process when there is none."""
    client = active_client()
    return ActorBackend(client, blob, sh, options) if client is not None else ThreadBackend(blob, sh, options)
