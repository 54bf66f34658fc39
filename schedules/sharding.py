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

This module finds the sharded plate (``find_sharding``) and cuts the model into chunk models (``skeleton``,
the model pickled without its Dask data, and ``chunk_model``, rebuilt with a chunk's blocks); a chunk's state
is ``chunk_state.ChunkState``, the driver's side ``sharded_run`` and ``sharded_engine``.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from factorgraph.graph import checks
from factorgraph.graph.nodes import Indexed, ModelError, Plate

from .seeding import gathered_selectors


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


class _Slot:
    """Stands for the k-th dask array in a pickled model skeleton."""

    def __init__(self, k: int) -> None:
        self.k = k


class _Same:
    """Stands for a factor's per-row parameter that is the same in every row of the sharded plate (a chain's
    sequence lengths when all are the full length): one row travels in the skeleton, not the plate's size."""

    def __init__(self, row: np.ndarray) -> None:
        self.row = row

    def restore(self, axis: int, n: int) -> np.ndarray:
        return np.repeat(self.row, n, axis=axis)


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
    for f in model.factors:  # a per-row parameter equal in every row: one row of it
        if sh.plate not in f.plates:
            continue
        axis = f.plates.index(sh.plate)
        for key, arg in list(f.params.items()):
            if isinstance(arg, np.ndarray) and arg.ndim > axis and arg.shape[axis] == sh.plate.size > 1:
                row = np.take(arg, [0], axis=axis)
                if np.array_equal(arg, np.broadcast_to(row, arg.shape)):
                    saved.append((f.params, key, arg))
                    f.params[key] = _Same(row)
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
            for key, arg in list(f.params.items()):  # e.g. a chain's sequence lengths
                if isinstance(arg, _Same):
                    f.params[key] = arg.restore(axis, len(idx))
                elif isinstance(arg, np.ndarray) and arg.ndim > axis and arg.shape[axis] == n0 > 1:
                    f.params[key] = _take(arg, axis, idx)
    return model


def _take(a: np.ndarray, axis: int, idx: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim <= axis or a.shape[axis] == 1:
        return a
    return np.take(a, idx, axis=axis)


def is_local(node_or_factor, plate_index: int) -> bool:
    plates = node_or_factor.plates
    return any((p.index if isinstance(p, Plate) else p) == plate_index for p in plates)
