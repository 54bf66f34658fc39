"""What a fit was fitted to: a digest of its observed data, one per observed variable (``Result.data_digest``).

The evidence p(D | model) of two fits compares their models only when D is the same: a fit of y and a fit of
log y, or of half of y, have evidence figures on different scales.  ``observed_digest`` hashes, for each
observed (or partly observed) variable, where it is observed and its values there (SHA-1 over the mask, the
shape without its axes of length 1, and the float64 values; missing entries count as 0, whatever they hold;
class labels are hashed as labels, however they are stored); ``fg.compare`` refuses fits whose digests differ.
Data held as Dask arrays are not read: their digest is the array's own name, a token dask derives from its
source and its graph.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from distributions import Categorical
from factorgraph.graph import checks
from factorgraph.graph.model import Model
from factorgraph.posterior.loglik import labels, present_entries
from factors.onehot import OneHot


def observed_digest(model: Model) -> dict[str, str]:
    """Observed variable name → hex digest of its data (values where observed, and where that is)."""
    return {v.name: _digest(v) for v in model.variables.values() if v.mask is not None}


def _digest(v: Any) -> str:
    h = hashlib.sha1(usedforsecurity=False)  # an equality check, not a seal: the fastest hash hashlib has here
    if checks.is_dask(v.value) or checks.is_dask(v.mask):  # not read: dask's token names the array and its source
        for a in (v.value, v.mask):
            if checks.is_dask(a):
                h.update(str(a.name).encode())
            elif a is not None:
                h.update(_bytes(np.asarray(a)))
        return "dask:" + h.hexdigest()
    seen = present_entries(v)
    if isinstance(v.value, OneHot) or (v.family is Categorical and np.ndim(v.value) > len(v.shape)):
        y = labels(v).astype(float)  # class labels, stored one-hot or as labels
        h.update(b"labels")
    else:
        y = np.asarray(v.value, dtype=float)
    m = seen.reshape(v.shape + (1,) * (y.ndim - len(v.shape)))
    coords = getattr(v, "coord_mask", None)  # rows with some coordinates missing (fg.mv_gaussian)
    if coords is not None:
        m = m & np.asarray(coords, bool)
    m = np.broadcast_to(m, y.shape)
    h.update(repr(tuple(n for n in y.shape if n != 1)).encode())  # a plate of size 1 (K = 1) changes no data
    if m.all():
        h.update(b"all observed")
        h.update(_bytes(y + 0.0))  # + 0.0: −0.0 and 0.0 hash alike
    else:
        h.update(_bytes(m))
        h.update(_bytes(np.where(m, y, 0.0) + 0.0))
    return h.hexdigest()


def _bytes(a: np.ndarray) -> memoryview:
    return memoryview(np.ascontiguousarray(a)).cast("B")


def without_data(result: Any) -> str:
    """Why a Result holds no fitted model (``result.model`` is None), for the messages of to_arviz and compare."""
    if getattr(result, "algorithm", None) == "svi":
        return ("this fit by fg.SVI was made on streamed batches (fg.infer(data=...)), which it does not keep: it "
                "holds the global posteriors only, with no data to score")
    if getattr(result, "sharding", None) is not None:
        return "a sharded fit on dask data does not keep its model and data, which this reads whole"
    return "this Result holds none (it was not made by fg.infer)"


def different_data(digests: dict[str, dict[str, str] | None]) -> list[str]:
    """How the data of fits (name → ``observed_digest``, None when not recorded) differ: one phrase per fit that
    differs from the first fit with recorded data; empty when they are the same.  Fits whose observed variables
    carry other names but the same data (the same digests) count as fitted to the same data."""
    known = [(n, d) for n, d in digests.items() if d is not None]
    if len(known) < 2:
        return []
    ref_name, ref = known[0]
    out = []
    for name, d in known[1:]:
        if d == ref or sorted(d.values()) == sorted(ref.values()):
            continue
        changed = sorted(k for k in set(d) & set(ref) if d[k] != ref[k])
        only, lacks = sorted(set(d) - set(ref)), sorted(set(ref) - set(d))
        parts = []
        if changed:
            parts.append(f"other values or missing entries of {changed}")
        if only:
            parts.append(f"observed variables {only} that {ref_name!r} lacks")
        if lacks:
            parts.append(f"no observed {lacks}")
        out.append(f"{name!r} has " + " and ".join(parts) + f" (against {ref_name!r})")
    return out


__all__ = ["different_data", "observed_digest", "without_data"]
