"""Stochastic variational inference (Hoffman, Blei, Wang & Paisley 2013): natural-gradient steps on the global
conjugate-exponential variables from minibatches of one plate.

Step t draws a minibatch B of the plate's rows (without replacement), builds the minibatch's model with the
machinery of a sharded plate (``schedules.sharding``: the user's model cut to those rows, compiled and run by
the in-memory engine), and with the globals held at their current q updates the minibatch's local variables to
convergence.  Each global's natural parameters then take a step toward the estimate

    η̂ = η_off + (N / |B|) · Σ_{n ∈ B} η_n,

(η_off: the messages of the factors off the plate, its prior; η_n: row n's message), η ← (1 − ρ_t) η + ρ_t η̂,
with the Robbins–Monro step ρ_t = (t + τ)^(−κ), κ ∈ (0.5, 1] (or a constant ρ).  For a conjugate-exponential
global that step is the natural gradient of the ELBO scaled by ρ_t.  The ELBO of each step is estimated the
same way (off-plate terms plus N/|B| times the minibatch's terms): ``Result.elbo_trace`` holds those estimates,
``Result.notes`` their running mean, labelled as estimates; ``Result.elbo`` is the exact ELBO of the final q
over all rows when ``final_elbo`` (one pass, local variables updated with the globals held).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from factorgraph import checks
from factorgraph.nodes import ModelError

from .engine import InferenceError, _summary


@dataclass(frozen=True)
class SVI:
    """Stochastic VI over minibatches of one plate (``fg.infer(model, fg.SVI(batch_size=100))``).

    Parameters
    ----------
    batch_size
        Rows per minibatch.
    learning_rate
        ``(tau, kappa)``: the Robbins–Monro schedule ρ_t = (t + τ)^(−κ), κ ∈ (0.5, 1], t = 1, 2, ...; or a
        number in (0, 1]: a constant step (which does not converge, but tracks a drifting stream).
    plate
        The plate of the minibatches (by name); default: the plate of dask data, else the first plate of the
        first observed variable.
    local_iter, local_tol
        At most ``local_iter`` sweeps over a minibatch's local variables, stopping when no natural parameter
        moved by more than ``local_tol`` (relative).
    final_elbo
        Evaluate the exact ELBO of the final q over all rows (one pass in minibatches).
    stream, rows
        A streaming source: an iterable of models, each the model given to ``fg.infer`` built on a new batch
        of rows (the same variable names; the plate of size ``batch_size``), one per step, the rows scaled as
        a population of ``rows`` (default: the size of the plate in the model given to ``fg.infer``).  With a
        constant ``learning_rate`` the globals track a drifting source.  No final ELBO is computed (the rows
        are gone); ``Result.elbo`` is the running mean of the last estimates.
    """

    batch_size: int = 100
    learning_rate: Any = (1.0, 0.7)
    plate: str | None = None
    local_iter: int = 50
    local_tol: float = 1e-8
    final_elbo: bool = True
    stream: Any = None
    rows: int | None = None
    name = "svi"
    monotone = False
    damping = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "batch_size", checks.integer(self.batch_size, "SVI: batch_size", low=1))
        lr = self.learning_rate
        if isinstance(lr, tuple | list) and len(lr) == 2:
            tau = checks.number(lr[0], "SVI: learning_rate tau (≥ 0)", low=0.0)
            kappa = checks.number(lr[1], "SVI: learning_rate kappa (in (0.5, 1])", low=0.5, high=1.0,
                                  low_open=True)
            object.__setattr__(self, "learning_rate", (tau, kappa))
        else:
            object.__setattr__(self, "learning_rate", checks.number(
                lr, "SVI: learning_rate (a step in (0, 1], or (tau, kappa))", low=0.0, high=1.0, low_open=True))

    def rho(self, t: int) -> float:
        if isinstance(self.learning_rate, tuple):
            tau, kappa = self.learning_rate
            return float((t + tau) ** (-kappa))
        return float(self.learning_rate)


def _plate(model, svi: SVI, sh) -> Any:
    if svi.plate is not None:
        if svi.plate not in model.plates:
            raise ModelError(f"SVI: model {model.name!r} has no plate {svi.plate!r}; plates are {list(model.plates)}")
        return model.plates[svi.plate]
    if sh is not None:
        return sh.plate
    for v in model.variables.values():
        if v.value is not None and v.plates:
            return v.plates[0]
    raise ModelError(f"SVI: model {model.name!r} has no observed plated data to draw minibatches from")


def run_svi(model, svi: SVI, max_iter: int, init: dict, seed: int | None, callbacks: list) -> dict[str, Any]:
    """``max_iter`` SVI steps; returns the pieces of a Result."""
    from .sharding import ChunkState, Sharding, find_sharding, skeleton

    t0 = time.perf_counter()
    sh = find_sharding(model)
    plate = _plate(model, svi, sh)
    if sh is None:
        sh = Sharding(plate, [(0, plate.size)], [])
    elif sh.plate is not plate:
        raise ModelError(f"SVI: the dask data are chunked along {sh.plate.name!r}, not {plate.name!r}")
    N, B = plate.size, min(svi.batch_size, plate.size)
    if svi.stream is not None:
        N = svi.rows if svi.rows is not None else N
        stream = iter(svi.stream)
    blob = skeleton(model, sh)
    rng = np.random.default_rng(seed)
    from .algorithms import VMP

    options = {"algorithm": VMP(), "schedule": None, "init": {}, "damping": None, "seed": seed, "local_init": {}}
    q: dict[str, Any] = {}
    trace: list[float] = []
    order = None
    perm, pos = rng.permutation(N), 0
    it = 0
    for it in range(1, max_iter + 1):
        if pos + B > N:
            perm, pos = rng.permutation(N), 0
        if svi.stream is not None:
            state = _streamed(ChunkState, stream, plate.name, {**options, "init": dict(q)}, it)
            if state is None:
                it -= 1
                break
            B = state.c.model.plates[plate.name].size
        else:
            rows = np.sort(perm[pos:pos + B])
            pos += B
            state = _batch(ChunkState, blob, sh, rows, {**options, "init": dict(q)})
        if order is None:
            info = state.info()
            order = [model.variables[n] for n in info["order"] if not info["local"][n]]
            q = dict(info["q"])
            q.update({k: v for k, v in (init or {}).items() if k in q})
        if it > 1:  # the first step takes its locals' start (a mixture's k-means++ seeding): it breaks the symmetry
            _fit_locals(state, svi)
        rho = svi.rho(it)
        for v in order:
            local, glob = state._messages(state.c.model.variables[v.name], True)
            zero = v.family._zero_natural(v.shape, v.event_shape)
            hat = [z + g + (N / B) * a for z, g, a in zip(zero, glob, local, strict=True)]
            nat = tuple((1.0 - rho) * np.broadcast_to(e, h.shape) + rho * h
                        for e, h in zip(q[v.name].natural, hat, strict=True))
            new = v.family.from_natural(*nat)
            if not np.all(np.asarray(new.is_proper())):
                raise InferenceError(f"SVI step {it}: the update of {v.name!r} gave an improper posterior (natural "
                                     f"parameters {_summary(nat)}); lower the learning rate")
            q[v.name] = new
            state.eng.set_posterior(state.c.model.variables[v.name], new)
        ef, h, efg, hg = state._elbo(True)
        trace.append((N / B) * (ef + h) + efg + hg)
        if any(cb(it, trace[-1], state.eng) for cb in callbacks):
            break
    elbo, kind = float(np.mean(trace[-max(1, len(trace) // 10):])), "estimate"
    notes = [f"SVI: {it} steps of minibatches of {B} of the {N} rows of plate {plate.name!r}, learning rate "
             f"{svi.learning_rate!r}; elbo_trace holds per-step ELBO estimates (N/|B|-scaled minibatch terms)"]
    if svi.final_elbo and svi.stream is None:
        notes.append(f"the running mean of the last {max(1, len(trace) // 10)} estimates is {elbo:.10g}")
        elbo, kind = _full_elbo(ChunkState, blob, sh, options, q, svi), "lower bound"
        notes.append("Result.elbo: the exact ELBO of the final q over all rows (local variables fitted with the "
                     "globals held)")
    return {"q": q, "elbo": elbo, "kind": kind, "trace": np.array(trace), "n_iter": it, "notes": notes,
            "time": time.perf_counter() - t0}


def _batch(cls, blob: bytes, sh, rows: np.ndarray, options: dict):
    blocks = [np.asarray(arr[tuple(rows if k == slot[2] else slice(None) for k in range(arr.ndim))])
              for arr, slot in zip(sh.arrays, sh.slots, strict=True)]
    state = cls(blob, sh.plate.name, 0, len(rows), {**options, "rows": rows}, *blocks)
    state.start({})
    return state


def _streamed(cls, stream, plate: str, options: dict, it: int):
    """The next model of a stream as a minibatch state (None when the stream is exhausted)."""
    import cloudpickle

    try:
        m = next(stream)
    except StopIteration:
        return None
    if plate not in getattr(m, "plates", {}):
        raise ModelError(f"SVI: item {it} of the stream is not a model with the plate {plate!r}: {m!r}")
    state = cls(cloudpickle.dumps(m), plate, 0, m.plates[plate].size, options)
    state.start({})
    return state


def _fit_locals(state, svi: SVI) -> None:
    eng = state.eng
    local = [v for v in state.c.order if state.local_of(v)]
    for _ in range(svi.local_iter):
        eng.max_change = 0.0
        for v in local:
            eng.update(v)
        if eng.max_change <= svi.local_tol:
            break


def _full_elbo(cls, blob: bytes, sh, options: dict, q: dict, svi: SVI) -> float:
    """The exact ELBO at the globals ``q`` over all rows, one minibatch-sized slice at a time."""
    N, B = sh.plate.size, svi.batch_size
    total, glob = 0.0, None
    for a in range(0, N, B):
        state = _batch(cls, blob, sh, np.arange(a, min(N, a + B)), {**options, "init": dict(q)})
        _fit_locals(state, svi)
        ef, h, efg, hg = state._elbo(True)
        total += ef + h
        glob = efg + hg
    return float(total + glob)
