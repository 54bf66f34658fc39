"""The driver of a sharded fit: start the chunks, iterate as the in-memory engine does, report (``run_sharded``).

The model's skeleton and the chunks' blocks become chunk states (``sharded_backends``: in this process, or
Dask actors on a cluster); the mixture selectors on the plate start as in memory (``sharded_seeding``); the
chunks must compile to the same schedule; then ``engine._iterate`` runs the sweeps over a ``ShardedEngine``
(``sharded_engine``), so the stopping rules, damping and NCVMP backtracking are the in-memory ones.  A local
variable's posterior stays in its chunks until ``collect_local``'s function gathers it.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Any

import numpy as np

from factorgraph.graph import checks
from factorgraph.graph.nodes import ModelError

from . import progress as _progress
from .blas import _one_thread_blas
from .engine import _iterate, _unconverged_text, start_notes
from .sharded_backends import backend_for
from .sharded_engine import ShardedEngine
from .sharded_seeding import lead_selectors, seed_selectors
from .sharding import Sharding, _Slot, skeleton


def run_sharded(model, algorithm, sh: Sharding, max_iter: int, tol, param_tol, init: dict, schedule, damping,
                callbacks: list, progress, seed, warmup: list, handlers: dict | None = None) -> dict[str, Any]:
    """Iterate a sharded model to convergence; returns the pieces of a Result (as ``engine.run``)."""
    t0 = time.perf_counter()
    local_init, init = _split_init(model, sh, init)
    blob = skeleton(model, sh)
    options = {"algorithm": algorithm, "schedule": schedule, "init": init, "damping": damping, "seed": seed,
               "local_init": local_init, "handlers": handlers, "n_rows": sh.plate.size}
    backend = backend_for(blob, sh, options)
    n = sh.n_chunks
    answers = [a[0] for a in backend.call([[("seeded",)]] * n)]  # labels observed in any chunk count for all
    names = [(name, kind, led, any(a[j][3] for a in answers)) for j, (name, kind, led, _) in enumerate(answers[0])]
    rng = np.random.default_rng(seed)
    seeds = seed_selectors(backend, sh, names, rng, model) if names else [{} for _ in range(n)]
    infos = [i[0] for i in backend.call([[("start", seeds[i]), ("info",)] for i in range(n)])]
    starts = lead_selectors(backend, sh, names, rng, model) if names else {}
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
    notes = start_notes(starts)
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
            "sharding": report, "backend": backend, "starts": starts}


def collect_local(backend, v, sh: Sharding):
    """A function that collects a local variable's posterior from its chunks (concatenated along the plate)."""
    axis = v.plates.index(sh.plate)

    def fetch():
        parts = backend.local(v.name)
        if hasattr(type(parts[0]), "concatenate"):  # a chain posterior over each chunk's sequences
            return type(parts[0]).concatenate(parts, axis)
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


__all__ = ["collect_local", "run_sharded"]
